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
            names another); Tapedeck never prints or logs it.
            """ + HelpExamples.text([
            "tapedeck keys init": "Make this machine's key; prints its public key and fingerprint.",
            "tapedeck keys export > studio.pub": "The public key, for whoever verifies this machine's takes.",
        ]),
        subcommands: [KeysShowCommand.self, KeysInitCommand.self, KeysExportCommand.self],
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
        }
    }
}
