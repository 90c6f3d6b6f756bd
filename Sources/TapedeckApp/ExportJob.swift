public import TapedeckCore
public import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One take to export.
public struct ExportItem: Sendable, Hashable {
    public var take: Take
    public var session: Session
    /// Tags for this export only (`export --tag`), over the take's own.
    public var extraTags: [String: String]
    /// The file to write; `nil` for "SESSION - TAKE.EXT" in the export's folder.
    public var target: URL?
    /// A clip cut from several takes (`export --from … --to …`); ``take`` then stands for it
    /// (``ClipPlan/take(in:)``: its name, time of day, markers and description).
    public var clip: ClipPlan?
    public init(take: Take, session: Session, extraTags: [String: String] = [:], target: URL? = nil) {
        self.init(take: take, session: session, extraTags: extraTags, target: target, clip: nil)
    }

    /// An item for a clip (``ClipPlan/take(in:)`` as its take), or a take when `clip` is nil.
    public init(take: Take, session: Session, extraTags: [String: String] = [:], target: URL? = nil, clip: ClipPlan?) {
        self.take = take
        self.session = session
        self.extraTags = extraTags
        self.target = target
        self.clip = clip
    }
}

/// What one finished export produced.
public struct ExportReport: Sendable, Hashable, Codable {
    public var takeID: String
    public var session: String
    public var take: String
    public var source: String
    public var output: String
    /// The encoder that wrote it: `flac`, `wav`, `opus`, … (as a take's `encoding`).
    public var encoding: String
    /// The file's rate, channels and sample format (as a take's `format`).
    public var format: FormatJSON
    /// The encoder's settings, as typed values (`"level": 5`, `"verify": false`).
    public var settings: [String: SettingValue]
    public var seconds: Double
    public var frames: Int64
    public var bytes: Int64
    /// Output size over the size of the same audio as uncompressed PCM.
    public var compressionRatio: Double
    /// How the output was checked.
    public var verification: String
    public var wallSeconds: Double
    /// Gain applied, in dB (0 without `--loudness` or `--normalize-peak`).
    public var gain: Double
    /// How samples were quantized again: `none` (copied, or not asked), `tpdf`, `shaped`.
    public var dither: String
    /// The sample-rate converter, when the rate changed.
    public var resampler: String?
    /// The exported file's integrated loudness (LUFS) and true peak (dBTP): measured as written
    /// when the audio changed, the take's own otherwise; absent when not known.
    public var integratedLoudness: Double?
    public var truePeak: Double?
    /// Why a target was not met, or what was done instead.
    public var note: String?
    /// Samples of the take that were NaN, infinite or past +40 dBFS (`InvalidSamples`) and
    /// were exported as silence (NaN) or full scale; absent when there were none.
    public var invalidSamples: Int64?
    /// The signed statement written beside the output (`OUTPUT.statement`: what it was exported
    /// from, its settings and bytes), when its takes are signed and this machine signs.
    public var statement: String?
}

/// How an export changes the audio on its way (`export --loudness`, `--normalize-peak`, `--rate`,
/// `--dither`). A plain value; any thread.
public struct ExportFinishing: Sendable, Hashable {
    /// Integrated loudness to reach, LUFS (EBU R128: −23; streaming: −14 to −16).
    public var loudness: Double?
    /// The true peak the loudness gain may not push past, dBTP.
    public var truePeakCeiling: Double
    /// Sample peak to bring the take to, dBFS.
    public var peak: Double?
    /// Sample rate to convert to.
    public var rate: Int?
    /// How samples are made integers again where they are (a float take to s24 or s16, a gain, a
    /// new rate): TPDF by default.
    public var dither: Dither

    public init(loudness: Double? = nil, truePeakCeiling: Double = -1, peak: Double? = nil, rate: Int? = nil, dither: Dither = .tpdf) {
        self.loudness = loudness
        self.truePeakCeiling = truePeakCeiling
        self.peak = peak
        self.rate = rate
        self.dither = dither
    }
}

