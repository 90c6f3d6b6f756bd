#include "tapedeck_pipewire.h"

#if __has_include(<pipewire/pipewire.h>)
#include <pipewire/pipewire.h>
#include <pipewire/extensions/metadata.h>
#include <spa/param/audio/format-utils.h>
#include <spa/utils/json.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_NODES 512
#define MAX_PORTS 2048
#define MAX_LINKS 64

typedef struct {
    uint32_t id;
    struct pw_properties *props;
} node_entry;

struct tapedeck_pw {
    struct pw_loop *loop;
    struct pw_context *context;
    struct pw_core *core;
    struct spa_hook core_listener;
    struct pw_registry *registry;
    struct spa_hook registry_listener;
    struct pw_metadata *metadata;
    struct spa_hook metadata_listener;

    int pending_seq;
    bool synced;
    bool collecting;      // nodes are recorded only while connecting (no allocation later)
    node_entry nodes[MAX_NODES];
    int node_count;
    node_entry ports[MAX_PORTS];
    int port_count;
    char default_source[256];
    char default_sink[256];

    bool lost;
    char lost_reason[512];

    // The stream. Its process callback runs on PipeWire's data thread (PW_STREAM_FLAG_RT_PROCESS):
    // the fields below marked "data thread" are that thread's alone.
    struct pw_stream *stream;
    struct spa_hook stream_listener;
    int direction;
    uint32_t target_id;
    char target_label[256];
    enum pw_stream_state state;
    char stream_error[256];
    bool connected_once;
    uint32_t links[MAX_LINKS];
    int link_count;
    uint32_t channels;
    _Atomic uint32_t rate, graph_rate, quantum;
    tapedeck_ring *ring;
    bool drained;

    // Data thread: the graph clock against what the stream delivered, in stream frames.
    bool was_started;
    bool have_base;
    double base;
    uint64_t last_ticks;
    uint32_t last_rate_denom;
    int64_t last_now;
};

static int64_t monotonic_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void set_lost(tapedeck_pw *c, const char *reason) {
    if (c->lost) return;
    c->lost = true;
    snprintf(c->lost_reason, sizeof c->lost_reason, "%s", reason);
    if (c->ring != NULL) tapedeck_ring_close(c->ring);
}

// ---- core and registry ------------------------------------------------------------------

static void on_core_done(void *data, uint32_t id, int seq) {
    tapedeck_pw *c = data;
    if (id == PW_ID_CORE && seq == c->pending_seq) c->synced = true;
}

static void on_core_error(void *data, uint32_t id, int seq, int res, const char *message) {
    (void)seq;
    tapedeck_pw *c = data;
    if (id == PW_ID_CORE) {
        char reason[512];
        if (res == -EPIPE) snprintf(reason, sizeof reason, "the PipeWire daemon closed the connection");
        else snprintf(reason, sizeof reason, "the PipeWire daemon closed the connection: %s", message ? message : strerror(-res));
        set_lost(c, reason);
    }
}

static const struct pw_core_events core_events = {
    PW_VERSION_CORE_EVENTS,
    .done = on_core_done,
    .error = on_core_error,
};

static void store_default(char *into, size_t size, const char *value) {
    into[0] = 0;
    if (value == NULL) return;
    struct spa_json it[2];
    char key[64];
    spa_json_init(&it[0], value, strlen(value));
    if (spa_json_enter_object(&it[0], &it[1]) <= 0) return;
    while (spa_json_get_string(&it[1], key, sizeof key) > 0) {
        if (strcmp(key, "name") == 0) {
            if (spa_json_get_string(&it[1], into, (int)size) <= 0) into[0] = 0;
            return;
        }
        const char *skip;
        if (spa_json_next(&it[1], &skip) <= 0) return;
    }
}

