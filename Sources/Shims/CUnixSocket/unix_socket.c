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

#include <string.h>
#include <sys/un.h>
#include <unistd.h>

int tapedeck_notify_send(const char *path, const char *message, size_t length) {
    size_t path_length = strlen(path);
    struct sockaddr_un address;
    memset(&address, 0, sizeof address);
    address.sun_family = AF_UNIX;
    if (path_length == 0 || path_length >= sizeof address.sun_path) return ENAMETOOLONG;
    memcpy(address.sun_path, path, path_length);
    // "@name" is a socket in the abstract namespace: its name begins with a NUL byte.
    if (path[0] == '@') address.sun_path[0] = '\0';
    socklen_t address_length = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + path_length);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return errno;
    int result = 0;
    ssize_t sent;
    do {
        sent = sendto(fd, message, length, MSG_NOSIGNAL, (struct sockaddr *)&address, address_length);
    } while (sent < 0 && errno == EINTR);
    if (sent < 0) result = errno;
    close(fd);
    return result;
}
