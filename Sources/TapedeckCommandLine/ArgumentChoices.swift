import ArgumentParser
import Logging
import TapedeckApp
import TapedeckAssembly
import TapedeckCore

/// `--log-level`: the words swift-log knows, listed in help and checked by ArgumentParser.
enum LogLevelChoice: String, CaseIterable, ExpressibleByArgument {
    case trace, debug, info, notice, warning, error, critical

    init?(argument: String) { self.init(rawValue: argument.lowercased()) }

    var level: Logger.Level { Logger.Level(rawValue: rawValue) ?? .notice }
}

/// `export --sample-format`: the integer formats a take can be converted to.
enum ConversionChoice: String, CaseIterable, ExpressibleByArgument {
    case s16, s24, s32

    var sampleFormat: SampleFormat {
        switch self {
        case .s16: .s16
        case .s24: .s24
        case .s32: .s32
        }
    }
}

/// `record -f/--format`: a sample format, by Tapedeck's name or arecord's (`S16_LE`, `S24_3LE`,
/// `S32_LE`, `FLOAT_LE`), in any case.
enum SampleFormatChoice: String, CaseIterable, ExpressibleByArgument {
    case s16, s24, s32, f32

    init?(argument: String) {
        let aliases = ["s16_le": "s16", "s24_3le": "s24", "s32_le": "s32", "float_le": "f32", "float": "f32"]
        let word = argument.lowercased()
        self.init(rawValue: aliases[word] ?? word)
    }
}

/// `export --format`: an encoder of this build, by name (help lists them).
struct EncoderChoice: ExpressibleByArgument, Sendable {
    let name: String

    /// An encoder name as written in the code (the default).
    init(_ name: String) { self.name = name }

    /// Any case: `--format FLAC` is `flac`; a file extension names its encoder too
    /// (`--format ogg` is vorbis, `aif` aiff), as `-o NAME.EXT` does.
    init?(argument: String) {
        let word = argument.lowercased()
        if Self.allValueStrings.contains(word) {
            name = word
        } else if let alias = Self.extensions[word], Self.allValueStrings.contains(alias) {
            name = alias
        } else {
            return nil
        }
    }

    static var allValueStrings: [String] { BoundCatalog.current.encoders.map(\.name) }
    /// File extensions that are not their encoder's name.
    static let extensions = ["ogg": "vorbis", "oga": "vorbis", "aif": "aiff", "aifc": "aiff"]
    static var defaultCompletionKind: CompletionKind { .list(allValueStrings) }
    var defaultValueDescription: String { name }
}

/// `export --dither`.
enum DitherChoice: String, CaseIterable, ExpressibleByArgument {
    case none, tpdf, shaped
    var dither: Dither { Dither(rawValue: rawValue) ?? .tpdf }
}

/// A level in decibels as typed after `--loudness`, `--true-peak` or `--normalize-peak`: `-23`,
/// `-23LUFS`, `-1dBTP`, `-1 dB`. - Throws: `.invalidArgument` naming the flag and the range.
func decibels(_ text: String?, flag: String, unit: String, range: ClosedRange<Double>) throws -> Double? {
    guard let text else { return nil }
    var t = text.trimmingCharacters(in: .whitespaces)
    for suffix in ["lufs", "lu", "dbtp", "dbfs", "db"] where t.lowercased().hasSuffix(suffix) {
        t = String(t.dropLast(suffix.count)).trimmingCharacters(in: .whitespaces)
        break
    }
    guard let value = Double(t), value.isFinite, range.contains(value) else {
        throw TapedeckError(.invalidArgument, "\(flag) \(text): expected \(unit) from \(Int(range.lowerBound)) to \(Int(range.upperBound)), e.g. \(flag) \(Int(range.lowerBound / 3)).")
    }
    return value
}

/// A command's help examples, appended to its discussion: each command line, then what it does,
/// indented below it (two lines each, so nothing depends on the terminal's width).
enum HelpExamples {
    static func text(_ examples: KeyValuePairs<String, String>) -> String {
        // Every line begins with a space, so the man page breaks them as --help does (groff
        // joins a line that does not, and warns about an empty one).
        "\n  Examples:\n" + examples.map { "    \($0.key)\n        \($0.value)" }.joined(separator: "\n")
    }
}

/// `export --gaps`.
enum GapChoice: String, CaseIterable, ExpressibleByArgument {
    case refuse, silence, split
    var policy: GapPolicy { GapPolicy(rawValue: rawValue) ?? .refuse }
}
