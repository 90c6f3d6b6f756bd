#include "tapedeck_jack_stream.h"

#if __has_include(<jack/jack.h>)
#include <jack/jack.h>

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

// A stretch of audio JACK never delivered (the ring was full, or the server skipped cycles):
// `frames` frames missing before the frame at ring position `position`.
typedef struct {
    uint64_t position;
    uint64_t frames;
} hole;

#define HOLE_SLOTS 64
#define NO_WAKE UINT32_MAX

struct tapedeck_jack_stream {
    jack_client_t *client;
    int direction;
    int channels;
    jack_port_t **ports;
    float **buffers;              // the ports' buffers of the current cycle (process thread only)

    // The ring: interleaved float frames. write_pos and read_pos count frames since start.
    float *data;
    uint64_t capacity;
    _Atomic uint64_t write_pos;
    _Atomic uint64_t read_pos;

    // Capture holes: a single-producer single-consumer queue, filled by the process thread.
    hole holes[HOLE_SLOTS];
    _Atomic uint32_t hole_write;
    _Atomic uint32_t hole_read;
    uint64_t pending_position;    // process thread only: a hole not yet followed by frames
    uint64_t pending_frames;
    _Atomic uint64_t unplaced_lost; // lost frames whose hole did not fit in the queue

    _Atomic bool started;
    _Atomic bool finishing;
    bool have_expected;           // process thread only
    uint32_t expected_frame;
    _Atomic uint32_t start_frame;
    _Atomic uint64_t frames_done;

    sem_t wake;
    _Atomic uint32_t wake_at;

    _Atomic uint64_t cycles;
    _Atomic uint64_t underrun_frames;
    _Atomic uint64_t lost_frames;
    _Atomic uint32_t xruns;
    _Atomic bool shut_down;
    char shutdown_reason[256];
    char *port_names;             // channels * jack_port_name_size()
};

static uint64_t available_locked(const tapedeck_jack_stream *s) {
    uint64_t w = atomic_load_explicit(&s->write_pos, memory_order_acquire);
    uint64_t r = atomic_load_explicit(&s->read_pos, memory_order_acquire);
    return s->direction == TAPEDECK_JACK_CAPTURE ? w - r : s->capacity - (w - r);
}

static void maybe_wake(tapedeck_jack_stream *s) {
    uint32_t want = atomic_load_explicit(&s->wake_at, memory_order_acquire);
    if (want != NO_WAKE && available_locked(s) >= want) {
        if (atomic_exchange_explicit(&s->wake_at, NO_WAKE, memory_order_acq_rel) != NO_WAKE) sem_post(&s->wake);
    }
}

static void record_hole(tapedeck_jack_stream *s, uint64_t frames) {
    if (s->pending_frames == 0) s->pending_position = atomic_load_explicit(&s->write_pos, memory_order_relaxed);
    s->pending_frames += frames;
    atomic_fetch_add_explicit(&s->lost_frames, frames, memory_order_relaxed);
}

// Publishes the pending hole: called just before the frames that follow it are written.
static void publish_hole(tapedeck_jack_stream *s) {
    if (s->pending_frames == 0) return;
    uint32_t w = atomic_load_explicit(&s->hole_write, memory_order_relaxed);
    uint32_t r = atomic_load_explicit(&s->hole_read, memory_order_acquire);
    if (w - r < HOLE_SLOTS) {
        s->holes[w % HOLE_SLOTS] = (hole){s->pending_position, s->pending_frames};
        atomic_store_explicit(&s->hole_write, w + 1, memory_order_release);
    } else {
        atomic_fetch_add_explicit(&s->unplaced_lost, s->pending_frames, memory_order_release);
    }
    s->pending_frames = 0;
}

static void capture_cycle(tapedeck_jack_stream *s, jack_nframes_t nframes) {
    jack_nframes_t now = jack_last_frame_time(s->client);
    if (!s->have_expected) {
        s->have_expected = true;
        atomic_store_explicit(&s->start_frame, now, memory_order_release);
    } else if (now != s->expected_frame) {
        // Cycles the server skipped (an xrun): their audio is missing before this cycle's.
        int32_t gap = (int32_t)(now - s->expected_frame);
        if (gap > 0) {
            record_hole(s, (uint64_t)gap);
            atomic_fetch_add_explicit(&s->frames_done, (uint64_t)gap, memory_order_relaxed);
        }
    }
    s->expected_frame = now + nframes;
    uint64_t w = atomic_load_explicit(&s->write_pos, memory_order_relaxed);
    uint64_t r = atomic_load_explicit(&s->read_pos, memory_order_acquire);
    if (s->capacity - (w - r) < nframes) {
        // The device thread fell behind by the whole ring: this cycle is lost, and counted.
        record_hole(s, nframes);
    } else {
        publish_hole(s);
        int channels = s->channels;
        for (int c = 0; c < channels; c++) s->buffers[c] = jack_port_get_buffer(s->ports[c], nframes);
        uint64_t start = w % s->capacity;
        for (jack_nframes_t i = 0; i < nframes; i++) {
            float *frame = s->data + ((start + i) % s->capacity) * (uint64_t)channels;
            for (int c = 0; c < channels; c++) frame[c] = s->buffers[c][i];
        }
        atomic_store_explicit(&s->write_pos, w + nframes, memory_order_release);
    }
    atomic_fetch_add_explicit(&s->frames_done, nframes, memory_order_release);
    maybe_wake(s);
}

