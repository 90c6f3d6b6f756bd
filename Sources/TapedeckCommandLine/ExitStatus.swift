import ArgumentParser
import TapedeckAssembly
import TapedeckCore
import Foundation

/// Tapedeck's exit codes (documented in the README). Failures use the BSD `sysexits` values.
enum ExitStatus {
    static let ok: Int32 = 0
    /// `doctor` found problems it did not repair.
    static let problemsFound: Int32 = 1
    /// The take was saved, but parts of it are silence filling overruns.
    static let savedWithOverruns: Int32 = 3
    /// The take was saved, but the device or server was lost mid-take.
    static let savedInterrupted: Int32 = 4
    /// The take was saved, but writing failed (e.g. disk full) mid-take.
    static let savedTruncated: Int32 = 5
    /// The takes were saved, but the input stayed silent past `--silence-alarm`.
    static let savedSilent: Int32 = 6
    /// The failures' statuses are the error codes' own (``TapedeckError/Code/exitStatus``).
    static let software = TapedeckError.Code.internalError.exitStatus
    static let config = TapedeckError.Code.configuration.exitStatus

    static let summary = "0 ok; 1 doctor found problems it did not repair; 3 take saved with overruns; 4 take saved but the device was lost; 5 take saved but writing failed; 6 takes saved but the silence alarm went off; "
        + [(TapedeckError.Code.invalidArgument, "usage"), (.unsupportedFormat, "unsupported format, or gaps in the time to export"), (.notFound, "not found"),
           (.deviceUnavailable, "device unavailable"), (.internalError, "internal error"), (.alreadyExists, "already exists"),
           (.io, "I/O error or disk full"), (.busy, "library busy"), (.configuration, "configuration error"),
           (.cancelled, "stopped before anything was recorded")].map { "\($0.0.exitStatus) \($0.1)" }.joined(separator: "; ") + "."

    /// The exit status of a failure: each error code carries its own (backends' codes too).
    static func code(for error: TapedeckError) -> Int32 { error.code.exitStatus }
}

/// What a command adds to an error's message: where the fix lies depends on what the command
/// was doing (a full disk while recording is fixed by another library path, while exporting by
/// another `--output`). Set by the command as it learns its context. Main actor only.
@MainActor
final class ErrorAdvice {
    /// The advice of the command running in this task (set by ``reportingErrors(_:)``).
    @TaskLocal static var current: ErrorAdvice?

    private var byCode: [TapedeckError.Code: (TapedeckError) -> String?] = [:]

    /// Adds `text` to the message of every error with one of `codes`.
    func on(_ codes: TapedeckError.Code..., say text: String) {
        for code in codes { byCode[code] = { _ in text } }
    }

    /// Adds what `advice` says for an error with `code` (nothing when it returns `nil`): for
    /// advice that helps only some errors of a code.
    func on(_ code: TapedeckError.Code, advising advice: @escaping (TapedeckError) -> String?) {
        byCode[code] = advice
    }

    /// For a command that writes into the library: a full or read-only disk is fixed by keeping
    /// the library elsewhere, and a format the encoder cannot store by another encoder.
    func writingLibrary(_ studio: Studio) {
        if let key = studio.libraryPathKey {
            on(.diskFull, .notWritable, say: "Or keep the library on another disk: --set \(key)=DIR.")
        }
        on(.unsupportedFormat, say: "Choose another encoder with --set encoder.name=NAME (\(studio.catalog.encoders.map(\.name).joined(separator: ", "))).")
    }

    func text(for error: TapedeckError) -> String? { byCode[error.code]?(error) }

    /// `error`'s message with this advice for its code, if any.
    func message(for error: TapedeckError) -> String {
        error.message + (text(for: error).map { " " + $0 } ?? "")
    }

    /// `error`'s message with the running command's advice, if any.
    static func message(for error: TapedeckError) -> String {
        current?.message(for: error) ?? error.message
    }
}

/// Runs a command body, turning a ``TapedeckError`` into one line on stderr and its exit code.
@MainActor
func reportingErrors(_ body: () async throws -> Void) async throws {
    let advice = ErrorAdvice()
    do {
        try await ErrorAdvice.$current.withValue(advice) { try await body() }
    } catch let error as TapedeckError {
        Terminal.printError(advice.message(for: error), priority: .error, event: "error-\(error.code.rawValue)")
        throw ExitCode(ExitStatus.code(for: error))
    } catch let exit as ExitCode {
        throw exit
    } catch {
        Terminal.printError("Unexpected error: \(error). This is a bug in Tapedeck; please report it.", priority: .error, event: "error-internal")
        throw ExitCode(ExitStatus.software)
    }
}
