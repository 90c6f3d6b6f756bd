import CSndfile
import TapedeckCore

/// Small helpers around libsndfile's C API.
enum Sndfile {
    /// libsndfile's sub-format for a Tapedeck sample format.
    static func subtype(for format: SampleFormat) -> Int32 {
        switch format {
        case .s16: Int32(SF_FORMAT_PCM_16)
        case .s24: Int32(SF_FORMAT_PCM_24)
        case .s32: Int32(SF_FORMAT_PCM_32)
        case .f32: Int32(SF_FORMAT_FLOAT)
        }
    }

    /// The Tapedeck sample format frames of a file with libsndfile format `format` are delivered in:
    /// the file's own width where Tapedeck has it, else s16 for narrower or lossy integer codecs and
    /// f32 for float, double and perceptual codecs.
    static func sampleFormat(forFileFormat format: Int32) -> SampleFormat {
        switch Int(format) & SF_FORMAT_SUBMASK {
        case SF_FORMAT_PCM_24, SF_FORMAT_DWVW_24, SF_FORMAT_ALAC_20, SF_FORMAT_ALAC_24:
            .s24
        case SF_FORMAT_PCM_32, SF_FORMAT_ALAC_32:
            .s32
        case SF_FORMAT_PCM_16, SF_FORMAT_PCM_S8, SF_FORMAT_PCM_U8, SF_FORMAT_ULAW, SF_FORMAT_ALAW,
             SF_FORMAT_IMA_ADPCM, SF_FORMAT_MS_ADPCM, SF_FORMAT_GSM610, SF_FORMAT_VOX_ADPCM,
             SF_FORMAT_NMS_ADPCM_16, SF_FORMAT_NMS_ADPCM_24, SF_FORMAT_NMS_ADPCM_32,
             SF_FORMAT_G721_32, SF_FORMAT_G723_24, SF_FORMAT_G723_40,
             SF_FORMAT_DWVW_12, SF_FORMAT_DWVW_16, SF_FORMAT_DWVW_N, SF_FORMAT_DPCM_8, SF_FORMAT_DPCM_16,
             SF_FORMAT_ALAC_16:
            .s16
        default:
            .f32
        }
    }

    /// libsndfile's description of the last error on `handle` (or of the last failed open, for nil).
    static func errorString(_ handle: OpaquePointer?) -> String {
        guard let text = sf_strerror(handle) else { return "unknown libsndfile error" }
        return clause(String(cString: text))
    }

    /// libsndfile's text as a clause for Tapedeck's sentences: without its own closing period
    /// ("No 'data' chunk marker." would end up "marker.. The file …").
    static func clause(_ text: String) -> String {
        var text = Substring(text)
        while let last = text.last, last == "." || last.isWhitespace { text = text.dropLast() }
        return String(text)
    }

    /// libsndfile's description of error number `code`.
    static func errorString(code: Int32) -> String {
        guard let text = sf_error_number(code) else { return "libsndfile error \(code)" }
        return clause(String(cString: text))
    }
}
