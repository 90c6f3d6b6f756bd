public import TapedeckCore
public import Foundation
import Synchronization

/// The catalog of an ``InMemoryStorage``: shared by every store opened over it, so a test can
/// drop a store ("the process dies") and open another over the same catalog and folder.
public final class InMemoryCatalog: Sendable {
    struct State {
        var sessions: [Session] = []
        var pending: [String: String] = [:]
        /// Takes being recorded, by the store (process) recording them.
        var live: [String: ObjectIdentifier] = [:]
    }
    let state = Mutex(State())

    public init() {}
}

/// A store whose catalog lives in memory and whose audio lives in a folder (by default a new
/// temporary one), with the same contract as the real stores: every audio file mutation goes
/// through `DurableFiles` and every catalog change is announced to the seam as a write.
public final class InMemoryStorage: TakeStorage {
    public let rootURL: URL
    private let shared: InMemoryCatalog
    private let files: DurableFiles

    /// - Parameters:
    ///   - rootURL: the audio folder; `nil` for a new temporary one.
    ///   - seam: observes mutations and steps (tests inject faults here).
    ///   - catalog: the catalog to open; pass another store's to "reopen" it.
    public init(rootURL: URL? = nil, seam: any StorageSeam = .none, catalog: InMemoryCatalog = InMemoryCatalog()) throws {
        let root = rootURL ?? FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-mem-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        self.rootURL = root
        self.shared = catalog
        self.files = DurableFiles(seam: seam)
    }

    /// The catalog, for opening another store over it.
    public var sharedCatalog: InMemoryCatalog { shared }

    deinit {
        let me = ObjectIdentifier(self)
        shared.state.withLock { c in c.live = c.live.filter { $0.value != me } }
    }

    /// Announces and applies a catalog change, then reports it committed.
    private func commit<T>(_ operation: String, _ body: (inout InMemoryCatalog.State) throws -> T) throws -> T {
        try files.seam.willPerform(.write, on: rootURL.appendingPathComponent("catalog"))
        let result = try shared.state.withLock { try body(&$0) }
        try files.reached(operation, "catalog committed")
        return result
    }

    public func sessions() throws -> [Session] { shared.state.withLock { $0.sessions } }

    public func createSession(named name: String?) throws -> Session {
        if let name { try Self.check(name, "session") }
        return try commit("createSession") { c in
            let chosen = try StoreNames.sessionName(name, taken: c.sessions.map(\.name))
            let s = Session(id: UUID().uuidString.lowercased(), name: chosen, createdAt: Date())
            c.sessions.append(s)
            return s
        }
    }

    public func beginTake(in sessionID: String, named name: String?, format: AudioFormat, encoding: String,
                          fileExtension: String, startDate: Date) throws -> PendingTake {
        if let name { try Self.check(name, "take") }
        let me = ObjectIdentifier(self)
        return try commit("beginTake") { c in
            guard let i = c.sessions.firstIndex(where: { $0.id == sessionID }) else {
                throw TapedeckError(.notFound, "No session has the id \(sessionID).")
            }
            let number = (c.sessions[i].takes.map(\.number).max() ?? 0) + 1
            let chosen = try StoreNames.takeName(name, number: number, taken: c.sessions[i].takes.map(\.name), session: c.sessions[i].name)
            let id = UUID().uuidString.lowercased()
            let take = Take(id: id, sessionID: sessionID, name: chosen, number: number, createdAt: startDate,
                            state: .recording, format: format, encoding: encoding, file: "\(id).\(fileExtension)", frames: 0)
            c.sessions[i].takes.append(take)
            c.pending[id] = ".\(id).pending.\(fileExtension)"
            c.live[id] = me
            return PendingTake(take: take, session: c.sessions[i], fileURL: rootURL.appendingPathComponent(".\(id).pending.\(fileExtension)"))
        }
    }

    public func finishTake(_ pending: PendingTake, frames: Int64, state: TakeState, overruns: [OverrunEvent]) throws -> Take {
        let final = rootURL.appendingPathComponent(pending.take.file)
        if FileManager.default.fileExists(atPath: pending.fileURL.path) {
            try files.syncFile(pending.fileURL)
            try files.reached("finishTake", "audio synced")
            try files.moveIntoPlace(pending.fileURL, final)
            try files.reached("finishTake", "audio moved into place")
        } else if !FileManager.default.fileExists(atPath: final.path) {
            throw TapedeckError(.notFound, "The audio of take \"\(pending.take.name)\" is missing; the take was not marked finished.")
        }
        return try update("finishTake", pending.take.id) { t in
            t.state = state
            t.frames = frames
            t.overruns = overruns
        }
    }

    public func renameSession(_ id: String, to name: String) throws -> Session {
        try Self.check(name, "session")
        return try commit("renameSession") { c in
            guard let i = c.sessions.firstIndex(where: { $0.id == id }) else { throw TapedeckError(.notFound, "No session \(id).") }
            if c.sessions.contains(where: { $0.name == name && $0.id != id }) {
                throw TapedeckError(.alreadyExists, "A session named \"\(name)\" exists already.")
            }
            c.sessions[i].name = name
            return c.sessions[i]
        }
    }

