public import Observation
public import TapedeckCore
public import Logging
public import Foundation

/// Exports takes to files in another format (FLAC first), verified and placed atomically.
///
/// Runs on the main actor; each export runs on a thread of its own, at most one per core at a
/// time, so a session's takes are encoded in parallel. ``jobs`` is observable for progress bars.
@MainActor
@Observable
public final class TakeExporter {
    /// One export in flight or done, for progress displays.
    public struct Job: Sendable, Identifiable {
        public var id: String { item.take.id }
        public var item: ExportItem
        public var target: URL
        public var progress: ExportProgress
    }

    @ObservationIgnored private let decoders: [any AudioDecoder]
    @ObservationIgnored private let store: SessionStore
    @ObservationIgnored private let logger: Logger
    @ObservationIgnored private let cores: Int

    /// The exports of the current call, in order.
    public private(set) var jobs: [Job] = []
    /// Signs a statement beside each export of signed takes (`provenance.sign`); `nil`: none.
    @ObservationIgnored public var attester: (any ExportAttesting)?

    /// - Parameter cores: how many exports may run at once (default: the active processor count).
    /// The temporary files being written, for a stop signal to remove.
    public let partials: PartialFiles

    /// The machine's identity, written into every exported file.
    @ObservationIgnored private let facts: TakeFacts
    @ObservationIgnored private let analyzer: (any LoudnessAnalyzer)?
    @ObservationIgnored private let resampler: (any SampleRateConversion)?

    public init(decoders: [any AudioDecoder], store: SessionStore, logger: Logger,
                cores: Int = ProcessInfo.processInfo.activeProcessorCount, partials: PartialFiles = PartialFiles(),
                facts: TakeFacts = TakeFacts(), analyzer: (any LoudnessAnalyzer)? = nil, resampler: (any SampleRateConversion)? = nil) {
        self.facts = facts
        self.analyzer = analyzer
        self.resampler = resampler
        self.partials = partials
        self.decoders = decoders
        self.store = store
        self.logger = logger
        self.cores = max(1, cores)
    }

    /// Exports `items` with `encoder` into `directory`.
    ///
    /// Output names come from session and take names ("Session 1 - Take 3.flac"). Existing files
    /// are never replaced unless `force`. One failure does not stop the others.
    /// - Parameters:
    ///   - items: the takes to export, each with its session (an item may name its own file).
    ///   - encoder: encodes the exported files.
    ///   - encoderSettings: the encoder's settings, for the reports.
    ///   - directory: the folder the files go into; it must exist and be writable.
    ///   - force: replace files that exist already.
    ///   - sampleFormat: convert to this sample format first (e.g. float takes to `s24` for FLAC).
    ///   - finishing: a gain to a loudness or peak, a new rate, and the dither.
    /// - Returns: one result per item, in order.
    /// - Thread: main actor; suspends while the exports run on their own threads.
    public func export(_ items: [ExportItem], with encoder: any AudioEncoder, encoderSettings: [String: SettingValue] = [:],
                       to directory: URL, force: Bool, sampleFormat: SampleFormat? = nil,
                       finishing: ExportFinishing = ExportFinishing()) async -> [Result<ExportReport, TapedeckError>] {
        var isDir: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDir), isDir.boolValue else {
            let e = TapedeckError(.notFound, "The output folder \(directory.path) does not exist. Create it, or choose another with --output.")
            return items.map { _ in .failure(e) }
        }
        guard FileManager.default.isWritableFile(atPath: directory.path) else {
            let e = TapedeckError(.io, "The output folder \(directory.path) is not writable. Choose another with --output, or fix its permissions.")
            return items.map { _ in .failure(e) }
        }
        // Every export may use every core: encoders that split their work (FLAC) queue it on the
        // shared worker pool, so the cores stay busy to the end as the last takes finish.
        let threads = max(1, cores)
        var names = Set<String>()
        var prepared: [Result<ExportJob, TapedeckError>] = []
        jobs = []
        for item in items {
            do {
                var name = ExportJob.fileName(for: item, extension: encoder.fileExtension)
                if names.contains(name) {
                    name = ExportJob.fileName(for: item, extension: "\(item.take.shortID).\(encoder.fileExtension)")
                }
                names.insert(name)
                let target = item.target ?? directory.appendingPathComponent(name)
                let progress = ExportProgress(totalFrames: item.take.frames, sampleRate: item.take.format.sampleRate)
                let job = ExportJob(item: item, source: try source(of: item), target: target, decoders: decoders,
                                    encoder: encoder, encoderSettings: encoderSettings, sampleFormat: sampleFormat, force: force,
                                    threads: threads, progress: progress, partials: partials, facts: facts,
                                    finishing: finishing, analyzer: analyzer, resampler: resampler)
                jobs.append(Job(item: item, target: target, progress: progress))
                prepared.append(.success(job))
            } catch {
                prepared.append(.failure((error as? TapedeckError) ?? TapedeckError(.internalError, "\(error)")))
            }
        }

