import ArgumentParser
import Foundation
import TapedeckAssembly
import TapedeckApp
import TapedeckCore

struct ConfigCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "config",
        abstract: "Check the configuration, show what it resolves to, or start one.",
        subcommands: [ConfigCheckCommand.self, ConfigShowCommand.self, ConfigInitCommand.self, ConfigExampleCommand.self])
}

struct ConfigExampleCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "example",
        abstract: "Print the reference configuration: every key, commented, with its default.")

    func run() {
        print(ReferenceConfig.current)
    }
}

struct ConfigInitCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init",
        abstract: "Write a commented starter config ($XDG_CONFIG_HOME/tapedeck/config.yaml), never replacing one.",
        usage: "tapedeck config init [<options>]",
        discussion: "The file holds every key (as `config example` prints it), commented out at its default, so `config show` tells what you changed and a later default is not pinned; only the capture and playback backends detected now are set. The devices found now are listed as comments. With --machine NAME the backends go in a machines: section for NAME instead.")

    @OptionGroup var global: GlobalOptions

    /// The reference config with every value commented out (`  # period-frames: 8192`),
    /// sections kept, and `SECTION.backend` set for each `detected` section.
    static func starter(_ reference: String, detected: [String: String]) -> String {
        var section = ""
        var lines: [String] = []
        for line in reference.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if let first = line.first, first != " ", first != "#", line.hasSuffix(":") { section = String(line.dropLast()) }
            let indent = line.prefix { $0 == " " }
            let rest = line.dropFirst(indent.count)
            if indent.count == 2, rest.hasPrefix("# backend: "), let plugin = detected[section] {
                lines.append("\(indent)backend: \(plugin)  # detected when this file was written")
                continue
            }
            // `key: value`, a value on the line: the default, as a comment.
            if !indent.isEmpty, !rest.hasPrefix("#"), let colon = rest.range(of: ": "), !rest[..<colon.lowerBound].contains(" ") {
                if indent.count == 2, rest.hasPrefix("backend: "), let plugin = detected[section] {
                    lines.append("\(indent)backend: \(plugin)  # detected when this file was written")
                } else {
                    lines.append("\(indent)# \(rest)")
                }
                continue
            }
            lines.append(line)
        }
        return lines.joined(separator: "\n")
    }

    @MainActor
    mutating func run() async throws {
        // --machine NAME: start a machines: section for NAME (there is no file to choose one from yet).
        let machine = global.machine
        var global = self.global
        global.machine = nil
        try await reportingErrors {
            let environment = ProcessInfo.processInfo.environment
            let paths = UserPaths(environment: environment)
            let target = URL(fileURLWithPath: global.config ?? paths.configHome + "/tapedeck/config.yaml")
            // The reference text, introduced as what it now is: this machine's config.
            let reference = ReferenceConfig.current.split(separator: "\n", omittingEmptySubsequences: false)
                .drop { $0.hasPrefix("#") || $0.isEmpty }.joined(separator: "\n")
            var text = """
                # Tapedeck configuration for this machine, written by `tapedeck config init`.
                # Every key is shown, commented out at its default: uncomment and change what this
                # machine needs, and check it with `tapedeck config check`; `tapedeck config show`
                # says where each value comes from. Precedence: --set flags, then TAPEDECK_*
                # environment variables, then this file, then the defaults. `tapedeck backends`
                # lists every setting.

                """
            // What this machine has, found without the file being written (--config names it).
            var probe = global
            probe.config = nil
            let studio = try? probe.makeStudioWithoutLibrary(detecting: [.capture, .playback])
            // Only the backends found now are set (at the top, or in the machine's section).
            let detected = machine != nil ? [:] : ["capture": studio?.configuration.capture.plugin, "playback": studio?.configuration.playback.plugin]
            text += Self.starter(reference, detected: detected.compactMapValues { $0 })
            var found: [String] = []
            if let studio {
                for name in BackendDetection.order {
                    guard let devices = try? studio.devices(ofBackend: name), !devices.isEmpty else { continue }
                    var merged: [String: AudioDevice] = [:]
                    for d in devices where !d.isProcessingStage {
                        var m = merged[d.name] ?? d
                        m.canCapture = m.canCapture || d.canCapture
                        m.canPlay = m.canPlay || d.canPlay
                        merged[d.name] = m
                    }
                    for d in merged.values.sorted(by: { $0.name < $1.name }).prefix(12) {
                        let roles = [d.canCapture ? "capture" : nil, d.canPlay ? "playback" : nil].compactMap { $0 }.joined(separator: "+")
                        found.append("#   \(name) \(roles): \(d.name)\(d.description.isEmpty ? "" : " (\(d.description))")")
                    }
                }
            }
            text += "\n# Devices found on this machine when this file was written (`tapedeck devices` lists them now).\n"
            text += "# Use one as capture.BACKEND.device / playback.BACKEND.device, or with --device NAME.\n"
            text += (found.isEmpty ? ["#   (none found)"] : found).joined(separator: "\n") + "\n"
            if let machine {
                let capture = studio?.configuration.capture.plugin ?? "alsa"
                let playback = studio?.configuration.playback.plugin ?? "alsa"
                text += "\n# Settings for the machine called \(machine) only (its host name, or --machine \(machine)).\nmachines:\n  \(machine):\n"
                text += "    capture:\n      backend: \(capture)\n    playback:\n      backend: \(playback)\n"
            }
            // Checked before it is written: a starter config that does not load is no start.
            _ = try ConfigFile.parse(text, name: target.path)
            try FileModes.makePrivateFolder(target.deletingLastPathComponent())
            let fd = open(target.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
            guard fd >= 0 else {
                if errno == EEXIST {
                    throw TapedeckError(.alreadyExists, "\(target.path) exists already; it was left as it is. Check it with `tapedeck config check`, or see every key with `tapedeck config example`.")
                }
                throw TapedeckError.system(errno, while: "create \(target.path)")
            }
            let bytes = Array(text.utf8)
            let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            let synced = fsync(fd) == 0
            close(fd)
            guard written == bytes.count, synced else {
                unlink(target.path)
                throw TapedeckError(.io, "Could not write \(target.path). Check the disk and try again.")
            }
            print("Wrote \(target.path). Edit it, then run `tapedeck config check`.")
        }
    }
}

