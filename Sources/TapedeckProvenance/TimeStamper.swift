public import Foundation
public import Logging
import CCurlTransfer
import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

/// Trusted time stamps of signed takes (`provenance.tsa`): each request for a chain's head is
/// written to a queue on disk first (`$XDG_STATE_HOME/tapedeck/timestamps`, one small file
/// each, written whole), then sent to the RFC 3161 authority over HTTP; the token it answers is
/// checked (signed, for that head) and appended to the take's chain as a `timestamp` line. A
/// request made while the authority cannot be reached stays queued and is sent later, by this
/// process's sender or the next (`tapedeck keys stamp`, the next `record`): its token then proves
/// the head existed no later than its time. One process sends an entry at a time (a lock on it).
///
/// - Thread: any. ``request(chain:take:checkpoint:head:)`` blocks briefly on disk I/O (the writer
///   thread, at a checkpoint); sending blocks on the network, on the sender's own thread or the
///   caller's (``sendQueued(timeout:)``, ``settle(within:)``).
public final class TimeStamper: @unchecked Sendable {
    /// A queued request.
    public struct Request: Codable, Sendable, Hashable {
        /// The chain file, the take, the checkpoint and its head (hex), and the authority's URL.
        public var chain: String
        public var take: String
        public var k: Int
        public var head: String
        public var tsa: String
        /// When it was asked for (UTC, ISO 8601).
        public var requested: String
        /// The entry's file name in the queue.
        public var file: String = ""

        enum CodingKeys: String, CodingKey { case chain, take, k, head, tsa, requested }
    }

    /// What a round of sending did.
    public struct Round: Sendable, Hashable {
        /// Requests sent (their tokens are in their chains).
        public var sent = 0
        /// Requests still queued, and why the last of them was not sent.
        public var left = 0
        public var problem: String?
    }

    /// The authority new requests go to (`nil`: none; queued ones are still sent to theirs).
    public let authority: String?
    /// Seconds between time stamps of a long take (0: only at its end).
    public let every: Int
    /// The queue's folder.
    public let folder: URL
    private let logger: Logger
    private let condition = NSCondition()
    private var wake = false
    private var running = false
    private var retryAt = Date.distantFuture

    public init(authority: String?, every: Int, folder: URL, logger: Logger) {
        self.authority = authority
        self.every = every
        self.folder = folder
        self.logger = logger
    }

    // MARK: the queue

    /// Queues a time stamp of checkpoint `k`'s `head` of `chain` and wakes the sender. Never
    /// throws: a request that cannot be queued is logged (the take itself goes on, signed).
    func request(chain: URL, take: String, checkpoint k: Int, head: Data) {
        guard let authority else { return }
        let request = Request(chain: chain.path, take: take, k: k, head: ProvenanceChain.hex(head), tsa: authority,
                              requested: UTCTimestamp.format(Date()))
        do {
            try FileModes.makePrivateFolder(folder)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            let name = String(format: "%020lld", Int64(Date().timeIntervalSince1970 * 1e9)) + "-\(UInt32.random(in: 0...UInt32.max)).json"
            let temporary = folder.appendingPathComponent(".new-" + name)
            let files = DurableFiles()
            try files.writeNewFile(try encoder.encode(request), to: temporary, mode: 0o600)
            guard rename(temporary.path, folder.appendingPathComponent(name).path) == 0 else {
                unlink(temporary.path)
                throw TapedeckError.system(errno, while: "queue a time-stamp request in \(folder.path)")
            }
            try files.syncDirectory(folder)
        } catch {
            logger.error("The time stamp of \(chain.lastPathComponent) (checkpoint \(k)) could not be queued: \((error as? TapedeckError)?.message ?? "\(error)") The take is signed; it has no time stamp for that checkpoint.")
            return
        }
        condition.lock()
        wake = true
        condition.signal()
        condition.unlock()
    }

