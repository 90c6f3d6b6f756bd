public import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A take being recorded: its catalog row is committed (state `recording`) and its audio goes to
/// ``fileURL`` until ``TakeStorage/finishTake(_:frames:state:overruns:)``.
public struct PendingTake: Sendable, Hashable {
    /// The take as committed, in state `recording`.
    public var take: Take
    /// The session it belongs to.
    public var session: Session
    /// Where the writer must create the audio file.
    public var fileURL: URL

    public init(take: Take, session: Session, fileURL: URL) {
        self.take = take
        self.session = session
        self.fileURL = fileURL
    }
}

/// An interrupted take found when a library is opened, with the file to repair.
public struct InterruptedTake: Sendable, Hashable {
    public var take: Take
    /// The audio file as it was left; `nil` when no audio byte was ever written.
    public var fileURL: URL?

    public init(take: Take, fileURL: URL?) {
        self.take = take
        self.fileURL = fileURL
    }
}

/// Where sessions, takes and their audio live.
///
/// Every implementation keeps one promise: a take's catalog entry and its audio never drift
/// apart. Rows are committed in state `recording` before the first audio byte; finishing renames
/// the synced file into place, syncs the directory and only then commits `complete`; deleting
/// removes the row first and the file second.
///
/// Stores are `Sendable` and safe to call from any thread. Every method may block on disk I/O
/// or on another process's lock (bounded by the store's busy timeout).
public protocol TakeStorage: Sendable {
    /// The library's root folder.
    /// - Thread: any. Blocks on disk I/O and on other processes' catalog locks (bounded by the busy timeout).
    var rootURL: URL { get }

    /// Every session with its takes, oldest session first, takes in recording order.
    /// - Thread: any. Blocks on disk I/O and on other processes' catalog locks (bounded by the busy timeout).
    func sessions() throws -> [Session]

    /// The session a recording goes into, without its takes: the one named `name`, or with `nil`
    /// the most recently active one (whose latest take, or when it has none its creation, is the
    /// newest; the oldest session of equals). `nil` when there is no such session. A store should
    /// answer this without reading every take (the default implementation reads ``sessions()``),
    /// so that starting a recording costs the same in a library of any size.
    /// - Thread: any. Blocks on disk I/O and on other processes' catalog locks (bounded by the busy timeout).
    func findSessionForRecording(named name: String?) throws -> Session?

    /// Calls `body` with each session and its takes, in ``sessions()``'s order, one session at a
    /// time: a store that can reads one session's takes at a time, so listing a library costs
    /// memory for its largest session, not for all of it, and the first session is ready at once.
    /// The default walks ``sessions()``.
    /// - Thread: any; `body` runs on the calling thread. Blocks on disk I/O and on other
    ///   processes' catalog locks (bounded by the busy timeout), and for as long as `body` does.
    func forEachSession(_ body: (Session) throws -> Void) throws

    /// Every session (with all its takes) that a user's reference `text` could name or hold a
    /// take of: by id prefix (sessions and takes), by exact session name (the text, or its part
    /// before any `/`), and for `last` the session of the newest take. A superset of what
    /// `TakeReference.resolve(_:in:)` would find in ``sessions()`` (so it finds the same, and
    /// the same ambiguities), found by key: a store should answer it without reading the whole
    /// library. The default is ``sessions()``.
    /// - Thread: any. Blocks on disk I/O and on other processes' catalog locks (bounded by the busy timeout).
    func sessions(matching text: String) throws -> [Session]

    /// Creates a session. With `name == nil`, the next free default name ("Session 1", …).
    /// - Thread: any. Blocks on disk I/O and on other processes' catalog locks (bounded by the busy timeout).
    func createSession(named name: String?) throws -> Session

    /// Commits a take row in state `recording` and returns where its audio goes.
    /// With `name == nil`, the next free default name in the session ("Take 1", …).
    /// - Thread: any. Blocks on disk I/O and on other processes' catalog locks (bounded by the busy timeout).
    func beginTake(in sessionID: String, named name: String?, format: AudioFormat,
                   encoding: String, fileExtension: String, startDate: Date) throws -> PendingTake