/// Frames done of one export, readable from any thread.
public final class ExportProgress: Sendable {
    private let done = Atomic<Int64>(0)
    /// Frames of the source.
    public let totalFrames: Int64
    public let sampleRate: Int
    init(totalFrames: Int64, sampleRate: Int) {
        self.totalFrames = totalFrames
        self.sampleRate = sampleRate
    }
    /// Frames exported so far. - Thread: any; never blocks.
    public var framesDone: Int64 { done.load(ordering: .relaxed) }
    func add(_ n: Int) { done.add(Int64(n), ordering: .relaxed) }
}

/// Where an export's audio comes from: a take's file, or a clip cut from several takes
/// (``ClipPlan``). A plain value; any thread.
struct ExportSource: Sendable {
    /// What the report names as the source: the file's path, or the takes a clip is cut from.
    let shown: String
    /// Opens the audio from its beginning. - Blocks on disk I/O.
    let open: @Sendable () throws -> SanitizedTakeReader
    /// Refuses audio that gave fewer frames (`read`, at `rate`) than the library lists.
    let checkLength: @Sendable (_ read: Int64, _ rate: Int) throws -> Void

    /// A take's own file.
    static func file(_ take: Take, session: Session, at url: URL, decoder: any AudioDecoder) -> ExportSource {
        ExportSource(shown: url.path, open: {
            guard FileManager.default.fileExists(atPath: url.path) else {
                throw TapedeckError(.notFound, "The audio file of take \"\(session.name)/\(take.name)\" is missing (\(url.path)). Run `tapedeck doctor` to check the library.")
            }
            return try LoudnessScanner.openTake(take, at: url, decoder: decoder)
        }, checkLength: { read, rate in try LoudnessScanner.checkLength(take, read: read, rate: rate, at: url) })
    }

    /// A clip: each take opened by `open` as its part begins (``ClipReader``, which checks each
    /// take's length itself).
    static func clip(_ plan: ClipPlan, open: @escaping @Sendable (Take) throws -> any TakeReader) -> ExportSource {
        let names = plan.takes.map(\.name)
        let shown = "\(plan.sessionName): " + (names.count <= 3 ? names.joined(separator: ", ") : "\(names[0]) … \(names[names.count - 1]) (\(names.count) takes)")
        return ExportSource(shown: shown, open: { SanitizedTakeReader(ClipReader(plan, open: open)) }, checkLength: { _, _ in })
    }
}

/// The blocking work of one export, run on a thread of its own.
struct ExportJob {
    let item: ExportItem
    let source: ExportSource
    let target: URL
    /// Every decoder, to check the output of encoders that do not verify their own.
    let decoders: [any AudioDecoder]
    let encoder: any AudioEncoder
    let encoderSettings: [String: SettingValue]
    let sampleFormat: SampleFormat?
    let force: Bool
    let threads: Int
    let progress: ExportProgress
    /// The temporary files being written, for a stop signal to remove.
    let partials: PartialFiles
    /// The machine's identity for the file's metadata.
    var facts = TakeFacts()
    var finishing = ExportFinishing()
    /// Measures loudness (for `--loudness`, and the output when the audio changes).
    var analyzer: (any LoudnessAnalyzer)?
    var resampler: (any SampleRateConversion)?

    /// What the export does to the samples.
    struct FinishingPlan {
        var gainDB: Double = 0
        var resample: (any SampleRateConversion)?
        var dither: Dither = .none
        var note: String?
        /// Whether the samples change beyond a plain format conversion (gain, rate).
        var changesAudio: Bool { gainDB != 0 || resample != nil }
    }

