import TapedeckCore
import TapedeckProvenance

/// The time stamps of signed takes (`provenance.tsa`) at a recording's end.
extension RecordCommand {
    /// Waits a few seconds for the takes' time stamps to be sent; what to say of those left queued.
    static func settle(_ stamper: TimeStamper?) async -> String? {
        guard let stamper, !stamper.pending().isEmpty else { return nil }
        let round = await Task.detached { stamper.settle(within: 5) }.value
        guard round.left > 0 else { return nil }
        return "\(Terminal.counted(round.left, "time-stamp request")) \(round.left == 1 ? "waits" : "wait") in the queue\(Self.because(round.problem)) \(round.left == 1 ? "It is" : "They are") sent by `tapedeck keys stamp` or the next `tapedeck record`; the takes are signed meanwhile."
    }

    /// `: why.` after a clause (the sentence's first letter lowered), or `.` when there is no why.
    static func because(_ why: String?) -> String {
        guard let why, !why.isEmpty else { return "." }
        let text = why.prefix(1).lowercased() + why.dropFirst()
        return ": " + (text.hasSuffix(".") ? text : text + ".")
    }
}
