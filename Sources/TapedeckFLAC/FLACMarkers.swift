import CFLAC
import Foundation
import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

/// Markers in a FLAC file, as Vorbis comment chapters: `CHAPTER001=00:01:23.456` and, for a label,
/// `CHAPTER001NAME=…` — the chapter convention of Vorbis comments, which keeps labels and any
/// number of markers (to 999), read by metaflac and by ffmpeg into chapters. A CUESHEET block was
/// the other choice: sample-exact, but it has no place for labels, allows at most 99 tracks on a
/// CD-DA sheet and means tracks to every reader; the catalog keeps each marker's exact frame, and
/// the comment's millisecond is finer than the period a marker is set to. The comments are
/// written into the file's padding with libFLAC's metadata interface (the whole file is rewritten
/// only if the padding is too small), then the file is synced. Plain functions; any thread; block
/// on disk I/O.
enum FLACMarkers {
    /// `HH:MM:SS.mmm` of `frame` at `rate`.
    static func time(_ frame: Int64, rate: Int) -> String {
        let ms = frame * 1000 / Int64(max(rate, 1))
        return "\(zeroPadded(Int(ms / 3_600_000), width: 2)):\(zeroPadded(Int(ms / 60_000 % 60), width: 2)):"
            + "\(zeroPadded(Int(ms / 1000 % 60), width: 2)).\(zeroPadded(Int(ms % 1000), width: 3))"
    }

    /// Replaces the file's CHAPTERnnn comments with `markers`.
    static func write(_ markers: [TakeMarker], toFileAt path: String) throws {
        try FLACComments.edit(path, purpose: "its markers", removing: { name in
            name.hasPrefix("CHAPTER") && name.dropFirst(7).prefix(3).allSatisfy(\.isNumber)
        }, adding: { rate in
            markers.prefix(TakeMarker.maxCount).enumerated().flatMap { n, m -> [(String, String)] in
                let key = "CHAPTER\(zeroPadded(n + 1, width: 3))"
                return [(key, time(m.frame, rate: rate))] + (m.label.isEmpty ? [] : [(key + "NAME", m.label)])
            }
        })
    }
}

