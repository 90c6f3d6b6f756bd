/// The fixed part of one RTP packet (RFC 3550) and where its payload is. A plain value.
package struct RTPHeader: Sendable, Hashable {
    package var payloadType: Int
    package var sequence: UInt16
    package var timestamp: UInt32
    package var ssrc: UInt32
    /// The payload's byte range within the packet.
    package var payload: Range<Int>

    /// Reads the header of `packet`; nil when it is not RTP version 2 or its lengths do not add up.
    package init?(_ packet: UnsafeRawBufferPointer) {
        guard packet.count >= 12, packet[0] >> 6 == 2 else { return nil }
        let csrcs = Int(packet[0] & 0x0F)
        var start = 12 + 4 * csrcs
        guard packet.count >= start else { return nil }
        if packet[0] & 0x10 != 0 {  // a header extension: 4 bytes, then its length in words
            guard packet.count >= start + 4 else { return nil }
            start += 4 + 4 * (Int(packet[start + 2]) << 8 | Int(packet[start + 3]))
        }
        var end = packet.count
        if packet[0] & 0x20 != 0 { end -= Int(packet[packet.count - 1]) }  // padding: its count is the last byte
        guard start <= end else { return nil }
        payloadType = Int(packet[1] & 0x7F)
        sequence = UInt16(packet[2]) << 8 | UInt16(packet[3])
        timestamp = UInt32(packet[4]) << 24 | UInt32(packet[5]) << 16 | UInt32(packet[6]) << 8 | UInt32(packet[7])
        ssrc = UInt32(packet[8]) << 24 | UInt32(packet[9]) << 16 | UInt32(packet[10]) << 8 | UInt32(packet[11])
        payload = start..<end
    }
}

