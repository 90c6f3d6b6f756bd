#include "tapedeck_jack_stream.h"

#if __has_include(<jack/jack.h>)
#include <jack/jack.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tapedeck_jack_stream {
    jack_client_t *client;
    tapedeck_ring *ring;
    int capture;
    int channels;
    jack_port_t **ports;
    float **buffers;              // the ports' buffers of the current cycle (process thread only)
    bool have_expected;           // process thread only: the frame time the next cycle should have
    jack_nframes_t expected_frame;
    jack_nframes_t start_frame;
    _Atomic uint32_t xruns;
    _Atomic bool shut_down;
    char shutdown_reason[256];
    char *port_names;             // channels * jack_port_name_size()
};

static void capture_cycle(tapedeck_jack_stream *s, jack_nframes_t nframes) {
    if (!tapedeck_ring_is_started(s->ring)) return;
    jack_nframes_t now = jack_last_frame_time(s->client);
    if (!s->have_expected) {
        s->have_expected = true;
        s->start_frame = now;
    } else if (now != s->expected_frame) {
        // Cycles the server skipped (an xrun): their audio is missing before this cycle's.
        int32_t gap = (int32_t)(now - s->expected_frame);
        if (gap > 0) tapedeck_ring_lose(s->ring, (uint64_t)gap);
    }
    s->expected_frame = now + nframes;
    tapedeck_ring_push_planar(s->ring, (const float *const *)s->buffers, nframes);
    tapedeck_ring_set_clock(s->ring, (uint64_t)(uint32_t)(now - s->start_frame), tapedeck_ring_now_ns());
}

// JACK's real-time thread: copies through the ring, counts, wakes. Nothing else.
static int process(jack_nframes_t nframes, void *arg) {
    tapedeck_jack_stream *s = arg;
    for (int c = 0; c < s->channels; c++) s->buffers[c] = jack_port_get_buffer(s->ports[c], nframes);
    if (s->capture) capture_cycle(s, nframes);
    else tapedeck_ring_pull_planar(s->ring, s->buffers, nframes);
    tapedeck_ring_cycle(s->ring);
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
    tapedeck_ring_close(s->ring);
}

static void free_stream(tapedeck_jack_stream *s) {
    free(s->ports);
    free(s->buffers);
    free(s->port_names);
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

tapedeck_jack_stream *tapedeck_jack_stream_open(const char *server, const char *client_name, int capture,
                                                tapedeck_ring *ring, int *status) {
    *status = 0;
    int channels = (int)tapedeck_ring_channels(ring);
    tapedeck_jack_stream *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->ring = ring;
    s->capture = capture;
    s->channels = channels;
    s->ports = calloc((size_t)channels, sizeof *s->ports);
    s->buffers = calloc((size_t)channels, sizeof *s->buffers);
    if (!s->ports || !s->buffers) {
        free_stream(s);
        return NULL;
    }

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
        snprintf(short_name, sizeof short_name, "%s_%d", capture ? "in" : "out", c + 1);
        s->ports[c] = jack_port_register(s->client, short_name, JACK_DEFAULT_AUDIO_TYPE,
                                         capture ? JackPortIsInput : JackPortIsOutput, 0);
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
    return s->capture ? jack_connect(s->client, other, ours) : jack_connect(s->client, ours, other);
}

uint32_t tapedeck_jack_stream_xruns(const tapedeck_jack_stream *s) { return atomic_load(&s->xruns); }
int tapedeck_jack_stream_is_shut_down(const tapedeck_jack_stream *s) { return atomic_load(&s->shut_down) ? 1 : 0; }
const char *tapedeck_jack_stream_shutdown_reason(const tapedeck_jack_stream *s) { return s->shutdown_reason; }

void tapedeck_jack_stream_close(tapedeck_jack_stream *s) {
    if (!s) return;
    if (!atomic_load(&s->shut_down)) jack_deactivate(s->client);
    jack_client_close(s->client);
    free_stream(s);
}

#endif