static void playback_cycle(tapedeck_jack_stream *s, jack_nframes_t nframes) {
    int channels = s->channels;
    for (int c = 0; c < channels; c++) s->buffers[c] = jack_port_get_buffer(s->ports[c], nframes);
    jack_nframes_t n = 0;
    if (atomic_load_explicit(&s->started, memory_order_acquire)) {
        if (!s->have_expected) {
            s->have_expected = true;
            atomic_store_explicit(&s->start_frame, jack_last_frame_time(s->client), memory_order_release);
        }
        uint64_t w = atomic_load_explicit(&s->write_pos, memory_order_acquire);
        uint64_t r = atomic_load_explicit(&s->read_pos, memory_order_relaxed);
        uint64_t avail = w - r;
        n = avail < nframes ? (jack_nframes_t)avail : nframes;
        uint64_t start = r % s->capacity;
        for (jack_nframes_t i = 0; i < n; i++) {
            const float *frame = s->data + ((start + i) % s->capacity) * (uint64_t)channels;
            for (int c = 0; c < channels; c++) s->buffers[c][i] = frame[c];
        }
        atomic_store_explicit(&s->read_pos, r + n, memory_order_release);
        atomic_fetch_add_explicit(&s->frames_done, n, memory_order_release);
        if (n < nframes && !atomic_load_explicit(&s->finishing, memory_order_acquire)) {
            atomic_fetch_add_explicit(&s->underrun_frames, nframes - n, memory_order_relaxed);
        }
    }
    for (int c = 0; c < channels; c++) {
        if (n < nframes) memset(s->buffers[c] + n, 0, (nframes - n) * sizeof(float));
    }
    maybe_wake(s);
}

// JACK's real-time thread: copies, counts, posts a semaphore. Nothing else.
static int process(jack_nframes_t nframes, void *arg) {
    tapedeck_jack_stream *s = arg;
    if (s->direction == TAPEDECK_JACK_CAPTURE) {
        if (atomic_load_explicit(&s->started, memory_order_acquire)) capture_cycle(s, nframes);
    } else {
        playback_cycle(s, nframes);
    }
    atomic_fetch_add_explicit(&s->cycles, 1, memory_order_release);
    return 0;
}

static int xrun(void *arg) {
    tapedeck_jack_stream *s = arg;
    atomic_fetch_add_explicit(&s->xruns, 1, memory_order_relaxed);
    return 0;
}

static void shutdown_callback(jack_status_t code, const char *reason, void *arg) {
    (void)code;
    tapedeck_jack_stream *s = arg;
    snprintf(s->shutdown_reason, sizeof s->shutdown_reason, "%s", reason ? reason : "");
    atomic_store_explicit(&s->shut_down, true, memory_order_release);
    sem_post(&s->wake);
}

static void free_stream(tapedeck_jack_stream *s) {
    if (s->data) {
        munlock(s->data, s->capacity * (uint64_t)s->channels * sizeof(float));
        free(s->data);
    }
    free(s->ports);
    free(s->buffers);
    free(s->port_names);
    sem_destroy(&s->wake);
    free(s);
}

static pthread_once_t quiet_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t last_error_lock = PTHREAD_MUTEX_INITIALIZER;
static char last_error[512];

static void keep_error(const char *message) {
    pthread_mutex_lock(&last_error_lock);
    snprintf(last_error, sizeof last_error, "%s", message ? message : "");
    pthread_mutex_unlock(&last_error_lock);
}

static void drop_info(const char *message) { (void)message; }

static void install_quiet(void) {
    jack_set_error_function(keep_error);
    jack_set_info_function(drop_info);
}

void tapedeck_jack_quiet(void) { pthread_once(&quiet_once, install_quiet); }

int tapedeck_jack_last_error(char *buffer, int size) {
    pthread_mutex_lock(&last_error_lock);
    int n = snprintf(buffer, (size_t)size, "%s", last_error);
    pthread_mutex_unlock(&last_error_lock);
    return n;
}