    /// Moves the finished, synced file into place, syncs the folder, then commits the row with
    /// its final state, frames and overruns.
    /// - Thread: any. Blocks on disk I/O and on other processes' catalog locks (bounded by the busy timeout).
    func finishTake(_ pending: PendingTake, frames: Int64, state: TakeState, overruns: [OverrunEvent]) throws -> Take

    /// Renames a session (display name only).
    /// - Thread: any. Blocks on disk I/O and on other processes' catalog locks (bounded by the busy timeout).
    func renameSession(_ id: String, to name: String) throws -> Session
    /// Renames a take (display name only).
    /// - Thread: any. Blocks on disk I/O and on other processes' catalog locks (bounded by the busy timeout).
    func renameTake(_ id: String, to name: String) throws -> Take

    /// Replaces a take's notes, tags and clip count (checked with ``TakeAnnotations/validate()``
    /// first), and returns the take as committed.
    /// - Thread: any. Blocks on disk I/O and on other processes' catalog locks (bounded by the busy timeout).
    func annotateTake(_ id: String, _ annotations: TakeAnnotations) throws -> Take

    /// Deletes a session's rows, then its audio.
    /// - Thread: any. Blocks on disk I/O and on other processes' catalog locks (bounded by the busy timeout).
    func deleteSession(_ id: String) throws
    /// Deletes a take's row, then its audio.
    /// - Thread: any. Blocks on disk I/O and on other processes' catalog locks (bounded by the busy timeout).
    func deleteTake(_ id: String) throws

    /// Takes left in state `recording` by a process that is no longer running.
    /// - Thread: any. Blocks on disk I/O and on other processes' catalog locks (bounded by the busy timeout).
    func interruptedTakes() throws -> [InterruptedTake]

    /// Records the outcome of repairing an interrupted take: moves its file into place and marks
    /// it `recovered` with the real frame count, or removes the row when no audio exists.
    /// - Thread: any. Blocks on disk I/O and on other processes' catalog locks (bounded by the busy timeout).
    func completeRecovery(of take: Take, repaired: RepairResult?) throws -> Take?

    /// The absolute URL of a take's audio file, confined beneath ``rootURL``.
    /// - Thread: any. Blocks on disk I/O and on other processes' catalog locks (bounded by the busy timeout).
    func audioURL(for take: Take) throws -> URL

    /// Each of `session`'s takes' audio file, by take id: its path (`nil` when ``audioURL(for:)``
    /// refuses it, e.g. a symbolic link) and its size (`nil` when it is missing), for a listing.
    /// A store should find them without resolving every path from the root (the default calls
    /// ``audioURL(for:)`` and `stat` per take).
    /// - Thread: any. Blocks on disk I/O.
    func audioFiles(of session: Session) -> [String: AudioFileInfo]
}

/// Where a take's audio is and how large it is, for listings. A plain value.
public struct AudioFileInfo: Sendable, Hashable {
    /// The file's absolute path; `nil` when its path cannot be used.
    public var path: String?
    /// Its size in bytes; `nil` when it is missing.
    public var bytes: Int64?

    public init(path: String?, bytes: Int64?) {
        self.path = path
        self.bytes = bytes
    }
}

extension TakeStorage {
    /// Reads ``sessions()`` and picks the session as the requirement says. - Thread: any. Blocks
    /// as ``sessions()`` does.
    public func findSessionForRecording(named name: String?) throws -> Session? {
        let all = try sessions()
        var found: Session?
        if let name {
            found = all.first { $0.name == name }
        } else {
            // max(by:) keeps the first of equals, and sessions() lists the oldest first.
            found = all.max { a, b in
                (a.takes.map(\.createdAt).max() ?? a.createdAt) < (b.takes.map(\.createdAt).max() ?? b.createdAt)
            }
        }
        found?.takes = []
        return found
    }

