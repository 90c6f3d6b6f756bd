public import Foundation
import TapedeckAssembly
import TapedeckBundleStorage
import TapedeckCore
import TapedeckDirectoryStorage
import TapedeckFLAC
import TapedeckOpus
import TapedeckWAV

/// The parsers that read untrusted bytes, each wrapped as a fuzz target: the bytes go in, and the
/// target checks what Tapedeck promises about any input, not just that nothing crashed.
///
/// - `wav`: a WAV/RF64 file through the header reader (`inspect`), the decoder (libsndfile) and
///   `repair`. A file import would keep byte for byte has a header doctor finds nothing in, and
///   the decoder reads as many frames as it declares. Every frame count claimed fits in the file (for the decoder, which reads any
///   format libsndfile reads, compressed ones too, at most 65 535 frames per byte); `repair` is a fixed point (inspecting
///   the repaired file finds nothing to fix and the same frames).
/// - `flac`: a FLAC file through the decoder (Tapedeck's metadata reader, then libFLAC) and
///   `repair`; repairing twice changes nothing the second time.
/// - `opus`: an Ogg Opus file (what `import` and a killed Opus recording hand over) through the
///   decoder (libopusfile) and `repair` (Tapedeck's Ogg page walk); the same bounds and fixed point.
/// - `manifest`: a bundle's `manifest.json` through the validating codec; what it accepts encodes
///   to a canonical form that decodes and encodes to the same bytes, and what the direct reader
///   reads, `JSONDecoder` reads the same.
/// - `bundle-summary`: a bundle's summary file (`.tapedeck-index/FOLDER`): read or refused, never
///   a trap; what is read writes back to the same bytes.
/// - `config`: a config file through the YAML reader and the configuration loader (problems and
///   resolution for this machine).
/// - `catalog`: a directory library's `catalog.sqlite` (rows of wrong types, impossible values,
///   damaged pages): the library opens, lists and is examined with typed errors only; the
///   rebuild always succeeds and leaves a catalog doctor finds nothing wrong in, holding every
///   entry the rebuild counted.
///
/// - `remote-manifest`: a take's manifest as another machine (or anyone with write access to the
///   bucket) left it on a remote, read as `fleet` reads it, under the key `m/s/t.json`; what it
///   accepts encodes to a manifest that reads back the same.
/// - `stream`, `rtp`: what an HTTP stream or an RTP sender sends, through the ICY demuxer, the
///   stream decoders, SDP, SAP and the jitter buffer (see `StreamFuzzTargets.swift`).
///
/// In every target, refusing the input is a correct answer, but only with Tapedeck's own typed
/// error (a message for the user); any other error, a broken promise, or a crash is a finding.
/// `scripts/fuzz` runs them under libFuzzer with the address sanitizer; the unit tests replay the
/// seeds and every input that once failed.
public enum FuzzTargets {
    /// The targets' names, in the order `scripts/fuzz` runs them.
    public static let names = ["wav", "flac", "opus", "manifest", "bundle-summary", "config", "catalog", "remote-manifest", "stream", "rtp"]

    /// A broken promise found by a target (reported as ``Outcome/broken(_:)``).
    struct Finding: Error, CustomStringConvertible, Sendable {
        var description: String
        init(_ description: String) { self.description = description }
    }

    /// What a target made of an input.
    public enum Outcome: Sendable, Equatable {
        /// Every step read the input.
        case read
        /// A step refused it with Tapedeck's own error: a correct answer.
        case refused
        /// A broken promise.
        case broken(String)
    }

    /// Runs target `name` on `bytes`.
    /// - Parameter scratch: a file the target may create, overwrite and remove (the file-based
    ///   parsers read the bytes from there); one per process.
    /// - Throws: `TapedeckError` `.invalidArgument` for an unknown target name.
    /// - Thread: any; not reentrant for one `scratch`. Blocks on disk I/O.
    public static func run(_ name: String, _ bytes: UnsafeRawBufferPointer, scratch: URL) throws -> Outcome {
        let data = Data(bytes)
        do {
            let read: Bool
            switch name {
            case "wav": read = try wav(data, scratch)
            case "flac": read = try flac(data, scratch)
            case "opus": read = try opus(data, scratch)
            case "manifest": read = try manifest(data)
            case "bundle-summary": read = try bundleSummary(data)
            case "config": read = try config(data)
            case "catalog": read = try catalog(data, scratch)
            case "remote-manifest": read = try remoteManifest(data)
            case "stream": read = try stream(data)
            case "rtp": read = try rtp(data)
            default:
                throw TapedeckError(.invalidArgument, "There is no fuzz target \"\(name)\"; the targets are \(names.joined(separator: ", ")).")
            }
            return read ? .read : .refused
        } catch let finding as Finding {
            return .broken(finding.description)
        }
    }

    // MARK: targets

