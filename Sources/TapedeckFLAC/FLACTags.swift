import CFLAC
import Foundation
import TapedeckCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The metadata blocks Tapedeck writes after STREAMINFO: one VORBIS_COMMENT with the take's tags
/// and one PADDING block.
///
/// Tags, and only these: `TITLE` (take name), `ALBUM` (session name), `TRACKNUMBER`, `DATE`
/// (ISO 8601 in UTC, e.g. `2026-11-21T10:23:28Z`), `DESCRIPTION` (only when the notes are not
/// empty) and `ENCODER` (`Tapedeck <version> (libFLAC <version>)`). libFLAC adds its own vendor
/// string, which is not a tag. Thread: any; allocates the blocks, does not block.
enum FLACTags {
    /// `Tapedeck 0.1.0 (libFLAC 1.4.2)`.
    static var encoderTag: String {
        "Tapedeck \(TapedeckVersion.string) (libFLAC \(libFLACVersion))"
    }

    /// libFLAC's `FLAC__VERSION_STRING`, looked up with `dlsym`: the C global is a mutable
    /// pointer, which Swift 6 refuses to read directly, though libFLAC never changes it.
    static let libFLACVersion: String = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "FLAC__VERSION_STRING"),
              let text = symbol.load(as: UnsafePointer<CChar>?.self) else { return "unknown" }
        return String(cString: text)
    }()

    /// The (name, value) pairs for `metadata`, in file order.
    static func fields(for metadata: TakeMetadata) -> [(String, String)] {
        var fields = metadata.commentFields
        if !fields.contains(where: { $0.0 == "ENCODER" }) { fields.append(("ENCODER", encoderTag)) }
        return fields
    }

    /// New VORBIS_COMMENT and (if `paddingBytes` > 0) PADDING blocks; the caller deletes them with
    /// `FLAC__metadata_object_delete` after the encoder is finished or deleted.
    static func blocks(for metadata: TakeMetadata, paddingBytes: Int) throws -> [UnsafeMutablePointer<FLAC__StreamMetadata>?] {
        guard let comment = FLAC__metadata_object_new(FLAC__METADATA_TYPE_VORBIS_COMMENT) else {
            throw TapedeckError(.io, "Could not prepare FLAC tags: out of memory.")
        }
        var blocks: [UnsafeMutablePointer<FLAC__StreamMetadata>?] = [comment]
        for (name, value) in fields(for: metadata) {
            var entry = FLAC__StreamMetadata_VorbisComment_Entry()
            // Control characters other than newlines would make the entry invalid; NUL would cut it.
            let clean = value.replacingOccurrences(of: "\0", with: "")
            guard FLAC__metadata_object_vorbiscomment_entry_from_name_value_pair(&entry, name, clean) != 0,
                  FLAC__metadata_object_vorbiscomment_append_comment(comment, entry, 0 /* take ownership */) != 0 else {
                FLAC__metadata_object_delete(comment)
                throw TapedeckError(.io, "Could not store the FLAC tag \(name): libFLAC refused it.")
            }
        }
        if paddingBytes > 0, let padding = FLAC__metadata_object_new(FLAC__METADATA_TYPE_PADDING) {
            padding.pointee.length = UInt32(min(paddingBytes, (1 << 24) - 1))
            blocks.append(padding)
        }
        return blocks
    }
}