    /// Stores the facts a recording or an import learnt about a take: the parts of
    /// `annotations` that keep their limits (``TakeAnnotations/keepingValid()``), so a part
    /// that breaks one (1,200 markers, a loudness out of range) never costs the others (the
    /// loudness, the first frame's time, the run's end). Returns the take as committed and a
    /// phrase for each part left out, for the caller to report. A failure to commit throws,
    /// as ``annotateTake(_:_:)`` does; that method stays all or nothing for what a person typed.
    /// - Thread: any. Blocks on disk I/O and on other processes' catalog locks (bounded by the busy timeout).
    public func annotateTake(_ id: String, keepingValid annotations: TakeAnnotations) throws -> (take: Take, leftOut: [String]) {
        let (kept, leftOut) = annotations.keepingValid()
        return (try annotateTake(id, kept), leftOut)
    }

    /// ``audioURL(for:)`` and `stat` per take. - Thread: any; blocks on disk I/O.
    public func audioFiles(of session: Session) -> [String: AudioFileInfo] {
        var found: [String: AudioFileInfo] = [:]
        for take in session.takes {
            guard let url = try? audioURL(for: take) else {
                found[take.id] = AudioFileInfo(path: nil, bytes: nil)
                continue
            }
            var info = stat()
            found[take.id] = AudioFileInfo(path: url.path, bytes: stat(url.path, &info) == 0 ? Int64(info.st_size) : nil)
        }
        return found
    }

    /// Walks ``sessions()``. - Thread: any; blocks as ``sessions()`` does.
    public func forEachSession(_ body: (Session) throws -> Void) throws {
        for session in try sessions() { try body(session) }
    }

    /// ``sessions()``: every session is a candidate. - Thread: any; blocks as ``sessions()`` does.
    public func sessions(matching text: String) throws -> [Session] {
        try sessions()
    }

    /// Finds a session by id.
    public func session(id: String) throws -> Session? {
        try sessions().first { $0.id == id }
    }

    /// `url`'s path relative to ``rootURL``, or `nil` when it does not lie beneath it.
    /// - Thread: any. Never blocks.
    public func relativePath(of url: URL) -> String? {
        let root = rootURL.standardizedFileURL.path
        let path = url.standardizedFileURL.path
        return path.hasPrefix(root + "/") ? String(path.dropFirst(root.count + 1)) : nil
    }
}

/// A part of a library that cannot be read, found by ``LibraryMaintenance/damagedParts()``.
public struct DamagedPart: Sendable, Hashable {
    /// Library-relative path of the part (a catalog, a bundle).
    public var path: String
    /// What is wrong with it, in a sentence.
    public var problem: String
    /// Whether moving the part aside (``LibraryMaintenance/quarantine(_:)``) repairs the library.
    /// `false` for a part the library cannot work without (a catalog): doctor then reports it
    /// and leaves it where it is.
    public var canQuarantine: Bool
    /// Whether ``LibraryMaintenance/rebuildCatalog(inspect:)`` repairs it (a damaged catalog).
    public var needsRebuild: Bool

    public init(path: String, problem: String, canQuarantine: Bool, needsRebuild: Bool = false) {
        self.path = path
        self.problem = problem
        self.canQuarantine = canQuarantine
        self.needsRebuild = needsRebuild
    }
}

/// What an audio file holds, as a decoder read it, for entries rebuilt from files alone.
public struct RebuiltAudio: Sendable, Hashable {
    public var format: AudioFormat
    public var frames: Int64
    /// The encoder name the file is in (`wav`, `flac`, …).
    public var encoding: String

    public init(format: AudioFormat, frames: Int64, encoding: String) {
        self.format = format
        self.frames = frames
        self.encoding = encoding
    }
}

