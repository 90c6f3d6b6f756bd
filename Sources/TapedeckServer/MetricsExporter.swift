import Foundation
import Prometheus
import TapedeckApp
import TapedeckCore

/// `GET /metrics`: the recorder, the library and the alerts in Prometheus' text exposition
/// format, made by swift-prometheus' collector registry (never written by hand). Each scrape sets
/// the gauges from what the server knows at that moment (``LiveSnapshot``, the library's sessions,
/// the alerts' outbox) and emits them; a series that no longer applies (a channel the recording
/// no longer has) is removed from the registry.
///
/// Runs on the main actor, where the snapshot and the library live; a scrape never blocks (the
/// sessions are the ones the server holds).
@MainActor
final class MetricsExporter {
    private let registry = PrometheusCollectorRegistry()
    private var gauges: [String: Gauge] = [:]
    private var channelGauges: [Gauge] = []
    private var rmsGauges: [Gauge] = []
    private lazy var deletedTakes = registry.makeCounter(descriptor: MetricNameDescriptor(metricName: "tapedeck_retention_deleted_takes",
        unitName: "total", helpText: "Takes retention deleted from this library (`tapedeck retention`), since it first ran."))
    private lazy var deletedBytes = registry.makeCounter(descriptor: MetricNameDescriptor(metricName: "tapedeck_retention_deleted_bytes",
        unitName: "total", helpText: "Bytes of audio retention deleted from this library, since it first ran."))
    private var counted: (takes: Int, bytes: Int64) = (0, 0)

    /// What a scrape reads besides the live state.
    struct Facts {
        /// `nil` where the library is not read (`record --metrics`): those series are left out.
        var takesByState: [TakeState: Int]?
        var sessionCount: Int?
        var secondsSinceFrames: Double?
        var alertsWaiting: Int
        /// What retention has deleted, from its state file.
        var retentionDeleted: (takes: Int, bytes: Int64)
        var oldestAlertSeconds: Double?
        /// `nil` without a remote.
        var uploadBacklog: UploadBacklog?
        var healthy: Bool
        var version: String
    }

    private func gauge(_ name: String, _ help: String, _ labels: [(String, String)] = []) -> Gauge {
        let key = name + labels.map { "|\($0.0)=\($0.1)" }.joined()
        if let gauge = gauges[key] { return gauge }
        // The whole name is the metric's (the unit is part of it, as `_bytes`, `_seconds`).
        let gauge = registry.makeGauge(descriptor: MetricNameDescriptor(metricName: name, unitName: "", helpText: help), labels: labels)
        gauges[key] = gauge
        return gauge
    }

    /// The exposition of `state` and `facts`.
    func scrape(_ state: LiveSnapshot, _ facts: Facts) -> [UInt8] {
        gauge("tapedeck_info", "Tapedeck's version, as a label; always 1.", [("version", facts.version)]).set(to: 1)
        gauge("tapedeck_healthy", "1 when /api/health answers 200, 0 when it answers 503 (it says why).").set(to: facts.healthy ? 1 : 0)
        recorder(state, facts)
        let free = state.freeBytes.map(Double.init) ?? .nan
        gauge("tapedeck_disk_free_bytes", "Free bytes on the library's disk.").set(to: free)
        gauge("tapedeck_disk_seconds_left", "Seconds of audio the library's disk holds at the format recorded (or configured).").set(to: state.secondsLeft ?? .nan)
        if let takes = facts.takesByState {
            for takeState in TakeState.allCases {
                gauge("tapedeck_takes", "Takes in the library, by state (as `tapedeck list --json` gives them).", [("state", takeState.rawValue)])
                    .set(to: Double(takes[takeState] ?? 0))
            }
        }
        if let sessions = facts.sessionCount { gauge("tapedeck_sessions", "Sessions in the library.").set(to: Double(sessions)) }
        gauge("tapedeck_alerts_waiting", "Alerts waiting in the outbox to be sent (a route that does not take them).").set(to: Double(facts.alertsWaiting))
        gauge("tapedeck_alerts_oldest_waiting_seconds", "Age of the oldest alert waiting in the outbox; 0 when none waits.").set(to: facts.oldestAlertSeconds ?? 0)
        if let backlog = facts.uploadBacklog {
            gauge("tapedeck_upload_backlog_takes", "Finished takes not yet verified on the remote (`tapedeck push` sends them).").set(to: Double(backlog.takes))
            gauge("tapedeck_upload_backlog_bytes", "Bytes of audio of the takes not yet verified on the remote.").set(to: Double(backlog.bytes))
            gauge("tapedeck_upload_backlog_oldest_seconds", "How long the take waiting longest for its upload has waited since it finished; 0 when none waits.")
                .set(to: backlog.oldestSeconds ?? 0)
        }
        // Counters only grow: what the state file adds since the last scrape.
        let (takes, bytes) = facts.retentionDeleted
        if takes > counted.takes { deletedTakes.increment(by: Int64(takes - counted.takes)) }
        if bytes > counted.bytes { deletedBytes.increment(by: bytes - counted.bytes) }
        counted = (max(takes, counted.takes), max(bytes, counted.bytes))
        _ = (deletedTakes, deletedBytes)
        var buffer: [UInt8] = []
        buffer.reserveCapacity(4096)
        registry.emit(into: &buffer)
        return buffer
    }

