import CFLAC
import CStreamCodecs
package import TapedeckCore

/// FLAC, native or in Ogg, through libFLAC's stream decoder fed by read callbacks. A stream
/// joined after its header (what a server relays to a late listener of native FLAC) is read from
/// its first frame: each frame's header carries the rate, channels and depth.
package final class FLACStreamDecoder: StreamDecoder {
    package let codec: String
    package private(set) var sampleRate = 0
    package private(set) var channels = 0
    package private(set) var bits = 0
    package var nativeFormat: SampleFormat? { bits <= 16 ? .s16 : bits <= 24 ? .s24 : .s32 }
    fileprivate let bytes: StreamBytes
    private let decoder: UnsafeMutablePointer<FLAC__StreamDecoder>
    /// Decoded frames not yet handed out, interleaved.
    fileprivate var pending: [Float] = []
    private var pendingStart = 0

    package init(_ bytes: StreamBytes, ogg: Bool) throws {
        self.bytes = bytes
        codec = ogg ? "Ogg FLAC" : "FLAC"
        guard let decoder = FLAC__stream_decoder_new() else { throw StreamEnd(reason: "could not be decoded: libFLAC is out of memory") }
        self.decoder = decoder
        let me = Unmanaged.passUnretained(self).toOpaque()
        let read: FLAC__StreamDecoderReadCallback = { _, buffer, count, client in
            let me = Unmanaged<FLACStreamDecoder>.fromOpaque(client!).takeUnretainedValue()
            let n = me.bytes.read(into: buffer!, count: count!.pointee)
            count!.pointee = n
            return n == 0 ? FLAC__STREAM_DECODER_READ_STATUS_END_OF_STREAM : FLAC__STREAM_DECODER_READ_STATUS_CONTINUE
        }
        let write: FLAC__StreamDecoderWriteCallback = { _, frame, planes, client in
            Unmanaged<FLACStreamDecoder>.fromOpaque(client!).takeUnretainedValue().take(frame!.pointee.header, planes!)
        }
        let error: FLAC__StreamDecoderErrorCallback = { _, _, _ in }  // lost sync: libFLAC finds the next frame
        let status = ogg
            ? FLAC__stream_decoder_init_ogg_stream(decoder, read, nil, nil, nil, nil, write, nil, error, me)
            : FLAC__stream_decoder_init_stream(decoder, read, nil, nil, nil, nil, write, nil, error, me)
        guard status == FLAC__STREAM_DECODER_INIT_STATUS_OK else {
            FLAC__stream_decoder_delete(decoder)
            throw StreamEnd(reason: "could not be decoded: libFLAC refused to start (\(status.rawValue))")
        }
        while sampleRate == 0 {
            guard FLAC__stream_decoder_process_single(decoder) != 0,
                  FLAC__stream_decoder_get_state(decoder) != FLAC__STREAM_DECODER_END_OF_STREAM else {
                FLAC__stream_decoder_delete(decoder)
                throw bytes.end ?? StreamEnd(reason: "sent FLAC data libFLAC cannot decode")
            }
        }
    }

    /// The write callback: one decoded frame, converted to floats after what is pending.
    fileprivate func take(_ header: FLAC__FrameHeader, _ planes: UnsafePointer<UnsafePointer<FLAC__int32>?>) -> FLAC__StreamDecoderWriteStatus {
        if sampleRate == 0 {
            sampleRate = Int(header.sample_rate)
            channels = Int(header.channels)
            bits = Int(header.bits_per_sample)
        } else if Int(header.sample_rate) != sampleRate || Int(header.bits_per_sample) != bits {
            bytes.fail("changed its format mid-stream (\(sampleRate) Hz \(bits)-bit to \(header.sample_rate) Hz \(header.bits_per_sample)-bit)")
            return FLAC__STREAM_DECODER_WRITE_STATUS_ABORT
        }
        let frames = Int(header.blocksize)
        let frameChannels = Int(header.channels)
        let scale = 1 / Float(1 << (bits - 1))
        if pendingStart > 0 {
            pending.removeFirst(pendingStart)
            pendingStart = 0
        }
        let base = pending.count
        pending.append(contentsOf: repeatElement(0, count: frames * channels))
        pending.withUnsafeMutableBufferPointer { out in
            for c in 0..<channels {
                let plane = planes[min(c, frameChannels - 1)]!
                for f in 0..<frames { out[base + f * channels + c] = Float(plane[f]) * scale }
            }
        }
        return FLAC__STREAM_DECODER_WRITE_STATUS_CONTINUE
    }

    package func decode(into buffer: UnsafeMutablePointer<Float>, maxFrames: Int) -> Int {
        while pending.count - pendingStart == 0 {
            guard FLAC__stream_decoder_process_single(decoder) != 0,
                  FLAC__stream_decoder_get_state(decoder) != FLAC__STREAM_DECODER_END_OF_STREAM else {
                if bytes.end == nil { bytes.fail("sent FLAC data libFLAC cannot decode") }
                return 0
            }
        }
        let n = min(maxFrames, (pending.count - pendingStart) / channels)
        pending.withUnsafeBufferPointer { buffer.update(from: $0.baseAddress! + pendingStart, count: n * channels) }
        pendingStart += n * channels
        return n
    }

    package func close() {
        FLAC__stream_decoder_finish(decoder)
        FLAC__stream_decoder_delete(decoder)
    }
}

