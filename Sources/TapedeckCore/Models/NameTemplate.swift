public import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Take names (and `record -o` file names) made from the time a take begins, as `arecord
/// --use-strftime` and ffmpeg's `-strftime 1` make file names: `--name "%Y-%m-%d %H.%M"` names a
/// take that began at 15:00 on 29 November 2026 "2026-11-29 15.00", each take of a split run at
/// its own start. The conversions are strftime(3)'s, in local time, at the start rounded to the
/// nearest second; `%%` is a percent sign. A name with no conversion (or only a `%` that begins
/// none, as in "50% mix") is a plain name. Plain functions; any thread; never block.
public enum NameTemplate {
    /// The conversion letters that make a name a template (not `%n` and `%t`: no line breaks or
    /// tabs in names).
    static let conversions = Set("aAbBcCdDeFgGhHIjklmMpPrRsSTuUVwWxXyYzZ")

    /// Whether `name` holds a strftime conversion (`%Y`, `%H`, `%M`, …).
    public static func isTemplate(_ name: String) -> Bool {
        var percent = false
        for c in name {
            if percent {
                if conversions.contains(c) { return true }
                percent = false
            } else if c == "%" {
                percent = true
            }
        }
        return false
    }

    /// `name` with each conversion made for `moment`; `name` itself when it is no template.
    public static func expand(_ name: String, at moment: Date) -> String {
        guard isTemplate(name) else { return name }
        // Only the conversions the template knows reach strftime; any other `%` is kept as is.
        var format = ""
        var percent = false
        for c in name {
            if percent {
                format += conversions.contains(c) || c == "%" ? "%\(c)" : "%%\(c)"
                percent = false
            } else if c == "%" {
                percent = true
            } else {
                format.append(c)
            }
        }
        if percent { format += "%%" }
        var seconds = time_t(moment.timeIntervalSince1970.rounded())
        var parts = tm()
        guard localtime_r(&seconds, &parts) != nil else { return name }
        var buffer = [CChar](repeating: 0, count: 1024)
        let written = strftime(&buffer, buffer.count, format, &parts)
        guard written > 0 else { return name }
        return String(decoding: buffer.prefix(written).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
