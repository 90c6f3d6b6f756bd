#define _GNU_SOURCE  // ppoll

#include "tapedeck_ring.h"

#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

// A stretch the device never delivered: `frames` frames missing before ring position `position`.
typedef struct {
    uint64_t position;
    uint64_t frames;
} hole;

#define HOLE_SLOTS 64
#define NO_WAKE UINT32_MAX

struct tapedeck_ring {
    int direction;
    uint32_t channels;
    uint64_t capacity;
    float *data;                    // capacity * channels floats
    _Atomic uint64_t write_pos;     // frames since creation
    _Atomic uint64_t read_pos;

    hole holes[HOLE_SLOTS];         // written by the callback, read by the device thread
    _Atomic uint32_t hole_write;
    _Atomic uint32_t hole_read;
    uint64_t pending_position;      // callback only: a hole not yet followed by frames
    uint64_t pending_frames;
    _Atomic uint64_t unplaced_lost; // lost frames whose hole did not fit in the queue

    _Atomic bool started;
    _Atomic bool finishing;
    _Atomic bool closed;

    int wake_fd;                    // an eventfd the callback writes when wake_at is reached
    _Atomic uint32_t wake_at;

    _Atomic uint64_t cycles;
    _Atomic uint64_t lost_frames;
    _Atomic uint64_t underrun_frames;
    _Atomic uint64_t frames_done;

    _Atomic uint32_t clock_seq;     // a sequence lock over the two below; 0: never set
    _Atomic uint64_t clock_frames;
    _Atomic int64_t clock_ns;
};

tapedeck_ring *tapedeck_ring_create(int direction, uint32_t channels, uint32_t frames) {
    if (channels == 0 || frames == 0) return NULL;
    tapedeck_ring *r = calloc(1, sizeof *r);
    if (r == NULL) return NULL;
    size_t bytes = (size_t)frames * channels * sizeof(float);
    r->data = malloc(bytes);
    r->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (r->data == NULL || r->wake_fd < 0) {
        if (r->wake_fd >= 0) close(r->wake_fd);
        free(r->data);
        free(r);
        return NULL;
    }
    // Touched and locked now, so the callback never faults a page in (a refused lock, over
    // RLIMIT_MEMLOCK, still leaves the pages touched).
    memset(r->data, 0, bytes);
    (void)mlock(r->data, bytes);
    r->direction = direction;
    r->channels = channels;
    r->capacity = frames;
    atomic_store(&r->wake_at, NO_WAKE);
    return r;
}

void tapedeck_ring_destroy(tapedeck_ring *r) {
    if (r == NULL) return;
    munlock(r->data, (size_t)r->capacity * r->channels * sizeof(float));
    free(r->data);
    close(r->wake_fd);
    free(r);
}

uint32_t tapedeck_ring_channels(const tapedeck_ring *r) { return r->channels; }
uint32_t tapedeck_ring_capacity(const tapedeck_ring *r) { return (uint32_t)r->capacity; }

static void post(tapedeck_ring *r) {
    uint64_t one = 1;
    ssize_t ignored = write(r->wake_fd, &one, sizeof one);
    (void)ignored;
}

void tapedeck_ring_start(tapedeck_ring *r) { atomic_store_explicit(&r->started, true, memory_order_release); }
void tapedeck_ring_finish(tapedeck_ring *r) { atomic_store_explicit(&r->finishing, true, memory_order_release); }
void tapedeck_ring_close(tapedeck_ring *r) {
    atomic_store_explicit(&r->closed, true, memory_order_release);
    post(r);
}
int tapedeck_ring_is_started(const tapedeck_ring *r) { return atomic_load_explicit(&r->started, memory_order_acquire); }
int tapedeck_ring_is_finishing(const tapedeck_ring *r) { return atomic_load_explicit(&r->finishing, memory_order_acquire); }
int tapedeck_ring_is_closed(const tapedeck_ring *r) { return atomic_load_explicit(&r->closed, memory_order_acquire); }

static uint64_t available(const tapedeck_ring *r) {
    uint64_t w = atomic_load_explicit(&r->write_pos, memory_order_acquire);
    uint64_t rd = atomic_load_explicit(&r->read_pos, memory_order_acquire);
    return r->direction == TAPEDECK_RING_CAPTURE ? w - rd : r->capacity - (w - rd);
}

