public import Foundation
import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

/// The user's folders as the XDG Base Directory specification defines them, from the
/// environment the command runs in: `$HOME` (the password database only when it is unset),
/// `$XDG_CONFIG_HOME` and `$XDG_DATA_HOME` (ignored, as the specification says, when empty or
/// not absolute). A plain value; any thread, never blocks. Folders under them are made with
/// `FileModes.makePrivateFolder(_:)` (0700, as the specification asks).
public struct UserPaths: Sendable, Hashable {
    public let home: String
    public let configHome: String
    public let dataHome: String
    /// `$XDG_CACHE_HOME`, or `~/.cache`: files Tapedeck can make again (waveform overviews).
    public let cacheHome: String
    /// `$XDG_RUNTIME_DIR/tapedeck`, or `/tmp/tapedeck-UID` without it: where running recorders
    /// say where they are (`tapedeck mark` finds them there).
    public let runtimeFolder: String
    /// `$XDG_STATE_HOME`, or `~/.local/state`: what Tapedeck keeps between runs that is neither
    /// settings nor recordings (the alerts' outbox).
    public let stateHome: String

    public init(environment: [String: String]) {
        home = Self.absolute(environment["HOME"]) ?? NSHomeDirectory()
        configHome = Self.absolute(environment["XDG_CONFIG_HOME"]) ?? home + "/.config"
        dataHome = Self.absolute(environment["XDG_DATA_HOME"]) ?? home + "/.local/share"
        cacheHome = Self.absolute(environment["XDG_CACHE_HOME"]) ?? home + "/.cache"
        stateHome = Self.absolute(environment["XDG_STATE_HOME"]) ?? home + "/.local/state"
        runtimeFolder = Self.absolute(environment["XDG_RUNTIME_DIR"]).map { $0 + "/tapedeck" } ?? "/tmp/tapedeck-\(getuid())"
    }

    /// The library when the storage settings name none: `$XDG_DATA_HOME/tapedeck`.
    public var defaultLibrary: URL { URL(fileURLWithPath: dataHome).appendingPathComponent("tapedeck") }

    /// Where takes' waveform overviews are kept: `$XDG_CACHE_HOME/tapedeck/waveforms`.
    public var waveformFolder: URL { URL(fileURLWithPath: cacheHome).appendingPathComponent("tapedeck/waveforms") }

    /// Where manifests read from remotes are kept by their ETag (`fleet list` reads only what
    /// changed): `$XDG_CACHE_HOME/tapedeck/manifests`.
    public var manifestCacheFolder: URL { URL(fileURLWithPath: cacheHome).appendingPathComponent("tapedeck/manifests") }

    /// Where time-stamp requests wait to be sent: `$XDG_STATE_HOME/tapedeck/timestamps`.
    public var timeStampQueueFolder: URL { URL(fileURLWithPath: stateHome).appendingPathComponent("tapedeck/timestamps") }
    /// Where alerts wait to be sent: `$XDG_STATE_HOME/tapedeck/alerts`.
    public var alertsFolder: URL { URL(fileURLWithPath: stateHome).appendingPathComponent("tapedeck/alerts") }

    /// The default token file of `tapedeck serve`: `$XDG_CONFIG_HOME/tapedeck/serve-token`.
    public var serveTokenFile: URL { URL(fileURLWithPath: configHome).appendingPathComponent("tapedeck/serve-token") }

    /// The default signing key of `provenance.sign`: `$XDG_CONFIG_HOME/tapedeck/signing-key`.
    public var signingKeyFile: URL { URL(fileURLWithPath: configHome).appendingPathComponent("tapedeck/signing-key") }

    /// `~` and `~/…` from ``home``; anything else as it is.
    public func expandingTilde(_ path: String) -> String {
        if path == "~" { return home }
        if path.hasPrefix("~/") { return home + path.dropFirst() }
        return path
    }

    private static func absolute(_ value: String?) -> String? {
        guard let value, value.hasPrefix("/") else { return nil }
        return value
    }
}
