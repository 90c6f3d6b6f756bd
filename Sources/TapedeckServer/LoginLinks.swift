import Foundation
import Synchronization

/// One-time login links (`/login?once=CODE`), as Jupyter prints `…/?token=…`: `tapedeck serve`
/// prints one (and its QR code) on a terminal, so a phone logs in by scanning instead of typing
/// the 64-character token. A code is 128 random bits, good for one use within ``lifetime``;
/// the page it opens sets the same cookie as the login form. A wrong or spent code counts as a
/// wrong token (``LoginLimiter``). Thread: any; never blocks.
final class LoginLinks: Sendable {
    static let lifetime: TimeInterval = 15 * 60
    private let codes = Mutex<[String: Date]>([:])

    /// A new code, good until ``lifetime`` from now.
    func issue(now: Date = Date()) -> String {
        var generator = SystemRandomNumberGenerator()
        let code = (0..<16).map { _ in
            let byte = UInt8.random(in: 0...255, using: &generator)
            return (byte < 16 ? "0" : "") + String(byte, radix: 16)
        }.joined()
        codes.withLock { all in
            all = all.filter { $0.value > now }
            all[code] = now.addingTimeInterval(Self.lifetime)
        }
        return code
    }

    /// Uses `code` up: `true` once, for a code issued and not expired.
    func redeem(_ code: String, now: Date = Date()) -> Bool {
        codes.withLock { all in
            // Compared in constant time against every live code, so timing tells nothing.
            var found: String?
            for (candidate, expires) in all where expires > now && AccessToken(value: candidate).matches(code) { found = candidate }
            guard let found else { return false }
            all[found] = nil
            return true
        }
    }
}
