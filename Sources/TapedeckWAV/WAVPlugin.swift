public import TapedeckCore

/// The WAV backend's plugin descriptors.
public enum WAVPlugin {
    /// `encoder: wav`: WAV through libsndfile; RF64 past 4 GiB; crash-repairable.
    /// - Thread: `make` runs on any thread and does not block.
    public static let encoder = EncoderPlugin(
        name: "wav",
        summary: "WAV files (16/24/32-bit PCM or 32-bit float), RF64 past 4 GiB, repairable after a crash.",
        make: { _ in WAVEncoder() })

    /// `decoder: wav`: reads WAV (and anything libsndfile reads) bit-exactly.
    /// - Thread: `make` runs on any thread and does not block.
    public static let decoder = DecoderPlugin(
        name: "wav",
        summary: "Reads WAV and RF64 files (and other formats libsndfile knows) bit-exactly.",
        make: { _ in WAVDecoder() })
}
