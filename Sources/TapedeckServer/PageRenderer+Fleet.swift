import Foundation
import TapedeckApp
import TapedeckCore

extension PageRenderer {
    /// The fleet's section of the home page: each recorder's last heartbeat in the fleet catalog
    /// (as read when the page was made), a stale one marked.
    static func fleetSection(_ fleet: FleetView.State) -> String {
        var rows = ""
        for r in fleet.recorders {
            let b = r.heartbeat
            let what = b.summary
            rows += "<tr\(r.stale ? " class=\"stale\"" : "")><td>\(escape(b.machine))</td><td>\(escape(b.role))</td>"
                + "<td>\(r.stale ? "STALE" : escape(b.state.rawValue))</td><td>\(escape(what.joined(separator: " · ")))</td>"
                + "<td class=\"num\">\(b.diskSecondsLeft.map { escape(RetentionClock.duration($0)) } ?? "–")</td>"
                + "<td class=\"num\">\(escape(RetentionClock.duration(r.secondsAgo))) ago</td></tr>\n"
        }
        let problem = fleet.problem.map { "<p class=\"message\" role=\"alert\">The fleet catalog did not answer: \(escape($0))</p>" } ?? ""
        let empty = fleet.readAt == nil ? "Reading the fleet catalog…" : "No recorder has reported to the fleet catalog yet."
        return """
        <section id="fleet" class="fleet">
        <h2>Fleet <small>(\(escape(fleet.catalog)))</small></h2>
        \(problem)
        \(fleet.recorders.isEmpty ? "<p class=\"empty\">\(empty)</p>" : """
        <table class="list"><thead><tr><th>Machine</th><th>Role</th><th>State</th><th>Now</th><th class="num">Disk left</th><th class="num">Heard</th></tr></thead>
        <tbody>
        \(rows)</tbody></table>
        """)
        <p class="hint"><code>tapedeck fleet status</code> shows the same; a recorder not heard from for two of its intervals is stale.</p>
        </section>
        """
    }
}