uint32_t tapedeck_ring_available(const tapedeck_ring *r) {
    uint64_t a = available(r);
    return a > UINT32_MAX ? UINT32_MAX : (uint32_t)a;
}

// Copies `n` interleaved frames into the ring from frame position `pos` on, across its end.
static void copy_in(tapedeck_ring *r, uint64_t pos, const float *from, uint64_t n) {
    size_t ch = r->channels;
    for (uint64_t i = 0; i < n;) {
        uint64_t at = (pos + i) % r->capacity;
        uint64_t run = r->capacity - at < n - i ? r->capacity - at : n - i;
        memcpy(r->data + at * ch, from + i * ch, run * ch * sizeof(float));
        i += run;
    }
}

// Copies `n` interleaved frames out of the ring from frame position `pos` on, across its end.
static void copy_out(const tapedeck_ring *r, uint64_t pos, float *to, uint64_t n) {
    size_t ch = r->channels;
    for (uint64_t i = 0; i < n;) {
        uint64_t at = (pos + i) % r->capacity;
        uint64_t run = r->capacity - at < n - i ? r->capacity - at : n - i;
        memcpy(to + i * ch, r->data + at * ch, run * ch * sizeof(float));
        i += run;
    }
}

// ---- the callback side ------------------------------------------------------------------

void tapedeck_ring_lose(tapedeck_ring *r, uint64_t frames) {
    if (frames == 0 || !atomic_load_explicit(&r->started, memory_order_acquire)) return;
    if (r->pending_frames == 0) r->pending_position = atomic_load_explicit(&r->write_pos, memory_order_relaxed);
    r->pending_frames += frames;
    atomic_fetch_add_explicit(&r->lost_frames, frames, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->frames_done, frames, memory_order_release);
}

// Publishes the pending hole, just before the frames that follow it are written.
static void publish_hole(tapedeck_ring *r) {
    if (r->pending_frames == 0) return;
    uint32_t w = atomic_load_explicit(&r->hole_write, memory_order_relaxed);
    uint32_t rd = atomic_load_explicit(&r->hole_read, memory_order_acquire);
    if (w - rd < HOLE_SLOTS) {
        r->holes[w % HOLE_SLOTS] = (hole){r->pending_position, r->pending_frames};
        atomic_store_explicit(&r->hole_write, w + 1, memory_order_release);
    } else {
        atomic_fetch_add_explicit(&r->unplaced_lost, r->pending_frames, memory_order_release);
    }
    r->pending_frames = 0;
}

// How many of `frames` fit (the caller declares the rest lost), the pending hole published first.
static uint32_t push_room(tapedeck_ring *r, uint32_t frames, uint64_t *w) {
    *w = atomic_load_explicit(&r->write_pos, memory_order_relaxed);
    uint64_t rd = atomic_load_explicit(&r->read_pos, memory_order_acquire);
    uint64_t room = r->capacity - (*w - rd);
    uint32_t n = frames <= room ? frames : (uint32_t)room;
    if (n > 0) publish_hole(r);
    return n;
}

static void pushed(tapedeck_ring *r, uint64_t w, uint32_t n, uint32_t frames) {
    atomic_store_explicit(&r->write_pos, w + n, memory_order_release);
    atomic_fetch_add_explicit(&r->frames_done, n, memory_order_release);
    // The device thread fell behind by the whole ring: the rest is lost, where it happened.
    if (n < frames) tapedeck_ring_lose(r, frames - n);
}

uint32_t tapedeck_ring_push(tapedeck_ring *r, const float *interleaved, uint32_t frames) {
    uint64_t w = 0;
    if (!atomic_load_explicit(&r->started, memory_order_acquire)) return 0;
    uint32_t n = push_room(r, frames, &w);
    copy_in(r, w, interleaved, n);
    pushed(r, w, n, frames);
    return n;
}

uint32_t tapedeck_ring_push_planar(tapedeck_ring *r, const float *const *planes, uint32_t frames) {
    uint64_t w = 0;
    if (!atomic_load_explicit(&r->started, memory_order_acquire)) return 0;
    uint32_t n = push_room(r, frames, &w);
    uint32_t ch = r->channels;
    uint64_t start = w % r->capacity;
    for (uint32_t i = 0; i < n; i++) {
        float *frame = r->data + ((start + i) % r->capacity) * ch;
        for (uint32_t c = 0; c < ch; c++) frame[c] = planes[c][i];
    }
    pushed(r, w, n, frames);
    return n;
}

