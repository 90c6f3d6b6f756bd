public import TapedeckCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// One problem `tapedeck doctor` found, and what `--repair` did about it.
public struct DoctorFinding: Sendable, Hashable, Codable {
    /// `interrupted`, `missing-audio`, `header-mismatch`, `unreadable-audio`, `stale-lock`,
    /// `empty-folder`, `stray-partial`, `unknown-file`, `damaged` or `rebuilt-catalog`.
    public var kind: String
    /// The take (`SESSION/TAKE`) or the library-relative path concerned.
    public var subject: String
    /// What is wrong, in a sentence.
    public var problem: String
    /// What the repair did; `nil` when nothing was repaired.
    public var repaired: String?
    /// Why the repair failed, when it was attempted and did not succeed.
    public var repairFailed: String?

    /// Runs one repair; a failure is recorded on this finding and does not stop the others.
    mutating func attempt(_ body: () throws -> String?) {
        do {
            repaired = try body()
        } catch {
            repairFailed = (error as? TapedeckError)?.message ?? "\(error)"
        }
    }
}

/// Finds damage in a library and, when asked, repairs it without deleting audio.
///
/// Looks for takes left `recording` by a process that died, entries whose audio is gone, audio
/// whose header disagrees with the catalog or with its own length, files no entry names, and parts
/// of the library that cannot be read (a damaged catalog, a bundle whose manifest does not parse).
/// Repairs: interrupted takes are recovered as on every open; entries without audio are removed;
/// headers are rewritten from the audio actually present and the entry marked `recovered`;
/// unknown files and unreadable bundles are moved into the library's `quarantine/` folder.
public struct LibraryDoctor: Sendable {
    public let storage: any LibraryMaintenance
    public let encoders: [any AudioEncoder]
    public let decoders: [any AudioDecoder]

    public init(storage: any LibraryMaintenance, encoders: [any AudioEncoder], decoders: [any AudioDecoder]) {
        self.storage = storage
        self.encoders = encoders
        self.decoders = decoders
    }

    /// Examines the library and, with `repair`, fixes what it found.
    /// - Thread: any except the main actor's; blocks on disk I/O for as long as reading every
    ///   take's header takes.
    public func examine(repair: Bool) throws -> [DoctorFinding] {
        var findings: [DoctorFinding] = []

        let parts = try storage.damagedParts()
        for part in parts {
            var f = DoctorFinding(kind: "damaged", subject: part.path, problem: part.problem)
            if part.needsRebuild && !part.problem.contains("--rebuild-catalog") {
                f.problem += " `tapedeck doctor --rebuild-catalog` makes a new catalog without it, with entries for the audio files."
            }
            if repair, part.canQuarantine {
                f.attempt { "moved to " + (try storage.quarantine(part.path)) }
            }
            if repair, part.needsRebuild {
                f.repairFailed = "--repair does not rebuild the catalog; run `tapedeck doctor --rebuild-catalog`."
            }
            findings.append(f)
        }
        do {
            try examineTakes(repair: repair, into: &findings)
        } catch let error as TapedeckError where error.code == .corruptFile && parts.contains(where: \.needsRebuild) {
            // The catalog cannot be read at all: nothing more can be examined until it is rebuilt.
        }
        do {
            _ = try UploadLedger(libraryURL: storage.rootURL, remote: "").allRecords()
        } catch let error as TapedeckError {
            var f = DoctorFinding(kind: "damaged", subject: UploadLedger.fileName, problem: error.message)
            if repair {
                f.attempt { "moved to " + (try storage.quarantine(UploadLedger.fileName)) + "; every take counts as pending, and the next push checks the remote before it sends anything" }
            }
            findings.append(f)
        }
        return findings
    }

