#ifndef TAPEDECK_RING_H
#define TAPEDECK_RING_H

// The ring stream's real-time half, shared by every callback backend (JACK, PipeWire, and any
// later callback or network source): a single-producer single-consumer ring of interleaved float
// frames with a queue of holes, between a device's callback thread and Tapedeck's device thread.
//
// The callback side (marked "callback" below) only copies, counts, stores atomics and writes an
// eventfd: no locks, no allocation, no logging, so it may run on a real-time thread. The device
// side (marked "device") reads or writes the ring and sleeps in tapedeck_ring_wait.
//
// Capture: the callback pushes what the device delivered, and declares as lost what it did not
// (tapedeck_ring_lose); a lost stretch is published as a hole just before the frames that follow
// it, and the device thread reads it back as `lost_before` exactly where it happened. A full ring
// (the device thread late by the whole ring) is a hole too.
// Playback: the device thread writes, the callback pulls; a ring that runs dry after start and
// before finish is counted as underrun.

#include <stddef.h>
#include <stdint.h>

/// Any thread: converts `count` float samples (full scale 1) to signed 16-bit, as Tapedeck's
/// SampleConverter does (scaled by 2^15, rounded half away from zero, clipped, NaN as 0), at any
/// alignment of either buffer. The loop the ring's floats take into a 16-bit take; in C so that
/// it is vectorized.
void tapedeck_f32_to_s16(const void *source, void *destination, size_t count);

typedef struct tapedeck_ring tapedeck_ring;

enum { TAPEDECK_RING_CAPTURE = 0, TAPEDECK_RING_PLAYBACK = 1 };

/// Device: allocates a ring of `frames` frames of `channels` floats, zeroed and locked in memory
/// (so the callback never faults a page in). NULL when out of memory or the sizes are 0.
tapedeck_ring *tapedeck_ring_create(int direction, uint32_t channels, uint32_t frames);
/// Device: frees the ring. The callback must no longer run.
void tapedeck_ring_destroy(tapedeck_ring *r);

uint32_t tapedeck_ring_channels(const tapedeck_ring *r);
uint32_t tapedeck_ring_capacity(const tapedeck_ring *r);

/// Device: capture: from now on pushed frames are kept (before, they are discarded). Playback:
/// from now on a pull that finds the ring short counts the missing frames as underrun.
void tapedeck_ring_start(tapedeck_ring *r);
/// Device (playback): the last frames are written; a ring running dry is now the end.
void tapedeck_ring_finish(tapedeck_ring *r);
/// Device: the device is gone (its server stopped, its connection closed): wakes a waiting reader
/// or writer. Callable from any thread, the callback's included.
void tapedeck_ring_close(tapedeck_ring *r);

int tapedeck_ring_is_started(const tapedeck_ring *r);
int tapedeck_ring_is_finishing(const tapedeck_ring *r);
int tapedeck_ring_is_closed(const tapedeck_ring *r);

// ---- the callback side ------------------------------------------------------------------

/// Callback (capture): `frames` frames the device never delivered, missing before the next ones
/// pushed (a skipped cycle, a graph clock ahead of the audio). Ignored before start.
void tapedeck_ring_lose(tapedeck_ring *r, uint64_t frames);
/// Callback (capture): copies `frames` interleaved frames in, or as many as fit (the rest is
/// lost, as a hole). Discarded before start. Returns the frames kept.
uint32_t tapedeck_ring_push(tapedeck_ring *r, const float *interleaved, uint32_t frames);
/// Callback (capture): the same from one buffer per channel (`planes[c][i]`).
uint32_t tapedeck_ring_push_planar(tapedeck_ring *r, const float *const *planes, uint32_t frames);
/// Callback (playback): copies up to `frames` interleaved frames out. Returns the frames copied;
/// frames short of `frames` after start and before finish are counted as underrun. Before start
/// copies nothing.
uint32_t tapedeck_ring_pull(tapedeck_ring *r, float *interleaved, uint32_t frames);
/// Callback (playback): the same into one buffer per channel, the rest of each filled with silence.
uint32_t tapedeck_ring_pull_planar(tapedeck_ring *r, float *const *planes, uint32_t frames);
/// Callback: one cycle done. Counts it and wakes the device thread when what it waits for is there.
void tapedeck_ring_cycle(tapedeck_ring *r);
/// Callback: the device clock: `frames` frames have passed since the first cycle after start, as
/// of CLOCK_MONOTONIC `at_ns`. What a stop drains up to.
void tapedeck_ring_set_clock(tapedeck_ring *r, uint64_t frames, int64_t at_ns);
/// Callback: CLOCK_MONOTONIC now, in nanoseconds (a vDSO call, no system call).
int64_t tapedeck_ring_now_ns(void);

// ---- the device side --------------------------------------------------------------------

/// Device: frames ready to read (capture) or room to write (playback).
uint32_t tapedeck_ring_available(const tapedeck_ring *r);
/// Device (capture): copies up to `max_frames` frames out, stopping before a hole;
/// `*lost_before` gets the frames lost just before them. Returns the frames copied (0 with
/// `*lost_before` > 0 when only a hole was there).
uint32_t tapedeck_ring_read(tapedeck_ring *r, float *destination, uint32_t max_frames, uint64_t *lost_before);
/// Device (playback): copies up to `frames` frames in. Returns the frames copied.
uint32_t tapedeck_ring_write(tapedeck_ring *r, const float *source, uint32_t frames);

enum { TAPEDECK_RING_READY = 0, TAPEDECK_RING_TIMEOUT = 1, TAPEDECK_RING_OTHER_FD = 2 };
/// Device: sleeps until `frames` are available (capture: to read; playback: room), the ring is
/// closed, `other_fd` (>= 0; a device's own event loop) becomes readable, or `timeout_ns` passes.
/// Returns TAPEDECK_RING_READY, _TIMEOUT or _OTHER_FD.
int tapedeck_ring_wait(tapedeck_ring *r, uint32_t frames, uint64_t timeout_ns, int other_fd);

/// Cycles since creation; frames lost (capture, all holes); frames of underrun (playback);
/// frames pushed since start, holes included (capture) or pulled (playback).
uint64_t tapedeck_ring_cycles(const tapedeck_ring *r);
uint64_t tapedeck_ring_lost_frames(const tapedeck_ring *r);
uint64_t tapedeck_ring_underrun_frames(const tapedeck_ring *r);
uint64_t tapedeck_ring_frames_done(const tapedeck_ring *r);
/// Device: the device clock extrapolated to now at `rate` (see tapedeck_ring_set_clock); -1 when
/// the callback never set it.
int64_t tapedeck_ring_clock_now(const tapedeck_ring *r, uint32_t rate);

#endif
