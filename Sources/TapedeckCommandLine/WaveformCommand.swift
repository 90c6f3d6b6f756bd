import ArgumentParser
import Foundation
import TapedeckApp
import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

struct WaveformCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "waveform",
        abstract: "Draw a take's waveform as a PNG picture (or write its peaks file).",
        usage: "tapedeck waveform [<options>] <reference> --output <file>",
        discussion: """
            The output's extension chooses what is written, as audiowaveform does: .png draws the picture; \
            .dat writes the peaks (audiowaveform's binary format, version 1, 16-bit: the lowest and highest \
            sample of each block of frames). `-o -` writes the PNG to standard output. The peaks come from \
            the take's peaks file when there is one (made when a take is drawn, kept in \
            $XDG_CACHE_HOME/tapedeck/waveforms), else from decoding the take once.
            """)

    @Argument(help: "SESSION/TAKE, a short id from `tapedeck list`, or `last`.", completion: TakeCompletion.kind(.takes))
    var reference: String

    @Option(name: .shortAndLong, help: ArgumentHelp("The file to write (.png or .dat), or - for a PNG on standard output.", valueName: "file"))
    var output: String

    @Option(help: "The picture's width in pixels.")
    var width = 1200

    @Option(help: "The picture's height in pixels.")
    var height = 240

    @Flag(help: "Replace the output file if it exists.")
    var force = false

    @OptionGroup var global: GlobalOptions

    @MainActor
    mutating func run() async throws {
        try await reportingErrors {
            guard WaveformImage.widths.contains(width) else {
                throw TapedeckError(.invalidArgument, "--width \(width): give \(WaveformImage.widths.lowerBound) to \(WaveformImage.widths.upperBound) pixels.")
            }
            guard WaveformImage.heights.contains(height) else {
                throw TapedeckError(.invalidArgument, "--height \(height): give \(WaveformImage.heights.lowerBound) to \(WaveformImage.heights.upperBound) pixels.")
            }
            let toStdout = output == "-"
            let ext = toStdout ? "png" : URL(fileURLWithPath: output).pathExtension.lowercased()
            guard ext == "png" || ext == "dat" else {
                throw TapedeckError(.invalidArgument, "-o \(output): the name must end in .png (a picture) or .dat (the peaks), or be - for a PNG on standard output.")
            }
            if toStdout, Terminal.stdoutIsTerminal {
                throw TapedeckError(.invalidArgument, "Refusing to write a PNG picture to the terminal. Redirect it (-o - > take.png) or name a file with -o.")
            }
            let target = URL(fileURLWithPath: output)
            var isFolder: ObjCBool = false
            if !toStdout, !(FileManager.default.fileExists(atPath: target.deletingLastPathComponent().path, isDirectory: &isFolder) && isFolder.boolValue) {
                throw TapedeckError(.notFound, "The folder \(target.deletingLastPathComponent().path) does not exist. Create it, or choose another file with -o.")
            }
            if !toStdout, !force, FileManager.default.fileExists(atPath: target.path) {
                throw TapedeckError(.alreadyExists, "\(target.path) exists already; it was left as it is. Add --force to replace it, or choose another name with -o.")
            }
            let studio = try await global.makeStudio()
            let (take, session) = try studio.store.resolveTake(reference)
            guard take.state != .recording else {
                throw TapedeckError(.busy, "Take \"\(session.name)/\(take.name)\" is being recorded. Draw it when the recording has stopped.")
            }
            let url = try studio.store.storage.audioURL(for: take)
            let waveforms = studio.makeWaveforms()
            let partials = PartialFiles()
            let signals = try SignalTrap(signals: [SIGINT, SIGTERM, SIGHUP]) { _ in partials.stop() }
            defer { signals.cancel() }
            let (width, height) = (self.width, self.height)
            let bytes: [UInt8] = try await Task.detached {
                let peaks = try waveforms.peaks(for: take, at: url, stoppingWith: partials)
                return ext == "dat" ? peaks.datFile : try WaveformImage(width: width, height: height).png(of: peaks)
            }.value
            if toStdout {
                bytes.withUnsafeBytes { StandardOutput.write(bytes: $0) }
                return
            }
            try Self.place(bytes, at: target, replacing: force)
            let what = ext == "png" ? "Drew the waveform of" : "Wrote the peaks of"
            print("\(what) \(Terminal.safe(session.name))/\(Terminal.safe(take.name)) (\(Terminal.clock(take.seconds))) into \(Terminal.safe(target.path))\(ext == "png" ? " (\(width)×\(height))" : "").")
        }
    }

    /// Writes `bytes` to a temporary file beside `target`, then moves it into place: never a
    /// half-written picture, and an existing file is replaced only when asked.
    static func place(_ bytes: [UInt8], at target: URL, replacing: Bool) throws {
        let temporary = target.deletingLastPathComponent().appendingPathComponent(".\(target.lastPathComponent).tapedeck-\(getpid()).tmp")
        let fd = open(temporary.path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o666)
        guard fd >= 0 else { throw TapedeckError.system(errno, while: "create \(temporary.path)") }
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let closed = close(fd) == 0
        defer { unlink(temporary.path) }
        guard written == bytes.count, closed else { throw TapedeckError(.io, "Could not write \(target.path) (is the disk full?). Nothing was left behind.") }
        if replacing {
            guard rename(temporary.path, target.path) == 0 else { throw TapedeckError.system(errno, while: "replace \(target.path)") }
        } else {
            guard link(temporary.path, target.path) == 0 else {
                if errno == EEXIST { throw TapedeckError(.alreadyExists, "\(target.path) exists already; it was left as it is. Add --force to replace it.") }
                throw TapedeckError.system(errno, while: "create \(target.path)")
            }
        }
    }
}
