import Foundation
import TapedeckCore

/// Broadcast Wave metadata: the `bext` chunk (EBU Tech 3285 version 2) and the iXML chunk, made
/// from a take's ``TakeMetadata``. Tapedeck's writer hands both to libsndfile before the first
/// audio, so they stand between `fmt ` and `data` (where recorders and editors expect them), and
/// writes them again in place — same sizes, never moving the audio — when the time of the first
/// frame is known, after every header libsndfile rewrites, at finish and after repair. Plain
/// functions; any thread; those that take a file block on disk I/O.
///
/// `bext`: Description holds `sSCENE=`/`sTAKE=`/`sNOTE=`/`sPROJECT=`/`sTAPE=` lines as the iXML
/// guidelines describe (ASCII; other characters become `?`); Originator the configured name
/// (Tapedeck); OriginatorReference the take's id without dashes (32 characters, unique);
/// OriginationDate/Time the local date and time of the first frame; TimeReference its samples
/// since local midnight; version 2 loudness fields (0x7FFF until measured); CodingHistory an
/// EBU R98 line for the capture (`A=PCM,F=48000,W=24,M=stereo,T=alsa hw:0 on HOST`) and one for
/// the file. iXML: IXML_VERSION, PROJECT, SCENE (take name), TAKE (number), TAPE, NOTE,
/// FILE_UID, SPEED (rates, bit depth, timestamp), TRACK_LIST (a track per channel, named by its
/// speaker), FILE_SET (the run), PRE_RECORD_SAMPLECOUNT, USER; unknown values are left out, and
/// the chunk is padded with spaces after the root element for updates in place.
enum BroadcastWave {
    /// The fixed part of a `bext` chunk, before CodingHistory.
    static let bextFixedSize = 602
    /// Room the iXML chunk keeps for what is learnt later (loudness, a longer note).
    static let ixmlSpare = 2048

    // MARK: bext

    static func bext(_ m: TakeMetadata, format: AudioFormat, size: Int? = nil) -> [UInt8] {
        var b = [UInt8]()
        b.reserveCapacity(size ?? 1024)
        func field(_ text: String, _ width: Int) {
            let bytes = ascii(text).prefix(width)
            b += bytes
            b += [UInt8](repeating: 0, count: width - bytes.count)
        }
        let clock = LocalTimeOfDay(m.startDate)
        field(description(m), 256)
        field(m.identity.originator, 32)
        field(m.takeID.map { $0.replacingOccurrences(of: "-", with: "") } ?? "", 32)
        field(clock.date, 10)
        field(clock.time, 8)
        let reference = m.timeReference(rate: format.sampleRate)
        b += LE.bytes32(UInt32(truncatingIfNeeded: reference)) + LE.bytes32(UInt32(truncatingIfNeeded: reference >> 32))
        b += LE.bytes16(2)  // version 2: loudness fields
        b += [UInt8](repeating: 0, count: 64)  // UMID: none
        func loud(_ v: Double?) -> [UInt8] {
            guard let v, v.isFinite else { return LE.bytes16(0x7FFF) }
            return LE.bytes16(UInt16(bitPattern: Int16(clamping: Int((v * 100).rounded()))))
        }
        let l = m.loudness
        b += loud(l?.integrated) + loud(l?.range) + loud(l?.truePeak) + loud(l?.maxMomentary) + loud(l?.maxShortTerm)
        b += [UInt8](repeating: 0, count: 180)
        var history = ascii(codingHistory(m, format: format))
        if let size {
            history = Array(history.prefix(max(0, size - bextFixedSize)))
            history += [UInt8](repeating: 0, count: max(0, size - bextFixedSize - history.count))
        } else {
            history += [UInt8](repeating: 0, count: (4 - (bextFixedSize + history.count) % 4) % 4)
        }
        return b + history
    }

