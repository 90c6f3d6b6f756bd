public import Foundation
import Crypto
import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

/// This machine's signing key (Ed25519): made once by `tapedeck keys init` into a file only its
/// owner may read, loaded by a recorder that signs. The private key never leaves the file and is
/// never printed or logged; its public half and fingerprint are what others verify with.
///
/// Members run on any thread; reading and writing the file block on disk I/O.
public struct DeviceKey: Sendable {
    let key: Curve25519.Signing.PrivateKey

    /// The file's first line, then the key's 32 bytes in base64.
    static let fileTag = "tapedeck-ed25519-private-key"

    /// A new key written to `url` (mode 0600, its folder made 0700 when missing).
    /// - Throws: `.alreadyExists` when the file exists (a key is never replaced by accident);
    ///   `.notWritable`/`.io` from the file system.
    public static func create(at url: URL) throws -> DeviceKey {
        guard !FileManager.default.fileExists(atPath: url.path) else {
            throw TapedeckError(.alreadyExists, "\(url.path) holds a signing key already; Tapedeck never replaces one (takes it signed would no longer verify with a new one). `tapedeck keys export` prints its public key. To start over, move that file away first.")
        }
        let key = Curve25519.Signing.PrivateKey()
        let text = "\(fileTag)\n\(key.rawRepresentation.base64EncodedString())\n"
        let folder = url.deletingLastPathComponent()
        if !FileManager.default.fileExists(atPath: folder.path) {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        let files = DurableFiles()
        try files.writeNewFile(Data(text.utf8), to: url, mode: 0o600)
        try files.syncDirectory(folder)
        return DeviceKey(key: key)
    }

    /// The key in the file at `url`.
    /// - Throws: `.notFound` when there is none (saying how to make one), `.configuration` when
    ///   the file is not a key or others may read it.
    public static func load(at url: URL) throws -> DeviceKey {
        var st = stat()
        guard lstat(url.path, &st) == 0 else {
            throw TapedeckError(.notFound, "No signing key at \(url.path). Make one with `tapedeck keys init`, or set provenance.key to the file that holds it.")
        }
        let text = try PrivateFile.readText(url.path, key: "provenance.key")
        let lines = text.split(whereSeparator: \.isNewline).map(String.init)
        guard lines.count == 2, lines[0] == fileTag, let raw = Data(base64Encoded: lines[1]),
              let key = try? Curve25519.Signing.PrivateKey(rawRepresentation: raw) else {
            throw TapedeckError(.configuration, "\(url.path) is not a Tapedeck signing key (it was changed, or is another file). Point provenance.key at the file `tapedeck keys init` made.")
        }
        return DeviceKey(key: key)
    }

    /// The public key as others give it to `verify --key`: `ed25519:` and its 32 bytes in base64.
    public var publicKey: PublicKey { PublicKey(key: key.publicKey) }

    /// Signs `message`. Never blocks.
    func sign(_ message: Data) throws -> Data {
        try key.signature(for: message)
    }

    /// A public key: to verify with, print and compare. A plain value.
    public struct PublicKey: Sendable, Hashable, CustomStringConvertible {
        let key: Curve25519.Signing.PublicKey
        public static func == (a: PublicKey, b: PublicKey) -> Bool { a.raw == b.raw }
        public func hash(into hasher: inout Hasher) { hasher.combine(raw) }

        public var raw: Data { key.rawRepresentation }
        /// `ed25519:BASE64`.
        public var description: String { "ed25519:" + raw.base64EncodedString() }
        /// The first 16 bytes of the key's SHA-256 in hex, in groups of four: what a person
        /// compares when a key is read out over the phone.
        public var fingerprint: String {
            let hex = SHA256.hash(data: raw).prefix(16).map { String(format: "%02x", $0) }.joined()
            return stride(from: 0, to: hex.count, by: 4).map { i in
                String(hex[hex.index(hex.startIndex, offsetBy: i)..<hex.index(hex.startIndex, offsetBy: i + 4)])
            }.joined(separator: ":")
        }

        /// `ed25519:BASE64`, or a file holding it (as `keys export` prints it).
        /// - Throws: `.invalidArgument` naming the form.
        public init(parsing text: String) throws {
            var t = text.trimmingCharacters(in: .whitespacesAndNewlines)
            if !t.hasPrefix("ed25519:"), FileManager.default.fileExists(atPath: t),
               let contents = try? String(contentsOfFile: t, encoding: .utf8) {
                t = contents.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.first { $0.hasPrefix("ed25519:") } ?? ""
            }
            if !t.hasPrefix("ed25519:"), t.contains("/"), !FileManager.default.fileExists(atPath: t) {
                throw TapedeckError(.notFound, "\(t) does not exist. Give the public key (ed25519:…, as `tapedeck keys export` prints it) or a file holding it.")
            }
            guard t.hasPrefix("ed25519:"), let raw = Data(base64Encoded: String(t.dropFirst(8))),
                  let key = try? Curve25519.Signing.PublicKey(rawRepresentation: raw) else {
                throw TapedeckError(.invalidArgument, "\"\(text.prefix(80))\" is not a public key: give it as `tapedeck keys export` prints it (ed25519:…), or a file holding that line.")
            }
            self.key = key
        }

        init(key: Curve25519.Signing.PublicKey) { self.key = key }

        /// Whether `signature` is this key's over `message`.
        public func isValid(_ signature: Data, for message: Data) -> Bool {
            key.isValidSignature(signature, for: message)
        }
    }
}