static int on_metadata_property(void *data, uint32_t subject, const char *key, const char *type, const char *value) {
    (void)type;
    tapedeck_pw *c = data;
    if (subject != PW_ID_CORE || key == NULL) return 0;
    if (strcmp(key, "default.audio.source") == 0) store_default(c->default_source, sizeof c->default_source, value);
    else if (strcmp(key, "default.audio.sink") == 0) store_default(c->default_sink, sizeof c->default_sink, value);
    return 0;
}

static const struct pw_metadata_events metadata_events = {
    PW_VERSION_METADATA_EVENTS,
    .property = on_metadata_property,
};

static void on_global(void *data, uint32_t id, uint32_t permissions, const char *type, uint32_t version,
                      const struct spa_dict *props) {
    (void)permissions; (void)version;
    tapedeck_pw *c = data;
    if (props == NULL) return;
    if (c->stream != NULL && strcmp(type, PW_TYPE_INTERFACE_Link) == 0) {
        // A link of the stream's node (the session manager linking it to the target).
        uint32_t node = pw_stream_get_node_id(c->stream);
        const char *in = spa_dict_lookup(props, PW_KEY_LINK_INPUT_NODE);
        const char *out = spa_dict_lookup(props, PW_KEY_LINK_OUTPUT_NODE);
        if (node == SPA_ID_INVALID || in == NULL || out == NULL) return;
        uint32_t input = (uint32_t)strtoul(in, NULL, 10), output = (uint32_t)strtoul(out, NULL, 10);
        uint32_t other = input == node ? output : output == node ? input : SPA_ID_INVALID;
        if (other == SPA_ID_INVALID || (c->target_id != SPA_ID_INVALID && other != c->target_id)) return;
        for (int i = 0; i < MAX_LINKS; i++) {
            if (c->links[i] == SPA_ID_INVALID) { c->links[i] = id; c->link_count++; break; }
        }
        return;
    }
    if (!c->collecting) return;
    if (strcmp(type, PW_TYPE_INTERFACE_Node) == 0) {
        const char *media_class = spa_dict_lookup(props, PW_KEY_MEDIA_CLASS);
        if (media_class == NULL || strncmp(media_class, "Audio/", 6) != 0 || c->node_count >= MAX_NODES) return;
        c->nodes[c->node_count].id = id;
        c->nodes[c->node_count].props = pw_properties_new_dict(props);
        c->node_count++;
    } else if (strcmp(type, PW_TYPE_INTERFACE_Port) == 0) {
        if (c->port_count >= MAX_PORTS || spa_dict_lookup(props, PW_KEY_NODE_ID) == NULL) return;
        c->ports[c->port_count].id = id;
        c->ports[c->port_count].props = pw_properties_new_dict(props);
        c->port_count++;
    } else if (strcmp(type, PW_TYPE_INTERFACE_Metadata) == 0 && c->metadata == NULL) {
        const char *name = spa_dict_lookup(props, PW_KEY_METADATA_NAME);
        if (name == NULL || strcmp(name, "default") != 0) return;
        c->metadata = pw_registry_bind(c->registry, id, PW_TYPE_INTERFACE_Metadata, PW_VERSION_METADATA, 0);
        if (c->metadata != NULL)
            pw_metadata_add_listener(c->metadata, &c->metadata_listener, &metadata_events, c);
    }
}

static void on_global_remove(void *data, uint32_t id) {
    tapedeck_pw *c = data;
    for (int i = 0; i < MAX_LINKS; i++) {
        if (c->links[i] == id) { c->links[i] = SPA_ID_INVALID; c->link_count--; }
    }
    if (c->stream != NULL && id == c->target_id) {
        char reason[512];
        snprintf(reason, sizeof reason, "the node %s was removed", c->target_label);
        set_lost(c, reason);
    }
}

static const struct pw_registry_events registry_events = {
    PW_VERSION_REGISTRY_EVENTS,
    .global = on_global,
    .global_remove = on_global_remove,
};

static bool roundtrip(tapedeck_pw *c, int64_t deadline) {
    c->synced = false;
    c->pending_seq = pw_core_sync(c->core, PW_ID_CORE, 0);
    while (!c->synced && !c->lost) {
        int64_t left = (deadline - monotonic_ns()) / 1000000;
        if (left <= 0) return false;
        pw_loop_iterate(c->loop, (int)left);
    }
    return c->synced;
}

