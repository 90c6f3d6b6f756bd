public import TapedeckApp
public import TapedeckCore
public import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// What the page's live view shows, sent as JSON over the live socket and events stream and
/// returned by `GET /api/state` (docs/openapi.yaml, `State`), written the same way both times
/// (``APIResponseEncoder``). A plain value, as are its parts; any thread.
public struct LiveSnapshot: Codable, Sendable, Hashable {
    /// What the recorder is doing (docs/openapi.yaml, `State.phase`).
    public enum Phase: String, Codable, Sendable, Hashable {
        case idle, opening, recording, finishing

        /// The phase a ``RecorderStatus`` gives (`nil`: none records).
        init(_ phase: String?) {
            self = phase.flatMap(Phase.init(rawValue:)) ?? (phase == nil ? .idle : .opening)
        }
    }
    public struct Channel: Codable, Sendable, Hashable {
        /// The meter's reading and peak-hold marker in dBFS (−90…0), with the terminal meter's ballistics.
        public var level: Double
        public var hold: Double
        /// Meter updates in which this channel reached full scale.
        public var clips: Int
        /// The RMS level in dBFS (−90…0) of the audio of the latest update, without ballistics.
        public var rms: Double = PeakMeter.floorDecibels
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
    /// The recorder shown: the server's own, or another process's recording into this library
    /// (`tapedeck record`), which the page controls all the same.
    public struct Recorder: Codable, Sendable, Hashable {
        public var pid: Int32
        /// `serve` or `record`.
        public var startedBy: String
        /// Whether it is this server's own recording.
        public var own: Bool
        /// Whether it splits on request (the page's Split).
        public var splits: Bool
        public var startedAt: Date
        /// When it stops by itself (`-d`, `--until`), if it does.
        public var stopsAt: Date?
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
    /// The silence alarm: whether the input is silent past it now, and how often it went off.
    public var silent = false
    public var silenceAlarms = 0
    /// The bytes of the take's file so far (`nil` when not known).
    public var takeBytes: Int64?
    /// Free bytes where takes go, and the time they hold at the format recorded (or configured).
    public var freeBytes: Int64?
    public var secondsLeft: Double?
    /// How the last recording ended.
    public var last: Last?
    /// The recorder shown (`nil` while none records), and how many more record into the library.
    public var recorder: Recorder?
    public var otherRecorders: Int
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
    /// When the recorder shown last delivered new frames, as the publisher saw them.
    private var framesChangedAt = ContinuousClock.now
    private var sequence = 0
    private var splitsSeen = 0
    private var lastTakeIndex = 0
    private var wasRecording = false
    private var task: Task<Void, Never>?
    private var polling: Task<Void, Never>?
    private nonisolated let listeners = Listeners()
    private let others: @MainActor () -> [URL]
    /// A recorder of this process outside the desk (`record --metrics`), shown while the desk is idle.
    private let local: (@MainActor () -> RecorderStatus?)?
    /// Another process's recorder (shown while the desk is idle): its control socket, its last
    /// answer, and how many recorders record besides the one shown.
    private(set) var foreignSocket: URL?
    private var foreign: RecorderStatus?
    private var foreignCount = 0
    /// Takes other processes' recorders finished while shown (they change the library's list).
    private var foreignChanges = 0

    public init(desk: RecordingDesk, libraryPath: String, configuredFormat: AudioFormat, interval: Duration,
                others: @escaping @MainActor () -> [URL] = { [] }, local: (@MainActor () -> RecorderStatus?)? = nil) {
        self.local = local
        self.desk = desk
        self.libraryPath = libraryPath
        self.configuredFormat = configuredFormat
        self.interval = interval
        self.others = others
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
        polling = Task { [weak self] in
            while !Task.isCancelled {
                guard let self else { return }
                await self.pollOthers()
                try? await Task.sleep(for: self.foreign != nil ? self.interval : .seconds(1))
            }
        }
    }

    /// Counts the other recorders of the library (the registry, read here and never per
    /// snapshot) and, while the desk is idle, asks the first for its status (off the main actor,
    /// at most a few seconds); while the desk records, nobody else is shown.
    private func pollOthers() async {
        let all = others()
        guard desk.recorder == nil else {
            (foreign, foreignSocket, foreignCount) = (nil, nil, all.count)
            return
        }
        let sockets = all
        var status: RecorderStatus?
        var socket: URL?
        for candidate in sockets {
            let answer = try? await OffMain.run(on: OffMain.files) {
                try RecorderControl.ask(RecorderControl.Request(op: "status"), at: candidate, timeout: 5)
            }
            if let found = answer?.status {
                (status, socket) = (found, candidate)
                break
            }
        }
        // A take of the one shown began or ended (a start, a split, the stop): the list changed.
        if status?.pid != foreign?.pid || status?.target != foreign?.target { foreignChanges += 1 }
        foreign = status
        foreignSocket = socket
        foreignCount = max(0, sockets.count - (status == nil ? 0 : 1))
    }

    /// Sends `request` to the other process's recorder shown; `nil` when none is shown.
    /// - Throws: `.busy` with the recorder's refusal, or when it does not answer.
    func controlOther(_ request: RecorderControl.Request) async throws -> RecorderControl.Answer? {
        guard desk.recorder == nil, let socket = foreignSocket else { return nil }
        let answer: RecorderControl.Answer
        do {
            answer = try await OffMain.run(on: OffMain.files) { try RecorderControl.ask(request, at: socket, timeout: 5) }
        } catch let e as RecorderControl.Failure {
            throw TapedeckError(.busy, e.message)
        }
        guard answer.ok else { throw TapedeckError(.busy, answer.error ?? "The recorder refused.") }
        if let status = answer.status { foreign = status }
        return answer
    }

