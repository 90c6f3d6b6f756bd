#if ALSA
import CALSA
import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

/// An open ALSA capture PCM. Owned by the device thread that opened it.
///
/// The handle is non-blocking: `read` calls `snd_pcm_readi` and, when nothing is ready, waits in
/// `snd_pcm_wait` slices of one period plus 50 ms (at least 100 ms), so a wait normally ends when a
/// period is ready rather than in the middle of one. A read that makes no progress for 1.5 s (two
/// periods, if that is longer; 5 s before the first frames, while a device or server starts)
/// throws `.deviceLost`, so a vanished device or sound server is noticed even when ALSA never
/// reports it.
///
/// Xruns: on `-EPIPE` (overrun) the PCM is recovered and restarted at once; the frames lost are
/// estimated as those still in the buffer at the last successful read plus the audio the device
/// would have captured between that read and the restart (monotonic time × rate, never negative).
/// They are returned as ``CaptureRead/lostFramesBefore`` with the next frames delivered, so the
/// engine fills the gap with silence. `-ESTRPIPE` (suspend) is resumed (or re-prepared) and counted
/// the same way; the monotonic clock does not run during a system suspend.
final class ALSACaptureStream: CaptureStream {
    let format: AudioFormat
    let periodFrames: Int
    let isRealTime = true
    let device: String

    private var pcm: OpaquePointer?
    private let bufferFrames: Int
    private let bytesPerFrame: Int
    /// Whether any frames have arrived yet.
    private var started = false
    /// Monotonic time of the last frames read (or of the last restart after an xrun); 0 before the first read.
    private var lastDataNanos: Int64 = 0
    /// Frames still waiting in the device buffer right after the last successful read.
    private var pendingAfterLastData: Int64 = 0
    /// Frames lost in xruns, owed to the next delivery.
    private var owedLostFrames: Int64 = 0
    /// How long one `snd_pcm_wait` may last, in milliseconds.
    private let waitMillis: Int32
    /// No progress for this long means the device is gone: ``ALSAPCMSetup/stallLimitNanos``, or
    /// two periods when a period is longer than half of that (a read completes once per period).
    private let stallLimitNanos: Int64

    /// The card behind the PCM ("hw:1,0, USB Audio CODEC" for `default` or `plughw:1`); `nil`
    /// for a PCM on no card (the pulse, null or file plugins).
    let deviceName: String?

    init(device: String, opened: ALSAOpenedPCM, format: AudioFormat) {
        self.device = device
        self.deviceName = Self.card(of: opened.pcm, named: device)
        self.pcm = opened.pcm
        self.periodFrames = opened.periodFrames
        self.bufferFrames = opened.bufferFrames
        var format = format
        if let layout = opened.layout { format.layout = layout }
        self.format = format
        self.bytesPerFrame = format.bytesPerFrame
        self.waitMillis = Int32(clamping: max(100, opened.periodFrames * 1000 / max(1, format.sampleRate) + 50))
        self.stallLimitNanos = max(ALSAPCMSetup.stallLimitNanos,
                                   2 * Int64(opened.periodFrames) * 1_000_000_000 / Int64(max(1, format.sampleRate)))
    }

    /// The card and device numbers and the card's name, from `snd_pcm_info`.
    static func card(of pcm: OpaquePointer, named device: String) -> String? {
        var info: OpaquePointer?
        guard snd_pcm_info_malloc(&info) == 0, let info else { return nil }
        defer { snd_pcm_info_free(info) }
        guard snd_pcm_info(pcm, info) == 0 else { return nil }
        let card = snd_pcm_info_get_card(info)
        guard card >= 0 else { return nil }
        let number = "hw:\(card),\(snd_pcm_info_get_device(info))"
        var name: UnsafeMutablePointer<CChar>?
        guard snd_card_get_name(card, &name) == 0, let name else { return number == device ? nil : number }
        defer { free(name) }
        return "\(number), \(String(cString: name))"
    }

