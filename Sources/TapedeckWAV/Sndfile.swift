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

    /// The name of a file's own sample encoding when it differs from the `delivered` one (`u8`,
    /// `s8`, `A-law`, `µ-law`, `f64`, `ADPCM`, …); `nil` when they are the same.
    static func encodingName(forFileFormat format: Int32, delivered: SampleFormat) -> String? {
        let names: [Int: String] = [
            SF_FORMAT_PCM_S8: "s8", SF_FORMAT_PCM_U8: "u8", SF_FORMAT_ULAW: "µ-law", SF_FORMAT_ALAW: "A-law",
            SF_FORMAT_DOUBLE: "f64", SF_FORMAT_IMA_ADPCM: "IMA ADPCM", SF_FORMAT_MS_ADPCM: "MS ADPCM",
            SF_FORMAT_GSM610: "GSM 6.10", SF_FORMAT_ALAC_16: "ALAC", SF_FORMAT_ALAC_20: "ALAC 20-bit",
            SF_FORMAT_ALAC_24: "ALAC", SF_FORMAT_ALAC_32: "ALAC", SF_FORMAT_DPCM_8: "DPCM", SF_FORMAT_DPCM_16: "DPCM",
        ]
        let sub = Int(format) & SF_FORMAT_SUBMASK
        if let name = names[sub] { return name }
        let same = [SF_FORMAT_PCM_16, SF_FORMAT_PCM_24, SF_FORMAT_PCM_32, SF_FORMAT_FLOAT].contains(sub)
        guard !same else { return nil }
        // Perceptual codecs and the rest: libsndfile's own name for the encoding.
        var info = SF_FORMAT_INFO()
        info.format = Int32(sub)
        guard sf_command(nil, Int32(SFC_GET_FORMAT_INFO), &info, Int32(MemoryLayout<SF_FORMAT_INFO>.size)) == 0,
              let name = info.name else { return "libsndfile encoding 0x\(String(sub, radix: 16))" }
        return String(cString: name)
    }

    /// The speaker of a libsndfile `SF_CHANNEL_MAP_*` position; `nil` for positions a WAVE
    /// channel mask has no bit for (ambisonic components, `INVALID`).
    static func speaker(forChannelMap position: Int) -> ChannelLayout.Speaker? {
        switch position {
        case SF_CHANNEL_MAP_MONO, SF_CHANNEL_MAP_CENTER, SF_CHANNEL_MAP_FRONT_CENTER: .frontCenter
        case SF_CHANNEL_MAP_LEFT, SF_CHANNEL_MAP_FRONT_LEFT: .frontLeft
        case SF_CHANNEL_MAP_RIGHT, SF_CHANNEL_MAP_FRONT_RIGHT: .frontRight
        case SF_CHANNEL_MAP_REAR_CENTER: .backCenter
        case SF_CHANNEL_MAP_REAR_LEFT: .backLeft
        case SF_CHANNEL_MAP_REAR_RIGHT: .backRight
        case SF_CHANNEL_MAP_LFE: .lowFrequency
        case SF_CHANNEL_MAP_FRONT_LEFT_OF_CENTER: .frontLeftOfCenter
        case SF_CHANNEL_MAP_FRONT_RIGHT_OF_CENTER: .frontRightOfCenter
        case SF_CHANNEL_MAP_SIDE_LEFT: .sideLeft
        case SF_CHANNEL_MAP_SIDE_RIGHT: .sideRight
        case SF_CHANNEL_MAP_TOP_CENTER: .topCenter
        case SF_CHANNEL_MAP_TOP_FRONT_LEFT: .topFrontLeft
        case SF_CHANNEL_MAP_TOP_FRONT_RIGHT: .topFrontRight
        case SF_CHANNEL_MAP_TOP_FRONT_CENTER: .topFrontCenter
        case SF_CHANNEL_MAP_TOP_REAR_LEFT: .topBackLeft
        case SF_CHANNEL_MAP_TOP_REAR_RIGHT: .topBackRight
        case SF_CHANNEL_MAP_TOP_REAR_CENTER: .topBackCenter
        default: nil
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
