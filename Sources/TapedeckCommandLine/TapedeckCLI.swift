public import TapedeckAssembly
import TapedeckCore
#if canImport(Glibc)
import Glibc
#endif

/// The whole `tapedeck` command line as a library: every command, the web page of `serve`, shell
/// completion, the man page's source (`--experimental-dump-help`), `backends`, `config check`,
/// `show`, `init` and `example`, assembled from the plugins of one `PluginCatalog`.
///
/// Tapedeck's own `main.swift` is one line, `await TapedeckCLI.main(catalog: .builtIn)`. A
/// package that adds a plugin builds its own `tapedeck` the same way:
///
/// ```swift
/// import TapedeckAssembly
/// import TapedeckCommandLine
/// import MyCodec
///
/// await TapedeckCLI.main(catalog: .builtIn.adding(encoders: [MyCodecPlugin.encoder],
///                                                 decoders: [MyCodecPlugin.decoder]))
/// ```
///
/// The catalog is handed to the commands as a task-local value for the length of the run (the
/// argument parser makes the commands itself, so they cannot take it through an initializer):
/// no global is set, and a test can run two catalogs side by side.
public enum TapedeckCLI {
    /// Parses the process's arguments, runs the command they name with `catalog`'s plugins, and
    /// ends the process with the command's exit status (documented in `tapedeck --help`).
    ///
    /// Call it once, from the program's top-level code. Writing to a closed pipe is an error
    /// the command handles (SIGPIPE is ignored from here on); what is gathered for stdout is
    /// written at exit whichever way the command ends.
    /// - Thread: the main thread, from top-level code; blocks (awaits) for the whole command and
    ///   never returns.
    @MainActor
    public static func main(catalog: PluginCatalog) async -> Never {
        await BoundCatalog.$current.withValue(catalog) { @MainActor in
            await Tapedeck.runProcess()
        }
        exit(0)
    }
}

/// The plugin catalog of the running command: bound by ``TapedeckCLI/main(catalog:)`` around
/// parsing and running, read by every command, completion and help text that lists plugins.
enum BoundCatalog {
    @TaskLocal static var current: PluginCatalog = .builtIn

    /// For `--version`: the plugins this build adds to Tapedeck's own, or nothing.
    static var addedPluginsLine: String {
        let added = current.added(to: .builtIn)
        guard !added.isEmpty else { return "" }
        return "\n  plugins added: " + added.map { "\($0.name) (\($0.role.rawValue))" }.joined(separator: ", ")
    }
}
