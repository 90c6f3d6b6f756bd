import CSndfile
import TapedeckCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads one audio file through libsndfile. Single owner, not `Sendable`.
final class WAVTakeReader: TakeReader {
    /// Frames read per libsndfile call; bounds the scratch buffer.
    static let chunkFrames = 4096

    let format: AudioFormat
    let frameCount: Int64
    let path: String
    /// The file's own encoding when frames are delivered in another (`u8`, `A-law`, `f64`, …).
    let sourceEncoding: String?

    private var fd: Int32
    private var handle: OpaquePointer?
    private var intScratch: [Int32] = []
    private var floatScratch: [Float] = []
    /// Whether the file stores samples exactly as delivered (little-endian WAV/RF64 with 16-, 24-,
    /// 32-bit PCM or 32-bit float), so reads are plain copies (`sf_read_raw`).
    private let rawLayout: Bool

    /// Opens `path`.
    /// - Thread: the thread that will read it. Blocks on disk I/O.
    /// - Throws: `.notFound` if missing; `.corruptFile` if libsndfile cannot read it, or if it has a
    ///   damaged `LIST` chunk (``WAVHeader/damagedLists(in:)``), which is refused before libsndfile sees it.
    init(path: String) throws {
        self.path = path
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { throw TapedeckError.system(errno, while: "open \(path)") }
        // libsndfile can loop forever in sf_open on a damaged LIST chunk: look first.
        let raw = RawFile(fd: fd, path: path, kind: "WAV")
        if let list = try? WAVHeader.damagedLists(in: raw).first {
            // Say "repair" only where repair can work: a header Tapedeck reads, in a format it writes.
            let repairable = (try? WAVHeader.read(from: raw).audioFormat(path: path)) != nil
            closeDescriptor(fd)
            throw TapedeckError(.corruptFile, "\(path) has a damaged LIST (metadata) chunk at byte \(list.offset), which libsndfile cannot open safely. "
                + (repairable
                    ? "If it is a take in your library, run `tapedeck doctor --repair`: it turns the chunk into padding and keeps the audio. A file from elsewhere needs the chunk removed by the program that made it."
                    : "Tapedeck cannot repair this file (its header is incomplete or its encoding is one Tapedeck does not write); re-save it from the program that made it."))
        }
        // A file that begins as a sound file of some kind and cannot be opened is damaged; one
        // that does not is not a format Tapedeck reads (looked at before libsndfile has the file).
        let head = (try? raw.read(4, at: 0)) ?? []
        let looksLikeAudio = head.count < 4 || [Array("RIFF".utf8), Array("RF64".utf8), Array("FORM".utf8), Array("OggS".utf8), Array(".snd".utf8)].contains(head)
        var info = SF_INFO()
        guard let handle = sf_open_fd(fd, Int32(SFM_READ), &info, 0 /* closed by us */) else {
            let reason = Sndfile.errorString(nil)
            closeDescriptor(fd)
            throw TapedeckError(looksLikeAudio ? .corruptFile : .unsupportedFormat,
                "\(path) cannot be read as audio: \(reason). \(looksLikeAudio ? "The file is damaged." : "It is not a sound file Tapedeck reads.")")
        }
        guard info.channels > 0, info.samplerate > 0 else {
            sf_close(handle)
            closeDescriptor(fd)
            throw TapedeckError(.corruptFile, "\(path) declares \(info.channels) channels at \(info.samplerate) Hz.")
        }
        let format = AudioFormat(sampleRate: Int(info.samplerate), channels: Int(info.channels),
                                 sampleFormat: Sndfile.sampleFormat(forFileFormat: info.format),
                                 layout: Self.layout(of: raw, handle: handle, channels: Int(info.channels)))
        do {
            try format.validate()
        } catch let e as TapedeckError {
            sf_close(handle)
            closeDescriptor(fd)
            // A sound file in a format Tapedeck does not handle is not a damaged one.
            throw TapedeckError(.unsupportedFormat, "\(path) is \(format), which Tapedeck does not handle: \(e.message) Convert it first, e.g. `sox \(path.split(separator: "/").last.map(String.init) ?? path) -r 48000 converted.wav`.")
        }
        self.handle = handle
        self.format = format
        sourceEncoding = Sndfile.encodingName(forFileFormat: info.format, delivered: format.sampleFormat)
        frameCount = max(0, info.frames)
        let major = Int(info.format) & SF_FORMAT_TYPEMASK
        let sub = Int(info.format) & SF_FORMAT_SUBMASK
        let endian = Int(info.format) & SF_FORMAT_ENDMASK
        rawLayout = [SF_FORMAT_WAV, SF_FORMAT_WAVEX, SF_FORMAT_RF64].contains(major)
            && [SF_FORMAT_PCM_16, SF_FORMAT_PCM_24, SF_FORMAT_PCM_32, SF_FORMAT_FLOAT].contains(sub)
            && (endian == SF_ENDIAN_FILE || endian == SF_ENDIAN_LITTLE)
        let samples = Self.chunkFrames * format.channels
        if format.sampleFormat.isFloat {
            floatScratch = [Float](repeating: 0, count: samples)
        } else {
            intScratch = [Int32](repeating: 0, count: samples)
        }
    }