    /// The gain that reaches the loudness or peak asked for (measured from the take's file when
    /// the library does not know it), the converter for a new rate, and whether to dither.
    /// - Blocks: may decode the whole take once.
    func finishingPlan(_ source: AudioFormat, to out: AudioFormat) throws -> FinishingPlan {
        var plan = FinishingPlan()
        let name = "\"\(item.session.name)/\(item.take.name)\""
        if let target = finishing.loudness {
            guard let analyzer else { throw TapedeckError(.unsupportedFormat, "This build cannot measure loudness, so --loudness cannot be met.") }
            let loudness: Loudness?
            if out.sampleRate != source.sampleRate, let resampler {
                // A new rate changes the loudness (full-band audio loses what lies above the new
                // Nyquist frequency): the target is met on the audio as it will be written.
                loudness = try Self.resampledLoudness(self.source, to: out.sampleRate,
                                                      analyzer: analyzer, resampler: resampler, partials: partials)
            } else {
                loudness = try item.take.loudness
                    ?? Self.measure(self.source, analyzer: analyzer, partials: partials)
            }
            guard let integrated = loudness?.integrated else {
                if item.take.seconds < 0.4 {
                    throw TapedeckError(.unsupportedFormat, "\(name) is shorter than 0.4 s, too short for an integrated loudness (EBU R128 measures 400 ms blocks). Export it with --normalize-peak instead.")
                }
                throw TapedeckError(.unsupportedFormat, "\(name) is silent (nothing above -70 LUFS), so it has no loudness to bring to \(Self.decimal(target)) LUFS. Export it without --loudness.")
            }
            plan.gainDB = target - integrated
            if let peak = loudness?.truePeak, peak + plan.gainDB > finishing.truePeakCeiling {
                plan.gainDB = finishing.truePeakCeiling - peak
                plan.note = "\(Self.decimal(target)) LUFS would put the true peak at \(Self.decimal(peak + target - integrated)) dBTP, past the \(Self.decimal(finishing.truePeakCeiling)) dBTP ceiling; the gain stops at the ceiling, for \(Self.decimal(integrated + plan.gainDB)) LUFS. Tapedeck has no limiter: raise --true-peak, or lower the peaks first."
            }
        } else if let target = finishing.peak {
            let peak = try Self.samplePeak(self.source, partials: partials)
            guard peak > 0 else { throw TapedeckError(.unsupportedFormat, "\(name) is digital silence, so it has no peak to bring to \(Self.decimal(target)) dBFS. Export it without --normalize-peak.") }
            plan.gainDB = target - 20 * log10(peak)
        }
        if abs(plan.gainDB) < 0.0005 { plan.gainDB = 0 }
        if out.sampleRate != source.sampleRate {
            guard let resampler else { throw TapedeckError(.unsupportedFormat, "This build cannot convert sample rates, so --rate cannot be met.") }
            plan.resample = resampler
        }
        // Dither wherever samples become integers again: a float source, fewer bits, or samples
        // the gain or the resampler made anew.
        let narrows = !out.sampleFormat.isFloat && (source.sampleFormat.isFloat || out.sampleFormat.bitsPerSample < source.sampleFormat.bitsPerSample)
        if !out.sampleFormat.isFloat && (narrows || plan.changesAudio) { plan.dither = finishing.dither }
        return plan
    }

    /// The loudness of the take's audio converted to `rate`, as an export at that rate will
    /// hold it (before any gain). - Blocks: decodes and converts it all.
    static func resampledLoudness(_ source: ExportSource, to rate: Int, analyzer: any LoudnessAnalyzer,
                                  resampler: any SampleRateConversion, partials: PartialFiles) throws -> Loudness {
        let reader = try source.open()
        defer { reader.close() }
        let channels = reader.format.channels
        let chunk = 8192
        let capacity = Int((Double(chunk) * Double(rate) / Double(reader.format.sampleRate)).rounded(.up)) + 1024
        let converted = UnsafeMutablePointer<Float>.allocate(capacity: capacity * channels)
        defer { converted.deallocate() }
        let converter = try resampler.makeConverter(from: reader.format.sampleRate, to: rate, channels: channels)
        let meter = try analyzer.makeFastMeter(for: AudioFormat(sampleRate: rate, channels: channels, sampleFormat: .f32, layout: reader.format.layout))
        _ = try reader.forEachFloatBlock(chunk: chunk, stoppingWith: partials) { floats, n in
            meter.add(converted, frames: try converter.process(floats, frames: n, into: converted, capacity: capacity))
        }
        while case let n = try converter.process(nil, frames: 0, into: converted, capacity: capacity), n > 0 { meter.add(converted, frames: n) }
        return meter.result()
    }

