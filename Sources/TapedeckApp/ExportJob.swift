public import TapedeckCore
public import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One take to export.
public struct ExportItem: Sendable, Hashable {
    public var take: Take
    public var session: Session
    /// Tags for this export only (`export --tag`), over the take's own.
    public var extraTags: [String: String]
    /// The file to write; `nil` for "SESSION - TAKE.EXT" in the export's folder.
    public var target: URL?
    public init(take: Take, session: Session, extraTags: [String: String] = [:], target: URL? = nil) {
        self.take = take
        self.session = session
        self.extraTags = extraTags
        self.target = target
    }
}

/// What one finished export produced.
public struct ExportReport: Sendable, Hashable, Codable {
    public var takeID: String
    public var session: String
    public var take: String
    public var source: String
    public var output: String
    public var format: String
    /// The encoder's settings, e.g. `level=5`.
    public var settings: [String: String]
    public var sampleFormat: String
    public var seconds: Double
    public var frames: Int64
    public var bytes: Int64
    /// Output size over the size of the same audio as uncompressed PCM.
    public var compressionRatio: Double
    /// How the output was checked.
    public var verification: String
    public var wallSeconds: Double
}

/// Frames done of one export, readable from any thread.
public final class ExportProgress: Sendable {
    private let done = Atomic<Int64>(0)
    /// Frames of the source.
    public let totalFrames: Int64
    public let sampleRate: Int
    init(totalFrames: Int64, sampleRate: Int) {
        self.totalFrames = totalFrames
        self.sampleRate = sampleRate
    }
    /// Frames exported so far. - Thread: any; never blocks.
    public var framesDone: Int64 { done.load(ordering: .relaxed) }
    func add(_ n: Int) { done.add(Int64(n), ordering: .relaxed) }
}

/// The blocking work of one export, run on a thread of its own.
struct ExportJob {
    let item: ExportItem
    let sourceURL: URL
    let target: URL
    let decoder: any AudioDecoder
    /// Every decoder, to check the output of encoders that do not verify their own.
    let decoders: [any AudioDecoder]
    let encoder: any AudioEncoder
    let encoderSettings: [String: String]
    let sampleFormat: SampleFormat?
    let force: Bool
    let threads: Int
    let progress: ExportProgress
    /// The temporary files being written, for a stop signal to remove.
    let partials: PartialFiles
    /// The machine's identity for the file's metadata.
    var facts = TakeFacts()

