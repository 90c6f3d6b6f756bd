#define _GNU_SOURCE
#include "tapedeck_file_space.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#if defined(__linux__)
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/timex.h>
#endif

int tapedeck_preallocate(int fd, int64_t offset, int64_t length) {
#if defined(__linux__)
    if (fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)offset, (off_t)length) == 0) return 0;
    return errno;
#else
    (void)fd; (void)offset; (void)length;
    return EOPNOTSUPP;
#endif
}

int tapedeck_allocated_end(int fd, int64_t *end) {
#if defined(__linux__)
    enum { batch = 64 };
    _Alignas(struct fiemap) char buffer[sizeof(struct fiemap) + batch * sizeof(struct fiemap_extent)];
    struct fiemap *map = (struct fiemap *)buffer;
    int64_t last = 0;
    uint64_t start = 0;
    for (;;) {
        memset(buffer, 0, sizeof buffer);
        map->fm_start = start;
        map->fm_length = FIEMAP_MAX_OFFSET - start;
        map->fm_flags = FIEMAP_FLAG_SYNC;
        map->fm_extent_count = batch;
        if (ioctl(fd, FS_IOC_FIEMAP, map) != 0) return errno == ENOTTY ? EOPNOTSUPP : errno;
        uint32_t count = map->fm_mapped_extents;
        if (count == 0) break;
        int done = 0;
        for (uint32_t i = 0; i < count; i++) {
            const struct fiemap_extent *extent = &map->fm_extents[i];
            int64_t extentEnd = (int64_t)(extent->fe_logical + extent->fe_length);
            if (extentEnd > last) last = extentEnd;
            if (extent->fe_flags & FIEMAP_EXTENT_LAST) done = 1;
        }
        const struct fiemap_extent *tail = &map->fm_extents[count - 1];
        if (done || count < batch) break;
        start = tail->fe_logical + tail->fe_length;
    }
    *end = last;
    return 0;
#else
    (void)fd; (void)end;
    return EOPNOTSUPP;
#endif
}

int tapedeck_clock_error(double *estimated, double *maximum) {
#if defined(__linux__)
    struct timex t;
    memset(&t, 0, sizeof t);  /* modes 0: read only */
    int state = ntp_adjtime(&t);
    if (state == -1) return -1;
    *estimated = (double)t.esterror / 1e6;
    *maximum = (double)t.maxerror / 1e6;
    return state == TIME_ERROR || (t.status & STA_UNSYNC) ? 0 : 1;
#else
    (void)estimated; (void)maximum;
    return -1;
#endif
}
