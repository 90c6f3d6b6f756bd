import Foundation
import Logging
import TapedeckAssembly
import TapedeckCore
import TapedeckDirectoryStorage
import TapedeckNull
import Testing

@Suite("Configuration")
struct ConfigurationTests {
    let loader = ConfigurationLoader(catalog: .builtIn, environment: [:])

    func resolve(_ yaml: String?, env: [String: String] = [:], flags: [String: String] = [:]) throws -> TapedeckConfiguration {
        let file = try yaml.map { try ConfigFile.parse($0, name: "test.yaml") }
        return try ConfigurationLoader(catalog: .builtIn, environment: env).resolve(file: file, flags: flags)
    }

    func message(_ body: () throws -> Void) -> String {
        do {
            try body()
            return "no error"
        } catch let e as TapedeckError {
            #expect(e.code == .configuration)
            return e.message
        } catch {
            return "\(error)"
        }
    }

    @Test("built-in defaults: directory storage, WAV, 48 kHz stereo s16, and no capture backend")
    func defaults() throws {
        let c = try resolve(nil)
        #expect(c.storage.plugin == "directory" && c.encoder.plugin == "wav")
        #expect(c.capture.plugin == nil && c.playback.plugin == nil)
        #expect(c.format == AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .s16))
        #expect(c.recording.checkpointInterval == .seconds(1))
        #expect(c.settings["format.channels"]?.source == .builtIn)
    }

    @Test("precedence: flag over environment over file over default, with each source recorded")
    func precedence() throws {
        let yaml = """
            capture:
              backend: null
              null:
                frequency: 1000
            format:
              channels: 1
              sample-rate: 44100
            """
        let fileOnly = try resolve(yaml)
        #expect(fileOnly.format.channels == 1)
        #expect(fileOnly.settings["format.channels"]?.source == .file(path: "test.yaml", line: 6))
        let env = ["TAPEDECK_FORMAT_CHANNELS": "4", "TAPEDECK_CAPTURE_NULL_FREQUENCY": "220"]
        let withEnv = try resolve(yaml, env: env)
        #expect(withEnv.format.channels == 4)
        #expect(withEnv.capture.settings[NullCaptureSettings.frequency] == 220)
        #expect(withEnv.settings["format.channels"]?.source == .environment(variable: "TAPEDECK_FORMAT_CHANNELS"))
        let withFlag = try resolve(yaml, env: env, flags: ["format.channels": "8"])
        #expect(withFlag.format.channels == 8)
        #expect(withFlag.settings["format.channels"]?.source == .flag)
        #expect(withFlag.format.sampleRate == 44_100)
        #expect(withFlag.settings["format.sample-format"]?.source == .builtIn)
    }

    static let fleet = """
        format:
          channels: 2
          sample-rate: 48000
        capture:
          backend: null
        machines:
          studio-pi:
            format:
              channels: 1
          laptop:
            format:
              sample-rate: 44100
        """

