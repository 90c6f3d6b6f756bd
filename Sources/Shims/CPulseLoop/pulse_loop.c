#define _GNU_SOURCE  // ppoll
#include "tapedeck_pulse_loop.h"

#if __has_include(<pulse/mainloop-api.h>)
#include <pulse/mainloop-api.h>

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

// libpulse marks a timeval on the monotonic clock with this bit in tv_usec. Contexts on a foreign
// loop use wall-clock times, but both are accepted.
#define RTCLOCK_BIT (1UL << 30)

struct pa_io_event {
    tapedeck_pulse_loop *loop;
    int fd;
    pa_io_event_flags_t events;
    pa_io_event_cb_t callback;
    pa_io_event_destroy_cb_t destroy;
    void *userdata;
    bool dead;
    struct pa_io_event *next;
};

struct pa_time_event {
    tapedeck_pulse_loop *loop;
    bool enabled;
    bool dead;
    int64_t due;          // microseconds on CLOCK_MONOTONIC
    struct timeval when;  // as given, handed back to the callback
    pa_time_event_cb_t callback;
    pa_time_event_destroy_cb_t destroy;
    void *userdata;
    struct pa_time_event *next;
};

struct pa_defer_event {
    tapedeck_pulse_loop *loop;
    bool enabled;
    bool dead;
    pa_defer_event_cb_t callback;
    pa_defer_event_destroy_cb_t destroy;
    void *userdata;
    struct pa_defer_event *next;
};

struct tapedeck_pulse_loop {
    pa_mainloop_api api;
    struct pa_io_event *ios;
    struct pa_time_event *times;
    struct pa_defer_event *defers;
    unsigned enabled_defers;
    bool has_dead;
    struct pollfd *pollfds;
    struct pa_io_event **polled;
    unsigned capacity;
};

