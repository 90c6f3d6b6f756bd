import ArgumentParser
import TapedeckApp
import TapedeckCore

struct NoteCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "note",
        abstract: "Set or show a take's notes (written as DESCRIPTION when it is exported).",
        usage: "tapedeck note [<options>] <take> [<text>]",
        discussion: "With TEXT, replaces the notes (an empty TEXT, \"\", clears them); without, prints them.")

    @Argument(help: "SESSION/TAKE, a short id, or `last`.", completion: TakeCompletion.kind(.takes))
    var take: String

    @Argument(help: "The notes: any text up to 64 KiB.")
    var text: String?

    @Flag(help: "Add TEXT on a new line after the notes there are, instead of replacing them.")
    var append = false

    @OptionGroup var global: GlobalOptions

    @MainActor
    mutating func run() async throws {
        try await reportingErrors {
            let studio = try await global.makeStudio()
            let (t, s) = try studio.store.resolveTake(take)
            guard let text else {
                if append { throw TapedeckError(.invalidArgument, "--append needs the TEXT to add.") }
                if !t.notes.isEmpty { print(t.notes) }
                return
            }
            var annotations = t.annotations
            annotations.notes = append && !t.notes.isEmpty ? t.notes + "\n" + text : text
            let updated = try await studio.store.annotate(t, annotations)
            if Terminal.stdoutIsTerminal {
                print(updated.notes.isEmpty ? "Cleared the notes of \(s.name)/\(t.name)." : "Set the notes of \(s.name)/\(t.name).")
            }
        }
    }
}

struct TagCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tag",
        abstract: "Set, remove or show a take's tags (carried into exports as tags of the same names).",
        usage: "tapedeck tag [<options>] <take> [<KEY=VALUE> ...]",
        discussion: """
            Names are stored upper-case, as Vorbis comments have them (ARTIST, GENRE, MIC, …). A tag named \
            like a standard one (TITLE, ALBUM) replaces it in exports. Without KEY=VALUE or --remove, prints the tags.
            """)

    @Argument(help: "SESSION/TAKE, a short id, or `last`.", completion: TakeCompletion.kind(.takes))
    var take: String

    @Argument(help: ArgumentHelp("Tags to set (an empty VALUE removes the tag).", valueName: "KEY=VALUE"))
    var tags: [String] = []

    @Option(name: .customLong("remove"), help: ArgumentHelp("Remove this tag (repeatable).", valueName: "KEY"))
    var removals: [String] = []

    @Flag(help: "Print the tags as JSON.")
    var json = false

    @OptionGroup var global: GlobalOptions

    @MainActor
    mutating func run() async throws {
        try await reportingErrors {
            let studio = try await global.makeStudio()
            let (t, s) = try studio.store.resolveTake(take)
            var annotations = t.annotations
            for pair in tags {
                guard let eq = pair.firstIndex(of: "=") else {
                    throw TapedeckError(.invalidArgument, "\"\(pair)\": expected KEY=VALUE, e.g. `tapedeck tag \(take) MIC=SM57`.")
                }
                let value = String(pair[pair.index(after: eq)...])
                let name = try TakeAnnotations.validateTag(String(pair[..<eq]), value)
                annotations.tags[name] = value.isEmpty ? nil : value
            }
            for name in removals { annotations.tags[name.uppercased()] = nil }
            let changed = annotations != t.annotations
            let result = changed ? try await studio.store.annotate(t, annotations) : t
            if json { return try Terminal.printJSON(TagsJSON(take: t.id, tags: result.tags)) }
            if changed && Terminal.stdoutIsTerminal {
                print("\(s.name)/\(t.name): \(Terminal.counted(result.tags.count, "tag")).")
            }
            if !changed || Terminal.stdoutIsTerminal {
                for (k, v) in result.tags.sorted(by: { $0.key < $1.key }) { print("\(k)=\(v)") }
            }
        }
    }

    struct TagsJSON: Encodable {
        var kind = "tags"
        var schema = JSONSchema.version
        var take: String
        var tags: [String: String]
    }
}
