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
    /// What kind of failure this is, and the exit status a command ends with for it. Extensible:
    /// a module may declare its own codes, each with its status (codes compare by name).
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        public var rawValue: String
        /// The exit status (BSD `sysexits` values) of a command that fails with this code.
        public var exitStatus: Int32

        public init(rawValue: String, exitStatus: Int32) {
            self.rawValue = rawValue
            self.exitStatus = exitStatus
        }

        public var description: String { rawValue }
        public static func == (a: Code, b: Code) -> Bool { a.rawValue == b.rawValue }
        public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }

        /// A value given by the user is not acceptable. Exit 64 (`EX_USAGE`).
        public static let invalidArgument = Code(rawValue: "invalid-argument", exitStatus: 64)
        /// The configuration cannot be read or is not valid. Exit 78 (`EX_CONFIG`).
        public static let configuration = Code(rawValue: "configuration", exitStatus: 78)
        /// A session, take, device or file does not exist. Exit 66 (`EX_NOINPUT`).
        public static let notFound = Code(rawValue: "not-found", exitStatus: 66)
        /// The thing to be created exists already. Exit 73 (`EX_CANTCREAT`).
        public static let alreadyExists = Code(rawValue: "already-exists", exitStatus: 73)
        /// An audio device cannot be opened or does not support the format. Exit 69 (`EX_UNAVAILABLE`).
        public static let deviceUnavailable = Code(rawValue: "device-unavailable", exitStatus: 69)
        /// An audio device or server went away while in use. Exit 69.
        public static let deviceLost = Code(rawValue: "device-lost", exitStatus: 69)
        /// The audio format is not supported by this component. Exit 65 (`EX_DATAERR`).
        public static let unsupportedFormat = Code(rawValue: "unsupported-format", exitStatus: 65)
        /// A file given as audio is not audio any decoder of this build reads (a text file, a
        /// video container, a format not compiled in). Exit 65 (`EX_DATAERR`).
        public static let notAudio = Code(rawValue: "not-audio", exitStatus: 65)
        /// A file's contents are damaged or not what they claim to be. Exit 74 (`EX_IOERR`).
        public static let corruptFile = Code(rawValue: "corrupt-file", exitStatus: 74)
        /// Reading or writing a file failed. Exit 74.
        public static let io = Code(rawValue: "io", exitStatus: 74)
        /// Writing was refused: no permission, or a read-only file system. Exit 74.
        public static let notWritable = Code(rawValue: "not-writable", exitStatus: 74)
        /// The disk (or quota) is full. Exit 74.
        public static let diskFull = Code(rawValue: "disk-full", exitStatus: 74)
        /// The catalog is locked or busy for longer than the timeout. Exit 75 (`EX_TEMPFAIL`).
        public static let busy = Code(rawValue: "busy", exitStatus: 75)
        /// The operation needs a confirmation that was not given. Exit 64.
        public static let confirmationRequired = Code(rawValue: "confirmation-required", exitStatus: 64)
        /// The user stopped the operation before it produced anything. Exit 130.
        public static let cancelled = Code(rawValue: "cancelled", exitStatus: 130)
        /// An internal invariant failed; a bug in Tapedeck. Exit 70 (`EX_SOFTWARE`).
        public static let internalError = Code(rawValue: "internal", exitStatus: 70)
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

    /// Creates an I/O error from an `errno`: `.diskFull` for `ENOSPC`/`EDQUOT`, `.notFound` for
    /// `ENOENT`, `.notWritable` for `EACCES`/`EPERM`/`EROFS`, else `.io`. The message says what
    /// happened; where to write instead is the caller's to say (it knows whether the path is
    /// the library, an export folder or a file the user named).
    /// - Parameters:
    ///   - errno: the system error number.
    ///   - action: what was being done, e.g. "write to /path/take.wav".
    public static func system(_ errno: Int32, while action: String) -> TapedeckError {
        let reason = String(cString: strerror(errno))
        if errno == ENOSPC || errno == EDQUOT {
            return TapedeckError(.diskFull, "Could not \(action): \(reason). Free some space on that disk.", systemCode: errno)
        }
        if errno == ENOENT {
            return TapedeckError(.notFound, "Could not \(action): \(reason).", systemCode: errno)
        }
        if errno == EACCES || errno == EPERM || errno == EROFS {
            return TapedeckError(.notWritable, "Could not \(action): \(reason). Check that you may write there.", systemCode: errno)
        }
        return TapedeckError(.io, "Could not \(action): \(reason).", systemCode: errno)
    }

    /// `text` (a message, or a part of one) to stand inside a sentence that goes on after it:
    /// without its final full stop, so "…is not usable: A take keeps at most 999 markers." never
    /// ends in "..". - Thread: any. Never blocks.
    public static func clause(_ text: String) -> String {
        var clause = Substring(text)
        while clause.last == "." || clause.last == " " { clause = clause.dropLast() }
        return String(clause)
    }

    public var description: String { message }
}