    /// The loudness of the source's audio as it is. - Blocks: decodes it all.
    static func measure(_ source: ExportSource, analyzer: any LoudnessAnalyzer, partials: PartialFiles) throws -> Loudness {
        let reader = try source.open()
        defer { reader.close() }
        let meter = try analyzer.makeFastMeter(for: reader.format)
        let frames = try reader.forEachBlock(stoppingWith: partials) { meter.add($0, frames: $1) }
        try source.checkLength(frames, reader.format.sampleRate)
        return meter.result()
    }

    /// The largest sample magnitude of the file (full scale 1). - Blocks: decodes it all.
    static func samplePeak(_ source: ExportSource, partials: PartialFiles) throws -> Double {
        let reader = try source.open()
        defer { reader.close() }
        let channels = reader.format.channels
        var peak: Float = 0
        _ = try reader.forEachFloatBlock(stoppingWith: partials) { floats, n in
            for i in 0..<(n * channels) { peak = max(peak, abs(floats[i])) }
        }
        return Double(peak)
    }

    /// `-23.0` (one decimal), without `String(format:)`.
    static func decimal(_ v: Double) -> String {
        let tenths = Int((v * 10).rounded())
        return "\(tenths < 0 ? "-" : "")\(abs(tenths) / 10).\(abs(tenths) % 10)"
    }

