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

static void write_signal_number(int signo) {
    int saved = errno; // the interrupted code may be about to read errno
    int fd = atomic_load(&pipe_write_fd);
    if (fd >= 0) {
        unsigned char byte = (unsigned char)signo;
        (void)!write(fd, &byte, 1);
    }
    errno = saved;
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
    }
    atomic_store(&pipe_write_fd, -1);
}