static int64_t monotonic_usec(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t due_from(const struct timeval *tv) {
    if (tv->tv_usec & RTCLOCK_BIT) {
        return (int64_t)tv->tv_sec * 1000000 + (int64_t)(tv->tv_usec & ~RTCLOCK_BIT);
    }
    struct timeval now;
    gettimeofday(&now, NULL);
    int64_t wall = (int64_t)now.tv_sec * 1000000 + now.tv_usec;
    int64_t at = (int64_t)tv->tv_sec * 1000000 + tv->tv_usec;
    return monotonic_usec() + (at - wall);
}

static short to_poll(pa_io_event_flags_t f) {
    return (short)(((f & PA_IO_EVENT_INPUT) ? POLLIN : 0) | ((f & PA_IO_EVENT_OUTPUT) ? POLLOUT : 0)
                   | ((f & PA_IO_EVENT_HANGUP) ? POLLHUP : 0) | ((f & PA_IO_EVENT_ERROR) ? POLLERR : 0));
}

static pa_io_event_flags_t from_poll(short r) {
    return (pa_io_event_flags_t)(((r & POLLIN) ? PA_IO_EVENT_INPUT : 0) | ((r & POLLOUT) ? PA_IO_EVENT_OUTPUT : 0)
                                 | ((r & POLLHUP) ? PA_IO_EVENT_HANGUP : 0)
                                 | ((r & (POLLERR | POLLNVAL)) ? PA_IO_EVENT_ERROR : 0));
}

// I/O events

static pa_io_event *io_new(pa_mainloop_api *a, int fd, pa_io_event_flags_t events, pa_io_event_cb_t cb, void *userdata) {
    tapedeck_pulse_loop *loop = a->userdata;
    struct pa_io_event *e = calloc(1, sizeof *e);
    if (!e) abort();  // libpulse's own allocator aborts on failure too
    e->loop = loop;
    e->fd = fd;
    e->events = events;
    e->callback = cb;
    e->userdata = userdata;
    e->next = loop->ios;
    loop->ios = e;
    return e;
}

static void io_enable(pa_io_event *e, pa_io_event_flags_t events) { e->events = events; }

static void io_free(pa_io_event *e) {
    e->dead = true;
    e->loop->has_dead = true;
}

static void io_set_destroy(pa_io_event *e, pa_io_event_destroy_cb_t cb) { e->destroy = cb; }

// Time events

static pa_time_event *time_new(pa_mainloop_api *a, const struct timeval *tv, pa_time_event_cb_t cb, void *userdata) {
    tapedeck_pulse_loop *loop = a->userdata;
    struct pa_time_event *e = calloc(1, sizeof *e);
    if (!e) abort();
    e->loop = loop;
    e->callback = cb;
    e->userdata = userdata;
    if (tv) {
        e->enabled = true;
        e->when = *tv;
        e->due = due_from(tv);
    }
    e->next = loop->times;
    loop->times = e;
    return e;
}

static void time_restart(pa_time_event *e, const struct timeval *tv) {
    if (e->dead) return;
    e->enabled = tv != NULL;
    if (tv) {
        e->when = *tv;
        e->due = due_from(tv);
    }
}

static void time_free(pa_time_event *e) {
    e->dead = true;
    e->enabled = false;
    e->loop->has_dead = true;
}

static void time_set_destroy(pa_time_event *e, pa_time_event_destroy_cb_t cb) { e->destroy = cb; }

// Deferred events

static pa_defer_event *defer_new(pa_mainloop_api *a, pa_defer_event_cb_t cb, void *userdata) {
    tapedeck_pulse_loop *loop = a->userdata;
    struct pa_defer_event *e = calloc(1, sizeof *e);
    if (!e) abort();
    e->loop = loop;
    e->enabled = true;  // as pa_mainloop: a new deferred event starts enabled
    loop->enabled_defers++;
    e->callback = cb;
    e->userdata = userdata;
    e->next = loop->defers;
    loop->defers = e;
    return e;
}

static void defer_enable(pa_defer_event *e, int b) {
    if (e->dead) return;
    if (e->enabled && !b) e->loop->enabled_defers--;
    else if (!e->enabled && b) e->loop->enabled_defers++;
    e->enabled = b != 0;
}

static void defer_free(pa_defer_event *e) {
    defer_enable(e, 0);
    e->dead = true;
    e->loop->has_dead = true;
}

static void defer_set_destroy(pa_defer_event *e, pa_defer_event_destroy_cb_t cb) { e->destroy = cb; }

static void quit(pa_mainloop_api *a, int retval) {
    (void)a;
    (void)retval;  // Tapedeck never asks its loops to quit; each owner stops iterating instead.
}

// Removes events released so far, running their destroy callbacks. With `all`, every event.
static void sweep(tapedeck_pulse_loop *loop, bool all) {
    if (!all && !loop->has_dead) return;
    loop->has_dead = false;
    for (struct pa_io_event **p = &loop->ios; *p;) {
        struct pa_io_event *e = *p;
        if (!all && !e->dead) { p = &e->next; continue; }
        *p = e->next;
        if (e->destroy) e->destroy(&loop->api, e, e->userdata);
        free(e);
    }
    for (struct pa_time_event **p = &loop->times; *p;) {
        struct pa_time_event *e = *p;
        if (!all && !e->dead) { p = &e->next; continue; }
        *p = e->next;
        if (e->destroy) e->destroy(&loop->api, e, e->userdata);
        free(e);
    }
    for (struct pa_defer_event **p = &loop->defers; *p;) {
        struct pa_defer_event *e = *p;
        if (!all && !e->dead) { p = &e->next; continue; }
        *p = e->next;
        if (e->enabled) loop->enabled_defers--;
        if (e->destroy) e->destroy(&loop->api, e, e->userdata);
        free(e);
    }
}

tapedeck_pulse_loop *tapedeck_pulse_loop_new(void) {
    tapedeck_pulse_loop *loop = calloc(1, sizeof *loop);
    if (!loop) return NULL;
    loop->api.userdata = loop;
    loop->api.io_new = io_new;
    loop->api.io_enable = io_enable;
    loop->api.io_free = io_free;
    loop->api.io_set_destroy = io_set_destroy;
    loop->api.time_new = time_new;
    loop->api.time_restart = time_restart;
    loop->api.time_free = time_free;
    loop->api.time_set_destroy = time_set_destroy;
    loop->api.defer_new = defer_new;
    loop->api.defer_enable = defer_enable;
    loop->api.defer_free = defer_free;
    loop->api.defer_set_destroy = defer_set_destroy;
    loop->api.quit = quit;
    return loop;
}

void *tapedeck_pulse_loop_api(tapedeck_pulse_loop *loop) { return &loop->api; }

// Fills the poll set with the live I/O events' descriptors (growing it as needed) and returns how
// many there are. `hangup_only` asks only for a hang-up (POLLRDHUP; POLLHUP and POLLERR are always
// reported), not for the events' own flags.
static unsigned fill_pollfds(tapedeck_pulse_loop *loop, bool hangup_only) {
    unsigned n = 0;
    for (struct pa_io_event *e = loop->ios; e; e = e->next) {
        if (!e->dead) n++;
    }
    if (n > loop->capacity) {
        unsigned capacity = n * 2;
        struct pollfd *fds = realloc(loop->pollfds, capacity * sizeof *fds);
        if (!fds) abort();
        loop->pollfds = fds;
        struct pa_io_event **polled = realloc(loop->polled, capacity * sizeof *polled);
        if (!polled) abort();
        loop->polled = polled;
        loop->capacity = capacity;
    }
    unsigned i = 0;
    for (struct pa_io_event *e = loop->ios; e; e = e->next) {
        if (e->dead) continue;
        loop->pollfds[i].fd = e->fd;
        loop->pollfds[i].events = hangup_only ? POLLRDHUP : to_poll(e->events);
        loop->pollfds[i].revents = 0;
        loop->polled[i] = e;
        i++;
    }
    return n;
}

int tapedeck_pulse_loop_iterate(tapedeck_pulse_loop *loop, int64_t timeout_usec) {
    int dispatched = 0;
    sweep(loop, false);

    // Enabled deferred events run instead of a poll (a callback usually disables its own event).
    if (loop->enabled_defers > 0) {
        for (struct pa_defer_event *e = loop->defers; e; e = e->next) {
            if (e->dead || !e->enabled) continue;
            e->callback(&loop->api, e, e->userdata);
            dispatched++;
        }
        sweep(loop, false);
        return dispatched;
    }

    int64_t now = monotonic_usec();
    int64_t wait = timeout_usec < 0 ? 0 : timeout_usec;
    for (struct pa_time_event *e = loop->times; e; e = e->next) {
        if (e->dead || !e->enabled) continue;
        int64_t left = e->due - now;
        if (left < wait) wait = left < 0 ? 0 : left;
    }

    unsigned n = fill_pollfds(loop, false);

    struct timespec ts = { .tv_sec = wait / 1000000, .tv_nsec = (wait % 1000000) * 1000 };
    int ready = ppoll(loop->pollfds, n, &ts, NULL);
    if (ready < 0) {
        if (errno != EINTR) return -1;
        ready = 0;
    }

    now = monotonic_usec();
    for (struct pa_time_event *e = loop->times; e; e = e->next) {
        if (e->dead || !e->enabled || e->due > now) continue;
        e->enabled = false;  // fires once; the callback may restart it
        e->callback(&loop->api, e, &e->when, e->userdata);
        dispatched++;
    }

    for (unsigned k = 0; k < n && ready > 0; k++) {
        short r = loop->pollfds[k].revents;
        if (!r) continue;
        ready--;
        struct pa_io_event *e = loop->polled[k];
        if (e->dead) continue;
        e->callback(&loop->api, e, e->fd, from_poll(r), e->userdata);
        dispatched++;
    }

    sweep(loop, false);
    return dispatched;
}

int tapedeck_pulse_loop_doze(tapedeck_pulse_loop *loop, int64_t timeout_usec) {
    sweep(loop, false);
    unsigned n = fill_pollfds(loop, true);
    int64_t wait = timeout_usec < 0 ? 0 : timeout_usec;
    struct timespec ts = { .tv_sec = wait / 1000000, .tv_nsec = (wait % 1000000) * 1000 };
    int ready = ppoll(loop->pollfds, n, &ts, NULL);
    if (ready < 0) return errno == EINTR ? 0 : -1;
    return ready > 0 ? 1 : 0;
}

void tapedeck_pulse_loop_free(tapedeck_pulse_loop *loop) {
    if (!loop) return;
    sweep(loop, true);
    free(loop->pollfds);
    free(loop->polled);
    free(loop);
}

#endif
