import CFLAC
import TapedeckCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// libFLAC's stream decoder reading a file through read/seek/tell/length/eof callbacks on a
/// descriptor (positional reads, so the position is the source's own).
///
/// Shared by ``FLACTakeReader``, repair and ``FLACEncoder/verifyFile(at:)``. Frames are handed to
/// ``onFrame`` from inside ``processSingle()``; decoding errors are recorded in ``error`` (libFLAC
/// reports them before delivering the damaged frame, so ``onFrame`` handlers check it).
/// Single owner, not `Sendable`; does not own the descriptor. Blocks on disk I/O.
final class FLACSource {
    let fd: Int32
    let path: String
    let length: Int64
    /// The next byte libFLAC will read.
    private(set) var position: Int64 = 0
    private let decoder: UnsafeMutablePointer<FLAC__StreamDecoder>

    /// Called for each decoded frame with its header and per-channel samples; return false to abort.
    var onFrame: ((UnsafePointer<FLAC__Frame>, UnsafePointer<UnsafePointer<FLAC__int32>?>) -> Bool)?
    /// STREAMINFO, once the metadata has been read.
    private(set) var streamInfo: FLAC__StreamMetadata_StreamInfo?
    /// VORBIS_COMMENT fields (names upper-cased), when asked for.
    private(set) var tags: [String: String] = [:]
    /// The first decoding error libFLAC reported since ``clearError()``.
    private(set) var error: FLAC__StreamDecoderErrorStatus?
    /// `errno` of a failed read, if any.
    private(set) var readErrno: Int32 = 0

    /// Creates and initializes the decoder over `fd` (rewound to byte 0).
    /// - Throws: `.io` if libFLAC cannot be set up.
    init(fd: Int32, path: String, md5Checking: Bool = false, wantTags: Bool = false) throws {
        self.fd = fd
        self.path = path
        length = try FLACFile(fd: fd, path: path, kind: "FLAC").length()
        guard let d = FLAC__stream_decoder_new() else {
            throw TapedeckError(.io, "Could not create a FLAC decoder for \(path): out of memory.")
        }
        decoder = d
        _ = FLAC__stream_decoder_set_md5_checking(d, md5Checking ? 1 : 0)
        if wantTags { _ = FLAC__stream_decoder_set_metadata_respond(d, FLAC__METADATA_TYPE_VORBIS_COMMENT) }
        let status = FLAC__stream_decoder_init_stream(
            d,
            { _, buffer, bytes, client in
                let me = Unmanaged<FLACSource>.fromOpaque(client!).takeUnretainedValue()
                guard let buffer, let bytes else { return FLAC__STREAM_DECODER_READ_STATUS_ABORT }
                while true {
                    let n = pread(me.fd, buffer, bytes.pointee, off_t(me.position))
                    if n < 0 {
                        if errno == EINTR { continue }
                        me.readErrno = errno
                        bytes.pointee = 0
                        return FLAC__STREAM_DECODER_READ_STATUS_ABORT
                    }
                    bytes.pointee = n
                    me.position += Int64(n)
                    return n == 0 ? FLAC__STREAM_DECODER_READ_STATUS_END_OF_STREAM : FLAC__STREAM_DECODER_READ_STATUS_CONTINUE
                }
            },
            { _, offset, client in
                let me = Unmanaged<FLACSource>.fromOpaque(client!).takeUnretainedValue()
                me.position = Int64(offset)
                return FLAC__STREAM_DECODER_SEEK_STATUS_OK
            },
            { _, offset, client in
                let me = Unmanaged<FLACSource>.fromOpaque(client!).takeUnretainedValue()
                offset?.pointee = FLAC__uint64(me.position)
                return FLAC__STREAM_DECODER_TELL_STATUS_OK
            },
            { _, length, client in
                let me = Unmanaged<FLACSource>.fromOpaque(client!).takeUnretainedValue()
                length?.pointee = FLAC__uint64(me.length)
                return FLAC__STREAM_DECODER_LENGTH_STATUS_OK
            },
            { _, client in
                let me = Unmanaged<FLACSource>.fromOpaque(client!).takeUnretainedValue()
                return me.position >= me.length ? 1 : 0
            },
            { _, frame, buffer, client in
                let me = Unmanaged<FLACSource>.fromOpaque(client!).takeUnretainedValue()
                guard me.error == nil, let frame, let buffer, let onFrame = me.onFrame else {
                    return me.error == nil && me.onFrame == nil
                        ? FLAC__STREAM_DECODER_WRITE_STATUS_CONTINUE : FLAC__STREAM_DECODER_WRITE_STATUS_ABORT
                }
                return onFrame(frame, buffer) ? FLAC__STREAM_DECODER_WRITE_STATUS_CONTINUE : FLAC__STREAM_DECODER_WRITE_STATUS_ABORT
            },
            { _, metadata, client in
                let me = Unmanaged<FLACSource>.fromOpaque(client!).takeUnretainedValue()
                guard let block = metadata?.pointee else { return }
                if block.type == FLAC__METADATA_TYPE_STREAMINFO {
                    me.streamInfo = block.data.stream_info
                } else if block.type == FLAC__METADATA_TYPE_VORBIS_COMMENT {
                    let vc = block.data.vorbis_comment
                    for i in 0..<Int(vc.num_comments) {
                        let entry = vc.comments[i]
                        guard let bytes = entry.entry else { continue }
                        let text = String(decoding: UnsafeBufferPointer(start: bytes, count: Int(entry.length)), as: UTF8.self)
                        guard let eq = text.firstIndex(of: "=") else { continue }
                        me.tags[text[..<eq].uppercased()] = String(text[text.index(after: eq)...])
                    }
                }
            },
            { _, status, client in
                let me = Unmanaged<FLACSource>.fromOpaque(client!).takeUnretainedValue()
                if me.error == nil { me.error = status }
            },
            Unmanaged.passUnretained(self).toOpaque())
        guard status == FLAC__STREAM_DECODER_INIT_STATUS_OK else {
            FLAC__stream_decoder_delete(d)
            throw TapedeckError(.io, "Could not start decoding \(path) (libFLAC init status \(status.rawValue)).")
        }
    }

