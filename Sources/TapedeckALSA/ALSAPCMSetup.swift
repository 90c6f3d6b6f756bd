#if ALSA
import CALSA
import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

/// An opened and configured ALSA PCM, as capture and playback streams start from.
struct ALSAOpenedPCM {
    let pcm: OpaquePointer
    let periodFrames: Int
    let bufferFrames: Int
    /// The speakers the device's channel map names, when it has one a WAVE mask can express.
    var layout: ChannelLayout? = nil
}

/// Opening a PCM and negotiating its hardware and software parameters, shared by capture and
/// playback. Everything here runs on the device thread at open time (it allocates and may block).
enum ALSAPCMSetup {
    /// No progress for this long means the device is gone (reads and writes alike).
    static let stallLimitNanos: Int64 = 1_500_000_000
    /// Before a device first moves audio it may take longer to start (a sound server's idle sink
    /// renders ahead by up to 2 s before it honours a new, shorter latency).
    static let startLimitNanos: Int64 = 5_000_000_000

    /// Recovers a PCM after `err`: for a suspend (`-ESTRPIPE`) waits up to about a second for the
    /// device to resume, else prepares it afresh; for anything else `snd_pcm_recover`.
    /// - Returns: ALSA's result (negative: the device could not be recovered).
    /// - Thread: the device thread. May block up to about a second.
    static func recover(_ pcm: OpaquePointer, from err: Int32) -> Int32 {
        guard err == -ESTRPIPE else { return snd_pcm_recover(pcm, err, 1) }
        var result = snd_pcm_resume(pcm)
        var tries = 0
        while result == -EAGAIN && tries < 10 {
            usleep(100_000)
            tries += 1
            result = snd_pcm_resume(pcm)
        }
        return result < 0 ? snd_pcm_prepare(pcm) : result
    }

    /// ALSA's name for one of Tapedeck's sample layouts (they are byte-identical).
    static func alsaFormat(_ format: SampleFormat) -> snd_pcm_format_t {
        switch format {
        case .s16: SND_PCM_FORMAT_S16_LE
        case .s24: SND_PCM_FORMAT_S24_3LE
        case .s32: SND_PCM_FORMAT_S32_LE
        case .f32: SND_PCM_FORMAT_FLOAT_LE
        }
    }

    /// ALSA's text for a negative error code.
    static func describe(_ err: Int32) -> String {
        String(cString: snd_strerror(err))
    }

    /// Opens `device` in blocking mode, negotiates exactly `format`, a period near `periodFrames`
    /// and a buffer of `periods` periods, then switches the handle to non-blocking mode (reads and
    /// writes wait with `snd_pcm_wait` and a timeout, so a vanished device is noticed).
    /// - Thread: the device thread. Blocks while the device opens.
    static func open(device: String, definitions: String?, stream: snd_pcm_stream_t, format: AudioFormat,
                     periodFrames: Int, periods: Int, periodsKey: String) throws -> ALSAOpenedPCM {
        try format.validate()
        let direction = stream == SND_PCM_STREAM_CAPTURE ? "capture" : "playback"
        var handle: OpaquePointer?
        let err = openHandle(&handle, device: device, definitions: definitions, stream: stream)
        guard err >= 0, let pcm = handle else {
            throw openError(err, device: device, direction: direction)
        }
        do {
            let (period, buffer) = try setHardware(pcm, device: device, direction: direction, format: format,
                                                   periodFrames: periodFrames, periods: periods, periodsKey: periodsKey)
            try setSoftware(pcm, device: device, capture: stream == SND_PCM_STREAM_CAPTURE, period: period, buffer: buffer)
            let nb = snd_pcm_nonblock(pcm, 1)
            guard nb >= 0 else {
                throw TapedeckError(.deviceUnavailable,
                    "Could not switch the ALSA device \(device) to non-blocking mode: \(describe(nb)).", systemCode: -nb)
            }
            return ALSAOpenedPCM(pcm: pcm, periodFrames: period, bufferFrames: buffer,
                                 layout: channelLayout(pcm, channels: format.channels))
        } catch {
            snd_pcm_close(pcm)
            throw error
        }
    }

