public import Foundation

/// The fixed values a machine writes into every take's file (the `metadata:` config section):
/// who made it, for whom, where. A plain value; any thread.
public struct FileIdentity: Sendable, Hashable {
    /// BWF Originator (32 ASCII characters at most are kept there): the recorder's name.
    public var originator: String
    /// ORGANIZATION tag; `nil` when not configured.
    public var organization: String?
    /// LOCATION tag; `nil` when not configured.
    public var location: String?
    /// iXML PROJECT; the session's name when not configured.
    public var project: String?
    /// iXML TAPE (the roll or card); the machine's name when not configured.
    public var tape: String?
    /// More name=value pairs for iXML USER.
    public var user: [String: String]

    public init(originator: String = "Tapedeck", organization: String? = nil, location: String? = nil, project: String? = nil,
                tape: String? = nil, user: [String: String] = [:]) {
        self.originator = originator
        self.organization = organization
        self.location = location
        self.project = project
        self.tape = tape
        self.user = user
    }
}

/// Where captured audio came from: the machine, the backend and the device, and the format the
/// device delivered. A plain value; any thread.
public struct CaptureSource: Sendable, Hashable {
    public var host: String
    public var backend: String
    public var device: String

    public init(host: String, backend: String, device: String) {
        self.host = host
        self.backend = backend
        self.device = device
    }
}

/// A moment as the local wall clock shows it, for BWF and iXML, which record the time of day
/// (local, as a recorder's clock shows it). Made with `localtime_r`, not a Foundation calendar
/// (which costs milliseconds to load when a recording starts). A plain value; any thread.
public struct LocalTimeOfDay: Sendable, Hashable {
    /// `2026-11-26`.
    public var date: String
    /// `05:26:37`.
    public var time: String
    /// Seconds since local midnight, with the fraction.
    public var secondsSinceMidnight: Double

    /// UTC offset of local time at that moment, in seconds (east positive).
    public var utcOffsetSeconds: Int

    /// `date` and `time` are the moment rounded to the nearest second (14:59:59.9998 is 15:00:00,
    /// as a take that began on the hour must say); ``secondsSinceMidnight`` keeps the fraction.
    public init(_ moment: Date) {
        // Years 0001 to 9999 (a damaged catalog's date must not trap).
        let seconds = min(max(moment.timeIntervalSince1970, -62_135_596_800), 253_402_300_799)
        var whole = time_t(seconds.rounded(.down))
        var parts = tm()
        localtime_r(&whole, &parts)
        secondsSinceMidnight = Double(Int(parts.tm_hour) * 3600 + Int(parts.tm_min) * 60 + Int(parts.tm_sec)) + (seconds - seconds.rounded(.down))
        var nearest = time_t(min(seconds.rounded(), 253_402_300_799))
        localtime_r(&nearest, &parts)
        date = "\(zeroPadded(Int(parts.tm_year) + 1900, width: 4))-\(zeroPadded(Int(parts.tm_mon) + 1, width: 2))-\(zeroPadded(Int(parts.tm_mday), width: 2))"
        time = "\(zeroPadded(Int(parts.tm_hour), width: 2)):\(zeroPadded(Int(parts.tm_min), width: 2)):\(zeroPadded(Int(parts.tm_sec), width: 2))"
        utcOffsetSeconds = Int(parts.tm_gmtoff)
    }

    /// The UTC offset as ISO 8601 writes it: `+01:00`, `-05:30`, `+00:00`.
    public var utcOffset: String {
        let minutes = abs(utcOffsetSeconds) / 60
        return (utcOffsetSeconds < 0 ? "-" : "+") + zeroPadded(minutes / 60, width: 2) + ":" + zeroPadded(minutes % 60, width: 2)
    }
}

extension TakeMetadata {
    /// BWF's TimeReference: the take's first frame as samples since local midnight at `rate`.
    /// - Thread: any; never blocks.
    public func timeReference(rate: Int) -> UInt64 {
        UInt64(max(0, (LocalTimeOfDay(startDate).secondsSinceMidnight * Double(rate)).rounded(.down)))
    }
}

/// The `metadata` config section: a machine's ``FileIdentity``.
public struct MetadataSettings: SettingsGroup, Hashable {
    public static let originator = Setting<String>("originator", default: "Tapedeck",
        help: "BWF Originator: who made the recording (32 characters are kept there).")
    public static let organization = Setting<String>("organization", help: "ORGANIZATION tag of every take. Empty: none.")
    public static let location = Setting<String>("location", help: "LOCATION tag of every take. Empty: none.")
    public static let project = Setting<String>("project", help: "iXML PROJECT. Empty: the session's name.")
    public static let tape = Setting<String>("tape", help: "iXML TAPE (the roll or card). Empty: the machine's name.")
    public static let user = Setting<String>("user",
        help: "More iXML USER lines, as NAME=value pairs separated by commas, e.g. \"MIXER=Ana, ROOM=B\".")
    public static let declarations = [originator.declaration, organization.declaration, location.declaration,
                                      project.declaration, tape.declaration, user.declaration]

    public var identity: FileIdentity

    public init(_ settings: PluginSettings) {
        func nonEmpty(_ s: String) -> String? {
            let t = s.trimmingCharacters(in: .whitespaces)
            return t.isEmpty ? nil : t
        }
        var user: [String: String] = [:]
        for pair in settings[Self.user].split(separator: ",") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard let name = parts.first.map({ $0.trimmingCharacters(in: .whitespaces) }), !name.isEmpty else { continue }
            user[name] = parts.count > 1 ? parts[1].trimmingCharacters(in: .whitespaces) : ""
        }
        identity = FileIdentity(originator: nonEmpty(settings[Self.originator]) ?? "Tapedeck",
                                organization: nonEmpty(settings[Self.organization]), location: nonEmpty(settings[Self.location]),
                                project: nonEmpty(settings[Self.project]), tape: nonEmpty(settings[Self.tape]), user: user)
    }
}

/// What a Broadcast Wave file says of itself: its `bext` fields and its iXML's top-level values,
/// as read back from the file (Tapedeck's own, or an imported one's). A plain value; any thread.
public struct BroadcastFacts: Sendable, Hashable {
    public var description: String
    public var originator: String
    public var originatorReference: String
    /// `2026-11-26` and `05:31:27`, as the file has them (local time).
    public var originationDate: String
    public var originationTime: String
    /// Samples since midnight of the first frame, at the file's rate.
    public var timeReference: UInt64
    /// The bext version (2 has loudness fields).
    public var version: Int
    public var codingHistory: String
    /// iXML's top-level values (PROJECT, SCENE, TAKE, TAPE, NOTE, …), by name; empty without iXML.
    public var ixml: [String: String]

    public init(description: String, originator: String, originatorReference: String, originationDate: String, originationTime: String,
                timeReference: UInt64, version: Int, codingHistory: String, ixml: [String: String]) {
        self.description = description
        self.originator = originator
        self.originatorReference = originatorReference
        self.originationDate = originationDate
        self.originationTime = originationTime
        self.timeReference = timeReference
        self.version = version
        self.codingHistory = codingHistory
        self.ixml = ixml
    }
}
