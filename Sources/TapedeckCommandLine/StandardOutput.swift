import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Every result Tapedeck prints goes to stdout through here, never through a path that can crash
/// or kill the process when the reader has gone (`tapedeck list --json | head -1`).
///
/// SIGPIPE is ignored from the start (``Tapedeck/main()``), so a write to a closed pipe fails with
/// `EPIPE`. The first such failure marks the output closed; later output is dropped and the
/// command goes on and ends with its own status (a recording still finishes its take). Any other
/// failure (a full disk under `> file`) is kept in ``failure``: the command then says so and
/// exits 74 (``Tapedeck/main()``). On a
/// terminal each write goes out at once; into a pipe or file, output is gathered in 64 KiB
/// blocks and the rest is written at exit. Safe on any thread; a write blocks while the reader
/// is slow.
enum StandardOutput {
    private struct State {
        var buffer: [UInt8] = []
        var closed = false
        var failure: Int32?
    }

    private static let state = Mutex(State())
    private static let immediate = isatty(STDOUT_FILENO) == 1
    private static let blockSize = 64 * 1024

    /// The `errno` of a failed write other than a reader that went away (`EPIPE`), if any.
    static var failure: Int32? { state.withLock { $0.failure } }

    /// Writes `text` (on a terminal at once; otherwise when a block is full or at exit).
    static func write(_ text: String) {
        state.withLock { s in
            guard !s.closed else { return }
            s.buffer.append(contentsOf: text.utf8)
            if immediate || s.buffer.count >= blockSize { drain(&s) }
        }
    }

    /// Writes `bytes` as they are (audio for `-o -`), through the same buffer as text.
    static func write(bytes: UnsafeRawBufferPointer) {
        state.withLock { s in
            guard !s.closed else { return }
            s.buffer.append(contentsOf: bytes)
            if immediate || s.buffer.count >= blockSize { drain(&s) }
        }
    }

    /// Whether a reader went away or a write failed: nothing more will be delivered.
    static var isClosed: Bool { state.withLock { $0.closed } }

    /// Writes what is gathered. Runs at exit (registered by ``Tapedeck/main()``).
    static func flush() {
        state.withLock { drain(&$0) }
    }

    private static func drain(_ s: inout State) {
        var offset = 0
        defer { s.buffer.removeAll(keepingCapacity: true) }
        while offset < s.buffer.count, !s.closed {
            let n = s.buffer.withUnsafeBytes { Glibc.write(STDOUT_FILENO, $0.baseAddress! + offset, $0.count - offset) }
            if n > 0 {
                offset += n
            } else if n < 0 && errno == EINTR {
                continue
            } else {
                // Nothing more can be delivered. A reader that went away (EPIPE) is no error.
                if n < 0 && errno != EPIPE { s.failure = errno }
                s.closed = true
            }
        }
    }
}

/// Writes what is gathered for stdout; registered with `atexit` by ``Tapedeck/main()``. A plain
/// function, not a closure: `exit` may run on any thread, and a closure written inside the
/// main-actor command would check for the main actor there and trap.
func flushStandardOutputAtExit() {
    StandardOutput.flush()
}

/// `print` for the tapedeck command: the same text as the standard library's, written through
/// ``StandardOutput`` (this declaration shadows `Swift.print` in the module).
/// Text output never sends a raw control character, escape sequence or bidi override to the
/// reader (``Terminal/safe(_:)``): names are the user's and files' own, and any of them may
/// hold one.
func print(_ items: Any..., separator: String = " ", terminator: String = "\n") {
    StandardOutput.write(Terminal.safe(items.map { "\($0)" }.joined(separator: separator)) + terminator)
}
