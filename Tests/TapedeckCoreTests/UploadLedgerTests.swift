import Foundation
import TapedeckCore
import Testing

@Suite("Upload ledger")
struct UploadLedgerTests {
    static func library() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-ledger-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    @Test("a verified take whose remote copy is in doubt is marked to be checked again; other records are left as they are")
    func markUnconfirmed() throws {
        let root = try Self.library()
        defer { try? FileManager.default.removeItem(at: root) }
        let ledger = UploadLedger(libraryURL: root, remote: "s3://b/p at http://h")
        let digest = ContentDigest(size: 10, sha256: String(repeating: "a", count: 64))
        try ledger.set("verified", UploadLedger.Record(state: .verified, key: "m/s/verified.wav", digest: digest))
        try ledger.set("failed", UploadLedger.Record(state: .failed, key: "m/s/failed.wav", reason: "down"))
        try ledger.set("pulled", UploadLedger.Record(state: .verified, key: "other/s/pulled.wav", digest: digest))

        #expect(try ledger.markUnconfirmed("verified", key: "m/s/verified.wav", reason: "its audio is missing there"))
        #expect(try ledger.markUnconfirmed("failed", reason: "x") == false, "only verified takes are marked")
        #expect(try ledger.markUnconfirmed("pulled", key: "m/s/pulled.wav", reason: "x") == false, "a copy pushed under another key is not this library's")
        #expect(try ledger.markUnconfirmed("absent", reason: "x") == false)
        let records = try ledger.records()
        #expect(records["verified"]?.unconfirmed == "its audio is missing there")
        #expect(records["verified"]?.state == .verified && records["verified"]?.digest == digest)
        #expect(records["failed"]?.unconfirmed == nil && records["pulled"]?.unconfirmed == nil)
        // Another remote's records are its own.
        #expect(try UploadLedger(libraryURL: root, remote: "elsewhere").records().isEmpty)
    }

    @Test("a ledger written before records could be in doubt still reads")
    func olderLedger() throws {
        let root = try Self.library()
        defer { try? FileManager.default.removeItem(at: root) }
        let json = """
            {"remotes": {"r": {"t": {"key": "m/s/t.wav", "state": "verified", "updated": "2025-01-01T00:00:00Z",
              "digest": {"size": 10, "sha256": "\(String(repeating: "b", count: 64))"}}}}, "schema": 1}
            """
        try Data(json.utf8).write(to: root.appendingPathComponent(UploadLedger.fileName))
        let record = try #require(try UploadLedger(libraryURL: root, remote: "r").records()["t"])
        #expect(record.state == .verified && record.unconfirmed == nil)
    }
}
