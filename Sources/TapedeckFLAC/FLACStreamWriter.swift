import CFLAC
import Foundation
public import TapedeckCore

/// Writes FLAC to a stream that cannot seek (`record -o -`): libFLAC's stream encoder with no
/// seek callback, so STREAMINFO says "total samples unknown" and carries no MD5, as the format
/// allows for streams (`flac -t` decodes every frame and checks each frame's CRC). Single owner.
final class FLACStreamWriter: TakeWriter {
    private let fd: Int32
    private let format: AudioFormat
    private var encoder: UnsafeMutablePointer<FLAC__StreamEncoder>?
    private var metadataBlocks: [UnsafeMutablePointer<FLAC__StreamMetadata>?] = []
    private var samples: [Int32] = []
    private var frames: Int64 = 0
    private var streamError: TapedeckError?

    init(fd: Int32, format: AudioFormat, metadata: TakeMetadata, level: Int) throws {
        self.fd = fd
        self.format = format
        guard let enc = FLAC__stream_encoder_new() else { throw TapedeckError(.io, "Could not create a FLAC encoder: out of memory.") }
        encoder = enc
        FLACTakeWriter.configure(enc, format: format, level: level)
        _ = FLAC__stream_encoder_set_do_md5(enc, 0)
        metadataBlocks = try FLACTags.blocks(for: metadata, layout: format.layout, channels: format.channels, paddingBytes: 0)
        let count = UInt32(metadataBlocks.count)
        _ = metadataBlocks.withUnsafeMutableBufferPointer { FLAC__stream_encoder_set_metadata(enc, $0.baseAddress, count) }
        let status = FLAC__stream_encoder_init_stream(
            enc,
            { _, buffer, bytes, _, _, client in
                let me = Unmanaged<FLACStreamWriter>.fromOpaque(client!).takeUnretainedValue()
                guard me.streamError == nil, let buffer else { return FLAC__STREAM_ENCODER_WRITE_STATUS_FATAL_ERROR }
                do {
                    try StreamOutput.write(me.fd, buffer, bytes)
                } catch let error as TapedeckError {
                    me.streamError = error
                    return FLAC__STREAM_ENCODER_WRITE_STATUS_FATAL_ERROR
                } catch {
                    return FLAC__STREAM_ENCODER_WRITE_STATUS_FATAL_ERROR
                }
                return FLAC__STREAM_ENCODER_WRITE_STATUS_OK
            },
            nil, nil, nil,
            Unmanaged.passUnretained(self).toOpaque())
        guard status == FLAC__STREAM_ENCODER_INIT_STATUS_OK else {
            let error = streamError ?? TapedeckError(.io, "Could not start the FLAC stream: libFLAC refused the settings (init status \(status.rawValue)).")
            release()
            throw error
        }
    }

    deinit { release() }

    private func release() {
        if let encoder { FLAC__stream_encoder_delete(encoder) }
        encoder = nil
        for block in metadataBlocks { FLAC__metadata_object_delete(block) }
        metadataBlocks = []
    }

    func write(_ buffer: UnsafeRawPointer, frames: Int) throws {
        guard let enc = encoder, frames > 0 else { return }
        let count = frames * format.channels
        if samples.count < count { samples = Array(repeating: 0, count: count) }
        samples.withUnsafeMutableBufferPointer { FLACTakeWriter.unpack(buffer, count: count, format: format, into: $0.baseAddress!) }
        let ok = samples.withUnsafeBufferPointer { FLAC__stream_encoder_process_interleaved(enc, $0.baseAddress, UInt32(frames)) != 0 }
        guard ok else { throw streamError ?? TapedeckError(.io, "libFLAC could not encode the stream.") }
        self.frames += Int64(frames)
    }

    /// Nothing to bring up to date: the frames go out as libFLAC makes them.
    func checkpoint() throws {}

    func finish() throws -> Int64 {
        guard let enc = encoder else { return frames }
        let ok = FLAC__stream_encoder_finish(enc) != 0
        release()
        if !ok, let streamError { throw streamError }
        return frames
    }

    func abandon() { release() }
}

extension FLACEncoder {
    /// A FLAC stream to `fd` (`FLACStreamWriter`). - Thread: the owning writer thread.
    public func makeStreamWriter(to fd: Int32, format: AudioFormat, metadata: TakeMetadata) throws -> any TakeWriter {
        try validate(format)
        return try FLACStreamWriter(fd: fd, format: format, metadata: metadata, level: level)
    }
}