    deinit { close() }

    /// The speakers the file names: a WAV's `dwChannelMask` as it stands in the header, else the
    /// channel map libsndfile read (AIFF, CAF); `nil` (the conventional layout) when the file says
    /// nothing or names an order a channel mask cannot express.
    private static func layout(of raw: RawFile, handle: OpaquePointer, channels: Int) -> ChannelLayout? {
        if let header = try? WAVHeader.read(from: raw) {
            return WAVHeader.layout(mask: header.fmt.channelMask, channels: channels)
        }
        var map = [Int32](repeating: 0, count: channels)
        let known = map.withUnsafeMutableBytes {
            sf_command(handle, Int32(SFC_GET_CHANNEL_MAP_INFO), $0.baseAddress, Int32($0.count))
        }
        guard known == Int32(SF_TRUE) else { return nil }
        let speakers = map.compactMap { Sndfile.speaker(forChannelMap: Int($0)) }
        guard speakers.count == channels else { return nil }
        return ChannelLayout(speakers: speakers)
    }

    /// Reads up to `maxFrames` interleaved frames into `buffer`, packed little-endian in ``format``;
    /// returns 0 at the end.
    /// - Thread: the owning thread. Blocks on disk I/O.
    /// - Throws: `.corruptFile` if libsndfile reports an error part way.
    func read(into buffer: UnsafeMutableRawPointer, maxFrames: Int) throws -> Int {
        guard let handle, maxFrames > 0 else { return 0 }
        if rawLayout {
            // The file's bytes are already Tapedeck's packed little-endian layout: copy them.
            let want = sf_count_t(maxFrames * format.bytesPerFrame)
            let got = Int(sf_read_raw(handle, buffer, want))
            if got < Int(want), sf_error(handle) != Int32(SF_ERR_NO_ERROR) {
                throw TapedeckError(.corruptFile, "Could not read \(path): \(Sndfile.errorString(handle)).")
            }
            return max(0, got) / format.bytesPerFrame
        }
        let channels = format.channels
        var total = 0
        while total < maxFrames {
            let want = min(maxFrames - total, Self.chunkFrames)
            let out = buffer + total * format.bytesPerFrame
            let got: Int
            switch format.sampleFormat {
            case .f32:
                got = Int(floatScratch.withUnsafeMutableBufferPointer { sf_readf_float(handle, $0.baseAddress, sf_count_t(want)) })
                for i in 0..<(got * channels) {
                    out.storeBytes(of: floatScratch[i].bitPattern.littleEndian, toByteOffset: i * 4, as: UInt32.self)
                }
            case .s16, .s24, .s32:
                got = Int(intScratch.withUnsafeMutableBufferPointer { sf_readf_int(handle, $0.baseAddress, sf_count_t(want)) })
                store(count: got * channels, into: out)
            }
            total += max(0, got)
            if got < want {
                if sf_error(handle) != Int32(SF_ERR_NO_ERROR) {
                    throw TapedeckError(.corruptFile, "Could not read \(path): \(Sndfile.errorString(handle)).")
                }
                break
            }
        }
        return total
    }

    /// Converts libsndfile's left-justified 32-bit integers to the packed output width.
    private func store(count: Int, into out: UnsafeMutableRawPointer) {
        switch format.sampleFormat {
        case .s16:
            for i in 0..<count {
                out.storeBytes(of: Int16(truncatingIfNeeded: intScratch[i] >> 16).littleEndian, toByteOffset: i * 2, as: Int16.self)
            }
        case .s24:
            for i in 0..<count { Sample24.store(intScratch[i] >> 8, out, index: i) }
        case .s32:
            for i in 0..<count { out.storeBytes(of: intScratch[i].littleEndian, toByteOffset: i * 4, as: Int32.self) }
        case .f32:
            break
        }
    }

    /// Closes the file. Safe to call twice.
    /// - Thread: the owning thread. Does not block noticeably.
    func close() {
        if let handle { sf_close(handle) }
        handle = nil
        if fd >= 0 { closeDescriptor(fd) }
        fd = -1
    }
}

/// Closes a descriptor (the reader's own `close()` hides the C function inside the class).
private func closeDescriptor(_ fd: Int32) {
    _ = close(fd)
}