    /// The channel layout of the configured PCM from `snd_pcm_get_chmap`; `nil` (the
    /// conventional layout) when the driver has no channel map, it names unknown positions, or
    /// its order is one a WAVE channel mask cannot express.
    static func channelLayout(_ pcm: OpaquePointer, channels: Int) -> ChannelLayout? {
        guard let map = snd_pcm_get_chmap(pcm) else { return nil }
        defer { free(map) }
        let raw = UnsafeRawPointer(map)
        guard Int(raw.load(as: UInt32.self)) == channels else { return nil }
        var speakers: [ChannelLayout.Speaker] = []
        for i in 0..<channels {
            let position = raw.load(fromByteOffset: 4 * (i + 1), as: UInt32.self) & UInt32(SND_CHMAP_POSITION_MASK)
            guard let speaker = speaker(forChannelPosition: position) else { return nil }
            speakers.append(speaker)
        }
        return ChannelLayout(speakers: speakers)
    }

    /// The speaker of an ALSA `SND_CHMAP_*` position; `nil` for positions without a WAVE bit.
    static func speaker(forChannelPosition position: UInt32) -> ChannelLayout.Speaker? {
        let table: [UInt32: ChannelLayout.Speaker] = [
            SND_CHMAP_MONO.rawValue: .frontCenter, SND_CHMAP_FL.rawValue: .frontLeft, SND_CHMAP_FR.rawValue: .frontRight,
            SND_CHMAP_RL.rawValue: .backLeft, SND_CHMAP_RR.rawValue: .backRight, SND_CHMAP_FC.rawValue: .frontCenter,
            SND_CHMAP_LFE.rawValue: .lowFrequency, SND_CHMAP_SL.rawValue: .sideLeft, SND_CHMAP_SR.rawValue: .sideRight,
            SND_CHMAP_RC.rawValue: .backCenter, SND_CHMAP_FLC.rawValue: .frontLeftOfCenter,
            SND_CHMAP_FRC.rawValue: .frontRightOfCenter, SND_CHMAP_TC.rawValue: .topCenter,
            SND_CHMAP_TFL.rawValue: .topFrontLeft, SND_CHMAP_TFR.rawValue: .topFrontRight,
            SND_CHMAP_TFC.rawValue: .topFrontCenter, SND_CHMAP_TRL.rawValue: .topBackLeft,
            SND_CHMAP_TRR.rawValue: .topBackRight, SND_CHMAP_TRC.rawValue: .topBackCenter,
        ]
        return table[position]
    }

    /// `snd_pcm_open`, or with `definitions` the system configuration plus that text
    /// (`snd_pcm_open_lconf`), so a PCM can be defined without touching `~/.asoundrc`.
    private static func openHandle(_ handle: inout OpaquePointer?, device: String, definitions: String?,
                                   stream: snd_pcm_stream_t) -> Int32 {
        guard let definitions else { return snd_pcm_open(&handle, device, stream, 0) }
        var top: OpaquePointer?
        var err = snd_config_update_ref(&top)
        guard err >= 0, let top else { return err < 0 ? err : -EINVAL }
        defer { snd_config_unref(top) }
        var copy: OpaquePointer?
        err = snd_config_copy(&copy, top)
        guard err >= 0, let copy else { return err < 0 ? err : -ENOMEM }
        defer { snd_config_delete(copy) }
        var input: OpaquePointer?
        let bytes = Array(definitions.utf8)
        err = bytes.withUnsafeBufferPointer { p in
            p.withMemoryRebound(to: CChar.self) { snd_input_buffer_open(&input, $0.baseAddress, $0.count) }
        }
        guard err >= 0, let input else { return err < 0 ? err : -ENOMEM }
        err = snd_config_load(copy, input)
        snd_input_close(input)
        guard err >= 0 else { return err }
        return snd_pcm_open_lconf(&handle, device, stream, 0, copy)
    }