    private func recorder(_ state: LiveSnapshot, _ facts: Facts) {
        gauge("tapedeck_recording", "1 while a recorder records into this library (this server's or a `tapedeck record`'s).").set(to: state.recording ? 1 : 0)
        for phase in ["idle", "opening", "recording", "finishing"] {
            gauge("tapedeck_recorder_phase", "The recorder's phase: 1 for the one it is in.", [("phase", phase)]).set(to: state.phase.rawValue == phase ? 1 : 0)
        }
        gauge("tapedeck_recorder_waiting", "1 while a run waits for sound (VOX) or its trigger, with no take open.").set(to: state.waiting == nil ? 0 : 1)
        gauge("tapedeck_recorder_frames", "Frames the current run has captured (its takes together, gaps included).").set(to: Double(state.frames))
        gauge("tapedeck_recorder_seconds", "Seconds the current run has captured.").set(to: state.seconds)
        gauge("tapedeck_recorder_sample_rate_hertz", "The current run's sample rate.").set(to: state.sampleRate.map(Double.init) ?? .nan)
        gauge("tapedeck_recorder_overruns", "Overruns in the current run (gaps filled with silence).").set(to: Double(state.overruns))
        gauge("tapedeck_recorder_clipped_samples", "Samples at full scale in the current run.").set(to: Double(state.clippedSamples))
        gauge("tapedeck_recorder_markers", "Markers set in the current run.").set(to: Double(state.markers))
        gauge("tapedeck_recorder_silent", "1 while the input is silent past the silence alarm (--silence-alarm).").set(to: state.silent ? 1 : 0)
        gauge("tapedeck_recorder_silence_alarms", "How often the silence alarm went off in the current run.").set(to: Double(state.silenceAlarms))
        gauge("tapedeck_recorder_take_bytes", "Bytes written to the current take's file so far.").set(to: state.takeBytes.map(Double.init) ?? 0)
        gauge("tapedeck_recorder_take_index", "The take of a split run being written, from 1.").set(to: Double(state.takeIndex))
        gauge("tapedeck_recorder_seconds_since_last_frame", "Seconds since the recorder last delivered frames (NaN when none records).")
            .set(to: facts.secondsSinceFrames ?? .nan)
        // One series per channel of the current recording; those it no longer has are removed.
        while channelGauges.count > state.channels.count {
            registry.unregisterGauge(channelGauges.removeLast())
            gauges = gauges.filter { $0.key != "tapedeck_channel_level_dbfs|channel=\(channelGauges.count + 1)" }
        }
        while rmsGauges.count > state.channels.count {
            registry.unregisterGauge(rmsGauges.removeLast())
            gauges = gauges.filter { $0.key != "tapedeck_channel_rms_dbfs|channel=\(rmsGauges.count + 1)" }
        }
        for (index, channel) in state.channels.enumerated() {
            let g = gauge("tapedeck_channel_level_dbfs", "Each channel's level in dBFS (-90 to 0), with the meter's ballistics.", [("channel", String(index + 1))])
            let r = gauge("tapedeck_channel_rms_dbfs", "Each channel's RMS level in dBFS (-90 to 0), of the audio since the previous look.", [("channel", String(index + 1))])
            if index >= channelGauges.count { channelGauges.append(g) }
            if index >= rmsGauges.count { rmsGauges.append(r) }
            g.set(to: channel.level)
            r.set(to: channel.rms)
        }
    }
}