        var results = [Result<ExportReport, TapedeckError>?](repeating: nil, count: items.count)
        await withTaskGroup(of: (Int, Result<ExportReport, TapedeckError>).self) { group in
            var next = 0
            func startNext() {
                while next < prepared.count {
                    let index = next
                    next += 1
                    switch prepared[index] {
                    case .failure(let e):
                        results[index] = .failure(e)
                        continue
                    case .success(let job):
                        group.addTask { (index, await Self.runOnThread(job)) }
                        return
                    }
                }
            }
            for _ in 0..<cores { startNext() }
            for await (index, result) in group {
                results[index] = result
                if case .failure(let e) = result {
                    logger.debug("Export of \"\(items[index].session.name)/\(items[index].take.name)\" failed: \(e.message)")
                }
                startNext()
            }
        }
        return await attested(results.map { $0! }, items: items)
    }

    /// The reports, each with the signed statement written beside its file when an ``attester``
    /// signs and its takes are signed (not for a stream to stdout). A statement that cannot be
    /// written is said, and the export kept.
    private func attested(_ results: [Result<ExportReport, TapedeckError>], items: [ExportItem]) async -> [Result<ExportReport, TapedeckError>] {
        guard let attester else { return results }
        var out = results
        for (i, result) in results.enumerated() {
            guard case .success(var report) = result, FileManager.default.fileExists(atPath: report.output) else { continue }
            let takes = items[i].clip?.takes ?? [items[i].take]
            let sources = takes.compactMap { try? store.storage.audioURL(for: $0) }
            let settings = report.settings.mapValues(\.description).merging(["encoding": report.encoding, "format": "\(report.format.sampleFormat)/\(report.format.sampleRate)/\(report.format.channels)"]) { a, _ in a }
            let output = URL(fileURLWithPath: report.output)
            do {
                report.statement = try await BlockingWork.detached { try attester.attest(output: output, sources: sources, settings: settings) }?.path
                out[i] = .success(report)
            } catch {
                logger.warning("The export \(output.lastPathComponent) is kept, but its signed statement could not be written: \(error).")
            }
        }
        return out
    }

    /// Where `item`'s audio comes from: its take's file, or each file its clip is cut from.
    private func source(of item: ExportItem) throws -> ExportSource {
        func decoder(for take: Take) throws -> any AudioDecoder {
            guard let decoder = decoders.first(where: { $0.encodings.contains(take.encoding) }) else {
                throw TapedeckError(.unsupportedFormat, "No decoder in this build reads \(take.encoding) takes.")
            }
            return decoder
        }
        guard let clip = item.clip else {
            return .file(item.take, session: item.session, at: try store.storage.audioURL(for: item.take), decoder: try decoder(for: item.take))
        }
        var files: [String: (url: URL, decoder: any AudioDecoder)] = [:]
        for take in clip.takes { files[take.id] = (try store.storage.audioURL(for: take), try decoder(for: take)) }
        return .clip(clip) { [files] take in
            guard let file = files[take.id] else { throw TapedeckError(.internalError, "Take \(take.name) is not in the clip's plan.") }
            return try LoudnessScanner.openTake(take, at: file.url, decoder: file.decoder).base
        }
    }

    private nonisolated static func runOnThread(_ job: ExportJob) async -> Result<ExportReport, TapedeckError> {
        await withCheckedContinuation { cont in
            let thread = Thread {
                do {
                    cont.resume(returning: .success(try job.run()))
                } catch let e as TapedeckError {
                    cont.resume(returning: .failure(e))
                } catch {
                    cont.resume(returning: .failure(TapedeckError(.io, "Export failed: \(error).")))
                }
            }
            thread.name = "tapedeck-export"
            thread.start()
        }
    }
}