struct ConfigCheckCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Validate the configuration against what each plugin declares, and that the configured devices can be opened now.",
        usage: "tapedeck config check [<options>]",
        discussion: "Exit status 0 only when the configuration is usable; 78 otherwise, with every problem listed.")

    @Flag(help: "Do not open the configured capture and playback devices.")
    var offline = false

    @Flag(help: "Print JSON.")
    var json = false

    @OptionGroup var global: GlobalOptions

    struct Report: Encodable {
        var kind = "config-check"
        var schema = JSONSchema.configCheck
        var file: String?
        var machine: String?
        /// The library folder the configured store opens (the default one when no path is set).
        var library: String?
        var usable: Bool
        var problems: [Problem]
    }

    /// One problem: the sentence, and where it is when it names a place (a file's line and key,
    /// a `--set` key, an environment variable, a role whose device did not open).
    struct Problem: Encodable, Equatable {
        var message: String
        var file: String?
        var line: Int?
        var key: String?
        var variable: String?

        /// Reads the place from the forms the checks begin their sentences with: `FILE:LINE: KEY: …`,
        /// `FILE:LINE: …`, `--set KEY: …`, `environment variable NAME: …`, `ROLE.backend PLUGIN: …`.
        init(_ message: String) {
            self.message = message
            let head = message.prefix { $0 != " " }
            if head.hasPrefix("--set") || message.hasPrefix("--set ") {
                let rest = message.dropFirst(6)
                key = rest.firstIndex(of: ":").map { String(rest[..<$0]) }
            } else if message.hasPrefix("environment variable ") {
                let rest = message.dropFirst(21)
                variable = rest.firstIndex(of: ":").map { String(rest[..<$0]) }
            } else if let range = message.range(of: #"^(capture|playback)\.backend [a-z0-9-]+: "#, options: .regularExpression) {
                key = String(message[range].prefix { $0 != " " })
            } else if let range = message.range(of: #":[0-9]+: "#, options: .regularExpression), !message[..<range.lowerBound].contains(" ") {
                file = String(message[..<range.lowerBound])
                line = Int(message[range].dropFirst().dropLast(2))
                let rest = message[range.upperBound...]
                if let colon = rest.range(of: ": "), rest[..<colon.lowerBound].allSatisfy({ $0.isLetter || $0.isNumber || $0 == "." || $0 == "-" || $0 == "_" }) {
                    key = String(rest[..<colon.lowerBound])
                }
            }
        }
    }

    @MainActor
    mutating func run() async throws {
        let offline = self.offline, json = self.json
        try await reportingErrors {
            let environment = ProcessInfo.processInfo.environment
            let loader = ConfigurationLoader(catalog: BoundCatalog.current, environment: environment)
            let flags = try global.flagSettings()
            let url = loader.locate(explicitPath: global.config)
            var problems: [String] = []
            var file: ConfigFile?
            do {
                file = try url.map(ConfigFile.load)
            } catch let error as TapedeckError {
                problems.append(error.message)
            }
            var machine: String?
            if problems.isEmpty {
                do {
                    machine = try loader.machineSection(in: file, explicit: global.machine)
                } catch let error as TapedeckError {
                    problems.append(error.message)
                }
            }
            if problems.isEmpty {
                problems = loader.problems(file: file, flags: flags, machine: machine)
            }
            if problems.isEmpty && !offline {
                problems = await Self.deviceProblems(global: global)
            }
            if json {
                let library = try? loader.resolve(file: file, flags: flags, machine: machine)
                    .libraryPath(catalog: BoundCatalog.current, paths: UserPaths(environment: environment))
                try Terminal.printJSON(Report(file: url?.path, machine: machine, library: library ?? nil, usable: problems.isEmpty, problems: problems.map(Problem.init)))
            } else if problems.isEmpty {
                print("\(url?.path ?? "Built-in defaults")\(machine.map { " (machines.\($0))" } ?? ""): the configuration is usable\(offline ? " (devices not opened: --offline)" : "").")
            } else {
                for p in problems { print(p) }
            }
            if !problems.isEmpty { throw ExitCode(ExitStatus.config) }
        }
    }

    /// Runs `body` on a thread of its own (device handles are opened and closed on one thread,
    /// never on the main actor's or the cooperative pool's).
    static func onOwnThread(_ body: @escaping @Sendable () throws -> Void) async throws {
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
            Thread { c.resume(with: Result { try body() }) }.start()
        }
    }

    /// Why the library folder at `path` cannot be written (it, or the nearest folder that
    /// exists to create it in, is not a writable folder); `nil` when it can.
    static func libraryProblem(_ path: String, key: String) -> String? {
        var candidate = URL(fileURLWithPath: path)
        while !FileManager.default.fileExists(atPath: candidate.path), candidate.path != "/" {
            candidate.deleteLastPathComponent()
        }
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: candidate.path, isDirectory: &isFolder), isFolder.boolValue else {
            return "\(key): \(candidate.path) is not a folder, so the library \(path) cannot be made. Set \(key) to a folder."
        }
        guard access(candidate.path, W_OK | X_OK) == 0 else {
            return "\(key): \(candidate.path) is not writable, so the library \(path) cannot be \(candidate.path == path ? "written" : "made"). Set \(key) to a folder you can write."
        }
        return nil
    }

    /// Opens the configured capture and playback devices in the configured format, and closes them.
    @MainActor
    static func deviceProblems(global: GlobalOptions) async -> [String] {
        var problems: [String] = []
        do {
            let studio = try global.makeStudioWithoutLibrary(detecting: [.capture, .playback])
            let format = studio.configuration.format
            for (section, plugin) in [("capture", studio.configuration.capture.plugin), ("playback", studio.configuration.playback.plugin)] where plugin == nil {
                problems.append("No \(section) backend is configured or found on this machine: `tapedeck \(section == "capture" ? "record" : "play")` cannot run. Set \(section).backend (`tapedeck backends` lists them), or write a config with `tapedeck config init`.")
            }
            if let library = studio.configuration.libraryPath(catalog: studio.catalog, paths: UserPaths(environment: ProcessInfo.processInfo.environment)),
               let problem = Self.libraryProblem(library, key: studio.libraryPathKey ?? "the library path") {
                problems.append(problem)
            }
            if let plugin = studio.configuration.capture.plugin {
                do {
                    let backend = try studio.makeCaptureBackend()
                    let options = CaptureOptions(periodFrames: studio.configuration.recording.periodFrames)
                    try await onOwnThread { try backend.openCaptureStream(format: format, options: options).close() }
                } catch let error as TapedeckError {
                    problems.append("capture.backend \(plugin): \(error.message)")
                }
            }
            if let plugin = studio.configuration.playback.plugin {
                do {
                    let backend = try studio.makePlaybackBackend()
                    let options = PlaybackOptions(periodFrames: studio.configuration.playbackPeriodFrames)
                    try await onOwnThread { try backend.openPlaybackStream(format: format, options: options).close() }
                } catch let error as TapedeckError {
                    problems.append("playback.backend \(plugin): \(error.message)")
                }
            }
        } catch let error as TapedeckError {
            problems.append(error.message)
        } catch {
            problems.append("\(error)")
        }
        return problems
    }
}

