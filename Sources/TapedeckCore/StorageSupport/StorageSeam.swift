public import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A file-system mutation a store performs, as seen by a ``StorageSeam``.
public enum FileAction: String, Sendable, Hashable, CaseIterable {
    /// Writing a file's bytes (a manifest, a catalog transaction).
    case write
    /// `fsync` of a file or a folder.
    case sync
    /// Moving a file into place (link + unlink, or `rename`).
    case rename
    /// Removing a file or an empty folder.
    case unlink
    /// Creating a folder.
    case mkdir
}

/// A labelled, completed step of a storage operation, such as `finishTake: audio moved into place`.
///
/// Stores report one after every durable step (file written, synced, renamed, catalog committed,
/// file removed), so a test can stop an operation at each of them and check what a reopened store
/// makes of the result.
public struct StorageStep: Sendable, Hashable, CustomStringConvertible {
    /// The operation: `createSession`, `beginTake`, `finishTake`, `renameSession`, `renameTake`,
    /// `deleteSession`, `deleteTake`, `completeRecovery`.
    public var operation: String
    /// What has just been done, e.g. `catalog committed`.
    public var label: String

    public init(_ operation: String, _ label: String) {
        self.operation = operation
        self.label = label
    }

    public var description: String { "\(operation): \(label)" }
}

/// Where a store's file-system mutations and durable steps can be observed and made to fail.
///
/// Production stores use ``StorageSeam/none``; tests use seams that fail the N-th write, sync,
/// rename or unlink with `EIO` or `ENOSPC`, or that "crash" at a labelled step (every mutation
/// after it fails, as if the process had died there).
public protocol StorageSeam: Sendable {
    /// Called before each file-system mutation; throwing makes the mutation fail with that error
    /// instead of happening.
    /// - Thread: the store's calling thread. Must not block.
    func willPerform(_ action: FileAction, on url: URL) throws
    /// Called after each labelled step of an operation completed; throwing stops the operation there.
    /// - Thread: the store's calling thread. Must not block.
    func reached(_ step: StorageStep) throws
}

/// The seam that observes nothing and never fails.
public struct NoStorageSeam: StorageSeam {
    public init() {}
    public func willPerform(_ action: FileAction, on url: URL) throws {}
    public func reached(_ step: StorageStep) throws {}
}

extension StorageSeam where Self == NoStorageSeam {
    /// Production: no observation, no injected failures.
    public static var none: NoStorageSeam { NoStorageSeam() }
}