    deinit { FLAC__stream_decoder_delete(decoder) }

    /// Decodes the next metadata block or frame. - Returns: false if libFLAC failed fatally.
    func processSingle() -> Bool { FLAC__stream_decoder_process_single(decoder) != 0 }

    /// Reads all metadata blocks. - Returns: false if libFLAC failed fatally.
    func processMetadata() -> Bool { FLAC__stream_decoder_process_until_end_of_metadata(decoder) != 0 }

    /// Finishes decoding. - Returns: false if MD5 checking was on and the signature did not match.
    func finish() -> Bool { FLAC__stream_decoder_finish(decoder) != 0 }

    /// Rewinds to the start of the stream (metadata is read again).
    func reset() -> Bool {
        error = nil
        return FLAC__stream_decoder_reset(decoder) != 0
    }

    /// Forgets the recorded decoding error.
    func clearError() { error = nil }

    var state: FLAC__StreamDecoderState { FLAC__stream_decoder_get_state(decoder) }
    var atEnd: Bool { state == FLAC__STREAM_DECODER_END_OF_STREAM }
    var stateText: String { String(cString: FLAC__stream_decoder_get_resolved_state_string(decoder)) }

    /// The byte offset just past the last frame decoded.
    var decodePosition: Int64? {
        var p: FLAC__uint64 = 0
        return FLAC__stream_decoder_get_decode_position(decoder, &p) != 0 ? Int64(p) : nil
    }

    /// A sentence describing a decoding error.
    static func describe(_ status: FLAC__StreamDecoderErrorStatus) -> String {
        switch status {
        case FLAC__STREAM_DECODER_ERROR_STATUS_LOST_SYNC: "lost frame sync (damaged or foreign data)"
        case FLAC__STREAM_DECODER_ERROR_STATUS_BAD_HEADER: "a frame header is damaged"
        case FLAC__STREAM_DECODER_ERROR_STATUS_FRAME_CRC_MISMATCH: "a frame failed its CRC check"
        case FLAC__STREAM_DECODER_ERROR_STATUS_UNPARSEABLE_STREAM: "the stream uses features this decoder cannot parse"
        default: "decoder error \(status.rawValue)"
        }
    }
}