    static func wav(_ data: Data, _ scratch: URL) throws -> Bool {
        try data.write(to: scratch)
        let size = Int64(data.count)
        let encoder = WAVEncoder()
        let inspectRead = try typed("inspect") {
            if let r = try encoder.inspect(fileAt: scratch) { try fits(r.frames, r.format, size, "inspect") }
        }
        let decodeRead = try typed("decode") {
            // The decoder reads whatever libsndfile reads (import takes AIFF, Ogg, MP3, FLAC…), in
            // its own delivered format, and compressed codecs pack many frames into a byte (an MP3
            // frame count is an estimate): the bound is FLAC's, 65 535 frames in a few bytes.
            let reader = try WAVDecoder().openReader(at: scratch)
            defer { reader.close() }
            let limit = size * 65_535
            if reader.frameCount > limit { throw Finding("the reader claims \(reader.frameCount) frames from a \(size)-byte file") }
            try drain(reader, limit: limit, "the decoder")
        }
        // What `show` reads of an imported file's bext and iXML: read or nothing, never a trap.
        _ = WAVDecoder().broadcastFacts(at: scratch)
        // What import keeps byte for byte, doctor must find nothing to say of.
        let verbatimRead = try typed("verbatim") {
            guard WAVDecoder().storesVerbatim(scratch) != nil else { return }
            guard let check = try encoder.inspect(fileAt: scratch), !check.headerRepaired else {
                throw Finding("import would keep a file byte for byte whose header doctor would repair")
            }
            let reader = try WAVDecoder().openReader(at: scratch)
            defer { reader.close() }
            if reader.format == check.format, reader.frameCount != check.frames {
                throw Finding("import would keep a file whose header says \(check.frames) frames while the decoder reads \(reader.frameCount)")
            }
        }
        let repairRead = try typed("repair") {
            let repaired = try encoder.repair(fileAt: scratch)
            try fits(repaired.frames, repaired.format, size, "repair")
            guard let again = try encoder.inspect(fileAt: scratch) else { throw Finding("inspect cannot read a file repair just wrote") }
            if again.headerRepaired || again.frames != repaired.frames {
                throw Finding("repair is not a fixed point: it left \(repaired.frames) frames, then inspect found \(again.frames) and \(again.headerRepaired ? "a header to repair" : "nothing to repair")")
            }
        }
        return inspectRead && decodeRead && verbatimRead && repairRead
    }

    static func flac(_ data: Data, _ scratch: URL) throws -> Bool {
        // A FLAC frame holds at most 65 535 samples per channel in a few bytes (constant subframes).
        try decodeAndRepair(data, scratch, decoder: FLACDecoder(), encoder: FLACEncoder())
    }

    static func opus(_ data: Data, _ scratch: URL) throws -> Bool {
        // An Opus packet decodes to at most 120 ms (5 760 frames) from a byte or two, well inside
        // FLAC's bound.
        try decodeAndRepair(data, scratch, decoder: OpusEncoder(), encoder: OpusEncoder())
    }

    /// The file through `decoder` (claimed and decoded frames at most 65 535 per byte) and
    /// `encoder`'s repair (within the same bound, and a fixed point: repairing again changes
    /// nothing).
    static func decodeAndRepair(_ data: Data, _ scratch: URL, decoder: some AudioDecoder, encoder: some AudioEncoder) throws -> Bool {
        try data.write(to: scratch)
        let limit = Int64(data.count) * 65_535
        let decodeRead = try typed("decode") {
            let reader = try decoder.openReader(at: scratch)
            defer { reader.close() }
            if reader.frameCount > limit { throw Finding("the reader claims \(reader.frameCount) frames from \(data.count) bytes") }
            try drain(reader, limit: limit, "the decoder")
        }
        let repairRead = try typed("repair") {
            let first = try encoder.repair(fileAt: scratch)
            if first.frames > limit { throw Finding("repair claims \(first.frames) frames from \(data.count) bytes") }
            let second = try encoder.repair(fileAt: scratch)
            if second.headerRepaired || second.frames != first.frames {
                throw Finding("repair is not a fixed point: \(first.frames) frames, then \(second.frames)\(second.headerRepaired ? " and another repair" : "")")
            }
        }
        return decodeRead && repairRead
    }

    static func manifest(_ data: Data) throws -> Bool {
        // The direct reader answers only where JSONDecoder gives the same.
        if let direct = ManifestCodec.directWire(data) {
            guard let foundation = try? ManifestCodec.foundationWire(data) else {
                throw Finding("the direct manifest reader accepts bytes JSONDecoder refuses")
            }
            if foundation != direct { throw Finding("the direct manifest reader reads other values than JSONDecoder") }
        }
        let decoded: Manifest
        do {
            decoded = try ManifestCodec.decode(data)
        } catch is ManifestProblem {
            return false
        } catch {
            throw Finding("the manifest codec threw \(type(of: error)) (\(error)), not a ManifestProblem")
        }
        let canonical = try ManifestCodec.encode(decoded)
        let again: Manifest
        do { again = try ManifestCodec.decode(canonical) } catch {
            throw Finding("the codec refuses a manifest it wrote itself: \(error)")
        }
        if try ManifestCodec.encode(again) != canonical {
            throw Finding("the manifest's canonical form changes when read back")
        }
        return true
    }

