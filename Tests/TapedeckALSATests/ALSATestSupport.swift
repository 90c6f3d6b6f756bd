#if ALSA
import Foundation
import Logging
import Synchronization
import TapedeckCore

/// Runs blocking work on a thread of its own (never on Swift's cooperative pool) and awaits it.
func onThread<T: Sendable>(_ name: String = "alsa-test", _ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { (cont: CheckedContinuation<T, any Error>) in
        let thread = Thread { cont.resume(with: Result { try body() }) }
        thread.name = name
        thread.start()
    }
}

/// Interleaved s16 frames and simple measurements of channel 0.
struct S16Audio {
    var samples: [Int16]
    var channels: Int
    var sampleRate: Int

    init(bytes: [UInt8], channels: Int, sampleRate: Int) {
        samples = stride(from: 0, to: bytes.count - 1, by: 2).map { Int16(bitPattern: UInt16(bytes[$0]) | UInt16(bytes[$0 + 1]) << 8) }
        self.channels = channels
        self.sampleRate = sampleRate
    }

    var frames: Int { samples.count / channels }

    /// Channel 0 from frame `from` for `count` frames, in -1...1.
    func channel0(from: Int, count: Int) -> [Double] {
        (from..<min(frames, from + count)).map { Double(samples[$0 * channels]) / 32768 }
    }

    /// The first frame whose channel-0 magnitude exceeds `threshold`.
    func firstFrame(above threshold: Double) -> Int? {
        (0..<frames).first { abs(Double(samples[$0 * channels])) / 32768 > threshold }
    }
}

/// Frequency from rising zero crossings, and the peak level.
func analyze(_ x: [Double], sampleRate: Int) -> (frequency: Double, peak: Double) {
    var rising: [Int] = []
    for i in 1..<x.count where x[i - 1] < 0 && x[i] >= 0 { rising.append(i) }
    guard let first = rising.first, let last = rising.last, rising.count > 1 else { return (0, x.map(abs).max() ?? 0) }
    let cycles = Double(rising.count - 1)
    return (cycles * Double(sampleRate) / Double(last - first), x.map(abs).max() ?? 0)
}

/// Writes a 1 kHz s16 sine at `level` into a buffer of `frames` frames.
func sine(frames: Int, channels: Int, sampleRate: Int, frequency: Double = 1000, level: Double = 0.5) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: frames * channels * 2)
    for f in 0..<frames {
        let v = Int16((level * sin(2 * Double.pi * frequency * Double(f) / Double(sampleRate)) * 32767).rounded())
        for c in 0..<channels {
            let i = (f * channels + c) * 2
            out[i] = UInt8(truncatingIfNeeded: v)
            out[i + 1] = UInt8(truncatingIfNeeded: v >> 8)
        }
    }
    return out
}

/// A log handler that keeps messages, for checking where ALSA's errors go.
struct CollectingLogHandler: LogHandler {
    final class Store: Sendable {
        let messages = Mutex<[String]>([])
    }
    let store: Store
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        store.messages.withLock { $0.append(event.message.description) }
    }
}
#endif
