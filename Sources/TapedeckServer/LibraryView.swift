import TapedeckApp
import TapedeckCore
import Foundation

/// The library as the server reads it: the ``SessionStore``'s loaded sessions, indexed by id,
/// refreshed in the background when older than ``staleAfter`` (changes other processes made) and
/// at once after a change made here, a recording finished, or a split run finished a take. Lookups are by full id only: no
/// text from a request is ever a path. Runs on the main actor.
@MainActor
final class LibraryView {
    static let staleAfter = 10.0
    let store: SessionStore
    /// Grows when recordings here change the list (``LiveState/libraryGeneration``).
    private let generation: @MainActor () -> Int
    /// Where each take is in ``SessionStore/sessions``: positions, not copies (a library of
    /// 100 000 takes is held once).
    private var takes: [String: (session: Int, take: Int)] = [:]
    private var sessionIndex: [String: Int] = [:]
    private var indexed: (count: Int, finished: Int, at: Date)?
    /// Takes by state, counted as the takes are indexed (`/metrics` reads them without a walk).
    private(set) var takesByState: [TakeState: Int] = [:]
    /// Grows each time the takes are indexed again.
    private(set) var revision = 0
    private var refreshing: Task<Void, Never>?

    init(store: SessionStore, generation: @escaping @MainActor () -> Int) {
        self.store = store
        self.generation = generation
    }

    /// The sessions, newest state known; the first call (or one after a change) waits for them.
    func sessions() async throws -> [Session] {
        if store.isLoaded, indexed == nil, generation() == 0 {
            reindex()  // loaded as the server started, and nothing changed since
        } else if !store.isLoaded || indexed?.finished != generation() {
            try await store.refresh()
            reindex()
        } else if let at = indexed?.at, Date().timeIntervalSince(at) > Self.staleAfter, refreshing == nil {
            refreshing = Task {
                try? await self.store.refresh()
                self.reindex()
                self.refreshing = nil
            }
        }
        return store.sessions
    }

    func reindex() {
        takes.removeAll(keepingCapacity: true)
        sessionIndex.removeAll(keepingCapacity: true)
        var counts = Dictionary(uniqueKeysWithValues: TakeState.allCases.map { ($0, 0) })
        for (i, s) in store.sessions.enumerated() {
            sessionIndex[s.id] = i
            for (j, t) in s.takes.enumerated() {
                takes[t.id] = (i, j)
                counts[t.state, default: 0] += 1
            }
        }
        takesByState = counts
        revision += 1
        indexed = (store.sessions.count, generation(), Date())
    }

    /// The take with exactly this id.
    func take(_ id: String) async throws -> (Take, Session) {
        let all = try await sessions()
        guard let at = takes[id], at.session < all.count, at.take < all[at.session].takes.count,
              all[at.session].takes[at.take].id == id else {
            throw APIError(.notFound, "not-found", "No take has the id \"\(id.prefix(64))\". Take ids are listed by GET /api/sessions/{id} (the `id` of each take).")
        }
        return (all[at.session].takes[at.take], all[at.session])
    }

    /// The session with exactly this id.
    func session(_ id: String) async throws -> Session {
        let all = try await sessions()
        guard let i = sessionIndex[id], i < all.count, all[i].id == id else {
            throw APIError(.notFound, "not-found", "No session has the id \"\(id.prefix(64))\". Session ids are listed by GET /api/sessions.")
        }
        return all[i]
    }

    /// Runs a change through the store, then indexes the result (also when the change failed:
    /// part of it may have been made).
    func change<T>(_ body: () async throws -> T) async throws -> T {
        defer { reindex() }
        return try await body()
    }
}
