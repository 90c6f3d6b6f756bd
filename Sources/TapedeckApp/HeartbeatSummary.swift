public import TapedeckCore

extension RecorderHeartbeat {
    /// What a recorder is doing, in short phrases for `fleet status` and the page's fleet
    /// section (each escapes them its own way): its take (or session), loudest level, uploads
    /// waiting, last error, and its clock when a second or more off the catalog's (beyond a
    /// network's delay). The machine, role, state, disk and age are the callers' own columns.
    /// - Thread: any. Never blocks.
    public var summary: [String] {
        var parts: [String] = []
        if let take = take ?? session { parts.append(take) }
        if let level = levelDBFS { parts.append(String(format: "%.1f dBFS", level)) }
        if let waiting = backlogTakes, waiting > 0 {
            parts.append("\(waiting) take\(waiting == 1 ? "" : "s") to upload" + (backlogOldestSeconds.map { ", oldest \(RetentionClock.duration($0))" } ?? ""))
        }
        if let error = lastError { parts.append(error) }
        if let offset = clockOffsetSeconds, abs(offset) >= 1 {
            parts.append("clock \(RetentionClock.duration(abs(offset))) \(offset > 0 ? "ahead" : "behind")")
        }
        return parts
    }
}
