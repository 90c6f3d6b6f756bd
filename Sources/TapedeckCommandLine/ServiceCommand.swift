import ArgumentParser
import Foundation
import TapedeckAssembly
import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

struct ServiceCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "service",
        abstract: "Run Tapedeck as a systemd service: print a unit file for this machine.",
        subcommands: [ServicePrintCommand.self])
}

/// `tapedeck service print`: a systemd unit that records with this machine's configuration.
struct ServicePrintCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "print",
        abstract: "Print a systemd unit that records unattended: Type=notify, a watchdog, restarts on failure.",
        usage: "tapedeck service print [--system] [--watchdog <seconds>] [<options>] [-- <record options> ...]",
        discussion: """
            The unit runs `tapedeck record` with the record options given after `--`, which replace \
            the default (\(defaultRecordArguments.joined(separator: " "))), and with the config file this \
            command reads, --machine and --set as given here; all are checked now. Tapedeck tells \
            systemd when audio flows (READY=1), what it records (STATUS=, in `systemctl status`), \
            and, only while frames arrive and are written or a lost device is being tried again, \
            that it is alive (WATCHDOG=1): a device or disk that hangs gets the service restarted. \
            SIGTERM (`systemctl stop`) finishes the take as Ctrl-C does. A run without an end is \
            started again whenever it ends (Restart=always); one with -d or --until only when it \
            fails. Exit statuses 3, 4, 6 and 130 (takes kept) are not failures; 64 and 78 (a wrong \
            option or configuration) are not restarted. Save the output where its first lines say.
            """ + HelpExamples.text([
                "tapedeck service print > ~/.config/systemd/user/tapedeck.service": "A user unit with the defaults.",
                "tapedeck service print --system -- --resume --session Logger --split 1h --silence-alarm 2m": "A system unit for a logger.",
            ]))

    /// What the service records with when no record options are given: a run that survives a
    /// lost device and keeps takes an hour long.
    static let defaultRecordArguments = ["--resume", "--split", "1h"]

    @Flag(help: "A system unit (/etc/systemd/system, run as --user) instead of a user unit (~/.config/systemd/user).")
    var system = false

    @Option(help: ArgumentHelp("Seconds without audio flowing before systemd restarts the recorder (WatchdogSec; 0: no watchdog).", valueName: "seconds"))
    var watchdog = 30

    @Option(name: .customLong("user"), help: ArgumentHelp("The account a system unit runs as (default: this one).", valueName: "name"))
    var account: String?

    @Argument(parsing: .postTerminator, help: ArgumentHelp("`tapedeck record` options for the service, after `--`.", valueName: "record options"))
    var recordArguments: [String] = []

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        // A lost device is tried once a second, and each try feeds the watchdog: a shorter one
        // would restart a recorder that is only waiting.
        guard watchdog == 0 || (5...86_400).contains(watchdog) else {
            throw ValidationError("--watchdog \(watchdog): give seconds from 5 to 86400, or 0 for no watchdog.")
        }
        if account != nil && !system { throw ValidationError("--user names the account of a system unit: add --system.") }
    }

    @MainActor
    func run() async throws {
        let record = recordArguments.isEmpty ? Self.defaultRecordArguments : recordArguments
        try await reportingErrors {
            if let config = global.config, !FileManager.default.fileExists(atPath: config) {
                throw TapedeckError(.notFound, "--config \(config): no such file. Name the config file the service should read (`tapedeck config init` writes one).")
            }
            // The options and their values are checked now, not when the service first starts.
            let parsed: RecordCommand
            do {
                parsed = try RecordCommand.parse(record)
            } catch {
                let said = RecordCommand.message(for: error).split(separator: "\n").first.map(String.init) ?? "\(error)"
                throw TapedeckError(.invalidArgument, "The record options after -- are not valid: \(said) (`tapedeck record --help` lists them).")
            }
            let endsByItself = try parsed.recordingSeconds() != nil
            _ = try parsed.runPlan()
            // The configuration as the service will read it, with every --set.
            let environment = ProcessInfo.processInfo.environment
            let loader = ConfigurationLoader(catalog: BoundCatalog.current, environment: environment)
            let configPath = parsed.global.config ?? global.config
            let flags = try global.flagSettings().merging(try parsed.global.flagSettings()) { _, own in own }
            let configuration = try loader.load(explicitPath: configPath, flags: flags, machine: parsed.global.machine ?? global.machine)
            let file = loader.locate(explicitPath: configPath)
            let library = configuration.libraryPath(catalog: BoundCatalog.current, paths: UserPaths(environment: environment))
            print(unit(record: record, config: file, library: library, endsByItself: endsByItself), terminator: "")
        }
    }

    /// The unit's text.
    func unit(record: [String], config: URL?, library: String?, endsByItself: Bool) -> String {
        let executable = Self.executablePath()
        var arguments = [executable, "record"] + record
        // The file read here, named, so the service reads it whatever its environment.
        if let config { arguments += ["--config", config.standardizedFileURL.path] }
        if let machine = global.machine { arguments += ["--machine", machine] }
        for setting in global.settings { arguments += ["--set", setting] }
        let user = account ?? getpwuid(getuid()).map { String(cString: $0.pointee.pw_name) } ?? ProcessInfo.processInfo.userName
        var lines = ["# Tapedeck recorder, a systemd \(system ? "system" : "user") unit written by `tapedeck service print`."]
        if system {
            lines += ["# Save it as /etc/systemd/system/tapedeck.service, then:",
                      "#   sudo systemctl daemon-reload && sudo systemctl enable --now tapedeck.service",
                      "# What it records now: systemctl status tapedeck",
                      "# Its reports and warnings: journalctl -u tapedeck -f"]
        } else {
            lines += ["# Save it as ~/.config/systemd/user/tapedeck.service, then:",
                      "#   systemctl --user daemon-reload && systemctl --user enable --now tapedeck.service",
                      "# To record from boot, without a login: loginctl enable-linger \(user)",
                      "# What it records now: systemctl --user status tapedeck",
                      "# Its reports and warnings: journalctl --user -u tapedeck -f"]
        }
        if system && user != ProcessInfo.processInfo.userName {
            lines.append("# Takes go to \(user)'s library (storage.*.path, else $XDG_DATA_HOME/tapedeck of that account).")
        } else if let library {
            lines.append("# Takes go to \(library).")
        }
        if config == nil {
            lines.append("# No config file was found: the service uses the built-in defaults and detects the backends when it starts.")
        }
        if !system && getuid() == 0 {
            lines.append("# As root, a system unit (tapedeck service print --system) records from boot without lingering.")
        }
        if executable.contains("/.build/") {
            lines += ["# ExecStart names a build folder's binary: install tapedeck and change it, e.g.",
                      "#   sudo install -m 755 \(executable) /usr/local/bin/"]
        }
        lines += ["", "[Unit]", "Description=Tapedeck recorder", "Documentation=man:tapedeck(1)",
                  system ? "After=sound.target" : "After=pipewire.service pulseaudio.service"]
        lines += ["", "[Service]", "Type=notify", "NotifyAccess=main"]
        if system { lines += ["User=\(user)", "SupplementaryGroups=audio"] }
        lines.append("ExecStart=" + arguments.map(Self.quoted).joined(separator: " "))
        if watchdog > 0 { lines.append("WatchdogSec=\(watchdog)") }
        lines += ["# systemctl stop sends SIGTERM, which finishes the take as Ctrl-C does.",
                  "TimeoutStopSec=60",
                  endsByItself ? "# It ends by itself (-d, --until): started again only when it fails." : "# It records until stopped: started again whenever it ends.",
                  "Restart=\(endsByItself ? "on-failure" : "always")",
                  "RestartSec=5",
                  "# Takes kept: 3 with overruns, 4 after a lost device, 6 with a silence alarm; 130 stopped before its trigger.",
                  "SuccessExitStatus=3 4 6 130",
                  "# 64: a wrong option, 78: a wrong configuration: a restart cannot mend them.",
                  "RestartPreventExitStatus=64 78",
                  "", "[Install]", "WantedBy=\(system ? "multi-user.target" : "default.target")", ""]
        return lines.joined(separator: "\n")
    }

    /// This program's absolute path, for `ExecStart=`.
    static func executablePath() -> String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL.path
    }

    /// One word of `ExecStart=` as systemd reads it: plain when it can be, else in double quotes;
    /// `%` and `$` doubled, as systemd expands them.
    static func quoted(_ word: String) -> String {
        let escaped = word.replacingOccurrences(of: "%", with: "%%").replacingOccurrences(of: "$", with: "$$")
        let plain = !escaped.isEmpty && escaped.unicodeScalars.allSatisfy {
            $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "_./:=,@+-%$".unicodeScalars.contains($0))
        }
        if plain { return escaped }
        return "\"" + escaped.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }
}
