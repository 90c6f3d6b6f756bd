import Foundation
import Testing

/// Waveform overviews: drawn while a take is written or imported, kept in the cache folder,
/// checked sample by sample by an independent reader (python's `wave`), and `tapedeck waveform`'s
/// pictures and peaks files.
@Suite("waveforms end to end", .endToEnd, .serialized)
struct WaveformEndToEndTests {
    /// Python: the audiowaveform .dat file's blocks against the WAV's samples (min and max over
    /// all channels of each block of frames-per-point frames); prints "ok POINTS PERPOINT".
    static let checkPeaks = #"""
import struct, sys, wave
dat, wav = open(sys.argv[1], "rb").read(), wave.open(sys.argv[2])
version, flags, rate, per, length = struct.unpack("<iIiiI", dat[:20])
assert version == 1 and flags == 0 and rate == wav.getframerate(), (version, flags, rate)
assert wav.getsampwidth() == 2
ch, n = wav.getnchannels(), wav.getnframes()
samples = struct.unpack("<%dh" % (n * ch), wav.readframes(n))
assert length == (n + per - 1) // per, (length, n, per)
for i in range(length):
    block = samples[i * per * ch:(i + 1) * per * ch]
    lo, hi = struct.unpack("<hh", dat[20 + 4 * i:24 + 4 * i])
    assert (lo, hi) == (min(block), max(block)), (i, lo, hi, min(block), max(block))
print("ok", length, per)
"""#

    /// Python: a PNG's size, and whether its middle column is drawn (the waveform's colour).
    static let checkPNG = #"""
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n"
pos, chunks = 8, {}
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    assert zlib.crc32(kind + body) == struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])[0], kind
    chunks[kind] = chunks.get(kind, b"") + body
    pos += 12 + n
w, h, depth, colour = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
assert depth == 8 and colour == 3
rows = zlib.decompress(chunks[b"IDAT"])
drawn = sum(1 for y in range(h) if rows[y * (w + 1) + 1 + w // 2] == 1)
print(w, h, drawn)
"""#

    static func python(_ script: String, _ args: [String]) async throws -> String {
        let r = try await CLIHarness.tool("python3", ["-c", script] + args)
        #expect(r.status == 0, "\(r.stderr)")
        return r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test("a recorded take's peaks file is written as it records and matches its samples; waveform draws it; delete forgets it")
    func recorded() async throws {
        var cli = try CLIHarness()
        let cache = cli.library.path + "-cache"
        cli.extraEnvironment["XDG_CACHE_HOME"] = cache
        let r = try await cli.run("record", "--session", "Peaks", "--name", "Sine", "--duration", "3s", "--json")
        #expect(r.status == 0, "\(r.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        let take = try #require(report["take"] as? [String: Any])
        let id = try #require(take["id"] as? String)
        let path = try #require(take["path"] as? String)
        let dat = "\(cache)/tapedeck/waveforms/\(id).dat"
        #expect(FileManager.default.fileExists(atPath: dat), "no peaks file after recording")
        let checked = try await Self.python(Self.checkPeaks, [dat, path])
        #expect(checked.hasPrefix("ok "), "\(checked)")
        let points = Int(checked.split(separator: " ")[1]) ?? 0
        #expect(points >= 2048 && points <= 4096)

        let png = cli.library.path + "-w.png"
        var w = try await cli.run("waveform", "Peaks/Sine", "-o", png, "--width", "400", "--height", "100")
        #expect(w.status == 0, "\(w.stderr)")
        #expect(w.stdout.contains("Drew the waveform of Peaks/Sine"))
        // The null sine at half scale fills the middle half of every column.
        let parts = try await Self.python(Self.checkPNG, [png]).split(separator: " ").compactMap { Int($0) }
        let (width, height, drawn) = (parts[0], parts[1], parts[2])
        #expect(width == 400 && height == 100)
        #expect(drawn >= 48 && drawn <= 52, "\(drawn) rows drawn")
        w = try await cli.run("waveform", "Peaks/Sine", "-o", png)
        #expect(w.status == 73 && w.stderr.contains("--force"))
        w = try await cli.run("waveform", "Peaks/Sine", "-o", png, "--force")
        #expect(w.status == 0, "\(w.stderr)")
        let datOut = cli.library.path + "-w.dat"
        w = try await cli.run("waveform", "Peaks/Sine", "-o", datOut)
        #expect(w.status == 0)
        #expect(try Data(contentsOf: URL(fileURLWithPath: datOut)) == Data(contentsOf: URL(fileURLWithPath: dat)))
        w = try await cli.run("waveform", "Peaks/Sine", "-o", cli.library.path + "-w.jpg")
        #expect(w.status == 64 && w.stderr.contains(".png"))
        w = try await cli.run("waveform", "Peaks/Sine", "-o", png, "--force", "--width", "3")
        #expect(w.status == 64 && w.stderr.contains("--width"))
        // Without its peaks file (a new cache), the take is decoded: the same peaks.
        try FileManager.default.removeItem(atPath: dat)
        w = try await cli.run("waveform", "Peaks/Sine", "-o", datOut, "--force")
        #expect(w.status == 0)
        #expect(try await Self.python(Self.checkPeaks, [datOut, path]).hasPrefix("ok "))
        // A damaged peaks file is never trusted.
        try Data("garbage".utf8).write(to: URL(fileURLWithPath: dat))
        w = try await cli.run("waveform", "Peaks/Sine", "-o", datOut, "--force")
        #expect(try await Self.python(Self.checkPeaks, [datOut, path]).hasPrefix("ok "))

        #expect(try await cli.run("delete", "Peaks/Sine", "--yes").status == 0)
        #expect(!FileManager.default.fileExists(atPath: dat), "the peaks file outlived its take")
    }

    @Test("an imported file gets its peaks file as it is read")
    func imported() async throws {
        var cli = try CLIHarness()
        let cache = cli.library.path + "-cache"
        cli.extraEnvironment["XDG_CACHE_HOME"] = cache
        let source = cli.library.path + "-tone.wav"
        let sox = try await CLIHarness.tool("sox", ["-n", "-r", "44100", "-c", "1", "-b", "16", source, "synth", "2", "sine", "300", "vol", "0.25"])
        #expect(sox.status == 0)
        let r = try await cli.run("import", source, "--session", "Imported")
        #expect(r.status == 0, "\(r.stderr)")
        let sessions = try await cli.listJSON()
        let take = try #require((sessions.first?["takes"] as? [[String: Any]])?.first)
        let dat = "\(cache)/tapedeck/waveforms/\(try #require(take["id"] as? String)).dat"
        let path = try #require(take["path"] as? String)
        #expect(try await Self.python(Self.checkPeaks, [dat, path]).hasPrefix("ok "))
    }
}
