import ArgumentParser
import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

@main
struct Tapedeck: AsyncParsableCommand {

    static let configuration = CommandConfiguration(
        commandName: "tapedeck",
        abstract: "Record audio takes into sessions, play them back, and manage the library.",
        discussion: """
            Backends are chosen per machine in a YAML config file (--config, $TAPEDECK_CONFIG, \
            $XDG_CONFIG_HOME/tapedeck/config.yaml, /etc/tapedeck/config.yaml). Exit codes: \(ExitStatus.summary)
            """,
        version: TapedeckVersion.string,
        subcommands: [
            RecordCommand.self, ListCommand.self, ShowCommand.self, PlayCommand.self,
            ExportCommand.self, RenameCommand.self, DeleteCommand.self, DevicesCommand.self, BackendsCommand.self, DoctorCommand.self, ImportCommand.self, ConfigCommand.self,
        ])

    /// Parses and runs the command. Writing to a closed pipe is an error each write handles
    /// (``StandardOutput``), never a signal that kills the process, for every command; what is
    /// gathered for stdout is written at exit, whichever way the command ends.
    static func main() async {
        signal(SIGPIPE, SIG_IGN)
        atexit(flushStandardOutputAtExit)
        await main(nil)
        // The command succeeded (a failing one has exited already with its own status).
        StandardOutput.flush()
        if let failure = StandardOutput.failure {
            Terminal.printError("Could not write the output: \(String(cString: strerror(failure))). Check where stdout goes (a full disk?).")
            Glibc.exit(TapedeckError.Code.io.exitStatus)
        }
    }
}
