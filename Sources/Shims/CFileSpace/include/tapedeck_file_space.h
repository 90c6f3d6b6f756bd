// File-space and clock calls that Swift's Glibc module does not import (they need _GNU_SOURCE
// or headers it leaves out).
#ifndef TAPEDECK_FILE_SPACE_H
#define TAPEDECK_FILE_SPACE_H

#include <stdint.h>

/// Allocates the blocks of `fd` in [offset, offset + length) without changing the file's length
/// (fallocate(2) with FALLOC_FL_KEEP_SIZE). Returns 0, or the errno fallocate set (EOPNOTSUPP
/// on a file system that cannot, ENOSPC or EDQUOT when there is no room). On systems without
/// fallocate(2) it returns EOPNOTSUPP.
/// Thread: any. Blocks on disk I/O (allocation only; no data is written).
int tapedeck_preallocate(int fd, int64_t offset, int64_t length);

/// Sets `*end` to the end, in bytes, of the last range of blocks the file system holds for the
/// file's data: written blocks and blocks allocated ahead (also past the file's length), as
/// FIEMAP lists them after flushing delayed allocation. Blocks the file system spends on its own
/// bookkeeping (ext4's extent tree, which `st_blocks` also counts once a file has more than four
/// extents) are not included. 0 for a file without blocks. Returns 0, or an errno (EOPNOTSUPP
/// where the file system or the system has no FIEMAP, as tmpfs).
/// Thread: any. Blocks on disk I/O (it flushes the file's dirty pages first).
int tapedeck_allocated_end(int fd, int64_t *end);

/// Sets `*estimated` and `*maximum` to the system clock's estimated and maximum error in
/// seconds, as the kernel's NTP discipline keeps them (ntp_adjtime(2) read-only: `esterror` and
/// `maxerror`, set by chronyd, ntpd or systemd-timesyncd). Returns 1 when the kernel says the
/// clock is synchronized, 0 when it is not (nothing disciplines it: the errors mean nothing),
/// -1 where the call is not available.
/// Thread: any. Never blocks.
int tapedeck_clock_error(double *estimated, double *maximum);

#endif