    /// Where the library's uploads stand, per remote it was pushed to (from the upload ledger):
    /// empty when it never was, or when the ledger cannot be read (``examine(repair:)`` reports that).
    /// - Thread: any. Blocks briefly on disk I/O.
    public func uploads() -> [UploadSummary] {
        guard let all = try? UploadLedger(libraryURL: storage.rootURL, remote: "").allRecords() else { return [] }
        let present = Set(((try? storage.sessions()) ?? []).flatMap { $0.takes.map(\.id) })
        return all.keys.sorted().map { location in
            let records = all[location] ?? [:]
            let mine = records.filter { present.contains($0.key) }.map(\.value)
            let failed = mine.filter { $0.state == .failed }.sorted { $0.updated < $1.updated }
            return UploadSummary(remote: location, verified: mine.filter { $0.state == .verified }.count,
                                 uploading: mine.filter { $0.state == .uploading }.count, failed: failed.count,
                                 lastFailure: failed.last?.reason, pending: present.count - mine.count,
                                 deletedLocally: records.filter { !present.contains($0.key) && $0.value.state == .verified }.count,
                                 unconfirmed: mine.filter { $0.state == .verified && $0.unconfirmed != nil }.count)
        }
    }
}

/// One remote's upload state as `doctor` reports it. A plain value.
public struct UploadSummary: Sendable, Hashable, Codable {
    public var remote: String
    public var verified: Int
    /// Begun and stopped: resumed by the next `push`.
    public var uploading: Int
    public var failed: Int
    public var lastFailure: String?
    /// Takes of the library never pushed to this remote (or recorded since).
    public var pending: Int
    /// Takes verified there and since deleted here (`sync.keep-local`, or by hand).
    public var deletedLocally: Int
    /// Verified takes whose remote copy retention or `fleet doctor` could not confirm since: the
    /// next `push` checks them again and sends what is missing or stale.
    public var unconfirmed: Int
}

extension LibraryDoctor {

