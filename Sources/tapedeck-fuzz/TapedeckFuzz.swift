// tapedeck-fuzz: the parsers of untrusted input (`TapedeckFuzzTargets`) as one program.
//
// Built by `scripts/fuzz` with `-sanitize=fuzzer,address -D TAPEDECK_FUZZING`,
// it is a libFuzzer binary: TAPEDECK_FUZZ_TARGET names the target (wav, flac, manifest, config),
// TAPEDECK_FUZZ_SCRATCH the file it may use, and a broken promise aborts so libFuzzer keeps the
// input. In an ordinary build it replays inputs instead:
//
//     tapedeck-fuzz TARGET FILE...     prints read/refused/FAIL per file; exit 0 when none failed
import Foundation
import TapedeckFuzzTargets

/// Writes `text` to standard error. - Thread: any. Blocks on the write.
func complain(_ text: String) { FileHandle.standardError.write(Data(text.utf8)) }

#if TAPEDECK_FUZZING
/// libFuzzer's entry point: one input, on libFuzzer's thread; blocks on the scratch file's I/O.
@_cdecl("LLVMFuzzerTestOneInput")
public func tapedeckFuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    guard let target = getenv("TAPEDECK_FUZZ_TARGET").map({ String(cString: $0) }) else {
        complain("tapedeck-fuzz: set TAPEDECK_FUZZ_TARGET to one of \(FuzzTargets.names.joined(separator: ", ")).\n")
        exit(2)
    }
    let scratch = getenv("TAPEDECK_FUZZ_SCRATCH").map { URL(fileURLWithPath: String(cString: $0)) }
        ?? FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-fuzz-\(getpid())")
    do {
        if case .broken(let finding) = try FuzzTargets.run(target, UnsafeRawBufferPointer(start: data, count: size), scratch: scratch) {
            complain("tapedeck-fuzz: \(target): \(finding)\n")
            abort()
        }
    } catch {
        complain("tapedeck-fuzz: \(error)\n")
        exit(2)
    }
    return 0
}
#else
/// The replay tool of ordinary builds.
@main
enum ReplayTool {
    /// - Thread: main. Blocks on file I/O.
    static func main() {
        let arguments = CommandLine.arguments.dropFirst()
        guard let target = arguments.first, arguments.count >= 2 else {
            complain("usage: tapedeck-fuzz TARGET FILE...   (targets: \(FuzzTargets.names.joined(separator: ", ")))\n")
            exit(64)
        }
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("tapedeck-fuzz-\(getpid())")
        // exit() never returns, so no `defer`: every way out removes the scratch file first.
        func finish(_ status: Int32) -> Never {
            try? FileManager.default.removeItem(at: scratch)
            exit(status)
        }
        var failed = 0
        for path in arguments.dropFirst() {
            do {
                let data = try Data(contentsOf: URL(fileURLWithPath: path))
                switch try data.withUnsafeBytes({ try FuzzTargets.run(target, $0, scratch: scratch) }) {
                case .read: print("read    \(path)")
                case .refused: print("refused \(path)")
                case .broken(let finding):
                    print("FAIL    \(path): \(finding)")
                    failed += 1
                }
            } catch {
                complain("tapedeck-fuzz: \(path): \(error)\n")
                finish(66)
            }
        }
        finish(failed == 0 ? 0 : 1)
    }
}
#endif
