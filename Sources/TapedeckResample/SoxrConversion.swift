import CSoxr
public import TapedeckCore

/// Sample-rate conversion over libsoxr, at its very high quality (28-bit, linear phase, 95%
/// bandwidth): the resampler ffmpeg and sox offer as their best, a well-kept library in every
/// distribution, and one that streams (no whole-file buffer). libsamplerate was the other
/// candidate; at its best setting it is several times slower for less stop-band rejection.
public struct SoxrConversion: SampleRateConversion {
    /// - Thread: any. Does not block.
    public init() {}

    /// The linked libsoxr, e.g. `libsoxr 0.1.3`. - Thread: any; never blocks.
    public static var library: String { String(cString: soxr_version()).replacingOccurrences(of: "libsoxr-", with: "libsoxr ") }

    /// `libsoxr VERSION, very high quality`. - Thread: any. Does not block.
    public var name: String { "\(String(cString: soxr_version())), very high quality" }

    /// - Thread: any. Does not block.
    public func makeConverter(from inputRate: Int, to outputRate: Int, channels: Int) throws -> any SampleRateConverter {
        try SoxrConverter(from: inputRate, to: outputRate, channels: channels)
    }
}

/// One libsoxr stream. Single owner, not `Sendable`; never blocks.
final class SoxrConverter: SampleRateConverter {
    private var handle: soxr_t?
    private let channels: Int

    init(from inputRate: Int, to outputRate: Int, channels: Int) throws {
        self.channels = channels
        var io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I)
        var quality = soxr_quality_spec(UInt(SOXR_VHQ), 0)
        var error: soxr_error_t?
        handle = soxr_create(Double(inputRate), Double(outputRate), UInt32(channels), &error, &io, &quality, nil)
        if let error {
            throw TapedeckError(.unsupportedFormat, "Cannot convert \(inputRate) Hz to \(outputRate) Hz: libsoxr says \(String(cString: error)).")
        }
        guard handle != nil else { throw TapedeckError(.internalError, "libsoxr made no resampler for \(inputRate) Hz to \(outputRate) Hz.") }
    }

    deinit { soxr_delete(handle) }

    func process(_ input: UnsafePointer<Float>?, frames: Int, into output: UnsafeMutablePointer<Float>, capacity: Int) throws -> Int {
        var used = 0, made = 0
        let error = soxr_process(handle, input.map { UnsafeRawPointer($0) }, input == nil ? 0 : frames, &used, UnsafeMutableRawPointer(output), capacity, &made)
        if let error { throw TapedeckError(.internalError, "libsoxr failed: \(String(cString: error)).") }
        if input != nil && used != frames {
            throw TapedeckError(.internalError, "libsoxr took \(used) of \(frames) frames: the output buffer was too small.")
        }
        return made
    }
}
