import Foundation
import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

/// Where a route's secret comes from: an environment variable, or a file only its owner may read
/// (`username = …`, `password = …`, `token = …` lines), as the S3 remote's credentials. Never
/// the config file. A plain value.
public enum AlertCredentialSource: Sendable, Hashable {
    case none
    /// The secret (a token, or the mail password) is this variable's value.
    case environment(String)
    /// A private file of `key = value` lines.
    case file(String)
}

/// A route's secrets, read when a message is sent. Never printed, never logged, never written.
struct AlertSecrets: Sendable {
    var username: String?
    var password: String?
    var token: String?

    /// Reads `source`. - Throws: `.configuration` saying what to set or fix (never the secret).
    /// - Thread: any. Blocks briefly on reading the file.
    static func load(_ source: AlertCredentialSource, secret: String, environment: [String: String]) throws -> AlertSecrets {
        switch source {
        case .none:
            return AlertSecrets()
        case .environment(let name):
            guard let value = environment[name], !value.isEmpty else {
                throw TapedeckError(.configuration, "The environment variable \(name) that the alert names for its \(secret) is \(environment[name] == nil ? "not set" : "empty"). Set it in the environment Tapedeck runs in (for a service: Environment= or EnvironmentFile= in the unit).")
            }
            return secret == "token" ? AlertSecrets(token: value) : AlertSecrets(password: value)
        case .file(let path):
            let home = environment["HOME"] ?? NSHomeDirectory()
            return try read(path.hasPrefix("~/") ? home + path.dropFirst() : path)
        }
    }

    static func read(_ path: String) throws -> AlertSecrets {
        let text = try PrivateFile.readText(path, key: "The alert's credentials-file")
        var secrets = AlertSecrets()
        for raw in text.split(whereSeparator: \.isNewline) {
            let line = raw.trimmingSpaces
            guard !line.isEmpty, !line.hasPrefix("#"), let eq = line.firstIndex(of: "=") else { continue }
            let key = line[..<eq].trimmingSpaces.lowercased()
            let value = String(line[line.index(after: eq)...].trimmingSpaces)
            switch key {
            case "username", "user": secrets.username = value
            case "password": secrets.password = value
            case "token": secrets.token = value
            default: continue
            }
        }
        guard secrets.password != nil || secrets.token != nil else {
            throw TapedeckError(.configuration, "The alert's credentials-file: \(path) has no password = … or token = … line.")
        }
        return secrets
    }
}