static void initialize(void) {
    pw_init(NULL, NULL);
    // PipeWire logs to stderr; Tapedeck says what went wrong itself. PIPEWIRE_DEBUG still works.
    if (getenv("PIPEWIRE_DEBUG") == NULL) pw_log_set_level(SPA_LOG_LEVEL_NONE);
}

// Connects to the daemon's socket `remote`: a path, or a name in $PIPEWIRE_RUNTIME_DIR, else
// $XDG_RUNTIME_DIR, as libpipewire looks for it. Returns the descriptor or a negative errno.
static int connect_socket(const char *remote) {
    struct sockaddr_un address;
    memset(&address, 0, sizeof address);
    address.sun_family = AF_UNIX;
    int length;
    if (remote[0] == '/') {
        length = snprintf(address.sun_path, sizeof address.sun_path, "%s", remote);
    } else {
        const char *dir = getenv("PIPEWIRE_RUNTIME_DIR");
        if (dir == NULL || dir[0] == 0) dir = getenv("XDG_RUNTIME_DIR");
        if (dir == NULL || dir[0] == 0) return -EHOSTDOWN;
        length = snprintf(address.sun_path, sizeof address.sun_path, "%s/%s", dir, remote);
    }
    if (length < 0 || (size_t)length >= sizeof address.sun_path) return -ENAMETOOLONG;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return -errno;
    if (connect(fd, (struct sockaddr *)&address, sizeof address) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

tapedeck_pw *tapedeck_pw_connect(const char *remote, int timeout_ms, int *error) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, initialize);
    tapedeck_pw *c = calloc(1, sizeof *c);
    if (c == NULL) { *error = -ENOMEM; return NULL; }
    c->target_id = SPA_ID_INVALID;
    c->collecting = true;
    for (int i = 0; i < MAX_LINKS; i++) c->links[i] = SPA_ID_INVALID;
    c->loop = pw_loop_new(NULL);
    if (c->loop == NULL) { *error = -errno; free(c); return NULL; }
    pw_loop_enter(c->loop);
    c->context = pw_context_new(c->loop, NULL, 0);
    if (c->context == NULL) { *error = -errno; tapedeck_pw_disconnect(c); return NULL; }
    struct pw_properties *props = pw_properties_new(PW_KEY_APP_NAME, "Tapedeck", NULL);
    if (remote != NULL && remote[0] != 0) {
        // A remote Tapedeck is told to use wins over $PIPEWIRE_REMOTE (which libpipewire would
        // prefer to remote.name): connect the socket here and hand it over.
        int fd = connect_socket(remote);
        if (fd < 0) { *error = fd; pw_properties_free(props); tapedeck_pw_disconnect(c); return NULL; }
        c->core = pw_context_connect_fd(c->context, fd, props, 0);
        if (c->core == NULL) close(fd);
    } else {
        c->core = pw_context_connect(c->context, props, 0);
    }
    if (c->core == NULL) { *error = errno ? -errno : -ECONNREFUSED; tapedeck_pw_disconnect(c); return NULL; }
    pw_core_add_listener(c->core, &c->core_listener, &core_events, c);
    c->registry = pw_core_get_registry(c->core, PW_VERSION_REGISTRY, 0);
    pw_registry_add_listener(c->registry, &c->registry_listener, &registry_events, c);
    // One round trip brings the globals (and binds the metadata), a second its properties.
    int64_t deadline = monotonic_ns() + (int64_t)timeout_ms * 1000000;
    if (!roundtrip(c, deadline) || !roundtrip(c, deadline)) {
        *error = c->lost ? -EPIPE : -ETIMEDOUT;
        tapedeck_pw_disconnect(c);
        return NULL;
    }
    c->collecting = false;
    *error = 0;
    return c;
}

