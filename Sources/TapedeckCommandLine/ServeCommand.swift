import ArgumentParser
import Foundation
import TapedeckAssembly
import TapedeckApp
import TapedeckCore
import TapedeckServer
import TapedeckServerAssembly
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve a web page (and JSON API) to watch levels, record, and play and download takes.",
        usage: "tapedeck serve [<options>]",
        discussion: """
            Open the address it prints in a browser. By default it listens on 127.0.0.1:8470, this machine \
            only. To reach it from a phone or another computer, listen on the network (--listen 0.0.0.0:8470): \
            the page then asks for the server's token, made on first start into --token-file (only you can \
            read it) and printed once. Scripts send it as `Authorization: Bearer TOKEN`; the server describes \
            its API at /api/openapi.yaml (OpenAPI 3.1). For TLS, put it behind a reverse proxy (see the README).
            Ctrl-C (SIGINT) or SIGTERM stops it; a recording in progress is finished first, as \
            `tapedeck record` finishes its take, and connections still open 5 s later are closed. `tapedeck mark` sets a marker in its recording.
            A connection that sends no complete request head within 10 s (or body within 30 s of it), or stays idle for 30 s between requests, is \
            closed (a download or the live state is not timed, unless the client reads nothing of it for 60 s), a malformed request is answered 400 and \
            closed, one address may hold at most 32 connections at once, and all together stay below the open-file limit (`ulimit -n`, raised to its hard limit at start).
            """ + HelpExamples.text([
            "tapedeck serve": "The page on this machine only, at http://127.0.0.1:8470/.",
            "tapedeck serve --listen 0.0.0.0:8470": "Reachable from a phone: scan the QR code it prints.",
        ]))

    @Option(help: ArgumentHelp("Where to listen: ADDRESS:PORT (127.0.0.1:8470 is this machine only; 0.0.0.0:8470 every network, with a token; port 0 picks a free one).", valueName: "address:port"))
    var listen = ServerOptions.defaultListen

    @Option(help: ArgumentHelp("The file holding the access token (made, mode 0600, when missing). Default: $XDG_CONFIG_HOME/tapedeck/serve-token.", valueName: "file"))
    var tokenFile: String?

    @Flag(help: "Ask for the token on 127.0.0.1 too (other users of this machine can reach that address).")
    var requireToken = false

    @Option(name: [.customShort("D"), .long], help: "The capture device to record from (as `tapedeck devices` lists it).", completion: DeviceCompletion.kind(capture: true))
    var device: String?

    @OptionGroup var global: GlobalOptions

    @MainActor
    mutating func run() async throws {
        try await reportingErrors {
            let environment = ProcessInfo.processInfo.environment
            let paths = UserPaths(environment: environment)
            let tokenURL = tokenFile.map { URL(fileURLWithPath: paths.expandingTilde($0)) } ?? paths.serveTokenFile
            let options = try ServerOptions(listen: listen, tokenFile: tokenURL, alwaysRequireToken: requireToken)
            let studio = try await global.makeStudio(
                loadingSessions: true, writing: true,
                overrides: device.map { [PluginOverride(section: "capture", key: "device", value: $0, option: "-D/--device")] } ?? [],
                detecting: [.capture])
            let loaded = options.requiresToken ? try AccessToken.load(from: tokenURL, makingFolders: tokenFile == nil) : nil
            let (token, madeToken) = (loaded?.token, loaded?.created == true)
            let library = studio.store.storage.rootURL.path
            Self.removeStaleExportFolders()
            Self.raiseDescriptorLimit()
            let exportFolder = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("tapedeck-serve-\(getpid())-\(UUID().uuidString.prefix(8))")
            let registration = RegistrationBox()
            // Exports on request run as this same program, on this library, in child processes.
            let exportCommand = ["/proc/self/exe"] + global.arguments + (studio.libraryPathKey.map { ["--set", "\($0)=\(library)"] } ?? [])
            let server = studio.makeServer(
                options: options, token: token, exportFolder: exportFolder, exportCommand: exportCommand,
                otherRecorders: {
                    RecorderRegistry.running(paths).filter { $0.library == library && $0.pid != getpid() }.map { $0.socket(paths) }
                },
                started: { session in
                    registration.inbox = MarkInbox(registration: RecorderRegistry.register(
                        session: session.isEmpty ? "the most recent session" : session, library: library, startedBy: "serve", paths: paths))
                    registration.recording = true
                    // `tapedeck status` and other servers on this library see it as any recorder.
                    registration.control = registration.inbox.registration.flatMap { url in
                        try? RecorderControl.listen(at: RecorderRegistry.socket(for: url)) { request in registration.answer(request, library: library) }
                    }
                },
                ended: {
                    registration.control?.close()
                    registration.control = nil
                    RecorderRegistry.unregister(registration.inbox.registration)
                    registration.inbox = MarkInbox()
                    registration.recording = false
                })
            registration.desk = server.desk
            let heartbeat = CatalogHeartbeat.start(studio, role: "serve", state: CatalogHeartbeat.serving(server.desk, folder: library,
                                                                                                            format: studio.configuration.recording.format))
            // Markers come counted: a flood of SIGUSR1 is one task on the main actor at a time.
            let markers = SignalTally()
            let stopAsked = Mutex<Date?>(nil)
            let signals = try SignalTrap(signals: [SIGINT, SIGTERM, SIGHUP, SIGUSR1], requests: [SIGUSR1],
                                         onRequest: { _, count in
                                             markers.add(count) { n in
                                                 guard registration.recording else { return }
                                                 for label in registration.inbox.take(signals: n) { try? server.markFromSignal(label: label) }
                                             }
                                         }) { _ in
                Terminal.writeStderr("Stopping…\n")
                stopAsked.withLock { $0 = $0 ?? Date() }
                server.shutdown()
            }
            defer {
                heartbeat?.stop()
                signals.cancel()
                registration.control?.close()
                RecorderRegistry.unregister(registration.inbox.registration)
            }
            let requiresToken = options.requiresToken
            let wide = !options.isLoopback
            let onTerminal = Terminal.stdoutIsTerminal
            try await server.run { address in
                var lines: [String]
                var firstAddress = address
                if wide, let port = URLComponents(string: address)?.port, ["0.0.0.0", "::"].contains(options.host) {
                    // Every network: the addresses a phone or another computer can open.
                    let reachable = ServeCommand.addresses(ipv6: options.host == "::").map { "http://\($0):\(port)/" }
                    firstAddress = reachable.first ?? address
                    lines = ["Serving \(library) on every network (the page asks for the token), at "
                             + (reachable.isEmpty ? address : reachable.joined(separator: ", ")) + "."]
                } else {
                    lines = ["Serving \(library) at \(address)" + (wide ? " (the page asks for the token)." : " (this machine only).")]
                }
                if madeToken, let token {
                    // Printed once, to a person: never into a log or a journal.
                    lines.append(onTerminal ? "A token was made for this server: \(token.value)" : "A token was made for this server.")
                    lines.append("It is kept in \(tokenURL.path) (only you can read it)" + (onTerminal ? "; it is not printed again." : "; `cat` it to log in."))
                } else if requiresToken {
                    lines.append("Log in with the token in \(tokenURL.path).")
                }
                // A one-time link and its QR code, for a phone: to a person at a terminal only.
                if requiresToken && onTerminal, let link = server.loginLink(at: firstAddress) {
                    lines.append("Or open this link, once, within 15 minutes (a phone can scan the code):")
                    lines.append("  " + link)
                    let colours = ProcessInfo.processInfo.environment["TERM"].map { $0 != "dumb" && !$0.isEmpty } ?? false
                    lines += TerminalQRCode.lines(link, columns: Terminal.terminalColumns(), colours: colours) ?? []
                }
                lines.append("Press Ctrl-C to stop (a recording in progress is finished first).")
                // At once, even into a pipe or a log: whoever started the server waits for its address.
                StandardOutput.write(lines.joined(separator: "\n") + "\n")
                StandardOutput.flush()
            }
            // The recording the stop finished, named as `record` names its take.
            if let last = server.desk.last, let take = last.takeName, let session = last.sessionName, let stop = stopAsked.withLock({ $0 }), last.endedAt >= stop {
                StandardOutput.write("Finished the recording in progress: \(Terminal.safe(session))/\(Terminal.safe(take)) (\(Terminal.clock(last.seconds))). \(last.failed ? last.summary : "")".trimmingCharacters(in: .whitespaces) + "\n")
            }
            StandardOutput.write("Stopped.\n")
        }
    }
}