    /// Everything after the damaged parts: interrupted takes, missing and mismatched audio,
    /// strays and unknown files.
    private func examineTakes(repair: Bool, into findings: inout [DoctorFinding]) throws {

        for interrupted in try storage.interruptedTakes() {
            var f = DoctorFinding(kind: "interrupted", subject: interrupted.take.name,
                                  problem: "The take was left recording by a process that is no longer running.")
            if repair {
                f.attempt { try recover(interrupted) }
            }
            findings.append(f)
        }

        // Other processes may record, rename and delete while this runs: a take whose audio
        // looked missing or wrong is looked at again in a fresh read of the library, and only
        // what is still wrong there is reported (a take deleted meanwhile is not "missing").
        var suspects: [(take: Take, url: URL, missing: Bool)] = []
        for session in try storage.sessions() {
            for take in session.takes where take.state != .recording {
                let url: URL
                do {
                    url = try storage.audioURL(for: take)
                } catch let error as TapedeckError {
                    // A take whose folder became a symbolic link (or whose path cannot be used):
                    // reported, and the others still examined.
                    findings.append(DoctorFinding(kind: "unreadable-audio", subject: "\(session.name)/\(take.name)", problem: error.message))
                    continue
                }
                if Self.isMissing(url) {
                    suspects.append((take, url, true))
                } else if checkHeader(take, url: url, subject: "", repair: false) != nil {
                    suspects.append((take, url, false))
                }
            }
        }
        if !suspects.isEmpty {
            var current: [String: (session: Session, take: Take)] = [:]
            for session in try storage.sessions() {
                for take in session.takes { current[take.id] = (session, take) }
            }
            for suspect in suspects {
                guard let (session, take) = current[suspect.take.id], take.state != .recording,
                      let url = try? storage.audioURL(for: take) else { continue }
                let subject = "\(session.name)/\(take.name)"
                if Self.isMissing(url) {
                    var f = DoctorFinding(kind: "missing-audio", subject: subject, problem: "The entry names \(url.path), which does not exist.")
                    if repair {
                        f.attempt {
                            try storage.forgetTake(take.id)
                            return "removed the entry (there was no audio to keep)"
                        }
                    }
                    findings.append(f)
                } else if let finding = checkHeader(take, url: url, subject: subject, repair: repair) {
                    findings.append(finding)
                }
            }
        }

        for path in try storage.leftovers() {
            let lock = path.hasSuffix(".lock")
            var f = DoctorFinding(kind: lock ? "stale-lock" : "empty-folder", subject: path,
                                  problem: lock ? "The lock file of a take that is not being recorded; nothing needs it."
                                                : "An empty session folder no session names (left by a session whose creation failed).")
            if repair {
                f.attempt {
                    try storage.removeLeftover(path)
                    return "removed"
                }
            }
            findings.append(f)
        }

        for url in PartialFiles.stale(in: storage.rootURL) {
            var f = DoctorFinding(kind: "stray-partial", subject: url.lastPathComponent,
                                  problem: "A temporary file left by an import that was killed; it is a copy, never a take's only audio.")
            if repair {
                f.attempt {
                    guard unlink(url.path) == 0 else { throw TapedeckError.system(errno, while: "remove \(url.path)") }
                    return "removed"
                }
            }
            findings.append(f)
        }

        var folders: [String: String]?
        for path in try storage.unreferencedFiles() {
            // Audio someone put here by hand: `tapedeck import` is how it becomes a take.
            let url = storage.rootURL.appendingPathComponent(path)
            // Only a regular file is opened (never a FIFO, a device or what a symlink points to).
            var info = stat()
            let regular = lstat(url.path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG
            let audio = regular && decoders.contains { $0.canRead(url) }
            // The session whose takes share the file's folder: the import goes back there.
            if audio && folders == nil { folders = sessionFolders() }
            let session = audio ? folders?[url.deletingLastPathComponent().standardizedFileURL.path] : nil
            let into = session.map { " --session " + Self.shellWord($0) } ?? " --session NAME"
            var f = DoctorFinding(kind: "unknown-file", subject: path,
                                  problem: audio ? "No take names this file. It is audio Tapedeck reads: `tapedeck import \(Self.shellWord(url.path))\(into)` makes it a take (then remove this copy)."
                                                 : "No take names this file.")
            if repair {
                f.attempt {
                    let moved = try storage.quarantine(path)
                    return "moved to " + moved + (audio ? " (`tapedeck import \(Self.shellWord(storage.rootURL.appendingPathComponent(moved).path))\(into)` makes it a take; then remove that copy)" : "")
                }
            }
            findings.append(f)
        }
    }

    /// Each session's folder (where its first take's audio lies) → its name.
    private func sessionFolders() -> [String: String] {
        var folders: [String: String] = [:]
        for session in (try? storage.sessions()) ?? [] {
            guard let first = session.takes.first, let url = try? storage.audioURL(for: first) else { continue }
            folders[url.deletingLastPathComponent().standardizedFileURL.path] = session.name
        }
        return folders
    }

    /// `text` as one shell word: quoted when it holds anything but letters, digits and `/._-`.
    static func shellWord(_ text: String) -> String {
        text.allSatisfy { $0.isLetter || $0.isNumber || "/._-".contains($0) } ? text : "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }

    /// Makes a new catalog from what can still be read (`LibraryMaintenance.rebuildCatalog(inspect:)`),
    /// reading each file no entry names with the decoder that reads it.
    /// - Returns: a finding that says what was kept, made and left.
    /// - Thread: any except the main actor's; blocks while every such file is read.
    public func rebuildCatalog() throws -> DoctorFinding {
        let decoders = self.decoders
        let encoders = self.encoders
        let report = try storage.rebuildCatalog { url in
            for decoder in decoders {
                guard let reader = try? decoder.openReader(at: url) else { continue }
                defer { reader.close() }
                // The encoder whose files these are: by extension among those the decoder reads.
                let ext = url.pathExtension.lowercased()
                let encoding = encoders.first { decoder.encodings.contains($0.name) && $0.fileExtension == ext }?.name
                    ?? decoder.encodings.sorted().first ?? decoder.name
                return RebuiltAudio(format: reader.format, frames: reader.frameCount, encoding: encoding)
            }
            return nil
        }
        var done = "kept \(report.salvagedTakes) take(s) and \(report.salvagedSessions) session(s) that still read"
        done += "; made \(report.rebuiltTakes) take(s) and \(report.rebuiltSessions) session(s) from the audio files and folders"
        if let backup = report.backup { done += "; the old catalog is kept in \(backup)" }
        var problem = "The catalog was rebuilt"
        if report.unreadableEntries > 0 { problem += "; \(report.unreadableEntries) part(s) of the old one could not be read" }
        if !report.unreadableFiles.isEmpty {
            problem += "; no decoder reads \(report.unreadableFiles.prefix(3).joined(separator: ", "))\(report.unreadableFiles.count > 3 ? " and \(report.unreadableFiles.count - 3) more" : "") (left where they are)"
        }
        return DoctorFinding(kind: "rebuilt-catalog", subject: "catalog", problem: problem + ".", repaired: done)
    }

    /// Whether `url` is not there. Only a file that is not there is missing; one that cannot be
    /// read (EACCES, EIO) is reported by the header check and its entry kept.
    private static func isMissing(_ url: URL) -> Bool {
        var st = stat()
        return lstat(url.path, &st) != 0 && errno == ENOENT
    }

    /// Compares a take's file with its entry: the decoder reads the header (bounded by the file's
    /// real length), the encoder says whether the header agrees with the payload.
    private func checkHeader(_ take: Take, url: URL, subject: String, repair: Bool) -> DoctorFinding? {
        let encoder = encoders.first { $0.name == take.encoding }
        let decoder = decoders.first { $0.encodings.contains(take.encoding) }
        var frames: Int64?
        var problem: String?
        if let decoder {
            do {
                let reader = try decoder.openReader(at: url)
                frames = reader.frameCount
                if reader.frameCount != take.frames {
                    problem = "The catalog lists \(take.frames) frames; the file holds \(reader.frameCount)."
                }
            } catch {
                problem = "The file cannot be read: \(error)"
            }
        }
        // Bytes after the audio of a take whose header and catalog agree (an ID3 tag appended
        // to a file) are not audio: such a header is never "repaired" to cover them.
        if problem == nil, let encoder, let check = try? encoder.inspect(fileAt: url), check.headerRepaired,
           !(frames == take.frames && check.frames > take.frames) {
            problem = "The header disagrees with the audio in the file (\(check.frames) frames present)."
        }
        guard let problem else { return nil }
        var f = DoctorFinding(kind: frames == nil ? "unreadable-audio" : "header-mismatch", subject: subject, problem: problem)
        if repair, let encoder {
            f.attempt {
                let result = try encoder.repair(fileAt: url)
                try storage.markRepaired(take.id, frames: result.frames)
                return "rewrote the header for the \(result.frames) frames present; the take is now `recovered`"
            }
        }
        return f
    }

    /// Recovers an interrupted take as opening the library does, and says what happened.
    private func recover(_ interrupted: InterruptedTake) throws -> String {
        switch try TakeRecovery.recover(interrupted, storage: storage, encoders: encoders) {
        case .recovered(let take):
            return "recovered \(take.frames) frames"
        case .removed:
            return "removed the entry (no audio was ever written)"
        case .quarantined(_, let path, let reason):
            return "its file cannot be recovered (\(reason)); moved it to \(path), bytes intact, and removed the entry"
        }
    }
}

extension LibraryDoctor {
    /// ``examine(repair:)`` on a background queue (off the main actor and the cooperative pool).
    /// - Thread: any; suspends while the library is examined.
    public func run(repair: Bool) async throws -> [DoctorFinding] {
        let doctor = self
        return try await BlockingWork.detached { try doctor.examine(repair: repair) }
    }

    /// ``rebuildCatalog()`` on a background queue (off the main actor and the cooperative pool).
    /// - Thread: any; suspends while the catalog is rebuilt.
    public func runRebuild() async throws -> DoctorFinding {
        let doctor = self
        return try await BlockingWork.detached { try doctor.rebuildCatalog() }
    }
}
