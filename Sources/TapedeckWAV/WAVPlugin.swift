import CSndfile
public import TapedeckCore

/// The WAV backend's plugin descriptors.
public enum WAVPlugin {
    /// The linked libsndfile, e.g. `libsndfile 1.2.2`. - Thread: any; never blocks.
    public static var library: String {
        String(cString: sf_version_string()).replacingOccurrences(of: "libsndfile-", with: "libsndfile ")
    }

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
