public import Foundation
import CUnixSocket
import TapedeckCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A running recorder's control socket: a Unix socket in the user's private runtime folder
/// (`recorder-PID.sock`, beside the registry's `recorder-PID.json`) through which `tapedeck
/// status`, `tapedeck serve`'s page and any program of the same user see the recording and mark,
/// split or stop it, whoever started it. One request per connection, one JSON line each way:
/// `{"op":"status"}`, `{"op":"mark","label":"…"}`, `{"op":"split"}`, `{"op":"stop"}`; the answer
/// is `{"ok":true,"status":{…}}` (a ``RecorderStatus``) or `{"ok":false,"error":"…"}`.
///
/// Only this user (or root) is answered (`SO_PEERCRED`), on top of the folder's mode 0700. A
/// thread of its own accepts and answers one connection at a time, each within seconds (a
/// client that sends nothing is dropped after 2 s, a busy recorder answers within 5); the handler runs on the main actor. Members run on any
/// thread; ``ask(_:at:timeout:)`` blocks up to its timeout.
public final class RecorderControl: Sendable {
    public struct Request: Codable, Sendable {
        /// `status`, `mark`, `split` or `stop`.
        public var op: String
        public var label: String?
        public init(op: String, label: String? = nil) {
            self.op = op
            self.label = label
        }
    }

    public struct Answer: Codable, Sendable {
        public var ok: Bool
        public var status: RecorderStatus?
        public var error: String?
        public init(status: RecorderStatus) {
            ok = true
            self.status = status
        }
        public init(error: String) {
            ok = false
            self.error = error
        }
    }

    public struct Failure: Error, Sendable {
        public var message: String
    }

    /// Requests and answers are at most this long.
    static let lineLimit = 64 << 10
    private let fd: Int32
    private let path: String
    private let closed = Atomic<Bool>(false)

