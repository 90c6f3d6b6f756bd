import CSndfile
import Foundation
import TapedeckCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes one take's WAV file through libsndfile (RF64 with automatic downgrade to RIFF).
///
/// Single owner, not `Sendable`: create, use and finish it on one thread. The file is opened by
/// Tapedeck with `O_EXCL` (never overwritten; mode 0664 minus the umask) and handed to libsndfile,
/// which does not close it, so the writer can normalize the header and `fsync` after libsndfile
/// is done.
final class WAVTakeWriter: TakeWriter {
    /// The format frames are expected in.
    let format: AudioFormat
    /// The file's path.
    let path: String
    /// Whole frames written so far.
    private(set) var framesWritten: Int64 = 0

    private var fd: Int32
    private var handle: OpaquePointer?
    /// Whether a write failed (the disk is full): ``finish()`` then sizes the header from the
    /// whole frames actually in the file.
    private var writeFailed = false
    /// Whether the take's channel mask has been written over libsndfile's first header.
    private var layoutStated = false
    /// Allocates the file's blocks a few seconds ahead of the audio.
    private var preallocation = Preallocation()
    /// What the `bext` and iXML chunks say; its start date becomes the first frame's when known.
    private var metadata: TakeMetadata

    /// Creates the file at `path` and writes its header.
    /// - Thread: the writer thread that will own it. Blocks on disk I/O.
    /// - Throws: ``TapedeckError`` `.alreadyExists` if the file exists; an I/O error otherwise.
    init(path: String, format: AudioFormat, metadata: TakeMetadata) throws {
        self.format = format
        self.path = path
        self.metadata = metadata
        // Read and write: the header is read back to normalize it after libsndfile.
        fd = try PositionalFile.createNew(atPath: path)
        var info = SF_INFO()
        info.samplerate = Int32(format.sampleRate)
        info.channels = Int32(format.channels)
        info.format = Int32(SF_FORMAT_RF64) | Sndfile.subtype(for: format.sampleFormat)
        guard let handle = sf_open_fd(fd, Int32(SFM_WRITE), &info, 0 /* libsndfile must not close fd */) else {
            let reason = Sndfile.errorString(nil)
            close(fd)
            unlink(path)
            throw TapedeckError(.io, "Could not start the WAV file \(path): \(reason).")
        }
        self.handle = handle
        _ = sf_command(handle, Int32(SFC_RF64_AUTO_DOWNGRADE), nil, Int32(SF_TRUE))
        if format.sampleFormat.isFloat {
            _ = sf_command(handle, Int32(SFC_SET_ADD_PEAK_CHUNK), nil, Int32(SF_FALSE))
        }
        // RIFF INFO has a fixed set of fields: the user's tags with one of those names fill it.
        let fields = Dictionary(metadata.commentFields) { _, last in last }
        for (name, field) in [("TITLE", SF_STR_TITLE), ("ALBUM", SF_STR_ALBUM), ("TRACKNUMBER", SF_STR_TRACKNUMBER),
                              ("DATE", SF_STR_DATE), ("DESCRIPTION", SF_STR_COMMENT), ("ARTIST", SF_STR_ARTIST),
                              ("COPYRIGHT", SF_STR_COPYRIGHT), ("GENRE", SF_STR_GENRE)] {
            set(field, fields[name] ?? "")
        }
        set(SF_STR_SOFTWARE, "Tapedeck")
        // Broadcast Wave: bext and iXML before the audio, with room in iXML for what comes later.
        // libsndfile writes them into every header it writes; Tapedeck writes them again after.
        for (id, bytes) in [("bext", BroadcastWave.bext(metadata, format: format)), ("iXML", BroadcastWave.ixml(metadata, format: format) ?? [])] where !bytes.isEmpty {
            var chunk = SF_CHUNK_INFO()
            withUnsafeMutableBytes(of: &chunk.id) { raw in
                for (i, c) in id.utf8.enumerated() { raw[i] = c }
            }
            chunk.id_size = 4
            chunk.datalen = UInt32(bytes.count)
            let status = bytes.withUnsafeBytes { data -> Int32 in
                chunk.data = UnsafeMutableRawPointer(mutating: data.baseAddress)
                return sf_set_chunk(handle, &chunk)
            }
            if status != 0 {
                let reason = Sndfile.errorString(code: status)
                sf_close(handle)
                self.handle = nil
                close(fd)
                fd = -1
                unlink(path)
                throw TapedeckError(.io, "Could not start the WAV file \(path): libsndfile refused its \(id) chunk (\(reason)).")
            }
        }
    }

    /// The loudness goes into `bext` (version 2 fields) as the file is finished.
    func measured(_ loudness: Loudness) { metadata.loudness = loudness }

    /// The first frame's time of day goes into `bext` and iXML (TimeReference).
    func began(at date: Date, preRollFrames: Int64) {
        metadata.startDate = date
        metadata.preRollFrames = preRollFrames
        // Before the first write there is no header yet; the first write stamps it.
        if layoutStated { _ = try? BroadcastWave.stamp(metadata, format: format, in: RawFile(fd: fd, path: path, kind: "WAV")) }
    }

    deinit { abandon() }

