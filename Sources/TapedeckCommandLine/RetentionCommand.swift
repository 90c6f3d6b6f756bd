import ArgumentParser
import Foundation
import TapedeckApp
import TapedeckAssembly
import TapedeckCore

/// `tapedeck retention`: deletes what the config's `retention:` rules let go, or lists it.
struct RetentionCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "retention",
        abstract: "Delete the takes the config's retention: rules let go (older than keep, the oldest below the free-space floor).",
        discussion: """
            Never deletes a take that records, one with markers, notes or tags (unless \
            retention.keep-marked is false), or, with a remote configured (sync:), one whose upload \
            is not verified. Ages count from when each take was recorded; a clock that stepped \
            (NTP) is said and not believed for a day. Each deletion goes through the library as \
            `tapedeck delete` and is logged. Run it from a timer (a systemd timer, cron), or with \
            --dry-run to see what would go and why.
            """ + HelpExamples.text([
                "tapedeck retention --dry-run": "What would go now, and why; nothing is deleted.",
                "tapedeck retention --set retention.keep=30d --set retention.free-space-floor=10%": "Delete takes over 30 days old, and the oldest while less than 10% of the disk is free.",
            ]))

    @Flag(help: "List what would be deleted and why; delete nothing.")
    var dryRun = false

    @Flag(help: "Print the outcome as JSON (docs/JSON.md, \"retention\").")
    var json = false

    @OptionGroup var global: GlobalOptions

    @MainActor
    func run() async throws {
        try await reportingErrors {
            // The sessions are read by the plan itself (RetentionRunner.plan), once.
            let studio = try await global.makeStudio()
            guard let (runner, remoteProblem) = try await studio.makeRetentionRunner(environment: ProcessInfo.processInfo.environment) else {
                throw TapedeckError(.configuration, "No retention is configured\(studio.configPlace): add a retention: section (retention: { keep: 30d, free-space-floor: 10% }) or give --set retention.keep=30d. `tapedeck config example` shows the keys.")
            }
            if let remoteProblem { Terminal.printError(remoteProblem) }
            let plan = try await runner.plan()
            if let problem = plan.clockProblem { Terminal.printError(problem) }
            let deleted = dryRun ? plan.deletions : try await runner.apply(plan)
            if json {
                try Terminal.printJSON(RetentionJSON(plan, deleted: deleted, dryRun: dryRun, policy: runner.policy))
            } else {
                report(plan, deleted: deleted, policy: runner.policy)
            }
        }
    }

    private func report(_ plan: RetentionPlan, deleted: [RetentionPlan.Deletion], policy: RetentionPolicy) {
        let bytes = deleted.reduce(Int64(0)) { $0 + $1.item.bytes }
        if deleted.isEmpty {
            print(dryRun ? "Nothing would be deleted now." : "Nothing to delete.")
        } else {
            print("\(dryRun ? "Would delete" : "Deleted") \(Terminal.counted(deleted.count, "take")) (\(Terminal.bytes(bytes))):")
            for d in deleted {
                print("  \(Terminal.safe(d.item.sessionName))/\(Terminal.safe(d.item.take.name)) [\(d.item.take.shortID)]: \(RetentionRunner.why(d.reason, policy: policy))")
            }
        }
        let kept = [("recording", "recording"), ("marked", "with markers, notes or tags"), ("unverified", "not verified on the remote")]
            .compactMap { key, phrase in plan.protected[key].map { "\($0) \(phrase)" } }
        if !kept.isEmpty { print("Kept whatever their age: " + kept.joined(separator: ", ") + ".") }
        if let before = plan.freeBefore {
            var line = "Free on the library's disk: \(Terminal.bytes(before))"
            if let after = plan.freeAfter, after != before { line += ", \(Terminal.bytes(after)) after" }
            if let floor = plan.floorBytes { line += " (the floor: \(Terminal.bytes(floor)))" }
            print(line + ".")
        }
    }
}

/// `retention --json` (docs/JSON.md, "retention").
struct RetentionJSON: Encodable {
    struct Deletion: Encodable {
        var session: String
        var take: String
        var id: String
        var reason: String
        var ageSeconds: Double?
        var bytes: Int64
    }

    var kind = "retention"
    var schema = JSONSchema.version
    var dryRun: Bool
    var deleted: [Deletion]
    var protected: [String: Int]
    var freeBytes: Int64?
    var freeBytesAfter: Int64?
    var floorBytes: Int64?
    var clockProblem: String?

    init(_ plan: RetentionPlan, deleted: [RetentionPlan.Deletion], dryRun: Bool, policy: RetentionPolicy) {
        self.dryRun = dryRun
        self.deleted = deleted.map { d in
            let age: Double? = if case .age(let a) = d.reason { a } else { nil }
            return Deletion(session: d.item.sessionName, take: d.item.take.name, id: d.item.take.id,
                            reason: age == nil ? "free-space" : "age", ageSeconds: age, bytes: d.item.bytes)
        }
        protected = plan.protected
        freeBytes = plan.freeBefore
        freeBytesAfter = plan.freeAfter
        floorBytes = plan.floorBytes
        clockProblem = plan.clockProblem
    }
}
