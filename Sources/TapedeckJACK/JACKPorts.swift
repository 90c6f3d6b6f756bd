#if JACK
import CJACK
import CJACKStream
import Foundation
import TapedeckCore

/// Finding JACK ports: listing them for `tapedeck devices` and resolving the `device` setting
/// into the ports to connect, one per channel. Every function runs on the calling thread and
/// talks to the server (a few round trips, milliseconds).
enum JACKPorts {
    /// Audio ports of the server that the direction connects to: outputs (sources) to record
    /// from, inputs (sinks) to play to.
    static func flags(_ role: DeviceRole) -> UInt {
        UInt(role == .capture ? JackPortIsOutput.rawValue : JackPortIsInput.rawValue)
    }

    /// Names from `jack_get_ports`, in natural order (`system:capture_2` before
    /// `system:capture_10`): JACK lists ports in the order of its port table, which reuses the
    /// slots of clients that left, so its own order is not the order they were made in.
    static func names(_ client: OpaquePointer, pattern: String?, flags: UInt) -> [String] {
        unsorted(client, pattern: pattern, flags: flags).sorted(by: naturalOrder)
    }

    /// Whether `a` comes before `b` when runs of digits compare as numbers.
    static func naturalOrder(_ a: String, _ b: String) -> Bool {
        func runs(_ text: String) -> [(String, Int?)] {
            var out: [(String, Int?)] = []
            var current = ""
            var digits = false
            for c in text {
                let isDigit = c.isASCII && c.isNumber
                if !current.isEmpty && isDigit != digits {
                    out.append((current, digits ? Int(current) : nil))
                    current = ""
                }
                digits = isDigit
                current.append(c)
            }
            if !current.isEmpty { out.append((current, digits ? Int(current) : nil)) }
            return out
        }
        for (x, y) in zip(runs(a), runs(b)) where x.0 != y.0 {
            if let m = x.1, let n = y.1, m != n { return m < n }
            return x.0 < y.0
        }
        return a.count < b.count
    }

    private static func unsorted(_ client: OpaquePointer, pattern: String?, flags: UInt) -> [String] {
        guard let list = jack_get_ports(client, pattern, JACK_DEFAULT_AUDIO_TYPE, flags) else { return [] }
        defer { jack_free(UnsafeMutableRawPointer(mutating: list)) }
        var out: [String] = []
        var i = 0
        while let name = list[i] {
            out.append(String(cString: name))
            i += 1
        }
        return out
    }

    /// The ports `settings.device` names, in order (see `JACKBackend.deviceHelp`); empty for `none`.
    /// - Throws: `.deviceUnavailable` naming the setting, what matched nothing, and the ports there are.
    static func resolve(_ settings: JACKBackend, client: OpaquePointer, ownClient: String) throws -> [String] {
        let spec = settings.section.device.trimmingCharacters(in: .whitespaces)
        let wanted = flags(settings.role)
        let direction = settings.role == .capture ? "capture" : "playback"
        if spec.lowercased() == "none" { return [] }
        if spec.isEmpty {
            let physical = names(client, pattern: nil, flags: wanted | UInt(JackPortIsPhysical.rawValue))
            guard !physical.isEmpty else {
                throw TapedeckError(.deviceUnavailable,
                    "\(settings.serverLabel.capitalizedFirst) has no physical \(direction) ports (a server started with `-d dummy` or `-d net` may have none). Name the ports with \(settings.section.deviceKey) (`tapedeck devices` lists them), or `none` to connect them yourself.")
            }
            return physical
        }
        var ports: [String] = []
        for item in spec.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !item.isEmpty {
            if let port = jack_port_by_name(client, item) {
                guard UInt(bitPattern: Int(jack_port_flags(port))) & wanted != 0 else {
                    throw TapedeckError(.deviceUnavailable,
                        "\(settings.section.deviceKey): \(item) is \(settings.role == .capture ? "an input (it plays)" : "an output (it records)"); \(settings.role == .capture ? "record from an output port such as system:capture_1" : "play to an input port such as system:playback_1"). `tapedeck devices` lists them.")
                }
                ports.append(item)
                continue
            }
            let isClientName = !item.contains(":") && item.allSatisfy { $0.isLetter || $0.isNumber || "-_ .".contains($0) }
            let pattern = isClientName ? "^" + escapedPattern(item) + ":" : item
            let matched = names(client, pattern: pattern, flags: wanted).filter { !$0.hasPrefix(ownClient + ":") }
            guard !matched.isEmpty else {
                let available = names(client, pattern: nil, flags: wanted).filter { !$0.hasPrefix(ownClient + ":") }
                let list = available.isEmpty ? "it has none" : "it has " + available.prefix(8).joined(separator: ", ") + (available.count > 8 ? ", …" : "")
                throw TapedeckError(.deviceUnavailable,
                    "\(settings.section.deviceKey): no \(direction) port of \(settings.serverLabel) matches \"\(item)\" (\(list)). Name one that `tapedeck devices` lists, or leave it empty for the physical ports.")
            }
            ports.append(contentsOf: matched)
        }
        return ports
    }