    public func renameTake(_ id: String, to name: String) throws -> Take {
        try Self.check(name, "take")
        let sessions = try self.sessions()
        if let s = sessions.first(where: { $0.takes.contains { $0.id == id } }), s.takes.contains(where: { $0.name == name && $0.id != id }) {
            throw TapedeckError(.alreadyExists, "A take named \"\(name)\" exists already.")
        }
        return try update("renameTake", id) { $0.name = name }
    }

    public func annotateTake(_ id: String, _ annotations: TakeAnnotations) throws -> Take {
        try annotations.validate()
        return try update("annotateTake", id) { $0.annotations = annotations }
    }

    public func deleteSession(_ id: String) throws {
        let (removed, pendingFiles) = try commit("deleteSession") { c -> (Session, [String]) in
            guard let i = c.sessions.firstIndex(where: { $0.id == id }) else { throw TapedeckError(.notFound, "No session \(id).") }
            if c.sessions[i].takes.contains(where: { c.live[$0.id] != nil }) {
                throw TapedeckError(.busy, "The session is being recorded into.")
            }
            let pendingFiles = c.sessions[i].takes.compactMap { c.pending.removeValue(forKey: $0.id) }
            return (c.sessions.remove(at: i), pendingFiles)
        }
        for file in removed.takes.map(\.file) + pendingFiles { try files.remove(rootURL.appendingPathComponent(file)) }
        try files.syncDirectory(rootURL)
        try files.reached("deleteSession", "audio removed")
    }

    public func deleteTake(_ id: String) throws {
        try deleteTake(id, operation: "deleteTake")
    }

    private func deleteTake(_ id: String, operation: String) throws {
        let me = ObjectIdentifier(self)
        let (take, pending) = try commit(operation) { c -> (Take, String?) in
            for i in c.sessions.indices {
                if let j = c.sessions[i].takes.firstIndex(where: { $0.id == id }) {
                    if let owner = c.live[id], owner != me || operation == "deleteTake" {
                        throw TapedeckError(.busy, "Take \"\(c.sessions[i].takes[j].name)\" is being recorded.")
                    }
                    c.live[id] = nil
                    return (c.sessions[i].takes.remove(at: j), c.pending.removeValue(forKey: id))
                }
            }
            throw TapedeckError(.notFound, "No take \(id).")
        }
        try files.remove(rootURL.appendingPathComponent(take.file))
        if let pending { try files.remove(rootURL.appendingPathComponent(pending)) }
        try files.syncDirectory(rootURL)
        try files.reached(operation, "audio removed")
    }

    /// Takes left `recording` by a store that was dropped (its "process" died); claims them.
    public func interruptedTakes() throws -> [InterruptedTake] {
        let me = ObjectIdentifier(self)
        let found = shared.state.withLock { c -> [(Take, String?)] in
            var out: [(Take, String?)] = []
            for s in c.sessions {
                for t in s.takes where t.state == .recording && c.live[t.id] == nil {
                    c.live[t.id] = me
                    out.append((t, c.pending[t.id]))
                }
            }
            return out
        }
        return found.map { take, pending in
            let candidates = [pending, take.file].compactMap { $0 }.map { rootURL.appendingPathComponent($0) }
            return InterruptedTake(take: take, fileURL: candidates.first { FileManager.default.fileExists(atPath: $0.path) })
        }
    }

    public func completeRecovery(of take: Take, repaired: RepairResult?) throws -> Take? {
        guard let repaired else {
            try deleteTake(take.id, operation: "completeRecovery")
            return nil
        }
        if let pending = shared.state.withLock({ $0.pending[take.id] }) {
            let pendingURL = rootURL.appendingPathComponent(pending)
            if FileManager.default.fileExists(atPath: pendingURL.path) {
                try files.syncFile(pendingURL)
                try files.moveIntoPlace(pendingURL, rootURL.appendingPathComponent(take.file))
                try files.reached("completeRecovery", "audio moved into place")
            }
        }
        return try update("completeRecovery", take.id) { t in
            t.state = .recovered
            t.frames = repaired.frames
            t.format = repaired.format
        }
    }

    public func audioURL(for take: Take) throws -> URL { rootURL.appendingPathComponent(take.file) }

    private func update(_ operation: String, _ id: String, _ body: (inout Take) -> Void) throws -> Take {
        try commit(operation) { c in
            for i in c.sessions.indices {
                if let j = c.sessions[i].takes.firstIndex(where: { $0.id == id }) {
                    body(&c.sessions[i].takes[j])
                    if c.sessions[i].takes[j].state != .recording {
                        c.pending[id] = nil
                        c.live[id] = nil
                    }
                    return c.sessions[i].takes[j]
                }
            }
            throw TapedeckError(.notFound, "No take \(id).")
        }
    }

    private static func check(_ name: String, _ what: String) throws {
        if name.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty
            || name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            throw TapedeckError(.invalidArgument, "The \(what) name is empty or has control characters.")
        }
    }
}
