public import TapedeckCore
import Synchronization

/// A take writer that keeps everything in memory, shared through a ``MemoryTakeSink``.
public final class MemoryTakeWriter: TakeWriter {
    public let sink: MemoryTakeSink
    let bytesPerFrame: Int

    public init(sink: MemoryTakeSink, format: AudioFormat) {
        self.sink = sink
        self.bytesPerFrame = format.bytesPerFrame
    }

    public func write(_ buffer: UnsafeRawPointer, frames: Int) throws {
        try sink.append(UnsafeRawBufferPointer(start: buffer, count: frames * bytesPerFrame))
    }

    public func checkpoint() throws { sink.note { $0.checkpoints += 1 } }

    public func finish() throws -> Int64 {
        sink.note { $0.finished = true }
        return Int64(sink.bytes.count / bytesPerFrame)
    }

    public func abandon() { sink.note { $0.abandoned = true } }
}

/// What a ``MemoryTakeWriter`` received; readable from any thread.
public final class MemoryTakeSink: Sendable {
    public struct State: Sendable {
        public var bytes: [UInt8] = []
        public var checkpoints = 0
        public var finished = false
        public var abandoned = false
        /// Fail the write that would take the byte count past this.
        public var failAfterBytes: Int?
    }

    private let state = Mutex(State())

    public init(failAfterBytes: Int? = nil) {
        state.withLock { $0.failAfterBytes = failAfterBytes }
    }

    public var bytes: [UInt8] { state.withLock { $0.bytes } }
    public var snapshot: State { state.withLock { $0 } }

    func note(_ body: (inout State) -> Void) { state.withLock { body(&$0) } }

    func append(_ data: UnsafeRawBufferPointer) throws {
        try state.withLock { s in
            if let limit = s.failAfterBytes, s.bytes.count + data.count > limit {
                throw TapedeckError(.diskFull, "The test sink is full (an injected fault).", systemCode: 28)
            }
            s.bytes.append(contentsOf: data)
        }
    }
}

/// A take reader over bytes in memory.
public final class MemoryTakeReader: TakeReader {
    public let format: AudioFormat
    let data: [UInt8]
    var offset = 0

    public init(format: AudioFormat, data: [UInt8]) {
        self.format = format
        self.data = data
    }

    public var frameCount: Int64 { Int64(data.count / format.bytesPerFrame) }

    public func read(into buffer: UnsafeMutableRawPointer, maxFrames: Int) throws -> Int {
        let n = min(maxFrames * format.bytesPerFrame, data.count - offset)
        data.withUnsafeBytes { buffer.copyMemory(from: $0.baseAddress! + offset, byteCount: n) }
        offset += n
        return n / format.bytesPerFrame
    }

    public func close() {}
}

/// Compares large byte sequences without handing them to the test library's diff (which is
/// quadratic on megabyte arrays): `nil` when equal, else where they first differ.
public func firstDifference(_ a: some Collection<UInt8>, _ b: some Collection<UInt8>) -> String? {
    var index = 0
    var i = a.makeIterator(), j = b.makeIterator()
    while true {
        switch (i.next(), j.next()) {
        case (nil, nil): return nil
        case let (x?, y?) where x == y: index += 1
        case let (x, y):
            return "lengths \(a.count) and \(b.count) bytes; first difference at byte \(index): \(x.map(String.init) ?? "end") vs \(y.map(String.init) ?? "end")"
        }
    }
}
