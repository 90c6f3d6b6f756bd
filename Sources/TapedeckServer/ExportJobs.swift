import TapedeckApp
import TapedeckCore
import Foundation

/// Exports made on request from the page (`POST /api/takes/{id}/exports`): each runs the same
/// ``TakeExporter`` as `tapedeck export` (verified, placed atomically) into a private folder of
/// the server's, is offered for download, and is removed ``keepSeconds`` after it finished, or
/// when the server stops. Runs on the main actor; exports run on their own threads.
@MainActor
final class ExportJobs {
    /// Where an export is (docs/openapi.yaml, `Export.state`). A plain value; any thread.
    enum State: String, Codable, Sendable {
        case running, done, failed
    }

    struct Job: Sendable {
        var id: String
        var takeID: String
        var format: String
        var state: State
        var exporter: TakeExporter?
        /// Done so far, 0…1.
        @MainActor var progress: Double {
            if state == .done { return 1 }
            guard let p = exporter?.jobs.first?.progress, p.totalFrames > 0 else { return 0 }
            return min(1, Double(p.framesDone) / Double(p.totalFrames))
        }
        var file: URL?
        var downloadName: String?
        var report: ExportReport?
        var error: String?
        var finishedAt: Date?
    }

    static let keepSeconds = 600.0
    static let maxRunning = 2
    private let parts: ServerParts
    private let folder: URL
    private var jobs: [String: Job] = [:]
    /// Set by ``removeAll()``: no new export (the server is stopping).
    private var closed = false

    init(parts: ServerParts, folder: URL) {
        self.parts = parts
        self.folder = folder
    }

    /// Starts exporting `take` of `session` as `format`.
    /// - Throws: 400 for a format this build cannot export to, 409 while ``maxRunning`` run.
    func start(take: Take, session: Session, format: String) throws -> Job {
        expire()
        guard !closed else { throw APIError(.serviceUnavailable, "stopping", "The server is stopping; it starts no new export.") }
        guard parts.exportFormats.contains(format) else {
            throw APIError(.badRequest, "invalid-argument", "Unknown export format \"\(format)\". Formats in this build: \(parts.exportFormats.joined(separator: ", ")).")
        }
        guard jobs.values.filter({ $0.state == .running }).count < Self.maxRunning else {
            throw APIError(.conflict, "busy", "\(Self.maxRunning) exports are running already. Wait for one to finish.")
        }
        let encoder = try parts.makeEncoder(format)
        let id = UUID().uuidString.lowercased()
        let jobFolder = folder.appendingPathComponent(id)
        try FileManager.default.createDirectory(at: jobFolder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let conversion = ExportPolicy.sampleFormat(for: [take], encoder: encoder)
        let exporter = parts.makeExporter()
        jobs[id] = Job(id: id, takeID: take.id, format: format, state: .running, exporter: exporter)
        Task {
            let result = await exporter.export([ExportItem(take: take, session: session)], with: encoder, to: jobFolder,
                                               force: false, sampleFormat: conversion).first
            switch result {
            case .success(let report):
                self.jobs[id]?.state = .done
                self.jobs[id]?.report = report
                self.jobs[id]?.file = URL(fileURLWithPath: report.output)
                self.jobs[id]?.downloadName = URL(fileURLWithPath: report.output).lastPathComponent
            case .failure(let e):
                self.jobs[id]?.state = .failed
                self.jobs[id]?.file = nil
                self.jobs[id]?.error = e.message
                try? FileManager.default.removeItem(at: jobFolder)
            case nil:
                self.jobs[id]?.state = .failed
                self.jobs[id]?.error = "The export did not run."
            }
            self.jobs[id]?.finishedAt = Date()
            // Finished after the server began stopping: nothing will offer it.
            if self.closed { try? FileManager.default.removeItem(at: jobFolder) }
        }
        return jobs[id]!
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

    /// Removes every export's files (the server stops).
    func removeAll() {
        closed = true
        try? FileManager.default.removeItem(at: folder)
        jobs.removeAll()
    }
}
