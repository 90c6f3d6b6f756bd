import TapedeckApp
import TapedeckCore
import Foundation

/// The server-rendered HTML pages: the live view and library, a session's takes, a take, the
/// doctor's findings and the login page. Every text from the library is escaped; the pages hold
/// no inline script or style (the Content-Security-Policy forbids both), only `data-` attributes
/// that /assets/app.js reads. Plain functions; any thread; never block.
enum PageRenderer {
    static let pageSize = 50

    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for c in text.unicodeScalars {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.unicodeScalars.append(c)
            }
        }
        return out
    }

    static func page(title: String, body: String, version: String, signedIn: Bool = false) -> String {
        """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>\(escape(title)) · Tapedeck</title>
        <link rel="stylesheet" href="/assets/app.css">
        <link rel="icon" href="/assets/favicon.svg" type="image/svg+xml">
        <script src="/assets/app.js" defer></script>
        </head>
        <body>
        <header class="top"><a class="brand" href="/">Tapedeck</a><nav><a href="/">Library</a> <a href="/doctor">Doctor</a>\(signedIn ? " <form class=\"inline\" method=\"post\" action=\"/logout\"><button class=\"link\" type=\"submit\">Log out</button></form>" : "")</nav></header>
        <main>
        \(body)
        </main>
        <footer>tapedeck \(escape(version))</footer>
        </body>
        </html>
        """
    }

    static func duration(_ seconds: Double) -> String {
        let s = Int(seconds.rounded(.down))
        let tenths = Int(((seconds - Double(s)) * 10).rounded(.down))
        return s >= 3600 ? String(format: "%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60) : String(format: "%d:%02d.%d", s / 60, s % 60, tenths)
    }

    static func date(_ d: Date) -> String {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.dateFormat = "yyyy-MM-dd HH:mm"
        return f.string(from: d)
    }

    /// Links to the pages of a list of `total` items, `pageSize` per page.
    static func pager(base: String, page: Int, total: Int) -> String {
        let pages = max(1, (total + pageSize - 1) / pageSize)
        guard pages > 1 else { return "" }
        var out = "<nav class=\"pager\">"
        if page > 1 { out += "<a href=\"\(base)?page=\(page - 1)\" rel=\"prev\">← Newer</a> " }
        out += "<span>Page \(page) of \(pages)</span>"
        if page < pages { out += " <a href=\"\(base)?page=\(page + 1)\" rel=\"next\">Older →</a>" }
        return out + "</nav>"
    }

    /// The live view, transport and sessions (newest first).
    /// `page` (from the address) clamped to the pages there are.
    static func clamp(_ page: Int, total: Int) -> Int {
        min(max(1, page), max(1, (total + pageSize - 1) / pageSize))
    }

    /// The schedule's next stretches (and the windows skipped on the way), for the home page.
    struct ScheduleShown {
        var zone: TimeZone
        var stretches: [RecordingSchedule.Occurrence]
        var skipped: [RecordingSchedule.Skip]
        var now: Date

        init(_ schedule: RecordingSchedule, from now: Date, count: Int = 5) {
            let (found, skipped) = schedule.occurrences(after: now, count: count)
            (zone, stretches, self.skipped, self.now) = (schedule.zone, found, skipped, now)
        }

        /// `Sun 29 Nov 06:00` in the zone, the time only for `end` on the same day as `start`.
        func text(_ date: Date, sameDayAs start: Date? = nil) -> String {
            let f = DateFormatter()
            f.locale = Locale(identifier: "en_US_POSIX")
            f.timeZone = zone
            var calendar = Calendar(identifier: .gregorian)
            calendar.timeZone = zone
            let sameDay = start.map { calendar.isDate($0, inSameDayAs: date) } ?? false
            f.dateFormat = sameDay ? "HH:mm:ss" : "EEE d MMM HH:mm:ss"
            let text = f.string(from: date)
            return text.hasSuffix(":00") ? String(text.dropLast(3)) : text
        }
    }

    /// The schedule's section: the next stretches, the one under way marked.
    static func scheduleSection(_ shown: ScheduleShown) -> String {
        var rows = ""
        for stretch in shown.stretches {
            let now = stretch.start <= shown.now && shown.now < stretch.end
            rows += "<tr\(now ? " class=\"now\"" : "")><td>\(escape(shown.text(stretch.start)))</td><td>\(escape(shown.text(stretch.end, sameDayAs: stretch.start)))</td>"
                + "<td class=\"num\">\(stretch.window + 1)</td><td>\(now ? "recording now" : "")</td></tr>\n"
        }
        let zoneName = shown.zone.abbreviation(for: shown.now) ?? shown.zone.identifier
        let skips = shown.skipped.prefix(3).map { "<li>Window \($0.window + 1): \(escape($0.reason))</li>" }.joined()
        return """
        <section id="schedule" class="schedule">
        <h2>Schedule <small>(\(escape(shown.zone.identifier)), \(escape(zoneName)))</small></h2>
        \(shown.stretches.isEmpty ? "<p class=\"empty\">No stretch in the next 400 days: <code>tapedeck schedule</code> shows the windows.</p>" : """
        <table class="list"><thead><tr><th>From</th><th>To</th><th class="num">Window</th><th></th></tr></thead>
        <tbody>
        \(rows)</tbody></table>
        """)
        \(skips.isEmpty ? "" : "<ul class=\"skipped\">\(skips)</ul>")
        <p class="hint"><code>tapedeck record --schedule</code> records these stretches.</p>
        </section>
        """
    }

    static func home(sessions: [Session], page: Int, version: String, signedIn: Bool, schedule: ScheduleShown? = nil,
                     fleet: FleetView.State? = nil) -> String {
        let ordered = sessions.reversed()
        let total = ordered.count
        let page = clamp(page, total: total)
        let slice = ordered.dropFirst((page - 1) * pageSize).prefix(pageSize)
        var rows = ""
        for s in slice {
            let seconds = s.takes.reduce(0.0) { $0 + $1.seconds }
            rows += "<tr><td><a href=\"/sessions/\(escape(s.id))\">\(escape(s.name))</a></td><td class=\"num\">\(s.takes.count)</td><td class=\"num\">\(duration(seconds))</td><td>\(date(s.createdAt))</td></tr>\n"
        }
        let options = sessions.suffix(200).reversed().map { "<option value=\"\(escape($0.name))\"></option>" }.joined()
        let body = """
        <section id="live" class="live" data-live="/api/live">
        <div class="status"><span id="phase" class="phase">idle</span> <span id="target" class="target"></span> <span id="recorder" class="recorder"></span></div>
        <div id="meters" class="meters" aria-label="Input levels"></div>
        <dl class="facts">
        <div><dt>Elapsed</dt><dd id="elapsed">0:00.0</dd></div>
        <div><dt>Disk left</dt><dd id="left">–</dd></div>
        <div><dt>Overruns</dt><dd id="overruns">0</dd></div>
        <div><dt>Clipped</dt><dd id="clipped">0</dd></div>
        <div><dt>Markers</dt><dd id="markers">0</dd></div>
        <div class="run" id="run-facts" hidden><dt>Run</dt><dd id="run"></dd></div>
        </dl>
        <form id="transport" class="transport" autocomplete="off">
        <label>Session <input name="session" list="session-names" maxlength="200" placeholder="most recent"></label>
        <datalist id="session-names">\(options)</datalist>
        <label>Take <input name="take" maxlength="200" placeholder="Take N"></label>
        <div class="buttons">
        <button type="submit" id="record" class="record">● Record</button>
        <button type="button" id="stop" class="stop" disabled>■ Stop</button>
        <button type="button" id="mark" disabled>Marker</button>
        <button type="button" id="split" disabled title="End this take and go on in a new one">Split</button>
        </div>
        </form>
        <p id="last" class="last" aria-live="polite"></p>
        <p id="message" class="message" role="alert"></p>
        </section>
        \(schedule.map(scheduleSection) ?? "")
        \(fleet.map(fleetSection) ?? "")
        <section id="library" data-library>
        <h2>Sessions <small>(\(total))</small></h2>
        \(total == 0 ? "<p class=\"empty\">No sessions yet. Record a take above, or run <code>tapedeck record</code>.</p>" : """
        <table class="list"><thead><tr><th>Session</th><th class="num">Takes</th><th class="num">Length</th><th>Created</th></tr></thead>
        <tbody>
        \(rows)</tbody></table>
        """)
        \(pager(base: "/", page: page, total: total))
        </section>
        """
        return Self.page(title: "Library", body: body, version: version, signedIn: signedIn)
    }

    /// One session's timeline (a day of it, drawn by /assets/app.js from the API) and its takes
    /// (in recording order).
    static func session(_ s: Session, page: Int, exportFormats: [String], defaultFormat: String, version: String, signedIn: Bool) -> String {
        let page = clamp(page, total: s.takes.count)
        let slice = s.takes.dropFirst((page - 1) * pageSize).prefix(pageSize)
        var rows = ""
        for t in slice {
            rows += "<tr data-take=\"\(escape(t.id))\"><td><a href=\"/takes/\(escape(t.id))\">\(escape(t.name))</a></td><td class=\"num\">\(duration(t.seconds))</td><td>\(escape(t.format.description))</td><td>\(escape(t.state.rawValue))</td><td>\(date(t.createdAt))</td></tr>\n"
        }
        let body = """
        <p class="crumbs"><a href="/">Library</a> ›</p>
        <h1>\(escape(s.name))</h1>
        \(s.takes.isEmpty ? "" : timelineSection(s, exportFormats: exportFormats, defaultFormat: defaultFormat))
        <section id="library" data-library>
        <h2>Takes <small>(\(s.takes.count))</small></h2>
        \(s.takes.isEmpty ? "<p class=\"empty\">No takes in this session.</p>" : """
        <table class="list" id="takes"><thead><tr><th>Take</th><th class="num">Length</th><th>Format</th><th>State</th><th>Recorded</th></tr></thead>
        <tbody>
        \(rows)</tbody></table>
        """)
        \(pager(base: "/sessions/\(escape(s.id))", page: page, total: s.takes.count))
        </section>
        """
        return Self.page(title: s.name, body: body, version: version, signedIn: signedIn)
    }

    /// A session's timeline: a day's stretches of audio, gaps and markers on a bar (drawn by
    /// app.js), a range chosen by dragging across it (or typed), exported as one verified file
    /// to play and download.
    static func timelineSection(_ s: Session, exportFormats: [String], defaultFormat: String) -> String {
        let id = escape(s.id)
        let formats = exportFormats.map { "<option\($0 == defaultFormat ? " selected" : "")>\(escape($0))</option>" }.joined()
        return """
        <section id="timeline" class="timeline" data-timeline="/api/sessions/\(id)/timeline" data-clips="/api/sessions/\(id)/clips">
        <h2>Timeline</h2>
        <p class="row"><label>Day <select id="timeline-day" aria-label="Day"></select></label> <span id="timeline-span" class="hint"></span></p>
        <div id="timeline-bar" class="timeline-bar" role="slider" aria-label="What was recorded when: drag across it to select a stretch"><div id="timeline-selection" class="selection" hidden></div></div>
        <div id="timeline-axis" class="timeline-axis"></div>
        <form id="clip" class="row clip" autocomplete="off">
        <label>From <input id="clip-from" name="from" placeholder="YYYY-MM-DD HH:MM:SS.mmm" size="24"></label>
        <label>To <input id="clip-to" name="to" placeholder="YYYY-MM-DD HH:MM:SS.mmm" size="24"></label>
        <select id="clip-format" aria-label="Export format">\(formats)</select>
        <label><input type="checkbox" id="clip-gaps"> fill gaps with silence</label>
        <button type="submit" id="clip-export">Export selection</button>
        <progress id="clip-progress" max="1" value="0" hidden></progress> <a id="clip-file" class="button" hidden>Download</a>
        </form>
        <audio id="clip-player" controls preload="metadata" hidden></audio>
        <p id="message" class="message" role="alert"></p>
        </section>
        """
    }

    /// A take: its waveform, player, facts, and what can be done with it.
    static func take(_ t: Take, in s: Session, exportFormats: [String], defaultFormat: String, version: String, signedIn: Bool) -> String {
        let id = escape(t.id)
        let loudness = t.loudness?.integrated.map { String(format: "%.1f LUFS", $0) } ?? "not measured"
        let formats = exportFormats.map { "<option\($0 == defaultFormat ? " selected" : "")>\(escape($0))</option>" }.joined()
        let markers = t.markers.isEmpty ? "" : "<h2>Markers</h2><ol class=\"markers\">" + t.markers.map {
            "<li>\(duration(t.format.seconds(forFrames: $0.frame))) \(escape($0.label))</li>"
        }.joined() + "</ol>"
        let body = """
        <p class="crumbs"><a href="/">Library</a> › <a href="/sessions/\(escape(s.id))">\(escape(s.name))</a> ›</p>
        <h1 id="take-name">\(escape(t.name))</h1>
        <section class="take" data-take-id="\(id)" data-session-id="\(escape(s.id))" data-seconds="\(t.seconds)">
        <canvas id="waveform" class="waveform" width="1200" height="160" data-peaks="/api/takes/\(id)/waveform" data-take="/api/takes/\(id)" aria-label="Waveform"></canvas>
        <audio id="player" controls preload="metadata" src="/api/takes/\(id)/audio"></audio>
        <dl class="facts">
        <div><dt>Length</dt><dd>\(duration(t.seconds))</dd></div>
        <div><dt>Format</dt><dd>\(escape(t.format.description)) \(escape(t.encoding))</dd></div>
        <div><dt>State</dt><dd>\(escape(t.state.rawValue))</dd></div>
        <div><dt>Overruns</dt><dd>\(t.overruns.count)</dd></div>
        <div><dt>Loudness</dt><dd>\(escape(loudness))</dd></div>
        <div><dt>Recorded</dt><dd>\(date(t.createdAt))</dd></div>
        </dl>
        <p class="actions"><a class="button" id="download" href="/api/takes/\(id)/download">Download original</a>
        <span class="export"><select id="export-format" aria-label="Export format">\(formats)</select> <button type="button" id="export">Export</button> <progress id="export-progress" max="1" value="0" hidden></progress> <a id="export-file" class="button" hidden>Download export</a></span></p>
        <form id="rename" class="row" autocomplete="off"><label>Name <input name="name" value="\(escape(t.name))" maxlength="200" required></label> <button type="submit">Rename</button></form>
        <form id="notes" class="row"><label>Notes <textarea name="notes" rows="3" maxlength="60000">\(escape(t.notes))</textarea></label> <button type="submit">Save notes</button></form>
        \(markers)
        <p><button type="button" id="delete" class="danger">Delete take…</button></p>
        <p id="message" class="message" role="alert"></p>
        </section>
        """
        return Self.page(title: t.name, body: body, version: version, signedIn: signedIn)
    }

    static func doctor(_ findings: [DoctorFinding], version: String, signedIn: Bool) -> String {
        let list = findings.isEmpty ? "<p class=\"empty\">No problems found.</p>" : "<ul class=\"findings\">" + findings.map {
            "<li><strong>\(escape($0.subject))</strong>: \(escape($0.problem)) <small>(\(escape($0.kind)))</small></li>"
        }.joined() + "</ul><p>Run <code>tapedeck doctor --repair</code> on the server to repair them.</p>"
        return page(title: "Doctor", body: "<h1>Doctor</h1>\n\(list)", version: version, signedIn: signedIn)
    }

    static func login(next: String, message: String?, version: String) -> String {
        let body = """
        <h1>Log in</h1>
        <form method="post" action="/login" class="login">
        <input type="hidden" name="next" value="\(escape(next))">
        <label>Token <input type="password" name="token" autocomplete="current-password" required autofocus></label>
        <button type="submit">Log in</button>
        </form>
        \(message.map { "<p class=\"message\" role=\"alert\">\(escape($0))</p>" } ?? "")
        <p class="hint">The token is in the server's token file (it was printed when the server first started; <code>tapedeck serve --help</code> says where the file is).</p>
        """
        return page(title: "Log in", body: body, version: version)
    }
}
