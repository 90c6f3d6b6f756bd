// swift-tools-version: 6.2
import PackageDescription

/// Settings every Tapedeck target shares: Swift 6 language mode (strict concurrency) and
/// imports that are internal unless a file says `public import`.
let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "Tapedeck",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "tapedeck", targets: ["tapedeck"]),
        .library(name: "TapedeckCore", targets: ["TapedeckCore"]),
        .library(name: "TapedeckNull", targets: ["TapedeckNull"]),
        .library(name: "TapedeckWAV", targets: ["TapedeckWAV"]),
        .library(name: "TapedeckFLAC", targets: ["TapedeckFLAC"]),
        .library(name: "TapedeckOpus", targets: ["TapedeckOpus"]),
        .library(name: "TapedeckSndfileFormats", targets: ["TapedeckSndfileFormats"]),
        .library(name: "TapedeckLoudness", targets: ["TapedeckLoudness"]),
        .library(name: "TapedeckResample", targets: ["TapedeckResample"]),
        .library(name: "TapedeckALSA", targets: ["TapedeckALSA"]),
        .library(name: "TapedeckPulseAudio", targets: ["TapedeckPulseAudio"]),
        .library(name: "TapedeckJACK", targets: ["TapedeckJACK"]),
        .library(name: "TapedeckPipeWire", targets: ["TapedeckPipeWire"]),
        .library(name: "TapedeckDirectoryStorage", targets: ["TapedeckDirectoryStorage"]),
        .library(name: "TapedeckBundleStorage", targets: ["TapedeckBundleStorage"]),
        .library(name: "TapedeckApp", targets: ["TapedeckApp"]),
        .library(name: "TapedeckServer", targets: ["TapedeckServer"]),
        .library(name: "TapedeckAssembly", targets: ["TapedeckAssembly"]),
        .library(name: "TapedeckServerAssembly", targets: ["TapedeckServerAssembly"]),
        .library(name: "TapedeckCommandLine", targets: ["TapedeckCommandLine"]),
        .library(name: "TapedeckS3", targets: ["TapedeckS3"]),
        .library(name: "TapedeckPostgres", targets: ["TapedeckPostgres"]),
        .library(name: "TapedeckStream", targets: ["TapedeckStream"]),
        .library(name: "TapedeckAlerts", targets: ["TapedeckAlerts"]),
        .library(name: "TapedeckTesting", targets: ["TapedeckTesting"]),
        // Test support: an LD_PRELOAD library that gives a folder a byte quota (disk-full tests
        // without root). Never linked into Tapedeck.
        .library(name: "TapedeckQuotaShim", type: .dynamic, targets: ["CQuotaShim"]),
        // Test support: an LD_PRELOAD library that logs every change to a folder, for the
        // power-loss replay (scripts/reliability-powerloss). Never linked into Tapedeck.
        .library(name: "TapedeckCrashLogShim", type: .dynamic, targets: ["CCrashLogShim"]),
        .library(name: "TapedeckScaffold", targets: ["TapedeckScaffold"]),
        .executable(name: "tapedeck-scaffold", targets: ["tapedeck-scaffold"]),
        .plugin(name: "ScaffoldBackend", targets: ["ScaffoldBackend"]),
    ],
    // The audio-server backends need libasound2-dev, libpulse-dev, libjack-jackd2-dev and
    // libpipewire-0.3-dev; the S3 remote brings the HTTP stack (async-http-client, SwiftNIO,
    // swift-crypto). All are on by default; `swift build --disable-default-traits` builds Tapedeck
    // without them (null backend, no remote), and `--traits` picks some.
    traits: [
        .trait(name: "ALSA", description: "The ALSA capture and playback backend (libasound)."),
        .trait(name: "PulseAudio", description: "The PulseAudio capture and playback backend (libpulse)."),
        .trait(name: "JACK", description: "The JACK capture and playback backend (libjack)."),
        .trait(name: "PipeWire", description: "The PipeWire capture and playback backend (libpipewire-0.3)."),
        .trait(name: "S3", description: "The S3 remote of push, pull and fleet (async-http-client, SwiftNIO, swift-crypto)."),
        .trait(name: "Postgres", description: "The fleet catalog in PostgreSQL (postgres-nio, swift-nio-ssl)."),
        .trait(name: "Streams", description: "Network streams as capture backends (async-http-client, libvorbisfile, libmpg123, libopusfile, libFLAC)."),
        .default(enabledTraits: ["ALSA", "PulseAudio", "JACK", "PipeWire", "S3", "Postgres", "Streams"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        // `tapedeck serve`: the web page and JSON API (TapedeckServer).
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket", from: "2.8.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        // The trusted time stamps of signed takes: an RFC 3161 token's CMS signature and its
        // authority's certificate chain (TapedeckProvenance).
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1", from: "1.7.4"),
        // `/metrics` of `tapedeck serve`: the Prometheus exposition (TapedeckServer).
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // The S3 remote's HTTP client (TapedeckS3).
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        // The fleet catalog in PostgreSQL (TapedeckPostgres), TLS to it through swift-nio-ssl.
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        // `swift package generate-documentation`: the API reference and its articles (scripts/build-docs).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // New backends: `swift package scaffold-backend` prints the two target lines to add here.
        // MP3, Ogg Vorbis and AIFF through libsndfile (made with scaffold-backend).
        .target(name: "TapedeckSndfileFormats", dependencies: ["TapedeckCore", "CSndfile"], swiftSettings: swiftSettings),
        .testTarget(name: "TapedeckSndfileFormatsTests", dependencies: ["TapedeckSndfileFormats", "TapedeckTesting"], swiftSettings: swiftSettings),
        .target(name: "TapedeckOpus", dependencies: ["TapedeckCore", "COpus"], swiftSettings: swiftSettings),
        .testTarget(name: "TapedeckOpusTests", dependencies: ["TapedeckOpus", "TapedeckTesting"], swiftSettings: swiftSettings),
        .systemLibrary(
            name: "COpus", path: "Sources/Shims/COpus",
            pkgConfig: "libopusenc",
            providers: [.apt(["libopusenc-dev", "libopusfile-dev"])]
        ),
        // EBU R128 loudness over libebur128 (a LoudnessAnalyzer the composition root hands the app).
        .target(name: "TapedeckLoudness", dependencies: ["TapedeckCore", "CEBUR128"], swiftSettings: swiftSettings),
        .testTarget(name: "TapedeckLoudnessTests", dependencies: ["TapedeckLoudness", "TapedeckResample", "TapedeckTesting"], swiftSettings: swiftSettings),
        // libqrencode: the QR code of `serve`'s login link, drawn on the terminal.
        .systemLibrary(
            name: "CQRencode", path: "Sources/Shims/CQRencode",
            pkgConfig: "libqrencode",
            providers: [.apt(["libqrencode-dev"])]
        ),
        .systemLibrary(
            name: "CEBUR128", path: "Sources/Shims/CEBUR128",
            pkgConfig: "libebur128",
            providers: [.apt(["libebur128-dev"])]
        ),
        // The S3 remote: AWS Signature Version 4 over swift-crypto.
        .target(name: "TapedeckS3", dependencies: [
            "TapedeckCore", .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "Logging", package: "swift-log"),
        ], swiftSettings: swiftSettings),
        .testTarget(name: "TapedeckS3Tests", dependencies: ["TapedeckS3", "TapedeckTesting", .product(name: "Crypto", package: "swift-crypto"), .product(name: "Logging", package: "swift-log"),
                                                     .product(name: "NIOCore", package: "swift-nio")], swiftSettings: swiftSettings),
        // The fleet catalog (a FleetIndex) in PostgreSQL.
        .target(name: "TapedeckPostgres", dependencies: [
            "TapedeckCore", .product(name: "PostgresNIO", package: "postgres-nio"), .product(name: "NIOSSL", package: "swift-nio-ssl"),
            .product(name: "NIOPosix", package: "swift-nio"), .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "Logging", package: "swift-log"),
        ], swiftSettings: swiftSettings),
        .testTarget(name: "TapedeckPostgresTests", dependencies: ["TapedeckPostgres", "TapedeckTesting", .product(name: "Logging", package: "swift-log")],
                    swiftSettings: swiftSettings),
        // What network streams carry, read without the network: ICY demuxing, the stream
        // decoders (libopusfile, libvorbisfile, libFLAC, libmpg123, WAV), SDP, RTP and SAP. Apart
        // from TapedeckStream so the fuzz build (no HTTP stack) can fuzz them.
        .target(name: "TapedeckStreamFormats", dependencies: ["TapedeckCore", "COpus", "CFLAC", "CStreamCodecs"],
                swiftSettings: swiftSettings),
        // Network streams (Icecast/HTTP, RTP) as capture backends: decoded in-process.
        .target(name: "TapedeckStream", dependencies: [
            "TapedeckCore", "TapedeckStreamFormats",
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"), .product(name: "Logging", package: "swift-log"),
        ], swiftSettings: swiftSettings),
        .testTarget(name: "TapedeckStreamTests", dependencies: ["TapedeckStream", "TapedeckStreamFormats", "TapedeckTesting", .product(name: "NIOCore", package: "swift-nio"),
                                                         .product(name: "NIOPosix", package: "swift-nio")], swiftSettings: swiftSettings),
        .systemLibrary(
            name: "CStreamCodecs", path: "Sources/Shims/CStreamCodecs",
            providers: [.apt(["libvorbis-dev", "libmpg123-dev"])]
        ),
        // Sample-rate conversion over libsoxr (a SampleRateConversion the composition root hands exports).
        .target(name: "TapedeckResample", dependencies: ["TapedeckCore", "CSoxr"], swiftSettings: swiftSettings),
        .systemLibrary(
            name: "CSoxr", path: "Sources/Shims/CSoxr",
            pkgConfig: "soxr",
            providers: [.apt(["libsoxr-dev"])]
        ),
        // Models and ports.
        .target(
            name: "TapedeckCore",
            dependencies: [.product(name: "Logging", package: "swift-log"), "CFileSpace", "CRingStream"],
            swiftSettings: swiftSettings
        ),

        // C shims.
        // fallocate(2) for take preallocation (Glibc's Swift module leaves it out).
        .target(name: "CFileSpace", path: "Sources/Shims/CFileSpace"),
        .target(name: "CChildSpawn", path: "Sources/Shims/CChildSpawn"),
        .target(name: "CUnixSocket", path: "Sources/Shims/CUnixSocket"),
        // The alerts' transfers (an HTTP POST, a mail over SMTP) through libcurl, behind functions
        // Swift can call (curl_easy_setopt is variadic).
        .target(name: "CCurlTransfer", path: "Sources/Shims/CCurlTransfer", linkerSettings: [.linkedLibrary("curl")]),
        // The ring stream's real-time half (TapedeckCore's DeviceRing): the SPSC ring, its hole
        // queue and its eventfd, shared by every callback backend's C shim.
        .target(name: "CRingStream", path: "Sources/Shims/CRingStream"),
        .systemLibrary(
            name: "CSndfile", path: "Sources/Shims/CSndfile",
            pkgConfig: "sndfile",
            providers: [.apt(["libsndfile1-dev"])]
        ),

        .systemLibrary(
            name: "CFLAC", path: "Sources/Shims/CFLAC",
            pkgConfig: "flac",
            providers: [.apt(["libflac-dev"])]
        ),

        .systemLibrary(
            name: "CALSA", path: "Sources/Shims/CALSA",
            pkgConfig: "alsa",
            providers: [.apt(["libasound2-dev"])]
        ),
        // One module for both PulseAudio APIs: two modules that each include PulseAudio headers
        // break clean builds. No pkg-config: libpulse's adds -D_REENTRANT -pthread, which SwiftPM
        // refuses with a warning; the headers are in the default path and the modulemap links both
        // libraries.
        .systemLibrary(
            name: "CPulse", path: "Sources/Shims/CPulse",
            providers: [.apt(["libpulse-dev"])]
        ),
        // A main loop for libpulse without the wake-up pipe of pa_mainloop (see its header). Its
        // header does not include PulseAudio's, so CPulse stays the one module that does.
        .target(name: "CPulseLoop", path: "Sources/Shims/CPulseLoop"),

        // libjack (jackd2's, or PipeWire's libjack replacement under pw-jack).
        .systemLibrary(
            name: "CJACK", path: "Sources/Shims/CJACK",
            pkgConfig: "jack",
            providers: [.apt(["libjack-jackd2-dev"])]
        ),
        // The JACK client and its process callback, copying through the shared ring (CRingStream),
        // in C so that JACK's real-time thread runs no Swift (no allocation, no locks, no runtime calls).
        .target(name: "CJACKStream", dependencies: ["CRingStream"], path: "Sources/Shims/CJACKStream"),

        // libpipewire-0.3: a connection, its registry and one stream on a loop the device thread
        // iterates itself. C, and the one module that includes PipeWire's headers (its Swift
        // module imports only this header). No pkg-config target: libpipewire's flags include
        // -D_REENTRANT, which SwiftPM refuses with a warning; the header folders are fixed on
        // Debian and Ubuntu.
        .target(
            name: "CPipeWireStream", dependencies: ["CRingStream"], path: "Sources/Shims/CPipeWireStream",
            cSettings: [.unsafeFlags(["-I/usr/include/pipewire-0.3", "-I/usr/include/spa-0.2"])],
            linkerSettings: [.linkedLibrary("pipewire-0.3")]
        ),

        // Backends: one plugin module each, importing only Core and its own shim.
        .target(
            name: "TapedeckNull",
            dependencies: ["TapedeckCore"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TapedeckWAV",
            dependencies: ["TapedeckCore", "CSndfile"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TapedeckFLAC",
            dependencies: ["TapedeckCore", "CFLAC"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TapedeckALSA",
            dependencies: ["TapedeckCore", .target(name: "CALSA", condition: .when(traits: ["ALSA"]))],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TapedeckPulseAudio",
            dependencies: ["TapedeckCore", .target(name: "CPulse", condition: .when(traits: ["PulseAudio"])),
                           .target(name: "CPulseLoop", condition: .when(traits: ["PulseAudio"]))],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TapedeckJACK",
            dependencies: ["TapedeckCore", .target(name: "CJACK", condition: .when(traits: ["JACK"])),
                           .target(name: "CJACKStream", condition: .when(traits: ["JACK"]))],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TapedeckPipeWire",
            dependencies: ["TapedeckCore", .target(name: "CPipeWireStream", condition: .when(traits: ["PipeWire"]))],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TapedeckDirectoryStorage",
            dependencies: ["TapedeckCore", .product(name: "GRDB", package: "GRDB.swift"), .product(name: "GRDBSQLite", package: "GRDB.swift")],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "TapedeckBundleStorage",
            dependencies: ["TapedeckCore"],
            swiftSettings: swiftSettings
        ),

        // Presentation: observable objects that own every mutation.
        .target(
            name: "TapedeckApp",
            dependencies: ["TapedeckCore", "CZlib", "CUnixSocket", .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings
        ),
        // Alerts that reach a person (the config's alerts: list): webhooks, ntfy and mail through
        // libcurl (libcurl4-openssl-dev), an outbox on disk, per-rule limits.
        .target(
            name: "TapedeckAlerts",
            dependencies: ["TapedeckCore", "CCurlTransfer", .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings
        ),
        // zlib, for the PNG files `tapedeck waveform` draws.
        .systemLibrary(
            name: "CZlib", path: "Sources/Shims/CZlib",
            pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"])]
        ),
        // The second view: `tapedeck serve`, a web page and JSON API over the same objects.
        .target(
            name: "TapedeckServer",
            dependencies: [
                "TapedeckCore", "TapedeckApp", "TapedeckAlerts", "CChildSpawn",
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            resources: [.embedInCode("Page/app.js"), .embedInCode("Page/app.css"), .embedInCode("Page/openapi.yaml"), .embedInCode("Page/favicon.svg")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TapedeckServerTests",
            dependencies: [
                "TapedeckServer", "TapedeckAssembly", "TapedeckServerAssembly", "TapedeckTesting",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "HummingbirdWSTesting", package: "hummingbird-websocket"),
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
            ],
            swiftSettings: swiftSettings
        ),

        // Takes you can prove (provenance.sign): the device key (Ed25519), the signed hash chain
        // written beside each take as it is recorded, and its verification (swift-crypto); RFC 3161
        // time stamps of its heads from an authority over HTTP (libcurl), checked with swift-certificates.
        .target(
            name: "TapedeckProvenance",
            dependencies: ["TapedeckCore", "CCurlTransfer", .product(name: "Crypto", package: "swift-crypto"),
                           .product(name: "X509", package: "swift-certificates"), .product(name: "SwiftASN1", package: "swift-asn1"),
                           .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "TapedeckProvenanceTests", dependencies: ["TapedeckProvenance", "TapedeckTesting", .product(name: "Logging", package: "swift-log")],
                    swiftSettings: swiftSettings),

        // Composition root.
        .target(
            name: "TapedeckAssembly",
            dependencies: [
                "TapedeckCore", "TapedeckApp", "TapedeckAlerts", "TapedeckProvenance", "TapedeckNull", "TapedeckWAV", "TapedeckFLAC", "TapedeckOpus", "TapedeckLoudness", "TapedeckResample", "TapedeckSndfileFormats",
                .target(name: "TapedeckALSA", condition: .when(traits: ["ALSA"])),
                .target(name: "TapedeckPulseAudio", condition: .when(traits: ["PulseAudio"])),
                .target(name: "TapedeckJACK", condition: .when(traits: ["JACK"])),
                .target(name: "TapedeckPipeWire", condition: .when(traits: ["PipeWire"])),
                "TapedeckDirectoryStorage", "TapedeckBundleStorage",
                .target(name: "TapedeckS3", condition: .when(traits: ["S3"])),
                .target(name: "TapedeckPostgres", condition: .when(traits: ["Postgres"])),
                .target(name: "TapedeckStream", condition: .when(traits: ["Streams"])),
                .product(name: "Yams", package: "Yams"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // The composition root's part for `tapedeck serve` (the web server over a Studio): apart,
        // so that only the command line and the server's tests link Hummingbird.
        .target(
            name: "TapedeckServerAssembly",
            dependencies: ["TapedeckAssembly", "TapedeckServer", "TapedeckApp", "TapedeckCore"],
            swiftSettings: swiftSettings
        ),

        // scaffold-backend: the template logic (tested), the tool that runs it, the thin plugin,
        // and the store that `--kind storage` copies (built and conformance-tested here, in no catalog).
        .target(name: "TapedeckStoreTemplate", dependencies: ["TapedeckCore"], swiftSettings: swiftSettings),
        .testTarget(name: "TapedeckStoreTemplateTests", dependencies: ["TapedeckStoreTemplate", "TapedeckTesting"], swiftSettings: swiftSettings),
        .target(name: "TapedeckScaffold", swiftSettings: swiftSettings),
        .executableTarget(name: "tapedeck-scaffold", dependencies: ["TapedeckScaffold"], swiftSettings: swiftSettings),
        .plugin(
            name: "ScaffoldBackend",
            capability: .command(
                intent: .custom(verb: "scaffold-backend", description: "Create a new backend module (encoder, capture, playback or storage) with its conformance tests."),
                permissions: [.writeToPackageDirectory(reason: "Creates Sources/TapedeckNAME and Tests/TapedeckNAMETests; never overwrites a file.")]),
            dependencies: ["tapedeck-scaffold"]),

        // The command-line front end, as a library (TapedeckCLI.main(catalog:)) so that a package
        // adding plugins builds its own `tapedeck`, and Tapedeck's own: a main.swift that runs it
        // with PluginCatalog.builtIn.
        .target(
            name: "TapedeckCommandLine",
            dependencies: [
                "TapedeckAssembly", "TapedeckServerAssembly", "TapedeckApp", "TapedeckAlerts", "TapedeckServer", "TapedeckCore", "TapedeckProvenance", "CStopSignals", "CQRencode",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(name: "tapedeck", dependencies: ["TapedeckCommandLine", "TapedeckAssembly"], swiftSettings: swiftSettings),

        // Stop signals through a pipe, so none is lost while the command starts.
        .target(name: "CStopSignals", path: "Sources/Shims/CStopSignals"),

        .target(name: "CQuotaShim", path: "Sources/TestShims/CQuotaShim"),
        .target(name: "CCrashLogShim", path: "Sources/TestShims/CCrashLogShim"),

        // Fuzzing (docs/RELIABILITY.md, case 6): the parsers of untrusted input as fuzz targets,
        // and the program scripts/fuzz builds with libFuzzer (a replay tool in ordinary builds).
        .target(
            name: "TapedeckFuzzTargets",
            dependencies: ["TapedeckCore", "TapedeckWAV", "TapedeckFLAC", "TapedeckOpus", "TapedeckBundleStorage", "TapedeckDirectoryStorage", "TapedeckAssembly",
                           "TapedeckStreamFormats"],
            swiftSettings: swiftSettings
        ),
        .executableTarget(name: "tapedeck-fuzz", dependencies: ["TapedeckFuzzTargets", "CFuzzerMain"], swiftSettings: swiftSettings),
        .target(name: "CFuzzerMain", path: "Sources/TestShims/CFuzzerMain"),
        .testTarget(name: "TapedeckFuzzTargetsTests", dependencies: ["TapedeckFuzzTargets", "TapedeckCore", "TapedeckTesting"], swiftSettings: swiftSettings),

        // Test kit shipped beside the API: conformance suites and test doubles.
        .target(
            name: "TapedeckTesting",
            dependencies: ["TapedeckCore", "CFileSpace"],
            swiftSettings: swiftSettings
        ),

        .testTarget(name: "TapedeckCoreTests", dependencies: ["TapedeckCore", "TapedeckTesting"], swiftSettings: swiftSettings),
        .testTarget(name: "TapedeckNullTests", dependencies: ["TapedeckNull", "TapedeckTesting"], swiftSettings: swiftSettings),
        .testTarget(name: "TapedeckWAVTests", dependencies: ["TapedeckWAV", "TapedeckNull", "TapedeckTesting"], swiftSettings: swiftSettings),
        .testTarget(
            name: "TapedeckFLACTests",
            dependencies: ["TapedeckFLAC", "TapedeckWAV", "TapedeckTesting"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TapedeckALSATests",
            dependencies: ["TapedeckALSA", "TapedeckTesting"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TapedeckPulseAudioTests",
            dependencies: ["TapedeckPulseAudio", "TapedeckTesting"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TapedeckJACKTests",
            dependencies: ["TapedeckJACK", "TapedeckTesting"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TapedeckPipeWireTests",
            dependencies: ["TapedeckPipeWire", "TapedeckTesting"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TapedeckDirectoryStorageTests",
            dependencies: ["TapedeckDirectoryStorage", "TapedeckTesting"],
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "TapedeckScaffoldTests", dependencies: ["TapedeckScaffold"], swiftSettings: swiftSettings),
        .testTarget(
            name: "TapedeckBundleStorageTests",
            dependencies: ["TapedeckBundleStorage", "TapedeckTesting"],
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "TapedeckAppTests", dependencies: ["TapedeckApp", "TapedeckTesting", "TapedeckNull"], swiftSettings: swiftSettings),
        .testTarget(name: "TapedeckAlertsTests", dependencies: ["TapedeckAlerts", "TapedeckTesting", .product(name: "Logging", package: "swift-log")],
                    swiftSettings: swiftSettings),
        .testTarget(
            name: "TapedeckAssemblyTests",
            dependencies: ["TapedeckAssembly", "TapedeckTesting", "TapedeckNull", "TapedeckDirectoryStorage"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "tapedeckTests",
            dependencies: ["TapedeckTesting", "TapedeckCore"],
            exclude: ["verify_wav.py", "channel_mask.py"],
            swiftSettings: swiftSettings
        ),
    ]
)
