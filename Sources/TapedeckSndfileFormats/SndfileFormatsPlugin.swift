import CSndfile
public import TapedeckCore

/// The MP3 encoder's settings (`encoder.mp3.*`). A plain value; any thread.
public struct MP3Settings: SettingsGroup, Hashable {
    public static let bitrate = Setting<Int>("bitrate", range: 32_000...320_000, default: 128_000,
        help: "Constant bit rate in bits per second, as lame -b (rounded down to an MP3 rate: 32k … 128k, 160k, 192k, 224k, 256k, 320k).")
    public static let declarations = [bitrate.declaration]
    public var bitrate: Int
    public init(bitrate: Int = Self.bitrate.defaultValue) { self.bitrate = bitrate }
    public init(_ settings: PluginSettings) { self.init(bitrate: settings[Self.bitrate]) }
}

/// The Ogg Vorbis encoder's settings (`encoder.vorbis.*`). A plain value; any thread.
public struct VorbisSettings: SettingsGroup, Hashable {
    public static let quality = Setting<Int>("quality", range: 0...10, default: 3,
        help: "Quality, as oggenc -q: 0 smallest, 10 best (3 is about 112 kbit/s for stereo).")
    public static let declarations = [quality.declaration]
    public var quality: Int
    public init(quality: Int = Self.quality.defaultValue) { self.quality = quality }
    public init(_ settings: PluginSettings) { self.init(quality: settings[Self.quality]) }
}

/// The MP3, Ogg Vorbis and AIFF backends' plugin descriptors: encoders for exports (and for
/// takes, where a library wants them) over libsndfile, which links LAME, mpg123, libvorbis and
/// writes AIFF itself; and decoders for the files they write.
public enum SndfileFormatsPlugin {
    /// The linked libsndfile, e.g. `libsndfile-1.2.0`. - Thread: any; never blocks.
    public static var library: String { String(cString: sf_version_string()) }

    /// `encoder: mp3`: MPEG-1/2 Layer III through LAME, constant bit rate, ID3v2 tags.
    public static let mp3 = EncoderPlugin(
        name: "mp3",
        summary: "MP3 files (lossy, through LAME in libsndfile; constant bit rate; ID3v2 tags: title, album, track, date, comment).",
        settings: MP3Settings.self,
        make: { settings, _ in SndfileFormatEncoder(.mp3, level: SndfileContainer.mp3Level(bitrate: settings.bitrate)) })

    /// `encoder: vorbis`: Ogg Vorbis, quality-based variable bit rate, Vorbis comments.
    public static let vorbis = EncoderPlugin(
        name: "vorbis",
        summary: "Ogg Vorbis files (lossy, through libvorbis in libsndfile; oggenc's quality scale; Vorbis comments).",
        settings: VorbisSettings.self,
        make: { settings, _ in SndfileFormatEncoder(.vorbis, level: SndfileContainer.vorbisLevel(quality: settings.quality)) })

    /// `encoder: aiff`: AIFF (AIFF-C for float), lossless, with NAME and ANNO chunks.
    public static let aiff = EncoderPlugin(
        name: "aiff",
        summary: "AIFF files (lossless PCM, big-endian; 32-bit float as AIFF-C), with the take's name and notes.",
        make: { _ in SndfileFormatEncoder(.aiff) })

    /// Decoders for the three, reading through libsndfile: MP3 and Vorbis as 32-bit float, AIFF
    /// in its own sample format.
    public static let decoders: [DecoderPlugin] = SndfileContainer.allCases.map { container in
        DecoderPlugin(name: container.rawValue, summary: "Reads \(container.title) files through libsndfile.",
                      make: { _ in SndfileFormatEncoder(container) })
    }
}
