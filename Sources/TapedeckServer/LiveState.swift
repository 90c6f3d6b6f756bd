public import TapedeckApp
public import TapedeckCore
import Foundation
import Synchronization

/// What the page's live view shows, sent as JSON over the live socket and events stream and
/// returned by `GET /api/state` (docs/openapi.yaml, `State`), written the same way both times
/// (``APIResponseEncoder``). A plain value, as are its parts; any thread.
public struct LiveSnapshot: Codable, Sendable, Hashable {
    /// What the recorder is doing (docs/openapi.yaml, `State.phase`).
    public enum Phase: String, Codable, Sendable, Hashable {
        case idle, opening, recording, finishing

        /// The phase of a recorder (`nil`: none records).
        init(_ phase: TakeRecorder.Phase?) {
            self = switch phase {
            case nil: .idle
            case .idle?, .opening?: .opening
            case .recording?: .recording
            case .finishing?, .finished?: .finishing
            }
        }
    }
    public struct Channel: Codable, Sendable, Hashable {
        /// The meter's reading and peak-hold marker in dBFS (−90…0), with the terminal meter's ballistics.
        public var level: Double
        public var hold: Double
        /// Meter updates in which this channel reached full scale.
        public var clips: Int
    }
    public struct Last: Codable, Sendable, Hashable {
        public var takeID: String?
        public var take: String?
        public var sessionID: String?
        public var session: String?
        public var seconds: Double
        public var summary: String
        public var failed: Bool
    }
    public var kind = "state"
    public var phase: Phase
    public var recording: Bool
    /// SESSION/TAKE being recorded (the session alone while a run waits).
    public var target: String?
    public var seconds: Double
    public var frames: Int64
    public var sampleRate: Int?
    public var channels: [Channel]
    public var clippedSamples: Int64
    public var overruns: Int
    public var markers: Int
    /// The take of a split run being written (from 1), and seconds to the next time split.
    public var takeIndex: Int
    public var secondsToSplit: Double?
    /// What a run with no take open waits for ("sound" or "trigger"), with its pre-roll.
    public var waiting: String?
    public var preRollSeconds: Double
    public var voxHolding: Bool
    /// Free bytes where takes go, and the time they hold at the format recorded (or configured).
    public var freeBytes: Int64?
    public var secondsLeft: Double?
    /// How the last recording ended.
    public var last: Last?
    /// Counts finished recordings: a page reloads its list when it changes.
    public var libraryGeneration: Int
    /// Counts snapshots, and when this one was made (milliseconds since 1970), for latency.
    public var sequence: Int
    public var sentAt: Double
}

/// Publishes the live state at a bounded rate to any number of listeners, each of which holds
/// at most the newest snapshot not yet taken: a listener that reads slowly or not at all skips
/// snapshots and never holds up the others, the publisher or capture.
///
/// Runs on the main actor (it reads the observable ``RecordingDesk`` and its ``TakeRecorder``);
/// ``subscribe()`` may be called from any thread.
@MainActor
public final class LiveState {
    private let desk: RecordingDesk
    private let libraryPath: String
    private let configuredFormat: AudioFormat
    private let interval: Duration
    private var meter = PeakMeter()
    private var clips: [Int] = []
    private var lastFrames: Int64 = -1
    private var lastTick = ContinuousClock.now
    private var sequence = 0
    private var splitsSeen = 0
    private var lastTakeIndex = 0
    private var wasRecording = false
    private var task: Task<Void, Never>?
    private nonisolated let listeners = Listeners()

    public init(desk: RecordingDesk, libraryPath: String, configuredFormat: AudioFormat, interval: Duration) {
        self.desk = desk
        self.libraryPath = libraryPath
        self.configuredFormat = configuredFormat
        self.interval = interval
    }

    /// Starts publishing: every ``interval`` while recording, once a second otherwise.
    public func start() {
        guard task == nil else { return }
        task = Task { [weak self] in
            while !Task.isCancelled {
                guard let self else { return }
                let snapshot = self.snapshot(advancing: true)
                if let data = try? APIResponseEncoder.jsonEncoder().encode(snapshot) {
                    self.listeners.publish(String(decoding: data, as: UTF8.self))
                }
                try? await Task.sleep(for: snapshot.recording || snapshot.phase != .idle ? self.interval : .seconds(1))
            }
        }
    }

    /// Stops publishing and ends every listener's stream.
    public func stop() {
        task?.cancel()
        task = nil
        listeners.finishAll()
    }

    /// A stream of snapshots as JSON text, starting with the latest; holds at most one unread.
    /// - Thread: any. Never blocks.
    public nonisolated func subscribe() -> AsyncStream<String> {
        listeners.add()
    }

    /// Changes to the library's list of takes so far: recordings finished, and takes a split
    /// run finished while it goes on. Only ever grows.
    public var libraryGeneration: Int { desk.finishedCount + splitsSeen }

