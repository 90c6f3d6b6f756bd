public import TapedeckCore
#if ALSA
import TapedeckALSA
#endif
import TapedeckNull
import TapedeckWAV
import TapedeckFLAC
import TapedeckOpus
import TapedeckSndfileFormats
import TapedeckLoudness
import TapedeckResample
import TapedeckDirectoryStorage
import TapedeckBundleStorage
#if S3
import TapedeckS3
#endif
#if PulseAudio
import TapedeckPulseAudio
#endif
#if JACK
import TapedeckJACK
#endif
#if Streams
import TapedeckStream
#endif
#if PipeWire
import TapedeckPipeWire
#endif

/// The plugins a build of Tapedeck can assemble, by role. A plain value: a program (or a test)
/// that wants other plugins builds its own.
public struct PluginCatalog: Sendable {
    public var capture: [CapturePlugin]
    public var playback: [PlaybackPlugin]
    public var encoders: [EncoderPlugin]
    public var decoders: [DecoderPlugin]
    public var storage: [StoragePlugin]
    /// Places takes are pushed to (`sync.backend`).
    public var remotes: [RemotePlugin]

    public init(capture: [CapturePlugin], playback: [PlaybackPlugin], encoders: [EncoderPlugin],
                decoders: [DecoderPlugin], storage: [StoragePlugin], remotes: [RemotePlugin] = []) {
        self.capture = capture
        self.playback = playback
        self.encoders = encoders
        self.decoders = decoders
        self.storage = storage
        self.remotes = remotes
    }

    /// Every plugin compiled into this build.
    public static let builtIn = PluginCatalog(
        capture: [NullPlugin.capture] + alsa.map(\.capture) + pulse.map(\.capture) + jack.map(\.capture) + pipewire.map(\.capture) + streams,
        playback: [NullPlugin.playback] + alsa.map(\.playback) + pulse.map(\.playback) + jack.map(\.playback) + pipewire.map(\.playback),
        encoders: [WAVPlugin.encoder, FLACPlugin.encoder, OpusPlugin.encoder, SndfileFormatsPlugin.mp3, SndfileFormatsPlugin.vorbis,
                   SndfileFormatsPlugin.aiff],
        decoders: [WAVPlugin.decoder, FLACPlugin.decoder, OpusPlugin.decoder] + SndfileFormatsPlugin.decoders,
        storage: [DirectoryStoragePlugin.storage, BundleStoragePlugin.storage],
        remotes: s3)

    /// The libraries this build links, with their versions (`tapedeck --version`).
    /// - Thread: any; never blocks.
    public static var libraries: [String] {
        var names = [FLACPlugin.library, WAVPlugin.library, OpusPlugin.library, DirectoryStoragePlugin.library,
                     EBUR128Analyzer.library, SoxrConversion.library]
        #if ALSA
        names.append(ALSAPlugin.library)
        #endif
        #if PulseAudio
        names.append(PulsePlugin.library)
        #endif
        #if JACK
        names.append(JACKBackend.library)
        #endif
        #if PipeWire
        names.append(PipeWireBackend.library)
        #endif
        #if Streams
        names.append(StreamBackend.library)
        #endif
        return names
    }

    /// Backends that only some builds have, by config name, with the SwiftPM trait that brings each.
    public static let optionalBackends: [String: String] = ["alsa": "ALSA", "pulse": "PulseAudio", "jack": "JACK", "pipewire": "PipeWire", "stream": "Streams", "rtp": "Streams"]
    /// The Debian package each optional backend builds against.
    public static let optionalBackendPackages: [String: String] = ["alsa": "libasound2-dev", "pulse": "libpulse-dev", "jack": "libjack-jackd2-dev", "pipewire": "libpipewire-0.3-dev", "stream": "libvorbis-dev and libmpg123-dev", "rtp": "libvorbis-dev and libmpg123-dev"]
    /// Remotes that only some builds have, by config name, with the SwiftPM trait that brings each
    /// (the S3 remote brings async-http-client, SwiftNIO and swift-crypto into the build).
    public static let optionalRemotes: [String: String] = ["s3": "S3"]

    /// The trait a build needs for the plugin `name` in `role`, when `name` is one that only some
    /// builds have. - Thread: any; never blocks.
    public static func trait(bringing name: String, as role: PluginRole) -> String? {
        switch role {
        case .capture, .playback: optionalBackends[name]
        case .remote: optionalRemotes[name]
        case .encoder, .decoder, .storage: nil
        }
    }

    private static var streams: [CapturePlugin] {
        #if Streams
        [StreamBackend.capture, RTPBackend.capture]
        #else
        []
        #endif
    }

    private static var s3: [RemotePlugin] {
        #if S3
        [S3Plugin.remote]
        #else
        []
        #endif
    }

    private static var alsa: [(capture: CapturePlugin, playback: PlaybackPlugin)] {
        #if ALSA
        [(ALSAPlugin.capture, ALSAPlugin.playback)]
        #else
        []
        #endif
    }

    private static var pulse: [(capture: CapturePlugin, playback: PlaybackPlugin)] {
        #if PulseAudio
        [(PulsePlugin.capture, PulsePlugin.playback)]
        #else
        []
        #endif
    }

    private static var jack: [(capture: CapturePlugin, playback: PlaybackPlugin)] {
        #if JACK
        [(JACKBackend.capture, JACKBackend.playback)]
        #else
        []
        #endif
    }

    private static var pipewire: [(capture: CapturePlugin, playback: PlaybackPlugin)] {
        #if PipeWire
        [(PipeWireBackend.capture, PipeWireBackend.playback)]
        #else
        []
        #endif
    }

    /// Name, summary and settings of every plugin in a role, for listings and validation.
    /// - Thread: any. Never blocks.
    public func entries(for role: PluginRole) -> [PluginEntry] {
        switch role {
        case .capture: capture.map { PluginEntry(role: role, name: $0.name, summary: $0.summary, settings: $0.settings) }
        case .playback: playback.map { PluginEntry(role: role, name: $0.name, summary: $0.summary, settings: $0.settings) }
        case .encoder: encoders.map { PluginEntry(role: role, name: $0.name, summary: $0.summary, settings: $0.settings) }
        case .decoder: decoders.map { PluginEntry(role: role, name: $0.name, summary: $0.summary, settings: $0.settings) }
        case .storage: storage.map { PluginEntry(role: role, name: $0.name, summary: $0.summary, settings: $0.settings) }
        case .remote: remotes.map { PluginEntry(role: role, name: $0.name, summary: $0.summary, settings: $0.settings) }
        }
    }
}

/// One plugin as `tapedeck backends` shows it.
public struct PluginEntry: Sendable, Hashable {
    public var role: PluginRole
    public var name: String
    public var summary: String
    public var settings: [SettingDeclaration]
}
