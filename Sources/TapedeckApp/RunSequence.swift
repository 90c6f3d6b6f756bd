import Foundation
import Logging
import Synchronization
import TapedeckCore

/// The takes of one split run in storage: makes each next take ready (its entry committed, its
/// file created, linked to the run) and finishes each take that ended at a boundary, as the
/// ``RecordingEngine`` asks, on its take queue.
///
/// Every method runs on the engine's take queue (one at a time) and blocks on disk I/O; the
/// read accessors (``finishedTakes``, ``pending(index:)``, ``problems``) run on any thread.
final class RunSequence: TakeSequence {
    let runID: String
    private let storage: any TakeStorage
    private let encoder: any AudioEncoder
    private let session: Session
    /// The name the user gave (`--name`): the takes after the first are "NAME 2", "NAME 3", …
    private let baseName: String?
    private let logger: Logger
    private let waveforms: TakeWaveforms?
    private let facts: TakeFacts
    private let writing: TakeWriting

    private struct State {
        var pending: [Int: PendingTake] = [:]
        /// What each take's writer learnt (its first frame's time, its loudness).
        var measured: [Int: WriterNotes] = [:]
        var finished: [Take] = []
        var problems: [String] = []
        /// Programme takes while they record, by take id, with what their writers learn.
        var programs: [String: (pending: PendingTake, notes: WriterNotes)] = [:]
        var finishedPrograms: [Take] = []
    }
    private let state = Mutex(State())

    init(runID: String, first: PendingTake?, storage: any TakeStorage, encoder: any AudioEncoder, session: Session,
         baseName: String?, logger: Logger, analyzer: (any LoudnessAnalyzer)? = nil, facts: TakeFacts = TakeFacts(),
         waveforms: TakeWaveforms? = nil, sealer: (any TakeSealing)? = nil) {
        writing = TakeWriting(encoder: encoder, analyzer: analyzer, waveform: waveforms != nil, sealer: sealer, logger: logger)
        self.waveforms = waveforms
        self.facts = facts
        self.runID = runID
        self.storage = storage
        self.encoder = encoder
        self.session = session
        self.baseName = baseName
        self.logger = logger
        if let first { state.withLock { $0.pending[1] = first } }
    }

    /// The takes that ended at a boundary and were finished, in run order.
    var finishedTakes: [Take] { state.withLock { $0.finished.sorted { ($0.run?.index ?? 0) < ($1.run?.index ?? 0) } } }

    /// The programme takes that ended and were finished (`RunPlan.programs`), in the order they ended.
    var finishedPrograms: [Take] { state.withLock { $0.finishedPrograms } }

    /// What went wrong finishing earlier takes (their audio is safe; the next open recovers them).
    var problems: [String] { state.withLock { $0.problems } }

    /// The entry of take `index` while it records.
    func pending(index: Int) -> PendingTake? { state.withLock { $0.pending[index] } }

    func prepareTake(index: Int, format: AudioFormat, start: Date) throws -> PreparedTake {
        var made: PendingTake?
        // The first take has the name as given (a run that waited makes it here too), the next
        // ones "NAME 2", "NAME 3"; a template (`%H.%M`) is made at each take's own start, and a
        // name it makes twice gets " (2)", " (3)".
        let template = baseName.map(NameTemplate.isTemplate) == true
        let name = baseName.map { template ? NameTemplate.expand($0, at: start) : index == 1 ? $0 : "\($0) \(index)" }
        for attempt in 1...(template ? 9 : 1) where made == nil {
            do {
                made = try storage.beginTake(in: session.id, named: name.map { attempt == 1 ? $0 : "\($0) (\(attempt))" }, format: format,
                                                encoding: encoder.name, fileExtension: encoder.fileExtension, startDate: start)
            } catch let error as TapedeckError where error.code == .alreadyExists && baseName != nil {
                continue
            }
        }
        // The names are taken already: the session's next default name.
        var pending = try made ?? storage.beginTake(in: session.id, named: nil, format: format, encoding: encoder.name,
                                                       fileExtension: encoder.fileExtension, startDate: start)
        do {
            pending.take = try storage.annotateTake(pending.take.id, TakeAnnotations(tags: writing.tags, run: TakeRun(id: runID, index: index)))
            let writer = try writing.make(at: pending.fileURL, audioURL: try storage.audioURL(for: pending.take), takeID: pending.take.id, format: format,
                                          metadata: facts.metadata(for: pending.take, sessionName: session.name), notes: notes(for: index))
            let ready = pending
            state.withLock { $0.pending[index] = ready }
            return PreparedTake(index: index, id: pending.take.id, writer: writer, fileURL: pending.fileURL)
        } catch {
            remove(pending)
            throw error
        }
    }

    /// What take `index`'s writer learns (the first take's writer is made by the recorder,
    /// which asks for it here).
    func notes(for index: Int) -> WriterNotes {
        state.withLock { s in
            if let box = s.measured[index] { return box }
            let box = WriterNotes()
            s.measured[index] = box
            return box
        }
    }

    /// The take's entry as prepared holds its annotations (only the run link, made moments ago),
    /// so no read of the session is needed to change it.
    func takeBegan(_ take: PreparedTake, offset: Int64, reason: TakeBoundary) {
        guard let pending = pending(index: take.index) else { return }
        var annotations = pending.take.annotations
        annotations.run = TakeRun(id: runID, index: take.index, offset: offset, began: reason)
        do {
            let linked = try storage.annotateTake(take.id, annotations)
            state.withLock { $0.pending[take.index]?.take = linked }
        } catch {
            logger.warning("Could not note the start of take \(take.index) of the run in the library: \(error). The audio is not affected.")
        }
    }