    static func bundleSummary(_ data: Data) throws -> Bool {
        guard let summary = BundleSummary.decode([UInt8](data)) else { return false }
        if summary.encoded() != [UInt8](data) { throw Finding("a summary read does not write back to the same bytes") }
        return true
    }

    static func remoteManifest(_ data: Data) throws -> Bool {
        let decoded: RemoteManifest
        do {
            decoded = try RemoteManifest.decode(data, key: "m/s/t.json")
        } catch let error as TapedeckError where error.code == .corruptFile {
            return false
        } catch {
            throw Finding("reading a remote manifest threw \(type(of: error)) (\(error)), not a corrupt-file error")
        }
        let again: RemoteManifest
        do { again = try RemoteManifest.decode(try decoded.encoded(), key: "m/s/t.json") } catch {
            throw Finding("a remote manifest written from one read is refused: \(error)")
        }
        if again != decoded {
            throw Finding("a remote manifest changes when written and read back")
        }
        return true
    }

    static func config(_ data: Data) throws -> Bool {
        guard let text = String(data: data, encoding: .utf8) else { return false } // ConfigFile.load refuses non-UTF-8 first
        return try typed("parse") {
            let file = try ConfigFile.parse(text, name: "fuzz.yaml")
            let loader = ConfigurationLoader(catalog: .builtIn, environment: [:], hostName: "fuzz-host")
            _ = loader.problems(file: file, flags: [:], machine: nil)
            _ = try loader.resolve(file: file, flags: [:], machine: nil)
        }
    }

    static func catalog(_ data: Data, _ scratch: URL) throws -> Bool {
        let library = scratch.appendingPathExtension("library")
        try? FileManager.default.removeItem(at: library)
        try FileManager.default.createDirectory(at: library.appendingPathComponent("sessions"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: library) }
        try data.write(to: library.appendingPathComponent("catalog.sqlite"))
        var read = false
        let opened = try typed("open") {
            let storage = try DirectoryStorage(rootURL: library, busyTimeout: 1)
            read = try typed("list") { _ = try storage.sessions() }
            read = try typed("examine") { _ = try storage.damagedParts() } && read
            let report: CatalogRebuild
            do {
                report = try storage.rebuildCatalog { _ in nil }
            } catch {
                throw Finding("the rebuild failed: \(error)")
            }
            let fresh = try DirectoryStorage(rootURL: library, busyTimeout: 1)
            let parts = try fresh.damagedParts()
            if !parts.isEmpty { throw Finding("the rebuilt catalog is damaged: \(parts.map(\.problem))") }
            let sessions = try fresh.sessions()
            let takes = sessions.reduce(0) { $0 + $1.takes.count }
            if sessions.count != report.salvagedSessions + report.rebuiltSessions || takes != report.salvagedTakes + report.rebuiltTakes {
                throw Finding("the rebuilt catalog lists \(sessions.count) sessions and \(takes) takes, not the \(report.salvagedSessions)+\(report.rebuiltSessions) and \(report.salvagedTakes)+\(report.rebuiltTakes) it made")
            }
        }
        return opened && read
    }

    // MARK: promises

    /// Runs `body`; a `TapedeckError` is a correct refusal, any other error a finding.
    /// - Returns: whether `body` read the input (false: refused).
    @discardableResult
    static func typed(_ step: String, _ body: () throws -> Void) throws -> Bool {
        do {
            try body()
            return true
        } catch is TapedeckError {
            return false
        } catch let finding as Finding {
            throw finding
        } catch {
            throw Finding("\(step) threw \(type(of: error)) (\(error)), not a TapedeckError")
        }
    }

    static func fits(_ frames: Int64, _ format: AudioFormat, _ size: Int64, _ who: String) throws {
        let bytes = frames.multipliedReportingOverflow(by: Int64(format.bytesPerFrame))
        if frames < 0 || bytes.overflow || bytes.partialValue > size {
            throw Finding("\(who) claims \(frames) frames of \(format.bytesPerFrame) bytes from a \(size)-byte file")
        }
    }

    /// Reads everything `reader` gives, failing past `limit` frames.
    static func drain(_ reader: any TakeReader, limit: Int64, _ who: String) throws {
        let frameBytes = max(1, reader.format.bytesPerFrame)
        let chunk = max(1, (64 << 10) / frameBytes)
        var buffer = [UInt8](repeating: 0, count: chunk * frameBytes)
        var total: Int64 = 0
        while true {
            let n = try buffer.withUnsafeMutableBytes { try reader.read(into: $0.baseAddress!, maxFrames: chunk) }
            if n == 0 { return }
            total += Int64(n)
            if total > limit { throw Finding("\(who) gave more than \(limit) frames") }
        }
    }
}