/// MP3 (MPEG-1/2 layer III, and layers I and II) through libmpg123's feed API: bytes are fed
/// as they arrive, and mpg123 finds the frames (skipping an ID3 tag and resyncing after damage).
package final class MP3StreamDecoder: StreamDecoder {
    package let codec = "MP3"
    package private(set) var sampleRate = 0
    package private(set) var channels = 0
    package var nativeFormat: SampleFormat? { nil }
    private let bytes: StreamBytes
    private let handle: OpaquePointer
    private var input = [UInt8](repeating: 0, count: 16_384)

    package init(_ bytes: StreamBytes) throws {
        self.bytes = bytes
        var error: Int32 = 0
        guard let handle = mpg123_new(nil, &error) else { throw StreamEnd(reason: "could not be decoded: libmpg123 did not start (\(error))") }
        self.handle = handle
        // ID3v2 tags are skipped, not parsed: libmpg123 would allocate what a tag's header
        // claims (up to 256 MiB) before reading it; the titles a stream has come by ICY.
        _ = mpg123_param2(handle, Int32(MPG123_ADD_FLAGS.rawValue), Int(MPG123_QUIET.rawValue | MPG123_SKIP_ID3V2.rawValue), 0)
        _ = mpg123_format_none(handle)
        var rates: UnsafePointer<Int>?
        var count = 0
        mpg123_rates(&rates, &count)
        for i in 0..<count { _ = mpg123_format(handle, rates![i], Int32(MPG123_MONO.rawValue | MPG123_STEREO.rawValue), Int32(MPG123_ENC_FLOAT_32.rawValue)) }
        guard mpg123_open_feed(handle) == MPG123_OK.rawValue else {
            mpg123_delete(handle)
            throw StreamEnd(reason: "could not be decoded: libmpg123 did not open the stream")
        }
        // Feed until mpg123 knows the format (the first frame).
        var none = 0
        while sampleRate == 0 {
            let status = mpg123_read(handle, nil, 0, &none)
            if status == MPG123_NEW_FORMAT.rawValue {
                var rate = 0, ch: Int32 = 0, encoding: Int32 = 0
                _ = mpg123_getformat(handle, &rate, &ch, &encoding)
                sampleRate = rate
                channels = Int(ch)
            } else if status == MPG123_NEED_MORE.rawValue {
                guard feed() else {
                    mpg123_delete(handle)
                    throw bytes.end ?? StreamEnd(reason: "sent no MP3 frame")
                }
            } else if status != MPG123_OK.rawValue {
                mpg123_delete(handle)
                throw StreamEnd(reason: "sent MP3 data libmpg123 cannot decode (\(String(cString: mpg123_plain_strerror(status))))")
            }
        }
    }

    /// Feeds the next bytes that arrived. - Returns: false at the end of the stream.
    private func feed() -> Bool {
        let n = input.withUnsafeMutableBytes { bytes.read(into: $0.baseAddress!, count: $0.count) }
        guard n > 0 else { return false }
        return input.withUnsafeBufferPointer { mpg123_feed(handle, $0.baseAddress, n) } == MPG123_OK.rawValue
    }

    package func decode(into buffer: UnsafeMutablePointer<Float>, maxFrames: Int) -> Int {
        while true {
            var done = 0
            let status = mpg123_read(handle, buffer, maxFrames * channels * 4, &done)
            if done > 0 { return done / (4 * channels) }
            if status == MPG123_NEED_MORE.rawValue {
                if !feed() { return 0 }
            } else if status == MPG123_NEW_FORMAT.rawValue {
                var rate = 0, ch: Int32 = 0, encoding: Int32 = 0
                _ = mpg123_getformat(handle, &rate, &ch, &encoding)
                if rate != sampleRate || Int(ch) != channels {
                    bytes.fail("changed its format mid-stream (\(sampleRate) Hz \(channels) ch to \(rate) Hz \(ch) ch)")
                    return 0
                }
            } else if status != MPG123_OK.rawValue {
                bytes.fail("sent MP3 data libmpg123 cannot decode (\(String(cString: mpg123_plain_strerror(status))))")
                return 0
            }
        }
    }

    package func close() { mpg123_delete(handle) }
}