    @Test("a machines: section is chosen by host name, or by --machine, and sits between the environment and the file's top level")
    func machineSections() throws {
        let file = try ConfigFile.parse(Self.fleet, name: "fleet.yaml")
        func load(host: String, machine: String? = nil, env: [String: String] = [:], flags: [String: String] = [:]) throws -> TapedeckConfiguration {
            try ConfigurationLoader(catalog: .builtIn, environment: env, hostName: host).resolve(file: file, flags: flags, machine: machine)
        }
        let pi = try load(host: "studio-pi")
        #expect(pi.machine == "studio-pi" && pi.format.channels == 1 && pi.format.sampleRate == 48_000)
        #expect(pi.settings["format.channels"]?.source == .machine(name: "studio-pi", path: "fleet.yaml", line: 9))
        #expect(pi.settings["format.sample-rate"]?.source == .file(path: "fleet.yaml", line: 3))
        let other = try load(host: "somewhere-else")
        #expect(other.machine == nil && other.format.channels == 2)
        let chosen = try load(host: "studio-pi", machine: "laptop")
        #expect(chosen.machine == "laptop" && chosen.format.channels == 2 && chosen.format.sampleRate == 44_100)
        // Environment and flags still win over the machine section.
        let env = try load(host: "studio-pi", env: ["TAPEDECK_FORMAT_CHANNELS": "4"])
        #expect(env.format.channels == 4)
        let flag = try load(host: "studio-pi", env: ["TAPEDECK_FORMAT_CHANNELS": "4"], flags: ["format.channels": "6"])
        #expect(flag.format.channels == 6)
        #expect(message { _ = try load(host: "x", machine: "studio-py") }
            == "--machine studio-py: fleet.yaml has no machines.studio-py section (did you mean \"studio-pi\"?). Known: laptop, studio-pi.")
    }

    @Test("a typo in any machine's section is found on every machine, naming the line and the section")
    func machineTypos() throws {
        let file = try ConfigFile.parse(Self.fleet + "\n  ci:\n    format:\n      chanels: 1\n", name: "fleet.yaml")
        let loader = ConfigurationLoader(catalog: .builtIn, environment: [:], hostName: "laptop")
        #expect(message { _ = try loader.resolve(file: file, flags: [:]) }
            == "fleet.yaml:15 (machines.ci): format.chanels: unknown setting (did you mean \"format.channels\"?). Accepted here: channels, sample-format, sample-rate.")
    }

    @Test("a machine section with an empty name is refused with a message, for a section and for a value")
    func emptyMachineName() throws {
        // Found by scripts/fuzz (Fuzz/Findings/config): the parser indexed past the key's parts and crashed.
        for yaml in ["machines:\n  \"\":\n    format:\n      channels: 1\n", "machines:\n  \"\": 3\n"] {
            let said = message { _ = try ConfigFile.parse(yaml, name: "fleet.yaml") }
            #expect(said.hasPrefix("fleet.yaml:") && said.hasSuffix(": machines: each section needs a host name, e.g. machines: { studio-pi: { capture: { backend: alsa } } }."), "\(said)")
        }
    }

    @Test("config check lists every problem, not only the first")
    func allProblems() throws {
        let yaml = """
            capture:
              backend: nul
            format:
              chanels: 2
              sample-rate: 7
            storage:
              directory:
                busy-timeot: 3
            """
        let file = try ConfigFile.parse(yaml, name: "bad.yaml")
        let problems = loader.problems(file: file, flags: ["format.bits": "24"], machine: nil)
        // The unknown keys and, in the same run, every bad value of the known ones.
        #expect(problems.count == 5, "\(problems)")
        #expect(problems.contains { $0.hasPrefix("bad.yaml:2: capture.backend: unknown backend \"nul\"") }, "\(problems)")
        #expect(problems.contains { $0.hasPrefix("bad.yaml:5: format.sample-rate: 7 is out of range") }, "\(problems)")
        #expect(problems.contains { $0.hasPrefix("bad.yaml:4: format.chanels: unknown setting (did you mean \"format.channels\"?)") })
        #expect(problems.contains { $0.hasPrefix("bad.yaml:8: storage.directory.busy-timeot: unknown setting (did you mean \"storage.directory.busy-timeout\"?)") })
        #expect(problems.contains { $0.hasPrefix("--set format.bits: format.bits: unknown setting") })
        let fixed = try ConfigFile.parse(yaml.replacingOccurrences(of: "chanels", with: "channels").replacingOccurrences(of: "timeot", with: "timeout"), name: "bad.yaml")
        let values = loader.problems(file: fixed, flags: [:], machine: nil)
        // Every bad value at once, each naming its line.
        #expect(values.count == 2, "\(values)")
        #expect(values.contains { $0.hasPrefix("bad.yaml:2: capture.backend: unknown backend \"nul\"") }, "\(values)")
        #expect(values.contains { $0.hasPrefix("bad.yaml:5: format.sample-rate: 7 is out of range") }, "\(values)")
        #expect(loader.problems(file: try ConfigFile.parse("capture:\n  backend: null\n", name: "ok.yaml"), flags: [:], machine: nil).isEmpty)
    }

    @Test("a config file that others may write, or that another user owns, is refused with the fix")
    func permissions() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-perm-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let url = dir.appendingPathComponent("config.yaml")
        try Data("capture:\n  backend: null\n".utf8).write(to: url)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: url.path)
        #expect(try ConfigFile.load(url).entries["capture.backend"]?.value == "null")
        try FileManager.default.setAttributes([.posixPermissions: 0o664], ofItemAtPath: url.path)
        #expect(message { _ = try ConfigFile.load(url) }
            == "\(url.path): the config file may be written by its group (mode 664), so anyone could choose where recordings go. Run `chmod go-w \(url.path)`.")
        try FileManager.default.setAttributes([.posixPermissions: 0o666], ofItemAtPath: url.path)
        #expect(message { _ = try ConfigFile.load(url) }.contains("may be written by anyone (mode 666)"))
        try FileManager.default.setAttributes([.posixPermissions: 0o644, .ownerAccountID: 12345], ofItemAtPath: url.path)
        #expect(message { _ = try ConfigFile.load(url) }
            == "\(url.path): the config file belongs to another user (uid 12345). Use your own copy, or `chown` it to yourself.")
    }

    @Test("an unknown backend names the source line, suggests the closest, and lists the known ones")
    func unknownBackend() {
        let m = message { _ = try resolve("capture:\n  backend: nul\n") }
        #expect(m == "test.yaml:2: capture.backend: unknown backend \"nul\" (did you mean \"null\"?). Known: alsa, jack, null, pipewire, pulse, rtp, stream.")
    }

    @Test("unknown keys, wrong types, out-of-range values and unknown environment variables are errors that say what is accepted")
    func errors() {
        #expect(message { _ = try resolve("format:\n  chanels: 2\n") }.contains("test.yaml:2: format.chanels: unknown setting (did you mean \"format.channels\"?)"))
        #expect(message { _ = try resolve("capturr:\n  backend: null\n") }.contains("capturr.backend: unknown setting (did you mean \"capture.backend\"?). Sections: capture, playback, format, encoder, storage, metadata, sync, retention, provenance."))
        #expect(message { _ = try resolve("format:\n  channels: two\n") } == "test.yaml:2: format.channels: expected an integer from 1 to 32, got \"two\".")
        #expect(message { _ = try resolve("format:\n  sample-rate: 1000\n") }.contains("out of range"))
        #expect(message { _ = try resolve("format:\n  sample-format: s8\n") }.contains("one of: s16, s24, s32, f32"))
        #expect(message { _ = try resolve("capture:\n  backend: null\n  null:\n    signl: sine\n") }.contains("capture.null.signl: unknown setting"))
        #expect(message { _ = try resolve("capture:\n  sndio:\n    device: hw:0\n") }.contains("\"sndio\" is not a capture plugin. Known: alsa, jack, null, pipewire, pulse, rtp, stream."))
        #expect(message { _ = try resolve(nil, env: ["TAPEDECK_FORMAT_CHANELS": "2"]) }.contains("TAPEDECK_FORMAT_CHANELS: not a Tapedeck setting (did you mean TAPEDECK_FORMAT_CHANNELS?)"))
        #expect(message { _ = try resolve(nil, env: ["TAPEDECK_FORMAT_CHANNELS": "99"]) }.hasPrefix("environment variable TAPEDECK_FORMAT_CHANNELS: format.channels:"))
        #expect(message { _ = try resolve(nil, flags: ["format.nope": "1"]) }.hasPrefix("--set format.nope: format.nope: unknown setting"))
        #expect(message { _ = try resolve("format: [1, 2]\n") }.contains("a list is not accepted"))
        #expect(message { _ = try resolve("format:\n  channels: 1\n  channels: 2\n") } == "test.yaml:2: channels given twice in one section. Keep one of them.")
        let syntax = message { _ = try resolve("capture: {backend: null\n") }
        // The flow mapping left open on line 1 is found at the end of the file: the message names line 1.
        #expect(syntax.hasPrefix("test.yaml:1: not valid YAML:") && syntax.contains("(by line 2)") && !syntax.contains("\n"), "\(syntax)")
    }

    @Test("a capture buffer too large for memory is refused, naming the key and the limit")
    func bufferLimit() {
        let m = message { _ = try resolve("capture:\n  buffer-seconds: 60\nformat:\n  sample-rate: 192000\n  channels: 32\n  sample-format: f32\n") }
        #expect(m.hasPrefix("test.yaml:2: capture.buffer-seconds: 60.0 s at 192000 Hz, 32 ch, f32 needs"), "\(m)")
    }

    @Test("relative paths in a file are relative to the file; from the environment, to the working directory")
    func relativePaths() throws {
        let file = try ConfigFile.parse("storage:\n  directory:\n    path: lib\n", name: "/etc/tapedeck/config.yaml")
        let c = try loader.resolve(file: file, flags: [:])
        #expect(c.storage.settings[DirectoryStorageSettings.path] == "/etc/tapedeck/lib")
        let env = try resolve(nil, env: ["TAPEDECK_STORAGE_DIRECTORY_PATH": "lib2"])
        #expect(env.storage.settings[DirectoryStorageSettings.path] == FileManager.default.currentDirectoryPath + "/lib2")
        let home = try resolve(nil, flags: ["storage.directory.path": "~/x"])
        #expect(home.storage.settings[DirectoryStorageSettings.path] == NSHomeDirectory() + "/x")
    }

    @Test("settings of a plugin that is not selected are still checked")
    func unselectedPlugin() {
        #expect(message { _ = try resolve("capture:\n  null:\n    level: 5\n") }.contains("capture.null.level: 5.0 is out of range"))
        #expect(message { _ = try resolve(nil, flags: ["capture.null.signal": "bogus"]) }.contains("unknown value \"bogus\""))
    }

    @Test("the reserved variables are not settings and do not trip validation")
    func reserved() throws {
        _ = try resolve(nil, env: ["TAPEDECK_CONFIG": "/x", "TAPEDECK_LOG_LEVEL": "debug"])
    }

    @Test("a missing or unreadable config file is a clear error")
    func unreadable() throws {
        let m = message { _ = try loader.load(explicitPath: "/nonexistent/tapedeck.yaml", flags: [:]) }
        #expect(m.contains("Cannot read the config file /nonexistent/tapedeck.yaml: no such file"))
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cfg-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let binary = dir.appendingPathComponent("bad.yaml")
        try Data([0xFF, 0xFE, 0x00, 0x81]).write(to: binary)
        #expect(message { _ = try loader.load(explicitPath: binary.path, flags: [:]) }.contains("not readable UTF-8"))
    }

    @Test("file lookup order: --config, $TAPEDECK_CONFIG, $XDG_CONFIG_HOME/tapedeck/config.yaml")
    func lookup() throws {
        let xdg = FileManager.default.temporaryDirectory.appendingPathComponent("xdg-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: xdg.appendingPathComponent("tapedeck"), withIntermediateDirectories: true)
        try Data("format:\n  channels: 1\n".utf8).write(to: xdg.appendingPathComponent("tapedeck/config.yaml"))
        let env = ["XDG_CONFIG_HOME": xdg.path]
        #expect(ConfigurationLoader(catalog: .builtIn, environment: env).locate(explicitPath: nil)?.path == xdg.path + "/tapedeck/config.yaml")
        #expect(ConfigurationLoader(catalog: .builtIn, environment: env.merging(["TAPEDECK_CONFIG": "/a.yaml"]) { $1 }).locate(explicitPath: nil)?.path == "/a.yaml")
        #expect(ConfigurationLoader(catalog: .builtIn, environment: env).locate(explicitPath: "/b.yaml")?.path == "/b.yaml")
    }

    @Test("every file in Configuration/ resolves against the built-in catalog")
    func shippedFiles() throws {
        let dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Configuration")
        let files = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".yaml") }
        #expect(files.contains("ci.yaml") && files.contains("tapedeck.yaml"))
        for name in files {
            _ = try loader.resolve(file: try ConfigFile.load(dir.appendingPathComponent(name)), flags: [:])
        }
    }

    @MainActor
    @Test("Studio assembles the graph from an in-memory configuration, and refuses to record with no capture backend")
    func studio() async throws {
        let lib = FileManager.default.temporaryDirectory.appendingPathComponent("studio-\(UUID().uuidString)")
        let config = try resolve("storage:\n  directory:\n    path: \(lib.path)\n")
        let studio = try Studio(configuration: config, catalog: .builtIn, logger: Logger(label: "t"), environment: [:])
        try await studio.openLibrary()
        #expect(studio.store.storage.rootURL.path.hasSuffix(lib.lastPathComponent))
        #expect(studio.encoder.name == "wav")
        let error = #expect(throws: TapedeckError.self) { _ = try studio.makeRecorder() }
        #expect(error?.message.contains("No capture backend is configured") == true)
        let withNull = try resolve("capture:\n  backend: null\nstorage:\n  directory:\n    path: \(lib.path)\n")
        _ = try Studio(configuration: withNull, catalog: .builtIn, logger: Logger(label: "t"), environment: [:]).makeRecorder()
    }
}
