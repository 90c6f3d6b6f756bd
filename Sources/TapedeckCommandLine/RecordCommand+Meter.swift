import ArgumentParser
import Dispatch
import Foundation
import Observation
import TapedeckApp
import TapedeckAssembly
import TapedeckCore

extension RecordCommand {
    /// Prints the banner once audio flows, then redraws the meter at every progress update
    /// (``PeakMeter`` ballistics), and "Stopping…" at once when a stop is asked for.
    @MainActor
    /// With `bannerOnly` (off a terminal), one line of banner and nothing more.
    static func showMeter(_ recorder: TakeRecorder, source: String, stops: StopRelay, toStdout: Bool = false, plan: RunPlan = RunPlan(),
                          stopsAt: Date? = nil, total: Double? = nil, bannerOnly: Bool = false) async {
        let split: SplitRule? = plan.split.splits ? plan.split : nil
        var meter = PeakMeter()
        var bannerShown = false
        var last = (frames: Int64(-1), time: ContinuousClock.now)
        let states = Observations { (recorder.phase, recorder.frames, recorder.peaks, recorder.overrunCount, recorder.clippedSamples) }
        if !bannerOnly {
            stops.onRequest = {
                if bannerShown { Terminal.status("■ Stopping… finishing the take.") }
            }
        }
        for await (phase, frames, peaks, overruns, clipped) in states {
            if Task.isCancelled { break }
            guard phase == .recording, let format = recorder.format else { continue }
            if !bannerShown, toStdout || recorder.target != nil {
                bannerShown = true
                let destination = if toStdout { "to stdout" } else if let target = recorder.target {
                    target.waiting ? "into session \(target.take ?? "")"
                        : target.take.map { "into \($0) in \(target.fileURL.deletingLastPathComponent().path)/" } ?? "to \(target.fileURL.path)"
                } else { "" }
                let from = Self.source(source, device: recorder.deviceName)
                if bannerOnly {
                    var line = "Recording from \(from): \(format.sampleRate) Hz, \(Terminal.counted(format.channels, "channel")), \(format.sampleFormat.rawValue), \(destination)"
                    if let stopsAt { line += "; stops at \(Self.stopText(stopsAt, now: Date()))" }
                    if let split { line += "; " + Self.describe(split).prefix(1).lowercased() + Self.describe(split).dropFirst() }
                    Terminal.printError(line + ".", priority: .info, event: "recording-started")
                    return
                }
                var lines = ["  \(destination)"]
                if let stopsAt { lines.append("  " + Self.stopLine(stopsAt)) }
                if let split { lines.append("  \(Self.describe(split)).") }
                let preRoll = plan.preRollSeconds > 0 ? " (with the \(RunText.seconds(plan.preRollSeconds)) before it)" : ""
                if let vox = plan.vox {
                    lines.append("  VOX: a take begins at \(RunText.decibels(vox.thresholdDB))\(preRoll);")
                    lines.append("  it ends after \(RunText.seconds(vox.holdSeconds)) below that level.")
                }
                if plan.armed {
                    lines.append("  Armed: the take begins at the trigger\(preRoll).")
                    lines.append("  Trigger it: press Enter\(Terminal.stdinIsTerminal ? "" : " (on a terminal)"), or run `kill -USR2 \(getpid())`.")
                }
                if let alarm = plan.silenceAlarm {
                    lines.append("  Warns when the input stays below \(RunText.decibels(alarm.thresholdDB)) for \(RunText.seconds(alarm.seconds)).")
                }
                for programme in plan.programs { lines.append("  Programme take too: \(programme.text).") }
                Terminal.writeStderr(Terminal.safe(
                    "Recording from \(from): \(format.sampleRate) Hz, \(Terminal.counted(format.channels, "channel")), \(format.sampleFormat.rawValue)\n"
                    + lines.joined(separator: "\n") + "\n  Press Ctrl-C to stop.\(Terminal.stdinIsTerminal && !toStdout ? (plan.startsIdle ? " Once a take runs, m sets a marker." : " Press m to set a marker.") : "")\n"))
            }
            // Nothing is drawn before the first audio: no audio yet is not silence.
            if stops.isRequested || frames == 0 { continue }
            let now = ContinuousClock.now
            let elapsed = now - last.time
            meter.update(peaks: peaks, elapsed: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18,
                         fresh: frames != last.frames)
            last = (frames, now)
            var run: String?
            var head: String?
            if let waiting = recorder.waiting {
                // No take open: what the run waits for, and the pre-roll it holds.
                head = waiting == .armed ? "○ ARMED" : "○ VOX"
                run = plan.preRollSeconds > 0 ? "pre-roll \(String(format: "%.1f", format.seconds(forFrames: recorder.preRollFrames))) s" : nil
            } else if plan.makesRun {
                run = "take \(recorder.takeIndex)"
                if let left = recorder.framesToSplit { run! += ", split in \(Terminal.clock(format.seconds(forFrames: left)).dropLast(4))" }
                if plan.vox != nil { head = recorder.voxHolding ? "◐ HOLD" : "● VOX" }
            }
            if recorder.markerCount > 0 { run = [run, "markers \(recorder.markerCount)"].compactMap { $0 }.joined(separator: "  ") }
            if recorder.silenceAlarms > 0 { run = [run, "SILENT"].compactMap { $0 }.joined(separator: "  ") }
            let line = Terminal.meterLine(seconds: format.seconds(forFrames: frames), meter: meter, clipped: clipped,
                                          overruns: overruns, columns: Terminal.terminalColumns(), run: run, head: head, of: total,
                                          colour: Terminal.usesColour)
            if Terminal.usesColour {
                // Fitted to the terminal already (the escapes take no room); nothing a user wrote is in it.
                Terminal.statusShown.store(true, ordering: .relaxed)
                Terminal.writeStderr(Terminal.clearLine + line)
            } else {
                Terminal.status(line)
            }
        }
    }
}
