import TapedeckApp
import TapedeckCore
import Foundation
import HTTPTypes
import Hummingbird
#if canImport(Glibc)
import Glibc
#endif

/// Exports made on request from the page (`POST /api/takes/{id}/exports`): each is a
/// `tapedeck export` (verified, placed atomically) run as a child process (``ExportChild``) into
/// a private folder of the server's, so that nothing an export meets can take down the server
/// or its recording; it is offered for download, and removed ``keepSeconds`` after it finished,
/// or when the server stops (a running one is stopped with SIGTERM). Runs on the main actor.
@MainActor
final class ExportJobs {
    /// Where an export is (docs/openapi.yaml, `Export.state`). A plain value; any thread.
    enum State: String, Codable, Sendable {
        case running, done, failed
    }

    struct Job: Sendable {
        var id: String
        /// The take exported; `nil` for a stretch of time (``clip``).
        var takeID: String?
        /// A stretch of a session's time (`POST /api/sessions/{id}/clips`): the session and the range.
        var clip: (sessionID: String, from: Date, to: Date)?
        var format: String
        var state: State
        /// Done so far, 0…1.
        var progress: Double = 0
        var file: URL?
        var downloadName: String?
        var report: ExportReport?
        var error: String?
        var finishedAt: Date?
        /// The most the export's file can take (``estimate(_:)``).
        var estimate: Int64 = 0
    }

    static let keepSeconds = 600.0
    static let maxRunning = 2
    private let parts: ServerParts
    private let folder: URL
    private var jobs: [String: Job] = [:]
    private var children: [String: ExportChild] = [:]
    /// Set by ``removeAll()``: no new export (the server is stopping).
    private var closed = false

    init(parts: ServerParts, folder: URL) {
        self.parts = parts
        self.folder = folder
    }

    /// Starts exporting `take` as `format` in a child process.
    /// - Throws: 400 for a format this build cannot export to, 409 while ``maxRunning`` run, 503
    ///   when the server is stopping or cannot start a process.
    func start(take: Take, format: String) throws -> Job {
        try launch(["export", take.id], format: format, estimate: Self.estimate(take), what: "this take") { id in
            Job(id: id, takeID: take.id, format: format, state: .running)
        }
    }

    /// Starts exporting the stretch `from..<to` of `session`'s time as `format` in a child
    /// process (`tapedeck export --session ID --from … --to …`), cut from the takes it spans;
    /// with `fillingGaps`, gaps are filled with silence (`--gaps silence`).
    /// - Throws: as ``start(take:format:)``.
    func start(clipOf session: Session, from: Date, to: Date, format: String, sampleFormat: AudioFormat, fillingGaps: Bool) throws -> Job {
        let frames = Int64((to.timeIntervalSince(from) * Double(sampleFormat.sampleRate)).rounded(.up))
        let estimate = frames * Int64(max(1, sampleFormat.channels)) * 4 + (1 << 20)
        let arguments = ["export", "--session", session.id, "--from", UTCTimestamp.format(from), "--to", UTCTimestamp.format(to)]
            + (fillingGaps ? ["--gaps", "silence"] : [])
        return try launch(arguments, format: format, estimate: estimate, what: "this stretch") { id in
            Job(id: id, takeID: nil, clip: (session.id, from, to), format: format, state: .running)
        }
    }

