public import TapedeckCore

/// Durations as people type them (`5s`, `1h30`, `01:02:03.5`): TapedeckCore's `DurationText`,
/// where the backends read it too; this name keeps older code building.
public typealias DurationText = TapedeckCore.DurationText