struct ConfigShowCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Show which plugin fills each role and every effective setting, with where it came from.",
        usage: "tapedeck config show [<options>]")

    @Flag(help: "Print JSON.")
    var json = false

    @OptionGroup var global: GlobalOptions

    struct Row: Encodable {
        var key: String
        var value: String
        /// flag, environment, machine, file or default.
        var layer: String
        /// The variable, file:line or section it came from.
        var source: String
    }

    struct Report: Encodable {
        var kind = "config"
        var schema = JSONSchema.version
        var file: String?
        var machine: String?
        /// The library folder the configured store opens (the default one when no path is set).
        var library: String?
        var roles: [String: String?]
        var settings: [Row]
    }

    @MainActor
    mutating func run() async throws {
        let json = self.json
        try await reportingErrors {
            let environment = ProcessInfo.processInfo.environment
            let loader = ConfigurationLoader(catalog: BoundCatalog.current, environment: environment)
            let detection = BackendDetection(catalog: BoundCatalog.current, logger: try global.makeLogger(),
                                             defaultLibraryURL: UserPaths(environment: environment).defaultLibrary)
            let c = try loader.load(explicitPath: global.config, flags: try global.flagSettings(), machine: global.machine,
                                    detection: detection)
            let library = c.libraryPath(catalog: BoundCatalog.current, paths: UserPaths(environment: environment))
            let settings = c.settings.sorted { $0.key < $1.key }.map { key, r in
                Row(key: key, value: Credentials.hidden(in: r.value.description), layer: r.source.layer, source: r.source.description)
            }
            let roles: [String: String?] = ["capture": c.capture.plugin, "playback": c.playback.plugin,
                                            "encoder": c.encoder.plugin, "storage": c.storage.plugin]
            if json {
                return try Terminal.printJSON(Report(file: c.file, machine: c.machine, library: library, roles: roles, settings: settings))
            }
            print("file: \(c.file ?? "(none: built-in defaults)")\(c.machine.map { "  machine section: \($0)" } ?? "")")
            if let library { print("library: \(library)") }
            for role in ["capture", "playback", "encoder", "storage"] {
                print("\(role): \((roles[role] ?? nil) ?? "(not set)")")
            }
            let width = settings.map(\.key.count).max() ?? 0
            for s in settings {
                print("  \(s.key.padding(toLength: width, withPad: " ", startingAt: 0))  \(s.value.isEmpty ? "\"\"" : s.value)  [\(s.source)]")
            }
            // The programmes every recording also keeps as takes of their own (`programs:`).
            for (i, p) in c.programs.enumerated() { print("\(i == 0 ? "programs:" : "         ") \(p.text)") }
        }
    }
}
