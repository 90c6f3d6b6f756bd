import ArgumentParser
import Foundation
import TapedeckAssembly
import TapedeckCore

struct MarkCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mark",
        abstract: "Set a marker in the take another tapedeck is recording.",
        discussion: """
            The marker lands at the audio being captured when the recorder gets it (to a period), in the take \
            that holds it; with `record --split-on-marker` it begins a new take. In the recorder itself, press m, \
            or send it SIGUSR1 (kill -USR1 PID).
            """)

    @Argument(help: "The marker's label (optional).")
    var label: String?

    @Option(help: "The recorder's process id, when more than one is running.")
    var pid: Int32?

    @MainActor
    mutating func run() async throws {
        try await reportingErrors {
            let label = label ?? ""
            if let problem = TakeMarker.labelProblem(label) { throw TapedeckError(.invalidArgument, problem) }
            let paths = UserPaths(environment: ProcessInfo.processInfo.environment)
            let running = RecorderRegistry.running(paths)
            let chosen: RecorderRegistry.Entry
            if let pid {
                guard let entry = running.first(where: { $0.pid == pid }) else {
                    throw TapedeckError(.notFound, "No recording of yours runs as PID \(pid)." + Self.list(running))
                }
                chosen = entry
            } else {
                guard let only = running.first else {
                    throw TapedeckError(.notFound, "No recording is running (as this user). Start one with `tapedeck record`.")
                }
                guard running.count == 1 else {
                    throw TapedeckError(.invalidArgument, "\(running.count) recordings are running; choose one with --pid PID." + Self.list(running))
                }
                chosen = only
            }
            try RecorderRegistry.mark(chosen.pid, label: label, paths: paths)
            print("Marker\(label.isEmpty ? "" : " \"\(Terminal.safe(label))\"") sent to the recording into \(Terminal.safe(chosen.session)) (PID \(chosen.pid)).")
        }
    }

    static func list(_ running: [RecorderRegistry.Entry]) -> String {
        running.isEmpty ? "" : " Running: " + running.map { "PID \($0.pid) into \(Terminal.safe($0.session))" }.joined(separator: ", ") + "."
    }
}
