public import TapedeckCore
import TapedeckALSA
import TapedeckNull
import TapedeckWAV
import TapedeckFLAC
import TapedeckDirectoryStorage
import TapedeckBundleStorage
import TapedeckPulseAudio

/// The plugins a build of Tapedeck can assemble, by role. A plain value: tests pass their own.
public struct PluginCatalog: Sendable {
    public var capture: [CapturePlugin]
    public var playback: [PlaybackPlugin]
    public var encoders: [EncoderPlugin]
    public var decoders: [DecoderPlugin]
    public var storage: [StoragePlugin]

    public init(capture: [CapturePlugin], playback: [PlaybackPlugin], encoders: [EncoderPlugin],
                decoders: [DecoderPlugin], storage: [StoragePlugin]) {
        self.capture = capture
        self.playback = playback
        self.encoders = encoders
        self.decoders = decoders
        self.storage = storage
    }

    /// Every plugin compiled into this build.
    public static let builtIn = PluginCatalog(
        capture: [NullPlugin.capture, ALSAPlugin.capture, PulsePlugin.capture],
        playback: [NullPlugin.playback, ALSAPlugin.playback, PulsePlugin.playback],
        encoders: [WAVPlugin.encoder, FLACPlugin.encoder],
        decoders: [WAVPlugin.decoder, FLACPlugin.decoder],
        storage: [DirectoryStoragePlugin.storage, BundleStoragePlugin.storage])

    /// Name, summary and settings of every plugin in a role, for listings and validation.
    /// - Thread: any. Never blocks.
    public func entries(for role: PluginRole) -> [PluginEntry] {
        switch role {
        case .capture: capture.map { PluginEntry(role: role, name: $0.name, summary: $0.summary, settings: $0.settings) }
        case .playback: playback.map { PluginEntry(role: role, name: $0.name, summary: $0.summary, settings: $0.settings) }
        case .encoder: encoders.map { PluginEntry(role: role, name: $0.name, summary: $0.summary, settings: $0.settings) }
        case .decoder: decoders.map { PluginEntry(role: role, name: $0.name, summary: $0.summary, settings: $0.settings) }
        case .storage: storage.map { PluginEntry(role: role, name: $0.name, summary: $0.summary, settings: $0.settings) }
        }
    }
}

/// One plugin as `tapedeck backends` shows it.
public struct PluginEntry: Sendable, Hashable {
    public var role: PluginRole
    public var name: String
    public var summary: String
    public var settings: [SettingDeclaration]
}
