import Foundation
@testable import TapedeckBundleStorage
import TapedeckCore
import TapedeckTesting
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif

@Suite("Bundle storage")
struct BundleStorageTests {
    func tempDir(_ label: String = "lib") throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-bundle-\(label)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    func record(_ store: BundleStorage, _ session: Session, _ name: String? = nil, bytes: Data = Data(repeating: 3, count: 512),
                overruns: [OverrunEvent] = []) throws -> Take {
        let p = try store.beginTake(in: session.id, named: name, format: .cdStereo, encoding: "raw", fileExtension: "raw", startDate: Date())
        try bytes.write(to: p.fileURL)
        return try store.finishTake(p, frames: Int64(bytes.count / 4), state: .complete, overruns: overruns)
    }

    /// The folder of a take's bundle.
    func bundleURL(_ store: BundleStorage, _ take: Take) throws -> URL {
        try store.audioURL(for: take).deletingLastPathComponent()
    }

    @Test("the storage conformance suite passes", arguments: StorageConformance.Area.allCases)
    func conformance(_ area: StorageConformance.Area) throws {
        try StorageConformance.check(area, make: { seam in try BundleStorage(rootURL: try tempDir(), seam: seam) },
                                   reopen: { try BundleStorage(rootURL: $0.rootURL) })
    }

    @Test("doctor's check for unnamed files waits for a delete between its entry and its audio, then finds nothing")
    func unnamedFilesDuringDelete() throws {
        let root = try tempDir()
        let outcome = try ConcurrentMaintenanceCheck.unnamedFilesDuringDelete(
            make: { seam in try BundleStorage(rootURL: root, seam: seam) }, other: { try BundleStorage(rootURL: root) },
            committedStep: "manifest committed")
        #expect(outcome.whileDeleting == nil, "reported while the delete ran: \(outcome.whileDeleting ?? [])")
        #expect(outcome.finally.isEmpty, "\(outcome.finally)")
    }

