#ifndef TAPEDECK_CHILD_SPAWN_H
#define TAPEDECK_CHILD_SPAWN_H

#include <sys/types.h>

/// Starts `path` with `argv` and `envp` for the server's exports on request: stdin from
/// /dev/null; stdout, stderr and descriptor 3 into three new pipes whose reading ends are
/// returned in `reading` (close-on-exec, made atomically with pipe2); every other descriptor
/// closed in the child; no signal blocked, SIGINT/SIGTERM/SIGHUP/SIGUSR1/SIGPIPE at their
/// defaults; in a process group of its own; then at nice `nice` (relative to the caller).
/// Returns 0 and sets `*pid`, or an errno value. Never blocks beyond the spawn itself.
int tapedeck_spawn_child(const char *path, char *const argv[], char *const envp[], int nice,
                         int reading[3], pid_t *pid);

#endif
