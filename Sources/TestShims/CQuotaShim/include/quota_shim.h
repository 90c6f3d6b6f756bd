// A byte-quota seam for tests: loaded with LD_PRELOAD into a process under test, it makes the
// files under one folder share a fixed amount of free space, so writes fail with ENOSPC as on a
// full disk, on any file system and without root. It exports only the libc functions it wraps
// (write, pwrite, writev, fallocate, posix_fallocate, ftruncate, truncate, unlink, unlinkat,
// rename, renameat); nothing here is meant to be called directly.
//
// Environment (read once, when the library is loaded):
//   QUOTA_SHIM_DIR    the folder whose files share the quota (files outside it are not counted)
//   QUOTA_SHIM_BYTES  the free space at the start, in bytes
//   QUOTA_SHIM_LOG    optional: a file that receives "first-enospc <CLOCK_MONOTONIC ns>" once
//
// Model: growing a file (writing or allocating past its end) takes space; a write that does not
// fit is cut short at the last byte that fits, and the next one fails with ENOSPC. Truncating a
// file, removing its last link, or renaming over it gives its bytes back. Writes through mmap
// are not seen.
#ifndef TAPEDECK_QUOTA_SHIM_H
#define TAPEDECK_QUOTA_SHIM_H
#endif
