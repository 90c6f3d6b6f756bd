public import Foundation
public import TapedeckApp
import TapedeckCore

/// The parts of the graph `tapedeck waveform`, `doctor` and the server need (the server itself is
/// made in TapedeckServerAssembly, so that nothing below the command line links the web stack).
extension Studio {
    /// Waveform overviews, kept in the user's cache folder (``UserPaths/waveformFolder``).
    /// - Thread: main actor. Never blocks.
    public func makeWaveforms() -> TakeWaveforms {
        TakeWaveforms(folder: paths.waveformFolder, decoders: decoders)
    }

    /// The doctor of the configured store (`tapedeck doctor`, the server's findings).
    /// - Throws: `.configuration` for a store that cannot be examined, saying which can.
    /// - Thread: main actor. Never blocks.
    public func makeDoctor() throws -> LibraryDoctor {
        guard let storage = store.storage as? any LibraryMaintenance else {
            let configured = configuration.storage.plugin ?? "configured"
            let others = catalog.storage.map(\.name).filter { $0 != configured }.joined(separator: ", ")
            throw TapedeckError(.configuration, "The \(configured) storage backend cannot be examined by doctor. Examine a library of another store instead (\(others): --set storage.backend=NAME).")
        }
        return LibraryDoctor(storage: storage, encoders: encoders, decoders: decoders)
    }

    /// Where `tapedeck serve` keeps its token unless `--token-file` says otherwise.
    /// - Thread: any. Never blocks.
    public nonisolated var defaultServeTokenFile: URL { paths.serveTokenFile }
}
