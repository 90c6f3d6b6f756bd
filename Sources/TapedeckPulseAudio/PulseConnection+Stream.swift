#if PulseAudio
import CPulse
import TapedeckCore

extension PulseConnection {
    /// Creates a stream in exactly `format` (its channel layout as the stream's channel map), connects it for recording or playback with
    /// `attributes` and `flags`, waits (bounded) until it is ready, and checks that the server
    /// kept the requested sample spec.
    /// - Thread: owner. Blocks up to ``openTimeoutNanos``.
    /// - Throws: `.deviceUnavailable` naming the device and what to do; `.unsupportedFormat` if the
    ///   server changed the spec.
    func openStream(format: AudioFormat, attributes: pa_buffer_attr, flags: pa_stream_flags_t) throws -> OpaquePointer {
        try format.validate()
        var spec = PulseFormat.sampleSpec(format)
        guard pa_sample_spec_valid(&spec) != 0 else {
            throw TapedeckError(.unsupportedFormat, "PulseAudio cannot carry \(format). Use 1 to 32 channels at 8000 to 192000 Hz.")
        }
        var channels = PulseFormat.channelMap(format)
        guard let stream = pa_stream_new(context, settings.streamName, &spec, &channels) else {
            let reason = errorText()
            throw TapedeckError(.deviceUnavailable, "PulseAudio refused to create a stream for \(format) (\(reason)).")
        }
        let userdata = events.userdata
        pa_stream_set_overflow_callback(stream, PulseEvents.streamOverflow, userdata)
        pa_stream_set_underflow_callback(stream, PulseEvents.streamUnderflow, userdata)
        var attr = attributes
        let device: String? = settings.device.isEmpty ? nil : settings.device
        let rc: Int32 = switch settings.role {
        case .capture: pa_stream_connect_record(stream, device, &attr, flags)
        case .playback: pa_stream_connect_playback(stream, device, &attr, flags, nil, nil)
        }
        let early = rc < 0 ? errorText() : nil
        if let early {
            closeStream(stream)
            throw noDevice(early, code: errorCode)
        }
        let finished = wait(nanoseconds: Self.openTimeoutNanos) {
            let s = pa_stream_get_state(stream)
            return s != PA_STREAM_CREATING && s != PA_STREAM_UNCONNECTED || !contextIsGood
        }
        let ready = pa_stream_get_state(stream) == PA_STREAM_READY
        let reason = errorText()
        let code = errorCode
        let contextGood = contextIsGood
        let actual = pa_stream_get_sample_spec(stream)?.pointee
        guard ready else {
            closeStream(stream)
            if !contextGood {
                throw TapedeckError(.deviceUnavailable,
                    "The PulseAudio server at \(settings.serverLabel) went away while opening \(settings.deviceLabel) (\(reason.lowercased())). Is it running? \(settings.serverAdvice).")
            }
            if !finished {
                throw TapedeckError(.deviceUnavailable,
                    "PulseAudio did not open \(settings.deviceLabel) within \(Self.openTimeoutNanos / 1_000_000_000) s. Check \(settings.key(PulseKeys.device(settings.role))), or run `tapedeck devices --backend pulse`.")
            }
            throw noDevice(reason, code: code)
        }
        guard let actual, PulseFormat.equal(actual, spec) else {
            closeStream(stream)
            let got = actual.map(PulseFormat.describe) ?? "nothing"
            throw TapedeckError(.unsupportedFormat,
                "PulseAudio offered \(got) on \(settings.deviceLabel) instead of the requested \(PulseFormat.describe(spec)); Tapedeck never records or plays in another format without saying so. Set format.* to \(got), or pick another device.")
        }
        return stream
    }

    private func noDevice(_ reason: String, code: Int32) -> TapedeckError {
        if code == Int32(PA_ERR_NOENTITY.rawValue) {
            if settings.device.isEmpty {
                return TapedeckError(.deviceUnavailable,
                    "The PulseAudio server at \(settings.serverLabel) has no default \(settings.deviceKind). Set \(settings.key(PulseKeys.device(settings.role))); run `tapedeck devices --backend pulse` to list them.",
                    systemCode: code)
            }
            let names = try? PulseDeviceList.list(settings: settings)
            let known = ((names?.sources ?? []) + (names?.sinks ?? [])).map(\.name)
            return TapedeckError(.deviceUnavailable,
                "No \(settings.deviceKind) named \"\(settings.device)\" on the PulseAudio server at \(settings.serverLabel)\(Suggestion.phrase(settings.device, known)). Run `tapedeck devices --backend pulse` to list them, and set \(settings.key(PulseKeys.device(settings.role))).",
                systemCode: code)
        }
        return TapedeckError(.deviceUnavailable,
            "PulseAudio could not open \(settings.deviceLabel) (\(reason.lowercased())). Check \(settings.key(PulseKeys.device(settings.role))), or run `tapedeck devices --backend pulse`.",
            systemCode: code)
    }

    /// Whether the stream (and its context) is still usable. - Thread: owner.
    func streamIsGood(_ stream: OpaquePointer) -> Bool {
        let s = pa_stream_get_state(stream)
        return s != PA_STREAM_FAILED && s != PA_STREAM_TERMINATED && contextIsGood
    }

    /// The error a stream that went bad reports. - Thread: owner.
    func lostError(_ what: String) -> TapedeckError {
        // What became of the audio is the caller's to say (the recorder says what it kept).
        let kept = settings.role == .capture ? "" : " Playback stopped."
        if contextIsGood {
            return TapedeckError(.deviceLost,
                "The PulseAudio \(settings.deviceKind) \(settings.deviceLabel) went away (\(errorText().lowercased())) while \(what) it.\(kept)",
                systemCode: errorCode)
        }
        return TapedeckError(.deviceLost,
            "The PulseAudio server went away (\(errorText().lowercased())) while \(what) \(settings.deviceLabel) at \(settings.serverLabel).\(kept)",
            systemCode: errorCode)
    }

    /// Clears the stream's callbacks, disconnects and releases it.
    /// - Thread: owner. Never blocks.
    func closeStream(_ stream: OpaquePointer) {
        pa_stream_set_overflow_callback(stream, nil, nil)
        pa_stream_set_underflow_callback(stream, nil, nil)
        if pa_stream_get_state(stream) == PA_STREAM_READY || pa_stream_get_state(stream) == PA_STREAM_CREATING {
            pa_stream_disconnect(stream)
        }
        pa_stream_unref(stream)
    }
}
#endif
