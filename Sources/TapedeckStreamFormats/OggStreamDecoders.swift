import COpus
import CStreamCodecs
package import TapedeckCore

/// Ogg Opus through libopusfile, reading the stream through callbacks that cannot seek (a live
/// stream): chained streams (a source that reconnected to the server) go on as one. Always
/// 48 kHz; the channel count is the first link's (a later link with another count is mixed to it).
package final class OpusStreamDecoder: StreamDecoder {
    package let codec = "Ogg Opus"
    package let sampleRate = 48_000
    package let channels: Int
    package var nativeFormat: SampleFormat? { nil }
    private let bytes: StreamBytes
    private let file: OpaquePointer
    private var scratch: [Float] = []
    private var link: Int32 = -1
    private var newTitle: String?

    package init(_ bytes: StreamBytes) throws {
        self.bytes = bytes
        var callbacks = OpusFileCallbacks(
            read: { stream, ptr, count in
                guard let stream, let ptr, count > 0 else { return 0 }
                return Int32(Unmanaged<StreamBytes>.fromOpaque(stream).takeUnretainedValue().read(into: ptr, count: Int(count)))
            }, seek: nil, tell: nil, close: nil)
        var error: Int32 = 0
        guard let file = op_open_callbacks(Unmanaged.passUnretained(bytes).toOpaque(), &callbacks, nil, 0, &error) else {
            throw bytes.end ?? StreamEnd(reason: "sent an Ogg Opus stream libopusfile cannot read (error \(error))")
        }
        self.file = file
        channels = Int(op_channel_count(file, -1))
    }

    package func takeTitle() -> String? {
        defer { newTitle = nil }
        return newTitle
    }

    /// Notes the title of a link the last read began.
    private func noteLink() {
        let current = op_current_link(file)
        guard current != link, let tags = op_tags(file, current) else { return }
        link = current
        func tag(_ name: String) -> String? { opus_tags_query(tags, name, 0).map { String(cString: $0) } }
        newTitle = StreamTitle.label(artist: tag("ARTIST"), title: tag("TITLE"))
    }

    package func decode(into buffer: UnsafeMutablePointer<Float>, maxFrames: Int) -> Int {
        defer { noteLink() }
        while true {
            let link = op_current_link(file)
            let linkChannels = Int(op_channel_count(file, link))
            if linkChannels == channels {
                let n = op_read_float(file, buffer, Int32(maxFrames * channels), nil)
                if n == OP_HOLE { continue }  // a gap in the pages: decoding goes on after it
                if n < 0 { bytes.fail("sent Ogg Opus data libopusfile cannot decode (error \(n))") }
                return max(0, Int(n))
            }
            if scratch.count < maxFrames * linkChannels { scratch = [Float](repeating: 0, count: maxFrames * linkChannels) }
            let n = scratch.withUnsafeMutableBufferPointer { op_read_float(file, $0.baseAddress, Int32(maxFrames * linkChannels), nil) }
            if n == OP_HOLE { continue }
            if n <= 0 {
                if n < 0 { bytes.fail("sent Ogg Opus data libopusfile cannot decode (error \(n))") }
                return 0
            }
            scratch.withUnsafeBufferPointer { ChannelMix.mix($0.baseAddress!, channels: linkChannels, into: buffer, channels: channels, frames: Int(n)) }
            return Int(n)
        }
    }

    package func close() { op_free(file) }
}

/// Ogg Vorbis through libvorbisfile, reading through callbacks that cannot seek. A chained
/// stream whose later link has another rate ends the stream (it cannot go on in one take).
package final class VorbisStreamDecoder: StreamDecoder {
    package let codec = "Ogg Vorbis"
    package let sampleRate: Int
    package let channels: Int
    package var nativeFormat: SampleFormat? { nil }
    private let bytes: StreamBytes
    private let file: UnsafeMutablePointer<OggVorbis_File>
    private var link: Int32 = -1
    private var newTitle: String?

    package func takeTitle() -> String? {
        defer { newTitle = nil }
        return newTitle
    }

    package init(_ bytes: StreamBytes) throws {
        self.bytes = bytes
        file = .allocate(capacity: 1)
        let callbacks = ov_callbacks(
            read_func: { ptr, size, count, source in
                guard let ptr, let source, size > 0 else { return 0 }
                let n = Unmanaged<StreamBytes>.fromOpaque(source).takeUnretainedValue().read(into: ptr, count: size * count)
                return n / size
            }, seek_func: nil, close_func: nil, tell_func: nil)
        let result = ov_open_callbacks(Unmanaged.passUnretained(bytes).toOpaque(), file, nil, 0, callbacks)
        guard result == 0, let info = ov_info(file, -1) else {
            if result == 0 { ov_clear(file) }
            file.deallocate()
            throw bytes.end ?? StreamEnd(reason: "sent an Ogg Vorbis stream libvorbisfile cannot read (error \(result))")
        }
        sampleRate = Int(info.pointee.rate)
        channels = Int(info.pointee.channels)
    }

    package func decode(into buffer: UnsafeMutablePointer<Float>, maxFrames: Int) -> Int {
        while true {
            var planes: UnsafeMutablePointer<UnsafeMutablePointer<Float>?>?
            var link: Int32 = 0
            let n = ov_read_float(file, &planes, Int32(maxFrames), &link)
            if n == OV_HOLE { continue }
            if n < 0 {
                bytes.fail("sent Ogg Vorbis data libvorbisfile cannot decode (error \(n))")
                return 0
            }
            if n == 0 { return 0 }
            if link != self.link, let comments = ov_comment(file, link) {
                self.link = link
                func tag(_ name: String) -> String? { vorbis_comment_query(comments, name, 0).map { String(cString: $0) } }
                newTitle = StreamTitle.label(artist: tag("ARTIST"), title: tag("TITLE"))
            }
            guard let info = ov_info(file, -1), let planes else { return 0 }
            let linkChannels = Int(info.pointee.channels)
            if Int(info.pointee.rate) != sampleRate {
                bytes.fail("changed its rate from \(sampleRate) Hz to \(info.pointee.rate) Hz")
                return 0
            }
            for c in 0..<channels {
                let plane = planes[min(c, linkChannels - 1)]!
                for f in 0..<Int(n) { buffer[f * channels + c] = plane[f] }
            }
            return Int(n)
        }
    }

    package func close() {
        ov_clear(file)
        file.deallocate()
    }
}

/// Maps one channel count onto another: the same count is copied, mono is spread to every
/// channel, several channels to mono are averaged, and otherwise channels are taken in order
/// (missing ones silent). Any thread; never allocates.
package enum ChannelMix {
    package static func mix(_ input: UnsafePointer<Float>, channels from: Int, into output: UnsafeMutablePointer<Float>, channels to: Int, frames: Int) {
        if from == to {
            output.update(from: input, count: frames * to)
            return
        }
        for f in 0..<frames {
            let src = input + f * from
            let dst = output + f * to
            if from == to {
                for c in 0..<to { dst[c] = src[c] }
            } else if from == 1 {
                for c in 0..<to { dst[c] = src[0] }
            } else if to == 1 {
                var sum: Float = 0
                for c in 0..<from { sum += src[c] }
                dst[0] = sum / Float(from)
            } else {
                for c in 0..<to { dst[c] = c < from ? src[c] : 0 }
            }
        }
    }
}
