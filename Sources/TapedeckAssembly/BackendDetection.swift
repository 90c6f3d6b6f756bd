public import Foundation
public import Logging
public import TapedeckCore

/// Chooses the capture and playback backends on a machine whose configuration names none, as
/// `arecord` and `parecord` need no configuration: a running JACK server when one answers (a
/// studio machine runs one on purpose, and PulseAudio's clients then usually reach the card
/// through it or not at all), else the running sound server (PulseAudio, or PipeWire's
/// PulseAudio server), else ALSA's `default` device. Never the null backend: that would
/// "record" a test tone.
///
/// A plain value; ``choose(for:)`` runs on any thread and blocks while it asks the server (a
/// local socket: milliseconds, bounded by the backend's own connect timeout).
public struct BackendDetection: Sendable {
    /// The backends tried, in order. Each but the last is taken only when it answers (it lists
    /// its devices); the last one compiled in is taken without asking, so that opening it says
    /// what is wrong with the machine's audio.
    public static let order = ["jack", "pipewire", "pulse", "alsa"]

    public var catalog: PluginCatalog
    public var context: PluginContext
    /// The roles to choose for (the command's: `record` capture, `play` playback).
    public var roles: Set<PluginRole>

    public init(catalog: PluginCatalog, roles: Set<PluginRole> = [.capture, .playback], logger: Logger, defaultLibraryURL: URL) {
        self.catalog = catalog
        self.roles = roles
        self.context = PluginContext(logger: logger, defaultLibraryURL: defaultLibraryURL)
    }

    /// The backend for `role` (capture or playback) and why it was chosen; `nil` for other roles
    /// or when none of ``order`` is compiled in.
    public func choose(for role: PluginRole) -> (plugin: String, reason: String)? {
        guard role == .capture || role == .playback, roles.contains(role) else { return nil }
        let present = Self.order.filter { name in catalog.entries(for: role).contains { $0.name == name } }
        for (index, name) in present.enumerated() {
            if index == present.count - 1 {
                return (name, index == 0 ? "the only \(role.rawValue) backend in this build" : "no sound server answered")
            }
            if answers(name, role: role) { return (name, "a sound server answered") }
        }
        return nil
    }

    /// Whether backend `name` lists at least one device for the role with its default settings
    /// (a server with nothing to record from, such as a PipeWire running for video only, does not count).
    private func answers(_ name: String, role: PluginRole) -> Bool {
        var context = self.context
        context.section = role.rawValue + "." + name
        do {
            switch role {
            case .capture:
                guard let plugin = catalog.capture.first(where: { $0.name == name }) else { return false }
                return try plugin.make(try PluginSettings.resolving(plugin.settings), context).devices().contains { $0.canCapture }
            case .playback:
                guard let plugin = catalog.playback.first(where: { $0.name == name }) else { return false }
                return try plugin.make(try PluginSettings.resolving(plugin.settings), context).devices().contains { $0.canPlay }
            default:
                return false
            }
        } catch {
            return false
        }
    }
}
