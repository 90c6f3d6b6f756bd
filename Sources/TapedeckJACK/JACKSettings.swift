#if JACK
import CJACK
public import TapedeckCore

/// The JACK backend for one role (`capture.backend: jack` or `playback.backend: jack`): its
/// settings, declared once for both sections (`capture.jack.*`, `playback.jack.*`) and read, and
/// what is JACK's own (the server, ports, opening a client); the ring stream does the rest.
/// `JACKBackend.capture` and `.playback` are its plugin descriptors. A value holding settings
/// only; safe on any thread.
public struct JACKBackend: RingBackend {
    public static let name = "jack"
    public static let summaries = (capture: "Capture from a JACK server (jackd, or PipeWire's JACK server): any output ports, one per channel.",
                                   playback: "Play to a JACK server's input ports, one per channel.")
    /// The linked libjack, e.g. `libjack 1.9.21`. - Thread: any; never blocks.
    public static var library: String { "libjack " + String(cString: jack_get_version_string()) }

    static let server = Setting<String>("server",
        help: "The JACK server's name: empty for the default ($JACK_DEFAULT_SERVER, else `default`), or the name `jackd -n NAME` was started with.")
    static let clientName = Setting<String>("client-name", default: "tapedeck",
        help: "The client name other JACK programs show (JACK appends -01, -02… while it is taken).")
    public static let settings = [server.declaration, clientName.declaration]

    public static let deviceHelp = (
        capture: "The ports to record from, one per channel in order: empty for the physical capture ports (system:capture_1…); a client's name (`system`); port names separated by commas; or a regular expression, as `jack_capture --port` takes them (`system:capture_[12]`). One port feeds every channel. `none` connects nothing: connect the ports (tapedeck:in_1…) with qjackctl, jack_connect or pw-link.",
        playback: "The ports to play to, one per channel in order: empty for the physical playback ports (system:playback_1…); a client's name; port names separated by commas; or a regular expression. One port takes every channel. `none` connects nothing (tapedeck:out_1… wait for a connection).")

    public let section: DeviceSection
    var role: DeviceRole { section.role }
    let server: String
    let clientName: String
    /// The server as a message names it.
    var serverLabel: String { server.isEmpty ? "the default JACK server" : "the JACK server \"\(server)\"" }

    /// - Thread: any. Never blocks.
    public init(_ section: DeviceSection) {
        self.section = section
        server = section[Self.server]
        clientName = section[Self.clientName]
    }

    /// The server's clients with audio ports of this role, physical ones first and default.
    /// - Thread: any that may block. Blocks for a few round trips to the server.
    /// - Throws: `.deviceUnavailable` naming the server when none runs.
    public func devices() throws -> [AudioDevice] {
        try JACKDeviceList.list(settings: self)
    }

    /// Opens a JACK client with one port per channel, connected as `device` says, in the server's
    /// rate (any other is refused: JACK does not convert rates).
    /// - Thread: the device thread. Blocks for a few round trips to the server.
    /// - Throws: `.deviceUnavailable` (no server, no such port) or `.unsupportedFormat`.
    public func open(format: AudioFormat, ring: DeviceRing) throws -> JACKClient {
        try JACKClient(settings: self, format: format, ring: ring)
    }
}
#endif
