import Foundation
import TapedeckCore
@testable import TapedeckFLAC

/// Helpers shared by the FLAC tests.
enum FLACTestSupport {
    static let metadata = TakeMetadata(takeName: "Take 1", sessionName: "Tests", takeNumber: 3,
                                       startDate: Date(timeIntervalSince1970: 1_700_000_000), notes: "from the FLAC tests")

    /// A fresh empty directory; remove it with `cleanUp`.
    static func makeTempDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory
            .appendingPathComponent("tapedeck-flac-tests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    static func cleanUp(_ url: URL) { try? FileManager.default.removeItem(at: url) }

    /// A sine (440 Hz, half scale) plus a little seeded noise, so FLAC has real work to do.
    static func render(format: AudioFormat, frames: Int, seed: UInt64 = 1) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: frames * format.bytesPerFrame)
        var state = seed
        let full = Double((1 << (format.sampleFormat.bitsPerSample - 1)) - 1)
        bytes.withUnsafeMutableBytes { raw in
            let base = raw.baseAddress!
            for f in 0..<frames {
                let s = sin(2 * Double.pi * 440 * Double(f) / Double(format.sampleRate)) * 0.5
                for c in 0..<format.channels {
                    state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                    let noise = (Double(state >> 11) / Double(1 << 53) - 0.5) * 0.01
                    let v = Int32(((s + noise) * full).rounded())
                    let i = f * format.channels + c
                    switch format.sampleFormat {
                    case .s16: base.storeBytes(of: Int16(v).littleEndian, toByteOffset: i * 2, as: Int16.self)
                    case .s24: Sample24.store(v, base, index: i)
                    case .s32, .f32: base.storeBytes(of: v.littleEndian, toByteOffset: i * 4, as: Int32.self)
                    }
                }
            }
        }
        return bytes
    }

    /// Writes `bytes` to `writer` in pieces of `chunkFrames`, with a checkpoint every `checkpointEvery` pieces.
    static func write(_ bytes: [UInt8], to writer: any TakeWriter, format: AudioFormat, chunkFrames: Int = 1000,
                      checkpointEvery: Int = 0) throws {
        let total = bytes.count / format.bytesPerFrame
        var frame = 0, pieces = 0
        try bytes.withUnsafeBytes { raw in
            while frame < total {
                let n = min(chunkFrames, total - frame)
                try writer.write(raw.baseAddress! + frame * format.bytesPerFrame, frames: n)
                frame += n
                pieces += 1
                if checkpointEvery > 0 && pieces % checkpointEvery == 0 { try writer.checkpoint() }
            }
        }
    }

    @discardableResult
    static func writeTake(_ bytes: [UInt8], at url: URL, format: AudioFormat, metadata: TakeMetadata = metadata,
                          encoder: FLACEncoder = FLACEncoder()) throws -> Int64 {
        let writer = try encoder.makeWriter(at: url, format: format, metadata: metadata)
        try write(bytes, to: writer, format: format)
        return try writer.finish()
    }

    static func readAll(_ url: URL, chunkFrames: Int = 999) throws -> (format: AudioFormat, frameCount: Int64, bytes: [UInt8]) {
        let reader = try FLACDecoder().openReader(at: url)
        defer { reader.close() }
        let bpf = reader.format.bytesPerFrame
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: chunkFrames * bpf)
        while true {
            let n = try buffer.withUnsafeMutableBytes { try reader.read(into: $0.baseAddress!, maxFrames: chunkFrames) }
            if n == 0 { break }
            out += buffer[0..<(n * bpf)]
        }
        return (reader.format, reader.frameCount, out)
    }

    struct ToolResult {
        var status: Int32
        var stdout: Data
        var stderr: String
        var text: String { String(decoding: stdout, as: UTF8.self) }
    }

    /// Runs a command found on PATH (through /usr/bin/env).
    static func run(_ arguments: [String]) throws -> ToolResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        // Read both pipes fully before waiting, so a large output cannot block the tool.
        let group = DispatchGroup()
        nonisolated(unsafe) var errData = Data()
        group.enter()
        DispatchQueue.global().async {
            errData = err.fileHandleForReading.readDataToEndOfFile()
            group.leave()
        }
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        group.wait()
        process.waitUntilExit()
        return ToolResult(status: process.terminationStatus, stdout: outData, stderr: String(decoding: errData, as: UTF8.self))
    }

    /// The MD5 FLAC defines for packed little-endian PCM whose samples are already in
    /// ceil(bits/8)-byte form (true for s16, s24 and s32 buffers).
    static func md5Hex(_ bytes: [UInt8]) -> String {
        var md5 = MD5()
        md5.update(bytes)
        return MD5.hex(md5.finalize())
    }
}
