public import TapedeckCore
public import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Brings existing recordings into the library as takes, and whole sessions from another store
/// (a `.tapedeck` bundle) into this one.
///
/// A file that a decoder says the library can keep as it is (`AudioDecoder.storesVerbatim(_:)`)
/// is copied byte for byte (its format, header and tags kept); anything else a decoder reads
/// (`AudioDecoder.canRead(_:)`) is decoded and written with the library's encoder in the same
/// rate, channels and sample format. Every file is
/// decoded from end to end first, so one that cannot be is refused with the reader's reason before
/// anything is written. The audio is prepared in a hidden file inside the library, synced, and moved
/// into place; a copied file is prepared before its take's entry exists, a transcoded one while
/// its entry is held as a recording's is (so its tags carry the take number the library gives it).
/// A failure removes the entry again, and after a crash the next open does: nothing half-imported
/// remains.
public struct TakeImporter: Sendable {
    public let storage: any TakeStorage
    /// Used for files that cannot be kept as they are.
    public let encoder: any AudioEncoder
    public let decoders: [any AudioDecoder]
    /// The temporary files being written, for a stop signal to remove.
    public let partials: PartialFiles
    /// Measures each imported file's loudness as it is read; `nil`: not measured.
    public let analyzer: (any LoudnessAnalyzer)?
    /// The machine's identity, for the metadata of files written anew.
    public let facts: TakeFacts
    /// Where each imported take's waveform overview goes (drawn as the file is read); `nil`: none.
    public let waveforms: TakeWaveforms?

    public init(storage: any TakeStorage, encoder: any AudioEncoder, decoders: [any AudioDecoder], partials: PartialFiles = PartialFiles(),
                analyzer: (any LoudnessAnalyzer)? = nil, facts: TakeFacts = TakeFacts(), waveforms: TakeWaveforms? = nil) {
        self.analyzer = analyzer
        self.waveforms = waveforms
        self.facts = facts
        self.storage = storage
        self.encoder = encoder
        self.decoders = decoders
        self.partials = partials
    }

    /// Imports one audio file into a session as a take named `name`, or after the file: `song`,
    /// then `song (2)`, `song (3)`, … when the session has a take of that name already.
    /// - Throws: `.notFound` for a missing file, `.invalidArgument` for anything but a regular
    ///   file (a FIFO or device is refused before it is opened, so nothing waits on it).
    /// - Thread: any except the main actor's. Blocks for as long as decoding and copying take.
    public func importFile(_ url: URL, into session: Session, named name: String? = nil) throws -> Take {
        try importFileReporting(url, into: session, named: name).take
    }

    /// One imported file: the take, and the file's own sample encoding when the take holds it
    /// converted (`u8` widened to s16, `f64` narrowed to f32, `A-law` decoded), so the user is told.
    public struct ImportedFile: Sendable {
        public var take: Take
        public var convertedFrom: String?
        /// Samples that are NaN, infinite or past +40 dBFS (`InvalidSamples`): measured as
        /// silence or full scale, and so written where the file is written anew (a file kept
        /// byte for byte keeps them, and every export, measurement and playback replaces them).
        public var invalidSamples: Int64 = 0
    }