int tapedeck_pw_iterate(tapedeck_pw *c, int timeout_ms) {
    return pw_loop_iterate(c->loop, timeout_ms);
}

int tapedeck_pw_node_count(const tapedeck_pw *c) { return c->node_count; }
uint32_t tapedeck_pw_node_id(const tapedeck_pw *c, int i) { return c->nodes[i].id; }
const char *tapedeck_pw_node_property(const tapedeck_pw *c, int i, const char *key) {
    return pw_properties_get(c->nodes[i].props, key);
}
int tapedeck_pw_port_count(const tapedeck_pw *c) { return c->port_count; }
const char *tapedeck_pw_port_property(const tapedeck_pw *c, int i, const char *key) {
    return pw_properties_get(c->ports[i].props, key);
}
const char *tapedeck_pw_default_node(const tapedeck_pw *c, int direction) {
    return direction == TAPEDECK_PW_CAPTURE ? c->default_source : c->default_sink;
}
int tapedeck_pw_is_lost(const tapedeck_pw *c) { return c->lost; }
const char *tapedeck_pw_lost_reason(const tapedeck_pw *c) { return c->lost_reason; }
const char *tapedeck_pw_library_version(void) { return pw_get_library_version(); }

// ---- the stream ---------------------------------------------------------------------------

// The graph clock now, in stream frames; false before the graph ran. Data thread.
static bool clock_frames(tapedeck_pw *c, const struct pw_time *t, double *frames) {
    uint32_t rate = atomic_load_explicit(&c->rate, memory_order_relaxed);
    if (t->rate.denom == 0 || t->rate.num == 0 || rate == 0) return false;
    *frames = (double)t->ticks * (double)t->rate.num * (double)rate / (double)t->rate.denom;
    return true;
}

// Whether the clock jumped in a way time did not (another driver took over): then the graph's
// position says nothing about what was lost, and the comparison starts again. Data thread.
static bool clock_discontinuous(tapedeck_pw *c, const struct pw_time *t) {
    bool jump = false;
    if (c->last_rate_denom != 0) {
        if (t->rate.denom != c->last_rate_denom || t->ticks < c->last_ticks) jump = true;
        else {
            double ticks_s = (double)(t->ticks - c->last_ticks) * t->rate.num / t->rate.denom;
            double now_s = (double)(t->now - c->last_now) / 1e9;
            if (ticks_s - now_s > 0.5 || now_s - ticks_s > 0.5) jump = true;
        }
    }
    c->last_rate_denom = t->rate.denom;
    c->last_ticks = t->ticks;
    c->last_now = t->now;
    return jump;
}

static double tolerance(const tapedeck_pw *c) {
    return 2.0 * atomic_load_explicit(&c->quantum, memory_order_relaxed) + atomic_load_explicit(&c->rate, memory_order_relaxed) / 100.0;
}

static void read_time(tapedeck_pw *c, struct pw_time *t) {
    memset(t, 0, sizeof *t);
    pw_stream_get_time_n(c->stream, t, sizeof *t);
    if (t->rate.denom != 0 && t->rate.num != 0) atomic_store_explicit(&c->graph_rate, t->rate.denom / t->rate.num, memory_order_relaxed);
}

// Pushes one buffer into the ring (which discards it before start) and gives it back. Returns
// its frames. Data thread.
static uint32_t capture_buffer(tapedeck_pw *c, struct pw_buffer *b) {
    uint32_t stride = c->channels * sizeof(float);
    uint32_t frames = 0;
    struct spa_data *d = &b->buffer->datas[0];
    if (d->data != NULL && d->chunk != NULL && stride > 0) {
        uint32_t offset = SPA_MIN(d->chunk->offset, d->maxsize);
        uint32_t size = SPA_MIN(d->chunk->size, d->maxsize - offset);
        frames = size / stride;
        if (frames > 0) tapedeck_ring_push(c->ring, SPA_PTROFF(d->data, offset, const float), frames);
    }
    pw_stream_queue_buffer(c->stream, b);
    return frames;
}

