#if JACK
import CJACK
public import TapedeckCore

/// The JACK backend's plugin descriptors (`capture.backend: jack`, `playback.backend: jack`).
public enum JACKPlugin {
    /// The linked libjack, e.g. `libjack 1.9.21`. - Thread: any; never blocks.
    public static var library: String { "libjack " + String(cString: jack_get_version_string()) }

    /// `capture.backend: jack`. - Thread: `make` runs on any thread and never blocks.
    public static let capture = CapturePlugin.ring(JACKBackend.self, name: "jack",
        summary: "Capture from a JACK server (jackd, or PipeWire's JACK server): any output ports, one per channel.")

    /// `playback.backend: jack`. - Thread: `make` runs on any thread and never blocks.
    public static let playback = PlaybackPlugin.ring(JACKBackend.self, name: "jack",
        summary: "Play to a JACK server's input ports, one per channel.")
}
#endif
