import ArgumentParser
import Foundation
import TapedeckAssembly
import TapedeckApp
import TapedeckCore
import TapedeckServer
#if canImport(Glibc)
import Glibc
#endif

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve a web page (and JSON API) to watch levels, record, and play and download takes.",
        discussion: """
            Open the address it prints in a browser. By default it listens on 127.0.0.1:8470, this machine \
            only. To reach it from a phone or another computer, listen on the network (--listen 0.0.0.0:8470): \
            the page then asks for the server's token, made on first start into --token-file (only you can \
            read it) and printed once. Scripts send it as `Authorization: Bearer TOKEN`; the server describes \
            its API at /api/openapi.yaml (OpenAPI 3.1). For TLS, put it behind a reverse proxy (see the README).
            Ctrl-C (SIGINT) or SIGTERM stops it; a recording in progress is finished first, as \
            `tapedeck record` finishes its take. `tapedeck mark` sets a marker in its recording.
            """)

    @OptionGroup var global: GlobalOptions

    @Option(help: ArgumentHelp("Where to listen: ADDRESS:PORT (127.0.0.1:8470 is this machine only; 0.0.0.0:8470 every network, with a token; port 0 picks a free one).", valueName: "address:port"))
    var listen = ServerOptions.defaultListen

    @Option(help: ArgumentHelp("The file holding the access token (made, mode 0600, when missing). Default: $XDG_CONFIG_HOME/tapedeck/serve-token.", valueName: "file"))
    var tokenFile: String?

    @Flag(help: "Ask for the token on 127.0.0.1 too (other users of this machine can reach that address).")
    var requireToken = false

    @Option(name: [.customShort("D"), .long], help: "The capture device to record from (as `tapedeck devices` lists it).")
    var device: String?

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
            let loaded = options.requiresToken ? try AccessToken.load(from: tokenURL) : nil
            let (token, madeToken) = (loaded?.token, loaded?.created == true)
            let library = studio.store.storage.rootURL.path
            let exportFolder = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("tapedeck-serve-\(getpid())-\(UUID().uuidString.prefix(8))")
            let registration = RegistrationBox()
            let server = studio.makeServer(
                options: options, token: token, exportFolder: exportFolder,
                otherRecorder: {
                    RecorderRegistry.running(paths).first { $0.library == library && $0.pid != getpid() }
                        .map { "Another tapedeck (PID \($0.pid)) is recording into \"\($0.session)\" of this library." }
                },
                started: { session in
                    registration.labelsRead = 0
                    registration.url = RecorderRegistry.register(session: session.isEmpty ? "the most recent session" : session, library: library, paths: paths)
                },
                ended: {
                    RecorderRegistry.unregister(registration.url)
                    registration.url = nil
                })
            let signals = try SignalTrap(signals: [SIGINT, SIGTERM, SIGHUP, SIGUSR1], requests: [SIGUSR1]) { signal in
                if signal == SIGUSR1 {
                    Task { @MainActor in
                        guard let url = registration.url else { return }
                        let labels = RecorderRegistry.newLabels(for: url, from: &registration.labelsRead)
                        for label in labels.isEmpty ? [""] : labels { try? server.markFromSignal(label: label) }
                    }
                } else {
                    Terminal.writeStderr("Stopping…\n")
                    server.shutdown()
                }
            }
            defer {
                signals.cancel()
                RecorderRegistry.unregister(registration.url)
            }
            let requiresToken = options.requiresToken
            let wide = !options.isLoopback
            try await server.run { address in
                var lines = ["Serving \(library) at \(address)" + (wide ? " (every network: the page asks for the token)." : " (this machine only).")]
                if madeToken, let token {
                    lines.append("A token was made for this server: \(token.value)")
                    lines.append("It is kept in \(tokenURL.path) (only you can read it); it is not printed again.")
                } else if requiresToken {
                    lines.append("Log in with the token in \(tokenURL.path).")
                }
                lines.append("Press Ctrl-C to stop (a recording in progress is finished first).")
                // At once, even into a pipe or a log: whoever started the server waits for its address.
                StandardOutput.write(lines.joined(separator: "\n") + "\n")
                StandardOutput.flush()
            }
            StandardOutput.write("Stopped.\n")
        }
    }
}

/// The desk's entry in the registry of running recorders (for `tapedeck mark`). Main actor only.
@MainActor
final class RegistrationBox {
    var url: URL?
    var labelsRead: UInt64 = 0
}