    /// Stops publishing and ends every listener's stream.
    public func stop() {
        task?.cancel()
        task = nil
        polling?.cancel()
        polling = nil
        listeners.finishAll()
    }

    /// A stream of snapshots as JSON text, starting with the latest; holds at most one unread.
    /// - Thread: any. Never blocks.
    public nonisolated func subscribe() -> AsyncStream<String> {
        listeners.add()
    }

    /// Changes to the library's list of takes so far: recordings finished, and takes a split
    /// run finished while it goes on. Only ever grows.
    public var libraryGeneration: Int { desk.finishedCount + splitsSeen + foreignChanges }

    /// The state now. Only the publishing task advances the meter's ballistics
    /// (`advancing`); a request for the state reads the meter as it stands, so polling
    /// `/api/state` never disturbs what the live listeners see.
    public func snapshot(advancing: Bool = false) -> LiveSnapshot {
        let recorder = desk.recorder
        let own = desk.status(pid: getpid(), library: libraryPath) ?? local?()
        let shown = own ?? (recorder == nil ? foreign : nil)
        if advancing {
            if let index = recorder?.takeIndex, index > lastTakeIndex {
                if lastTakeIndex > 0 { splitsSeen += index - lastTakeIndex }
                lastTakeIndex = index
            }
            if recorder == nil { lastTakeIndex = 0 }
        }
        let format = recorder?.format ?? shown?.sampleRate.map { AudioFormat(sampleRate: $0, channels: max(1, shown?.peaks.count ?? 0), sampleFormat: configuredFormat.sampleFormat) } ?? configuredFormat
        guard advancing else { return build(shown, own: own != nil, channels: currentChannels(shown), format: format) }
        let now = ContinuousClock.now
        let elapsed = Double((now - lastTick).components.attoseconds) / 1e18 + Double((now - lastTick).components.seconds)
        lastTick = now
        let recording = shown != nil
        if recording != wasRecording {
            meter = PeakMeter()
            clips = []
            lastFrames = -1
            wasRecording = recording
            framesChangedAt = now
        }
        var channels: [LiveSnapshot.Channel] = []
        if let shown {
            let peaks = shown.peaks
            if clips.count != peaks.count { clips = Array(repeating: 0, count: peaks.count) }
            let fresh = shown.frames != lastFrames
            lastFrames = shown.frames
            if fresh { framesChangedAt = now }
            meter.update(peaks: peaks, elapsed: elapsed, fresh: fresh)
            if fresh { for (c, p) in peaks.enumerated() where p >= 0.99999 { clips[c] += 1 } }
            channels = currentChannels(shown)
        }
        sequence += 1
        return build(shown, own: own != nil, channels: channels, format: format)
    }

    /// Seconds since the recorder shown last delivered new frames (the publisher looks every
    /// interval); `nil` while none records.
    func secondsSinceFrames() -> Double? {
        guard wasRecording else { return nil }
        let d = ContinuousClock.now - framesChangedAt
        return Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }

    /// The meter as it stands, one entry per channel of the recording.
    private func currentChannels(_ shown: RecorderStatus?) -> [LiveSnapshot.Channel] {
        guard let shown else { return [] }
        return shown.peaks.indices.map { c in
            LiveSnapshot.Channel(level: meter.levels.indices.contains(c) ? meter.levels[c] : PeakMeter.floorDecibels,
                                 hold: meter.holds.indices.contains(c) ? meter.holds[c] : PeakMeter.floorDecibels,
                                 clips: clips.indices.contains(c) ? clips[c] : 0,
                                 rms: shown.rms.map { $0.indices.contains(c) ? PeakMeter.decibels($0[c]) : PeakMeter.floorDecibels } ?? PeakMeter.floorDecibels)
        }
    }

    private func build(_ shown: RecorderStatus?, own: Bool, channels: [LiveSnapshot.Channel], format: AudioFormat) -> LiveSnapshot {
        let free = FreeSpace.available(at: libraryPath)
        let rate = max(1, format.sampleRate)
        return LiveSnapshot(
            phase: LiveSnapshot.Phase(shown?.phase), recording: shown != nil, target: shown?.target,
            seconds: shown?.seconds ?? 0, frames: shown?.frames ?? 0, sampleRate: shown?.sampleRate,
            channels: channels, clippedSamples: shown?.clippedSamples ?? 0, overruns: shown?.overruns ?? 0,
            markers: shown?.markers ?? 0, takeIndex: shown?.takeIndex ?? 1,
            secondsToSplit: shown?.framesToSplit.map { Double($0) / Double(rate) },
            waiting: shown?.waiting,
            preRollSeconds: Double(shown?.preRollFrames ?? 0) / Double(rate),
            voxHolding: shown?.voxHolding ?? false, silent: shown?.silent ?? false, silenceAlarms: shown?.silenceAlarms ?? 0,
            takeBytes: shown?.takeBytes,
            freeBytes: free, secondsLeft: free.map { Double($0) / Double(max(1, format.bytesPerSecond)) },
            last: desk.last.map { LiveSnapshot.Last(takeID: $0.takeID, take: $0.takeName, sessionID: $0.sessionID, session: $0.sessionName,
                                                    seconds: $0.seconds, summary: $0.summary, failed: $0.failed) },
            recorder: shown.map { LiveSnapshot.Recorder(pid: $0.pid, startedBy: $0.startedBy, own: own, splits: $0.splits,
                                                        startedAt: $0.startedAt, stopsAt: $0.stopsAt) },
            otherRecorders: foreignCount,
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