/// The jitter buffer: packets put back in sequence order and released after at most `delay`;
/// a packet still missing by then is lost, and the frames it held (from the RTP timestamps, so a
/// packet of any size counts right) are released as a hole where it was. Sequence numbers and
/// timestamps are extended past their wrap. A sender that starts over (a jump of more than
/// ``resyncPackets`` packets or ``resyncSeconds`` of timestamps) is followed from its new
/// place, the jump counted as no hole but as a restart. Holes never take the released audio
/// further ahead of the packets' arrival than ``leadSeconds`` (plus 0.1% of the time since the
/// first packet, for a sender's clock that runs fast): a sender whose timestamps run ahead of
/// time gets the excess counted as a restart, not silence written to disk.
///
/// A plain value, owned by one thread (the receiving event loop); no allocation but the held
/// packets' payloads.
package struct RTPReorder {
    /// One thing to hand on, in order.
    package enum Release: Equatable {
        case audio([UInt8])
        case lost(frames: Int)
    }

    package static let resyncPackets: Int64 = 3000
    package static let resyncSeconds: Int64 = 10
    package static let leadSeconds: Int64 = 2

    package let delayNanos: UInt64
    package let bytesPerFrame: Int
    package let sampleRate: Int
    private var expected: Int64?
    private var nextTimestamp: Int64 = 0
    private var held: [Int64: (timestamp: Int64, payload: [UInt8], arrived: UInt64)] = [:]
    package private(set) var latePackets = 0
    package private(set) var lostPackets = 0
    package private(set) var restarts = 0
    private var lastTimestamp: Int64 = 0
    /// When the first packet arrived, and the frames released since (audio and holes).
    private var firstArrival: UInt64?
    private var releasedFrames: Int64 = 0

    package init(delayNanos: UInt64, bytesPerFrame: Int, sampleRate: Int) {
        self.delayNanos = delayNanos
        self.bytesPerFrame = bytesPerFrame
        self.sampleRate = sampleRate
    }

    /// The value of a 16- or 32-bit counter nearest `reference`.
    package static func extend(_ value: UInt64, bits: Int, near reference: Int64) -> Int64 {
        let modulus = Int64(1) << bits
        let base = reference - reference.mod(modulus)
        var candidate = base + Int64(value)
        if candidate - reference > modulus / 2 { candidate -= modulus }
        if reference - candidate > modulus / 2 { candidate += modulus }
        return candidate
    }

    /// One packet arrived at `now` (monotonic nanoseconds). - Returns: what can be handed on.
    package mutating func arrive(_ header: RTPHeader, payload: [UInt8], now: UInt64) -> [Release] {
        guard let expectedSeq = expected else {
            expected = Int64(header.sequence)
            nextTimestamp = Int64(header.timestamp)
            lastTimestamp = nextTimestamp
            held[Int64(header.sequence)] = (Int64(header.timestamp), payload, now)
            return release(now: now)
        }
        let seq = Self.extend(UInt64(header.sequence), bits: 16, near: expectedSeq)
        let ts = Self.extend(UInt64(header.timestamp), bits: 32, near: lastTimestamp)
        if abs(seq - expectedSeq) > Self.resyncPackets || abs(ts - nextTimestamp) > Self.resyncSeconds * Int64(sampleRate) {
            // The sender started over: follow it from here.
            restarts += 1
            var out = flushAll()
            expected = seq
            nextTimestamp = ts
            lastTimestamp = ts
            held[seq] = (ts, payload, now)
            out += release(now: now)
            return out
        }
        guard seq >= expectedSeq, held[seq] == nil else {
            latePackets += 1  // already played as lost, or a duplicate
            return []
        }
        lastTimestamp = max(lastTimestamp, ts)
        held[seq] = (ts, payload, now)
        return release(now: now)
    }

    /// Time passed: packets missing for longer than the delay are given up. - Returns: what can be handed on.
    package mutating func tick(now: UInt64) -> [Release] { release(now: now) }

    /// Hands on everything held, the gaps lost (the end of the stream, or a restart).
    package mutating func flushAll() -> [Release] {
        release(now: UInt64.max)
    }

    private mutating func release(now: UInt64) -> [Release] {
        var out: [Release] = []
        while let expectedSeq = expected {
            if let packet = held.removeValue(forKey: expectedSeq) {
                emit(packet, into: &out)
                expected = expectedSeq + 1
                continue
            }
            // The next packet is missing: wait for it while the oldest held one is younger than the delay.
            guard let oldest = held.keys.min(), let packet = held[oldest] else { break }
            let waited = now == .max ? UInt64.max : now &- packet.arrived
            guard waited >= delayNanos else { break }
            lostPackets += Int(oldest - expectedSeq)
            held[oldest] = nil
            emit(packet, into: &out)
            expected = oldest + 1
        }
        return out
    }

    /// The packet's audio, after the frames missing before it (from the timestamps).
    private mutating func emit(_ packet: (timestamp: Int64, payload: [UInt8], arrived: UInt64), into out: inout [Release]) {
        if firstArrival == nil { firstArrival = packet.arrived }
        var missing = packet.timestamp - nextTimestamp
        if missing > 0 {
            let hole = min(missing, max(0, allowedLead(at: packet.arrived) - releasedFrames))
            if hole < missing { restarts += 1 }  // ahead of time: the rest is no hole
            if hole > 0 { out.append(.lost(frames: Int(hole))) }
            releasedFrames += hole
            missing = hole
        }
        let frames = packet.payload.count / bytesPerFrame
        if missing < 0 {
            // Overlaps what was played (a sender whose timestamps went back a little): the overlap is dropped.
            let skip = Int(min(Int64(frames), -missing))
            if skip < frames { out.append(.audio(Array(packet.payload[(skip * bytesPerFrame)..<(frames * bytesPerFrame)]))) }
            releasedFrames += Int64(frames - skip)
            nextTimestamp = max(nextTimestamp, packet.timestamp + Int64(frames))
            return
        }
        out.append(.audio(frames * bytesPerFrame == packet.payload.count ? packet.payload : Array(packet.payload[0..<(frames * bytesPerFrame)])))
        nextTimestamp = packet.timestamp + Int64(frames)
        releasedFrames += Int64(frames)
    }

    /// The most frames the stream may have released by a packet that arrived at `arrived`:
    /// the time since the first packet (and 0.1% more), the jitter buffer's delay and ``leadSeconds``.
    private func allowedLead(at arrived: UInt64) -> Int64 {
        let first = firstArrival ?? arrived
        let elapsed = Double(arrived &- first > UInt64(Int64.max) ? 0 : arrived &- first)
        let seconds = elapsed * 1.001 / 1e9 + Double(delayNanos) / 1e9 + Double(Self.leadSeconds)
        return Int64(min(seconds * Double(sampleRate), 1e15))
    }
}

extension Int64 {
    /// The remainder in 0..<m.
    fileprivate func mod(_ m: Int64) -> Int64 {
        let r = self % m
        return r < 0 ? r + m : r
    }
}
