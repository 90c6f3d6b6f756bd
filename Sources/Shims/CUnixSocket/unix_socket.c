#define _GNU_SOURCE
#include "tapedeck_unix_socket.h"

#include <errno.h>
#include <stddef.h>
#include <sys/socket.h>

int tapedeck_accept_cloexec(int fd) {
    return accept4(fd, NULL, NULL, SOCK_CLOEXEC);
}

int tapedeck_peer_uid(int fd, uid_t *uid) {
    struct ucred credentials;
    socklen_t length = sizeof credentials;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return errno;
    *uid = credentials.uid;
    return 0;
}