static void capture_process(tapedeck_pw *c) {
    struct pw_time t;
    read_time(c, &t);
    bool started = tapedeck_ring_is_started(c->ring);
    if (started && !c->was_started) {
        c->was_started = true;
        c->have_base = false;
        c->last_rate_denom = 0;
    }
    // The clock is that of the newest buffer (an input stream's clock moves when a buffer
    // arrives): the older ones are copied first, then the clock is compared with what arrived
    // before the newest, so a gap is placed before the first audio after it.
    struct pw_buffer *b, *newest = NULL;
    while ((b = pw_stream_dequeue_buffer(c->stream)) != NULL) {
        if (newest != NULL) capture_buffer(c, newest);
        newest = b;
    }
    if (newest == NULL) return;
    double now;
    if (started && clock_frames(c, &t, &now)) {
        double delivered = (double)tapedeck_ring_frames_done(c->ring);
        if (clock_discontinuous(c, &t) || !c->have_base) {
            c->have_base = true;
            c->base = now - delivered;
        } else {
            // What the graph produced since the start, against what arrived: a deficit beyond
            // the jitter of a cycle or two is audio the graph never delivered (an xrun).
            double deficit = (now - c->base) - delivered;
            if (deficit > tolerance(c)) tapedeck_ring_lose(c->ring, (uint64_t)deficit);
        }
        tapedeck_ring_set_clock(c->ring, (uint64_t)SPA_MAX(now - c->base, 0.0), t.now);
    }
    uint32_t frames = capture_buffer(c, newest);
    if (frames > 0) atomic_store_explicit(&c->quantum, frames, memory_order_relaxed);
    tapedeck_ring_cycle(c->ring);
}

// Fills one of PipeWire's buffers from the ring: what the graph asks for this cycle, silence
// where the ring ran dry (counted as underrun by the ring), nothing once the last frames are out.
static void playback_process(tapedeck_pw *c) {
    struct pw_time t;
    read_time(c, &t);
    bool finishing = tapedeck_ring_is_finishing(c->ring);
    uint32_t held = tapedeck_ring_capacity(c->ring) - tapedeck_ring_available(c->ring);
    if (tapedeck_ring_is_started(c->ring) && !(finishing && held == 0)) {
        struct pw_buffer *b = pw_stream_dequeue_buffer(c->stream);
        struct spa_data *d = b != NULL ? &b->buffer->datas[0] : NULL;
        if (d != NULL && d->data != NULL) {
            uint32_t stride = c->channels * sizeof(float);
            uint32_t frames = (uint32_t)b->requested;
            if (frames == 0) frames = SPA_MAX(atomic_load_explicit(&c->quantum, memory_order_relaxed), 256u);
            frames = SPA_MIN(frames, d->maxsize / stride);
            uint32_t n = tapedeck_ring_pull(c->ring, d->data, frames);
            if (n < frames && !finishing) {
                memset(SPA_PTROFF(d->data, (size_t)n * stride, void), 0, (size_t)(frames - n) * stride);
                n = frames;
            }
            atomic_store_explicit(&c->quantum, frames, memory_order_relaxed);
            d->chunk->offset = 0;
            d->chunk->stride = (int32_t)stride;
            d->chunk->size = n * stride;
            b->size = n;
        }
        if (b != NULL) pw_stream_queue_buffer(c->stream, b);
    }
    tapedeck_ring_cycle(c->ring);
}

static void on_process(void *data) {
    tapedeck_pw *c = data;
    if (c->direction == TAPEDECK_PW_CAPTURE) capture_process(c);
    else playback_process(c);
}

static void on_state_changed(void *data, enum pw_stream_state old, enum pw_stream_state state, const char *error) {
    (void)old;
    tapedeck_pw *c = data;
    c->state = state;
    if (state == PW_STREAM_STATE_STREAMING || state == PW_STREAM_STATE_PAUSED) c->connected_once = true;
    if (state == PW_STREAM_STATE_ERROR) {
        snprintf(c->stream_error, sizeof c->stream_error, "%s", error ? error : "stream error");
        if (c->connected_once) set_lost(c, c->stream_error);
    } else if (state == PW_STREAM_STATE_UNCONNECTED && c->connected_once) {
        set_lost(c, "the stream was disconnected");
    }
}