    /// Blocks until `min(maxFrames, periodFrames)` frames are captured (fewer only when an xrun
    /// interrupts the period; the gap then comes with the next read).
    /// - Thread: the device thread. Blocks about one period. Does not allocate, lock or log.
    func read(into buffer: UnsafeMutableRawPointer, maxFrames: Int) throws -> CaptureRead {
        guard let pcm else { throw closedError() }
        let want = min(maxFrames, periodFrames)
        guard want > 0 else { return CaptureRead(frames: 0) }
        var got = 0
        var lastProgress = ALSAClock.nanoseconds()
        if lastDataNanos == 0 { lastDataNanos = lastProgress }
        while got < want {
            var r = snd_pcm_readi(pcm, buffer + got * bytesPerFrame, snd_pcm_uframes_t(want - got))
            if r > 0 {
                got += r
                started = true
                lastProgress = ALSAClock.nanoseconds()
                lastDataNanos = lastProgress
                pendingAfterLastData = Int64(max(0, snd_pcm_avail_update(pcm)))
                continue
            }
            if r == 0 || r == -Int(EAGAIN) {
                if ALSAClock.nanoseconds() - lastProgress > (started ? stallLimitNanos : ALSAPCMSetup.startLimitNanos) {
                    throw stalled(started ? "\(Double(stallLimitNanos / 1_000_000) / 1000) s" : "5 s after starting")
                }
                let w = snd_pcm_wait(pcm, waitMillis)
                if w >= 0 { continue }
                r = Int(w)
            }
            if r == -Int(EPIPE) || r == -Int(ESTRPIPE) {
                try recover(pcm, Int32(r))
                if got > 0 { break }  // the gap comes after these frames: owe it to the next read
                continue
            }
            throw failed(Int32(r), "reading")
        }
        let lost = owedLostFrames
        owedLostFrames = 0
        return CaptureRead(frames: got, lostFramesBefore: lost)
    }

    /// Reads what the device has already captured (`snd_pcm_avail`), up to `maxFrames`, without waiting.
    /// - Thread: the device thread. Never blocks.
    func drain(into buffer: UnsafeMutableRawPointer, maxFrames: Int) throws -> CaptureRead {
        guard let pcm else { return CaptureRead(frames: 0) }
        let avail = snd_pcm_avail(pcm)
        let n = min(max(0, avail), maxFrames)
        guard n > 0 else { return CaptureRead(frames: 0) }
        let r = snd_pcm_readi(pcm, buffer, snd_pcm_uframes_t(n))
        guard r > 0 else { return CaptureRead(frames: 0) }
        let lost = owedLostFrames
        owedLostFrames = 0
        return CaptureRead(frames: r, lostFramesBefore: lost)
    }

    /// Closes the PCM. - Thread: the device thread. May block briefly.
    func close() {
        if let pcm { snd_pcm_close(pcm) }
        pcm = nil
    }

    deinit { close() }

    /// Recovers from an overrun or suspend, restarts capture and adds the estimated loss to what
    /// the next delivery owes.
    private func recover(_ pcm: OpaquePointer, _ err: Int32) throws {
        let result = ALSAPCMSetup.recover(pcm, from: err)
        guard result >= 0 else { throw failed(result, err == -EPIPE ? "recovering from an overrun" : "resuming after a suspend") }
        _ = snd_pcm_start(pcm)
        let restart = ALSAClock.nanoseconds()
        owedLostFrames += pendingAfterLastData + ALSAClock.frames(restart - lastDataNanos, rate: format.sampleRate)
        // The timeline is accounted up to the restart: a second xrun before new data is not counted twice.
        lastDataNanos = restart
        pendingAfterLastData = 0
    }

    private func stalled(_ how: String) -> TapedeckError {
        TapedeckError(.deviceLost,
            "The ALSA device \(device) stopped delivering audio: nothing arrived for \(how). The device was unplugged, "
            + "or the sound server behind it stopped. The audio captured before was kept; reconnect the device "
            + "(or restart the sound server) and record again.")
    }

    private func failed(_ err: Int32, _ action: String) -> TapedeckError {
        TapedeckError(.deviceLost,
            "The ALSA device \(device) failed while \(action): \(ALSAPCMSetup.describe(err)). The device was unplugged, "
            + "or the sound server behind it stopped. The audio captured before was kept; reconnect the device "
            + "(or restart the sound server) and record again.", systemCode: -err)
    }

    private func closedError() -> TapedeckError {
        TapedeckError(.internalError, "The ALSA capture stream for \(device) was read after it was closed.")
    }
}
#endif