    /// The state now. Only the publishing task advances the meter's ballistics
    /// (`advancing`); a request for the state reads the meter as it stands, so polling
    /// `/api/state` never disturbs what the live listeners see.
    public func snapshot(advancing: Bool = false) -> LiveSnapshot {
        let recorder = desk.recorder
        let recording = recorder != nil
        if advancing {
            if let index = recorder?.takeIndex, index > lastTakeIndex {
                if lastTakeIndex > 0 { splitsSeen += index - lastTakeIndex }
                lastTakeIndex = index
            }
            if recorder == nil { lastTakeIndex = 0 }
        }
        guard advancing else { return build(recorder: recorder, channels: currentChannels(recorder)) }
        let now = ContinuousClock.now
        let elapsed = Double((now - lastTick).components.attoseconds) / 1e18 + Double((now - lastTick).components.seconds)
        lastTick = now
        if recording != wasRecording {
            meter = PeakMeter()
            clips = []
            lastFrames = -1
            wasRecording = recording
        }
        var channels: [LiveSnapshot.Channel] = []
        var format = configuredFormat
        if let recorder {
            if let f = recorder.format { format = f }
            let peaks = recorder.peaks
            if clips.count != peaks.count { clips = Array(repeating: 0, count: peaks.count) }
            let fresh = recorder.frames != lastFrames
            lastFrames = recorder.frames
            meter.update(peaks: peaks, elapsed: elapsed, fresh: fresh)
            if fresh { for (c, p) in peaks.enumerated() where p >= 0.99999 { clips[c] += 1 } }
            channels = currentChannels(recorder)
        }
        sequence += 1
        return build(recorder: recorder, channels: channels, format: format)
    }

    /// The meter as it stands, one entry per channel of the recording.
    private func currentChannels(_ recorder: TakeRecorder?) -> [LiveSnapshot.Channel] {
        guard let recorder else { return [] }
        return recorder.peaks.indices.map { c in
            LiveSnapshot.Channel(level: meter.levels.indices.contains(c) ? meter.levels[c] : PeakMeter.floorDecibels,
                                 hold: meter.holds.indices.contains(c) ? meter.holds[c] : PeakMeter.floorDecibels,
                                 clips: clips.indices.contains(c) ? clips[c] : 0)
        }
    }

    private func build(recorder: TakeRecorder?, channels: [LiveSnapshot.Channel], format explicitFormat: AudioFormat? = nil) -> LiveSnapshot {
        let recording = recorder != nil
        let format = explicitFormat ?? recorder?.format ?? configuredFormat
        let free = FreeSpace.available(at: libraryPath)
        let rate = format.sampleRate
        return LiveSnapshot(
            phase: LiveSnapshot.Phase(recorder?.phase), recording: recording, target: recorder?.target?.take,
            seconds: recorder?.seconds ?? 0, frames: recorder?.frames ?? 0, sampleRate: recorder?.format?.sampleRate,
            channels: channels, clippedSamples: recorder?.clippedSamples ?? 0, overruns: recorder?.overrunCount ?? 0,
            markers: recorder?.markerCount ?? 0, takeIndex: recorder?.takeIndex ?? 1,
            secondsToSplit: recorder?.framesToSplit.map { Double($0) / Double(max(1, rate)) },
            waiting: recorder?.waiting.map { $0 == .armed ? "trigger" : "sound" },
            preRollSeconds: Double(recorder?.preRollFrames ?? 0) / Double(max(1, rate)),
            voxHolding: recorder?.voxHolding ?? false,
            freeBytes: free, secondsLeft: free.map { Double($0) / Double(max(1, format.bytesPerSecond)) },
            last: desk.last.map { LiveSnapshot.Last(takeID: $0.takeID, take: $0.takeName, sessionID: $0.sessionID, session: $0.sessionName,
                                                    seconds: $0.seconds, summary: $0.summary, failed: $0.failed) },
            libraryGeneration: libraryGeneration, sequence: sequence, sentAt: (Date().timeIntervalSince1970 * 1000).rounded())
    }

    /// The listeners: one continuation each, buffering the newest snapshot only.
    final class Listeners: Sendable {
        private struct State {
            var next = 0
            var streams: [Int: AsyncStream<String>.Continuation] = [:]
            var latest: String?
            /// Set when the server stops: a listener that comes later gets an ended stream.
            var closed = false
        }
        private let state = Mutex(State())

        func add() -> AsyncStream<String> {
            let (stream, continuation) = AsyncStream.makeStream(of: String.self, bufferingPolicy: .bufferingNewest(1))
            let id = state.withLock { s -> Int? in
                if s.closed { return nil }
                s.next += 1
                s.streams[s.next] = continuation
                if let latest = s.latest { continuation.yield(latest) }
                return s.next
            }
            guard let id else {
                continuation.finish()
                return stream
            }
            continuation.onTermination = { [weak self] _ in
                _ = self?.state.withLock { $0.streams.removeValue(forKey: id) }
            }
            return stream
        }

        func publish(_ text: String) {
            let targets = state.withLock { s in
                s.latest = text
                return Array(s.streams.values)
            }
            for c in targets { c.yield(text) }
        }

        func finishAll() {
            let targets = state.withLock { s in
                s.closed = true
                defer { s.streams.removeAll() }
                return Array(s.streams.values)
            }
            for c in targets { c.finish() }
        }

        var count: Int { state.withLock { $0.streams.count } }
    }
}
