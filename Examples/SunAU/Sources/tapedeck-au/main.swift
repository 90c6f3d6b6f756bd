import SunAU
import TapedeckAssembly
import TapedeckCommandLine

// Tapedeck's whole command line, with every plugin Tapedeck compiles in and the `au` codec:
// `tapedeck-au record --set encoder.name=au`, `tapedeck-au export last --format au`,
// `tapedeck-au import take.au`, and `au` in `backends`, `config show` and `config example`.
await TapedeckCLI.main(catalog: .builtIn.adding(encoders: [SunAUPlugin.encoder], decoders: [SunAUPlugin.decoder]))
