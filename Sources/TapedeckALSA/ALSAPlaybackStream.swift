#if ALSA
import CALSA
import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

/// An open ALSA playback PCM. Owned by the device thread that opened it.
///
/// Non-blocking like capture: `write` waits in 100 ms `snd_pcm_wait` slices and throws `.deviceLost`
/// after 1.5 s without progress (5 s until the device is first seen taking audio). Underruns (`-EPIPE`) and suspends (`-ESTRPIPE`) are recovered; the
/// silence the device played is estimated as the time from the moment the queued audio ran out
/// (last write + what was still queued) to the recovery, plus the time until the stream runs again
/// (playback restarts once the buffer is full), and returned from the write that notices it.
final class ALSAPlaybackStream: PlaybackStream {
    let format: AudioFormat
    let periodFrames: Int
    let isRealTime = true
    let device: String

    private var pcm: OpaquePointer?
    private let bufferFrames: Int
    private let bytesPerFrame: Int
    /// Monotonic time of the last frames queued.
    private var lastWriteNanos: Int64 = 0
    /// Frames still queued right after the last successful write.
    private var queuedAfterLastWrite: Int64 = 0
    /// Whether the device has been seen taking audio (a write progressed after waiting); until then
    /// the longer start limit applies.
    private var consuming = false
    /// When the stream was recovered from an underrun and is not yet running again (0: running).
    private var recoveredAtNanos: Int64 = 0

    /// The card behind the PCM (see ``ALSACaptureStream/card(of:named:)``).
    let deviceName: String?

    init(device: String, opened: ALSAOpenedPCM, format: AudioFormat) {
        self.device = device
        self.deviceName = ALSACaptureStream.card(of: opened.pcm, named: device)
        self.pcm = opened.pcm
        self.periodFrames = opened.periodFrames
        self.bufferFrames = opened.bufferFrames
        self.format = format
        self.bytesPerFrame = format.bytesPerFrame
    }

    /// Blocks until all `frames` are queued to the device.
    /// - Thread: the device thread. Blocks about one period. Does not allocate, lock or log.
    /// - Returns: frames of silence the device played since the previous write (underruns).
    func write(_ buffer: UnsafeRawPointer, frames: Int) throws -> Int64 {
        guard let pcm else { throw TapedeckError(.internalError, "The ALSA playback stream for \(device) was written after it was closed.") }
        var done = 0
        var silence: Int64 = 0
        var lastProgress = ALSAClock.nanoseconds()
        var waited = false
        while done < frames {
            var r = snd_pcm_writei(pcm, buffer + done * bytesPerFrame, snd_pcm_uframes_t(frames - done))
            if r > 0 {
                done += r
                if waited { consuming = true }
                lastProgress = ALSAClock.nanoseconds()
                lastWriteNanos = lastProgress
                queuedAfterLastWrite = Int64(max(0, bufferFrames - max(0, snd_pcm_avail_update(pcm))))
                continue
            }
            if r == 0 || r == -Int(EAGAIN) {
                let limit = consuming ? ALSAPCMSetup.stallLimitNanos : ALSAPCMSetup.startLimitNanos
                if ALSAClock.nanoseconds() - lastProgress > limit { throw stalled(consuming ? "1.5 s" : "5 s after starting") }
                waited = true
                let w = snd_pcm_wait(pcm, 100)
                if w >= 0 { continue }
                r = Int(w)
            }
            if r == -Int(EPIPE) || r == -Int(ESTRPIPE) {
                silence += try recover(pcm, Int32(r))
                continue
            }
            throw failed(Int32(r), "writing")
        }
        if recoveredAtNanos != 0 && snd_pcm_state(pcm) == SND_PCM_STATE_RUNNING {
            silence += ALSAClock.frames(ALSAClock.nanoseconds() - recoveredAtNanos, rate: format.sampleRate)
            recoveredAtNanos = 0
        }
        return silence
    }

    /// Blocks until everything written has been played (`snd_pcm_drain`).
    /// - Thread: the device thread. Blocks for up to one buffer.
    func drain() throws {
        guard let pcm else { return }
        _ = snd_pcm_nonblock(pcm, 0)
        defer { _ = snd_pcm_nonblock(pcm, 1) }
        let err = snd_pcm_drain(pcm)
        if err < 0 && err != -EPIPE { throw failed(err, "draining") }
    }

    /// Closes the PCM. - Thread: the device thread. May block briefly.
    func close() {
        if let pcm { snd_pcm_close(pcm) }
        pcm = nil
    }

    deinit { close() }

    /// Recovers from an underrun or suspend; returns the silence played until now.
    private func recover(_ pcm: OpaquePointer, _ err: Int32) throws -> Int64 {
        let result = ALSAPCMSetup.recover(pcm, from: err)
        guard result >= 0 else { throw failed(result, err == -EPIPE ? "recovering from an underrun" : "resuming after a suspend") }
        let now = ALSAClock.nanoseconds()
        let ranDry = lastWriteNanos + queuedAfterLastWrite * 1_000_000_000 / Int64(format.sampleRate)
        let silence = lastWriteNanos == 0 || recoveredAtNanos != 0 ? 0 : ALSAClock.frames(now - ranDry, rate: format.sampleRate)
        if recoveredAtNanos == 0 { recoveredAtNanos = now }
        queuedAfterLastWrite = 0
        return silence
    }

    private func stalled(_ how: String) -> TapedeckError {
        TapedeckError(.deviceLost,
            "The ALSA device \(device) stopped taking audio: nothing was played for \(how). The device was unplugged, "
            + "or the sound server behind it stopped. Reconnect it (or restart the sound server) and play again.")
    }

    private func failed(_ err: Int32, _ action: String) -> TapedeckError {
        TapedeckError(.deviceLost,
            "The ALSA device \(device) failed while \(action): \(ALSAPCMSetup.describe(err)). The device was unplugged, "
            + "or the sound server behind it stopped. Reconnect it (or restart the sound server) and play again.",
            systemCode: -err)
    }
}
#endif