static void on_param_changed(void *data, uint32_t id, const struct spa_pod *param) {
    tapedeck_pw *c = data;
    if (id != SPA_PARAM_Format || param == NULL) return;
    struct spa_audio_info_raw info;
    memset(&info, 0, sizeof info);
    uint32_t media_type, media_subtype;
    if (spa_format_parse(param, &media_type, &media_subtype) < 0) return;
    if (media_type != SPA_MEDIA_TYPE_audio || media_subtype != SPA_MEDIA_SUBTYPE_raw) return;
    if (spa_format_audio_raw_parse(param, &info) < 0) return;
    if (info.format != SPA_AUDIO_FORMAT_F32 || info.channels != c->channels) {
        snprintf(c->stream_error, sizeof c->stream_error, "PipeWire offered another format than float %u-channel audio", c->channels);
        set_lost(c, c->stream_error);
        return;
    }
    c->rate = info.rate;
}
static void on_drained(void *data) {
    tapedeck_pw *c = data;
    c->drained = true;
}

static const struct pw_stream_events stream_events = {
    PW_VERSION_STREAM_EVENTS,
    .state_changed = on_state_changed,
    .param_changed = on_param_changed,
    .process = on_process,
    .drained = on_drained,
};

static const uint32_t speaker_channels[18] = {
    SPA_AUDIO_CHANNEL_FL, SPA_AUDIO_CHANNEL_FR, SPA_AUDIO_CHANNEL_FC, SPA_AUDIO_CHANNEL_LFE,
    SPA_AUDIO_CHANNEL_RL, SPA_AUDIO_CHANNEL_RR, SPA_AUDIO_CHANNEL_FLC, SPA_AUDIO_CHANNEL_FRC,
    SPA_AUDIO_CHANNEL_RC, SPA_AUDIO_CHANNEL_SL, SPA_AUDIO_CHANNEL_SR, SPA_AUDIO_CHANNEL_TC,
    SPA_AUDIO_CHANNEL_TFL, SPA_AUDIO_CHANNEL_TFC, SPA_AUDIO_CHANNEL_TFR, SPA_AUDIO_CHANNEL_TRL,
    SPA_AUDIO_CHANNEL_TRC, SPA_AUDIO_CHANNEL_TRR,
};

