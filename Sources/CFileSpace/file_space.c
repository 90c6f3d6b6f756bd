#define _GNU_SOURCE
#include "tapedeck_file_space.h"

#include <errno.h>
#include <fcntl.h>

int tapedeck_preallocate(int fd, int64_t offset, int64_t length) {
#if defined(__linux__)
    if (fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)offset, (off_t)length) == 0) return 0;
    return errno;
#else
    (void)fd; (void)offset; (void)length;
    return EOPNOTSUPP;
#endif
}