    /// The queued requests, oldest first (files that cannot be read are skipped and left).
    public func pending() -> [Request] {
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? [])
            .filter { !$0.hasPrefix(".") && $0.hasSuffix(".json") }.sorted()
        return names.compactMap { name in
            guard let data = try? Data(contentsOf: folder.appendingPathComponent(name)),
                  var request = try? JSONDecoder().decode(Request.self, from: data) else { return nil }
            request.file = name
            return request
        }
    }

    // MARK: sending

    /// Sends every queued request once, each with `timeout` seconds to answer. Blocks.
    public func sendQueued(timeout: Double = 20) -> Round {
        var round = Round()
        for request in pending() {
            do {
                if try send(request, timeout: timeout) { round.sent += 1 } else { round.left += 1 }
            } catch let error as TapedeckError {
                round.left += 1
                round.problem = error.message
            } catch {
                round.left += 1
                round.problem = "\(error)"
            }
        }
        return round
    }

    /// Starts the sender, when there is something to send (an authority to ask, or requests
    /// already queued): a thread that sends requests as they are queued (and those already
    /// queued), retrying after 5 s, then longer (at most 5 min), while the authority cannot be
    /// reached. Lives as long as the process. Returns itself.
    @discardableResult
    public func started() -> TimeStamper {
        guard authority != nil || !pending().isEmpty else { return self }
        condition.lock()
        defer { condition.unlock() }
        guard !running else { return self }
        running = true
        wake = true
        let thread = Thread { [self] in loop() }
        thread.name = "tapedeck-stamps"  // Linux keeps 15 characters of a thread's name
        thread.start()
        return self
    }

    /// Waits up to `seconds` for the queue to empty, sending what is queued (the end of a
    /// `record`). Returns the round's outcome: what was left and why. Blocks.
    public func settle(within seconds: Double) -> Round {
        let deadline = Date().addingTimeInterval(seconds)
        var round = Round()
        while true {
            let left = deadline.timeIntervalSinceNow
            let this = sendQueued(timeout: max(1, min(20, left)))
            round.sent += this.sent
            round.left = this.left
            if let problem = this.problem { round.problem = problem }
            if this.left == 0 || Date() >= deadline { return round }
            Thread.sleep(forTimeInterval: min(0.5, max(0, deadline.timeIntervalSinceNow)))
        }
    }

    private func loop() {
        var backoff: Double = 0
        while true {
            condition.lock()
            // (Foundation on Linux cannot wait until the distant future: it waits without a deadline then.)
            while !wake && Date() < retryAt {
                if retryAt == .distantFuture { condition.wait() } else { _ = condition.wait(until: retryAt) }
            }
            wake = false
            condition.unlock()
            let round = sendQueued()
            condition.lock()
            if round.left > 0 {
                backoff = backoff == 0 ? 5 : min(300, backoff * 2)
                retryAt = Date().addingTimeInterval(backoff)
                if let problem = round.problem {
                    logger.warning("\(round.left) time-stamp request\(round.left == 1 ? " is" : "s are") queued: \(problem) Retrying in \(Int(backoff)) s.")
                }
            } else {
                backoff = 0
                retryAt = .distantFuture
            }
            condition.unlock()
        }
    }

    /// Sends one request: `false` when another process is sending it (or sent it).
    private func send(_ request: Request, timeout: Double) throws -> Bool {
        let entry = folder.appendingPathComponent(request.file)
        let fd = open(entry.path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var st = stat()
        guard flock(fd, LOCK_EX | LOCK_NB) == 0, fstat(fd, &st) == 0, st.st_nlink > 0 else { return false }
        guard let head = ProvenanceChain.unhex(request.head), head.count == 32 else {
            unlink(entry.path)
            return true
        }
        guard FileManager.default.fileExists(atPath: request.chain) else {
            // The take was deleted (its chain with it): nothing is left to stamp.
            logger.info("The time-stamp request for \(request.chain) is dropped: the chain is no longer there (the take was deleted or moved).")
            unlink(entry.path)
            return true
        }
        let answer = try Self.post(TimeStamp.request(digest: head, nonce: UInt64.random(in: 1...UInt64.max >> 1)), to: request.tsa, timeout: timeout)
        let token = try TimeStamp.token(fromResponse: answer)
        let signed = try TimeStamp.checkSignature(of: token.der)
        guard signed.token.digest == head else {
            throw TapedeckError(.io, "The time-stamping authority \(request.tsa) answered with a token for another digest.")
        }
        let line = ProvenanceChain.line(ProvenanceChain.Stamp(k: request.k, head: request.head, time: UTCTimestamp.format(token.time),
                                                             tsa: request.tsa, token: token.der.base64EncodedString()))
        try ChainFile.append(line, to: URL(fileURLWithPath: request.chain))
        unlink(entry.path)
        try? DurableFiles().syncDirectory(folder)
        return true
    }

    /// POSTs an RFC 3161 request; the answer's body. - Throws: `.io` saying what failed.
    static func post(_ body: Data, to url: String, timeout: Double) throws -> Data {
        let capacity = 1 << 20
        var answer = [UInt8](repeating: 0, count: capacity)
        var length = 0
        var result = tapedeck_transfer_result()
        let headers = ["Content-Type: application/timestamp-query", "Accept: application/timestamp-reply"]
        let code = withCStrings(headers) { pointers in
            body.withUnsafeBytes { raw in
                tapedeck_http_post_keeping(url, pointers, pointers.count, raw.baseAddress?.assumingMemoryBound(to: CChar.self), raw.count,
                                           max(1, Int(timeout.rounded(.up))), &answer, capacity, &length, &result)
            }
        }
        guard code == 0 else {
            let why = withUnsafeBytes(of: result.error) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            throw TapedeckError(.io, "The time-stamping authority \(url) could not be reached: \(why.hasSuffix(".") ? String(why.dropLast()) : why).")
        }
        guard result.status == 200 else {
            throw TapedeckError(.io, "The time-stamping authority \(url) answered HTTP \(result.status).")
        }
        return Data(answer[0..<length])
    }

    private static func withCStrings<R>(_ strings: [String], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
        let copies = strings.map { strdup($0) }
        defer { copies.forEach { free($0) } }
        return body(copies.map { UnsafePointer($0) })
    }
}

