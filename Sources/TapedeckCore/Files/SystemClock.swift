import CFileSpace

/// What the kernel knows of the system clock's accuracy. A namespace; any thread, never blocks.
public enum SystemClock {
    /// The clock's estimated error in seconds as the kernel's NTP discipline keeps it (set by
    /// chronyd, ntpd or systemd-timesyncd); `nil` when the kernel says the clock is not
    /// synchronized (nothing disciplines it, or not yet), so its error is unknown.
    public static func estimatedError() -> Double? {
        var (estimated, maximum) = (0.0, 0.0)
        guard tapedeck_clock_error(&estimated, &maximum) == 1 else { return nil }
        return estimated
    }

    /// Whether the kernel counts the clock as synchronized, with its estimated and maximum error
    /// in seconds (`adjtimex`); `nil` when the kernel does not say.
    public static func state() -> (synchronized: Bool, estimatedError: Double, maximumError: Double)? {
        var (estimated, maximum) = (0.0, 0.0)
        let answer = tapedeck_clock_error(&estimated, &maximum)
        guard answer >= 0 else { return nil }
        return (answer == 1, estimated, maximum)
    }
}
