public import Foundation

/// What a remote holds beside each take's audio, as `MACHINE/SESSION-ID/TAKE-ID.json`: the
/// take's catalog entry, its session, the machine that recorded it and the audio's size and
/// SHA-256. Written last, after the audio is verified: it is the commit marker, and readers
/// trust only takes that have one. Schema-versioned; read as untrusted input. A plain value.
public struct RemoteManifest: Sendable, Hashable, Codable {
    /// The schema this version writes and reads.
    public static let currentSchema = 1
    /// Manifests larger than this are refused unread.
    public static let maximumBytes = 4 * 1024 * 1024

    public var schema: Int
    /// The machine that recorded the take (its `machines:` name, else its host name).
    public var machine: String
    public var session: SessionSummary
    /// The take as the recording machine's catalog holds it (markers, loudness, overruns, notes).
    public var take: Take
    public var audio: Audio
    /// When the manifest was written.
    public var uploaded: Date
    /// The take's first frame's time to the microsecond (``UTCTimestamp``): the manifest's dates
    /// are ISO 8601 to the second, and a time range cut from another machine's takes
    /// (`fleet export`) needs the frame. Absent in manifests written before it was kept; read
    /// into ``take``'s `began`.
    public var firstFrameAt: String?
    /// The Tapedeck version that wrote it.
    public var writer: String
    /// A signed take's chain (`TakeCompanions`: its `TAKEFILE.chain`) as the remote holds it,
    /// `AUDIOKEY.chain`, with its size and SHA-256, which pin the chain's last signed head; absent
    /// for a take that is not signed (and in manifests written before chains were kept).
    public var chain: Audio?

    /// The session a take belongs to, without its takes.
    public struct SessionSummary: Sendable, Hashable, Codable {
        public var id: String
        public var name: String
        public var createdAt: Date

        public init(id: String, name: String, createdAt: Date) {
            self.id = id
            self.name = name
            self.createdAt = createdAt
        }
    }

    /// The audio object: its key under the remote and what it holds.
    public struct Audio: Sendable, Hashable, Codable {
        public var key: String
        public var size: Int64
        public var sha256: String

        public init(key: String, size: Int64, sha256: String) {
            self.key = key
            self.size = size
            self.sha256 = sha256
        }
    }

    public init(machine: String, session: SessionSummary, take: Take, audio: Audio, uploaded: Date) {
        schema = Self.currentSchema
        self.machine = machine
        self.session = session
        self.take = take
        self.audio = audio
        self.uploaded = uploaded
        firstFrameAt = take.began.map(UTCTimestamp.format)
        writer = TapedeckVersion.string
    }

    /// The keys of a take's audio and manifest on a remote:
    /// `MACHINE/SESSION-ID/TAKE-ID.EXT` and `MACHINE/SESSION-ID/TAKE-ID.json`.
    /// - Throws: `.invalidArgument` when the machine name cannot be part of a key.
    /// - Thread: any. Never blocks.
    public static func keys(machine: String, take: Take) throws -> (audio: RemoteKey, manifest: RemoteKey) {
        guard RemoteKey.isValid(machine, segment: true) else {
            throw TapedeckError(.invalidArgument, "The machine name \"\(machine)\" cannot name objects on a remote: use letters, digits, \".\", \"_\" and \"-\". Choose one with --machine NAME (a machines: section of the config file).")
        }
        let ext = (take.file as NSString).pathExtension
        let audioExt = RemoteKey.isValid(ext, segment: true) ? ext.lowercased() : "audio"
        let base = "\(machine)/\(take.sessionID)/\(take.id)"
        return (try RemoteKey(base + "." + (audioExt == "json" ? "audio" : audioExt)), try RemoteKey(base + ".json"))
    }

