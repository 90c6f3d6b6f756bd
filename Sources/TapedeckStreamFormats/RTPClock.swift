package import Foundation

/// The time of day of an RTP sample from its timestamp, when the session names the clock the
/// timestamps follow (RFC 7273, as AES67 senders write it): `a=ts-refclk:ptp=…` or `ntp=…` with
/// `a=mediaclk:direct=OFFSET`. The timestamp is then the reference clock, counted at the
/// stream's rate from the clock's epoch (PTP: 1970 in TAI; NTP: 1900 in UTC), plus the
/// offset, modulo 2³². This machine's clock is taken to follow the same reference (ptp4l and
/// phc2sys, or chrony on the same grandmaster): the sample is the one whose count is nearest
/// below the arrival. When the two disagree by more than ``agreementSeconds``, the timestamps
/// are not trusted and the arrival is the time. A plain value; any thread.
package struct RTPClock: Sendable, Hashable {
    package enum Reference: String, Sendable {
        case ptp = "PTP"
        case ntp = "NTP"
    }

    /// TAI − UTC since 2017-01-01 (no leap second has been announced since).
    package static let taiMinusUTC: Double = 37
    /// Seconds from NTP's epoch (1900-01-01) to the Unix epoch.
    package static let ntpToUnix: Double = 2_208_988_800
    /// How far a sample's time by its timestamp may be from its arrival and still be trusted.
    package static let agreementSeconds: Double = 1

    package let reference: Reference
    package let rate: Int
    package let offset: UInt32

    /// The clock `session` names; nil when it names none, or one Tapedeck does not read
    /// (``unreadReference(_:)`` says which).
    package init?(_ session: SessionDescription) {
        guard let refclk = session.clockReference?.lowercased(), let offset = session.mediaClockOffset else { return nil }
        if refclk.hasPrefix("ptp=") { reference = .ptp } else if refclk.hasPrefix("ntp=") { reference = .ntp } else { return nil }
        rate = session.encoding.sampleRate
        self.offset = offset
    }

    /// Why a session's clock is not used, for the log; nil when it is, or names none.
    package static func unreadReference(_ session: SessionDescription) -> String? {
        guard let refclk = session.clockReference else { return nil }
        if RTPClock(session) != nil { return nil }
        if session.mediaClockOffset == nil { return "the session names \(refclk) but no a=mediaclk:direct= offset" }
        return "Tapedeck reads PTP and NTP reference clocks, not \(refclk)"
    }

    /// Seconds on the reference's own scale since its epoch, at `date`.
    private func referenceSeconds(_ date: Date) -> Double {
        switch reference {
        case .ptp: date.timeIntervalSince1970 + Self.taiMinusUTC
        case .ntp: date.timeIntervalSince1970 + Self.ntpToUnix
        }
    }

    /// The time of the sample stamped `timestamp` that arrived at `arrival`, and how long
    /// before its arrival that was (negative: the sender's clock is ahead of this machine's).
    /// Nil when the two clocks disagree by more than ``agreementSeconds``.
    package func date(of timestamp: UInt32, arrivedAt arrival: Date) -> (date: Date, before: Double)? {
        let seconds = referenceSeconds(arrival)
        let count = Int64((seconds * Double(rate)).rounded(.down))  // the media clock at arrival
        var behind = (count &+ Int64(offset) &- Int64(timestamp)) & 0xFFFF_FFFF
        if behind >= 1 << 31 { behind -= 1 << 32 }
        let before = Double(behind) / Double(rate)
        guard abs(before) <= Self.agreementSeconds else { return nil }
        let sample = Double(count - behind) / Double(rate)
        return (arrival.addingTimeInterval(sample - seconds), before)
    }
}
