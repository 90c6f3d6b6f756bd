public import TapedeckCore

/// A catalog with plugins from outside Tapedeck: how a package builds its own `tapedeck`
/// (`TapedeckCLI.main(catalog: .builtIn.adding(encoders: [...]))`). Plain values; every member is
/// safe on any thread and never blocks.
extension PluginCatalog {
    /// This catalog with more plugins, each after the ones of its role already here, except
    /// decoders, which come first: a file is read by the first decoder that can, and a package's
    /// reader of its own format is more particular than a general one (libsndfile reads many
    /// formats). A plugin whose name one of its role already has takes that one's place (a
    /// package's own `wav` encoder instead of Tapedeck's), so every name stays unique in a role.
    public func adding(capture: [CapturePlugin] = [], playback: [PlaybackPlugin] = [], encoders: [EncoderPlugin] = [],
                       decoders: [DecoderPlugin] = [], storage: [StoragePlugin] = [], remotes: [RemotePlugin] = []) -> PluginCatalog {
        PluginCatalog(capture: Self.merged(self.capture, capture), playback: Self.merged(self.playback, playback),
                      encoders: Self.merged(self.encoders, encoders), decoders: Self.merged(self.decoders, decoders, addingFirst: true),
                      storage: Self.merged(self.storage, storage), remotes: Self.merged(self.remotes, remotes))
    }

    /// The plugins of this catalog that `base` has no plugin of the same role and name for: what a
    /// package added to Tapedeck's own (for `tapedeck --version` and the reference config).
    public func added(to base: PluginCatalog) -> [PluginEntry] {
        PluginRole.allCases.flatMap { role in
            let known = Set(base.entries(for: role).map(\.name))
            return entries(for: role).filter { !known.contains($0.name) }
        }
    }

    private static func merged<Made>(_ existing: [PluginDescriptor<Made>], _ more: [PluginDescriptor<Made>],
                                     addingFirst: Bool = false) -> [PluginDescriptor<Made>] {
        var result = existing
        var added: [PluginDescriptor<Made>] = []
        for plugin in more {
            if let index = result.firstIndex(where: { $0.name == plugin.name }) {
                result[index] = plugin
            } else if let index = added.firstIndex(where: { $0.name == plugin.name }) {
                added[index] = plugin
            } else {
                added.append(plugin)
            }
        }
        return addingFirst ? added + result : result + added
    }
}