// How many of `frames` the ring holds for a pull, counting the shortfall as underrun.
static uint32_t pull_count(tapedeck_ring *r, uint32_t frames, uint64_t *rd) {
    if (!atomic_load_explicit(&r->started, memory_order_acquire)) return 0;
    uint64_t w = atomic_load_explicit(&r->write_pos, memory_order_acquire);
    *rd = atomic_load_explicit(&r->read_pos, memory_order_relaxed);
    uint64_t held = w - *rd;
    uint32_t n = held < frames ? (uint32_t)held : frames;
    if (n < frames && !atomic_load_explicit(&r->finishing, memory_order_acquire))
        atomic_fetch_add_explicit(&r->underrun_frames, frames - n, memory_order_relaxed);
    return n;
}

static void pulled(tapedeck_ring *r, uint64_t rd, uint32_t n) {
    atomic_store_explicit(&r->read_pos, rd + n, memory_order_release);
    atomic_fetch_add_explicit(&r->frames_done, n, memory_order_release);
}

uint32_t tapedeck_ring_pull(tapedeck_ring *r, float *interleaved, uint32_t frames) {
    uint64_t rd = 0;
    uint32_t n = pull_count(r, frames, &rd);
    copy_out(r, rd, interleaved, n);
    if (n > 0) pulled(r, rd, n);
    return n;
}

uint32_t tapedeck_ring_pull_planar(tapedeck_ring *r, float *const *planes, uint32_t frames) {
    uint64_t rd = 0;
    uint32_t n = pull_count(r, frames, &rd);
    uint32_t ch = r->channels;
    uint64_t start = rd % r->capacity;
    for (uint32_t i = 0; i < n; i++) {
        const float *frame = r->data + ((start + i) % r->capacity) * ch;
        for (uint32_t c = 0; c < ch; c++) planes[c][i] = frame[c];
    }
    for (uint32_t c = 0; c < ch && n < frames; c++) memset(planes[c] + n, 0, (frames - n) * sizeof(float));
    if (n > 0) pulled(r, rd, n);
    return n;
}

void tapedeck_ring_cycle(tapedeck_ring *r) {
    atomic_fetch_add_explicit(&r->cycles, 1, memory_order_release);
    uint32_t want = atomic_load_explicit(&r->wake_at, memory_order_acquire);
    if (want != NO_WAKE && available(r) >= want &&
        atomic_exchange_explicit(&r->wake_at, NO_WAKE, memory_order_acq_rel) != NO_WAKE) post(r);
}

void tapedeck_ring_set_clock(tapedeck_ring *r, uint64_t frames, int64_t at_ns) {
    uint32_t seq = atomic_load_explicit(&r->clock_seq, memory_order_relaxed);
    atomic_store_explicit(&r->clock_seq, seq + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&r->clock_frames, frames, memory_order_relaxed);
    atomic_store_explicit(&r->clock_ns, at_ns, memory_order_relaxed);
    atomic_store_explicit(&r->clock_seq, seq + 2, memory_order_release);
}

int64_t tapedeck_ring_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// ---- the device side --------------------------------------------------------------------

uint32_t tapedeck_ring_read(tapedeck_ring *r, float *destination, uint32_t max_frames, uint64_t *lost_before) {
    *lost_before = atomic_exchange_explicit(&r->unplaced_lost, 0, memory_order_acq_rel);
    uint64_t w = atomic_load_explicit(&r->write_pos, memory_order_acquire);
    uint64_t rd = atomic_load_explicit(&r->read_pos, memory_order_relaxed);
    uint64_t limit = w;
    uint32_t hr = atomic_load_explicit(&r->hole_read, memory_order_relaxed);
    uint32_t hw = atomic_load_explicit(&r->hole_write, memory_order_acquire);
    // Holes right here (published only with frames after them): reported before those frames.
    while (hr != hw && r->holes[hr % HOLE_SLOTS].position <= rd) {
        *lost_before += r->holes[hr % HOLE_SLOTS].frames;
        hr += 1;
        atomic_store_explicit(&r->hole_read, hr, memory_order_release);
    }
    if (hr != hw && r->holes[hr % HOLE_SLOTS].position < limit) limit = r->holes[hr % HOLE_SLOTS].position;
    uint64_t n = limit > rd ? limit - rd : 0;
    if (n > max_frames) n = max_frames;
    copy_out(r, rd, destination, n);
    atomic_store_explicit(&r->read_pos, rd + n, memory_order_release);
    return (uint32_t)n;
}