    private init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
    }

    /// Listens at `url` (replacing a stale socket there) and answers with `handler`.
    /// - Throws: ``Failure`` when the socket cannot be made (no folder).
    public static func listen(at url: URL, handler: @escaping @MainActor @Sendable (Request) -> Answer) throws -> RecorderControl {
        var (address, length) = try socketAddress(url.path)
        if !isAbstract(url.path) { unlink(url.path) }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure(message: "socket: \(String(cString: strerror(errno)))") }
        let previous = umask(0o177)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        umask(previous)
        guard bound == 0, Glibc.listen(fd, 8) == 0 else {
            let e = errno
            Glibc.close(fd)
            throw Failure(message: "Could not listen at \(url.path): \(String(cString: strerror(e))). Check that XDG_RUNTIME_DIR names a folder this user may write.")
        }
        let control = RecorderControl(fd: fd, path: url.path)
        let thread = Thread { control.serve(handler) }
        thread.name = "tapedeck.recorder-control"
        thread.start()
        return control
    }

    /// Stops answering and removes the socket.
    public func close() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        if !Self.isAbstract(path) { unlink(path) }
        // Wakes the thread blocked in accept, which then closes the socket.
        shutdown(fd, Int32(SHUT_RDWR))
    }

    private func serve(_ handler: @escaping @MainActor @Sendable (Request) -> Answer) {
        defer { Glibc.close(fd) }
        while !closed.load(ordering: .acquiring) {
            let client = tapedeck_accept_cloexec(fd)
            if client < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                if errno == EMFILE || errno == ENFILE { usleep(100_000); continue }
                return
            }
            answer(client, handler)
            Glibc.close(client)
        }
    }

    private func answer(_ client: Int32, _ handler: @escaping @MainActor @Sendable (Request) -> Answer) {
        Self.setTimeouts(client, seconds: 2)
        var peer: uid_t = 0
        guard tapedeck_peer_uid(client, &peer) == 0, peer == getuid() || peer == 0 else { return }
        let answer: Answer
        if let line = Self.readLine(client), let request = try? JSONDecoder().decode(Request.self, from: line) {
            let box = Mutex<Answer?>(nil)
            let done = DispatchSemaphore(value: 0)
            Task { @MainActor in
                let a = handler(request)
                box.withLock { $0 = a }
                done.signal()
            }
            guard done.wait(timeout: .now() + 5) == .success, let a = box.withLock({ $0 }) else { return }
            answer = a
        } else {
            answer = Answer(error: "Not a request: send one JSON line, e.g. {\"op\":\"status\"}.")
        }
        guard var data = try? Self.encoder.encode(answer) else { return }
        data.append(0x0A)
        Self.writeAll(client, data)
    }

    /// What a recorder answers to `request`, the same for every kind (`record`, the page's desk):
    /// `mark` (its label checked as the take keeps labels), `split` (refused with `splitRefusal`
    /// when it does not split), `stop`, then its `status` now; `nil` status: it has ended.
    /// - Thread: main actor. Never blocks.
    @MainActor
    public static func answer(_ request: Request, splitRefusal: String?, mark: (String) -> Void, split: () -> Void, stop: () -> Void,
                              status: () -> RecorderStatus?) -> Answer {
        switch request.op {
        case "status":
            break
        case "mark":
            let label = request.label ?? ""
            if let problem = TakeMarker.labelProblem(label) { return Answer(error: problem) }
            mark(label)
        case "split":
            if let splitRefusal { return Answer(error: splitRefusal) }
            split()
        case "stop":
            stop()
        default:
            return Answer(error: "Unknown request \"\(request.op.prefix(40))\": ask for status, mark, split or stop.")
        }
        guard let now = status() else { return Answer(error: "The recording has ended.") }
        return Answer(status: now)
    }

    /// Sends `request` to the recorder listening at `url` and returns its answer.
    /// - Throws: ``Failure`` when no recorder answers there within `timeout` seconds.
    public static func ask(_ request: Request, at url: URL, timeout: Double = 2) throws -> Answer {
        var (address, length) = try socketAddress(url.path)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure(message: "socket: \(String(cString: strerror(errno)))") }
        defer { Glibc.close(fd) }
        setTimeouts(fd, seconds: timeout)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, length) }
        }
        guard connected == 0 else { throw Failure(message: "No recorder answers at \(url.path): \(String(cString: strerror(errno))).") }
        var data = try encoder.encode(request)
        data.append(0x0A)
        guard writeAll(fd, data), let line = readLine(fd) else {
            throw Failure(message: "The recorder at \(url.path) did not answer within \(Int(timeout)) s.")
        }
        do {
            return try decoder.decode(Answer.self, from: line)
        } catch {
            throw Failure(message: "The recorder at \(url.path) answered something that is not a recorder's answer.")
        }
    }

    static let encoder: JSONEncoder = {
        let e = JSONEncoder()
        e.dateEncodingStrategy = .iso8601
        e.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return e
    }()

    static let decoder: JSONDecoder = {
        let d = JSONDecoder()
        d.dateDecodingStrategy = .iso8601
        return d
    }()

    /// The address for `path`, and its length. A path longer than a Unix socket's 107 bytes (a
    /// runtime folder deep in a temporary one) is named in Linux's abstract namespace instead,
    /// by a hash of the path, the same for the listener and its clients; only the peer check
    /// (`SO_PEERCRED`) guards it then, as it guards the file socket too.
    private static func socketAddress(_ path: String) throws -> (sockaddr_un, socklen_t) {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        let pathOffset = MemoryLayout<sockaddr_un>.offset(of: \.sun_path) ?? 2
        var abstract = false
        if bytes.count >= capacity {
            bytes = [0] + Array("tapedeck-control-\(getuid())-\(PrivateFile.stableName(path))".utf8)
            abstract = true
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            if !abstract { raw[bytes.count] = 0 }
        }
        let length = abstract ? pathOffset + bytes.count : MemoryLayout<sockaddr_un>.size
        return (address, socklen_t(length))
    }

    /// Whether `path` is too long for a file socket (its name is then abstract: nothing to remove).
    static func isAbstract(_ path: String) -> Bool {
        path.utf8.count >= MemoryLayout.size(ofValue: sockaddr_un().sun_path)
    }

    private static func setTimeouts(_ fd: Int32, seconds: Double) {
        var value = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - seconds.rounded(.down)) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &value, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &value, socklen_t(MemoryLayout<timeval>.size))
    }

    /// One line (without its newline), at most ``lineLimit`` bytes; `nil` on a timeout or error.
    private static func readLine(_ fd: Int32) -> Data? {
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while data.count < lineLimit {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return data.isEmpty ? nil : data }
            if let end = buffer[0..<n].firstIndex(of: 0x0A) {
                data.append(contentsOf: buffer[0..<end])
                return data
            }
            data.append(contentsOf: buffer[0..<n])
        }
        return nil
    }

    @discardableResult
    private static func writeAll(_ fd: Int32, _ data: Data) -> Bool {
        var sent = 0
        while sent < data.count {
            let n = data.withUnsafeBytes { send(fd, $0.baseAddress! + sent, data.count - sent, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return false }
            sent += n
        }
        return true
    }
}