    /// The manifest as stored: sorted keys, ISO 8601 dates.
    /// - Thread: any. Never blocks.
    public func encoded() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        encoder.dateEncodingStrategy = .iso8601
        return try encoder.encode(self)
    }

    /// Reads a manifest fetched from `key`, checking it as untrusted input: its schema, that its
    /// ids and keys are the ones its own key names, a SHA-256 of 64 hex digits.
    /// - Throws: `.corruptFile` saying what is wrong.
    /// - Thread: any. Never blocks.
    public static func decode(_ data: Data, key: String) throws -> RemoteManifest {
        guard data.count <= maximumBytes else {
            throw TapedeckError(.corruptFile, "The manifest \(key) is larger than \(maximumBytes) bytes; it was not read.")
        }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        var m: RemoteManifest
        do { m = try decoder.decode(RemoteManifest.self, from: data) } catch {
            throw TapedeckError(.corruptFile, "The manifest \(key) is not a Tapedeck manifest (\(Self.reason(error))).")
        }
        guard m.schema == currentSchema else {
            throw TapedeckError(.corruptFile, "The manifest \(key) has schema \(m.schema); this Tapedeck reads schema \(currentSchema). Update Tapedeck on this machine.")
        }
        if let text = m.firstFrameAt {
            // The second the take's own date says, to the microsecond; one that disagrees is not trusted.
            guard let precise = UTCTimestamp.parse(text), m.take.began.map({ abs($0.timeIntervalSince(precise)) < 1 }) ?? true else {
                throw TapedeckError(.corruptFile, "The manifest \(key) gives a firstFrameAt (\(text.prefix(40))) that is not a time, or not its take's.")
            }
            m.take.began = precise
        }
        try checkTake(m, key: key)
        let expected = try? keys(machine: m.machine, take: m.take)
        guard m.take.sessionID == m.session.id, let expected, expected.manifest.rawValue == key,
              expected.audio.rawValue == m.audio.key, m.audio.size >= 0,
              m.audio.sha256.count == 64, m.audio.sha256.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }) else {
            throw TapedeckError(.corruptFile, "The manifest \(key) does not match its own key (machine, session, take or audio key differ), or its SHA-256 is not 64 hex digits.")
        }
        if let chain = m.chain {
            // A chain is its audio's key and `.chain`, nowhere else a manifest could point.
            guard chain.key == m.audio.key + TakeCompanions.suffixes[0], (0...Int64(maximumBytes) * 16).contains(chain.size), chain.sha256.count == 64,
                  chain.sha256.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }) else {
                throw TapedeckError(.corruptFile, "The manifest \(key) names a chain that is not its take's (\(chain.key.prefix(200))), or its size or SHA-256 is not one.")
            }
        }
        return m
    }

    /// The take as a library may hold it: a format Tapedeck records, counts in range, a state
    /// other than `recording` (a take being recorded is never pushed), annotations within their
    /// limits, names without control characters.
    private static func checkTake(_ m: RemoteManifest, key: String) throws {
        func bad(_ what: String) -> TapedeckError {
            TapedeckError(.corruptFile, "The manifest \(key) is not a take Tapedeck pushed: \(TapedeckError.clause(what)).")
        }
        let t = m.take
        do { try t.format.validate() } catch let e as TapedeckError { throw bad(e.message) }
        let maxFrames: Int64 = 1 << 40
        guard (0...maxFrames).contains(t.frames), (1...Int(Int32.max)).contains(t.number), t.clippedSamples >= 0 else {
            throw bad("a frame count, take number or clip count is out of range")
        }
        guard t.state != .recording else { throw bad("its state is recording") }
        guard t.overruns.count <= 1_000_000,
              t.overruns.allSatisfy({ (0...maxFrames).contains($0.frame) && (0...maxFrames).contains($0.frames) }) else {
            throw bad("its overruns are out of range")
        }
        do { try t.annotations.validate() } catch let e as TapedeckError { throw bad(e.message) }
        for name in [t.name, m.session.name, t.encoding] {
            guard !name.isEmpty, name.utf8.count <= 1024, !name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
                throw bad("a name is empty, too long or holds control characters")
            }
        }
        // The names a library accepts, checked as a library checks them (blank names, C1
        // controls): a pull never gets as far as making a session for a take it must refuse.
        for (name, what) in [(t.name, "take"), (m.session.name, "session")] {
            guard (try? NameRules.validate(name, what: what)) != nil else {
                throw bad("its \(what) name is one a library does not accept (blank, or with control characters)")
            }
        }
    }

    private static func reason(_ error: any Error) -> String {
        switch error {
        case DecodingError.keyNotFound(let key, _): "no \(key.stringValue)"
        case DecodingError.typeMismatch(_, let c), DecodingError.valueNotFound(_, let c), DecodingError.dataCorrupted(let c):
            // The path may hold the file's own keys (a tag's name): quoted, never trusted.
            c.codingPath.map(\.stringValue).joined(separator: ".").isEmpty ? "not JSON" : "bad \(ForeignText.printable(c.codingPath.map(\.stringValue).joined(separator: "."), limit: 100))"
        default: "unreadable"
        }
    }
}
