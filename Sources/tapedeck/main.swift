import TapedeckAssembly
import TapedeckCommandLine

// Tapedeck's own command line: every plugin compiled into this build (PluginCatalog.builtIn).
// A package that adds plugins runs the same with its catalog; see TapedeckCLI.
await TapedeckCLI.main(catalog: .builtIn)