    /// ``importFile(_:into:named:)``, saying what the file was converted from.
    /// - Thread: any except the main actor's. Blocks for as long as decoding and copying take.
    public func importFileReporting(_ url: URL, into session: Session, named name: String? = nil) throws -> ImportedFile {
        var info = stat()
        guard stat(url.path, &info) == 0 else {
            if errno == ENOENT || errno == ENOTDIR {
                throw TapedeckError(.notFound, "\(url.path) does not exist. Check the path.")
            }
            throw TapedeckError.system(errno, while: "look at \(url.path)")
        }
        switch info.st_mode & S_IFMT {
        case S_IFREG: break
        case S_IFDIR: throw TapedeckError(.invalidArgument, "\(url.path) is a folder. Give the audio files in it, e.g. `tapedeck import \(url.path)/*`.")
        case S_IFIFO: throw TapedeckError(.invalidArgument, "\(url.path) is a FIFO, not a file: it is not read, since it could wait forever. Save the audio to a file first.")
        default: throw TapedeckError(.invalidArgument, "\(url.path) is a device or socket, not a file. Give audio files only.")
        }
        guard FileManager.default.isReadableFile(atPath: url.path) else {
            throw TapedeckError(.io, "\(url.path) cannot be read: permission denied. Check its permissions.", systemCode: EACCES)
        }
        // Verbatim when the file already is what the library stores; otherwise decode and encode.
        let verbatim = decoders.lazy.compactMap { d in d.storesVerbatim(url).map { (d, $0) } }.first
        guard let decoder = verbatim?.0 ?? decoders.first(where: { $0.canRead(url) }) else {
            throw unreadable(url)
        }
        let stem = url.deletingPathExtension().lastPathComponent
        let names = name.map { [$0] } ?? [stem] + (2...999).map { "\(stem) (\($0))" }
        let started = (try? FileManager.default.attributesOfItem(atPath: url.path)[.modificationDate] as? Date) ?? Date()
        let temp = storage.rootURL.appendingPathComponent(PartialFiles.importName())
        partials.register(temp)
        defer {
            unlink(temp.path)
            partials.forget(temp)
        }

        let (format, frames, source, loudness, peaks, invalid) = try decodeAll(url, decoder: decoder)
        if let kept = verbatim?.1 {
            // Kept byte for byte (its own bext, iXML and tags with it); the loudness goes to the library.
            try copy(url, to: temp)
            let take = try commit(temp, names: names, in: session, format: format, encoding: kept.encoding,
                                  fileExtension: kept.fileExtension, startDate: started, frames: frames, state: .complete, overruns: [])
            waveforms?.store(peaks, for: take)
            return ImportedFile(take: noting(loudness, on: take), convertedFrom: source, invalidSamples: invalid)
        }
        try encoder.validate(format)
        // Written once the entry exists: its tags carry the name and number the store gave the take.
        let take = try commit(temp, names: names, in: session, format: format, encoding: encoder.name,
                              fileExtension: encoder.fileExtension, startDate: started, frames: frames,
                              state: .complete, overruns: []) { take in
            var metadata = facts.metadata(for: take, sessionName: session.name)
            metadata.loudness = loudness
            try transcode(url, decoder: decoder, to: temp, format: format, metadata: metadata)
        }
        waveforms?.store(peaks, for: take)
        return ImportedFile(take: noting(loudness, on: take), convertedFrom: source, invalidSamples: invalid)
    }

    /// Imports every finished take of `source`'s session into a new session of this store, with
    /// names, dates, states, overruns and audio kept. If any take fails, the new session is removed.
    /// - Thread: any except the main actor's. Blocks for as long as decoding and copying take.
    public func importSession(_ sessionID: String, from source: any TakeStorage, named name: String?) throws -> (Session, [Take]) {
        guard let original = try source.session(id: sessionID) else {
            throw TapedeckError(.notFound, "\(source.rootURL.path) holds no session \(sessionID).")
        }
        let session = try storage.createSession(named: name ?? original.name)
        do {
            var imported: [Take] = []
            for take in original.takes where take.state != .recording {
                let url = try source.audioURL(for: take)
                guard let decoder = decoders.first(where: { $0.encodings.contains(take.encoding) }) else {
                    throw TapedeckError(.unsupportedFormat, "Take \"\(take.name)\" is \(take.encoding), which this build cannot read.")
                }
                let temp = storage.rootURL.appendingPathComponent(PartialFiles.importName())
                partials.register(temp)
                defer {
                    unlink(temp.path)
                    partials.forget(temp)
                }
                try copy(url, to: temp)
                let ext = url.pathExtension.isEmpty ? take.encoding : url.pathExtension
                imported.append(try importTake(movingFrom: temp, as: take, fileExtension: ext, decoder: decoder, into: session))
            }
            return (session, imported)
        } catch {
            try? storage.deleteSession(session.id)
            throw error
        }
    }

    /// Keeps the file `temp` (inside the library, e.g. a take downloaded from a remote) byte for
    /// byte as a copy of `original`, another library's take: read through first (a damaged file
    /// is refused), then committed with the original's encoding, name, date, state and overruns,
    /// and given its notes, tags, markers, clip count and first frame's time. The loudness is
    /// the one measured now (the original's when it cannot be measured).
    /// - Thread: any except the main actor's. Blocks for as long as reading the file takes.
    public func importTake(movingFrom temp: URL, as original: Take, fileExtension: String, into session: Session) throws -> Take {
        guard let decoder = decoders.first(where: { $0.encodings.contains(original.encoding) }) else {
            throw TapedeckError(.unsupportedFormat, "Take \"\(original.name)\" is \(original.encoding), which this build cannot read.")
        }
        try checkSignature(temp, claimed: original.encoding, decoder: decoder, name: original.name)
        return try importTake(movingFrom: temp, as: original, fileExtension: fileExtension, decoder: decoder, into: session)
    }

