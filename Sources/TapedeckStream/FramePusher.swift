import Dispatch
import TapedeckCore
import TapedeckStreamFormats
#if canImport(Glibc)
import Glibc
#endif

/// The callback side of a network source's ring: decoded float frames mixed to the take's
/// channels (``ChannelMix``), converted to its rate when the user chose another
/// (`SampleRateConverter`), and pushed into the ``DeviceRing``, counted as the ring's clock
/// and cycles. A source that can wait (an HTTP stream: its sender waits on TCP) waits for room
/// up to ``roomWaitNanos``; one that cannot (RTP) pushes what fits. Either way what does not
/// fit is a counted hole, never dropped silently.
///
/// Thread: the one producing thread (a stream's decoding thread, RTP's event loop). Allocates only at init.
final class FramePusher {
    /// How long a source that can wait waits for room in a full ring before it drops (and counts) frames.
    static let roomWaitNanos: UInt64 = 2_000_000_000

    let ring: DeviceRing
    let inputChannels: Int
    let channels: Int
    let waitsForRoom: Bool
    private let converter: (any SampleRateConverter)?
    /// Output frames per input frame.
    let rateRatio: Double
    private let chunk: Int
    private var mixed: [Float]
    private var output: [Float]
    private let outputCapacity: Int
    /// Frames in the ring since its start, holes included: where the next frame lands.
    private(set) var pushed: Int64 = 0

    init(ring: DeviceRing, inputChannels: Int, inputRate: Int, format: AudioFormat, converter: (any SampleRateConverter)?,
         waitsForRoom: Bool, chunk: Int = 4096) {
        self.ring = ring
        self.inputChannels = inputChannels
        channels = format.channels
        self.converter = converter
        self.waitsForRoom = waitsForRoom
        self.chunk = chunk
        rateRatio = Double(format.sampleRate) / Double(inputRate)
        mixed = [Float](repeating: 0, count: chunk * format.channels)
        outputCapacity = converter == nil ? chunk : Int(Double(chunk) * rateRatio) + 1024
        output = [Float](repeating: 0, count: outputCapacity * format.channels)
    }

    /// Mixes, converts and pushes `frames` interleaved frames of ``inputChannels``.
    /// - Parameter stopped: asked while waiting for room; true ends the wait.
    /// - Throws: the converter's error.
    func push(_ input: UnsafePointer<Float>, frames: Int, stopped: () -> Bool = { false }) throws {
        var done = 0
        while done < frames {
            let n = min(chunk, frames - done)
            if converter == nil && inputChannels == channels {
                store(input + done * channels, frames: n, stopped: stopped)  // nothing to convert
                done += n
                continue
            }
            mixed.withUnsafeMutableBufferPointer {
                ChannelMix.mix(input + done * inputChannels, channels: inputChannels, into: $0.baseAddress!, channels: channels, frames: n)
            }
            if let converter {
                let out = try mixed.withUnsafeBufferPointer { m in
                    try output.withUnsafeMutableBufferPointer { try converter.process(m.baseAddress!, frames: n, into: $0.baseAddress!, capacity: outputCapacity) }
                }
                output.withUnsafeBufferPointer { store($0.baseAddress!, frames: out, stopped: stopped) }
            } else {
                mixed.withUnsafeBufferPointer { store($0.baseAddress!, frames: n, stopped: stopped) }
            }
            done += n
        }
        ring.setClock(frames: pushed)
        ring.cycle()
    }

    /// `frames` frames (at the input rate) the source never delivered: a hole where they were.
    func lose(_ frames: Int) {
        let out = Int((Double(frames) * rateRatio).rounded())
        guard out > 0 else { return }
        ring.lose(out)
        pushed += Int64(out)
    }

    /// Pushes `frames` output frames, waiting for room when the source can wait.
    private func store(_ source: UnsafePointer<Float>, frames: Int, stopped: () -> Bool) {
        defer { pushed += Int64(frames) }
        guard waitsForRoom else {
            ring.push(source, frames: frames)  // what does not fit is a hole, counted by the ring
            return
        }
        var done = 0
        var waitedSince: UInt64?
        while done < frames && !stopped() && !ring.isClosed {
            let room = ring.capacity - ring.available
            if room > 0 {
                done += ring.push(source + done * channels, frames: min(room, frames - done))
                waitedSince = nil
                continue
            }
            let now = DispatchTime.now().uptimeNanoseconds
            if let since = waitedSince, now - since > Self.roomWaitNanos {
                ring.lose(frames - done)
                return
            }
            if waitedSince == nil { waitedSince = now }
            usleep(2_000)
        }
    }
}