    /// Decodes, encodes into a temporary file beside the target, verifies, and moves it into
    /// place (never replacing an existing file unless `force`). On failure nothing remains under
    /// the target name and the temporary file is removed.
    /// - Thread: a dedicated export thread. Blocks on disk I/O and CPU.
    func run() throws -> ExportReport {
        let started = ContinuousClock.now
        guard item.take.state != .recording else {
            throw TapedeckError(.busy, "Take \"\(item.session.name)/\(item.take.name)\" is still being recorded. Export it when the recording has finished.")
        }
        guard FileManager.default.fileExists(atPath: sourceURL.path) else {
            throw TapedeckError(.notFound, "The audio file of take \"\(item.session.name)/\(item.take.name)\" is missing (\(sourceURL.path)). Run `tapedeck doctor` to check the library.")
        }
        if !force, FileManager.default.fileExists(atPath: target.path) {
            throw TapedeckError(.alreadyExists, "\(target.path) exists already. Use --force to replace it, or --output to export elsewhere.")
        }
        let reader = try decoder.openReader(at: sourceURL)
        defer { reader.close() }
        let converter = sampleFormat.map { SampleConverter(from: reader.format, to: $0) }
        let outFormat = converter?.to ?? reader.format
        try encoder.validate(outFormat)

        let temp = target.deletingLastPathComponent().appendingPathComponent(PartialFiles.exportName(for: target.lastPathComponent))
        partials.register(temp)
        defer { partials.forget(temp) }
        var metadata = facts.metadata(for: item.take, sessionName: item.session.name)
        metadata.tags = item.take.tags.merging(item.extraTags) { _, extra in extra }
        let writer = try encoder.makeWriter(at: temp, format: outFormat, metadata: metadata, options: WriterOptions(threads: threads, verifyWhileWriting: true))
        var finished = false
        defer {
            if !finished {
                writer.abandon()
                unlink(temp.path)
            }
        }
        let chunk = 8192
        let input = UnsafeMutableRawPointer.allocate(byteCount: chunk * reader.format.bytesPerFrame, alignment: 16)
        defer { input.deallocate() }
        let output = converter.map { _ in UnsafeMutableRawPointer.allocate(byteCount: chunk * outFormat.bytesPerFrame, alignment: 16) }
        defer { output?.deallocate() }
        var frames: Int64 = 0
        var hash = ContentHash()
        let selfVerifying = writer.verifiesOutput
        while true {
            try partials.checkStopped()
            let n = try reader.read(into: input, maxFrames: chunk)
            if n == 0 { break }
            let block = converter != nil ? UnsafeRawPointer(output!) : UnsafeRawPointer(input)
            if let converter, let output { converter.convert(input, into: output, frames: n) }
            try writer.write(block, frames: n)
            if !selfVerifying { hash.add(block, count: n * outFormat.bytesPerFrame) }
            frames += Int64(n)
            progress.add(n)
        }
        let written = try writer.finish()
        finished = true
        guard written == frames else {
            unlink(temp.path)
            throw TapedeckError(.io, "Exporting \"\(item.take.name)\" wrote \(written) frames of \(frames); nothing was kept. Try again.")
        }
        var verification = writer.verification
        do {
            if verification == nil { verification = try verifyByDecoding(temp, frames: frames, format: outFormat, hash: hash) }
            // The take's time of day, loudness and markers, where the format has a place for
            // them (metadata only: the verified audio is not touched).
            try encoder.writeFacts(metadata, toFileAt: temp)
            if !item.take.markers.isEmpty { try encoder.writeMarkers(item.take.markers, toFileAt: temp) }
        } catch {
            unlink(temp.path)
            throw error
        }
        do {
            try Self.place(temp, at: target, replacing: force)
        } catch {
            unlink(temp.path)
            throw error
        }
        let bytes = (try? FileManager.default.attributesOfItem(atPath: target.path)[.size] as? Int64) ?? 0
        let pcm = Double(frames) * Double(outFormat.bytesPerFrame)
        let wall = ContinuousClock.now - started
        return ExportReport(
            takeID: item.take.id, session: item.session.name, take: item.take.name, source: sourceURL.path, output: target.path,
            format: encoder.name, settings: encoderSettings, sampleFormat: outFormat.sampleFormat.rawValue,
            seconds: outFormat.seconds(forFrames: frames), frames: frames, bytes: bytes,
            compressionRatio: pcm > 0 ? Double(bytes) / pcm : 0,
            verification: verification ?? "not verified (no decoder in this build reads \(encoder.name) files)",
            wallSeconds: Double(wall.components.seconds) + Double(wall.components.attoseconds) / 1e18)
    }