    /// Decodes, encodes into a temporary file beside the target, verifies, and moves it into
    /// place (never replacing an existing file unless `force`). On failure nothing remains under
    /// the target name and the temporary file is removed.
    /// - Thread: a dedicated export thread. Blocks on disk I/O and CPU.
    func run() throws -> ExportReport {
        let started = ContinuousClock.now
        guard item.take.state != .recording else {
            throw TapedeckError(.busy, "Take \"\(item.session.name)/\(item.take.name)\" is still being recorded. Export it when the recording has finished.")
        }
        if !force, FileManager.default.fileExists(atPath: target.path) {
            throw TapedeckError(.alreadyExists, "\(target.path) exists already. Use --force to replace it, or --output to export elsewhere.")
        }
        let reader = try source.open()
        defer { reader.close() }
        var outFormat = reader.format.with(sampleFormat: sampleFormat ?? reader.format.sampleFormat)
        if let rate = finishing.rate { outFormat.sampleRate = rate }
        try encoder.validate(outFormat)
        let plan = try finishingPlan(reader.format, to: outFormat)

        let temp = target.deletingLastPathComponent().appendingPathComponent(PartialFiles.exportName(for: target.lastPathComponent))
        partials.register(temp)
        defer { partials.forget(temp) }
        var metadata = facts.metadata(for: item.take, sessionName: item.session.name)
        metadata.tags = item.take.tags.filter { $0.key != TakeCompanions.signedTag }.merging(item.extraTags) { _, extra in extra }
        // Audio a gain or a new rate changed is measured as written (full-band audio loses
        // loudness to a lower rate); audio copied keeps the take's loudness.
        let notes = WriterNotes()
        var writer = try encoder.makeWriter(at: temp, format: outFormat, metadata: metadata, options: WriterOptions(threads: threads, verifyWhileWriting: true))
        if plan.changesAudio, let analyzer {
            writer = MeasuringTakeWriter(writer, meter: try analyzer.makeFastMeter(for: outFormat), notes: notes)
        }
        var finished = false
        defer {
            if !finished {
                writer.abandon()
                unlink(temp.path)
            }
        }
        var output = ExportOutput(writer: writer, format: outFormat)
        if plan.changesAudio || plan.dither != .none {
            try copyThroughFloats(from: reader, to: &output, plan: plan)
        } else {
            try copyConverting(from: reader, to: &output)
        }
        let (frames, hash) = (output.frames, output.hash)
        try source.checkLength(Int64(progress.framesDone), reader.format.sampleRate)
        let written = try writer.finish()
        finished = true
        guard written == frames else {
            unlink(temp.path)
            throw TapedeckError(.io, "Exporting \"\(item.take.name)\" wrote \(written) frames of \(frames); nothing was kept. Try again.")
        }
        metadata.loudness = plan.changesAudio ? notes.loudness : item.take.loudness
        var verification = writer.verification
        do {
            if verification == nil { verification = try verifyByDecoding(temp, frames: frames, format: outFormat, hash: hash) }
            // The take's time of day, loudness and markers, where the format has a place for
            // them (metadata only: the verified audio is not touched).
            try encoder.writeFacts(metadata, toFileAt: temp)
            if !item.take.markers.isEmpty { try encoder.writeMarkers(item.take.markers, toFileAt: temp) }
        } catch {
            unlink(temp.path)
            throw error
        }
        do {
            try Self.place(temp, at: target, replacing: force)
        } catch {
            unlink(temp.path)
            throw error
        }
        let bytes = (try? FileManager.default.attributesOfItem(atPath: target.path)[.size] as? Int64) ?? 0
        let pcm = Double(frames) * Double(outFormat.bytesPerFrame)
        let wall = ContinuousClock.now - started
        return ExportReport(
            takeID: item.take.id, session: item.session.name, take: item.take.name, source: source.shown, output: target.path,
            encoding: encoder.name, format: FormatJSON(outFormat), settings: encoderSettings,
            seconds: outFormat.seconds(forFrames: frames), frames: frames, bytes: bytes,
            compressionRatio: pcm > 0 ? Double(bytes) / pcm : 0,
            verification: verification ?? "not verified (no decoder in this build reads \(encoder.name) files)",
            wallSeconds: Double(wall.components.seconds) + Double(wall.components.attoseconds) / 1e18,
            gain: (plan.gainDB * 100).rounded() / 100, dither: plan.dither.rawValue,
            resampler: plan.resample?.name, integratedLoudness: metadata.loudness?.integrated.map { ($0 * 100).rounded() / 100 },
            truePeak: metadata.loudness?.truePeak.map { ($0 * 100).rounded() / 100 }, note: plan.note,
            invalidSamples: reader.replacedSamples > 0 ? reader.replacedSamples : nil)
    }

    /// Where an export's frames go: its writer, in the output's format, and the count and
    /// content hash of what was written (the hash only when the writer does not verify its own
    /// output, for ``verifyByDecoding(_:frames:format:hash:)``).
    private struct ExportOutput {
        let writer: any TakeWriter
        let format: AudioFormat
        let selfVerifying: Bool
        var frames: Int64 = 0
        var hash = ContentHash()

        init(writer: any TakeWriter, format: AudioFormat) {
            self.writer = writer
            self.format = format
            self.selfVerifying = writer.verifiesOutput
        }

        /// Writes `n` frames in ``format``. - Blocks: disk I/O.
        mutating func put(_ block: UnsafeRawPointer, _ n: Int) throws {
            guard n > 0 else { return }
            try writer.write(block, frames: n)
            if !selfVerifying { hash.add(block, count: n * format.bytesPerFrame) }
            frames += Int64(n)
        }
    }

