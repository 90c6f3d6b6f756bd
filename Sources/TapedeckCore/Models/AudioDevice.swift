/// A device or endpoint a backend can capture from or play to.
public struct AudioDevice: Sendable, Hashable, Codable {
    /// The name to put in the config, e.g. `hw:CARD=USB,DEV=0` or `default`.
    public var name: String
    /// A human description.
    public var description: String
    /// Whether it can capture.
    public var canCapture: Bool
    /// Whether it can play.
    public var canPlay: Bool
    /// Whether the backend considers it the default.
    public var isDefault: Bool
    /// Backend-specific facts worth showing, e.g. `sampleSpec: s16le 2ch 48000Hz`.
    public var details: [String: String]
    /// A processing stage in front of other devices (an ALSA rate converter, upmixer or
    /// resampling plugin), not an endpoint: `tapedeck devices` lists it only with `--all`, and
    /// `config init` never proposes it.
    public var isProcessingStage = false

    public init(name: String, description: String, canCapture: Bool, canPlay: Bool, isDefault: Bool,
                details: [String: String] = [:]) {
        self.name = name
        self.description = description
        self.canCapture = canCapture
        self.canPlay = canPlay
        self.isDefault = isDefault
        self.details = details
    }
}