    /// `sSCENE=…` lines, CR LF ended, within 256 characters (whole lines, but a long note cut with `...`).
    static func description(_ m: TakeMetadata) -> String {
        var lines = ["sSCENE=\(m.takeName)", "sTAKE=\(m.takeNumber)"]
        if let project = m.identity.project ?? nonEmpty(m.sessionName) { lines.append("sPROJECT=\(project)") }
        if let tape = m.identity.tape ?? m.source?.host { lines.append("sTAPE=\(tape)") }
        if !m.notes.isEmpty { lines.append("sNOTE=\(m.notes.replacingOccurrences(of: "\r", with: " ").replacingOccurrences(of: "\n", with: " "))") }
        var text = ""
        for line in lines {
            let next = text + line + "\r\n"
            guard next.utf8.count <= 256 else {
                // A note too long for what is left is cut (iXML's NOTE keeps it whole).
                guard line.hasPrefix("sNOTE="), 256 - text.utf8.count >= "sNOTE=...\r\n".utf8.count + 16 else { break }
                var cut = ""
                for c in line where text.utf8.count + cut.utf8.count + String(c).utf8.count + "...\r\n".utf8.count <= 256 { cut.append(c) }
                text += cut + "...\r\n"
                break
            }
            text = next
        }
        return text
    }

    /// EBU R98 coding history: the capture (when captured) and this file.
    static func codingHistory(_ m: TakeMetadata, format: AudioFormat) -> String {
        let mode = format.channels == 1 ? "mono" : format.channels == 2 ? "stereo" : "multichannel"
        let coding = "A=\(format.sampleFormat.isFloat ? "PCM_FLOAT" : "PCM"),F=\(format.sampleRate),W=\(format.sampleFormat.bitsPerSample),M=\(mode)"
        var lines: [String] = []
        if let s = m.source { lines.append("\(coding),T=\(s.backend) \(s.device) on \(s.host)") }
        lines.append("\(coding),T=Tapedeck \(TapedeckVersion.string)")
        return lines.map { $0 + "\r\n" }.joined()
    }

    // MARK: iXML

    static func ixml(_ m: TakeMetadata, format: AudioFormat, size: Int? = nil) -> [UInt8]? {
        for detail in [Detail.all, .withoutNote, .minimal] {
            let text = Array(ixmlText(m, format: format, detail: detail).utf8)
            guard let size else {
                let total = text.count + ixmlSpare
                return text + [UInt8](repeating: 0x20, count: total + (4 - total % 4) % 4 - text.count)
            }
            if text.count <= size { return text + [UInt8](repeating: 0x20, count: size - text.count) }
        }
        return nil
    }

    enum Detail { case all, withoutNote, minimal }

    static func ixmlText(_ m: TakeMetadata, format: AudioFormat, detail: Detail) -> String {
        var x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<BWFXML>\n"
        func tag(_ name: String, _ value: String?, indent: String = "  ") {
            guard let value, !value.isEmpty else { return }
            x += "\(indent)<\(name)>\(escape(value))</\(name)>\n"
        }
        tag("IXML_VERSION", "2.10")
        tag("PROJECT", m.identity.project ?? nonEmpty(m.sessionName))
        tag("SCENE", m.takeName)
        tag("TAKE", String(m.takeNumber))
        tag("TAPE", m.identity.tape ?? m.source?.host)
        if detail == .all { tag("NOTE", nonEmpty(m.notes)) }
        tag("FILE_UID", m.takeID.map { $0.replacingOccurrences(of: "-", with: "").uppercased() })
        let reference = m.timeReference(rate: format.sampleRate)
        x += "  <SPEED>\n"
        tag("FILE_SAMPLE_RATE", String(format.sampleRate), indent: "    ")
        tag("AUDIO_BIT_DEPTH", String(format.sampleFormat.bitsPerSample), indent: "    ")
        tag("TIMESTAMP_SAMPLES_SINCE_MIDNIGHT_HI", String(reference >> 32), indent: "    ")
        tag("TIMESTAMP_SAMPLES_SINCE_MIDNIGHT_LO", String(reference & 0xFFFF_FFFF), indent: "    ")
        tag("TIMESTAMP_SAMPLE_RATE", String(format.sampleRate), indent: "    ")
        x += "  </SPEED>\n"
        do {
            x += "  <TRACK_LIST>\n"
            tag("TRACK_COUNT", String(format.channels), indent: "    ")
            let speakers = format.layout.speakers
            for c in 0..<format.channels {
                x += "    <TRACK>\n"
                tag("CHANNEL_INDEX", String(c + 1), indent: "      ")
                tag("INTERLEAVE_INDEX", String(c + 1), indent: "      ")
                tag("NAME", c < speakers.count ? speakers[c].abbreviation : "Channel \(c + 1)", indent: "      ")
                x += "    </TRACK>\n"
            }
            x += "  </TRACK_LIST>\n"
        }
        if let run = m.run {
            x += "  <FILE_SET>\n"
            tag("FAMILY_UID", run.id.replacingOccurrences(of: "-", with: "").uppercased(), indent: "    ")
            tag("FILE_SET_INDEX", String(run.index), indent: "    ")
            x += "  </FILE_SET>\n"
        }
        if m.preRollFrames > 0 { tag("PRE_RECORD_SAMPLECOUNT", String(m.preRollFrames)) }
        if detail != .minimal {
            var user: [String] = []
            if let s = m.source { user += ["HOST=\(s.host)", "BACKEND=\(s.backend)", "DEVICE=\(s.device)"] }
            user += m.identity.user.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            tag("USER", user.isEmpty ? nil : user.joined(separator: "\n"))
        }
        x += "</BWFXML>\n"
        return x
    }