    /// Copies the take through floats: gain, rate, then dithered back to integers (or written
    /// as floats). - Blocks: decodes, converts and encodes it all.
    private func copyThroughFloats(from reader: any TakeReader, to out: inout ExportOutput, plan: FinishingPlan) throws {
        let outFormat = out.format
        let chunk = 8192
        let input = UnsafeMutableRawPointer.allocate(byteCount: chunk * reader.format.bytesPerFrame, alignment: 16)
        defer { input.deallocate() }
        let channels = reader.format.channels
        let floats = UnsafeMutablePointer<Float>.allocate(capacity: chunk * channels)
        defer { floats.deallocate() }
        let toFloat = SampleConverter(from: reader.format, to: .f32)
        let converter = try plan.resample.map { try $0.makeConverter(from: reader.format.sampleRate, to: outFormat.sampleRate, channels: channels) }
        let capacity = converter == nil ? chunk : Int((Double(chunk) * Double(outFormat.sampleRate) / Double(reader.format.sampleRate)).rounded(.up)) + 1024
        let resampled = converter.map { _ in UnsafeMutablePointer<Float>.allocate(capacity: capacity * channels) }
        defer { resampled?.deallocate() }
        let quantizer = outFormat.sampleFormat.isFloat ? nil
            : Quantizer(sampleFormat: outFormat.sampleFormat, channels: channels, sampleRate: outFormat.sampleRate, dither: plan.dither)
        let output = UnsafeMutableRawPointer.allocate(byteCount: capacity * outFormat.bytesPerFrame, alignment: 16)
        defer { output.deallocate() }
        let gain = Float(pow(10, plan.gainDB / 20))
        func emit(_ samples: UnsafePointer<Float>, _ n: Int) throws {
            if let quantizer {
                quantizer.quantize(samples, frames: n, into: output)
                try out.put(output, n)
            } else {
                try out.put(UnsafeRawPointer(samples), n)
            }
        }
        while true {
            try partials.checkStopped()
            let n = try reader.read(into: input, maxFrames: chunk)
            if n == 0 { break }
            toFloat.convert(input, into: UnsafeMutableRawPointer(floats), frames: n)
            if gain != 1 { for i in 0..<(n * channels) { floats[i] *= gain } }
            if let converter, let resampled {
                try emit(resampled, try converter.process(floats, frames: n, into: resampled, capacity: capacity))
            } else {
                try emit(floats, n)
            }
            progress.add(n)
        }
        if let converter, let resampled {
            while case let n = try converter.process(nil, frames: 0, into: resampled, capacity: capacity), n > 0 { try emit(resampled, n) }
        }
    }

    /// Copies the take's frames as they are, converted to the output's sample format when it
    /// differs. - Blocks: decodes and encodes it all.
    private func copyConverting(from reader: any TakeReader, to out: inout ExportOutput) throws {
        let outFormat = out.format
        let chunk = 8192
        let input = UnsafeMutableRawPointer.allocate(byteCount: chunk * reader.format.bytesPerFrame, alignment: 16)
        defer { input.deallocate() }
        let converter = outFormat.sampleFormat == reader.format.sampleFormat ? nil : SampleConverter(from: reader.format, to: outFormat.sampleFormat)
        let output = converter.map { _ in UnsafeMutableRawPointer.allocate(byteCount: chunk * outFormat.bytesPerFrame, alignment: 16) }
        defer { output?.deallocate() }
        while true {
            try partials.checkStopped()
            let n = try reader.read(into: input, maxFrames: chunk)
            if n == 0 { break }
            if let converter, let output { converter.convert(input, into: output, frames: n) }
            try out.put(converter != nil ? UnsafeRawPointer(output!) : UnsafeRawPointer(input), n)
            progress.add(n)
        }
    }

