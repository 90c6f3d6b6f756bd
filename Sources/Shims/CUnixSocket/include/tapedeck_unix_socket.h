#ifndef TAPEDECK_UNIX_SOCKET_H
#define TAPEDECK_UNIX_SOCKET_H

#include <stddef.h>
#include <sys/types.h>

/// accept4(fd, NULL, NULL, SOCK_CLOEXEC): a connection's descriptor, or -1 with errno.
int tapedeck_accept_cloexec(int fd);

/// The user id of the process at the other end of a Unix socket (SO_PEERCRED): 0 and `*uid`
/// set, or an errno value.
int tapedeck_peer_uid(int fd, uid_t *uid);

/// Sends `message` as one datagram to the Unix socket at `path` (`@name`: the abstract namespace),
/// as sd_notify(3) does: 0, or an errno value. Never blocks for long (a datagram socket).
int tapedeck_notify_send(const char *path, const char *message, size_t length);

#endif
