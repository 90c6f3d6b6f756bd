import Foundation
import TapedeckApp
import TapedeckCore

extension RecordCommand {
    /// The report's lines for the programme takes a run kept beside its own (`--program`).
    @MainActor
    static func printProgramTakes(_ report: RecordingReport, storage: any TakeStorage) {
        for t in report.programTakes {
            let programme = t.tags[ProgramRule.tag].map { " of programme \(Terminal.safe($0))" } ?? ""
            print("Kept \(report.session.name)/\(t.name) [\(t.shortID)]\(programme): \(Terminal.clock(t.seconds)), \(Terminal.format(t.format)) \(t.encoding)\(t.state == .complete ? "" : ", " + t.state.rawValue)")
            print("  \((try? storage.audioURL(for: t))?.path ?? t.file)")
        }
    }
}