extension ServeCommand {
    /// Raises the soft limit of open descriptors to the hard limit (as servers do; the soft
    /// limit's 1024 is for programs that still use `select`): each connection holds one, and the
    /// server takes connections up to this limit less a reserve (``ServerOptions/connectionsInAll``).
    static func raiseDescriptorLimit() {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        limit.rlim_cur = min(limit.rlim_max, 1 << 20)
        _ = setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
    }

    /// Removes the export folders (`tapedeck-serve-PID-…` in the temporary folder) of this
    /// user's servers that are gone without stopping (SIGKILL, power loss): a server removes its
    /// own when it stops. - Blocks while it removes them.
    static func removeStaleExportFolders() {
        let temporary = URL(fileURLWithPath: NSTemporaryDirectory())
        for name in (try? FileManager.default.contentsOfDirectory(atPath: temporary.path)) ?? [] where name.hasPrefix("tapedeck-serve-") {
            let fields = name.split(separator: "-")
            guard fields.count == 4, let pid = pid_t(fields[2]), pid != getpid(), kill(pid, 0) != 0, errno == ESRCH else { continue }
            let url = temporary.appendingPathComponent(name)
            var info = stat()
            guard lstat(url.path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR, info.st_uid == getuid() else { continue }
            try? FileManager.default.removeItem(at: url)
        }
    }

    /// This machine's addresses other machines can reach (not loopback), IPv4 first.
    static func addresses(ipv6: Bool) -> [String] {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return [] }
        defer { freeifaddrs(list) }
        var v4: [String] = [], v6: [String] = []
        for entry in sequence(first: first, next: { $0.pointee.ifa_next }) {
            guard let address = entry.pointee.ifa_addr, entry.pointee.ifa_flags & UInt32(IFF_LOOPBACK) == 0,
                  entry.pointee.ifa_flags & UInt32(IFF_UP) != 0 else { continue }
            var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            let family = Int32(address.pointee.sa_family)
            guard family == AF_INET || (ipv6 && family == AF_INET6) else { continue }
            let length = socklen_t(family == AF_INET ? MemoryLayout<sockaddr_in>.size : MemoryLayout<sockaddr_in6>.size)
            guard getnameinfo(address, length, &host, socklen_t(host.count), nil, 0, NI_NUMERICHOST) == 0 else { continue }
            let text = String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if family == AF_INET { v4.append(text) } else if !text.hasPrefix("fe80") { v6.append("[\(text)]") }
        }
        return v4 + v6
    }
}

/// The desk's entry in the registry of running recorders (for `tapedeck mark`). Main actor only.
@MainActor
final class RegistrationBox {
    /// Whether the desk records (markers go nowhere otherwise), and what `tapedeck mark` left it.
    var recording = false
    var inbox = MarkInbox()
    /// The desk's recording's control socket (``RecorderControl``) while it records.
    var control: RecorderControl?
    weak var desk: RecordingDesk?

    /// The desk's answer through its control socket.
    func answer(_ request: RecorderControl.Request, library: String) -> RecorderControl.Answer {
        guard let desk, desk.isRecording else { return RecorderControl.Answer(error: "The recording has ended.") }
        return RecorderControl.answer(request, splitRefusal: nil, mark: { try? desk.mark(label: $0) }, split: { try? desk.split() },
                                      stop: { desk.stop() }, status: { desk.status(pid: getpid(), library: library) })
    }
}