    // MARK: in a file

    /// The `bext` and `iXML` chunks between the header and the audio, and with `afterAudio`
    /// also those after it (only for a finished file, whose sizes say where its audio ends: a
    /// file being written may hold more audio than its header says yet).
    static func locate(in file: RawFile, afterAudio: Bool = false) throws -> (bext: WAVHeader.Chunk?, ixml: WAVHeader.Chunk?) {
        let length = try file.length()
        var bext: WAVHeader.Chunk?, ixml: WAVHeader.Chunk?
        func visit(_ head: [UInt8], _ chunk: WAVHeader.Chunk) -> Bool {
            if LE.isID(head, 0, "data") { return false }
            guard chunk.next <= length else { return false }
            if LE.isID(head, 0, "bext"), bext == nil, chunk.size >= UInt32(bextFixedSize) { bext = chunk }
            if LE.isID(head, 0, "iXML"), ixml == nil { ixml = chunk }
            return true
        }
        try WAVHeader.forEachChunk(in: file, from: 12, end: length) { head, chunk in visit(head, chunk) }
        if afterAudio, let header = try? WAVHeader.read(from: file), let audioEnd = header.declaredAudioEnd {
            if audioEnd < length { try WAVHeader.forEachChunk(in: file, from: audioEnd, end: length) { head, chunk in visit(head, chunk) } }
        }
        return (bext, ixml)
    }

    /// Where the loudness fields start in a `bext` payload, and the version field.
    static let loudnessOffset: Int64 = 412
    static let versionOffset: Int64 = 346
    static let referenceOffset: Int64 = 288

    /// Writes `m` into the `bext` and iXML chunks before the audio, in place (same sizes).
    /// A `bext` another program wrote (its OriginatorReference is not this take's id: an imported
    /// file) only gets the loudness fields, and its iXML is left as it is. Does not sync.
    /// - Returns: which of the two chunks the file has before its audio, and whether its `bext`
    ///   is another program's.
    @discardableResult
    static func stamp(_ m: TakeMetadata, format: AudioFormat, in file: RawFile) throws -> (bext: Bool, ixml: Bool, foreign: Bool) {
        let (bext, ixml) = try locate(in: file)
        var ours = true
        if let bext {
            ours = try names(m, bext: bext, in: file)
            if ours {
                try file.write(Self.bext(m, format: format, size: Int(bext.size)), at: bext.payload)
            } else if let l = m.loudness {
                try writeLoudness(l, intoBextAt: bext, in: file)
            }
        }
        if bext == nil, let ixml { ours = try names(m, ixml: ixml, in: file) }
        if ours, let ixml, let bytes = Self.ixml(m, format: format, size: Int(ixml.size)) { try file.write(bytes, at: ixml.payload) }
        return (bext != nil, ixml != nil, !ours)
    }

    /// Whether the iXML `chunk` names the take of `m` (its FILE_UID is the take's id).
    static func names(_ m: TakeMetadata, ixml chunk: WAVHeader.Chunk, in file: RawFile) throws -> Bool {
        let text = String(decoding: try file.read(min(Int(chunk.size), 16_384), at: chunk.payload), as: UTF8.self)
        let uid = m.takeID.map { $0.replacingOccurrences(of: "-", with: "").uppercased() } ?? ""
        return !uid.isEmpty && topLevelValues(text)["FILE_UID"] == uid
    }