/// Appending whole lines to a chain, shared by its writer and the time-stamp sender: each
/// append holds the file's lock (`flock`), so lines never interleave.
enum ChainFile {
    /// Appends `line` to the chain at `url` and syncs it. A last line a killed writer left cut
    /// short is cut away first (it proved nothing; a line after it would not be read).
    static func append(_ line: Data, to url: URL) throws {
        let fd = open(url.path, O_RDWR | O_APPEND | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw TapedeckError.system(errno, while: "open the take's chain \(url.path)") }
        defer { close(fd) }
        try locked(fd) {
            var st = stat()
            guard fstat(fd, &st) == 0 else { throw TapedeckError.system(errno, while: "read the take's chain \(url.path)") }
            if st.st_size > 0 {
                var last: UInt8 = 0
                if pread(fd, &last, 1, st.st_size - 1) == 1, last != 0x0A {
                    let keep = lastLineEnd(fd, size: Int64(st.st_size))
                    guard ftruncate(fd, off_t(keep)) == 0 else { throw TapedeckError.system(errno, while: "mend the take's chain \(url.path)") }
                }
            }
            try write(line, to: fd)
            guard fsync(fd) == 0 else { throw TapedeckError.system(errno, while: "sync the take's chain \(url.path)") }
        }
    }

    /// Runs `body` holding the exclusive lock of the open file `fd`.
    static func locked<R>(_ fd: Int32, _ body: () throws -> R) throws -> R {
        while flock(fd, LOCK_EX) != 0 {
            guard errno == EINTR else { throw TapedeckError.system(errno, while: "lock the take's chain") }
        }
        defer { flock(fd, LOCK_UN) }
        return try body()
    }

    static func write(_ data: Data, to fd: Int32) throws {
        try data.withUnsafeBytes { raw in
            var done = 0
            while done < raw.count {
                let n = Glibc.write(fd, raw.baseAddress! + done, raw.count - done)
                if n < 0 {
                    if errno == EINTR { continue }
                    throw TapedeckError.system(errno, while: "write the take's chain")
                }
                done += n
            }
        }
    }

    /// The offset just past the file's last newline (0 when it has none).
    private static func lastLineEnd(_ fd: Int32, size: Int64) -> Int64 {
        var at = size
        var buffer = [UInt8](repeating: 0, count: 4096)
        while at > 0 {
            let n = Int(min(Int64(buffer.count), at))
            at -= Int64(n)
            guard pread(fd, &buffer, n, off_t(at)) == n else { return size }
            if let i = buffer[0..<n].lastIndex(of: 0x0A) { return at + Int64(i) + 1 }
        }
        return 0
    }
}