    /// Which of `ports` feeds (or takes) each of `channels` channels.
    /// - Throws: `.unsupportedFormat` when more than one port but fewer than the channels matched.
    static func assign(_ ports: [String], channels: Int, settings: JACKBackend) throws -> [[String]] {
        if ports.isEmpty { return Array(repeating: [], count: channels) }
        if ports.count == 1 { return Array(repeating: ports, count: channels) }
        guard ports.count >= channels else {
            throw TapedeckError(.unsupportedFormat,
                "\(settings.section.deviceKey) gives \(ports.count) ports (\(ports.joined(separator: ", "))) for \(channels) channels. Use \(ports.count) channels (-c \(ports.count), or format.channels: \(ports.count)), or name \(channels) ports.")
        }
        return ports.prefix(channels).map { [$0] }
    }

    /// `text` matched literally in a POSIX extended regular expression (JACK's port patterns).
    static func escapedPattern(_ text: String) -> String {
        var out = ""
        for c in text {
            if "\\^$.|?*+()[]{}".contains(c) { out.append("\\") }
            out.append(c)
        }
        return out
    }

    /// What a failed `jack_client_open` means, and what to do.
    static func openError(_ status: Int32, settings: JACKBackend) -> TapedeckError {
        var detail = [CChar](repeating: 0, count: 512)
        _ = tapedeck_jack_last_error(&detail, Int32(detail.count))
        let said = String(decoding: detail.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let bits = UInt32(bitPattern: status)
        if bits & JackServerFailed.rawValue != 0 || bits & JackServerError.rawValue != 0 {
            // libjack's own last words here are about its shared memory ("Init not done for -1"):
            // nothing a user can act on, so they are left out.
            return TapedeckError(.deviceUnavailable,
                "\(settings.serverLabel.capitalizedFirst) is not running. Start it (jackd, qjackctl, or PipeWire's JACK server through pw-jack), name another with \(settings.section.key(JACKBackend.server)), or choose another \(settings.role == .capture ? "capture" : "playback") backend (`tapedeck backends` lists them).")
        }
        if bits & JackVersionError.rawValue != 0 {
            return TapedeckError(.deviceUnavailable, "\(settings.serverLabel.capitalizedFirst) speaks another version of the JACK protocol than this libjack. Install matching JACK packages.")
        }
        return TapedeckError(.deviceUnavailable,
            "Could not become a client of \(settings.serverLabel) (JACK status 0x\(String(bits, radix: 16))\(said.isEmpty ? "" : ": \(said)")). Check that the server runs (jack_lsp lists its ports).")
    }
}

extension String {
    var capitalizedFirst: String { prefix(1).uppercased() + dropFirst() }
}
#endif