static jack_client_t *open_client(const char *server, const char *client_name, jack_status_t *status) {
    tapedeck_jack_quiet();
    jack_options_t options = JackNoStartServer;
    if (server && *server) return jack_client_open(client_name, options | JackServerName, status, server);
    return jack_client_open(client_name, options, status);
}

void *tapedeck_jack_client_open(const char *server, const char *client_name, int *status) {
    jack_status_t jack_status = 0;
    jack_client_t *client = open_client(server, client_name, &jack_status);
    *status = (int)jack_status;
    return client;
}

tapedeck_jack_stream *tapedeck_jack_stream_open(const char *server, const char *client_name, int direction,
                                                int channels, uint32_t ring_frames, int *status) {
    *status = 0;
    if (channels < 1 || ring_frames < 16) return NULL;
    tapedeck_jack_stream *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    sem_init(&s->wake, 0, 0);
    s->direction = direction;
    s->channels = channels;
    s->capacity = ring_frames;
    atomic_store(&s->wake_at, NO_WAKE);
    s->ports = calloc((size_t)channels, sizeof *s->ports);
    s->buffers = calloc((size_t)channels, sizeof *s->buffers);
    size_t bytes = (size_t)ring_frames * (size_t)channels * sizeof(float);
    s->data = malloc(bytes);
    if (!s->ports || !s->buffers || !s->data) {
        free_stream(s);
        return NULL;
    }
    // Touched and locked now, so the process thread never faults a page in.
    memset(s->data, 0, bytes);
    (void)mlock(s->data, bytes);

    jack_status_t jack_status = 0;
    s->client = open_client(server, client_name, &jack_status);
    if (!s->client) {
        *status = (int)jack_status;
        free_stream(s);
        return NULL;
    }
    size_t name_size = (size_t)jack_port_name_size();
    s->port_names = calloc((size_t)channels, name_size);
    for (int c = 0; c < channels && s->port_names; c++) {
        char short_name[32];
        snprintf(short_name, sizeof short_name, "%s_%d", direction == TAPEDECK_JACK_CAPTURE ? "in" : "out", c + 1);
        s->ports[c] = jack_port_register(s->client, short_name, JACK_DEFAULT_AUDIO_TYPE,
                                         direction == TAPEDECK_JACK_CAPTURE ? JackPortIsInput : JackPortIsOutput, 0);
        if (!s->ports[c]) break;
        snprintf(s->port_names + (size_t)c * name_size, name_size, "%s", jack_port_name(s->ports[c]));
    }
    if (!s->port_names || !s->ports[channels - 1]) {
        jack_client_close(s->client);
        free_stream(s);
        return NULL;
    }
    jack_set_process_callback(s->client, process, s);
    jack_set_xrun_callback(s->client, xrun, s);
    jack_on_info_shutdown(s->client, shutdown_callback, s);
    return s;
}

uint32_t tapedeck_jack_stream_sample_rate(const tapedeck_jack_stream *s) { return jack_get_sample_rate(s->client); }
uint32_t tapedeck_jack_stream_buffer_size(const tapedeck_jack_stream *s) { return jack_get_buffer_size(s->client); }
const char *tapedeck_jack_stream_client_name(const tapedeck_jack_stream *s) { return jack_get_client_name(s->client); }
void *tapedeck_jack_stream_client(const tapedeck_jack_stream *s) { return s->client; }

const char *tapedeck_jack_stream_port_name(const tapedeck_jack_stream *s, int channel) {
    if (channel < 0 || channel >= s->channels) return "";
    return s->port_names + (size_t)channel * (size_t)jack_port_name_size();
}

int tapedeck_jack_stream_activate(tapedeck_jack_stream *s) { return jack_activate(s->client); }

int tapedeck_jack_stream_connect(tapedeck_jack_stream *s, int channel, const char *other) {
    const char *ours = tapedeck_jack_stream_port_name(s, channel);
    return s->direction == TAPEDECK_JACK_CAPTURE ? jack_connect(s->client, other, ours) : jack_connect(s->client, ours, other);
}

void tapedeck_jack_stream_start(tapedeck_jack_stream *s) { atomic_store_explicit(&s->started, true, memory_order_release); }
void tapedeck_jack_stream_finish(tapedeck_jack_stream *s) { atomic_store_explicit(&s->finishing, true, memory_order_release); }

uint32_t tapedeck_jack_stream_available(const tapedeck_jack_stream *s) {
    uint64_t a = available_locked(s);
    return a > UINT32_MAX ? UINT32_MAX : (uint32_t)a;
}

