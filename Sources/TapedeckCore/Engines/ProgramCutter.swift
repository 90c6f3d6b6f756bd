import Foundation
import Logging

/// The programme takes of a run (``RunPlan/programs``): for each programme, the run's frames
/// that fall in its padded window on the clock go, as they come, into a take of its own, while
/// the run's own takes go on unchanged. Each take is made ready by the ``TakeSequence`` ahead of
/// its window (committed in state `recording`, as every take: a killed process leaves it to the
/// next open's recovery), checkpointed with the run's take and finished on the take queue.
///
/// Windows are placed on the run's frames by the run's time anchor (a frame and its time of
/// day: capture's start, the device's return, the source's own clock), so a take holds exactly
/// the frames the run's takes hold over the same stretch. A programme take that cannot be made
/// or written is said in the log and left; the run goes on.
///
/// - Thread: the engine's writer thread only (it owns every field); blocks, when a programme
///   begins before its take is ready, on the take queue making it.
final class ProgramCutter {
    /// A programme's current occurrence, from when it is placed until its take ends.
    struct Slot {
        var window: ProgramWindow
        /// The run's frames of its padded start and end.
        var from: Int64
        var to: Int64
        var box: NextTake?
        var take: PreparedTake?
        /// The run's frame the take began at; `nil` before it has any audio.
        var offset: Int64?
        var written: Int64 = 0
        var overruns: [OverrunEvent] = []
        var clipped: Int64 = 0
        var markers: [TakeMarker] = []
        /// Its take could not be made or written: the rest of the window is let go.
        var failed = false
    }

    let rules: [ProgramRule]
    let sequence: any TakeSequence
    let format: AudioFormat
    let queue: DispatchQueue
    let logger: Logger
    let calendar: Calendar
    private let rate: Double
    private var slots: [Slot?]
    /// The next occurrence of each programme ends after this (the one that ended last).
    private var after: [Date]
    private var anchor: (frame: Int64, date: Date)?
    private let silence: UnsafeMutableRawPointer
    private let silenceFrames = 4096
    private var scratch: [Float]
    /// A take is made ready this long before its window.
    static let lead = 10.0

    init(rules: [ProgramRule], sequence: any TakeSequence, format: AudioFormat, queue: DispatchQueue, logger: Logger,
         calendar: Calendar = .current) {
        self.rules = rules
        self.sequence = sequence
        self.format = format
        self.queue = queue
        self.logger = logger
        self.calendar = calendar
        rate = Double(format.sampleRate)
        slots = Array(repeating: nil, count: rules.count)
        after = Array(repeating: .distantPast, count: rules.count)
        scratch = Array(repeating: 0, count: format.channels)
        silence = .allocate(byteCount: silenceFrames * format.bytesPerFrame, alignment: 16)
        silence.initializeMemory(as: UInt8.self, repeating: 0, count: silenceFrames * format.bytesPerFrame)
    }

    deinit { silence.deallocate() }

    /// Whether a programme take holds audio now (it is checkpointed with the run's).
    var recording: Bool { slots.contains { $0?.offset != nil && $0?.failed == false } }

    private func frame(_ date: Date, _ a: (frame: Int64, date: Date)) -> Int64 {
        a.frame + Int64((date.timeIntervalSince(a.date) * rate).rounded())
    }

    private func date(_ frame: Int64, _ a: (frame: Int64, date: Date)) -> Date {
        a.date.addingTimeInterval(Double(frame - a.frame) / rate)
    }

    /// The run's time anchor is `a` now: the windows not ended are placed by it again.
    func anchored(_ a: (frame: Int64, date: Date)) {
        guard anchor.map({ $0.frame != a.frame || $0.date != a.date }) ?? true else { return }
        anchor = a
        for i in slots.indices where slots[i] != nil {
            slots[i]!.from = frame(slots[i]!.window.paddedStart, a)
            slots[i]!.to = frame(slots[i]!.window.paddedEnd, a)
        }
    }

    /// Takes the run's `count` frames from `source` (`nil`: silence for a gap with `cause`),
    /// the first of which is the run's frame `base`, into the programmes whose windows hold them.
    func feed(_ source: UnsafeRawPointer?, _ count: Int64, at base: Int64, gap cause: String?) {
        guard let a = anchor else { return }
        let end = base + count
        for i in rules.indices {
            if slots[i] == nil, let w = rules[i].nextWindow(endingAfter: max(date(base, a), after[i]), calendar: calendar) {
                slots[i] = Slot(window: w, from: frame(w.paddedStart, a), to: frame(w.paddedEnd, a))
            }
            guard var s = slots[i] else { continue }
            if s.take == nil, s.box == nil, !s.failed, Double(s.from - end) <= Self.lead * rate { s.box = prepare(s.window) }
            let lo = max(s.from, base), hi = min(s.to, end)
            if lo < hi, !s.failed {
                if s.take == nil, let box = s.box {
                    s.box = nil
                    switch box.wait() {
                    case .success(let take): s.take = take
                    case .failure(let error):
                        s.failed = true
                        logger.warning("The take of programme \"\(s.window.name)\" could not be made (\(error.message)); the run's own takes go on, and hold its audio.")
                    }
                }
                if let take = s.take, !s.failed {
                    if s.offset == nil { begin(&s, take, at: lo, base: base, a) }
                    do {
                        try write(&s, take, source.map { $0 + Int(lo - base) * format.bytesPerFrame }, hi - lo, gap: cause)
                    } catch {
                        s.failed = true
                        let message = (error as? TapedeckError)?.message ?? "\(error)"
                        logger.warning("Writing the take of programme \"\(s.window.name)\" failed (\(message)); it keeps what it has, and the run's own takes go on.")
                        slots[i] = s
                        close(i, .writeFailed, failure: (error as? TapedeckError) ?? TapedeckError(.io, message))
                        continue
                    }
                }
            }
            slots[i] = s
            if end >= s.to { close(i, .duration) }
        }
    }

