public import TapedeckCore
public import Foundation
import Synchronization

/// A store whose catalog lives in memory and whose audio lives in a folder (by default a new
/// temporary one), with the same contract as the real stores.
public final class InMemoryStorage: TakeStorage {
    public let rootURL: URL
    private struct Catalog {
        var sessions: [Session] = []
        var pending: [String: String] = [:]
    }
    private let catalog = Mutex(Catalog())

    public init(rootURL: URL? = nil) throws {
        let root = rootURL ?? FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-mem-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        self.rootURL = root
    }

    public func sessions() throws -> [Session] { catalog.withLock { $0.sessions } }

    public func createSession(named name: String?) throws -> Session {
        if let name { try Self.check(name, "session") }
        return try catalog.withLock { c in
            let names = Set(c.sessions.map(\.name))
            if let name, names.contains(name) {
                throw TapedeckError(.alreadyExists, "A session named \"\(name)\" exists already.")
            }
            var n = 1
            while names.contains("Session \(n)") { n += 1 }
            let s = Session(id: UUID().uuidString.lowercased(), name: name ?? "Session \(n)", createdAt: Date())
            c.sessions.append(s)
            return s
        }
    }

    public func beginTake(in sessionID: String, named name: String?, format: AudioFormat, encoding: String,
                          fileExtension: String, startDate: Date) throws -> PendingTake {
        if let name { try Self.check(name, "take") }
        return try catalog.withLock { c in
            guard let i = c.sessions.firstIndex(where: { $0.id == sessionID }) else {
                throw TapedeckError(.notFound, "No session has the id \(sessionID).")
            }
            let names = Set(c.sessions[i].takes.map(\.name))
            if let name, names.contains(name) { throw TapedeckError(.alreadyExists, "A take named \"\(name)\" exists already.") }
            let number = (c.sessions[i].takes.map(\.number).max() ?? 0) + 1
            var n = number
            while names.contains("Take \(n)") { n += 1 }
            let id = UUID().uuidString.lowercased()
            let take = Take(id: id, sessionID: sessionID, name: name ?? "Take \(n)", number: number, createdAt: startDate,
                            state: .recording, format: format, encoding: encoding, file: "\(id).\(fileExtension)", frames: 0)
            c.sessions[i].takes.append(take)
            c.pending[id] = ".\(id).pending.\(fileExtension)"
            return PendingTake(take: take, session: c.sessions[i], fileURL: rootURL.appendingPathComponent(".\(id).pending.\(fileExtension)"))
        }
    }

    public func finishTake(_ pending: PendingTake, frames: Int64, state: TakeState, overruns: [OverrunEvent]) throws -> Take {
        let final = rootURL.appendingPathComponent(pending.take.file)
        if FileManager.default.fileExists(atPath: pending.fileURL.path) {
            try Durability.moveIntoPlace(pending.fileURL, final)
        }
        return try update(pending.take.id) { t in
            t.state = state
            t.frames = frames
            t.overruns = overruns
        }
    }

    public func renameSession(_ id: String, to name: String) throws -> Session {
        try Self.check(name, "session")
        return try catalog.withLock { c in
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
        return try update(id) { $0.name = name }
    }

    public func deleteSession(_ id: String) throws {
        let removed = try catalog.withLock { c -> Session in
            guard let i = c.sessions.firstIndex(where: { $0.id == id }) else { throw TapedeckError(.notFound, "No session \(id).") }
            return c.sessions.remove(at: i)
        }
        for t in removed.takes { try? FileManager.default.removeItem(at: rootURL.appendingPathComponent(t.file)) }
    }

    public func deleteTake(_ id: String) throws {
        let take = try catalog.withLock { c -> Take in
            for i in c.sessions.indices {
                if let j = c.sessions[i].takes.firstIndex(where: { $0.id == id }) { return c.sessions[i].takes.remove(at: j) }
            }
            throw TapedeckError(.notFound, "No take \(id).")
        }
        try? FileManager.default.removeItem(at: rootURL.appendingPathComponent(take.file))
    }

    /// In memory, nothing outlives the process, so no take is ever interrupted by another one.
    public func interruptedTakes() throws -> [InterruptedTake] { [] }

    public func completeRecovery(of take: Take, repaired: RepairResult?) throws -> Take? {
        guard let repaired else {
            try deleteTake(take.id)
            return nil
        }
        return try update(take.id) { t in
            t.state = .recovered
            t.frames = repaired.frames
            t.format = repaired.format
        }
    }

    public func audioURL(for take: Take) throws -> URL { rootURL.appendingPathComponent(take.file) }

    private func update(_ id: String, _ body: (inout Take) -> Void) throws -> Take {
        try catalog.withLock { c in
            for i in c.sessions.indices {
                if let j = c.sessions[i].takes.firstIndex(where: { $0.id == id }) {
                    body(&c.sessions[i].takes[j])
                    c.pending[id] = nil
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