    /// Whether the `bext` `chunk` is this take's (its OriginatorReference is the take's id).
    static func names(_ m: TakeMetadata, bext chunk: WAVHeader.Chunk, in file: RawFile) throws -> Bool {
        let reference = try file.read(32, at: chunk.payload + referenceOffset)
        return Array(reference.prefix { $0 != 0 }) == ascii(m.takeID.map { $0.replacingOccurrences(of: "-", with: "") } ?? "")
    }

    /// Writes `l` into the version 2 loudness fields of the `bext` chunk `chunk` (raising its
    /// version to 2 when lower), and nothing else of it. Does not sync.
    static func writeLoudness(_ l: Loudness, intoBextAt chunk: WAVHeader.Chunk, in file: RawFile) throws {
        let version = LE.u16(try file.read(2, at: chunk.payload + versionOffset), 0)
        if version < 2 { try file.write(LE.bytes16(2), at: chunk.payload + versionOffset) }
        let fields = [l.integrated, l.range, l.truePeak, l.maxMomentary, l.maxShortTerm].flatMap { v -> [UInt8] in
            guard let v, v.isFinite else { return LE.bytes16(0x7FFF) }
            return LE.bytes16(UInt16(bitPattern: Int16(clamping: Int((v * 100).rounded()))))
        }
        try file.write(fields, at: chunk.payload + loudnessOffset)
    }

    /// Writes `m` into a finished file. A `bext` it has (before or after its audio, Tapedeck's or
    /// another program's) gets only the loudness, the one fact measured since it was written:
    /// its originator, description, time reference and coding history (the capture source)
    /// stay as they are, and so does an iXML it has. What the file lacks is added after the
    /// audio (where ffmpeg, sox and editors find them too): a `bext`, and an iXML unless the
    /// file is another program's. Every other chunk stays byte for byte (``WAVTail``); a file
    /// whose chunks after the audio Tapedeck cannot account for is left as it was (the error
    /// says so). Syncs.
    static func write(_ m: TakeMetadata, to file: RawFile) throws {
        let format = try WAVHeader.read(from: file).audioFormat(path: file.path)
        let (bext, ixml) = try locate(in: file, afterAudio: true)
        var ours = true
        if let bext { ours = try names(m, bext: bext, in: file) } else if let ixml { ours = try names(m, ixml: ixml, in: file) }
        var tail: [UInt8] = []
        if bext == nil {
            let bytes = Self.bext(m, format: format)
            tail += Array("bext".utf8) + LE.bytes32(UInt32(bytes.count)) + bytes
        }
        // Another program's file keeps its own description: only its loudness fields change.
        if ixml == nil, ours, let bytes = Self.ixml(m, format: format) {
            tail += Array("iXML".utf8) + LE.bytes32(UInt32(bytes.count)) + bytes
        }
        // The tail is walked before anything is written: a file it refuses is left as it was.
        var after: WAVTail?
        if !tail.isEmpty { after = try WAVTail.read(from: file) }
        if let bext, let l = m.loudness { try writeLoudness(l, intoBextAt: bext, in: file) }
        guard let after else {
            try file.sync()
            return
        }
        try after.replace(in: file, with: tail) { head in
            (bext == nil && LE.isID(head, 0, "bext")) || (ixml == nil && LE.isID(head, 0, "iXML"))
        }
    }

    // MARK: reading