    private func begin(_ s: inout Slot, _ take: PreparedTake, at lo: Int64, base: Int64, _ a: (frame: Int64, date: Date)) {
        s.offset = lo
        take.writer.began(at: date(lo, a), preRollFrames: 0)
        let late = Double(lo - s.from) / rate
        if late >= 1 {
            logger.warning("The take of programme \"\(s.window.name)\" begins \(Int(late.rounded())) s after its start\(s.window.padSeconds > 0 ? " with padding" : ""): the run was not recording before.")
        } else {
            logger.info("Programme \"\(s.window.name)\" began: its take is \(take.id).")
        }
    }

    private func write(_ s: inout Slot, _ take: PreparedTake, _ p: UnsafeRawPointer?, _ n: Int64, gap cause: String?) throws {
        if let p {
            try take.writer.write(p, frames: Int(n))
            LevelMeter.accumulatePeaks(p, frames: Int(n), format: format, into: &scratch, clipped: &s.clipped)
        } else {
            s.overruns.append(OverrunEvent(frame: s.written, frames: n, date: Date(), cause: cause ?? "buffer"))
            var left = n
            while left > 0 {
                let m = Int(min(left, Int64(silenceFrames)))
                try take.writer.write(silence, frames: m)
                left -= Int64(m)
            }
        }
        s.written += n
    }

    /// Has the take queue make the take of `window` ready.
    private func prepare(_ window: ProgramWindow) -> NextTake {
        let box = NextTake()
        let (sequence, format) = (sequence, format)
        queue.async {
            do {
                box.set(.success(try sequence.prepareProgramTake(window, format: format)))
            } catch {
                box.set(.failure((error as? TapedeckError) ?? TapedeckError(.io, "Preparing the programme's take failed: \(error).")))
            }
        }
        return box
    }

    /// A marker the run set at its frame `runFrame`: in every programme take holding that frame too.
    func mark(_ marker: TakeMarker, atRunFrame runFrame: Int64) {
        for i in slots.indices {
            guard let s = slots[i], let offset = s.offset, !s.failed, runFrame >= offset, runFrame <= offset + s.written,
                  s.markers.count < TakeMarker.maxCount else { continue }
            slots[i]!.markers.append(TakeMarker(frame: runFrame - offset, label: marker.label, date: marker.date))
        }
    }

    /// Makes every programme take's audio so far durable. A take that cannot be is let go.
    func checkpoint() {
        for i in slots.indices {
            guard let s = slots[i], let take = s.take, s.offset != nil, !s.failed else { continue }
            do {
                try take.writer.checkpoint()
            } catch {
                let message = (error as? TapedeckError)?.message ?? "\(error)"
                logger.warning("Writing the take of programme \"\(s.window.name)\" failed (\(message)); it keeps what it has, and the run's own takes go on.")
                slots[i]!.failed = true
                close(i, .writeFailed, failure: (error as? TapedeckError) ?? TapedeckError(.io, message))
            }
        }
    }

    /// Ends every programme take (the run ends) for `reason`, saying so of one that had not
    /// reached its window's end.
    func finishAll(_ reason: TakeBoundary) {
        for i in slots.indices {
            if let s = slots[i], let offset = s.offset, !s.failed, offset + s.written < s.to {
                let short = Double(s.to - offset - s.written) / rate
                logger.warning("The take of programme \"\(s.window.name)\" ends \(Int(short.rounded(.up))) s before its end\(s.window.padSeconds > 0 ? " with padding" : ""): the recording stopped first.")
            }
            close(i, reason)
        }
    }

    /// Ends programme `i`'s take: finished on the take queue, or removed when it has no audio.
    private func close(_ i: Int, _ reason: TakeBoundary, failure: TapedeckError? = nil) {
        guard let s = slots[i] else { return }
        slots[i] = nil
        after[i] = s.window.paddedEnd
        let sequence = sequence
        if let take = s.take, let offset = s.offset, s.written > 0 {
            let writer = UncheckedTransfer(take.writer)
            let (window, written, overruns, clipped, markers) = (s.window, s.written, s.overruns, s.clipped, s.markers)
            queue.async {
                var frames = written
                var finished = failure == nil
                var problem = failure
                if finished {
                    do {
                        frames = try writer.value.finish()
                    } catch {
                        finished = false
                        problem = (error as? TapedeckError) ?? TapedeckError(.io, "Finishing the take failed: \(error).")
                    }
                }
                if !finished { writer.value.abandon() }
                sequence.programTakeEnded(EndedTake(index: 0, id: take.id, offset: offset, frames: frames, overruns: overruns,
                                                    clippedSamples: clipped, reason: reason, writerFinished: finished, failure: problem,
                                                    markers: markers), window: window)
            }
        } else if let take = s.take {
            queue.async {
                take.writer.abandon()
                sequence.discard(take)
            }
        } else if let box = s.box {
            queue.async {
                if case .success(let unused) = box.wait() {
                    unused.writer.abandon()
                    sequence.discard(unused)
                }
            }
        }
    }
}
