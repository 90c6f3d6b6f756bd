public import Foundation
public import TapedeckCore
import COpus
#if canImport(Glibc)
import Glibc
#endif

/// The `opus` encoder and decoder: Ogg Opus through libopusenc (writing) and libopusfile
/// (reading). Lossy: a round trip keeps the sound, not the samples.
///
/// - Input of any rate Tapedeck records is accepted (libopusenc resamples to Opus's 48 kHz and
///   stores the input rate in the header); files decode at 48 kHz as 32-bit float, as every Opus
///   decoder does. Mono or stereo (channel mapping family 0).
/// - Files are created without replacing anything and written through Tapedeck's own descriptor,
///   so the never-overwrite rule holds. Pages are muxed at most 200 ms apart, and a checkpoint
///   syncs what has been written: a killed recording keeps every complete page.
/// - `repair(fileAt:)` cuts a file back to its last complete Ogg page.
public struct OpusEncoder: AudioEncoder, AudioDecoder {
    /// `opus`. - Thread: any; does not block.
    public var name: String { "opus" }
    /// `opus`. - Thread: any; does not block.
    public var fileExtension: String { "opus" }
    public var mediaType: String { "audio/ogg; codecs=opus" }
    /// `["opus"]`. - Thread: any; does not block.
    public var encodings: Set<String> { ["opus"] }

    /// Opus is lossy. - Thread: any; does not block.
    public var isLossless: Bool { false }

    /// Target bit rate in bits per second (whole file, all channels).
    public var bitrate: Int
    /// Encoder complexity 0 (fastest) to 10 (best).
    public var complexity: Int

    /// Creates the codec from its settings (the declared defaults when none are given).
    /// - Thread: any. Does not block.
    public init(settings: OpusSettings = OpusSettings()) {
        bitrate = settings.bitrate
        complexity = settings.complexity
    }

    /// Mono or stereo at any rate Tapedeck records. - Thread: any. Does not block.
    public func validate(_ format: AudioFormat) throws {
        try format.validate()
        guard (1...2).contains(format.channels) else {
            throw TapedeckError(.unsupportedFormat, "The Opus encoder writes mono or stereo files, not \(format.channels) channels.")
        }
    }

    /// Creates the file (never replacing one) and writes the Opus headers and tags.
    /// - Thread: the writer thread. Blocks on disk I/O.
    public func makeWriter(at url: URL, format: AudioFormat, metadata: TakeMetadata) throws -> any TakeWriter {
        try validate(format)
        let fd = try PositionalFile.createNew(atPath: url.path)
        do {
            return try Writer(fd: fd, format: format, metadata: metadata, bitrate: bitrate, complexity: complexity, path: url.path)
        } catch {
            close(fd)
            unlink(url.path)
            throw error
        }
    }

    /// Cuts the file back to its last complete Ogg page (a killed writer leaves a partial one)
    /// and reports the audio those pages hold, at the input rate.
    /// - Thread: any. Blocks on disk I/O.
    public func repair(fileAt url: URL) throws -> RepairResult {
        // Foundation leaks the 4 KiB buffer it makes to "map" an empty file (found by
        // scripts/fuzz); an empty file holds no page to map anyway.
        let size = (try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int) ?? 0
        let data = size > 0 ? try Data(contentsOf: url, options: .alwaysMapped) : Data()
        let end = OggPages.endOfLastCompletePage(data)
        var changed = false
        if end < data.count {
            guard truncate(url.path, off_t(end)) == 0 else { throw TapedeckError.system(errno, while: "truncate \(url.path)") }
            changed = true
        }
        let reader = try Reader(path: url.path)
        defer { reader.close() }
        let inputRate = reader.inputRate > 0 ? reader.inputRate : 48_000
        let frames = reader.frameCount * Int64(inputRate) / 48_000
        let format = AudioFormat(sampleRate: inputRate, channels: reader.format.channels, sampleFormat: .f32)
        return RepairResult(frames: frames, format: format, headerRepaired: changed)
    }