    /// Starts `tapedeck` with `head` (the export's own arguments) and the job's, for `format`.
    private func launch(_ head: [String], format: String, estimate: Int64, what: String, job: (String) -> Job) throws -> Job {
        expire()
        guard !closed else { throw APIError(.serviceUnavailable, "stopping", "The server is stopping; it starts no new export.") }
        guard parts.exportFormats.contains(format) else {
            throw APIError(.badRequest, "invalid-argument", "Unknown export format \"\(format)\". Formats in this build: \(parts.exportFormats.joined(separator: ", ")).")
        }
        guard jobs.values.filter({ $0.state == .running }).count < Self.maxRunning else {
            throw APIError(.conflict, "busy", "\(Self.maxRunning) exports are running already. Wait for one to finish.")
        }
        let command = parts.exportCommand
        guard let executable = command.first else {
            throw APIError(.serviceUnavailable, "unavailable", "This server was started without a program to export with.")
        }
        // Room for the file, beside the exports running, and for the recording (a full disk
        // would end a take being recorded on it).
        let running = jobs.values.filter { $0.state == .running }.reduce(Int64(0)) { $0 + $1.estimate }
        let reserve = reserve()
        if let free = FreeSpace.available(at: existingFolder().path), free < estimate + running + reserve {
            throw APIError(HTTPResponse.Status(code: 507, reasonPhrase: "Insufficient Storage"), "insufficient-storage",
                           "Not enough free space to export \(what): it needs up to \(Self.megabytes(estimate))\(running > 0 ? ", the exports running \(Self.megabytes(running))" : ""), and \(Self.megabytes(reserve)) stay free for recording; \(Self.megabytes(free)) are free. Download the finished exports (kept \(Int(Self.keepSeconds / 60)) minutes), or free space on the disk.")
        }
        let id = UUID().uuidString.lowercased()
        let jobFolder = folder.appendingPathComponent(id)
        try FileManager.default.createDirectory(at: jobFolder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let arguments = head + command.dropFirst() + ["--format", format, "-o", jobFolder.path + "/", "--json", "--progress-fd", "3"]
        let child: ExportChild
        do {
            child = try ExportChild.start(
                executable: executable, arguments: arguments, environment: ProcessInfo.processInfo.environment,
                progress: { [weak self] done, total in
                    guard total > 0, self?.jobs[id]?.state == .running else { return }
                    self?.jobs[id]?.progress = min(1, Double(done) / Double(total))
                },
                end: { [weak self] outcome in self?.finish(id, outcome, folder: jobFolder) })
        } catch let e as ExportChildError {
            try? FileManager.default.removeItem(at: jobFolder)
            parts.logger.error("\(e.message)")
            throw APIError(.serviceUnavailable, "unavailable", e.message)
        }
        children[id] = child
        var made = job(id)
        made.estimate = estimate
        jobs[id] = made
        return made
    }

    /// The child's outcome: its JSON report (`tapedeck export --json`), else what it said on
    /// stderr, else how it ended.
    private func finish(_ id: String, _ outcome: ExportChild.Outcome, folder jobFolder: URL) {
        children[id] = nil
        defer {
            jobs[id]?.finishedAt = Date()
            // Finished after the server began stopping: nothing will offer it.
            if closed { try? FileManager.default.removeItem(at: jobFolder) }
        }
        let first = (try? JSONSerialization.jsonObject(with: outcome.output) as? [[String: Any]])?.first
        if outcome.status == 0, let first, first["status"] as? String == "ok",
           let data = try? JSONSerialization.data(withJSONObject: first),
           let report = try? JSONDecoder().decode(ExportReport.self, from: data),
           URL(fileURLWithPath: report.output).deletingLastPathComponent().standardizedFileURL.path == jobFolder.standardizedFileURL.path {
            jobs[id]?.state = .done
            jobs[id]?.progress = 1
            jobs[id]?.report = report
            jobs[id]?.file = URL(fileURLWithPath: report.output)
            jobs[id]?.downloadName = URL(fileURLWithPath: report.output).lastPathComponent
            return
        }
        jobs[id]?.state = .failed
        jobs[id]?.file = nil
        try? FileManager.default.removeItem(at: jobFolder)
        if let message = first?["error"] as? String {
            jobs[id]?.error = message
        } else if let signal = outcome.signal {
            jobs[id]?.error = "The export stopped with signal \(signal) (\(String(cString: strsignal(signal)))); nothing was kept. The take is unchanged."
            parts.logger.error("An export on request (\(jobs[id]?.takeID.map { "take \($0)" } ?? "a stretch of time")) ended with signal \(signal).")
        } else if outcome.status == 130 {
            jobs[id]?.error = "The export was stopped; nothing was kept."
        } else {
            // Its last line on stderr says why (without the program's name).
            let said = String(decoding: outcome.errors, as: UTF8.self).split(separator: "\n").last.map(String.init) ?? ""
            let message = said.hasPrefix("tapedeck: ") ? String(said.dropFirst("tapedeck: ".count)) : said
            jobs[id]?.error = message.isEmpty ? "The export ended with exit status \(outcome.status); nothing was kept." : message
        }
    }

    /// The most an export of `take` can take: its samples at 4 bytes (the widest an encoder
    /// writes them), and a mebibyte for headers and metadata.
    static func estimate(_ take: Take) -> Int64 {
        take.frames * Int64(max(1, take.format.channels)) * 4 + (1 << 20)
    }

    /// What exports leave free: on the library's disk, ten minutes of recording at the configured
    /// format (at least 64 MiB); elsewhere 64 MiB.
    func reserve() -> Int64 {
        let least: Int64 = 64 << 20
        var here = stat(), library = stat()
        guard stat(existingFolder().path, &here) == 0, stat(parts.store.storage.rootURL.path, &library) == 0, here.st_dev == library.st_dev else { return least }
        return max(least, Int64(parts.configuredFormat.bytesPerSecond) * 600)
    }

    /// The export folder, or the folder it will be made in.
    private func existingFolder() -> URL {
        FileManager.default.fileExists(atPath: folder.path) ? folder : folder.deletingLastPathComponent()
    }

    static func megabytes(_ bytes: Int64) -> String {
        String(format: "%.1f MB", Double(bytes) / 1_000_000)
    }

    func job(_ id: String) -> Job? {
        expire()
        return jobs[id]
    }

    /// Removes the files of exports finished more than ``keepSeconds`` ago.
    func expire(now: Date = Date()) {
        for (id, job) in jobs where job.finishedAt.map({ now.timeIntervalSince($0) > Self.keepSeconds }) == true {
            try? FileManager.default.removeItem(at: folder.appendingPathComponent(id))
            jobs[id] = nil
        }
    }

    /// Stops every running export (SIGTERM) and removes every export's files (the server stops).
    func removeAll() {
        closed = true
        for child in children.values { child.terminate() }
        try? FileManager.default.removeItem(at: folder)
        jobs.removeAll()
    }
}
