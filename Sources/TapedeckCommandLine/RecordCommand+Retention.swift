import Foundation
import TapedeckApp
import TapedeckAssembly
import TapedeckCore

/// The config's `retention:` applied while `record` runs into the library, so a recorder left
/// alone cleans up after itself: at the start and then every ``interval``, what
/// `tapedeck retention` would delete goes (never a take being recorded, unverified with a
/// remote, or marked with `keep-marked`), each deletion said on stderr and logged.
/// Main actor only.
@MainActor
enum RecordRetention {
    static let interval: Duration = .seconds(600)

    /// The task applying it; `nil` when the config has no retention.
    static func start(_ studio: Studio) async -> Task<Void, Never>? {
        let made: (runner: RetentionRunner, remoteProblem: String?)?
        do { made = try await studio.makeRetentionRunner(environment: ProcessInfo.processInfo.environment) } catch {
            Terminal.printError("warning: retention is not applied while recording: \((error as? TapedeckError)?.message ?? "\(error)")")
            return nil
        }
        guard let (runner, remoteProblem) = made else { return nil }
        if let remoteProblem { Terminal.printError("warning: retention: \(remoteProblem)") }
        return Task { @MainActor in
            while !Task.isCancelled {
                await apply(runner)
                try? await Task.sleep(for: interval)
            }
        }
    }

    private static func apply(_ runner: RetentionRunner) async {
        do {
            let plan = try await runner.plan()
            if let problem = plan.clockProblem { Terminal.printError("warning: retention: \(problem)") }
            guard !plan.deletions.isEmpty, !Task.isCancelled else { return }
            let deleted = try await runner.apply(plan)
            let bytes = deleted.reduce(Int64(0)) { $0 + $1.item.bytes }
            Terminal.printError("Retention deleted \(Terminal.counted(deleted.count, "take")) (\(Terminal.bytes(bytes))); `tapedeck retention --dry-run` shows the rules.", event: "retention-delete")
        } catch {
            Terminal.printError("warning: retention could not run: \((error as? TapedeckError)?.message ?? "\(error)") The recording goes on.")
        }
    }
}
