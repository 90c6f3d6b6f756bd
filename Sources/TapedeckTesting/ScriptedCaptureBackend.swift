public import TapedeckCore
import Foundation

/// A capture backend that follows a script, for testing what consumes capture streams.
///
/// Each read returns the next step: frames (filled by a closure of the frame position), a
/// device xrun, or a failure. After the script, reads return silence-free frames forever from
/// `fill` unless the script ends with `.fail`.
public struct ScriptedCaptureBackend: CaptureBackend {
    public enum Step: Sendable, Hashable {
        /// Deliver this many frames.
        case frames(Int)
        /// The device lost this many frames before the next delivery.
        case xrun(lost: Int64)
        /// Reads throw `.deviceLost` from here on.
        case fail
    }

    public let name = "scripted"
    public var script: [Step]
    public var realTime: Bool
    /// Writes the frames starting at a timeline position into a buffer.
    public var fill: @Sendable (UnsafeMutableRawPointer, _ startFrame: Int64, _ frames: Int, AudioFormat) -> Void

    public init(script: [Step], realTime: Bool = false,
                fill: @escaping @Sendable (UnsafeMutableRawPointer, Int64, Int, AudioFormat) -> Void = TestSignal.counter) {
        self.script = script
        self.realTime = realTime
        self.fill = fill
    }

    public func devices() throws -> [AudioDevice] {
        [AudioDevice(name: "scripted", description: "Scripted test capture", canCapture: true, canPlay: false, isDefault: true)]
    }

    public func openCaptureStream(format: AudioFormat, options: CaptureOptions) throws -> any CaptureStream {
        try format.validate()
        return Stream(format: format, periodFrames: options.periodFrames, script: script, realTime: realTime, fill: fill)
    }

    final class Stream: CaptureStream {
        let format: AudioFormat
        let periodFrames: Int
        var script: [Step]
        let isRealTime: Bool
        let fill: @Sendable (UnsafeMutableRawPointer, Int64, Int, AudioFormat) -> Void
        var position: Int64 = 0
        var index = 0
        var remainingInStep = 0

        init(format: AudioFormat, periodFrames: Int, script: [Step], realTime: Bool,
             fill: @escaping @Sendable (UnsafeMutableRawPointer, Int64, Int, AudioFormat) -> Void) {
            self.format = format
            self.periodFrames = periodFrames
            self.script = script
            self.isRealTime = realTime
            self.fill = fill
        }

        func read(into buffer: UnsafeMutableRawPointer, maxFrames: Int) throws -> CaptureRead {
            var lost: Int64 = 0
            while remainingInStep == 0 {
                guard index < script.count else {
                    throw TapedeckError(.deviceLost, "The scripted capture ran out of script.")
                }
                switch script[index] {
                case .frames(let n): remainingInStep = n
                case .xrun(let l): lost += l
                case .fail: throw TapedeckError(.deviceLost, "The scripted capture device failed (scripted).")
                }
                index += 1
            }
            position += lost
            let n = min(maxFrames, periodFrames, remainingInStep)
            fill(buffer, position, n, format)
            position += Int64(n)
            remainingInStep -= n
            return CaptureRead(frames: n, lostFramesBefore: lost)
        }

        func drain(into buffer: UnsafeMutableRawPointer, maxFrames: Int) throws -> CaptureRead { CaptureRead(frames: 0) }
        func close() {}
    }
}

/// Signal helpers shared by the test doubles.
public enum TestSignal {
    /// The frame counter: sample `k = frame * channels + channel`, wrapped to the sample width
    /// (the same pattern as the null backend's `counter` signal).
    public static func counter(_ buffer: UnsafeMutableRawPointer, _ start: Int64, _ frames: Int, _ format: AudioFormat) {
        let ch = format.channels
        for i in 0..<(frames * ch) {
            let k = (start * Int64(ch)) &+ Int64(i)
            switch format.sampleFormat {
            case .s16: buffer.storeBytes(of: Int16(truncatingIfNeeded: k).littleEndian, toByteOffset: i * 2, as: Int16.self)
            case .s24: Sample24.store(Int32(truncatingIfNeeded: k), buffer, index: i)
            case .s32: buffer.storeBytes(of: Int32(truncatingIfNeeded: k).littleEndian, toByteOffset: i * 4, as: Int32.self)
            case .f32: buffer.storeBytes(of: (Float(k & 0xFF_FFFF) / Float(1 << 24)).bitPattern.littleEndian, toByteOffset: i * 4, as: UInt32.self)
            }
        }
    }

    /// Checks that `data` (interleaved frames in `format`) is the counter pattern from `startFrame`.
    /// - Returns: the index of the first wrong sample, or `nil` when all are right.
    public static func firstCounterMismatch(in data: [UInt8], format: AudioFormat, startFrame: Int64 = 0) -> Int? {
        let frames = data.count / format.bytesPerFrame
        var expected = [UInt8](repeating: 0, count: frames * format.bytesPerFrame)
        expected.withUnsafeMutableBytes { counter($0.baseAddress!, startFrame, frames, format) }
        return zip(data, expected).enumerated().first { $0.element.0 != $0.element.1 }.map { $0.offset / format.sampleFormat.bytesPerSample }
    }
}