uint32_t tapedeck_jack_stream_read(tapedeck_jack_stream *s, float *destination, uint32_t max_frames, uint64_t *lost_before) {
    *lost_before = atomic_exchange_explicit(&s->unplaced_lost, 0, memory_order_acq_rel);
    uint64_t w = atomic_load_explicit(&s->write_pos, memory_order_acquire);
    uint64_t r = atomic_load_explicit(&s->read_pos, memory_order_relaxed);
    uint64_t limit = w;
    uint32_t hr = atomic_load_explicit(&s->hole_read, memory_order_relaxed);
    uint32_t hw = atomic_load_explicit(&s->hole_write, memory_order_acquire);
    if (hr != hw && s->holes[hr % HOLE_SLOTS].position <= r && w > r) {
        // A hole right here, with frames after it: reported before them.
        *lost_before += s->holes[hr % HOLE_SLOTS].frames;
        hr += 1;
        atomic_store_explicit(&s->hole_read, hr, memory_order_release);
    }
    if (hr != hw && s->holes[hr % HOLE_SLOTS].position < limit) limit = s->holes[hr % HOLE_SLOTS].position;
    uint64_t n = limit > r ? limit - r : 0;
    if (n > max_frames) n = max_frames;
    size_t channels = (size_t)s->channels;
    for (uint64_t i = 0; i < n;) {
        uint64_t at = (r + i) % s->capacity;
        uint64_t run = s->capacity - at;
        if (run > n - i) run = n - i;
        memcpy(destination + i * channels, s->data + at * channels, run * channels * sizeof(float));
        i += run;
    }
    atomic_store_explicit(&s->read_pos, r + n, memory_order_release);
    return (uint32_t)n;
}

uint32_t tapedeck_jack_stream_write(tapedeck_jack_stream *s, const float *source, uint32_t frames) {
    uint64_t w = atomic_load_explicit(&s->write_pos, memory_order_relaxed);
    uint64_t r = atomic_load_explicit(&s->read_pos, memory_order_acquire);
    uint64_t room = s->capacity - (w - r);
    uint64_t n = frames < room ? frames : room;
    size_t channels = (size_t)s->channels;
    for (uint64_t i = 0; i < n;) {
        uint64_t at = (w + i) % s->capacity;
        uint64_t run = s->capacity - at;
        if (run > n - i) run = n - i;
        memcpy(s->data + at * channels, source + i * channels, run * channels * sizeof(float));
        i += run;
    }
    atomic_store_explicit(&s->write_pos, w + n, memory_order_release);
    return (uint32_t)n;
}

int tapedeck_jack_stream_wait(tapedeck_jack_stream *s, uint32_t frames, uint64_t timeout_ns) {
    while (sem_trywait(&s->wake) == 0) {}
    atomic_store_explicit(&s->wake_at, frames, memory_order_release);
    if (available_locked(s) >= frames || atomic_load_explicit(&s->shut_down, memory_order_acquire)) {
        atomic_store_explicit(&s->wake_at, NO_WAKE, memory_order_release);
        return 0;
    }
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    uint64_t ns = (uint64_t)deadline.tv_nsec + timeout_ns;
    deadline.tv_sec += (time_t)(ns / 1000000000u);
    deadline.tv_nsec = (long)(ns % 1000000000u);
    int result;
    while ((result = sem_timedwait(&s->wake, &deadline)) != 0 && errno == EINTR) {}
    atomic_store_explicit(&s->wake_at, NO_WAKE, memory_order_release);
    return result == 0 ? 0 : 1;
}

uint64_t tapedeck_jack_stream_cycles(const tapedeck_jack_stream *s) { return atomic_load(&s->cycles); }
uint64_t tapedeck_jack_stream_underrun_frames(const tapedeck_jack_stream *s) { return atomic_load(&s->underrun_frames); }
uint32_t tapedeck_jack_stream_xruns(const tapedeck_jack_stream *s) { return atomic_load(&s->xruns); }
uint64_t tapedeck_jack_stream_lost_frames(const tapedeck_jack_stream *s) { return atomic_load(&s->lost_frames); }
uint32_t tapedeck_jack_stream_frame_time(const tapedeck_jack_stream *s) { return jack_frame_time(s->client); }
uint32_t tapedeck_jack_stream_start_frame(const tapedeck_jack_stream *s) { return atomic_load(&s->start_frame); }
uint64_t tapedeck_jack_stream_frames_done(const tapedeck_jack_stream *s) { return atomic_load(&s->frames_done); }
int tapedeck_jack_stream_is_shut_down(const tapedeck_jack_stream *s) { return atomic_load(&s->shut_down) ? 1 : 0; }
const char *tapedeck_jack_stream_shutdown_reason(const tapedeck_jack_stream *s) { return s->shutdown_reason; }

void tapedeck_jack_stream_close(tapedeck_jack_stream *s) {
    if (!s) return;
    if (!atomic_load(&s->shut_down)) jack_deactivate(s->client);
    jack_client_close(s->client);
    free_stream(s);
}

#endif