    /// Opens a file for reading: 48 kHz 32-bit float, as Opus decodes.
    /// - Thread: the reading thread. Blocks on disk I/O.
    public func openReader(at url: URL) throws -> any TakeReader {
        try Reader(path: url.path)
    }

    // MARK: writing

    /// Owns one `OggOpusEnc` writing through a file descriptor. Single owner.
    final class Writer: TakeWriter {
        let fd: Int32
        let format: AudioFormat
        let path: String
        private var encoder: OpaquePointer?
        private var frames: Int64 = 0
        private var scratch: [Float] = []
        private let converter: SampleConverter
        /// Set by the write callback when writing failed (libopusenc only sees a non-zero return).
        fileprivate var writeError: Int32 = 0

        init(fd: Int32, format: AudioFormat, metadata: TakeMetadata, bitrate: Int, complexity: Int, path: String) throws {
            self.fd = fd
            self.format = format
            self.path = path
            converter = SampleConverter(from: format, to: .f32)
            guard let comments = ope_comments_create() else { throw TapedeckError(.internalError, "libopusenc could not allocate comments.") }
            defer { ope_comments_destroy(comments) }
            let tags = metadata.commentFields
            for (tag, value) in tags { _ = ope_comments_add(comments, tag, value) }
            var callbacks = OpusEncCallbacks(
                write: { userData, pointer, length in
                    guard let userData, let pointer else { return 1 }
                    let writer = Unmanaged<Writer>.fromOpaque(userData).takeUnretainedValue()
                    return writer.writeAll(pointer, Int(length)) ? 0 : 1
                },
                close: { _ in 0 })
            var error: Int32 = 0
            let family: Int32 = 0
            encoder = ope_encoder_create_callbacks(&callbacks, Unmanaged.passUnretained(self).toOpaque(), comments,
                                                   opus_int32(format.sampleRate), Int32(format.channels), family, &error)
            guard let encoder, error == OPE_OK else {
                throw TapedeckError(.unsupportedFormat, "libopusenc refused \(format): \(String(cString: ope_strerror(error))).")
            }
            _ = tapedeck_ope_set_bitrate(encoder, opus_int32(bitrate))
            _ = tapedeck_ope_set_complexity(encoder, opus_int32(complexity))
            // Audio is encoded at most 100 ms after it arrives and pages are written at most 200 ms
            // apart (the defaults buffer 2 s and 1 s), so a checkpoint has little left to lose.
            _ = tapedeck_ope_set_decision_delay(encoder, 4_800)
            _ = tapedeck_ope_set_muxing_delay(encoder, 9_600)
        }

        fileprivate func writeAll(_ pointer: UnsafePointer<UInt8>, _ count: Int) -> Bool {
            var offset = 0
            while offset < count {
                let w = Glibc.write(fd, pointer + offset, count - offset)
                if w < 0 {
                    if errno == EINTR { continue }
                    writeError = errno
                    return false
                }
                offset += w
            }
            return true
        }

        func write(_ buffer: UnsafeRawPointer, frames n: Int) throws {
            guard let encoder else { throw TapedeckError(.internalError, "write(_:frames:) after finish().") }
            let samples = n * format.channels
            if scratch.count < samples { scratch = [Float](repeating: 0, count: samples) }
            scratch.withUnsafeMutableBufferPointer { out in
                if format.sampleFormat == .f32 {
                    UnsafeMutableRawPointer(out.baseAddress!).copyMemory(from: buffer, byteCount: samples * 4)
                } else {
                    converter.convert(buffer, into: out.baseAddress!, frames: n)
                }
            }
            let result = scratch.withUnsafeBufferPointer { ope_encoder_write_float(encoder, $0.baseAddress, Int32(n)) }
            try check(result, "encode")
            frames += Int64(n)
        }

        func checkpoint() throws {
            guard fdatasync(fd) == 0 else { throw TapedeckError.system(errno, while: "sync \(path)") }
        }

