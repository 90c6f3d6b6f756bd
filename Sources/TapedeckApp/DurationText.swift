public import TapedeckCore

/// Durations as people type them: ``TapedeckCore/DurationText``, where the backends read it too.
public typealias DurationText = TapedeckCore.DurationText