    /// Whether ALSA knows of any sound card (`snd_card_next`).
    static func hasSoundCard() -> Bool {
        var card: Int32 = -1
        return snd_card_next(&card) == 0 && card >= 0
    }

    /// The error for a failed open, naming the device and what to do.
    static func openError(_ err: Int32, device: String, direction: String) -> TapedeckError {
        let missing = [ENOENT, ENODEV, ENXIO].contains(-err)
        let names = missing ? (try? ALSADeviceList.devices().map(\.name)) ?? [] : []
        // A name ALSA knows that opens nothing, on a machine with no card: the usual first run
        // on a server or in a container. Said as that, not as "no such name".
        if missing, names.contains(device), !hasSoundCard() {
            return TapedeckError(.deviceUnavailable,
                "ALSA cannot open \(device): this machine has no sound card ALSA knows of (\(describe(err))). Connect one, or start a sound server.",
                systemCode: -err)
        }
        return switch -err {
        case ENOENT, ENODEV, ENXIO:
            TapedeckError(.deviceUnavailable,
                "No ALSA device named \(device) (\(describe(err)))\(Suggestion.phrase(device, names)). Run `tapedeck devices --backend alsa` to see the names.",
                systemCode: -err)
        case EBUSY:
            TapedeckError(.deviceUnavailable,
                "The ALSA device \(device) is in use by another program; close it, or use a dmix/dsnoop or `pulse` device.",
                systemCode: -err)
        case EACCES, EPERM:
            TapedeckError(.deviceUnavailable,
                "Not allowed to open the ALSA device \(device) for \(direction) (\(describe(err))). Add your user to the `audio` group, or use the `pulse` device.",
                systemCode: -err)
        default:
            TapedeckError(.deviceUnavailable,
                "Could not open the ALSA device \(device) for \(direction): \(describe(err)). Check the name with `tapedeck devices --backend alsa`.",
                systemCode: -err)
        }
    }

    private static func setHardware(_ pcm: OpaquePointer, device: String, direction: String, format: AudioFormat,
                                    periodFrames: Int, periods: Int, periodsKey: String) throws -> (Int, Int) {
        var hwp: OpaquePointer?
        guard snd_pcm_hw_params_malloc(&hwp) >= 0, let hw = hwp else {
            throw TapedeckError(.internalError, "Out of memory while configuring the ALSA device \(device).")
        }
        defer { snd_pcm_hw_params_free(hw) }
        var err = snd_pcm_hw_params_any(pcm, hw)
        guard err >= 0 else {
            throw TapedeckError(.deviceUnavailable, "The ALSA device \(device) reports no usable configuration: \(describe(err)).", systemCode: -err)
        }
        let capabilities = ALSACapabilities(pcm: pcm, hw: hw)
        func refuse(_ what: String) -> TapedeckError {
            TapedeckError(.unsupportedFormat,
                "The ALSA device \(device) cannot \(direction) \(what) (asked for \(format)). It can do \(capabilities). "
                + "Choose a format it supports, or use `plughw:…` (or `plug`) for ALSA to convert.")
        }
        guard snd_pcm_hw_params_set_access(pcm, hw, SND_PCM_ACCESS_RW_INTERLEAVED) >= 0 else {
            throw refuse("with interleaved read/write access")
        }
        guard snd_pcm_hw_params_set_format(pcm, hw, alsaFormat(format.sampleFormat)) >= 0 else {
            throw refuse("\(format.sampleFormat) samples")
        }
        guard snd_pcm_hw_params_set_channels(pcm, hw, UInt32(format.channels)) >= 0 else {
            throw refuse("\(format.channels) channel(s)")
        }
        guard snd_pcm_hw_params_set_rate(pcm, hw, UInt32(format.sampleRate), 0) >= 0 else {
            throw refuse("at \(format.sampleRate) Hz")
        }
        var period = snd_pcm_uframes_t(max(16, periodFrames))
        var dir: Int32 = 0
        _ = snd_pcm_hw_params_set_period_size_near(pcm, hw, &period, &dir)
        var buffer = snd_pcm_uframes_t(Int(period) * max(2, periods))
        _ = snd_pcm_hw_params_set_buffer_size_near(pcm, hw, &buffer)
        err = snd_pcm_hw_params(pcm, hw)
        guard err >= 0 else {
            throw TapedeckError(.unsupportedFormat,
                "The ALSA device \(device) refused \(format) with \(period)-frame periods: \(describe(err)). It can do \(capabilities). "
                + "Try another \(direction).period-frames or \(periodsKey), or use `plughw:…`.", systemCode: -err)
        }
        _ = snd_pcm_hw_params_get_period_size(hw, &period, &dir)
        _ = snd_pcm_hw_params_get_buffer_size(hw, &buffer)
        return (max(1, Int(period)), max(Int(period), Int(buffer)))
    }

