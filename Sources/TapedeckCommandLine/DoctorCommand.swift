import ArgumentParser
import Foundation
import TapedeckApp
import TapedeckCore

struct DoctorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor",
        abstract: "Find damage in the library: takes left recording, entries without audio, headers that disagree with their audio, unknown files, unreadable bundles.",
        usage: "tapedeck doctor [<options>]",
        discussion: """
            Without --repair nothing is changed; the exit status is 0 when nothing was found and 1 when \
            something was. With --repair, interrupted takes are recovered, entries without audio removed, \
            headers rewritten from the audio present, stale lock files and empty session folders removed, \
            and unknown files and unreadable bundles moved into the library's quarantine/ folder. A catalog \
            too damaged to read is replaced with --rebuild-catalog: every entry that still reads is kept, \
            the audio files no entry names get entries, and the old catalog goes to quarantine/. No audio \
            is ever deleted.
            """)

    @Flag(help: "Repair what is found (never deletes audio).")
    var repair = false

    @Flag(help: "Make a new catalog from what still reads: every readable entry, and an entry for each audio file and session folder none names (the old catalog is kept in quarantine/). For a damaged catalog.")
    var rebuildCatalog = false

    @Flag(help: "Print JSON.")
    var json = false

    @OptionGroup var global: GlobalOptions

    struct Report: Encodable {
        var kind = "doctor-report"
        var schema = JSONSchema.version
        var findings: [DoctorFinding]
        var repaired: Bool
        /// Where the library's uploads stand, per remote (none when it was never pushed).
        var uploads: [UploadSummary]
    }

    @MainActor
    mutating func run() async throws {
        let repair = self.repair
        let json = self.json
        let rebuild = self.rebuildCatalog
        try await reportingErrors {
            // The library is not opened (opening recovers interrupted takes): doctor reports first.
            var doctor = try makeDoctor()
            var findings: [DoctorFinding] = []
            if rebuild {
                findings.append(try await doctor.runRebuild())
                // The examination reads the new catalog, through a store opened on it.
                doctor = try makeDoctor()
            }
            findings += try await doctor.run(repair: repair)
            let storage = doctor.storage
            let problems = findings.filter { $0.kind != "rebuilt-catalog" }
            let uploads = doctor.uploads()
            if json {
                try Terminal.printJSON(Report(findings: findings, repaired: repair, uploads: uploads))
            } else {
                for f in findings {
                    print("\(f.kind)  \(f.subject): \(f.problem)")
                    if let r = f.repaired { print("    repaired: \(r)") }
                    if let r = f.repairFailed { print("    not repaired: \(r)") }
                }
                if problems.isEmpty {
                    print("No problems found in \(storage.rootURL.path).")
                } else if problems.contains(where: { $0.problem.contains("--rebuild-catalog") }) && !rebuild {
                    print("\(Terminal.counted(problems.count, "problem")) found. The catalog needs rebuilding first: run `tapedeck doctor --rebuild-catalog`, then `tapedeck doctor` again; no audio is touched.")
                } else if !repair {
                    print("\(Terminal.counted(problems.count, "problem")) found. Run `tapedeck doctor --repair` to fix \(problems.count == 1 ? "it" : "them"); no audio is deleted.")
                }
                for u in uploads {
                    var line = "Uploads to \(u.remote): \(u.verified) verified, \(u.pending) pending"
                    if u.uploading > 0 { line += ", \(u.uploading) stopped midway (the next push resumes them)" }
                    if u.failed > 0 { line += ", \(u.failed) failed (run `tapedeck push` again; the last reason: \(u.lastFailure ?? "not recorded"))" }
                    if u.unconfirmed > 0 { line += ", \(u.unconfirmed) whose copy there could not be confirmed (run `tapedeck push`: it checks them again and sends what is missing)" }
                    if u.deletedLocally > 0 { line += "; \(Terminal.counted(u.deletedLocally, "take")) kept only there" }
                    print(line + ".")
                }
            }
            let unrepaired = problems.filter { $0.repaired == nil }
            if !unrepaired.isEmpty { throw ExitCode(ExitStatus.problemsFound) }
        }
    }

    @MainActor
    private func makeDoctor() throws -> LibraryDoctor {
        try global.makeStudioWithoutLibrary().makeDoctor()
    }
}
