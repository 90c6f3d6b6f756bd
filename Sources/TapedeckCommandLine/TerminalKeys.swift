import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Single keys from the terminal while a command runs (`m` for a marker, Enter for a trigger):
/// the terminal is put in non-canonical mode without echo (Ctrl-C still signals), and a thread
/// of its own hands each byte to the handler. ``restore()`` puts the terminal back.
/// - Thread: create and restore on the main actor; the handler runs on the reader thread and
///   must not block.
final class TerminalKeys {
    private var saved = termios()
    private var active = false

    init?(handler: @escaping @Sendable (UInt8) -> Void) {
        guard tcgetattr(STDIN_FILENO, &saved) == 0 else { return nil }
        var raw = saved
        raw.c_lflag &= ~tcflag_t(ICANON | ECHO)
        withUnsafeMutableBytes(of: &raw.c_cc) { cc in
            cc[Int(VMIN)] = 1
            cc[Int(VTIME)] = 0
        }
        guard tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0 else { return nil }
        active = true
        let reader = Thread {
            var byte: UInt8 = 0
            while true {
                let n = read(STDIN_FILENO, &byte, 1)
                if n < 0 && errno == EINTR { continue }
                guard n == 1 else { return }
                handler(byte)
            }
        }
        reader.name = "tapedeck-keys"
        reader.start()
    }

    /// Puts the terminal back as it was. - Thread: any; never blocks.
    func restore() {
        guard active else { return }
        active = false
        _ = tcsetattr(STDIN_FILENO, TCSANOW, &saved)
    }
}