    /// Refuses a file whose bytes are not the format it is said to be (`claimed`, an encoding):
    /// its decoder's signature check says no, or, where that decoder knows no signature,
    /// another format's signature fits. A decoder that reads many formats (libsndfile's) would
    /// otherwise keep FLAC or AIFF bytes as a `wav` take.
    /// - Throws: `.corruptFile` naming what the bytes are, when that is known.
    /// - Thread: any. Blocks briefly on disk I/O.
    func checkSignature(_ url: URL, claimed: String, decoder: any AudioDecoder, name: String) throws {
        let own = decoder.hasSignature(of: claimed, at: url)
        if own == true { return }
        var actual: String?
        for other in decoders where actual == nil {
            actual = other.encodings.sorted().first { $0 != claimed && other.hasSignature(of: $0, at: url) == true }
        }
        guard own == false || actual != nil else { return }
        throw TapedeckError(.corruptFile, "Take \"\(name)\" is \(claimed) by its manifest, but \(actual.map { "the file holds \($0) audio" } ?? "the file is not \(claimed)"). Nothing of it was kept.")
    }

    private func importTake(movingFrom temp: URL, as original: Take, fileExtension: String, decoder: any AudioDecoder, into session: Session) throws -> Take {
        let (format, frames, _, loudness, peaks, _) = try decodeAll(temp, decoder: decoder)
        let copied = try commit(temp, names: [original.name] + (2...99).map { "\(original.name) (\($0))" }, in: session, format: format, encoding: original.encoding,
                                fileExtension: fileExtension, startDate: original.createdAt, frames: frames,
                                state: original.state, overruns: original.overruns)
        // Notes, tags, markers, the clip count and the first frame's time come along; the
        // loudness is the one just measured (or the original's, when not measured here).
        var annotations = original.annotations
        annotations.run = nil
        annotations.loudness = loudness ?? original.loudness
        waveforms?.store(peaks, for: copied)
        // Each fact on its own merits: one that breaks a limit never costs the others.
        return (try? storage.annotateTake(copied.id, keepingValid: annotations))?.take ?? copied
    }

    /// Begins the take, lets `prepare` write `temp` for it (when the file is not prepared yet),
    /// moves the file into its place, and finishes the take. If preparing or the move fails, the
    /// entry is removed again (a crash in between leaves an entry with no audio, which the next
    /// open removes).
    /// `names`: the first that the session does not have yet is taken (the last one's refusal
    /// is the error).
    private func commit(_ temp: URL, names: [String], in session: Session, format: AudioFormat, encoding: String,
                        fileExtension: String, startDate: Date, frames: Int64, state: TakeState, overruns: [OverrunEvent],
                        prepare: (Take) throws -> Void = { _ in }) throws -> Take {
        var pending: PendingTake?
        for (i, name) in names.enumerated() where pending == nil {
            do {
                pending = try storage.beginTake(in: session.id, named: name, format: format, encoding: encoding,
                                                fileExtension: fileExtension, startDate: startDate)
            } catch let error as TapedeckError where error.code == .alreadyExists && i < names.count - 1 {
                continue
            }
        }
        guard let pending else { throw TapedeckError(.alreadyExists, "The session has takes of every name tried.") }
        do {
            try prepare(pending.take)
            try DurableFiles().moveIntoPlace(temp, pending.fileURL)
        } catch {
            _ = try? storage.completeRecovery(of: pending.take, repaired: nil)
            throw error
        }
        return try storage.finishTake(pending, frames: frames, state: state, overruns: overruns)
    }

    /// `take` with its measured `loudness` stored (a failure to store it loses nothing else).
    private func noting(_ loudness: Loudness?, on take: Take) -> Take {
        guard let loudness else { return take }
        var annotations = take.annotations
        annotations.loudness = loudness
        return (try? storage.annotateTake(take.id, keepingValid: annotations))?.take ?? take
    }

