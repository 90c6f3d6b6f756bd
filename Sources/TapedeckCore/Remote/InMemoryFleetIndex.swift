import Foundation
import Synchronization

/// A fleet index held in memory: the reference the conformance suite holds every engine to, and
/// an index for a process that needs no database. Its searches follow ``RemoteManifest/matches(_:)``.
/// Safe on any thread (a mutex); nothing blocks for long.
public final class InMemoryFleetIndex: FleetIndex {
    private struct State {
        var takes: [String: RemoteManifest] = [:]
        /// Each machine and role's last heartbeat, and when it arrived.
        var beats: [String: (RecorderHeartbeat, Date)] = [:]
        var prepared = false
    }

    private let state = Mutex(State())
    public let location = "memory"

    public init() {}

    public func prepare() async throws {
        state.withLock { $0.prepared = true }
    }

    public func upsert(_ manifests: [RemoteManifest]) async throws -> [FleetConflict] {
        state.withLock { s in
            var conflicts: [FleetConflict] = []
            for manifest in manifests {
                if let held = s.takes[manifest.take.id], held.audio.sha256 != manifest.audio.sha256 {
                    conflicts.append(FleetConflict(takeID: manifest.take.id, machine: held.machine, held: held.audio.sha256, offered: manifest.audio.sha256))
                    continue
                }
                s.takes[manifest.take.id] = manifest
            }
            return conflicts
        }
    }

    public func search(_ query: FleetQuery) async throws -> FleetPage {
        let all = state.withLock { Array($0.takes.values) }
        let found = all.filter { $0.matches(query) }.sorted { a, b in
            a.recordedAt != b.recordedAt ? a.recordedAt < b.recordedAt : a.take.id < b.take.id
        }
        return FleetPage(manifests: Array(found.dropFirst(max(0, query.offset)).prefix(max(0, query.limit))), total: found.count)
    }

    public func takeIDs() async throws -> [String: String] {
        state.withLock { $0.takes.mapValues(\.machine) }
    }

    public func remove(takeIDs: [String]) async throws {
        state.withLock { s in for id in takeIDs { s.takes[id] = nil } }
    }

    public func beat(_ heartbeat: RecorderHeartbeat) async throws {
        state.withLock { $0.beats[heartbeat.machine + "\u{0}" + heartbeat.role] = (heartbeat, Date()) }
    }

    public func heartbeats() async throws -> [RecorderHeartbeat] {
        let now = Date()
        return state.withLock { s in
            s.beats.values.map { beat, heard in
                var beat = beat
                beat.heardSecondsAgo = max(0, now.timeIntervalSince(heard))
                beat.clockOffsetSeconds = beat.sentAt.timeIntervalSince(heard)
                return beat
            }.sorted { ($0.machine, $0.role) < ($1.machine, $1.role) }
        }
    }

    public func shutdown() async {}
}
