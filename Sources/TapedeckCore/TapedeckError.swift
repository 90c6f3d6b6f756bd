#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The one error type Tapedeck's modules throw.
///
/// A struct with an extensible ``Code`` (new backends may add codes without breaking callers),
/// the underlying system error number where there is one, and a message written as full
/// sentences that say what happened and what to do next.
public struct TapedeckError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of failure this is. Extensible: modules may declare their own static codes.
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// A value given by the user is not acceptable.
        public static let invalidArgument = Code(rawValue: "invalid-argument")
        /// The configuration cannot be read or is not valid.
        public static let configuration = Code(rawValue: "configuration")
        /// A session, take, device or file does not exist.
        public static let notFound = Code(rawValue: "not-found")
        /// The thing to be created exists already.
        public static let alreadyExists = Code(rawValue: "already-exists")
        /// An audio device cannot be opened or does not support the format.
        public static let deviceUnavailable = Code(rawValue: "device-unavailable")
        /// An audio device or server went away while in use.
        public static let deviceLost = Code(rawValue: "device-lost")
        /// The audio format is not supported by this component.
        public static let unsupportedFormat = Code(rawValue: "unsupported-format")
        /// A file's contents are damaged or not what they claim to be.
        public static let corruptFile = Code(rawValue: "corrupt-file")
        /// Reading or writing a file failed.
        public static let io = Code(rawValue: "io")
        /// The disk (or quota) is full.
        public static let diskFull = Code(rawValue: "disk-full")
        /// The catalog is locked or busy for longer than the timeout.
        public static let busy = Code(rawValue: "busy")
        /// The operation needs a confirmation that was not given.
        public static let confirmationRequired = Code(rawValue: "confirmation-required")
        /// The user stopped the operation before it produced anything.
        public static let cancelled = Code(rawValue: "cancelled")
        /// An internal invariant failed; a bug in Tapedeck.
        public static let internalError = Code(rawValue: "internal")
    }

    /// What kind of failure this is.
    public var code: Code
    /// Full sentences: what happened and what to do next.
    public var message: String
    /// The `errno` (or library error code) behind the failure, if any.
    public var systemCode: Int32?

    /// Creates an error.
    public init(_ code: Code, _ message: String, systemCode: Int32? = nil) {
        self.code = code
        self.message = message
        self.systemCode = systemCode
    }

    /// Creates an I/O error from an `errno`, choosing `.diskFull` for `ENOSPC`/`EDQUOT`.
    /// - Parameters:
    ///   - errno: the system error number.
    ///   - action: what was being done, e.g. "write to /path/take.wav".
    public static func system(_ errno: Int32, while action: String) -> TapedeckError {
        let reason = String(cString: strerror(errno))
        if errno == ENOSPC || errno == EDQUOT {
            return TapedeckError(.diskFull,
                "Could not \(action): \(reason). Free some space on that disk, or set storage.directory.path to a disk with room.",
                systemCode: errno)
        }
        if errno == ENOENT {
            return TapedeckError(.notFound, "Could not \(action): \(reason).", systemCode: errno)
        }
        if errno == EACCES || errno == EPERM || errno == EROFS {
            return TapedeckError(.io,
                "Could not \(action): \(reason). Check that you may write there, or choose another library with storage.directory.path.",
                systemCode: errno)
        }
        return TapedeckError(.io, "Could not \(action): \(reason).", systemCode: errno)
    }

    public var description: String { message }
}
