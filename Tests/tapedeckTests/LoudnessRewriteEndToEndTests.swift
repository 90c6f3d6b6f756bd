import Foundation
import TapedeckTesting
import Testing

/// `tapedeck loudness` on imported WAVs that carry other programs' chunks (issue 37, defect 3):
/// a WAV `fmt data _PMX id3(17 MiB) LIST(INFO)` became `fmt data bext iXML` with exit 0; a
/// chunk of 4–16 MiB after the audio trapped (SIGILL) and `loudness --all` died at that take.
/// Checked by python's own walk of the RIFF chunks.
@Suite("loudness rewrites keep other programs' chunks", .endToEnd, .serialized)
struct LoudnessRewriteEndToEndTests {
    /// Writes a 2 s 16-bit stereo WAV: `fmt `, `data`, then (when their sizes are not 0) an XMP
    /// `_PMX` packet and an `id3 ` chunk, then `LIST INFO`.
    static let maker = """
        import math, struct, sys
        path, pmx, id3 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
        def chunk(cid, body): return cid + struct.pack('<I', len(body)) + body + (b'\\0' if len(body) & 1 else b'')
        def pattern(n, seed): return (bytes((i * 31 + seed) & 255 for i in range(65537)) * (n // 65537 + 1))[:n]
        rate, frames = 48000, 96000
        pcm = b''.join(struct.pack('<hh', int(8000 * math.sin(2 * math.pi * 440 * i / rate)), int(6000 * math.sin(2 * math.pi * 660 * i / rate))) for i in range(frames))
        body = chunk(b'fmt ', struct.pack('<HHIIHH', 1, 2, rate, rate * 4, 4, 16)) + chunk(b'data', pcm)
        if pmx: body += chunk(b'_PMX', (b'<?xpacket begin="" id="W5M0MpCehiHzreSzNTczkc9d"?>' + pattern(pmx, 1))[:pmx])
        if id3: body += chunk(b'id3 ', (b'ID3\\x04\\x00\\x00' + pattern(id3, 2))[:id3])
        body += chunk(b'LIST', b'INFO' + chunk(b'INAM', b'Cover test\\0') + chunk(b'IART', b'Someone\\0'))
        open(path, 'wb').write(b'RIFF' + struct.pack('<I', 4 + len(body)) + b'WAVE' + body)
        """

    /// Compares two WAV files' chunks: which of the first's chunks (id and bytes) the second
    /// lacks, whether their `data` chunks are identical, the second's chunk ids and its bext
    /// loudness fields. Fails on anything after the audio that is not a whole chunk, and on a
    /// RIFF size that is not the file's.
    static let compare = """
        import hashlib, json, struct, sys
        def chunks(p):
            b = open(p, 'rb').read()
            assert b[:4] == b'RIFF' and b[8:12] == b'WAVE', p
            assert struct.unpack('<I', b[4:8])[0] == len(b) - 8, 'RIFF size of ' + p
            i, out = 12, []
            while i < len(b):
                assert i + 8 <= len(b), 'stray bytes at %d of %s' % (i, p)
                cid, size = b[i:i+4].decode('latin-1'), struct.unpack('<I', b[i+4:i+8])[0]
                assert i + 8 + size <= len(b), '%r runs past the end of %s' % (cid, p)
                body = b[i+8:i+8+size]
                e = dict(id=cid, size=size, sha=hashlib.sha256(body).hexdigest())
                if cid == 'bext': e['loudness'] = list(struct.unpack('<5h', body[412:422]))
                out.append(e)
                i += 8 + size + (size & 1)
            return out
        old, new = chunks(sys.argv[1]), chunks(sys.argv[2])
        key = lambda e: (e['id'], e['size'], e['sha'])
        kept = [key(e) for e in new]
        data = lambda cs: [e['sha'] for e in cs if e['id'] == 'data']
        print(json.dumps(dict(missing=[e['id'] for e in old if key(e) not in kept], sameAudio=data(old) == data(new),
                              ids=[e['id'] for e in new], bext=next((e['loudness'] for e in new if e['id'] == 'bext'), None))))
        """

    static func makeWAV(_ path: String, pmx: Int, id3: Int) async throws {
        let r = try await CLIHarness.tool("python3", ["-c", maker, path, String(pmx), String(id3)])
        try #require(r.status == 0, "\(r.stderr)")
    }

