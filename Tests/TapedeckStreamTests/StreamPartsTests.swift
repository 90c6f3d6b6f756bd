#if Streams
import Foundation
import Logging
import Testing
@testable import TapedeckStream
@testable import TapedeckStreamFormats
import TapedeckCore

/// The stream backend's parts that need no server: ICY metadata, URLs with credentials.
@Suite struct StreamPartsTests {
    /// Metadata blocks every `metaint` bytes come out of the audio, wherever the network cut the
    /// chunks, and each title change is kept once with its audio offset.
    @Test func icyMetadataIsTakenOutOfTheAudio() {
        let metaint = 100
        func block(_ title: String) -> [UInt8] {
            var text = Array("StreamTitle='\(title)';StreamUrl='';".utf8)
            let length = (text.count + 15) / 16
            text += [UInt8](repeating: 0, count: length * 16 - text.count)
            return [UInt8(length)] + text
        }
        var wire: [UInt8] = []
        var audio: [UInt8] = []
        let titles = ["One", "One", "", "Two's song", "Three"]
        for (i, title) in titles.enumerated() {
            let chunk = (0..<metaint).map { UInt8((i * metaint + $0) % 251) }
            audio += chunk
            wire += chunk
            wire += i == 1 ? [0] : block(title)   // an empty block: no change
        }
        for cut in [1, 7, 100, 101, 333, wire.count] {
            var demuxer = IcyDemuxer(metaint: metaint)
            var out: [UInt8] = []
            var seen: [IcyDemuxer.Title] = []
            var i = 0
            while i < wire.count {
                let end = min(wire.count, i + cut)
                wire[i..<end].withUnsafeBytes { seen += demuxer.demux($0) { out += $0 } }
                i = end
            }
            #expect(out == audio, "cut \(cut)")
            #expect(seen == [IcyDemuxer.Title(offset: 100, text: "One"), IcyDemuxer.Title(offset: 400, text: "Two's song"),
                             IcyDemuxer.Title(offset: 500, text: "Three")], "cut \(cut)")
        }
    }

    /// Credentials in the URL go into the Authorization header and never into what is shown.
    @Test func credentialsAreSentNeverShown() throws {
        let s = try StreamSource("http://dj:s3cret@radio.example:8000/live.ogg", password: nil, key: "capture.stream.device")
        #expect(s.shown == "http://radio.example:8000/live.ogg")
        #expect(s.authorization == "Basic " + Data("dj:s3cret".utf8).base64EncodedString())
        let env = try StreamSource("http://dj@radio.example/live", password: "from-env", key: "k")
        #expect(env.authorization == "Basic " + Data("dj:from-env".utf8).base64EncodedString())
        #expect(!env.shown.contains("dj"))
        let error = #expect(throws: TapedeckError.self) { try StreamSource("ftp://dj:s3cret@host/x", password: nil, key: "k") }
        #expect(error?.message.contains("s3cret") == false)
        #expect(Credentials.hidden(in: "http://dj:s3cret@host/x") == "http://host/x")
    }

    /// A duration setting that does not parse is a configuration error (exit 78) naming the key,
    /// before anything connects.
    @Test func badDurationsAreConfigurationErrors() throws {
        for (plugin, key) in [(StreamBackend.capture, "stall-after"), (RTPBackend.capture, "jitter-buffer")] {
            let settings = try PluginSettings.resolving(plugin.settings, overrides: ["device": plugin.name == "rtp" ? "rtp://127.0.0.1:9" : "http://127.0.0.1:9/x", key: "5x"])
            let backend = try plugin.make(settings, PluginContext(logger: Logger(label: "t"), defaultLibraryURL: URL(fileURLWithPath: "/tmp"),
                                                                  section: "capture.\(plugin.name)"))
            let e = #expect(throws: TapedeckError.self) {
                _ = try backend.openCaptureStream(format: AudioFormat(sampleRate: 48_000, channels: 2, sampleFormat: .s16), options: CaptureOptions(periodFrames: 1024))
            }
            #expect(e?.code == .configuration && e?.message.contains("capture.\(plugin.name).\(key) 5x") == true, "\(String(describing: e))")
        }
    }
}
#endif
