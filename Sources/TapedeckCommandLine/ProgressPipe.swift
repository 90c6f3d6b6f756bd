import Foundation
import TapedeckApp
import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

/// `tapedeck export --progress-fd N`: progress for the program that runs the export (`tapedeck
/// serve` runs each export on request as such a child), one JSON line per take and report:
/// `{"kind":"progress","take":"S/T","framesDone":N,"totalFrames":M,"sampleRate":R}`. The
/// descriptor is made non-blocking (a reader that falls behind misses reports, never stalls the
/// export); when the reader has closed it (`EPIPE`), `onClosed` stops the export, as Ctrl-C
/// does. Made and used on the main actor; a write never blocks.
@MainActor
final class ProgressPipe {
    private let fd: Int32
    private let onClosed: () -> Void
    private var closed = false

    /// - Throws: `.invalidArgument` when `fd` is not an open descriptor this process can write.
    init(fd: Int32, onClosed: @escaping () -> Void) throws {
        let flags = fcntl(fd, F_GETFL)
        guard fd > 2, flags >= 0, flags & O_ACCMODE != O_RDONLY else {
            throw TapedeckError(.invalidArgument, "--progress-fd \(fd): not a descriptor open for writing (give one above 2 that the program running tapedeck opened, e.g. --progress-fd 3 with 3>progress.log).")
        }
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        self.fd = fd
        self.onClosed = onClosed
    }

    struct Line: Encodable {
        var kind = "progress"
        var take: String
        var framesDone: Int64
        var totalFrames: Int64
        var sampleRate: Int
    }

    /// Writes one line per job; a closed reader stops the export.
    func send(_ jobs: [TakeExporter.Job]) {
        guard !closed else { return }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var text = Data()
        for job in jobs {
            let line = Line(take: "\(job.item.session.name)/\(job.item.take.name)", framesDone: job.progress.framesDone,
                            totalFrames: job.progress.totalFrames, sampleRate: job.progress.sampleRate)
            guard let data = try? encoder.encode(line) else { continue }
            text.append(data)
            text.append(0x0A)
        }
        guard !text.isEmpty else { return }
        let result = text.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        // EAGAIN: the reader is behind, and this report is dropped (a write of at most
        // PIPE_BUF bytes into a pipe is whole or nothing).
        if result < 0 && (errno == EPIPE || errno == EBADF) {
            closed = true
            onClosed()
        }
    }
}
