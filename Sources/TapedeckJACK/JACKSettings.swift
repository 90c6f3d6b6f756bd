#if JACK
public import Logging
public import TapedeckCore

/// The JACK backend for one role (`capture.backend: jack` or `playback.backend: jack`): its
/// settings, declared once for both sections (`capture.jack.*`, `playback.jack.*`), and what
/// is JACK's own (the server, ports, opening a client); the ring stream does the rest. A value
/// holding settings only; safe on any thread.
public struct JACKBackend: RingBackend {
    public let name = "jack"
    public let role: DeviceRole
    public let logger: Logger
    let settings: JACKSettings

    static let server = Setting<String>("server",
        help: "The JACK server's name: empty for the default ($JACK_DEFAULT_SERVER, else `default`), or the name `jackd -n NAME` was started with.")
    static let clientName = Setting<String>("client-name", default: "tapedeck",
        help: "The client name other JACK programs show (JACK appends -01, -02… while it is taken).")

    static func device(_ role: DeviceRole) -> Setting<String> {
        role == .capture
            ? Setting("device", help: "The ports to record from, one per channel in order: empty for the physical capture ports (system:capture_1…); a client's name (`system`); port names separated by commas; or a regular expression, as `jack_capture --port` takes them (`system:capture_[12]`). One port feeds every channel. `none` connects nothing: connect the ports (tapedeck:in_1…) with qjackctl, jack_connect or pw-link.")
            : Setting("device", help: "The ports to play to, one per channel in order: empty for the physical playback ports (system:playback_1…); a client's name; port names separated by commas; or a regular expression. One port takes every channel. `none` connects nothing (tapedeck:out_1… wait for a connection).")
    }

    /// - Thread: any. Never blocks.
    public static func declarations(_ role: DeviceRole) -> [SettingDeclaration] {
        [server.declaration, clientName.declaration, device(role).declaration]
    }

    /// - Thread: any. Never blocks.
    public init(_ values: PluginSettings, role: DeviceRole, context: PluginContext) {
        self.role = role
        logger = context.logger
        settings = JACKSettings(role: role, server: values[Self.server], clientName: values[Self.clientName], device: values[Self.device(role)],
                                deviceKey: context.key(Self.device(role)), serverKey: context.key(Self.server),
                                clientNameKey: context.key(Self.clientName))
    }

    /// The server's clients with audio ports of this role, physical ones first and default.
    /// - Thread: any that may block. Blocks for a few round trips to the server.
    /// - Throws: `.deviceUnavailable` naming the server when none runs.
    public func devices() throws -> [AudioDevice] {
        try JACKDeviceList.list(settings: settings)
    }

    /// Opens a JACK client with one port per channel, connected as `device` says, in the server's
    /// rate (any other is refused: JACK does not convert rates).
    /// - Thread: the device thread. Blocks for a few round trips to the server.
    /// - Throws: `.deviceUnavailable` (no server, no such port) or `.unsupportedFormat`.
    public func open(format: AudioFormat, ring: DeviceRing) throws -> JACKClient {
        try JACKClient(settings: settings, format: format, ring: ring)
    }
}

/// One role's settings, read, with the keys a message names (`capture.jack.device` or, from a
/// flag, `-D/--device`). A plain value; safe on any thread.
struct JACKSettings: Sendable, Hashable {
    var role: DeviceRole
    var server: String
    var clientName: String
    var device: String
    var deviceKey = "device"
    var serverKey = "server"
    var clientNameKey = "client-name"

    /// The server as a message names it.
    var serverLabel: String { server.isEmpty ? "the default JACK server" : "the JACK server \"\(server)\"" }
}
#endif
