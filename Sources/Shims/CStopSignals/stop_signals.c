#define _GNU_SOURCE
#include "stop_signals.h"

#include <fcntl.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

// The pipe's write end, or -1. A lock-free atomic, so the handler may read it at any moment.
static atomic_int pipe_write_fd = -1;

// Signals delivered as a count (tapedeck_stop_signals_coalesce): how many came since the reader
// last took them. The count doubles as the pending flag: only the signal that moves it from 0
// writes a byte, so a flood of them costs one byte and one wake-up of the reader.
#define COUNTED_SIGNALS 65
static atomic_bool coalesced[COUNTED_SIGNALS];
static atomic_long pending_count[COUNTED_SIGNALS];

static int is_coalesced(int signo) {
    return signo > 0 && signo < COUNTED_SIGNALS && atomic_load(&coalesced[signo]);
}

static void write_signal_number(int signo) {
    int saved = errno; // the interrupted code may be about to read errno
    int fd = atomic_load(&pipe_write_fd);
    if (fd >= 0) {
        int counted = is_coalesced(signo);
        if (!counted || atomic_fetch_add(&pending_count[signo], 1) == 0) {
            unsigned char byte = (unsigned char)signo;
            // A byte that could not be written (the pipe full) must not leave the count
            // stuck above 0, or no later signal would write one.
            if (write(fd, &byte, 1) != 1 && counted) atomic_store(&pending_count[signo], 0);
        }
    }
    errno = saved;
}

void tapedeck_stop_signals_coalesce(int signo) {
    if (signo > 0 && signo < COUNTED_SIGNALS) atomic_store(&coalesced[signo], 1);
}

long tapedeck_stop_signals_take(int signo) {
    if (signo <= 0 || signo >= COUNTED_SIGNALS) return 0;
    return atomic_exchange(&pending_count[signo], 0);
}

int tapedeck_stop_signals_pipe(int *read_fd, int *write_fd) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return -1;
    if (fcntl(fds[1], F_SETFL, O_NONBLOCK) != 0) {
        int saved = errno;
        close(fds[0]);
        close(fds[1]);
        errno = saved;
        return -1;
    }
    *read_fd = fds[0];
    *write_fd = fds[1];
    return 0;
}

int tapedeck_stop_signals_arm(int write_fd, const int *signals, int count, int *armed) {
    atomic_store(&pipe_write_fd, write_fd);
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = write_signal_number;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    for (int i = 0; i < count; i++) {
        armed[i] = 0;
        struct sigaction current;
        if (sigaction(signals[i], NULL, &current) != 0) return -1;
        // Inherited "ignore" is the parent's decision (nohup ignores SIGHUP; a script's
        // background job ignores SIGINT, so Ctrl-C reaches only the foreground): it stays.
        if (current.sa_handler == SIG_IGN) continue;
        if (sigaction(signals[i], &action, NULL) != 0) return -1;
        armed[i] = 1;
    }
    return 0;
}

void tapedeck_stop_signals_disarm(const int *signals, int count) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = SIG_DFL;
    sigemptyset(&action.sa_mask);
    for (int i = 0; i < count; i++) {
        (void)sigaction(signals[i], &action, NULL);
        if (signals[i] > 0 && signals[i] < COUNTED_SIGNALS) {
            atomic_store(&coalesced[signals[i]], 0);
            atomic_store(&pending_count[signals[i]], 0);
        }
    }
    atomic_store(&pipe_write_fd, -1);
}
