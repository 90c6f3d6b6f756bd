import Synchronization

/// A bounded single-producer, single-consumer queue of fixed-size audio slots.
///
/// Memory is allocated once at creation; neither side allocates, locks or blocks inside the
/// ring. The producer (a device thread) fills a slot in place and publishes it; the consumer
/// (the writer thread) reads it in place and releases it. Each slot also carries how many frames
/// of silence must precede it (a gap left by an overrun) and why.
final class SlotRing: @unchecked Sendable {
    let slotCount: Int
    let slotFrames: Int
    let bytesPerFrame: Int
    private let storage: UnsafeMutableRawPointer
    private let frames: UnsafeMutablePointer<Int>
    private let bufferGaps: UnsafeMutablePointer<Int64>
    private let deviceGaps: UnsafeMutablePointer<Int64>
    private let events: UnsafeMutablePointer<SlotEvent>
    private let head = Atomic<Int>(0)
    private let tail = Atomic<Int>(0)

    init(slotCount: Int, slotFrames: Int, bytesPerFrame: Int) {
        precondition(slotCount > 0 && slotFrames > 0 && bytesPerFrame > 0)
        self.slotCount = slotCount
        self.slotFrames = slotFrames
        self.bytesPerFrame = bytesPerFrame
        storage = .allocate(byteCount: slotCount * slotFrames * bytesPerFrame, alignment: 16)
        storage.initializeMemory(as: UInt8.self, repeating: 0, count: slotCount * slotFrames * bytesPerFrame)
        frames = .allocate(capacity: slotCount)
        frames.initialize(repeating: 0, count: slotCount)
        bufferGaps = .allocate(capacity: slotCount)
        bufferGaps.initialize(repeating: 0, count: slotCount)
        deviceGaps = .allocate(capacity: slotCount)
        deviceGaps.initialize(repeating: 0, count: slotCount)
        events = .allocate(capacity: slotCount)
        events.initialize(repeating: .none, count: slotCount)
    }

    deinit {
        storage.deallocate()
        frames.deallocate()
        bufferGaps.deallocate()
        deviceGaps.deallocate()
        events.deallocate()
    }

    /// Number of slots filled and not yet released.
    var count: Int { head.load(ordering: .acquiring) - tail.load(ordering: .acquiring) }

    // MARK: producer side

    /// The slot the producer may fill next, or `nil` when the ring is full.
    func producerSlot() -> Int? {
        let h = head.load(ordering: .relaxed)
        let t = tail.load(ordering: .acquiring)
        return h - t < slotCount ? h % slotCount : nil
    }

    func pointer(_ slot: Int) -> UnsafeMutableRawPointer {
        storage + slot * slotFrames * bytesPerFrame
    }

    /// Publishes the slot returned by ``producerSlot()``.
    func publish(_ slot: Int, frames count: Int, bufferGap: Int64, deviceGap: Int64, event: SlotEvent = .none) {
        frames[slot] = count
        bufferGaps[slot] = bufferGap
        deviceGaps[slot] = deviceGap
        events[slot] = event
        head.add(1, ordering: .releasing)
    }

    // MARK: consumer side

    /// The oldest published slot, or `nil` when the ring is empty.
    func consumerSlot() -> (slot: Int, frames: Int, bufferGap: Int64, deviceGap: Int64, event: SlotEvent)? {
        let t = tail.load(ordering: .relaxed)
        let h = head.load(ordering: .acquiring)
        guard t < h else { return nil }
        let s = t % slotCount
        return (s, frames[s], bufferGaps[s], deviceGaps[s], events[s])
    }

    /// The published slot `ahead` places after the oldest one, or `nil` when there is none.
    func consumerSlot(ahead: Int) -> (slot: Int, frames: Int, bufferGap: Int64, deviceGap: Int64, event: SlotEvent)? {
        let t = tail.load(ordering: .relaxed) + ahead
        let h = head.load(ordering: .acquiring)
        guard t < h else { return nil }
        let s = t % slotCount
        return (s, frames[s], bufferGaps[s], deviceGaps[s], events[s])
    }

    /// Releases the slot returned by ``consumerSlot()``, and `count - 1` after it.
    func release(count: Int = 1) {
        tail.add(count, ordering: .releasing)
    }
}

/// What happened at a slot besides audio (an empty slot carries it): the device was lost, or
/// came back, between the slot before and this one.
enum SlotEvent: UInt8 {
    case none, deviceLost, deviceResumed
}