    func takeEnded(_ ended: EndedTake) {
        guard let pending = pending(index: ended.index) else { return }
        let notes = self.state.withLock { $0.measured.removeValue(forKey: ended.index) }
        let run = TakeRun(id: runID, index: ended.index, offset: ended.offset,
                          began: pending.take.run?.began ?? (ended.index == 1 ? .start : nil), ended: ended.reason)
        guard let done = finish(ended, pending: pending, notes: notes, run: run, named: "Take \(ended.index) of the run") else { return }
        self.state.withLock {
            $0.pending[ended.index] = nil
            $0.finished.append(done)
        }
    }

    func prepareProgramTake(_ window: ProgramWindow, format: AudioFormat) throws -> PreparedTake {
        // Named after the programme and its day and time: "News 2026-12-01 09.00".
        let name = window.name + NameTemplate.expand(" %Y-%m-%d %H.%M", at: window.start)
        var made: PendingTake?
        for attempt in 1...9 where made == nil {
            do {
                made = try storage.beginTake(in: session.id, named: attempt == 1 ? name : "\(name) (\(attempt))", format: format,
                                             encoding: encoder.name, fileExtension: encoder.fileExtension, startDate: max(window.paddedStart, Date()))
            } catch let error as TapedeckError where error.code == .alreadyExists && attempt < 9 {
                continue
            }
        }
        guard var pending = made else { throw TapedeckError(.alreadyExists, "Every name for programme \(window.name)'s take is taken in this session.") }
        do {
            pending.take = try storage.annotateTake(pending.take.id, TakeAnnotations(tags: writing.tags.merging([Self.programTag: window.name]) { $1 }))
            let notes = WriterNotes()
            let writer = try writing.make(at: pending.fileURL, audioURL: try storage.audioURL(for: pending.take), takeID: pending.take.id, format: format,
                                          metadata: facts.metadata(for: pending.take, sessionName: session.name), notes: notes)
            let ready = pending
            state.withLock { $0.programs[ready.take.id] = (ready, notes) }
            return PreparedTake(index: 0, id: pending.take.id, writer: writer, fileURL: pending.fileURL)
        } catch {
            remove(pending)
            throw error
        }
    }

    func programTakeEnded(_ ended: EndedTake, window: ProgramWindow) {
        guard let (pending, notes) = state.withLock({ $0.programs.removeValue(forKey: ended.id) }) else { return }
        guard let done = finish(ended, pending: pending, notes: notes, run: nil, named: "The take of programme \"\(window.name)\"") else { return }
        logger.info("Programme \"\(window.name)\" ended: take \"\(done.name)\" holds \(String(format: "%.1f", done.seconds)) s.")
        state.withLock { $0.finishedPrograms.append(done) }
    }

    /// The tag a programme take carries, with the programme's name.
    static let programTag = ProgramRule.tag

    /// Finishes a take that ended in storage: its state, length, overruns, then the facts its
    /// writer learnt (`nil` when it could not be finished: said in ``problems``).
    private func finish(_ ended: EndedTake, pending: PendingTake, notes: WriterNotes?, run: TakeRun?, named: String) -> Take? {
        var frames = ended.frames
        var state: TakeState = ended.reason == .deviceLost ? .interrupted : .complete
        if !ended.writerFinished || ended.failure != nil {
            state = .truncated
            if let repaired = try? encoder.repair(fileAt: pending.fileURL) { frames = repaired.frames }
            logger.warning("\(named) could not be finished cleanly: \(ended.failure?.message ?? "its writer failed"); \(frames) frames were kept.")
        }
        do {
            var take = try storage.finishTake(pending, frames: frames, state: state, overruns: ended.overruns)
            var annotations = take.annotations
            annotations.clippedSamples = ended.clippedSamples
            annotations.markers = ended.markers
            annotations.loudness = notes?.loudness
            annotations.began = notes?.began
            annotations.run = run
            do {
                let (stored, leftOut) = try storage.annotateTake(take.id, keepingValid: annotations)
                take = stored
                if !leftOut.isEmpty {
                    logger.warning("\(named) keeps its other facts, but not \(leftOut.joined(separator: ", ")).")
                }
            } catch {
                logger.warning("Could not store the clip count, markers and loudness of \(named.prefix(1).lowercased() + named.dropFirst()): \(error). The audio is not affected.")
            }
            if let waveforms, let peaks = notes?.waveform { waveforms.store(peaks, for: take) }
            // Markers go into the finished file too, where its format has a place for them.
            if let url = try? storage.audioURL(for: take) {
                TakeFacts.writeMarkers(of: take, to: url, with: encoder, logger: logger)
            }
            return take
        } catch {
            let message = "Take \"\(pending.take.name)\" (\(run.map { "\($0.index) of the run" } ?? "a programme's")) could not be finished: \((error as? TapedeckError)?.message ?? "\(error)"). Its audio is safe in \(pending.fileURL.path); the next tapedeck command that opens the library recovers it."
            logger.error("\(message)")
            self.state.withLock { $0.problems.append(message) }
            return nil
        }
    }

    func discard(_ take: PreparedTake) {
        let pending = state.withLock { s in
            take.index == 0 ? s.programs.removeValue(forKey: take.id)?.pending : s.pending.removeValue(forKey: take.index)
        }
        if let pending { remove(pending) }
    }

    /// Removes a take that never held audio: its file and its companions (a chain), then its entry.
    private func remove(_ pending: PendingTake) {
        try? FileManager.default.removeItem(at: pending.fileURL)
        if let audio = try? storage.audioURL(for: pending.take) { for c in TakeCompanions.urls(of: audio) { try? FileManager.default.removeItem(at: c) } }
        _ = try? storage.completeRecovery(of: pending.take, repaired: nil)
    }
}
