import ArgumentParser
import Foundation
import TapedeckApp
import TapedeckAssembly
import TapedeckCore
import TapedeckProvenance

struct KeysCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keys",
        abstract: "This machine's signing key: make it, and print its public key for others to verify with.",
        discussion: """
            With provenance: { sign: true } in the config, every take is signed as it is recorded: \
            a hash chain of its audio, written beside it (TAKEFILE.chain) at each checkpoint and \
            signed with this key every few seconds and at the end. `tapedeck verify TAKE --key KEY` \
            checks a take (or a file and its .chain) against the public key. The private key stays \
            in its file (mode 0600, $XDG_CONFIG_HOME/tapedeck/signing-key unless provenance.key \
            names another); Tapedeck never prints or logs it. With provenance.tsa set to an RFC 3161 \
            time-stamping authority, each take's head is also stamped at its end (and every \
            provenance.tsa-every-minutes); requests made while the authority cannot be reached wait \
            in a queue, and `tapedeck keys stamp` sends them.
            """ + HelpExamples.text([
            "tapedeck keys init": "Make this machine's key; prints its public key and fingerprint.",
            "tapedeck keys export > studio.pub": "The public key, for whoever verifies this machine's takes.",
            "tapedeck keys stamp": "Send the time-stamp requests that wait in the queue.",
        ]),
        subcommands: [KeysShowCommand.self, KeysInitCommand.self, KeysExportCommand.self, KeysStampCommand.self],
        defaultSubcommand: KeysShowCommand.self)
}

/// `tapedeck keys init`: makes the key (never over one).
struct KeysInitCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "init", abstract: "Make this machine's signing key (Ed25519), if it has none.")

    @OptionGroup var global: GlobalOptions

    @MainActor
    func run() async throws {
        try await reportingErrors {
            let file = try global.makeStudioWithoutLibrary().signingKeyFile()
            let key = try DeviceKey.create(at: file)
            print("Made a signing key in \(file.path) (only you may read it; keep a copy somewhere safe).")
            print("Public key:  \(key.publicKey)")
            print("Fingerprint: \(key.publicKey.fingerprint)")
            print("Sign takes with provenance: { sign: true } in the config; give the public key (`tapedeck keys export`) to whoever verifies them.")
        }
    }
}

/// `tapedeck keys export`: the public key, alone on stdout.
struct KeysExportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "export", abstract: "Print the public key (for `tapedeck verify --key`).")

    @OptionGroup var global: GlobalOptions

    @MainActor
    func run() async throws {
        try await reportingErrors {
            let key = try DeviceKey.load(at: try global.makeStudioWithoutLibrary().signingKeyFile())
            print(key.publicKey.description)
        }
    }
}

/// `tapedeck keys` (`show`): where the key is, its public half and fingerprint, and whether takes are signed.
struct KeysShowCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "show", abstract: "Where the key is, its public key and fingerprint, and whether takes are signed.")

    @OptionGroup var global: GlobalOptions

    @MainActor
    func run() async throws {
        try await reportingErrors {
            let studio = try global.makeStudioWithoutLibrary()
            let file = studio.signingKeyFile()
            let signs = ProvenanceSettings(studio.configuration.provenanceSettings).sign
            guard FileManager.default.fileExists(atPath: file.path) else {
                print("No signing key (\(file.path)). Make one with `tapedeck keys init`.")
                return
            }
            let key = try DeviceKey.load(at: file)
            print("Key:         \(file.path)")
            print("Public key:  \(key.publicKey)")
            print("Fingerprint: \(key.publicKey.fingerprint)")
            print(signs ? "Takes are signed as they are recorded (provenance.sign)." : "Takes are not signed: set provenance: { sign: true } in the config to sign them.")
            let stamper = try studio.makeTimeStamper()
            if let authority = stamper.authority { print("Time stamps: \(authority) (provenance.tsa)") }
            let waiting = stamper.pending().count
            if waiting > 0 { print("\(Terminal.counted(waiting, "time-stamp request")) \(waiting == 1 ? "waits" : "wait") in \(stamper.folder.path): send \(waiting == 1 ? "it" : "them") with `tapedeck keys stamp`.") }
        }
    }
}

/// `tapedeck keys stamp`: sends the queued time-stamp requests now.
struct KeysStampCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stamp", abstract: "Send the time-stamp requests that wait in the queue (provenance.tsa).",
        discussion: "Each token is checked and appended to its take's chain. Exit status: 0 when none is left, 69 when some could not be sent (they stay queued).")

    @OptionGroup var global: GlobalOptions

    @MainActor
    func run() async throws {
        var left = 0
        try await reportingErrors {
            let stamper = try global.makeStudioWithoutLibrary().makeTimeStamper()
            let waiting = stamper.pending().count
            guard waiting > 0 else {
                print("No time-stamp request waits in the queue (\(stamper.folder.path)).")
                return
            }
            let round = await Task.detached { stamper.sendQueued() }.value
            if round.sent > 0 { print("Sent \(Terminal.counted(round.sent, "time-stamp request")); each token is in its take's chain.") }
            if round.left > 0 {
                left = round.left
                Terminal.printError("\(Terminal.counted(round.left, "time-stamp request")) still \(round.left == 1 ? "waits" : "wait")\(RecordCommand.because(round.problem)) Try again later with `tapedeck keys stamp`.")
            }
        }
        // EX_UNAVAILABLE: the authority could not be reached.
        if left > 0 { throw ExitCode(69) }
    }
}
