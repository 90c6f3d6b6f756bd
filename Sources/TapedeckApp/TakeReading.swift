import TapedeckCore

extension TakeReader {
    /// Reads to the end in blocks of at most `chunk` frames, handing each block (frames in
    /// ``format``) to `body`; stops between blocks when `partials` is stopped (`.cancelled`).
    /// - Returns: frames read.
    /// - Thread: the reader's owning thread. Blocks on disk I/O.
    func forEachBlock(chunk: Int = 16_384, stoppingWith partials: PartialFiles,
                      _ body: (_ block: UnsafeRawPointer, _ frames: Int) throws -> Void) throws -> Int64 {
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: chunk * format.bytesPerFrame, alignment: 16)
        defer { buffer.deallocate() }
        var frames: Int64 = 0
        while true {
            try partials.checkStopped()
            let n = try read(into: buffer, maxFrames: chunk)
            if n == 0 { return frames }
            try body(buffer, n)
            frames += Int64(n)
        }
    }

    /// ``forEachBlock(chunk:stoppingWith:_:)`` with each block converted to 32-bit float.
    func forEachFloatBlock(chunk: Int = 8192, stoppingWith partials: PartialFiles,
                           _ body: (_ block: UnsafePointer<Float>, _ frames: Int) throws -> Void) throws -> Int64 {
        let floats = UnsafeMutablePointer<Float>.allocate(capacity: chunk * format.channels)
        defer { floats.deallocate() }
        let toFloat = SampleConverter(from: format, to: .f32)
        return try forEachBlock(chunk: chunk, stoppingWith: partials) { block, n in
            toFloat.convert(block, into: UnsafeMutableRawPointer(floats), frames: n)
            try body(floats, n)
        }
    }
}
