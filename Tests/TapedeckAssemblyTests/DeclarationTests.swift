import Foundation
import Logging
import TapedeckAssembly
import TapedeckCore
import Testing

/// The settings a plugin reads are the ones it declares; every key a message names exists; and
/// only the composition root (and the command line's help) names backends.
@Suite("Declarations")
struct DeclarationTests {
    static let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Sources")

    /// Makes the plugin from its declared defaults through settings that log every read.
    /// - Returns: the keys it read that it does not declare.
    static func undeclaredReads<Made>(_ plugin: PluginDescriptor<Made>, section: String, library: URL) throws -> Set<String> {
        let (settings, log) = PluginSettings.recordingReads(of: try PluginSettings.resolving(plugin.settings))
        let context = PluginContext(logger: Logger(label: "test"), defaultLibraryURL: library, section: section)
        _ = try plugin.make(settings, context)
        return log.read.subtracting(plugin.settings.map(\.key))
    }

    @Test("every plugin reads only settings it declares, and every declared default is valid")
    func pluginsReadDeclaredSettings() throws {
        let catalog = PluginCatalog.builtIn
        let library = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-decl-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: library) }
        var undeclared: [String: Set<String>] = [:]
        for p in catalog.capture { undeclared["capture.\(p.name)"] = try Self.undeclaredReads(p, section: "capture.\(p.name)", library: library) }
        for p in catalog.playback { undeclared["playback.\(p.name)"] = try Self.undeclaredReads(p, section: "playback.\(p.name)", library: library) }
        for p in catalog.encoders { undeclared["encoder.\(p.name)"] = try Self.undeclaredReads(p, section: "encoder.\(p.name)", library: library) }
        for p in catalog.decoders { undeclared["decoder.\(p.name)"] = try Self.undeclaredReads(p, section: "decoder.\(p.name)", library: library) }
        for p in catalog.storage { undeclared["storage.\(p.name)"] = try Self.undeclaredReads(p, section: "storage.\(p.name)", library: library) }
        #expect(undeclared.count == catalog.capture.count + catalog.playback.count + catalog.encoders.count
                + catalog.decoders.count + catalog.storage.count)
        #expect(undeclared.values.allSatisfy { $0.isEmpty }, "settings read but not declared: \(undeclared.filter { !$0.value.isEmpty })")
    }

    @Test("a plugin that reads a setting it does not declare is caught")
    func undeclaredReadIsCaught() throws {
        struct Sneaky: SettingsGroup {
            static let declared = Setting<Int>("declared", range: 0...9, default: 1, help: "Declared.")
            static let hidden = Setting<Int>("hidden", range: 0...9, default: 2, help: "Not in the list.")
            static let declarations = [declared.declaration]
            init(_ settings: PluginSettings) { _ = settings[Self.declared] + settings[Self.hidden] }
        }
        let plugin = EncoderPlugin(name: "sneaky", summary: "", settings: Sneaky.self) { _, _ in throw TapedeckError(.internalError, "not made") }
        #expect(throws: TapedeckError.self) { _ = try Self.undeclaredReads(plugin, section: "encoder.sneaky", library: URL(fileURLWithPath: "/nonexistent")) }
        let (settings, log) = PluginSettings.recordingReads(of: try PluginSettings.resolving(Sneaky.declarations))
        _ = Sneaky(settings)
        #expect(log.read.subtracting(Sneaky.declarations.map(\.key)) == ["hidden"])
    }

    @Test("Configuration/tapedeck.yaml documents every setting with its declared default")
    func referenceConfigMatchesDeclarations() throws {
        let url = Self.sources.deletingLastPathComponent().appendingPathComponent("Configuration/tapedeck.yaml")
        let file = try ConfigFile.load(url)
        var declared: [String: SettingDeclaration] = [:]
        for section in HostSettings.sections {
            for d in section.settings { declared[section.name + "." + d.key] = d }
            if let role = section.role {
                for entry in PluginCatalog.builtIn.entries(for: role) {
                    for d in entry.settings { declared["\(section.name).\(entry.name).\(d.key)"] = d }
                }
            }
        }
        let missing = declared.keys.filter { file.entries[$0] == nil }.sorted()
        #expect(missing.isEmpty, "settings tapedeck.yaml does not document: \(missing)")
        let wrong = declared.compactMap { key, d -> String? in
            guard let written = file.entries[key]?.value, d.type != .path else { return nil }
            let a = try? d.parse(written).get(), b = try? d.parse(d.defaultValue).get()
            return a == b ? nil : "\(key): \(written) (declared default \(d.defaultValue))"
        }
        #expect(wrong.isEmpty, "tapedeck.yaml disagrees with the declared defaults: \(wrong.sorted())")
    }

    /// Every Swift file under `Sources/MODULE`, with its text.
    static func files(in module: String) throws -> [(String, String)] {
        let root = sources.appendingPathComponent(module)
        guard let walker = FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil) else { return [] }
        var out: [(String, String)] = []
        for case let url as URL in walker where url.pathExtension == "swift" {
            out.append((module + "/" + url.lastPathComponent, try String(contentsOf: url, encoding: .utf8)))
        }
        return out
    }

    static func matches(_ pattern: NSRegularExpression, in text: String) -> [String] {
        pattern.matches(in: text, range: NSRange(text.startIndex..., in: text)).compactMap { m in
            Range(m.range, in: text).map { String(text[$0]) }
        }
    }

    static var modules: [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: sources.path))?.filter { !$0.hasPrefix("C") && !$0.hasPrefix(".") }.sorted() ?? []
    }

    @Test("the source scanner finds literals, skips comments and sees through interpolation")
    func scanner() {
        let code = #"""
        let a = "one \(x ? "two" : "three") four" // "not this"
        /* "nor this" */ let b = """
            five
            """
        """#
        #expect(SwiftLiterals.scan(code) == ["two", "three", "one ⟨⟩ four", "\n    five\n    "])
    }

    @Test("every config key named in a string of the sources is a declared key or section")
    func messagesNameDeclaredKeys() throws {
        let loader = ConfigurationLoader(catalog: .builtIn, environment: [:])
        var known = Set(loader.knownKeys())
        for section in HostSettings.sections {
            known.insert(section.name)
            if let role = section.role {
                for entry in PluginCatalog.builtIn.entries(for: role) { known.insert(section.name + "." + entry.name) }
            }
        }
        let pattern = try NSRegularExpression(pattern: #"(?<![A-Za-z0-9_.\-⟩])(?:capture|playback|format|encoder|storage)\.[a-z0-9][a-z0-9-]*(?:\.[a-z0-9][a-z0-9-]*)?"#)
        var unknown: [String] = []
        var checked = 0
        // The scaffold's templates are Swift code held in strings (`format.validate()`), not messages.
        for module in Self.modules where module != "TapedeckScaffold" {
            for (file, text) in try Self.files(in: module) {
                for literal in SwiftLiterals.scan(text) {
                    for match in Self.matches(pattern, in: literal) {
                        let key = match.trimmingCharacters(in: CharacterSet(charactersIn: ".-"))
                        checked += 1
                        if !known.contains(key) { unknown.append("\(file): \(key)") }
                    }
                }
            }
        }
        #expect(checked > 5, "the scan found keys to check")
        #expect(unknown.isEmpty, "keys named in Sources that no section or plugin declares: \(unknown)")
    }

    @Test("no module but the composition root and the command line names a backend")
    func onlyAssemblyNamesBackends() throws {
        let catalog = PluginCatalog.builtIn
        let names = Set(catalog.capture.map(\.name) + catalog.playback.map(\.name) + catalog.encoders.map(\.name)
                        + catalog.decoders.map(\.name) + catalog.storage.map(\.name))
            .union(PluginCatalog.optionalBackends.keys)
        // Names that are also plain words are caught only as a whole literal ("null" == name);
        // the others anywhere in a literal, in any case ("Export as FLAC").
        let words: Set<String> = ["null", "directory", "bundle", "stream"]
        let own: [String: Set<String>] = [
            "TapedeckNull": ["null"], "TapedeckWAV": ["wav"], "TapedeckFLAC": ["flac"], "TapedeckOpus": ["opus"],
            "TapedeckALSA": ["alsa", "pulse", "null"], // the ALSA `pulse` PCM is an ALSA device name; `null` an ALSA PCM type
            "TapedeckPulseAudio": ["pulse", "pulseaudio", "pipewire"], // PipeWire-Pulse is a PulseAudio server
            "TapedeckJACK": ["jack", "pipewire"], // PipeWire's JACK server is one JACK client can use
            "TapedeckPipeWire": ["pipewire"], "TapedeckDirectoryStorage": ["directory"],
            "TapedeckBundleStorage": ["bundle"], "TapedeckSndfileFormats": ["mp3", "vorbis", "aiff"],
            // Network streams carry the codecs it decodes itself (Ogg Opus, MP3, FLAC, WAV); RTP is their transport.
            "TapedeckStream": ["stream", "rtp", "opus", "vorbis", "flac", "mp3", "wav"],
            "TapedeckStreamFormats": ["rtp", "opus", "vorbis", "flac", "mp3", "wav"],
        ]
        // The composition root (with its serving part) and the view name backends by design; the test kit's PulseAudio
        // fixture, the fuzz targets of each parser and the scaffold's templates are about them.
        let exempt: Set<String> = ["TapedeckAssembly", "TapedeckServerAssembly", "TapedeckCommandLine", "tapedeck", "TapedeckTesting", "TapedeckFuzzTargets",
                                   "TapedeckScaffold", "tapedeck-scaffold", "tapedeck-fuzz"]
        var found: [String] = []
        var scanned = 0
        for module in Self.modules where !exempt.contains(module) {
            let mine = own[module] ?? []
            let distinctive = names.subtracting(words).subtracting(mine).union(["pulseaudio"].filter { !mine.contains($0) })
            let pattern = try NSRegularExpression(pattern: "\\b(" + distinctive.sorted().joined(separator: "|") + ")\\b",
                                                  options: .caseInsensitive)
            for (file, text) in try Self.files(in: module) {
                scanned += 1
                for literal in SwiftLiterals.scan(text) {
                    if names.contains(literal), !mine.contains(literal) { found.append("\(file): \"\(literal)\"") }
                    for match in Self.matches(pattern, in: literal) { found.append("\(file): \(match) in \"\(literal)\"") }
                }
            }
        }
        #expect(scanned > 50)
        #expect(found.isEmpty, "backend names outside the composition root: \(found)")
    }
}

/// The string literals of Swift source text: comments skipped, interpolations scanned as code
/// (their own literals included) and shown as `⟨⟩` in the literal around them.
enum SwiftLiterals {
    static func scan(_ text: String) -> [String] {
        var lexer = Lexer(chars: Array(text))
        lexer.code(untilParen: false)
        return lexer.literals
    }

    struct Lexer {
        let chars: [Character]
        var i = 0
        var literals: [String] = []

        func at(_ offset: Int) -> Character? { i + offset < chars.count ? chars[i + offset] : nil }

        mutating func code(untilParen: Bool) {
            var depth = 0
            while i < chars.count {
                let c = chars[i]
                if c == "/", at(1) == "/" {
                    while i < chars.count, chars[i] != "\n" { i += 1 }
                } else if c == "/", at(1) == "*" {
                    i += 2
                    while i < chars.count, !(chars[i] == "*" && at(1) == "/") { i += 1 }
                    i += 2
                } else if c == "\"" {
                    let multi = at(1) == "\"" && at(2) == "\""
                    i += multi ? 3 : 1
                    string(multiline: multi)
                } else if untilParen, c == "(" {
                    depth += 1
                    i += 1
                } else if untilParen, c == ")" {
                    i += 1
                    if depth == 0 { return }
                    depth -= 1
                } else {
                    i += 1
                }
            }
        }

        mutating func string(multiline: Bool) {
            var text = ""
            while i < chars.count {
                let c = chars[i]
                if c == "\\" {
                    if at(1) == "(" {
                        i += 2
                        text += "⟨⟩"
                        code(untilParen: true)
                        continue
                    }
                    text.append(c)
                    if let next = at(1) { text.append(next) }
                    i += 2
                    continue
                }
                if multiline, c == "\"", at(1) == "\"", at(2) == "\"" {
                    i += 3
                    break
                }
                if !multiline, c == "\"" || c == "\n" {
                    i += 1
                    break
                }
                text.append(c)
                i += 1
            }
            literals.append(text)
        }
    }
}