        func finish() throws -> Int64 {
            guard let encoder else { return frames }
            // With no audio, libopusenc's drain asserts (and aborts the process) unless the
            // headers went out first: an Ogg Opus file of headers only is a valid empty file.
            if frames == 0 {
                var none: Float = 0
                try check(ope_encoder_write_float(encoder, &none, 0), "write the headers of")
            }
            let result = ope_encoder_drain(encoder)
            ope_encoder_destroy(encoder)
            self.encoder = nil
            defer { close(fd) }
            try check(result, "finish")
            guard fsync(fd) == 0 else { throw TapedeckError.system(errno, while: "sync \(path)") }
            return frames
        }

        func abandon() {
            if let encoder {
                ope_encoder_destroy(encoder)
                self.encoder = nil
                close(fd)
            }
        }

        private func check(_ result: Int32, _ action: String) throws {
            if writeError != 0 { throw TapedeckError.system(writeError, while: "write to \(path)") }
            guard result == OPE_OK else {
                throw TapedeckError(.io, "libopusenc could not \(action) \(path): \(String(cString: ope_strerror(result))).")
            }
        }

        deinit { abandon() }
    }

    // MARK: reading

    /// Owns one `OggOpusFile`. Single owner.
    final class Reader: TakeReader {
        let format: AudioFormat
        let frameCount: Int64
        /// The rate the encoder was given (0 if the header does not say).
        let inputRate: Int
        private var file: OpaquePointer?

        init(path: String) throws {
            var error: Int32 = 0
            guard let file = op_open_file(path, &error) else {
                if !FileManager.default.fileExists(atPath: path) { throw TapedeckError(.notFound, "\(path) does not exist.") }
                throw TapedeckError(.corruptFile, "\(path) cannot be read as Ogg Opus (libopusfile error \(error)).")
            }
            self.file = file
            let channels = Int(op_channel_count(file, -1))
            let total = op_pcm_total(file, -1)
            inputRate = Int(op_head(file, -1)?.pointee.input_sample_rate ?? 0)
            format = AudioFormat(sampleRate: 48_000, channels: channels, sampleFormat: .f32)
            frameCount = max(0, Int64(total))
        }

        func read(into buffer: UnsafeMutableRawPointer, maxFrames: Int) throws -> Int {
            guard let file else { return 0 }
            let out = buffer.assumingMemoryBound(to: Float.self)
            var done = 0
            while done < maxFrames {
                let n = op_read_float(file, out + done * format.channels, Int32((maxFrames - done) * format.channels), nil)
                if n == 0 { break }
                if n < 0 {
                    if n == OP_HOLE { continue }
                    throw TapedeckError(.corruptFile, "Decoding Opus failed (libopusfile error \(n)).")
                }
                done += Int(n)
            }
            return done
        }

        func close() {
            if let file { op_free(file) }
            file = nil
        }

        deinit { close() }
    }
}

/// Finding complete Ogg pages in a file.
enum OggPages {
    /// The offset just past the last complete page (0 when there is none). A page is `OggS`, a
    /// 27-byte header whose last byte counts the segments, the segment table, then the data.
    static func endOfLastCompletePage(_ data: Data) -> Int {
        var offset = 0
        var end = 0
        data.withUnsafeBytes { (raw: UnsafeRawBufferPointer) in
            let bytes = raw.bindMemory(to: UInt8.self)
            while offset + 27 <= bytes.count {
                guard bytes[offset] == 0x4F, bytes[offset + 1] == 0x67, bytes[offset + 2] == 0x67, bytes[offset + 3] == 0x53 else { break }
                let segments = Int(bytes[offset + 26])
                guard offset + 27 + segments <= bytes.count else { break }
                var body = 0
                for i in 0..<segments { body += Int(bytes[offset + 27 + i]) }
                let next = offset + 27 + segments + body
                guard next <= bytes.count else { break }
                offset = next
                end = next
            }
        }
        return end
    }
}