    /// Decodes the written file with the decoder for the encoder's format and compares its frame
    /// count and content hash with what was written. `nil` when no decoder reads that format.
    func verifyByDecoding(_ url: URL, frames: Int64, format: AudioFormat, hash: ContentHash) throws -> String? {
        guard let decoder = decoders.first(where: { $0.encodings.contains(encoder.name) }) else { return nil }
        let reader = try decoder.openReader(at: url)
        defer { reader.close() }
        let chunk = 8192
        // Sized by what the reader delivers, which may differ from what was written.
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: chunk * reader.format.bytesPerFrame, alignment: 16)
        defer { buffer.deallocate() }
        var decoded = ContentHash()
        var count: Int64 = 0
        while true {
            let n = try reader.read(into: buffer, maxFrames: chunk)
            if n == 0 { break }
            decoded.add(buffer, count: n * reader.format.bytesPerFrame)
            count += Int64(n)
        }
        if !encoder.isLossless {
            return try checkLossyLength(url, decoded: count, as: reader.format, written: frames, format: format)
        }
        guard reader.format == format, count == frames, decoded == hash else {
            throw TapedeckError(.io, "Verifying \(url.lastPathComponent) failed: it decodes to \(count) frames of \(reader.format) that differ from the \(frames) frames of \(format) written. Nothing was kept.")
        }
        // The hash is the comparison's own (not a checksum to keep: FLAC's MD5 is one, and a
        // file's SHA-256 comes with the take's provenance), so the report does not print it.
        return "decoded again and compared with what was written: \(frames) frames of \(format.sampleFormat.rawValue) at \(format.sampleRate) Hz, the same samples (by a 64-bit hash of each stream)"
    }

    /// A lossy file keeps the sound, not the samples: checks that all of it decodes, at the
    /// decoder's rate, to the length written, and no more than the codec's own delay and padding
    /// beyond (``AudioEncoder/maxDecodedExtraFrames(for:)``, e.g. MP3 at 11.025 kHz). Returns
    /// what the report says.
    /// - Throws: `.io` for a file that decodes short (damaged: audio is missing); `.internalError`
    ///   for one that decodes long or with other channels (the encoder did not write what it
    ///   was given, which no disk does). - Thread: the export thread. Never blocks.
    func checkLossyLength(_ url: URL, decoded count: Int64, as decodedFormat: AudioFormat, written frames: Int64, format: AudioFormat) throws -> String {
        let scale = Double(decodedFormat.sampleRate) / Double(format.sampleRate)
        let expected = Double(frames) * scale
        let tolerance = max(2, expected * 0.001)
        let padding = Double(encoder.maxDecodedExtraFrames(for: format)) * scale
        let said = "\(count) frames at \(decodedFormat.sampleRate) Hz"
        let bug = "the encoder did not write what it was given. Nothing was kept. Export to another --format or at another --rate meanwhile; this is a bug in Tapedeck, please report it with the command you ran."
        guard decodedFormat.channels == format.channels else {
            throw TapedeckError(.internalError, "Verifying \(url.lastPathComponent) failed: it decodes to \(decodedFormat.channels) channels, not the \(format.channels) written: \(bug)")
        }
        guard Double(count) <= expected + tolerance + padding else {
            throw TapedeckError(.internalError, "Verifying \(url.lastPathComponent) failed: it decodes to \(said), more than the \(Int64(expected.rounded())) written "
                + "and the \(encoder.name) codec's own delay and padding (at most \(Int64(padding.rounded()))): \(bug)")
        }
        guard Double(count) >= expected - tolerance else {
            throw TapedeckError(.io, "Verifying \(url.lastPathComponent) failed: it decodes to \(said), fewer than the \(Int64(expected.rounded())) written, so audio is missing from it. Nothing was kept. Check the disk you export to, and try again.")
        }
        if Double(count) > expected + tolerance {
            return "decoded again: \(said), the full length and \(Int64((Double(count) - expected).rounded())) frames of the codec's delay and padding (lossy: samples differ by design)"
        }
        return "decoded again: \(said), the full length (lossy: samples differ by design)"
    }

    /// Moves the finished temporary file to `target`: with `replacing`, an atomic rename over it;
    /// otherwise the library's own never-replacing move (``DurableFiles/moveIntoPlace(_:_:)``: a
    /// hard link, or on file systems without them, FAT and exFAT sticks, a rename after checking
    /// the name is free). Syncs the folder.
    static func place(_ temp: URL, at target: URL, replacing: Bool) throws {
        if replacing {
            guard rename(temp.path, target.path) == 0 else { throw TapedeckError.system(errno, while: "move the export into place at \(target.path)") }
            try DurableFiles().syncDirectory(target.deletingLastPathComponent())
            return
        }
        do {
            try DurableFiles().moveIntoPlace(temp, target)
        } catch let error as TapedeckError where error.code == .alreadyExists {
            throw TapedeckError(.alreadyExists, "\(target.path) appeared while exporting. Use --force to replace it.")
        }
    }

    /// `Session 1 - Take 3.flac`, made safe for file systems: no `/`, control characters or
    /// leading dots and dashes, at most 200 bytes. A name that had to be cut gets the take's short
    /// id, `….1f2e3d4c.flac`: two takes whose names differ only past the cut must not get one
    /// file name (and replace each other's export with `--force`).
    static func fileName(for item: ExportItem, extension ext: String) -> String {
        var base = String("\(item.session.name) - \(item.take.name)".unicodeScalars.map { s -> Character in
            s == "/" || s == "\\" || s.properties.generalCategory == .control ? "_" : Character(s)
        })
        while let first = base.first, first == "." || first == "-" || first == " " { base.removeFirst() }
        var cut = false
        while base.utf8.count > 200 {
            base.removeLast()
            cut = true
        }
        if base.trimmingCharacters(in: .whitespaces).isEmpty { return "take-\(item.take.shortID).\(ext)" }
        return cut ? base + "." + item.take.shortID + "." + ext : base + "." + ext
    }
}