    @Test("doctor's check for damaged bundles waits for a session being created, then finds nothing")
    func damagedBundlesDuringCreate() throws {
        // Found by scripts/reliability-contention: doctor reported the new bundle, still without
        // its manifest, as damaged.
        let root = try tempDir()
        let other = try BundleStorage(rootURL: root)
        let seen = Mutex<[String]?>(nil)
        let hook = StepHook(StorageStep("createSession", "folder created")) {
            let done = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                let problems = (try? other.damagedBundles().map(\.problem)) ?? ["damagedBundles() threw"]
                seen.withLock { $0 = problems }
                done.signal()
            }
            // Held here, the new folder has no manifest; the check must wait for the lock.
            #expect(done.wait(timeout: .now() + 0.5) == .timedOut, "the check did not wait for the creation")
        }
        let store = try BundleStorage(rootURL: root, seam: hook)
        _ = try store.createSession(named: "New")
        let deadline = Date().addingTimeInterval(15)
        while seen.withLock({ $0 }) == nil && Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        #expect(seen.withLock { $0 } == [], "\(seen.withLock { $0 } ?? ["(the check never finished)"])")
    }

    @Test("manifest values survive reopening, and manifest.json is plain JSON in the documented shape")
    func manifestRoundTrip() throws {
        let root = try tempDir()
        let store = try BundleStorage(rootURL: root)
        let session = try store.createSession(named: "Gig at the Café / 2024")
        let overrun = OverrunEvent(frame: 100, frames: 20, date: Date(timeIntervalSince1970: 1_700_000_000.25), cause: "device")
        let take = try record(store, session, "Intro 🎙️", overruns: [overrun])
        let pending = try store.beginTake(in: session.id, named: nil, format: AudioFormat(sampleRate: 96_000, channels: 6, sampleFormat: .f32),
                                          encoding: "wav", fileExtension: "wav", startDate: Date())

        let reopened = try BundleStorage(rootURL: root)
        let listed = try #require(try reopened.sessions().first)
        #expect(listed.id == session.id && listed.name == session.name && listed.createdAt == session.createdAt)
        #expect(listed.takes.count == 2)
        #expect(listed.takes[0] == take, "a finished take reads back exactly as returned")
        #expect(listed.takes[0].overruns == [overrun])
        #expect(listed.takes[1] == pending.take, "a take being recorded reads back exactly as returned")
        let bundle = try bundleURL(reopened, listed.takes[0])
        #expect(bundle.lastPathComponent == "gig-at-the-cafe-2024-\(session.id.prefix(8)).tapedeck")
        #expect(bundle.deletingLastPathComponent().path == reopened.rootURL.path)

        let manifestURL = bundle.appendingPathComponent("manifest.json")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: manifestURL)) as? [String: Any])
        #expect(json["schema"] as? Int == 1)
        #expect(json["id"] as? String == session.id)
        #expect(json["name"] as? String == session.name)
        #expect((json["createdAt"] as? String)?.hasSuffix("Z") == true)
        let takes = try #require(json["takes"] as? [[String: Any]])
        #expect(takes.count == 2)
        #expect(takes[0]["file"] as? String == take.file.split(separator: "/").last.map(String.init))
        #expect(takes[0]["pendingFile"] == nil, "a finished take has no pending file")
        #expect(takes[0]["state"] as? String == "complete")
        #expect((takes[0]["format"] as? [String: Any])?["sampleFormat"] as? String == "s16")
        #expect(((takes[0]["overruns"] as? [[String: Any]])?.first?["cause"]) as? String == "device")
        #expect((takes[1]["pendingFile"] as? String)?.hasPrefix(".") == true)
        #expect(takes[1]["state"] as? String == "recording")

        // Python's json module (an independent parser) reads it too.
        let python = URL(fileURLWithPath: "/usr/bin/python3")
        if FileManager.default.isExecutableFile(atPath: python.path) {
            let process = Process()
            process.executableURL = python
            process.arguments = ["-c", "import json,sys; d=json.load(open(sys.argv[1])); assert d['schema']==1 and len(d['takes'])==2; print(d['takes'][0]['frames'])", manifestURL.path]
            let out = Pipe()
            process.standardOutput = out
            try process.run()
            process.waitUntilExit()
            #expect(process.terminationStatus == 0)
            let printed = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            #expect(printed.trimmingCharacters(in: .whitespacesAndNewlines) == String(take.frames))
        }
    }

    @Test("dates are written as ISO-8601 with microseconds and read back exactly")
    func dates() throws {
        for t in [0, 1_700_000_000.123456, -86_400.5, 253_402_300_799] as [Double] {
            let d = UTCTimestamp.quantize(Date(timeIntervalSince1970: t))
            let text = UTCTimestamp.format(d)
            #expect(UTCTimestamp.parse(text) == d, "\(text)")
        }
        #expect(UTCTimestamp.format(Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00.000000Z")
        #expect(UTCTimestamp.basic(Date(timeIntervalSince1970: 1_709_208_000.75)) == "20240229T120000Z")
        #expect(UTCTimestamp.compact(Date(timeIntervalSince1970: 1_709_208_000.75)) == "20240229-120000")
        #expect(UTCTimestamp.parse("2024-02-29T12:00:00+01:00") == Date(timeIntervalSince1970: 1_709_204_400))
        // Read and written again, a date's text does not drift (found by scripts/fuzz: a 2111 date
        // lost a microsecond per rewrite); where a Date cannot hold the microsecond (year 9999),
        // the first rewrite settles it.
        for text in ["2111-11-23T12:01:03.307261Z", "2026-11-23T12:01:03.310628Z", "1900-06-30T23:59:59.999999Z"] {
            #expect(UTCTimestamp.parse(text).map(UTCTimestamp.format) == text)
        }
        for text in ["9999-12-31T23:59:59.999999Z", "0001-01-01T00:00:00.000001Z"] {
            let once = try #require(UTCTimestamp.parse(text).map(UTCTimestamp.format))
            #expect(UTCTimestamp.parse(once).map(UTCTimestamp.format) == once, "\(text) → \(once)")
        }
        for bad in ["", "2024-02-30T00:00:00Z", "2024-01-01 00:00:00Z", "2024-01-01T00:00:00", "yesterday", "2024-01-01T24:00:00Z"] {
            #expect(UTCTimestamp.parse(bad) == nil, "\(bad)")
        }
    }

    @Test("a bundle opened in place serves its one session; creating or deleting sessions there is refused")
    func singleBundle() throws {
        let root = try tempDir()
        let library = try BundleStorage(rootURL: root)
        let session = try library.createSession(named: "Live Set")
        let take = try record(library, session, "Opener")
        let bundle = try bundleURL(library, take)

        let inPlace = try BundleStorage(rootURL: bundle)
        #expect(inPlace.isSingleBundle)
        let listed = try inPlace.sessions()
        #expect(listed.count == 1 && listed[0].id == session.id)
        #expect(listed[0].takes.map(\.name) == ["Opener"])
        let url = try inPlace.audioURL(for: listed[0].takes[0])
        #expect(url.deletingLastPathComponent().path == inPlace.rootURL.path)
        #expect(try Data(contentsOf: url) == Data(repeating: 3, count: 512))
        let refused = #expect(throws: TapedeckError.self) { try inPlace.createSession(named: "Another") }
        #expect(refused?.code == .invalidArgument)
        #expect(refused?.message.contains("open the folder") == true)
        #expect(throws: TapedeckError.self) { try inPlace.deleteSession(session.id) }

        // Recording and renaming in place; the library sees the result.
        let second = try record(inPlace, listed[0], "Closer")
        _ = try inPlace.renameSession(session.id, to: "Live Set (edited)")
        let seen = try #require(try library.sessions().first)
        #expect(seen.name == "Live Set (edited)")
        #expect(seen.takes.map(\.id) == [take.id, second.id])
        #expect(FileManager.default.fileExists(atPath: try library.audioURL(for: seen.takes[1]).path))

        // A .tapedeck path without a manifest is not opened (nor turned into a library).
        #expect(throws: TapedeckError.self) { try BundleStorage(rootURL: root.appendingPathComponent("nothing.tapedeck")) }
        #expect(!FileManager.default.fileExists(atPath: root.appendingPathComponent("nothing.tapedeck").path))
    }

    @Test("a bundle copied into another library is listed and played there")
    func copiedBundle() throws {
        let first = try BundleStorage(rootURL: try tempDir())
        let session = try first.createSession(named: "Travelling")
        let audio = Data((0..<4000).map { UInt8(truncatingIfNeeded: $0 * 31) })
        let take = try record(first, session, "Take to go", bytes: audio)
        let bundle = try bundleURL(first, take)

        let otherRoot = try tempDir("other")
        let other = try BundleStorage(rootURL: otherRoot)
        _ = try other.createSession(named: "Local")
        try FileManager.default.copyItem(at: bundle, to: otherRoot.appendingPathComponent("renamed by hand.tapedeck"))
        let listed = try other.sessions()
        #expect(listed.map(\.name) == [session.name, "Local"], "sorted by creation date")
        let copied = try #require(listed.first { $0.id == session.id }?.takes.first)
        let url = try other.audioURL(for: copied)
        #expect(url.path.hasPrefix(other.rootURL.path + "/renamed by hand.tapedeck/"))
        #expect(try Data(contentsOf: url) == audio)
        _ = try record(other, listed[0], "Recorded abroad")
        #expect(try other.sessions().first { $0.id == session.id }?.takes.count == 2)

        // A second copy of the same session is reported, not listed twice.
        try FileManager.default.copyItem(at: bundle, to: otherRoot.appendingPathComponent("zz-second-copy.tapedeck"))
        #expect(try other.sessions().count == 2)
        #expect(try other.damagedBundles().contains { $0.url.lastPathComponent == "zz-second-copy.tapedeck" && $0.problem.contains("copy") })
    }

    /// Rewrites a bundle's manifest through JSONSerialization.
    func editManifest(_ bundle: URL, _ edit: (inout [String: Any]) -> Void) throws {
        let url = bundle.appendingPathComponent("manifest.json")
        var object = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
        edit(&object)
        try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]).write(to: url)
    }

    @Test("a take id that two bundles share is refused, never resolved to the wrong session's take")
    func ambiguousTakeIDs() throws {
        let root = try tempDir()
        let store = try BundleStorage(rootURL: root)
        let take = try record(store, try store.createSession(named: "Original"), "Shared id")
        let bundle = try bundleURL(store, take)
        let copy = root.appendingPathComponent("forged.tapedeck")
        try FileManager.default.copyItem(at: bundle, to: copy)
        try editManifest(copy) { $0["id"] = "0b6a4c0e-9999-4222-8333-444455556666"; $0["name"] = "Forged" }
        let reopened = try BundleStorage(rootURL: root)
        #expect(try reopened.sessions().count == 2)
        #expect(throws: TapedeckError.self) { try reopened.deleteTake(take.id) }
        #expect(throws: TapedeckError.self) { try reopened.renameTake(take.id, to: "Hijacked") }
        #expect(FileManager.default.fileExists(atPath: try store.audioURL(for: take).path))
        #expect(FileManager.default.fileExists(atPath: copy.appendingPathComponent(take.file.split(separator: "/").last.map(String.init)!).path))
    }

    @Test("an interrupted take whose pending file is a symbolic link is skipped; the library still opens and recovers the rest")
    func interruptedTakeWithLink() throws {
        let root = try tempDir()
        let canary = try tempDir("canary")
        try Data("canary".utf8).write(to: canary.appendingPathComponent("x"))
        var store: BundleStorage? = try BundleStorage(rootURL: root)
        let session = try store!.createSession(named: "Crashed")
        let bad = try store!.beginTake(in: session.id, named: "Linked", format: .cdStereo, encoding: "raw", fileExtension: "raw", startDate: Date())
        let good = try store!.beginTake(in: session.id, named: "Plain", format: .cdStereo, encoding: "raw", fileExtension: "raw", startDate: Date())
        try Data(repeating: 1, count: 400).write(to: good.fileURL)
        try FileManager.default.createSymbolicLink(atPath: bad.fileURL.path, withDestinationPath: canary.appendingPathComponent("x").path)
        store = nil
        let reopened = try BundleStorage(rootURL: root)
        let interrupted = try reopened.interruptedTakes()
        #expect(interrupted.map(\.take.name) == ["Plain"])
        #expect(try Data(contentsOf: canary.appendingPathComponent("x")) == Data("canary".utf8))
    }

    // MARK: hostile manifests

    static let sessionID = "0b6a4c0e-1111-4222-8333-444455556666"

    static func takeJSON(id: String = "7f1e2d3c-aaaa-4bbb-8ccc-dddd00000001", name: String = "\"Take 1\"", number: String = "1",
                         file: String = "\"001-take-1-7f1e2d3c.wav\"", sampleRate: String = "48000", frames: String = "10",
                         extra: String = "") -> String {
        """
        {"id": "\(id)", "name": \(name), "number": \(number), "file": \(file),
         "format": {"sampleRate": \(sampleRate), "channels": 2, "sampleFormat": "s16"}, "encoding": "wav", "frames": \(frames),
         "startDate": "2024-05-01T18:30:00.000000Z", "state": "complete", "overruns": [], "notes": ""\(extra)}
        """
    }

    static func manifestJSON(schema: String = "1", name: String = "\"Imported\"", takes: [String] = [takeJSON()]) -> String {
        """
        {"schema": \(schema), "id": "\(sessionID)", "name": \(name), "createdAt": "2024-05-01T18:00:00Z",
         "takes": [\(takes.joined(separator: ","))]}
        """
    }

    /// Names and contents of every file under `url`.
    static func contents(of url: URL) throws -> [String: Data] {
        var out: [String: Data] = [:]
        for name in try FileManager.default.subpathsOfDirectory(atPath: url.path) {
            let item = url.appendingPathComponent(name)
            var isDir: ObjCBool = false
            _ = FileManager.default.fileExists(atPath: item.path, isDirectory: &isDir)
            out[name] = isDir.boolValue ? Data() : try Data(contentsOf: item)
        }
        return out
    }

    struct Hostile {
        var label: String
        var manifest: Data
        var expected: [String]
    }

    static func hostileCases(canary: URL) -> [Hostile] {
        func text(_ s: String) -> Data { Data(s.utf8) }
        var cases: [Hostile] = [
            Hostile(label: "relative escape", manifest: text(manifestJSON(takes: [takeJSON(file: "\"../canary/x.wav\"")])),
                    expected: ["takes[0].file", "leads out of the bundle"]),
            Hostile(label: "absolute path", manifest: text(manifestJSON(takes: [takeJSON(file: "\"\(canary.path)/x.wav\"")])),
                    expected: ["takes[0].file", "absolute path"]),
            Hostile(label: "slash", manifest: text(manifestJSON(takes: [takeJSON(file: "\"sub/x.wav\"")])),
                    expected: ["takes[0].file", "slash"]),
            Hostile(label: "hidden pending escape", manifest: text(manifestJSON(takes: [takeJSON(extra: ", \"pendingFile\": \"../../canary/x.wav\"")])),
                    expected: ["takes[0].pendingFile", "leads out of the bundle"]),
            Hostile(label: "dot dot", manifest: text(manifestJSON(takes: [takeJSON(file: "\"..\"")])),
                    expected: ["takes[0].file", "leads out"]),
            Hostile(label: "the manifest as audio", manifest: text(manifestJSON(takes: [takeJSON(file: "\"manifest.json\"")])),
                    expected: ["takes[0].file", "the manifest itself"]),
            Hostile(label: "take id with a slash", manifest: text(manifestJSON(takes: [takeJSON(id: "../../canary/x")])),
                    expected: ["takes[0].id", "not an identifier"]),
            Hostile(label: "schema 99", manifest: text(manifestJSON(schema: "99")), expected: ["schema 99 is not supported", "reads schema 1"]),
            Hostile(label: "100001 takes",
                    manifest: text(manifestJSON(takes: Array(repeating: "{}", count: 100_001))),
                    expected: ["takes", "100001 takes", "at most 100000"]),
            Hostile(label: "frames -1", manifest: text(manifestJSON(takes: [takeJSON(frames: "-1")])), expected: ["takes[0].frames", "-1"]),
            Hostile(label: "frames beyond 2^40", manifest: text(manifestJSON(takes: [takeJSON(frames: "1099511627777")])), expected: ["takes[0].frames"]),
            Hostile(label: "sample rate 0", manifest: text(manifestJSON(takes: [takeJSON(sampleRate: "0")])),
                    expected: ["takes[0].format.sampleRate", "out of range"]),
            Hostile(label: "negative number", manifest: text(manifestJSON(takes: [takeJSON(number: "-3")])), expected: ["takes[0].number"]),
            Hostile(label: "wrong type", manifest: text(manifestJSON(name: "5")), expected: ["at name", "wrong type", "string"]),
            Hostile(label: "wrong nested type", manifest: text(manifestJSON(takes: [takeJSON(sampleRate: "\"fast\"")])),
                    expected: ["takes[0].format.sampleRate", "wrong type"]),
            Hostile(label: "missing key", manifest: text(#"{"schema": 1, "id": "x", "name": "n", "takes": []}"#), expected: ["createdAt", "missing"]),
            Hostile(label: "not JSON", manifest: text("this is not { json"), expected: ["not valid JSON"]),
            Hostile(label: "duplicate ids", manifest: text(manifestJSON(takes: [takeJSON(), takeJSON(file: "\"other.wav\"")])),
                    expected: ["takes[1].id", "more than once"]),
            Hostile(label: "duplicate files",
                    manifest: text(manifestJSON(takes: [takeJSON(), takeJSON(id: "7f1e2d3c-aaaa-4bbb-8ccc-dddd00000002")])),
                    expected: ["takes[1].file", "another take"]),
            Hostile(label: "control character in a name", manifest: text(manifestJSON(name: "\"bad\\u0000name\"")), expected: ["at name", "control character"]),
            Hostile(label: "overlong name", manifest: text(manifestJSON(name: "\"" + String(repeating: "n", count: 1025) + "\"")), expected: ["at name", "1025 bytes"]),
            Hostile(label: "unknown state", manifest: text(manifestJSON(takes: [takeJSON().replacingOccurrences(of: "\"complete\"", with: "\"exploded\"")])),
                    expected: ["takes[0].state", "exploded"]),
            // A problem that is a sentence of its own ends the manifest's message once, not "..".
            Hostile(label: "1,000 markers",
                    manifest: text(manifestJSON(takes: [takeJSON(frames: "2000", extra: ", \"markers\": ["
                        + (0..<1000).map { "{\"frame\": \($0), \"label\": \"\", \"date\": \"2024-05-01T18:30:00.000000Z\"}" }.joined(separator: ",") + "]")])),
                    expected: ["takes[0].markers", "at most 999 markers. Tapedeck leaves the bundle untouched"]),
            Hostile(label: "a bad tag name", manifest: text(manifestJSON(takes: [takeJSON(extra: ", \"tags\": {\"bad=name\": \"x\"}")])),
                    expected: ["takes[0].tags", "MIC, room). Tapedeck leaves"]),
        ]
        // 17 MiB of otherwise valid JSON: refused by size before it is read.
        var big = Data(manifestJSON(takes: [takeJSON(extra: ", \"pad\": \"")]).utf8)
        big.removeLast(3) // `"}]}` → reopen the string
        big.append(Data(repeating: 0x61, count: 17 << 20))
        big.append(Data("\"}]}".utf8))
        cases.append(Hostile(label: "17 MiB", manifest: big, expected: ["16 MiB"]))
        return cases
    }

    @Test("hostile manifests are refused with the problem named, and nothing outside the bundle is touched")
    func hostileManifests() throws {
        let base = try tempDir("hostile")
        let canary = base.appendingPathComponent("canary")
        try FileManager.default.createDirectory(at: canary, withIntermediateDirectories: true)
        try Data("do not touch".utf8).write(to: canary.appendingPathComponent("x.wav"))
        let root = base.appendingPathComponent("lib")
        let library = try BundleStorage(rootURL: root)
        let good = try library.createSession(named: "Good")
        _ = try record(library, good, "Fine")
        let canaryBefore = try Self.contents(of: canary)

        for hostile in Self.hostileCases(canary: canary) {
            let bundle = root.appendingPathComponent("evil-\(UUID().uuidString.prefix(8)).tapedeck")
            try FileManager.default.createDirectory(at: bundle, withIntermediateDirectories: true)
            try hostile.manifest.write(to: bundle.appendingPathComponent("manifest.json"))

            // In a library: skipped, reported, and the good session still listed.
            let store = try BundleStorage(rootURL: root)
            #expect(try store.sessions().map(\.name) == ["Good"], "\(hostile.label)")
            let damaged = try store.damagedBundles().filter { $0.url.lastPathComponent == bundle.lastPathComponent }
            #expect(damaged.count == 1, "\(hostile.label): reported by damagedBundles()")
            for word in hostile.expected {
                #expect(damaged.first?.problem.contains(word) == true, "\(hostile.label): \"\(word)\" missing from: \(damaged.first?.problem.prefix(300) ?? "")")
            }
            #expect(damaged.first?.problem.contains(bundle.path) == true, "\(hostile.label): the message names the bundle")
            #expect(throws: TapedeckError.self, "\(hostile.label): not found by id") { try store.deleteSession(Self.sessionID) }

            // Opened in place: refused.
            let error = #expect(throws: TapedeckError.self, "\(hostile.label)") { try BundleStorage(rootURL: bundle) }
            #expect(error?.code == .corruptFile, "\(hostile.label)")
            #expect(hostile.expected.allSatisfy { error?.message.contains($0) == true }, "\(hostile.label): \(error?.message.prefix(300) ?? "")")

            let unchanged = try Self.contents(of: canary) == canaryBefore
            #expect(unchanged, "\(hostile.label): the canary folder changed")
            try FileManager.default.removeItem(at: bundle)
        }
        #expect(try Self.contents(of: canary) == canaryBefore)
    }

    @Test("symbolic links in or as a bundle are never followed")
    func symlinks() throws {
        let base = try tempDir("links")
        let canary = base.appendingPathComponent("canary")
        try FileManager.default.createDirectory(at: canary, withIntermediateDirectories: true)
        try Data("do not touch".utf8).write(to: canary.appendingPathComponent("x.wav"))
        let root = base.appendingPathComponent("lib")
        let store = try BundleStorage(rootURL: root)
        let canaryBefore = try Self.contents(of: canary)

        // A valid manifest whose audio file is a link to the canary.
        let bundle = root.appendingPathComponent("linked-0b6a4c0e.tapedeck")
        try FileManager.default.createDirectory(at: bundle, withIntermediateDirectories: true)
        try Data(Self.manifestJSON(takes: [Self.takeJSON(file: "\"x.wav\"")]).utf8).write(to: bundle.appendingPathComponent("manifest.json"))
        try FileManager.default.createSymbolicLink(at: bundle.appendingPathComponent("x.wav"), withDestinationURL: canary.appendingPathComponent("x.wav"))
        let take = try #require(try store.sessions().first?.takes.first)
        let refused = #expect(throws: TapedeckError.self) { try store.audioURL(for: take) }
        #expect(refused?.message.contains("symbolic link") == true)
        // A forged take pointing elsewhere is refused as well.
        var forged = take
        forged.file = "../canary/x.wav"
        #expect(throws: TapedeckError.self) { try store.audioURL(for: forged) }
        forged.file = bundle.lastPathComponent + "/../../canary/x.wav"
        #expect(throws: TapedeckError.self) { try store.audioURL(for: forged) }
        // Renaming and deleting work on the manifest; deletion removes the link, never its target.
        _ = try store.renameTake(take.id, to: "Renamed")
        try store.deleteSession(Self.sessionID)
        #expect(!FileManager.default.fileExists(atPath: bundle.path))

        // manifest.json itself a link, and a whole bundle that is a link.
        let outsideBundle = base.appendingPathComponent("outside.tapedeck")
        try FileManager.default.createDirectory(at: outsideBundle, withIntermediateDirectories: true)
        try Data(Self.manifestJSON().utf8).write(to: outsideBundle.appendingPathComponent("manifest.json"))
        let linkedManifest = root.appendingPathComponent("m-11111111.tapedeck")
        try FileManager.default.createDirectory(at: linkedManifest, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(at: linkedManifest.appendingPathComponent("manifest.json"),
                                                   withDestinationURL: outsideBundle.appendingPathComponent("manifest.json"))
        try FileManager.default.createSymbolicLink(at: root.appendingPathComponent("b-22222222.tapedeck"), withDestinationURL: outsideBundle)
        let outsideBefore = try Self.contents(of: outsideBundle)
        let reopened = try BundleStorage(rootURL: root)
        #expect(try reopened.sessions().isEmpty)
        let damaged = try reopened.damagedBundles()
        #expect(damaged.count == 2)
        #expect(damaged.allSatisfy { $0.problem.contains("symbolic link") })
        #expect(throws: TapedeckError.self) { try BundleStorage(rootURL: linkedManifest) }
        #expect(try Self.contents(of: outsideBundle) == outsideBefore)
        #expect(try Self.contents(of: canary) == canaryBefore)
    }

    @Test("a folder without manifest.json is no session; leftover manifest temporaries are removed unread")
    func orphansAndTemporaries() throws {
        let root = try tempDir()
        let store = try BundleStorage(rootURL: root)
        let session = try store.createSession(named: "Kept")
        let take = try record(store, session, "One")
        let bundle = try bundleURL(store, take)
        // A temporary a dead process left: a different, valid manifest. It must never be read.
        let leftover = bundle.appendingPathComponent(".manifest.json.tmp-\(UUID().uuidString.lowercased())")
        try Data(Self.manifestJSON(name: "\"Ghost\"").replacingOccurrences(of: Self.sessionID, with: session.id).utf8).write(to: leftover)
        let orphan = root.appendingPathComponent("half-made-12345678.tapedeck")
        try FileManager.default.createDirectory(at: orphan, withIntermediateDirectories: true)

        let reopened = try BundleStorage(rootURL: root)
        #expect(!FileManager.default.fileExists(atPath: leftover.path), "the temporary is removed on open")
        let listed = try reopened.sessions()
        #expect(listed.map(\.name) == ["Kept"])
        #expect(listed[0].takes.map(\.id) == [take.id])
        #expect(try reopened.damagedBundles().map(\.url.lastPathComponent) == [orphan.lastPathComponent])
        let names = try FileManager.default.contentsOfDirectory(atPath: bundle.path)
        #expect(!names.contains { $0.hasPrefix(".manifest.json.tmp-") })
    }

    @Test("two stores recording into one session at once keep every take")
    func concurrentRecording() throws {
        let root = try tempDir()
        let a = try BundleStorage(rootURL: root)
        let b = try BundleStorage(rootURL: root)
        let session = try a.createSession(named: "Busy")
        let perThread = 25
        let failures = Mutex<[String]>([])
        let stores = [a, b]
        DispatchQueue.concurrentPerform(iterations: 2) { i in
            let store = stores[i]
            for n in 0..<perThread {
                do {
                    let p = try store.beginTake(in: session.id, named: nil, format: .cdStereo, encoding: "raw",
                                                fileExtension: "raw", startDate: Date())
                    try Data(repeating: UInt8(n), count: 64).write(to: p.fileURL)
                    _ = try store.finishTake(p, frames: 16, state: .complete, overruns: [])
                } catch {
                    failures.withLock { $0.append("\(i)/\(n): \(error)") }
                }
            }
        }
        let failed = failures.withLock { $0 }
        #expect(failed.isEmpty, "\(failed.prefix(3))")
        for store in stores {
            let takes = try #require(try store.sessions().first?.takes)
            #expect(takes.count == 2 * perThread)
            #expect(Set(takes.map(\.number)).count == 2 * perThread, "distinct numbers")
            #expect(Set(takes.map(\.name)).count == 2 * perThread, "distinct names")
            #expect(takes.allSatisfy { $0.state == .complete })
            let missing = try takes.filter { !FileManager.default.fileExists(atPath: try store.audioURL(for: $0).path) }
            #expect(missing.isEmpty)
        }
        let bundle = try bundleURL(a, try #require(try a.sessions().first?.takes.first))
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: bundle.path).filter { $0.hasPrefix(".") && $0 != ".tapedeck-library.lock" }
        #expect(leftovers.isEmpty, "no pending, lock or temporary files left: \(leftovers.prefix(5))")
    }

    @Test("a live recording in another store is not recovered or deleted; a dead one is")
    func liveAndDeadRecordings() throws {
        let root = try tempDir()
        var writer: BundleStorage? = try BundleStorage(rootURL: root)
        let s = try writer!.createSession(named: nil)
        let p = try writer!.beginTake(in: s.id, named: nil, format: .cdStereo, encoding: "raw", fileExtension: "raw", startDate: Date())
        try Data(count: 64).write(to: p.fileURL)
        let other = try BundleStorage(rootURL: root)
        #expect(try other.interruptedTakes().isEmpty)
        #expect(throws: TapedeckError.self) { try other.deleteTake(p.take.id) }
        #expect(throws: TapedeckError.self) { try other.deleteSession(s.id) }
        writer = nil
        try other.deleteTake(p.take.id)
        #expect(try other.sessions()[0].takes.isEmpty)
        let left = try FileManager.default.contentsOfDirectory(atPath: p.fileURL.deletingLastPathComponent().path)
            .filter { $0 != "manifest.json" && $0 != ".tapedeck-library.lock" }
        #expect(left.isEmpty, "pending audio and lock removed: \(left)")
        try other.deleteSession(s.id)
        #expect(try FileManager.default.contentsOfDirectory(atPath: other.rootURL.path).filter { !$0.hasPrefix(".") }.isEmpty,
                "the bundle folder is gone")
    }

    @Test("renaming a session never renames its folder; default names and numbering follow the manifest")
    func renameKeepsFolder() throws {
        let store = try BundleStorage(rootURL: try tempDir())
        let s = try store.createSession(named: nil)
        #expect(s.name == "Session 1")
        let take = try record(store, s)
        let before = try bundleURL(store, take)
        #expect(before.lastPathComponent == "session-1-\(s.id.prefix(8)).tapedeck")
        _ = try store.renameSession(s.id, to: "Something else")
        let listed = try #require(try store.sessions().first)
        #expect(try bundleURL(store, listed.takes[0]) == before)
        #expect(try store.createSession(named: nil).name == "Session 1", "the default name is free again")
    }

    @Test("a library lock held by another process makes changes wait, then fail as busy; reading never waits")
    func lockTimeout() throws {
        let root = try tempDir()
        let store = try BundleStorage(rootURL: root, lockTimeout: 0.2)
        let session = try store.createSession(named: "Locked")
        let fd = open(root.appendingPathComponent(".tapedeck-library.lock").path, O_RDWR | O_CLOEXEC)
        #expect(fd >= 0)
        defer { close(fd) }
        #expect(flock(fd, LOCK_EX) == 0)
        let started = Date()
        let error = #expect(throws: TapedeckError.self) { try store.renameSession(session.id, to: "Waited") }
        #expect(error?.code == .busy)
        #expect(Date().timeIntervalSince(started) >= 0.15)
        #expect(try store.sessions().map(\.name) == ["Locked"])
        #expect(flock(fd, LOCK_UN) == 0)
        #expect(try store.renameSession(session.id, to: "Waited").name == "Waited")
    }

    @Test("the plugin is declared with its settings")
    func plugin() throws {
        #expect(BundleStoragePlugin.storage.name == "bundle")
        #expect(BundleStoragePlugin.storage.settings.map(\.key) == ["path", "lock-timeout"])
    }
}
