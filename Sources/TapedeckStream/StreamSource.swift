import Foundation
import TapedeckCore
import TapedeckStreamFormats

/// The URL of a network stream as the user wrote it, split into what is sent and what is shown:
/// credentials (`http://user:pass@host/…`, or the password from `password-env`) go into the
/// request's `Authorization` header only; every message, log line and take names ``shown``,
/// which has none. A plain value; any thread.
struct StreamSource: Sendable, Hashable {
    /// The URL without user or password: what messages and the take's files name.
    let shown: String
    /// The URL the request goes to (no user information: that is in ``authorization``).
    let requestURL: String
    /// `Basic …`, when a user is given.
    let authorization: String?

    /// - Parameters:
    ///   - text: the `device` setting (or `-D`).
    ///   - password: the password from `password-env`, which wins over one in the URL.
    ///   - key: how messages name the setting.
    /// - Throws: `.configuration` for a URL Tapedeck cannot use, naming the setting and an example.
    init(_ text: String, password: String?, key: String) throws {
        let example = "for example \(key)=http://radio.example:8000/live.ogg"
        guard !text.isEmpty else {
            throw TapedeckError(.configuration, "\(key) is empty: name the stream's URL (\(example), or -D URL).")
        }
        guard var parts = URLComponents(string: text), let scheme = parts.scheme?.lowercased(),
              let host = parts.host, !host.isEmpty else {
            throw TapedeckError(.configuration, "\(key): \"\(Credentials.hidden(in: text))\" is not a URL (\(example)).")
        }
        guard scheme == "http" || scheme == "https" else {
            throw TapedeckError(.configuration, "\(key): the stream backend reads http:// and https:// URLs, not \(scheme):// (\(example)).")
        }
        let user = parts.user.map { $0.removingPercentEncoding ?? $0 }
        let secret = password ?? parts.password.map { $0.removingPercentEncoding ?? $0 }
        parts.user = nil
        parts.password = nil
        parts.scheme = scheme
        guard let bare = parts.string else {
            throw TapedeckError(.configuration, "\(key): \"\(Credentials.hidden(in: text))\" is not a URL (\(example)).")
        }
        shown = bare
        requestURL = bare
        if user != nil || secret != nil {
            let pair = "\(user ?? ""):\(secret ?? "")"
            authorization = "Basic " + Data(pair.utf8).base64EncodedString()
        } else {
            authorization = nil
        }
    }
}

extension DeviceSection {
    /// A duration setting (`5s`, `20ms`) in seconds. - Throws: `.configuration` naming the key and the forms accepted.
    func seconds(_ setting: Setting<String>) throws -> Double {
        do {
            return try DurationText.seconds(self[setting], flag: key(setting))
        } catch let error as TapedeckError {
            throw TapedeckError(.configuration, error.message)
        }
    }
}
