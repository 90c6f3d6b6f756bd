#if ALSA
import CALSA
import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

/// The PCM devices ALSA's configuration and cards advertise (`snd_device_name_hint`).
enum ALSADeviceList {
    /// Every PCM hint, with its direction (`IOID` absent means both) and description.
    /// - Thread: any. May block briefly while ALSA reads its configuration.
    /// - Throws: `.deviceUnavailable` when ALSA cannot list devices.
    static func devices() throws -> [AudioDevice] {
        var hints: UnsafeMutablePointer<UnsafeMutableRawPointer?>?
        let err = snd_device_name_hint(-1, "pcm", &hints)
        guard err >= 0, let hints else {
            throw TapedeckError(.deviceUnavailable,
                "ALSA could not list its devices: \(ALSAPCMSetup.describe(err)). Check the ALSA configuration (/etc/asound.conf, ~/.asoundrc).",
                systemCode: -err)
        }
        defer { snd_device_name_free_hint(hints) }
        // The configuration tree once, for every hint's type.
        var top: OpaquePointer?
        let config = snd_config_update_ref(&top) >= 0 ? top : nil
        defer { if let config { snd_config_unref(config) } }
        var result: [AudioDevice] = []
        var seen: Set<String> = []
        var index = 0
        while let hint = hints[index] {
            index += 1
            guard let name = value(hint, "NAME"), !name.isEmpty, seen.insert(name).inserted else { continue }
            let description = (value(hint, "DESC") ?? name)
                .split(whereSeparator: \.isNewline)
                .map { String($0.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed()) }
                .filter { !$0.isEmpty }.joined(separator: " — ")
            let ioid = value(hint, "IOID")
            var device = AudioDevice(name: name, description: description,
                                     canCapture: ioid == nil || ioid == "Input",
                                     canPlay: ioid == nil || ioid == "Output",
                                     isDefault: name == "default")
            device.isProcessingStage = config.map { isProcessingStage(name, in: $0) } ?? false
            result.append(device)
        }
        // `default` is defined by alsa.conf itself and usually carries no hint; list it when the
        // configuration defines it (on a machine without cards it may still fail to open).
        if !seen.contains("default") && isDefined("pcm.default") {
            result.insert(AudioDevice(name: "default", description: "The system's default ALSA device",
                                      canCapture: true, canPlay: true, isDefault: true), at: 0)
        }
        return result
    }

    /// The PCM types that convert or process in front of another device (alsa-plugins' rate
    /// converters, speex, up- and downmixers, the OSS emulation, the null sink) rather than
    /// reach a card or a sound server, as `pcm.NAME.type` says.
    static let processingTypes: Set<String> = ["rate", "speex", "upmix", "vdownmix", "oss", "null", "a52", "lavrate", "samplerate"]

    /// Whether PCM `name` (its part before any `:`) is of one of ``processingTypes``.
    private static func isProcessingStage(_ name: String, in top: OpaquePointer) -> Bool {
        let base = name.split(separator: ":", maxSplits: 1).first.map(String.init) ?? name
        var node: OpaquePointer?
        guard snd_config_search(top, "pcm.\(base).type", &node) >= 0, let node else { return false }
        var text: UnsafePointer<CChar>?
        guard snd_config_get_string(node, &text) >= 0, let text else { return false }
        return processingTypes.contains(String(cString: text))
    }

    /// Whether the ALSA configuration has a node at `key` (e.g. `pcm.default`).
    private static func isDefined(_ key: String) -> Bool {
        var top: OpaquePointer?
        guard snd_config_update_ref(&top) >= 0, let top else { return false }
        defer { snd_config_unref(top) }
        var node: OpaquePointer?
        return snd_config_search(top, key, &node) >= 0
    }

    private static func value(_ hint: UnsafeMutableRawPointer, _ id: String) -> String? {
        guard let text = snd_device_name_get_hint(hint, id) else { return nil }
        defer { free(text) }
        return String(cString: text)
    }
}
#endif
