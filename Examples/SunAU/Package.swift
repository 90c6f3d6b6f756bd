// swift-tools-version: 6.2
import PackageDescription

// An outside package that builds on Tapedeck: it adds one codec (Sun/NeXT audio, `.au`) and builds
// its own `tapedeck` with it, without forking. It depends on Tapedeck by path so that it builds
// against this checkout; a package of your own names Tapedeck's repository by its URL and a
// version instead, `.package(url: URL, from: "0.2.0")`, and its products with `package:` set to
// the repository's name.
let package = Package(
    name: "SunAU",
    platforms: [.macOS(.v15)],
    products: [
        // The codec alone, for other programs built on Tapedeck.
        .library(name: "SunAU", targets: ["SunAU"]),
        // `tapedeck` with the codec: every command of Tapedeck's, plus `au`.
        .executable(name: "tapedeck-au", targets: ["tapedeck-au"]),
    ],
    dependencies: [
        .package(name: "Tapedeck", path: "../.."),
    ],
    targets: [
        // The codec: imports only TapedeckCore, as every Tapedeck plugin does.
        .target(
            name: "SunAU",
            dependencies: [.product(name: "TapedeckCore", package: "Tapedeck")],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // The program: Tapedeck's command line, with Tapedeck's plugins and this one.
        .executableTarget(
            name: "tapedeck-au",
            dependencies: [
                "SunAU",
                .product(name: "TapedeckCommandLine", package: "Tapedeck"),
                .product(name: "TapedeckAssembly", package: "Tapedeck"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // Tapedeck's encoder conformance suite, run on the codec.
        .testTarget(
            name: "SunAUTests",
            dependencies: [
                "SunAU",
                .product(name: "TapedeckCore", package: "Tapedeck"),
                .product(name: "TapedeckTesting", package: "Tapedeck"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
    ]
)
