import Foundation
public import TapedeckCore
import Testing

/// What every fleet index (`FleetIndex`) must do, run against each engine (a real PostgreSQL,
/// the in-memory one): prepared twice, upserts idempotent, a take id with other audio a conflict
/// that never overwrites, a search by each field agreeing with `RemoteManifest.matches(_:)`,
/// paging, removal, and heartbeats replaced per machine and role.
public enum FleetIndexConformance {
    /// A manifest for a take of `machine` recorded at `minute` minutes after 2026-06-01 00:00 UTC.
    public static func manifest(_ machine: String, session: String, take name: String, minute: Int, seconds: Int64 = 60,
                                notes: String = "", tags: [String: String] = [:], markers: [String] = [], lufs: Double? = nil,
                                state: TakeState = .complete, sha: String? = nil, id: String? = nil) -> RemoteManifest {
        let start = Date(timeIntervalSince1970: 1_780_272_000 + Double(minute) * 60)
        let format = AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .s16)
        let takeID = id ?? UUID().uuidString.lowercased()
        let sessionID = "s-" + PrivateFile.stableName(machine + "/" + session)
        var take = Take(id: takeID, sessionID: sessionID, name: name, number: 1, createdAt: start, state: state, format: format,
                        encoding: "flac", file: "\(takeID).flac", frames: seconds * 48_000, notes: notes, tags: tags,
                        markers: markers.enumerated().map { TakeMarker(frame: Int64($0.offset) * 48_000, label: $0.element, date: start) },
                        began: start)
        if let lufs { take.loudness = Loudness(integrated: lufs, range: 3, truePeak: -1, maxMomentary: nil, maxShortTerm: nil) }
        return RemoteManifest(machine: machine, session: .init(id: sessionID, name: session, createdAt: start), take: take,
                              audio: .init(key: "\(machine)/\(sessionID)/\(takeID).flac", size: seconds * 100_000, sha256: sha ?? String(repeating: "a", count: 64)),
                              uploaded: start.addingTimeInterval(Double(seconds) + 5))
    }

    /// A small fleet: three machines, sessions, notes, tags, markers, loudness, states, lengths.
    public static func fleet() -> [RemoteManifest] {
        [
            manifest("studio", session: "Dawn Chorus", take: "Blackbird", minute: 0, notes: "a blackbird at the feeder", tags: ["SITE": "north"], markers: ["song"], lufs: -23),
            manifest("studio", session: "Dawn Chorus", take: "Robin", minute: 10, seconds: 120, notes: "robin and wren", tags: ["SITE": "north"], lufs: -30),
            manifest("studio", session: "Council", take: "Item 4", minute: 600, seconds: 3_600, notes: "budget debate", tags: ["ROOM": "chamber"], markers: ["vote", "recess"]),
            manifest("field-2", session: "Dawn Chorus", take: "Wren", minute: 5, seconds: 30, tags: ["SITE": "south"], lufs: -18, state: .interrupted),
            manifest("field-2", session: "Night", take: "Owl", minute: 1_400, seconds: 300, notes: "tawny owl calling", lufs: -40),
            manifest("office", session: "Interviews", take: "Mayor", minute: 2_000, seconds: 900, notes: "the mayor on the budget", markers: ["quote"], lufs: -16, state: .truncated),
        ]
    }

    /// Runs the whole suite on a fresh, empty index from `make` (called more than once: a second
    /// index over the same store must see the first one's rows).
    public static func check(_ make: () async throws -> any FleetIndex) async throws {
        let index = try await make()
        defer { Task { await index.shutdown() } }
        try await index.prepare()
        try await index.prepare()
        let fleet = fleet()
        #expect(try await index.upsert(fleet).isEmpty)
        // Idempotent: the same manifests again, and one with changed notes, change nothing else.
        #expect(try await index.upsert(fleet).isEmpty)
        var renoted = fleet[0]
        renoted.take.notes = "a blackbird and a thrush"
        #expect(try await index.upsert([renoted]).isEmpty)
        var all = fleet
        all[0] = renoted
        let everything = try await index.search(FleetQuery(limit: 1_000))
        #expect(everything.total == fleet.count && everything.manifests.count == fleet.count)
        #expect(everything.manifests.map(\.take.id) == sortedIDs(all), "recorded order")
        #expect(everything.manifests.first { $0.take.id == renoted.take.id } == renoted, "the manifest comes back as stored")

        // A take id with other audio: a conflict, reported, never overwritten.
        var other = fleet[1]
        other.audio.sha256 = String(repeating: "b", count: 64)
        other.machine = "impostor"
        let conflicts = try await index.upsert([other])
        #expect(conflicts == [FleetConflict(takeID: other.take.id, machine: "studio", held: fleet[1].audio.sha256, offered: other.audio.sha256)])
        #expect(try await index.search(FleetQuery(machine: "impostor")).total == 0)

        // Each field alone, against the reference meaning.
        var queries: [(String, FleetQuery)] = [
            ("machine", FleetQuery(machine: "studio")),
            ("session by name", FleetQuery(session: "Dawn Chorus")),
            ("session by id", FleetQuery(session: fleet[2].session.id)),
            ("time range", FleetQuery(from: fleet[3].recordedAt, to: fleet[4].recordedAt)),
            ("text, one word", FleetQuery(text: "budget")),
            ("text, two words, any case", FleetQuery(text: "Tawny OWL")),
            ("text in a marker", FleetQuery(text: "recess")),
            ("text in a session name", FleetQuery(text: "interviews")),
            ("text matching nothing", FleetQuery(text: "nightingale")),
        ]
        var q = FleetQuery(); q.tags = ["SITE": "north"]; queries.append(("tag", q))
        q = FleetQuery(); q.hasMarkers = true; queries.append(("with markers", q))
        q = FleetQuery(); q.hasMarkers = false; queries.append(("without markers", q))
        q = FleetQuery(); q.loudness = -24 ... -17; queries.append(("loudness", q))
        q = FleetQuery(); q.states = [.interrupted, .truncated]; queries.append(("state", q))
        q = FleetQuery(); q.seconds = 100 ... 1_000; queries.append(("length", q))
        q = FleetQuery(machine: "studio", text: "blackbird"); q.tags = ["SITE": "north"]; queries.append(("fields together", q))
        for (name, query) in queries {
            var wide = query
            wide.limit = 1_000
            let found = try await index.search(wide)
            let expected = sortedIDs(all.filter { $0.matches(query) })
            #expect(found.manifests.map(\.take.id) == expected, "\(name)")
            #expect(found.total == expected.count, "\(name): total")
        }
        #expect(try await index.search(FleetQuery(text: "budget")).total == 2, "the reference itself: two takes speak of the budget")

        // Pages: limit and offset over the recorded order, the total the same on each.
        var pages: [String] = []
        for offset in stride(from: 0, to: fleet.count, by: 4) {
            let page = try await index.search(FleetQuery(limit: 4, offset: offset))
            #expect(page.total == fleet.count)
            pages += page.manifests.map(\.take.id)
        }
        #expect(pages == sortedIDs(all))
        #expect(try await index.search(FleetQuery(limit: 4, offset: 100)).manifests.isEmpty)

        // Another connection to the same store sees the rows; removal.
        let second = try await make()
        try await second.prepare()
        #expect(try await second.takeIDs() == Dictionary(uniqueKeysWithValues: fleet.map { ($0.take.id, $0.machine) }))
        try await second.remove(takeIDs: [fleet[5].take.id])
        #expect(try await index.search(FleetQuery(machine: "office")).total == 0)
        await second.shutdown()

        // Heartbeats: one per machine and role, the latest kept.
        let t0 = Date(timeIntervalSince1970: 1_780_272_000)
        var beat = RecorderHeartbeat(machine: "studio", role: "record", version: "0.2.0", state: .recording, sentAt: t0, intervalSeconds: 5)
        beat.session = "Dawn Chorus"
        beat.take = "Dawn Chorus/Blackbird"
        beat.levelDBFS = -18.5
        beat.diskSecondsLeft = 86_400
        beat.backlogTakes = 2
        beat.backlogOldestSeconds = 120
        try await index.beat(beat)
        var later = beat
        later.sentAt = t0.addingTimeInterval(5)
        later.state = .idle
        later.take = nil
        try await index.beat(later)
        let push = RecorderHeartbeat(machine: "studio", role: "push", version: "0.2.0", state: .uploading, sentAt: t0, intervalSeconds: 5)
        try await index.beat(push)
        let beats = try await index.heartbeats()
        #expect(beats.count == 2)
        let read = try #require(beats.first { $0.role == "record" })
        var asSent = read
        (asSent.heardSecondsAgo, asSent.clockOffsetSeconds) = (nil, nil)
        #expect(asSent == later, "the latest beat, every field as sent")
        // Its sender's clock is months behind: the index's own clock says it was heard just now,
        // so it is not stale, and how far behind the sender's clock is.
        let now = Date()
        #expect((read.heardSecondsAgo ?? 99) < 10 && !read.isStale(at: now), "\(read)")
        #expect(abs((read.clockOffsetSeconds ?? 0) - later.sentAt.timeIntervalSince(now)) < 10, "\(read)")
        // Without the index's clock, a beat is judged by when it was sent.
        #expect(later.isStale(at: t0.addingTimeInterval(16)) && !later.isStale(at: t0.addingTimeInterval(14)))
    }

    static func sortedIDs(_ manifests: [RemoteManifest]) -> [String] {
        manifests.sorted { a, b in a.recordedAt != b.recordedAt ? a.recordedAt < b.recordedAt : a.take.id < b.take.id }.map(\.take.id)
    }
}