/// A 64-bit hash of a byte stream, to compare what was written with what decodes back: FNV-1a
/// over the stream's 64-bit words (a partial word is carried between calls, so the result does
/// not depend on how the stream was chunked), with an extra shift-xor so every byte counts.
struct ContentHash: Equatable {
    private var value: UInt64 = 0xCBF2_9CE4_8422_2325
    private var partial: UInt64 = 0
    private var partialBytes = 0
    private var length = 0
    private static let prime: UInt64 = 0x0000_0100_0000_01B3

    private mutating func mix(_ word: UInt64) {
        value = (value ^ word) &* Self.prime
        value ^= value >> 29
    }

    mutating func add(_ p: UnsafeRawPointer, count: Int) {
        length += count
        var i = 0
        while partialBytes != 0 && i < count {
            partial |= UInt64(p.load(fromByteOffset: i, as: UInt8.self)) << (8 * partialBytes)
            partialBytes += 1
            i += 1
            if partialBytes == 8 {
                mix(partial)
                partial = 0
                partialBytes = 0
            }
        }
        while i + 8 <= count {
            mix(UInt64(littleEndian: p.loadUnaligned(fromByteOffset: i, as: UInt64.self)))
            i += 8
        }
        while i < count {
            partial |= UInt64(p.load(fromByteOffset: i, as: UInt8.self)) << (8 * partialBytes)
            partialBytes += 1
            i += 1
        }
    }

    var hex: String {
        var h = self
        h.mix(partial ^ UInt64(length))
        return String(h.value, radix: 16)
    }
}

extension ExportItem {
    /// The file name an export of this take gets (`Session 1 - Take 3.flac`; see
    /// `ExportJob.fileName(for:extension:)`). - Thread: any. Never blocks.
    public func fileName(extension ext: String) -> String {
        ExportJob.fileName(for: self, extension: ext)
    }
}
