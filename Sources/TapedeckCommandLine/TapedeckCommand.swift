import ArgumentParser
import Foundation
import TapedeckAssembly
import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

/// The root command: `tapedeck` and its subcommands. Run by ``TapedeckCLI/main(catalog:)``.
struct Tapedeck: AsyncParsableCommand {

    static let configuration = CommandConfiguration(
        commandName: "tapedeck",
        abstract: "Record audio takes into sessions, play them back, and manage the library.",
        discussion: """
            Backends are chosen per machine in a YAML config file (--config, $TAPEDECK_CONFIG, \
            $XDG_CONFIG_HOME/tapedeck/config.yaml, /etc/tapedeck/config.yaml). Exit codes: \(ExitStatus.summary)
            """ + HelpExamples.text([
                "tapedeck record 10s": "Ten seconds from the default device (a sound server's, else ALSA's).",
                "tapedeck record --set capture.backend=null 5s": "Five seconds of a test tone: no sound card needed.",
                "tapedeck list": "The sessions and their takes.",
                "tapedeck play last": "The take recorded last.",
                "tapedeck export last": "The take recorded last, as verified FLAC in this folder.",
                "tapedeck serve": "A web page to watch levels, record and play: http://127.0.0.1:8470/.",
            ]),
        version: "tapedeck \(TapedeckVersion.string)\n" + PluginCatalog.libraries.map { "  " + $0 }.joined(separator: "\n")
            + BoundCatalog.addedPluginsLine,
        subcommands: [
            RecordCommand.self, PlayCommand.self, ListCommand.self, ShowCommand.self, TimelineCommand.self, ExportCommand.self, ImportCommand.self,
            MarkCommand.self, StatusCommand.self, NoteCommand.self, TagCommand.self, LoudnessCommand.self, RenameCommand.self, DeleteCommand.self,
            DevicesCommand.self, BackendsCommand.self, ConfigCommand.self, DoctorCommand.self, ServeCommand.self, WaveformCommand.self, PushCommand.self, FleetCommand.self, ServiceCommand.self, AlertsCommand.self, RetentionCommand.self, ScheduleCommand.self, KeysCommand.self, VerifyCommand.self,
        ])

    /// Parses and runs the command. Writing to a closed pipe is an error each write handles
    /// (``StandardOutput``), never a signal that kills the process, for every command; what is
    /// gathered for stdout is written at exit, whichever way the command ends.
    /// - Thread: the main thread (the main actor), as an `@main` command's `main()` runs: the
    ///   commands and their shell completion expect it.
    @MainActor
    static func runProcess() async {
        signal(SIGPIPE, SIG_IGN)
        atexit(flushStandardOutputAtExit)
        let arguments = Array(CommandLine.arguments.dropFirst())
        do {
            var command = try parseAsRoot(arguments)
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            finish(with: error, arguments: arguments)
        }
        // The command succeeded (a failing one has exited already with its own status).
        StandardOutput.flush()
        if let failure = StandardOutput.failure {
            Terminal.printError("Could not write the output: \(String(cString: strerror(failure))). Check where stdout goes (a full disk?).")
            Glibc.exit(TapedeckError.Code.io.exitStatus)
        }
    }

    /// Ends the process for `error` in Tapedeck's one error style: a usage error is one line
    /// `tapedeck: …` with the command whose help to read, never a wall of usage; help and
    /// `--version` print as ArgumentParser prints them; a command's own failure (already said)
    /// only sets the status.
    static func finish(with error: any Error, arguments: [String]) -> Never {
        let code = exitCode(for: error)
        if code == .success { exit(withError: error) }
        // ArgumentParser's lists (of allowed values) come one per line: one line here.
        var message = self.message(for: error).trimmingCharacters(in: .whitespacesAndNewlines)
            .split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: " ")
        // A word where a command (or a subcommand of `config`) belongs that names none; not
        // for a command's own failure (said already), whose options' values are words too.
        var commands = error is ExitCode ? [] : configuration.subcommands
        var path = "tapedeck"
        for argument in arguments where !commands.isEmpty && !argument.hasPrefix("-") {
            if let next = commands.first(where: { $0.configuration.commandName == argument }) {
                path += " " + argument
                commands = next.configuration.subcommands
                continue
            }
            let names = commands.compactMap { $0.configuration.commandName }
            message = "Unknown command '\(path == "tapedeck" ? "" : path.dropFirst(9) + " ")\(argument)'\(Suggestion.closest(to: argument, in: names).map { ". Did you mean '\($0)'?" } ?? ". Commands: " + names.joined(separator: ", "))"
            break
        }
        if !message.isEmpty {
            var path = ["tapedeck"]
            var commands = configuration.subcommands
            for argument in arguments {
                guard let next = commands.first(where: { $0.configuration.commandName == argument }) else { break }
                path.append(argument)
                commands = next.configuration.subcommands
            }
            let sentence = message.hasSuffix(".") || message.hasSuffix("?") ? message : message + "."
            Terminal.printError("\(sentence) Run `\(path.joined(separator: " ")) --help` for the options.")
        }
        StandardOutput.flush()
        Glibc.exit(code.rawValue)
    }
}
