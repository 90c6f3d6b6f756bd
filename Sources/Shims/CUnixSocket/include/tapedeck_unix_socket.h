#ifndef TAPEDECK_UNIX_SOCKET_H
#define TAPEDECK_UNIX_SOCKET_H

#include <sys/types.h>

/// accept4(fd, NULL, NULL, SOCK_CLOEXEC): a connection's descriptor, or -1 with errno.
int tapedeck_accept_cloexec(int fd);

/// The user id of the process at the other end of a Unix socket (SO_PEERCRED): 0 and `*uid`
/// set, or an errno value.
int tapedeck_peer_uid(int fd, uid_t *uid);

#endif
