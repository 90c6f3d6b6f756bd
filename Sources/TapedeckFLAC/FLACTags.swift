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
/// empty), `ENCODER` (`Tapedeck <version> (libFLAC <version>)`) and, for more than two channels
/// or a layout other than the conventional mono or stereo, `WAVEFORMATEXTENSIBLE_CHANNEL_MASK`
/// (`0x003F`, as the `flac` tool writes it: without it ffmpeg takes 6 channels as side
/// surrounds, not the back surrounds FLAC's own convention names). libFLAC adds its own vendor
/// string, which is not a tag. Thread: any; allocates the blocks, does not block.
enum FLACTags {
    /// `Tapedeck 0.2.0 (libFLAC 1.4.2)`.
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
    static func fields(for metadata: TakeMetadata, layout: ChannelLayout, channels: Int) -> [(String, String)] {
        var fields = metadata.commentFields.filter { $0.0 != FLACHeader.channelMaskTag }
        if !fields.contains(where: { $0.0 == "ENCODER" }) { fields.append(("ENCODER", encoderTag)) }
        // The machine's identity is known when the file is made (the time of day and loudness
        // are not: exports and `tapedeck loudness` add them).
        for (name, value) in [("ORGANIZATION", metadata.identity.organization), ("LOCATION", metadata.identity.location)] {
            if let value, !value.isEmpty, !fields.contains(where: { $0.0 == name }) { fields.append((name, value)) }
        }
        if channels > 2 || layout != .conventional(channels: channels) {
            let hex = String(layout.mask, radix: 16, uppercase: true)
            fields.append((FLACHeader.channelMaskTag, "0x" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex))
        }
        return fields
    }

    /// New VORBIS_COMMENT and (if `paddingBytes` > 0) PADDING blocks; the caller deletes them with
    /// `FLAC__metadata_object_delete` after the encoder is finished or deleted.
    static func blocks(for metadata: TakeMetadata, layout: ChannelLayout, channels: Int, paddingBytes: Int) throws -> [UnsafeMutablePointer<FLAC__StreamMetadata>?] {
        guard let comment = FLAC__metadata_object_new(FLAC__METADATA_TYPE_VORBIS_COMMENT) else {
            throw TapedeckError(.io, "Could not prepare FLAC tags: out of memory.")
        }
        var blocks: [UnsafeMutablePointer<FLAC__StreamMetadata>?] = [comment]
        for (name, value) in fields(for: metadata, layout: layout, channels: channels) {
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
