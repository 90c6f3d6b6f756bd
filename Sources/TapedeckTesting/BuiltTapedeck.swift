public import Foundation

/// The built `tapedeck` executable, for tests that run it (the command's end-to-end tests, and
/// the server's exports on request, which run it as a child process).
public enum BuiltTapedeck {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    public struct NotBuilt: Error, CustomStringConvertible {
        public var description: String { "The tapedeck binary was not built; run `swift build` first." }
    }

    /// The executable next to the test bundle, else in `.build/debug`.
    /// - Throws: ``NotBuilt``. - Thread: any. Never blocks beyond a few `stat` calls.
    public static var url: URL {
        get throws {
            var dir = Bundle.main.bundleURL
            for _ in 0..<4 {
                let candidate = dir.appendingPathComponent("tapedeck")
                if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
                dir.deleteLastPathComponent()
            }
            let fallback = packageRoot.appendingPathComponent(".build/debug/tapedeck")
            guard FileManager.default.isExecutableFile(atPath: fallback.path) else { throw NotBuilt() }
            return fallback
        }
    }
}
