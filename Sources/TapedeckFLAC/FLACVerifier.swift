import CFLAC
import TapedeckCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Full decode of a FLAC file with MD5 checking; the body of ``FLACEncoder/verifyFile(at:)``.
/// Thread: any. Blocks on disk I/O.
enum FLACVerifier {
    static func verify(path: String) throws -> FLACFileSummary {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw TapedeckError.system(errno, while: "open \(path)") }
        defer { close(fd) }
        let header = try FLACHeader.read(from: FLACFile(fd: fd, path: path, kind: "FLAC"))
        let info = header.streamInfo
        func corrupt(_ why: String) -> TapedeckError {
            TapedeckError(.corruptFile, "\(path) failed verification: \(why).")
        }
        guard info.md5.contains(where: { $0 != 0 }) else {
            throw corrupt("it has no MD5 signature, so it was never finished; repair it first")
        }
        let source = try FLACSource(fd: fd, path: path, md5Checking: true, wantTags: true)
        var frames: Int64 = 0
        source.onFrame = { frame, _ in
            frames += Int64(frame.pointee.header.blocksize)
            return true
        }
        guard source.processMetadata() else { throw corrupt(source.stateText) }
        var idle = 0
        while !source.atEnd {
            let before = frames
            guard source.processSingle() else { throw corrupt(source.stateText) }
            if let error = source.error { throw corrupt("\(FLACSource.describe(error)) after \(frames) frames") }
            idle = frames == before ? idle + 1 : 0
            if idle > 64 { throw corrupt("the decoder stopped making progress after \(frames) frames") }
        }
        guard frames == Int64(info.totalSamples) else {
            throw corrupt("STREAMINFO promises \(info.totalSamples) frames but \(frames) decoded")
        }
        guard source.finish() else { throw corrupt("the decoded audio does not match the MD5 signature") }
        return FLACFileSummary(
            frames: frames,
            format: header.audioFormat,
            md5: MD5.hex(info.md5), tags: source.tags)
    }
}
