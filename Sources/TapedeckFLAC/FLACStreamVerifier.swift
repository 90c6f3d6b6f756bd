import CFLAC
import Foundation
import TapedeckCore

/// Verifies a FLAC stream on a thread of its own while it is being encoded: a libFLAC stream
/// decoder reads the encoded bytes as the encoder writes them and compares every decoded sample
/// with the input the encoder was given. The same check as libFLAC's verify mode, but on a
/// second core, so a lone export pays for it in CPU, not in wall time.
///
/// The encoder side (``appendEncoded(_:count:)``, ``appendInput(_:count:)``, ``finish()``) is
/// called from the writer thread; the decoder runs on the verifier's own thread. Memory is
/// bounded: the writer waits when the verifier falls more than a few seconds behind.
final class FLACStreamVerifier: @unchecked Sendable {
    // Guarded by `condition`.
    private let condition = NSCondition()
    private var encoded: [UInt8] = []
    private var encodedRead = 0
    private var input: [Int32] = []
    private var inputRead = 0
    private var closed = false
    private var failure: String?
    private var framesVerified: Int64 = 0
    private var done = false

    private let channels: Int
    private let path: String
    private static let maxBufferedBytes = 32 << 20
    private static let maxBufferedSamples = 8 << 20

    /// Starts the verifier thread.
    init(channels: Int, path: String) {
        self.channels = channels
        self.path = path
        let thread = Thread { [self] in self.run() }
        thread.name = "tapedeck-flac-verify"
        thread.start()
    }

    // MARK: writer side

    /// Hands over bytes the encoder appended to the stream. - Thread: the writer thread; may wait.
    func appendEncoded(_ bytes: UnsafePointer<UInt8>, count: Int) {
        condition.lock()
        while failure == nil && encoded.count - encodedRead > Self.maxBufferedBytes { condition.wait() }
        if failure == nil {
            if encodedRead > (1 << 20) {
                encoded.removeSubrange(0..<encodedRead)
                encodedRead = 0
            }
            encoded.append(contentsOf: UnsafeBufferPointer(start: bytes, count: count))
        }
        condition.broadcast()
        condition.unlock()
    }

    /// Hands over interleaved input samples given to the encoder. - Thread: the writer thread; may wait.
    func appendInput(_ samples: UnsafePointer<Int32>, count: Int) {
        condition.lock()
        while failure == nil && input.count - inputRead > Self.maxBufferedSamples { condition.wait() }
        if failure == nil {
            if inputRead > (1 << 20) {
                input.removeSubrange(0..<inputRead)
                inputRead = 0
            }
            input.append(contentsOf: UnsafeBufferPointer(start: samples, count: count))
        }
        condition.broadcast()
        condition.unlock()
    }

    /// Marks the end of the stream and waits for the verifier to finish.
    /// - Returns: frames verified, or throws `.io` describing the first mismatch.
    /// - Thread: the writer thread; blocks until verification is complete.
    func finish() throws -> Int64 {
        condition.lock()
        closed = true
        condition.broadcast()
        while !done { condition.wait() }
        let (failure, frames, leftover) = (self.failure, framesVerified, input.count - inputRead)
        condition.unlock()
        if let failure {
            throw TapedeckError(.io, "Verifying \(path) failed: \(failure). Nothing was kept; try again, and choose another format if it persists.")
        }
        if leftover != 0 {
            throw TapedeckError(.io, "Verifying \(path) failed: \(leftover / max(channels, 1)) input frames were never decoded. Nothing was kept.")
        }
        return frames
    }

    // MARK: verifier thread

    private func fail(_ why: String) {
        condition.lock()
        if failure == nil { failure = why }
        condition.broadcast()
        condition.unlock()
    }

    private func run() {
        defer {
            condition.lock()
            done = true
            condition.broadcast()
            condition.unlock()
        }
        guard let decoder = FLAC__stream_decoder_new() else { return fail("out of memory") }
        defer { FLAC__stream_decoder_delete(decoder) }
        let status = FLAC__stream_decoder_init_stream(
            decoder,
            { _, buffer, bytes, client in
                let me = Unmanaged<FLACStreamVerifier>.fromOpaque(client!).takeUnretainedValue()
                return me.read(into: buffer!, count: bytes!)
            },
            nil, nil, nil, nil,
            { _, frame, buffers, client in
                let me = Unmanaged<FLACStreamVerifier>.fromOpaque(client!).takeUnretainedValue()
                return me.compare(frame!, buffers!) ? FLAC__STREAM_DECODER_WRITE_STATUS_CONTINUE : FLAC__STREAM_DECODER_WRITE_STATUS_ABORT
            },
            nil,
            { _, status, client in
                let me = Unmanaged<FLACStreamVerifier>.fromOpaque(client!).takeUnretainedValue()
                me.fail("the decoder reported \(FLACSource.describe(status))")
            },
            Unmanaged.passUnretained(self).toOpaque())
        guard status == FLAC__STREAM_DECODER_INIT_STATUS_OK else { return fail("the decoder could not start") }
        if FLAC__stream_decoder_process_until_end_of_stream(decoder) == 0 {
            condition.lock()
            let failed = failure != nil
            condition.unlock()
            if !failed { fail("the decoder stopped: \(String(cString: FLAC__stream_decoder_get_resolved_state_string(decoder)))") }
        }
        _ = FLAC__stream_decoder_finish(decoder)
    }

    private func read(into buffer: UnsafeMutablePointer<UInt8>, count: UnsafeMutablePointer<Int>) -> FLAC__StreamDecoderReadStatus {
        condition.lock()
        defer { condition.unlock() }
        while encoded.count == encodedRead && !closed && failure == nil { condition.wait() }
        if failure != nil { return FLAC__STREAM_DECODER_READ_STATUS_ABORT }
        let available = encoded.count - encodedRead
        if available == 0 {
            count.pointee = 0
            return FLAC__STREAM_DECODER_READ_STATUS_END_OF_STREAM
        }
        let n = min(available, count.pointee)
        encoded.withUnsafeBufferPointer { buffer.update(from: $0.baseAddress! + encodedRead, count: n) }
        encodedRead += n
        count.pointee = n
        condition.broadcast()
        return FLAC__STREAM_DECODER_READ_STATUS_CONTINUE
    }

    private func compare(_ frame: UnsafePointer<FLAC__Frame>, _ buffers: UnsafePointer<UnsafePointer<FLAC__int32>?>) -> Bool {
        let blocksize = Int(frame.pointee.header.blocksize)
        let needed = blocksize * channels
        condition.lock()
        defer { condition.unlock() }
        while input.count - inputRead < needed && !closed && failure == nil { condition.wait() }
        guard failure == nil else { return false }
        guard input.count - inputRead >= needed else {
            failure = "the stream holds more audio than was encoded"
            condition.broadcast()
            return false
        }
        let mismatch: Int? = input.withUnsafeBufferPointer { all in
            let base = all.baseAddress! + inputRead
            for c in 0..<channels {
                guard let decoded = buffers[c] else { return c }
                for i in 0..<blocksize where decoded[i] != base[i &* channels &+ c] { return i &* channels &+ c }
            }
            return nil
        }
        if let mismatch {
            failure = "sample \(framesVerified * Int64(channels) + Int64(mismatch)) decoded differently from the input"
            condition.broadcast()
            return false
        }
        inputRead += needed
        framesVerified += Int64(blocksize)
        condition.broadcast()
        return true
    }
}