int tapedeck_pw_stream_open(tapedeck_pw *c, int direction, const char *node_name, const char *description,
                            const char *target_serial, uint32_t target_id, int capture_sink,
                            uint32_t rate, const int32_t *positions, tapedeck_ring *ring) {
    uint32_t channels = tapedeck_ring_channels(ring);
    if (c->stream != NULL || channels == 0 || channels > SPA_AUDIO_MAX_CHANNELS) return -EINVAL;
    c->direction = direction;
    c->channels = channels;
    atomic_store(&c->rate, rate);
    c->target_id = target_id;
    snprintf(c->target_label, sizeof c->target_label, "%s", description ? description : "");
    c->ring = ring;

    struct pw_properties *props = pw_properties_new(
        PW_KEY_MEDIA_TYPE, "Audio",
        PW_KEY_MEDIA_CATEGORY, direction == TAPEDECK_PW_CAPTURE ? "Capture" : "Playback",
        PW_KEY_MEDIA_ROLE, "Production",
        PW_KEY_APP_NAME, "Tapedeck",
        PW_KEY_NODE_NAME, node_name,
        NULL);
    if (target_serial != NULL && target_serial[0] != 0) pw_properties_set(props, PW_KEY_TARGET_OBJECT, target_serial);
    if (capture_sink) pw_properties_set(props, PW_KEY_STREAM_CAPTURE_SINK, "true");
    c->stream = pw_stream_new(c->core, node_name, props);
    if (c->stream == NULL) return errno ? -errno : -ENOMEM;
    pw_stream_add_listener(c->stream, &c->stream_listener, &stream_events, c);

    struct spa_audio_info_raw info;
    memset(&info, 0, sizeof info);
    info.format = SPA_AUDIO_FORMAT_F32;
    info.rate = rate;
    info.channels = channels;
    bool positioned = positions != NULL;
    for (uint32_t i = 0; i < channels && positioned; i++) {
        int32_t p = positions[i];
        if (p < 0 || p >= 18) positioned = false;
        else info.position[i] = speaker_channels[p];
    }
    if (!positioned) {
        for (uint32_t i = 0; i < channels; i++) info.position[i] = SPA_AUDIO_CHANNEL_AUX0 + i;
    }
    uint8_t buffer[1024];
    struct spa_pod_builder builder = SPA_POD_BUILDER_INIT(buffer, sizeof buffer);
    // The process callback runs on PipeWire's data thread (PW_STREAM_FLAG_RT_PROCESS) and only
    // copies through the ring: a device thread late by less than the ring loses nothing.
    const struct spa_pod *params[1];
    uint32_t n_params = 0;
    params[n_params++] = spa_format_audio_raw_build(&builder, SPA_PARAM_EnumFormat, &info);
    int r = pw_stream_connect(c->stream,
                              direction == TAPEDECK_PW_CAPTURE ? PW_DIRECTION_INPUT : PW_DIRECTION_OUTPUT,
                              PW_ID_ANY,
                              PW_STREAM_FLAG_AUTOCONNECT | PW_STREAM_FLAG_MAP_BUFFERS | PW_STREAM_FLAG_DONT_RECONNECT |
                                  PW_STREAM_FLAG_RT_PROCESS,
                              params, n_params);
    return r < 0 ? r : 0;
}

int tapedeck_pw_stream_links(const tapedeck_pw *c) { return c->link_count; }
int tapedeck_pw_stream_state(const tapedeck_pw *c) { return c->stream ? (int)c->state : 0; }
const char *tapedeck_pw_stream_error(const tapedeck_pw *c) { return c->stream_error; }
uint32_t tapedeck_pw_graph_rate(const tapedeck_pw *c) { return atomic_load(&c->graph_rate); }
uint32_t tapedeck_pw_stream_quantum(const tapedeck_pw *c) { return atomic_load(&c->quantum); }
int tapedeck_pw_loop_fd(const tapedeck_pw *c) { return pw_loop_get_fd(c->loop); }

void tapedeck_pw_stream_drain(tapedeck_pw *c) {
    if (c->stream != NULL) pw_stream_flush(c->stream, true);
}

int tapedeck_pw_stream_drained(const tapedeck_pw *c) { return c->drained; }

void tapedeck_pw_disconnect(tapedeck_pw *c) {
    if (c == NULL) return;
    if (c->stream != NULL) {
        spa_hook_remove(&c->stream_listener);
        pw_stream_destroy(c->stream);
        c->stream = NULL;
    }
    if (c->metadata != NULL) {
        spa_hook_remove(&c->metadata_listener);
        pw_proxy_destroy((struct pw_proxy *)c->metadata);
    }
    if (c->registry != NULL) {
        spa_hook_remove(&c->registry_listener);
        pw_proxy_destroy((struct pw_proxy *)c->registry);
    }
    if (c->core != NULL) {
        spa_hook_remove(&c->core_listener);
        pw_core_disconnect(c->core);
    }
    if (c->context != NULL) pw_context_destroy(c->context);
    if (c->loop != NULL) {
        pw_loop_leave(c->loop);
        pw_loop_destroy(c->loop);
    }
    for (int i = 0; i < c->node_count; i++) pw_properties_free(c->nodes[i].props);
    for (int i = 0; i < c->port_count; i++) pw_properties_free(c->ports[i].props);
    free(c);
}

#endif