    /// Decodes the written file with the decoder for the encoder's format and compares its frame
    /// count and content hash with what was written. `nil` when no decoder reads that format.
    func verifyByDecoding(_ url: URL, frames: Int64, format: AudioFormat, hash: ContentHash) throws -> String? {
        guard let decoder = decoders.first(where: { $0.encodings.contains(encoder.name) }) else { return nil }
        let reader = try decoder.openReader(at: url)
        defer { reader.close() }
        let chunk = 8192
        // Sized by what the reader delivers, which may differ from what was written.
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: chunk * reader.format.bytesPerFrame, alignment: 16)
        defer { buffer.deallocate() }
        var decoded = ContentHash()
        var count: Int64 = 0
        while true {
            let n = try reader.read(into: buffer, maxFrames: chunk)
            if n == 0 { break }
            decoded.add(buffer, count: n * reader.format.bytesPerFrame)
            count += Int64(n)
        }
        if !encoder.isLossless {
            // A lossy file keeps the sound, not the samples: check that all of it decodes, at the
            // decoder's rate, to the length written.
            let expected = Double(frames) * Double(reader.format.sampleRate) / Double(format.sampleRate)
            guard reader.format.channels == format.channels, abs(Double(count) - expected) <= max(2, expected * 0.001) else {
                throw TapedeckError(.io, "Verifying \(url.lastPathComponent) failed: it decodes to \(count) frames at \(reader.format.sampleRate) Hz, expected \(Int64(expected.rounded())). Nothing was kept.")
            }
            return "decoded again: \(count) frames at \(reader.format.sampleRate) Hz, the full length (lossy: samples differ by design)"
        }
        guard reader.format == format, count == frames, decoded == hash else {
            throw TapedeckError(.io, "Verifying \(url.lastPathComponent) failed: it decodes to \(count) frames of \(reader.format) that differ from the \(frames) frames of \(format) written. Nothing was kept.")
        }
        return "decoded again and compared: \(frames) frames, content hash \(hash.hex)"
    }

    /// Moves the finished temporary file to `target`: with `replacing`, an atomic rename over it;
    /// otherwise the library's own never-replacing move (``DurableFiles/moveIntoPlace(_:_:)``: a
    /// hard link, or on file systems without them, FAT and exFAT sticks, a rename after checking
    /// the name is free). Syncs the folder.
    static func place(_ temp: URL, at target: URL, replacing: Bool) throws {
        if replacing {
            guard rename(temp.path, target.path) == 0 else { throw TapedeckError.system(errno, while: "move the export into place at \(target.path)") }
            try DurableFiles().syncDirectory(target.deletingLastPathComponent())
            return
        }
        do {
            try DurableFiles().moveIntoPlace(temp, target)
        } catch let error as TapedeckError where error.code == .alreadyExists {
            throw TapedeckError(.alreadyExists, "\(target.path) appeared while exporting. Use --force to replace it.")
        }
    }

    /// `Session 1 - Take 3.flac`, made safe for file systems: no `/`, control characters or
    /// leading dots and dashes, at most 200 bytes. A name that had to be cut gets the take's short
    /// id, `….1f2e3d4c.flac`: two takes whose names differ only past the cut must not get one
    /// file name (and replace each other's export with `--force`).
    static func fileName(for item: ExportItem, extension ext: String) -> String {
        var base = String("\(item.session.name) - \(item.take.name)".unicodeScalars.map { s -> Character in
            s == "/" || s == "\\" || s.properties.generalCategory == .control ? "_" : Character(s)
        })
        while let first = base.first, first == "." || first == "-" || first == " " { base.removeFirst() }
        var cut = false
        while base.utf8.count > 200 {
            base.removeLast()
            cut = true
        }
        if base.trimmingCharacters(in: .whitespaces).isEmpty { return "take-\(item.take.shortID).\(ext)" }
        return cut ? base + "." + item.take.shortID + "." + ext : base + "." + ext
    }
}

/// A 64-bit hash of a byte stream, to compare what was written with what decodes back: FNV-1a
/// over the stream's 64-bit words (a partial word is carried between calls, so the result does
/// not depend on how the stream was chunked), with an extra shift-xor so every byte counts.
struct ContentHash: Equatable {
    private var value: UInt64 = 0xCBF2_9CE4_8422_2325
    private var partial: UInt64 = 0
    private var partialBytes = 0
    private var length = 0
    private static let prime: UInt64 = 0x0000_0100_0000_01B3

    private mutating func mix(_ word: UInt64) {
        value = (value ^ word) &* Self.prime
        value ^= value >> 29
    }

    mutating func add(_ p: UnsafeRawPointer, count: Int) {
        length += count
        var i = 0
        while partialBytes != 0 && i < count {
            partial |= UInt64(p.load(fromByteOffset: i, as: UInt8.self)) << (8 * partialBytes)
            partialBytes += 1
            i += 1
            if partialBytes == 8 {
                mix(partial)
                partial = 0
                partialBytes = 0
            }
        }
        while i + 8 <= count {
            mix(UInt64(littleEndian: p.loadUnaligned(fromByteOffset: i, as: UInt64.self)))
            i += 8
        }
        while i < count {
            partial |= UInt64(p.load(fromByteOffset: i, as: UInt8.self)) << (8 * partialBytes)
            partialBytes += 1
            i += 1
        }
    }

    var hex: String {
        var h = self
        h.mix(partial ^ UInt64(length))
        return String(h.value, radix: 16)
    }
}
