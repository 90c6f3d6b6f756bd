import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// What Tapedeck leaves on disk: permissions under several umasks, no temporary files after the
/// commands finish, and no other program ever started (docs/RELIABILITY.md, case 10).
@Suite("files and permissions end to end", .endToEnd)
struct FilesEndToEndTests {
    /// Runs `tapedeck` with a umask of its own (the test process's umask is shared by every test
    /// running at once, so it is set in the child, by python, just before it becomes `tapedeck`).
    static func umaskLauncher(_ mask: mode_t) -> [String] {
        ["/usr/bin/env", "python3", "-c", "import os, sys; os.umask(int(sys.argv[1], 8)); os.execv(sys.argv[2], sys.argv[2:])",
         String(mask, radix: 8)]
    }

    /// Every file and folder under `root` with its permission bits.
    static func modes(under root: URL) throws -> [(path: String, isDirectory: Bool, mode: mode_t)] {
        var found: [(String, Bool, mode_t)] = []
        func visit(_ path: String) throws {
            var st = stat()
            guard lstat(path, &st) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            let isDirectory = (st.st_mode & S_IFMT) == S_IFDIR
            found.append((path, isDirectory, st.st_mode & 0o7777))
            if isDirectory {
                for name in try FileManager.default.contentsOfDirectory(atPath: path) { try visit(path + "/" + name) }
            }
        }
        try visit(root.path)
        return found
    }

    @Test("files and folders get 0664 and 0775 less the umask, never world-writable, and no temporary file stays",
          arguments: ["directory", "bundle"], [0o000, 0o002, 0o022, 0o027, 0o077] as [mode_t])
    func permissions(storage: String, mask: mode_t) async throws {
        var cli = try CLIHarness(storage: storage)
        cli.launcher = Self.umaskLauncher(mask)
        let exports = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-modes-\(UUID().uuidString)")
        defer {
            try? FileManager.default.removeItem(at: cli.library)
            try? FileManager.default.removeItem(at: exports)
        }
        try FileManager.default.createDirectory(at: exports, withIntermediateDirectories: true)
        for args in [["record", "--duration", "0.3s", "--session", "Modes"],
                     ["record", "--duration", "0.3s", "--session", "Modes", "--set", "encoder.name=flac"],
                     ["rename", "Modes/Take 1", "First"],
                     ["export", "--session", "Modes", "--output", exports.path],
                     ["list"]] {
            let r = try await cli.run(args)
            #expect(r.status == 0, "\(args.joined(separator: " ")): \(r.stderr)")
        }
        let entries = try Self.modes(under: cli.library) + Self.modes(under: exports).dropFirst()
        #expect(entries.count > 6)
        for entry in entries {
            let name = (entry.path as NSString).lastPathComponent
            // SQLite creates the catalog (and its -wal and -shm files) with 0644 less the umask.
            let base: mode_t = entry.isDirectory ? 0o775 : (name.hasPrefix("catalog.sqlite") ? 0o644 : 0o664)
            #expect(entry.mode & 0o002 == 0, "\(entry.path) is world-writable (mode \(String(entry.mode, radix: 8)))")
            #expect(entry.mode == base & ~mask, "\(entry.path): mode \(String(entry.mode, radix: 8)), expected \(String(base & ~mask, radix: 8)) under umask \(String(mask, radix: 8))")
            // The libraries' own lock files stay; a take's lock, a pending file, a manifest being
            // replaced or an export being written must not.
            let temporary = name.contains(".pending.") || name.contains(".tmp") || name.contains(".partial-")
                || (name.hasSuffix(".lock") && name != ".catalog-open.lock" && name != ".tapedeck-library.lock")
            #expect(!temporary, "\(entry.path) was left behind")
        }
    }

    @Test("no command starts another program: strace sees one execve, tapedeck's own")
    func noOtherProgram() async throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/strace") else {
            Issue.record("strace is missing (scripts/install-deps installs it)")
            return
        }
        var cli = try CLIHarness()
        let trace = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-execve-\(UUID().uuidString)")
        let exports = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-exports-\(UUID().uuidString)")
        defer {
            try? FileManager.default.removeItem(at: cli.library)
            try? FileManager.default.removeItem(at: exports)
        }
        try FileManager.default.createDirectory(at: exports, withIntermediateDirectories: true)
        for args in [["record", "--duration", "0.3s", "--session", "S"],
                     ["play", "S/Take 1"],
                     ["export", "S/Take 1", "--output", exports.path],
                     ["import", exports.appendingPathComponent("S - Take 1.flac").path, "--session", "Imported"],
                     ["list", "--json"], ["show", "S/Take 1"], ["devices"], ["backends"], ["doctor"],
                     ["rename", "S/Take 1", "Renamed"], ["delete", "S/Renamed", "--yes"]] {
            try? FileManager.default.removeItem(at: trace)
            cli.launcher = ["/usr/bin/strace", "-f", "-qq", "-e", "trace=execve,execveat", "-o", trace.path]
            let r = try await cli.run(args)
            #expect(r.status == 0, "\(args.joined(separator: " ")): \(r.stderr)")
            let calls = try String(contentsOf: trace, encoding: .utf8).split(separator: "\n")
                .filter { $0.contains("execve") && !$0.contains("resumed>") }
            #expect(calls.count == 1, "\(args[0]) started other programs:\n\(calls.joined(separator: "\n"))")
        }
    }
}
