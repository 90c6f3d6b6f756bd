import Foundation
import TapedeckCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where the S3 remote's key pair comes from: the environment variables its settings name,
/// else a credentials file in the AWS format that only its owner may read. Never the config
/// file itself. Every member runs on any thread; ``load(_:context:environment:)`` reads the file.
enum S3CredentialSource {
    /// - Throws: `.configuration` saying which variables or file to set, or what is wrong with the file.
    static func load(_ settings: S3Settings, context: PluginContext, environment: [String: String]) throws -> S3Credentials {
        if let id = environment[settings.accessKeyEnv], !id.isEmpty, let secret = environment[settings.secretKeyEnv], !secret.isEmpty {
            let token = environment["AWS_SESSION_TOKEN"].flatMap { $0.isEmpty ? nil : $0 }
            return S3Credentials(accessKeyID: id, secretAccessKey: secret, sessionToken: settings.accessKeyEnv == "AWS_ACCESS_KEY_ID" ? token : nil)
        }
        guard !settings.credentialsFile.isEmpty else {
            throw TapedeckError(.configuration, "No S3 credentials: set the environment variables \(settings.accessKeyEnv) and \(settings.secretKeyEnv), or name a credentials file (chmod 600) with --set \(context.key(S3Settings.credentialsFile))=FILE.")
        }
        return try read(settings.credentialsFile, profile: settings.profile, key: context.key(S3Settings.credentialsFile))
    }

    /// Reads `[profile]`'s `aws_access_key_id`, `aws_secret_access_key` and optional
    /// `aws_session_token` from the file at `path`, which must be a regular file (not a link)
    /// owned by this user and readable by nobody else.
    static func read(_ path: String, profile: String, key: String) throws -> S3Credentials {
        let text = try PrivateFile.readText(path, key: key)
        var section = ""
        var values: [String: String] = [:]
        for raw in text.split(whereSeparator: \.isNewline) {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("["), line.hasSuffix("]") {
                section = String(line.dropFirst().dropLast()).trimmingCharacters(in: .whitespaces)
                if section.hasPrefix("profile ") { section = String(section.dropFirst(8)).trimmingCharacters(in: .whitespaces) }
                continue
            }
            guard section == profile, let eq = line.firstIndex(of: "=") else { continue }
            values[line[..<eq].trimmingCharacters(in: .whitespaces).lowercased()] = line[line.index(after: eq)...].trimmingCharacters(in: .whitespaces)
        }
        guard let id = values["aws_access_key_id"], !id.isEmpty, let secret = values["aws_secret_access_key"], !secret.isEmpty else {
            throw TapedeckError(.configuration, "\(key): \(path) has no [\(profile)] section with aws_access_key_id and aws_secret_access_key.")
        }
        return S3Credentials(accessKeyID: id, secretAccessKey: secret, sessionToken: values["aws_session_token"].flatMap { $0.isEmpty ? nil : $0 })
    }
}