uint32_t tapedeck_ring_write(tapedeck_ring *r, const float *source, uint32_t frames) {
    uint64_t w = atomic_load_explicit(&r->write_pos, memory_order_relaxed);
    uint64_t rd = atomic_load_explicit(&r->read_pos, memory_order_acquire);
    uint64_t room = r->capacity - (w - rd);
    uint64_t n = frames < room ? frames : room;
    copy_in(r, w, source, n);
    atomic_store_explicit(&r->write_pos, w + n, memory_order_release);
    return (uint32_t)n;
}

int tapedeck_ring_wait(tapedeck_ring *r, uint32_t frames, uint64_t timeout_ns, int other_fd) {
    uint64_t drained;
    while (read(r->wake_fd, &drained, sizeof drained) == (ssize_t)sizeof drained) {}
    atomic_store_explicit(&r->wake_at, frames, memory_order_release);
    if (available(r) >= frames || atomic_load_explicit(&r->closed, memory_order_acquire)) {
        atomic_store_explicit(&r->wake_at, NO_WAKE, memory_order_release);
        return TAPEDECK_RING_READY;
    }
    struct pollfd fds[2] = {{.fd = r->wake_fd, .events = POLLIN}, {.fd = other_fd, .events = POLLIN}};
    nfds_t count = other_fd >= 0 ? 2 : 1;
    int64_t deadline = tapedeck_ring_now_ns() + (int64_t)(timeout_ns > INT64_MAX / 2 ? INT64_MAX / 2 : timeout_ns);
    int result = TAPEDECK_RING_TIMEOUT;
    for (;;) {
        int64_t left = deadline - tapedeck_ring_now_ns();
        if (left <= 0) break;
        struct timespec ts = {.tv_sec = left / 1000000000, .tv_nsec = left % 1000000000};
        int n = ppoll(fds, count, &ts, NULL);
        if (n < 0 && errno == EINTR) continue;
        if (n > 0 && count == 2 && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) result = TAPEDECK_RING_OTHER_FD;
        if (n > 0 && (fds[0].revents & POLLIN)) result = TAPEDECK_RING_READY;
        break;
    }
    atomic_store_explicit(&r->wake_at, NO_WAKE, memory_order_release);
    if (result == TAPEDECK_RING_TIMEOUT && (available(r) >= frames || atomic_load_explicit(&r->closed, memory_order_acquire)))
        result = TAPEDECK_RING_READY;
    return result;
}

uint64_t tapedeck_ring_cycles(const tapedeck_ring *r) { return atomic_load(&r->cycles); }
uint64_t tapedeck_ring_lost_frames(const tapedeck_ring *r) { return atomic_load(&r->lost_frames); }
uint64_t tapedeck_ring_underrun_frames(const tapedeck_ring *r) { return atomic_load(&r->underrun_frames); }
uint64_t tapedeck_ring_frames_done(const tapedeck_ring *r) { return atomic_load(&r->frames_done); }

int64_t tapedeck_ring_clock_now(const tapedeck_ring *r, uint32_t rate) {
    uint32_t before, after;
    uint64_t frames;
    int64_t at;
    do {
        before = atomic_load_explicit(&r->clock_seq, memory_order_acquire);
        frames = atomic_load_explicit(&r->clock_frames, memory_order_relaxed);
        at = atomic_load_explicit(&r->clock_ns, memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        after = atomic_load_explicit(&r->clock_seq, memory_order_relaxed);
    } while (before != after || (before & 1));
    if (before == 0) return -1;
    int64_t since = tapedeck_ring_now_ns() - at;
    if (since < 0) since = 0;
    return (int64_t)frames + (int64_t)((double)since * rate / 1e9);
}
