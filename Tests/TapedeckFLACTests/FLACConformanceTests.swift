import Foundation
import Testing
import TapedeckCore
import TapedeckTesting
@testable import TapedeckFLAC

@Suite("FLAC encoder conformance")
struct FLACConformanceTests {
    static let formats: [AudioFormat] = {
        var list: [AudioFormat] = []
        for sample in [SampleFormat.s16, .s24] {
            for channels in [1, 2, 6] {
                for rate in [44_100, 48_000, 96_000] {
                    list.append(AudioFormat(sampleRate: rate, channels: channels, sampleFormat: sample))
                }
            }
        }
        list.append(AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .s32))
        return list
    }()

    @Test(arguments: formats)
    func roundTrip(format: AudioFormat) throws {
        let dir = try FLACTestSupport.makeTempDirectory()
        defer { FLACTestSupport.cleanUp(dir) }
        try EncoderConformance.roundTrip(encoder: FLACEncoder(), decoder: FLACDecoder(), format: format, frames: 30_000, in: dir)
    }

    @Test(arguments: formats)
    func repairsAbandonedFile(format: AudioFormat) throws {
        let dir = try FLACTestSupport.makeTempDirectory()
        defer { FLACTestSupport.cleanUp(dir) }
        try EncoderConformance.repairsAbandonedFile(encoder: FLACEncoder(), decoder: FLACDecoder(), format: format, in: dir)
    }

    @Test func refusesOverwrite() throws {
        let dir = try FLACTestSupport.makeTempDirectory()
        defer { FLACTestSupport.cleanUp(dir) }
        try EncoderConformance.refusesOverwrite(encoder: FLACEncoder(), format: .cdStereo, in: dir)
        try EncoderConformance.zeroFrames(encoder: FLACEncoder(), decoder: FLACDecoder(), format: .cdStereo, in: dir)
    }
}
