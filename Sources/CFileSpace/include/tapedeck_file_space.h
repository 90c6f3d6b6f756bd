// File-space calls that Swift's Glibc module does not import (they need _GNU_SOURCE).
#ifndef TAPEDECK_FILE_SPACE_H
#define TAPEDECK_FILE_SPACE_H

#include <stdint.h>

/// Allocates the blocks of `fd` in [offset, offset + length) without changing the file's length
/// (fallocate(2) with FALLOC_FL_KEEP_SIZE). Returns 0, or the errno fallocate set (EOPNOTSUPP
/// on a file system that cannot, ENOSPC or EDQUOT when there is no room). On systems without
/// fallocate(2) it returns EOPNOTSUPP.
/// Thread: any. Blocks on disk I/O (allocation only; no data is written).
int tapedeck_preallocate(int fd, int64_t offset, int64_t length);

#endif
