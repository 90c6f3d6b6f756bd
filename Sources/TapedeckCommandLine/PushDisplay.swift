import Foundation
import TapedeckApp
import TapedeckCore

/// What `push` shows while it works: a progress line on a terminal (stderr), one line per take
/// when the output is not a terminal, nothing with --json. Main actor; never blocks.
@MainActor
final class PushDisplay {
    let json: Bool
    let machine: String
    let location: String
    let count: Int
    private var index = 0
    /// The take being sent: progress of any other (a late report of the one before) is ignored.
    private var current: String?
    private var started = Date()
    private var lastDraw = Date.distantPast

    init(json: Bool, machine: String, location: String, count: Int) {
        self.json = json
        self.machine = machine
        self.location = location
        self.count = count
    }

    func show(_ event: TakePusher.Event) {
        guard !json else { return }
        switch event {
        case .started(let item, let resuming):
            index += 1
            current = item.take.id
            started = Date()
            if Terminal.showsProgress {
                draw(item, sent: 0, note: resuming ? "resuming" : nil, force: true)
            }
        case .sent(let item, let bytes):
            if Terminal.showsProgress && item.take.id == current { draw(item, sent: bytes, note: nil, force: false) }
        case .finished(let item, let outcome):
            current = nil
            if Terminal.showsProgress { Terminal.endStatus() }
            let name = "\(Terminal.safe(item.session.name))/\(Terminal.safe(item.take.name)) [\(item.take.shortID)]"
            switch outcome {
            case .uploaded(let d, _):
                if let resumed = d.resumedBytes, resumed > 0 {
                    print("\(name): uploaded, \(Terminal.bytes(d.size)) (resumed: \(Terminal.bytes(d.size - resumed)) sent now, \(Terminal.bytes(resumed)) already there), verified")
                } else {
                    print("\(name): uploaded, \(Terminal.bytes(d.size)), verified")
                }
            case .alreadyThere(let d, _): print("\(name): already there (\(Terminal.bytes(d.size))), verified")
            case .confirmed(let d, _): print("\(name): still there (\(Terminal.bytes(d.size))), verified")
            case .resent(let d, _, let found, let audio): print("\(name): \(found); \(audio ? "sent again, \(Terminal.bytes(d.size))" : "its manifest written again"), verified")
            case .failed(let e): Terminal.printError("\(name): not pushed: \(e.message)")
            }
        }
    }

    private func draw(_ item: TakePusher.Item, sent: Int64, note: String?, force: Bool) {
        let now = Date()
        guard force || now.timeIntervalSince(lastDraw) >= 0.1 else { return }
        lastDraw = now
        let seconds = max(now.timeIntervalSince(started), 0.001)
        let percent = item.size > 0 ? min(100, Int(Double(sent) * 100 / Double(item.size))) : 100
        let rate = Terminal.bytes(Int64(Double(sent) / seconds)) + "/s"
        let head = "[\(index)/\(count)] \(Terminal.safe(item.take.name)) "
        let tail = " \(percent)% \(Terminal.bytes(sent))/\(Terminal.bytes(item.size)) \(rate)\(note.map { " " + $0 } ?? "")"
        let columns = max(Terminal.terminalColumns(), 40)
        let barWidth = max(0, min(30, columns - Terminal.displayWidth(head) - Terminal.displayWidth(tail) - 3))
        let filled = barWidth * percent / 100
        let bar = barWidth > 0 ? "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: barWidth - filled) + "]" : ""
        Terminal.status(Terminal.cut(head + bar + tail, to: columns - 1))
    }

    func end() {
        if Terminal.showsProgress && !json { Terminal.endStatus() }
    }

    func summary(_ round: PushRound) { Self.summarize(round) }

    /// One closing line: how many takes were verified, and what failed or was deleted.
    static func summarize(_ round: PushRound) {
        var verified = 0, failed = 0, refused = 0, resent = 0
        var bytes: Int64 = 0, skipped: Int64 = 0
        for (_, outcome) in round.outcomes {
            switch outcome {
            case .uploaded(let d, _):
                verified += 1
                bytes += d.size - (d.resumedBytes ?? 0)
                skipped += d.resumedBytes ?? 0
            case .alreadyThere, .confirmed: verified += 1
            case .resent(let d, _, _, let audio): verified += 1; resent += 1; bytes += audio ? d.size : 0
            case .failed(let e) where e.code == .alreadyExists: refused += 1
            case .failed: failed += 1
            }
        }
        var line = "\(Terminal.counted(verified, "take")) verified (\(Terminal.bytes(bytes)) sent\(skipped > 0 ? ", \(Terminal.bytes(skipped)) of resumed uploads already there" : ""))"
        if resent > 0 { line += ", \(resent) of them sent again: the remote's copy was missing or stale" }
        if failed > 0 { line += ", \(failed) not pushed: run push again to retry" }
        if refused > 0 { line += ", \(refused) refused: the remote holds other audio under their keys (see above)" }
        let left = round.items.count - round.outcomes.count
        let serverStopped = round.outcomes.last.map { if case .failed(let e) = $0.1 { TakePusher.stopsThePush(e) } else { false } } ?? false
        if left > 0 { line += serverStopped ? ", \(left) not tried: the remote's error above stopped the push (the next push goes on)" : ", \(left) not finished (stopped: the next push resumes)" }
        if !round.deleted.isEmpty { line += "; \(Terminal.counted(round.deleted.count, "take")) deleted locally (sync.keep-local)" }
        print(line + ".")
    }
}
