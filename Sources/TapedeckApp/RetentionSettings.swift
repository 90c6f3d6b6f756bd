public import TapedeckCore

/// The `retention:` section: which takes Tapedeck deletes by itself. A plain value; any thread.
public struct RetentionSettings: SettingsGroup, Hashable {
    public static let keep = Setting<String>("keep",
        help: "Delete takes older than this, counted from when each was recorded (30d, 12h, 90m); empty keeps them however old.")
    public static let freeSpaceFloor = Setting<String>("free-space-floor",
        help: "When the library's disk has less free than this (10%, or 20G, 500M), delete the oldest takes until it has; empty: no floor.")
    public static let keepMarked = Setting<Bool>("keep-marked", default: true,
        help: "Never delete a take with markers, notes or tags.")
    public static let declarations = [keep.declaration, freeSpaceFloor.declaration, keepMarked.declaration]

    public var keep: String
    public var freeSpaceFloor: String
    public var keepMarked: Bool

    public init(_ settings: PluginSettings) {
        keep = settings[Self.keep]
        freeSpaceFloor = settings[Self.freeSpaceFloor]
        keepMarked = settings[Self.keepMarked]
    }

    /// Whether the section asks for anything at all.
    public var isActive: Bool { !keep.trimmingSpaces.isEmpty || !freeSpaceFloor.trimmingSpaces.isEmpty }

    /// `keep` in seconds; `nil` when empty.
    /// - Throws: `.configuration` naming `retention.keep` and the forms accepted. - Thread: any.
    public func keepSeconds() throws -> Double? {
        let text = keep.trimmingSpaces.lowercased()
        guard !text.isEmpty else { return nil }
        let problem = TapedeckError(.configuration, "retention.keep: \"\(keep)\" is not an age. Use days (30d), hours (12h) or minutes (90m), at least an hour; leave it empty to keep takes however old.")
        let seconds: Double?
        if text.hasSuffix("d") { seconds = Double(text.dropLast()).map { $0 * 86_400 } }
        else { seconds = try? DurationText.seconds(text, flag: "retention.keep") }
        guard let seconds, seconds >= 3600, seconds <= 36_500 * 86_400 else { throw problem }
        return seconds
    }

    /// `free-space-floor` as a share of the disk or a size; `nil` when empty.
    /// - Throws: `.configuration` naming the forms accepted. - Thread: any.
    public func floor() throws -> RetentionPolicy.Floor? {
        let text = freeSpaceFloor.trimmingSpaces
        guard !text.isEmpty else { return nil }
        if text.hasSuffix("%") {
            guard let percent = Double(text.dropLast().trimmingSpaces), percent > 0, percent < 100 else {
                throw TapedeckError(.configuration, "retention.free-space-floor: \"\(freeSpaceFloor)\" is not a share of the disk. Give a percentage from 1% to 99%, or a size (20G).")
            }
            return .percent(percent)
        }
        guard let bytes = try? ByteCountText.bytes(String(text), flag: "retention.free-space-floor"), bytes > 0 else {
            throw TapedeckError(.configuration, "retention.free-space-floor: \"\(freeSpaceFloor)\" is not a size or a share. Give e.g. 10% or 20G.")
        }
        return .bytes(bytes)
    }
}
