public import Foundation

/// A named group of takes, e.g. one rehearsal.
public struct Session: Sendable, Hashable, Codable, Identifiable {
    /// Stable identifier, a UUID string.
    public var id: String
    /// The display name: any Unicode the user chose. Never used as a path.
    public var name: String
    /// When the session was created.
    public var createdAt: Date
    /// The session's takes, in recording order.
    public var takes: [Take]

    public init(id: String, name: String, createdAt: Date, takes: [Take] = []) {
        self.id = id
        self.name = name
        self.createdAt = createdAt
        self.takes = takes
    }

    /// The first eight characters of the id, as printed by `tapedeck list`.
    public var shortID: String { NameRules.shortID(of: id) }
}
