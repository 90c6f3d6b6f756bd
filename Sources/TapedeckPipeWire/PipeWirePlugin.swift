#if PipeWire
import CPipeWireStream
public import TapedeckCore

/// The PipeWire backend's plugin descriptors (`capture.backend: pipewire`, `playback.backend: pipewire`).
public enum PipeWirePlugin {
    /// The linked libpipewire, e.g. `libpipewire 0.3.65`. - Thread: any; never blocks.
    public static var library: String { "libpipewire " + String(cString: tapedeck_pw_library_version()) }

    /// `capture.backend: pipewire`. - Thread: `make` runs on any thread and never blocks.
    public static let capture = CapturePlugin.ring(PipeWireBackend.self, name: "pipewire",
        summary: "Capture from a PipeWire node (a source, or what a sink plays), natively: any rate and layout, converted by PipeWire.")

    /// `playback.backend: pipewire`. - Thread: `make` runs on any thread and never blocks.
    public static let playback = PlaybackPlugin.ring(PipeWireBackend.self, name: "pipewire",
        summary: "Play to a PipeWire sink natively: any rate and layout, converted by PipeWire.")
}
#endif
