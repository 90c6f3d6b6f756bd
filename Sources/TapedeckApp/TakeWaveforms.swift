public import TapedeckCore
public import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Waveform overviews of takes (`WaveformPeaks`), kept as small peaks files (audiowaveform's
/// `.dat`) in a cache folder outside the library, one per take (`TAKE-ID.dat`): written when a
/// take is finished or imported, or the first time a take without one is drawn, by decoding it
/// once. A file that does not cover its take's frames (the take was repaired, the file is
/// damaged or foreign) is computed again, never trusted. The library itself is never written.
///
/// A plain value; any thread. Its methods block on disk I/O (and ``peaks(for:at:stoppingWith:)``
/// on decoding), so call them off the main actor.
public struct TakeWaveforms: Sendable {
    /// Where the peaks files go; `nil` keeps none (every drawing decodes its take).
    public let folder: URL?
    private let decoders: [any AudioDecoder]

    public init(folder: URL?, decoders: [any AudioDecoder]) {
        self.folder = folder
        self.decoders = decoders
    }

    /// The overview of `take` (whose audio is at `url`): from its peaks file when that covers
    /// the take, else decoded now and stored.
    /// - Throws: `.notFound`/`.corruptFile` when the take's file is missing or unreadable (with
    ///   the doctor hint), `.cancelled` when `partials` is stopped.
    public func peaks(for take: Take, at url: URL, stoppingWith partials: PartialFiles = PartialFiles()) throws -> WaveformPeaks {
        if let stored = stored(for: take) { return stored }
        guard let decoder = decoders.first(where: { $0.encodings.contains(take.encoding) }) else {
            throw TapedeckError(.unsupportedFormat, "No decoder in this build reads \(take.encoding) takes.")
        }
        let reader = try LoudnessScanner.openTake(take, at: url, decoder: decoder)
        defer { reader.close() }
        var builder = WaveformBuilder(sampleRate: reader.format.sampleRate)
        let channels = reader.format.channels
        let frames = try reader.forEachFloatBlock(stoppingWith: partials) { builder.add($0, frames: $1, channels: channels) }
        try LoudnessScanner.checkLength(take, read: frames, rate: reader.format.sampleRate, at: url)
        let peaks = builder.peaks()
        store(peaks, for: take)
        return peaks
    }

    /// The stored overview of `take`, when there is one that covers its frames.
    public func stored(for take: Take) -> WaveformPeaks? {
        guard let file = file(for: take.id),
              let data = try? Self.readSmallFile(file, limit: 8 << 20),
              let peaks = WaveformPeaks(datFile: data) else { return nil }
        let covered = Int64(peaks.count) * Int64(peaks.framesPerPoint)
        guard peaks.sampleRate == take.format.sampleRate,
              take.frames == 0 ? peaks.count == 0 : (covered >= take.frames && covered - take.frames < Int64(peaks.framesPerPoint)) else { return nil }
        return peaks
    }

    /// Stores `peaks` as `take`'s peaks file (atomically: a temporary file renamed over it).
    /// Best effort: a cache that cannot be written only means decoding again next time.
    public func store(_ peaks: WaveformPeaks, for take: Take) {
        guard let folder, let file = file(for: take.id), (try? FileModes.makePrivateFolder(folder)) != nil else { return }
        let temporary = folder.appendingPathComponent(".\(take.id).\(getpid()).tmp")
        // One a crashed process of the same id left is garbage.
        unlink(temporary.path)
        let bytes = peaks.datFile
        let fd = open(temporary.path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        if written != bytes.count || rename(temporary.path, file.path) != 0 { unlink(temporary.path) }
    }

    /// Removes `takeID`'s peaks file (after the take is deleted).
    public func forget(_ takeID: String) {
        if let file = file(for: takeID) { unlink(file.path) }
    }

    /// The peaks file of a take id; `nil` without a folder or for an id that is not a plain name.
    private func file(for takeID: String) -> URL? {
        guard let folder, !takeID.isEmpty, takeID.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" }) else { return nil }
        return folder.appendingPathComponent("\(takeID).dat")
    }

    /// Reads a regular file of at most `limit` bytes (never following a link).
    static func readSmallFile(_ url: URL, limit: Int) throws -> [UInt8] {
        let fd = open(url.path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw TapedeckError.system(errno, while: "open \(url.path)") }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, Int(info.st_size) <= limit else {
            throw TapedeckError(.corruptFile, "\(url.path) is not a small regular file.")
        }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n == bytes.count else { throw TapedeckError(.io, "Could not read \(url.path).") }
        return bytes
    }
}
