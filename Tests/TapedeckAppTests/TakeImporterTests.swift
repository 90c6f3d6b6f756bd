import Foundation
import Synchronization
import TapedeckApp
import TapedeckCore
import TapedeckTesting
import Testing

@Suite("Importing files")
struct TakeImporterTests {
    let format = AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .s16)

    /// Reads headerless PCM under the name importing uses for files that are neither WAV nor FLAC
    /// (libsndfile's decoder, "wav"), so a `.raw` file is transcoded with the library's encoder.
    struct RawAsOther: AudioDecoder {
        let raw: RawPCMEncoder
        var name: String { "wav" }
        var encodings: Set<String> { ["wav"] }
        func openReader(at url: URL) throws -> any TakeReader { try raw.openReader(at: url) }
    }

    /// The raw encoder, noting the metadata each writer is made with; with `failing`, every write
    /// fails as on a full disk.
    final class NotingEncoder: AudioEncoder {
        let raw: RawPCMEncoder
        let failing: Bool
        let metadata = Mutex<[TakeMetadata]>([])
        init(_ raw: RawPCMEncoder, failing: Bool = false) { self.raw = raw; self.failing = failing }
        var name: String { raw.name }
        var fileExtension: String { raw.fileExtension }
        func validate(_ format: AudioFormat) throws { try raw.validate(format) }
        func repair(fileAt url: URL) throws -> RepairResult { try raw.repair(fileAt: url) }
        func makeWriter(at url: URL, format: AudioFormat, metadata: TakeMetadata) throws -> any TakeWriter {
            self.metadata.withLock { $0.append(metadata) }
            let writer = try raw.makeWriter(at: url, format: format, metadata: metadata)
            return failing ? FailingWriter(wrapped: writer) : writer
        }
    }

    final class FailingWriter: TakeWriter {
        let wrapped: any TakeWriter
        init(wrapped: any TakeWriter) { self.wrapped = wrapped }
        func write(_ buffer: UnsafeRawPointer, frames: Int) throws {
            throw TapedeckError(.diskFull, "The disk is full (injected).")
        }
        func checkpoint() throws { try wrapped.checkpoint() }
        func finish() throws -> Int64 { try wrapped.finish() }
        func abandon() { wrapped.abandon() }
    }

    /// A `.raw` file of `frames` frames outside the library.
    func rawFile(_ name: String, frames: Int) throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-import-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let url = dir.appendingPathComponent("\(name).raw")
        try Data((0..<frames * format.bytesPerFrame).map { UInt8(truncatingIfNeeded: $0 &* 7) }).write(to: url)
        return url
    }

    /// Every regular file under `root`, relative.
    func files(under root: URL) -> [String] {
        (FileManager.default.enumerator(atPath: root.path)?.allObjects as? [String] ?? []).filter { path in
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: root.appendingPathComponent(path).path, isDirectory: &isDirectory)
                && !isDirectory.boolValue
        }
    }

    @Test("a transcoded file's tags carry the number the store gives its take, though the session was listed before")
    func transcodedTakeNumbers() throws {
        let storage = try InMemoryStorage()
        let raw = RawPCMEncoder(format: format)
        let encoder = NotingEncoder(raw)
        let importer = TakeImporter(storage: storage, encoder: encoder, decoders: [RawAsOther(raw: raw)])
        let session = try storage.createSession(named: "Imported")  // listed once, without takes
        var takes: [Take] = []
        for name in ["One", "Two", "Three"] {
            takes.append(try importer.importFile(try rawFile(name, frames: 1000), into: session))
        }
        #expect(takes.map(\.number) == [1, 2, 3])
        #expect(encoder.metadata.withLock { $0.map(\.takeNumber) } == [1, 2, 3])
        #expect(takes.allSatisfy { $0.state == .complete && $0.frames == 1000 })
    }

    @Test("a transcode that fails once the take's entry exists removes the entry and leaves no file")
    func failedTranscodeLeavesNothing() throws {
        let storage = try InMemoryStorage()
        let raw = RawPCMEncoder(format: format)
        let importer = TakeImporter(storage: storage, encoder: NotingEncoder(raw, failing: true), decoders: [RawAsOther(raw: raw)])
        let session = try storage.createSession(named: "Imported")
        #expect(throws: TapedeckError.self) { try importer.importFile(try rawFile("Full", frames: 1000), into: session) }
        #expect(try storage.session(id: session.id)?.takes.isEmpty == true, "the entry is removed")
        #expect(try storage.interruptedTakes().isEmpty)
        #expect(files(under: storage.rootURL).isEmpty, "\(files(under: storage.rootURL))")
    }
}
