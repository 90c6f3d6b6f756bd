import Foundation
import Hummingbird
import TapedeckApp
import TapedeckCore

/// The fleet catalog's heartbeats as `serve` shows them (`/api/fleet` and the home page's
/// fleet section): read again every `interval` seconds in the background, so a page never waits
/// for the catalog, and one that does not answer is said on the page, not felt as a hang.
///
/// Main actor; ``start()`` returns at once, ``stop()`` suspends until the reading ends.
@MainActor
final class FleetView {
    let catalog: any FleetIndex
    let interval: Double
    /// The recorders as last read, and when; what went wrong at the last reading, if it did.
    private(set) var beats: [RecorderHeartbeat] = []
    private(set) var readAt: Date?
    private(set) var problem: String?
    private var task: Task<Void, Never>?

    init(catalog: any FleetIndex, interval: Double) {
        self.catalog = catalog
        self.interval = max(1, interval)
    }

    func start() {
        guard task == nil else { return }
        task = Task { @MainActor [weak self] in
            var prepared = false
            while !Task.isCancelled, let self {
                do {
                    if !prepared { try await catalog.prepare() }
                    prepared = true
                    beats = try await catalog.heartbeats()
                    (readAt, problem) = (Date(), nil)
                } catch {
                    problem = (error as? TapedeckError)?.message ?? "\(error)"
                }
                try? await Task.sleep(for: .seconds(interval))
            }
        }
    }

    func stop() async {
        task?.cancel()
        task = nil
        await catalog.shutdown()
    }

    /// What `/api/fleet` answers. A plain value.
    struct State: ResponseEncodable, Sendable {
        var kind = "fleet"
        var schema = JSONSchema.version
        var catalog: String
        /// When the heartbeats were read; `nil` before the first reading.
        var readAt: Date?
        /// Why the last reading failed (the recorders are then as read before).
        var problem: String?
        var recorders: [Recorder]
    }

    /// One recorder's heartbeat, how long ago it was heard and whether that is too long.
    struct Recorder: Encodable, Sendable {
        var heartbeat: RecorderHeartbeat
        var stale: Bool
        var secondsAgo: Double
    }

    func state(now: Date = Date()) -> State {
        // Ages grow since the reading: by the catalog's clock then, by ours since.
        let since = readAt.map { now.timeIntervalSince($0) } ?? 0
        let recorders = beats.map { beat -> Recorder in
            var aged = beat
            aged.heardSecondsAgo = beat.heardSecondsAgo.map { $0 + since }
            return Recorder(heartbeat: aged, stale: aged.isStale(at: now), secondsAgo: aged.secondsAgo(at: now))
        }
        return State(catalog: catalog.location, readAt: readAt, problem: problem, recorders: recorders)
    }
}
