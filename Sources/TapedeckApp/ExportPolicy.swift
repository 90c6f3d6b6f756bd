public import TapedeckCore

/// The export rules `tapedeck export` and `tapedeck serve` share. Pure functions of their
/// arguments; any thread. Never block.
public enum ExportPolicy {
    /// The sample format to convert `takes` to when exporting them with `encoder` and no
    /// conversion was asked for: 24-bit integers (`s24`, dithered, the documented default) when
    /// one of them is float and the encoder's format holds integers only, so such an export is
    /// never refused for want of a flag; `nil` (every take as it is) otherwise.
    public static func sampleFormat(for takes: [Take], encoder: any AudioEncoder) -> SampleFormat? {
        guard takes.contains(where: { $0.format.sampleFormat.isFloat }) else { return nil }
        let holdsFloat = (try? encoder.validate(AudioFormat(sampleRate: 48000, channels: 2, sampleFormat: .f32))) != nil
        return holdsFloat ? nil : .s24
    }
}