/// What ``LibraryMaintenance/rebuildCatalog(inspect:)`` did.
public struct CatalogRebuild: Sendable, Hashable {
    /// Sessions and takes whose entries were read back from the old catalog.
    public var salvagedSessions = 0
    public var salvagedTakes = 0
    /// Entries of the old catalog that could not be read (damaged pages or values).
    public var unreadableEntries = 0
    /// Takes and sessions made from audio files and folders no readable entry named.
    public var rebuiltTakes = 0
    public var rebuiltSessions = 0
    /// Library-relative files in session folders that no decoder reads (left where they are).
    public var unreadableFiles: [String] = []
    /// Where the old catalog was kept (library-relative), if there was one.
    public var backup: String?

    public init() {}
}

/// What `tapedeck doctor` needs from a store beyond ``TakeStorage``: the files no entry names, the
/// parts that cannot be read, and two repairs that never delete audio.
public protocol LibraryMaintenance: TakeStorage {
    /// Library-relative paths of files that belong to no entry: audio with no take, and pending
    /// files of takes that are no longer being recorded. Lock files, the catalog, manifests and the
    /// quarantine folder are not listed. Exact while other processes record, import and delete:
    /// a file is listed only if, after it was seen, no entry names it and no delete is between
    /// its entry and its audio (stores commit a take's entry before creating its file).
    /// - Thread: any. Blocks on disk I/O.
    func unreferencedFiles() throws -> [String]

    /// Parts of the library that cannot be read (a catalog that fails its integrity check, a
    /// bundle whose manifest does not parse), with the reason.
    /// - Thread: any. Blocks on disk I/O.
    func damagedParts() throws -> [DamagedPart]

    /// Moves a library-relative file or folder into `quarantine/<time>/` inside the library,
    /// never replacing anything, and returns its new library-relative path.
    /// - Thread: any. Blocks on disk I/O.
    func quarantine(_ relativePath: String) throws -> String

    /// Removes the entry of a take whose audio is gone. Never touches a file.
    /// - Thread: any. Blocks on disk I/O.
    func forgetTake(_ id: String) throws

    /// Records that a finished take's file was repaired: its entry gets the frames the file
    /// really holds and the state `recovered`.
    /// - Thread: any. Blocks on disk I/O.
    func markRepaired(_ id: String, frames: Int64) throws

    /// Library-relative paths of housekeeping files nothing needs any more: lock files of takes
    /// that are not being recorded, and empty session folders no session names, each older than a
    /// minute (younger ones may belong to a recording or session being created right now).
    /// Never audio. The default: none.
    /// - Thread: any. Blocks on disk I/O.
    func leftovers() throws -> [String]

    /// Removes one of ``leftovers()`` if it still is one (a lock nobody holds, a folder still
    /// empty). The default: nothing.
    /// - Thread: any. Blocks on disk I/O.
    func removeLeftover(_ relativePath: String) throws

    /// Replaces the library's catalog with one made from what can still be read: every entry of
    /// the old catalog that reads, and an entry for each audio file and session folder no such
    /// entry names (`inspect` reads a file; `nil` when no decoder can). The old catalog is kept
    /// in `quarantine/`. Refused while a take is being recorded. Never touches audio.
    /// The default: `.invalidArgument` (a store without a catalog).
    /// - Thread: any. Blocks on disk I/O for as long as reading every file takes.
    func rebuildCatalog(inspect: (URL) -> RebuiltAudio?) throws -> CatalogRebuild

    /// Whether ``rebuildCatalog(inspect:)`` does anything here (the store keeps a catalog apart
    /// from the audio). The default: `false`. - Thread: any; never blocks.
    var rebuildsCatalog: Bool { get }
}

extension LibraryMaintenance {
    public var rebuildsCatalog: Bool { false }

    public func leftovers() throws -> [String] { [] }

    public func removeLeftover(_ relativePath: String) throws {}

    public func rebuildCatalog(inspect: (URL) -> RebuiltAudio?) throws -> CatalogRebuild {
        throw TapedeckError(.invalidArgument, "This storage backend keeps no catalog to rebuild: `tapedeck doctor --repair` examines and repairs it.")
    }
}