    /// The `bext` and iXML chunks anywhere in the file's top-level chunks (before or after the
    /// audio), read with bounds: at most 64 KiB of iXML, and only its top-level elements that
    /// hold text. `nil` without a `bext` chunk. (At most 16 KiB of iXML: Tapedeck's is about 3 KiB.)
    static func read(from file: RawFile) throws -> BroadcastFacts? {
        let length = try file.length()
        guard length >= 12 else { return nil }
        let riff = try file.read(12, at: 0)
        guard LE.isID(riff, 0, "RIFF") || LE.isID(riff, 0, "RF64"), LE.isID(riff, 8, "WAVE") else { return nil }
        var bext: WAVHeader.Chunk?, ixml: WAVHeader.Chunk?
        var dataEnd: Int64?
        if let header = try? WAVHeader.read(from: file) { dataEnd = header.declaredAudioEnd }
        func visit(_ head: [UInt8], _ chunk: WAVHeader.Chunk) -> Bool {
            if LE.isID(head, 0, "bext"), bext == nil, chunk.size >= UInt32(bextFixedSize), chunk.next <= length { bext = chunk }
            if LE.isID(head, 0, "iXML"), ixml == nil, chunk.next <= length { ixml = chunk }
            return !LE.isID(head, 0, "data")
        }
        try WAVHeader.forEachChunk(in: file, from: 12, end: length) { head, chunk in visit(head, chunk) }
        if let dataEnd, dataEnd < length {
            try WAVHeader.forEachChunk(in: file, from: dataEnd, end: length) { head, chunk in visit(head, chunk) }
        }
        guard let bext else { return nil }
        let b = try file.read(min(Int(bext.size), bextFixedSize + 4096), at: bext.payload)
        func text(_ range: Range<Int>) -> String {
            String(decoding: b[range].prefix { $0 != 0 }, as: UTF8.self)
        }
        var values: [String: String] = [:]
        if let ixml {
            let xml = String(decoding: try file.read(min(Int(ixml.size), 16_384), at: ixml.payload), as: UTF8.self)
            values = topLevelValues(xml)
        }
        return BroadcastFacts(description: text(0..<256), originator: text(256..<288), originatorReference: text(288..<320),
                              originationDate: text(320..<330), originationTime: text(330..<338), timeReference: LE.u64(b, 338),
                              version: Int(LE.u16(b, 346)), codingHistory: text(bextFixedSize..<b.count), ixml: values)
    }

    /// `<NAME>text</NAME>` elements directly under `<BWFXML>`, entities decoded; nested ones
    /// (SPEED, TRACK_LIST) are skipped. A scanner, not an XML parser: malformed text yields what
    /// it can and never fails.
    static func topLevelValues(_ xml: String) -> [String: String] {
        guard let root = xml.range(of: "<BWFXML>") else { return [:] }
        var values: [String: String] = [:]
        var rest = xml[root.upperBound...]
        var elements = 0
        while elements < 512, let open = rest.range(of: "<"), let close = rest[open.upperBound...].range(of: ">") {
            elements += 1
            let name = String(rest[open.upperBound..<close.lowerBound])
            guard name.utf8.count <= 64 else {
                rest = rest[close.upperBound...]
                continue
            }
            guard !name.hasPrefix("/"), !name.hasPrefix("?"), !name.hasPrefix("!"), !name.contains(" ") || name.hasSuffix("/") else {
                rest = rest[close.upperBound...]
                if name == "/BWFXML" { break }
                continue
            }
            let body = rest[close.upperBound...]
            guard let end = body.range(of: "</\(name)>") else { rest = body; continue }
            let value = body[..<end.lowerBound]
            if !value.contains("<"), values[name] == nil, values.count < 256 {
                values[name] = String(value).replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
                    .replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&apos;", with: "'")
                    .replacingOccurrences(of: "&amp;", with: "&")
            }
            rest = body[end.upperBound...]
        }
        return values
    }

    // MARK: text

    static func nonEmpty(_ s: String) -> String? { s.isEmpty ? nil : s }

    /// `text` as printable ASCII: accents dropped (`Scène été` is `Scene ete`), other characters
    /// as `?`; CR and LF kept.
    static func ascii(_ text: String) -> [UInt8] {
        text.folding(options: [.diacriticInsensitive, .widthInsensitive], locale: nil).unicodeScalars.map { s in
            (0x20..<0x7F).contains(s.value) || s == "\r" || s == "\n" ? UInt8(s.value) : UInt8(ascii: "?")
        }
    }

    static func escape(_ s: String) -> String {
        var out = ""
        for c in s.unicodeScalars {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "\n", "\t": out.unicodeScalars.append(c)
            default:
                // XML 1.0 has no place for other control characters.
                if c.value >= 0x20 { out.unicodeScalars.append(c) }
            }
        }
        return out
    }
}