    static func compared(_ original: String, _ now: String) async throws -> [String: Any] {
        let r = try await CLIHarness.tool("python3", ["-c", compare, original, now])
        try #require(r.status == 0, "\(r.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
    }

    static func folder(_ cli: CLIHarness) throws -> String {
        let folder = cli.library.path + "-src"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        return folder
    }

    @Test("an imported WAV with a 5 MiB XMP packet, a 17 MiB id3 chunk and LIST INFO after its audio keeps them all, byte for byte, and gets its loudness")
    func keepsEveryChunk() async throws {
        let cli = try CLIHarness()
        let folder = try Self.folder(cli)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let source = folder + "/cover.wav"
        try await Self.makeWAV(source, pmx: 5 << 20, id3: (17 << 20) + 1)
        let imported = try await cli.run("import", source, "--json")
        try #require(imported.status == 0, "\(imported.stderr)")
        let take = try #require((try JSONSerialization.jsonObject(with: Data(imported.stdout.utf8)) as? [[String: Any]])?.first)
        let path = try #require(take["path"] as? String)

        let r = try await cli.run("loudness", "last")
        #expect(r.status == 0, "\(r.stderr)")
        let c = try await Self.compared(source, path)
        #expect((c["missing"] as? [String])?.isEmpty == true, "chunks lost: \(c)")
        #expect(c["sameAudio"] as? Bool == true, "\(c)")
        #expect((c["ids"] as? [String])?.contains("bext") == true, "\(c)")
        let fields = try #require(c["bext"] as? [Int])
        let integrated = try #require((try await cli.takes().first?["loudness"] as? [String: Any])?["integrated"] as? Double)
        #expect(abs(Double(fields[0]) - integrated * 100) <= 1, "\(fields) \(integrated)")
        // And again: nothing grows or goes.
        #expect(try await cli.run("loudness", "last").status == 0)
        let again = try await Self.compared(path, path)
        #expect(again["ids"] as? [String] == c["ids"] as? [String], "\(again)")
        #expect(try await CLIHarness.tool("sox", [path, "-n"]).status == 0)
    }

    @Test("`loudness --all` goes on past a take whose file it cannot change: that file is left as it was, the take named, exit 74")
    func allGoesOnPastABadTake() async throws {
        let cli = try CLIHarness()
        let folder = try Self.folder(cli)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await Self.makeWAV(folder + "/plain.wav", pmx: 0, id3: 0)
        try await Self.makeWAV(folder + "/xmp.wav", pmx: 6 << 20, id3: 0)
        let imported = try await cli.run("import", folder + "/plain.wav", folder + "/xmp.wav", "--session", "S", "--json")
        try #require(imported.status == 0, "\(imported.stderr)")
        let takes = try #require(try JSONSerialization.jsonObject(with: Data(imported.stdout.utf8)) as? [[String: Any]])
        let plain = try #require(takes.first { $0["name"] as? String == "plain" }?["path"] as? String)
        let xmp = try #require(takes.first { $0["name"] as? String == "xmp" }?["path"] as? String)
        // A tagger appends an ID3v1 tag to the first take's file: bytes after the audio that are
        // not a RIFF chunk, which Tapedeck will not guess about.
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: plain))
        try handle.seekToEnd()
        try handle.write(contentsOf: Array("TAG".utf8) + [UInt8](repeating: 0x41, count: 125))
        try handle.close()
        let damaged = try Data(contentsOf: URL(fileURLWithPath: plain))

        let r = try await cli.run("loudness", "--all")
        #expect(r.status == 74, "\(r.status) \(r.stderr)")
        #expect(r.stderr.contains("S/plain") && r.stderr.contains("left the file as it was") && r.stderr.contains("stored in the library"), "\(r.stderr)")
        #expect(!r.stderr.contains("S/xmp"), "\(r.stderr)")
        #expect(r.stdout.contains("S/xmp"), "the take after it was measured: \(r.stdout)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: plain)) == damaged, "not a byte of it changed")
        let c = try await Self.compared(folder + "/xmp.wav", xmp)
        #expect((c["missing"] as? [String])?.isEmpty == true && c["sameAudio"] as? Bool == true, "\(c)")
        #expect((c["bext"] as? [Int])?.first.map { $0 != 0x7FFF } == true, "\(c)")
    }
}