    private func set(_ field: Int, _ value: String) {
        guard let handle, !value.isEmpty else { return }
        _ = sf_set_string(handle, Int32(field), value)
    }

    /// Appends `frames` interleaved frames, packed little-endian in ``format``.
    /// - Thread: the owning writer thread. Blocks on disk I/O.
    /// - Throws: ``TapedeckError`` `.diskFull` for ENOSPC/EDQUOT, `.io` for other failures; after a
    ///   failure, ``finish()`` finalizes what was written whole.
    func write(_ buffer: UnsafeRawPointer, frames: Int) throws {
        guard let handle else {
            throw TapedeckError(.internalError, "Wrote to the WAV writer for \(path) after it was closed.")
        }
        guard frames > 0 else { return }
        let bytes = frames * format.bytesPerFrame
        // The header is far smaller than the 64 KiB allowed for it here.
        preallocation.cover(fd, through: (framesWritten + Int64(frames)) * Int64(format.bytesPerFrame) + 65_536)
        errno = 0
        let written = sf_write_raw(handle, buffer, sf_count_t(bytes))
        let code = errno
        framesWritten += written / Int64(format.bytesPerFrame)
        guard written == sf_count_t(bytes) else {
            writeFailed = true
            throw failure(handle, errno: code, while: "write audio to \(path)")
        }
        if !layoutStated {
            // libsndfile writes its header, with a channel mask of its own choosing, on the first
            // write: state the take's layout in it at once, so a file a crash leaves before the
            // first checkpoint has it too (checkpoint and finish state it after each rewrite).
            layoutStated = true
            let file = RawFile(fd: fd, path: path, kind: "WAV")
            if let header = try? WAVHeader.read(from: file) { _ = try? header.normalize(in: file, layout: format.layout) }
            _ = try? BroadcastWave.stamp(metadata, format: format, in: file)
        }
    }

    /// Brings the header up to date (normalized, as ``finish()`` leaves it) and `fdatasync`s, so a
    /// crash after it loses nothing written before it.
    /// - Thread: the owning writer thread. Blocks on disk I/O.
    func checkpoint() throws {
        guard let handle else { return }
        errno = 0
        _ = sf_command(handle, Int32(SFC_UPDATE_HEADER_NOW), nil, 0)
        let code = errno
        if sf_error(handle) != Int32(SF_ERR_NO_ERROR) {
            throw failure(handle, errno: code, while: "update the header of \(path)")
        }
        let file = RawFile(fd: fd, path: path, kind: "WAV")
        try WAVHeader.read(from: file).normalize(in: file, retiringPeak: true, layout: format.layout)
        try BroadcastWave.stamp(metadata, format: format, in: file)
        guard fdatasync(fd) == 0 else { throw TapedeckError.system(errno, while: "flush \(path) to disk") }
    }

    /// Finalizes and normalizes the header, `fsync`s and closes the file.
    /// - Thread: the owning writer thread. Blocks on disk I/O.
    /// - Returns: frames in the file.
    func finish() throws -> Int64 {
        guard let handle else {
            throw TapedeckError(.internalError, "Finished the WAV writer for \(path) twice.")
        }
        self.handle = nil
        let fd = self.fd
        self.fd = -1
        defer { close(fd) }
        errno = 0
        let status = sf_close(handle)
        let code = errno
        if status != 0 {
            if code != 0 && status == Int32(SF_ERR_SYSTEM) { throw TapedeckError.system(code, while: "finish \(path)") }
            throw TapedeckError(.io, "Could not finish \(path): \(Sndfile.errorString(code: status)). The take can be repaired.")
        }
        Preallocation.trim(fd)
        let file = RawFile(fd: fd, path: path, kind: "WAV")
        if writeFailed {
            // A short write may have left part of a frame: keep the whole frames, with a header
            // that says so (in place, in constant time, whatever the take's length).
            let frames = try WAVRepair.repair(file).frames
            if (try? BroadcastWave.stamp(metadata, format: format, in: file)) != nil { try? file.sync() }
            return frames
        }
        try WAVHeader.read(from: file).normalize(in: file, retiringPeak: true, layout: format.layout)
        try BroadcastWave.stamp(metadata, format: format, in: file)
        try file.sync()
        return framesWritten
    }

    /// Closes the file without syncing it (after a failure); the file is left for repair.
    /// libsndfile may still write its header while closing; repair does not rely on it.
    /// - Thread: the owning writer thread. May block briefly on disk I/O.
    func abandon() {
        if let handle {
            _ = sf_close(handle)
            // sf_close rewrote the header with libsndfile's own channel mask: state the take's.
            let file = RawFile(fd: fd, path: path, kind: "WAV")
            if let header = try? WAVHeader.read(from: file) { _ = try? header.normalize(in: file, layout: format.layout) }
            _ = try? BroadcastWave.stamp(metadata, format: format, in: file)
        }
        handle = nil
        if fd >= 0 { close(fd) }
        fd = -1
    }

    private func failure(_ handle: OpaquePointer, errno code: Int32, while action: String) -> TapedeckError {
        if sf_error(handle) == Int32(SF_ERR_SYSTEM) && code != 0 {
            return TapedeckError.system(code, while: action)
        }
        return TapedeckError(.io, "Could not \(action): \(Sndfile.errorString(handle)).")
    }
}