    /// Reads the whole file, so a damaged one is refused before anything is written, measuring
    /// its loudness and drawing its waveform overview on the way (invalid float samples
    /// replaced, and counted: the last value).
    private func decodeAll(_ url: URL, decoder: any AudioDecoder) throws -> (AudioFormat, Int64, String?, Loudness?, WaveformPeaks, Int64) {
        let reader = try SanitizedTakeReader(decoder.openReader(at: url))
        defer { reader.close() }
        let meter = try? analyzer?.makeFastMeter(for: reader.format)
        let tap = WaveformTap(format: reader.format)
        let frames = try reader.forEachBlock(stoppingWith: partials) {
            meter?.add($0, frames: $1)
            tap.add($0, frames: $1)
        }
        guard frames > 0 else {
            throw TapedeckError(.corruptFile, "\(url.path) holds no audio; nothing was imported.")
        }
        return (reader.format, frames, reader.sourceEncoding, meter?.result(), tap.peaks(), reader.replacedSamples)
    }

    private func transcode(_ url: URL, decoder: any AudioDecoder, to temp: URL, format: AudioFormat, metadata: TakeMetadata) throws {
        let reader = try SanitizedTakeReader(decoder.openReader(at: url))
        defer { reader.close() }
        let writer = try encoder.makeWriter(at: temp, format: format, metadata: metadata)
        var finished = false
        defer { if !finished { writer.abandon() } }
        let chunk = 16_384
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: chunk * format.bytesPerFrame, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            try partials.checkStopped()
            let n = try reader.read(into: buffer, maxFrames: chunk)
            if n == 0 { break }
            try writer.write(buffer, frames: n)
        }
        _ = try writer.finish()
        finished = true
    }

    /// Why no decoder reads `url`: the first decoder's own reason (its code kept), naming the
    /// decoders tried.
    /// The file no decoder reads: what the widest reader (libsndfile's, when built in) says
    /// about it, the decoders tried, and what to do.
    private func unreadable(_ url: URL) -> TapedeckError {
        let tried = decoders.map(\.name).joined(separator: ", ")
        var said: String?
        for decoder in decoders where said == nil {
            do {
                try decoder.openReader(at: url).close()
            } catch let error as TapedeckError {
                // A file that looks like a decoder's format but does not read is damaged: said as
                // the decoder says it.
                if error.code == .corruptFile { return error }
                // "PATH cannot be read as audio: REASON. …": the reason alone.
                said = error.message.range(of: "cannot be read as audio: ").map { String(error.message[$0.upperBound...].prefix { $0 != "." }) }
            } catch {}
        }
        return TapedeckError(.notAudio, "\(url.lastPathComponent) is not audio Tapedeck reads (\(said.map { $0 + "; " } ?? "")tried \(tried)). If it is audio in another format, convert it first with ffmpeg or sox.")
    }


    /// Copies a file to a new file (never replacing) and syncs it.
    func copy(_ source: URL, to destination: URL) throws {
        let input = open(source.path, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { throw TapedeckError.system(errno, while: "open \(source.path)") }
        defer { close(input) }
        let output = open(destination.path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, FileModes.file)
        guard output >= 0 else { throw TapedeckError.system(errno, while: "create \(destination.path)") }
        defer { close(output) }
        let size = 1 << 20
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            try partials.checkStopped()
            let n = read(input, buffer, size)
            if n < 0 {
                if errno == EINTR { continue }
                throw TapedeckError.system(errno, while: "read \(source.path)")
            }
            if n == 0 { break }
            var done = 0
            while done < n {
                let w = write(output, buffer + done, n - done)
                if w < 0 {
                    if errno == EINTR { continue }
                    throw TapedeckError.system(errno, while: "write \(destination.path)")
                }
                done += w
            }
        }
        guard fsync(output) == 0 else { throw TapedeckError.system(errno, while: "sync \(destination.path)") }
    }
}

extension TakeImporter {
    /// ``importFileReporting(_:into:named:)`` on a background queue (off the main actor and the
    /// cooperative pool).
    /// - Thread: any; suspends while the file is imported.
    public func run(file url: URL, into session: Session, named name: String? = nil) async throws -> ImportedFile {
        let importer = self
        return try await BlockingWork.detached { try importer.importFileReporting(url, into: session, named: name) }
    }

    /// ``importSession(_:from:named:)`` on a background queue (off the main actor and the cooperative pool).
    /// - Thread: any; suspends while the session is imported.
    public func run(session id: String, from source: any TakeStorage, named name: String?) async throws -> (Session, [Take]) {
        let importer = self
        return try await BlockingWork.detached { try importer.importSession(id, from: source, named: name) }
    }
}