/// Changes a finished FLAC file's Vorbis comments with libFLAC's metadata interface: into its
/// padding (the whole file is rewritten only if the padding is too small), then syncs. Plain
/// functions; any thread; block on disk I/O.
enum FLACComments {
    /// Removes the comments whose upper-case name `removing` picks, then appends what `adding`
    /// makes (it is given the stream's sample rate).
    static func edit(_ path: String, purpose: String, removing: (String) -> Bool, adding: (Int) -> [(String, String)]) throws {
        guard let chain = FLAC__metadata_chain_new() else { throw TapedeckError(.io, "Out of memory reading \(path).") }
        defer { FLAC__metadata_chain_delete(chain) }
        func failure(_ action: String) -> TapedeckError {
            let status = FLAC__metadata_chain_status(chain)
            return TapedeckError(.io, "Could not \(action) \(path) to write \(purpose) (libFLAC metadata status \(status.rawValue)).")
        }
        guard FLAC__metadata_chain_read(chain, path) != 0 else { throw failure("read") }
        guard let iterator = FLAC__metadata_iterator_new() else { throw TapedeckError(.io, "Out of memory reading \(path).") }
        defer { FLAC__metadata_iterator_delete(iterator) }
        FLAC__metadata_iterator_init(iterator, chain)
        var rate = 48_000
        var comments: UnsafeMutablePointer<FLAC__StreamMetadata>?
        repeat {
            guard let block = FLAC__metadata_iterator_get_block(iterator) else { continue }
            if block.pointee.type == FLAC__METADATA_TYPE_STREAMINFO { rate = Int(block.pointee.data.stream_info.sample_rate) }
            if block.pointee.type == FLAC__METADATA_TYPE_VORBIS_COMMENT { comments = block }
        } while FLAC__metadata_iterator_next(iterator) != 0
        if comments == nil {
            guard let block = FLAC__metadata_object_new(FLAC__METADATA_TYPE_VORBIS_COMMENT) else { throw TapedeckError(.io, "Out of memory.") }
            FLAC__metadata_iterator_init(iterator, chain)
            guard FLAC__metadata_iterator_insert_block_after(iterator, block) != 0 else {
                FLAC__metadata_object_delete(block)
                throw failure("extend")
            }
            comments = block
        }
        guard let comments else { return }
        var i = Int(comments.pointee.data.vorbis_comment.num_comments) - 1
        while i >= 0 {
            let entry = comments.pointee.data.vorbis_comment.comments[i]
            let text = String(decoding: UnsafeBufferPointer(start: entry.entry, count: Int(entry.length)), as: UTF8.self)
            let name = String(text.prefix { $0 != "=" }).uppercased()
            if removing(name) { _ = FLAC__metadata_object_vorbiscomment_delete_comment(comments, UInt32(i)) }
            i -= 1
        }
        for (name, value) in adding(rate) {
            var entry = FLAC__StreamMetadata_VorbisComment_Entry()
            let clean = value.replacingOccurrences(of: "\0", with: "")
            guard FLAC__metadata_object_vorbiscomment_entry_from_name_value_pair(&entry, name, clean) != 0,
                  FLAC__metadata_object_vorbiscomment_append_comment(comments, entry, 0) != 0 else {
                throw TapedeckError(.io, "Could not add the tag \(name) to \(path).")
            }
        }
        FLAC__metadata_chain_sort_padding(chain)
        guard FLAC__metadata_chain_write(chain, 1, 0) != 0 else { throw failure("rewrite") }
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { throw TapedeckError.system(errno, while: "open \(path) to sync it") }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw TapedeckError.system(errno, while: "sync \(path)") }
    }

    /// The tags ``FLACEncoder/writeFacts(_:toFileAt:)`` owns: written from the metadata, replaced
    /// when written again.
    static let factNames: Set<String> = ["TIME_REFERENCE", "ORGANIZATION", "LOCATION", "REPLAYGAIN_TRACK_GAIN", "REPLAYGAIN_TRACK_PEAK",
                                         "REPLAYGAIN_REFERENCE_LOUDNESS", "R128_TRACK_GAIN", "LOUDNESS_RANGE"]

    /// TIME_REFERENCE (samples since local midnight, as BWF-aware tools read it from FLAC),
    /// ORGANIZATION and LOCATION (when configured), and the loudness: ReplayGain 2.0 track gain
    /// (to −18 LUFS) and true peak (linear), R128_TRACK_GAIN (Q7.8 dB to −23 LUFS, as Opus
    /// defines it) and LOUDNESS_RANGE.
    static func facts(_ m: TakeMetadata, rate: Int) -> [(String, String)] {
        var fields: [(String, String)] = [("TIME_REFERENCE", String(m.timeReference(rate: rate)))]
        // The take's own tag (`tapedeck tag`, `export --tag`) over the machine's.
        let tags = Dictionary(m.tags.map { ($0.key.uppercased(), $0.value) }) { _, last in last }
        if let o = tags["ORGANIZATION"] ?? m.identity.organization, !o.isEmpty { fields.append(("ORGANIZATION", o)) }
        if let l = tags["LOCATION"] ?? m.identity.location, !l.isEmpty { fields.append(("LOCATION", l)) }
        if let l = m.loudness {
            if let gain = l.replayGain {
                fields.append(("REPLAYGAIN_TRACK_GAIN", decimal(gain, places: 2) + " dB"))
                fields.append(("REPLAYGAIN_REFERENCE_LOUDNESS", "-18.00 LUFS"))
                fields.append(("R128_TRACK_GAIN", String(Int(((-23 - (l.integrated ?? -23)) * 256).rounded()))))
            }
            if let peak = l.truePeak { fields.append(("REPLAYGAIN_TRACK_PEAK", decimal(pow(10, peak / 20), places: 6))) }
            fields.append(("LOUDNESS_RANGE", decimal(l.range, places: 2) + " LU"))
        }
        return fields
    }

    /// `value` with `places` decimals, without `String(format:)`.
    static func decimal(_ value: Double, places: Int) -> String {
        let scale = pow(10, Double(places))
        let scaled = Int((abs(value) * scale).rounded())
        let sign = value < 0 && scaled != 0 ? "-" : ""
        return "\(sign)\(scaled / Int(scale)).\(zeroPadded(scaled % Int(scale), width: places))"
    }
}