    private static func setSoftware(_ pcm: OpaquePointer, device: String, capture: Bool, period: Int, buffer: Int) throws {
        var swp: OpaquePointer?
        guard snd_pcm_sw_params_malloc(&swp) >= 0, let sw = swp else {
            throw TapedeckError(.internalError, "Out of memory while configuring the ALSA device \(device).")
        }
        defer { snd_pcm_sw_params_free(sw) }
        _ = snd_pcm_sw_params_current(pcm, sw)
        _ = snd_pcm_sw_params_set_avail_min(pcm, sw, snd_pcm_uframes_t(period))
        // Capture starts with the first read; playback once the buffer is full (drain starts a short one).
        _ = snd_pcm_sw_params_set_start_threshold(pcm, sw, snd_pcm_uframes_t(capture ? 1 : buffer))
        let err = snd_pcm_sw_params(pcm, sw)
        guard err >= 0 else {
            throw TapedeckError(.deviceUnavailable, "The ALSA device \(device) refused its software parameters: \(describe(err)).", systemCode: -err)
        }
    }
}

/// What a PCM can do, read from a fresh hardware-parameter space, for error messages.
struct ALSACapabilities: CustomStringConvertible {
    var rates: ClosedRange<UInt32>?
    var channels: ClosedRange<UInt32>?
    var formats: [SampleFormat]

    init(pcm: OpaquePointer, hw: OpaquePointer) {
        var lo: UInt32 = 0, hi: UInt32 = 0, dir: Int32 = 0
        if snd_pcm_hw_params_get_rate_min(hw, &lo, &dir) >= 0, snd_pcm_hw_params_get_rate_max(hw, &hi, &dir) >= 0, lo <= hi {
            rates = lo...hi
        }
        if snd_pcm_hw_params_get_channels_min(hw, &lo) >= 0, snd_pcm_hw_params_get_channels_max(hw, &hi) >= 0, lo <= hi {
            channels = lo...hi
        }
        formats = SampleFormat.allCases.filter { snd_pcm_hw_params_test_format(pcm, hw, ALSAPCMSetup.alsaFormat($0)) == 0 }
    }

    var description: String {
        let r = rates.map { $0.lowerBound == $0.upperBound ? "\($0.lowerBound) Hz" : "\($0.lowerBound)–\($0.upperBound) Hz" } ?? "unknown rates"
        let c = channels.map { $0.lowerBound == $0.upperBound ? "\($0.lowerBound) channel(s)" : "\($0.lowerBound)–\($0.upperBound) channels" } ?? "unknown channels"
        let f = formats.isEmpty ? "none of s16, s24, s32, f32" : formats.map(\.rawValue).joined(separator: ", ")
        return "\(r), \(c), sample formats: \(f)"
    }
}
#endif
