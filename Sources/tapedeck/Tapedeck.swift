import ArgumentParser
import TapedeckCore

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
}
