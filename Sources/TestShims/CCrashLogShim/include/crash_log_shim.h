// A power-loss seam for tests (docs/RELIABILITY.md, case 2): loaded with LD_PRELOAD into a process
// under test, it appends every change the process makes to the files and folders under one folder
// to a log, with the bytes written, in the order the changes were made. scripts/reliability-powerloss
// replays that log onto the folder's starting state up to a chosen moment and decides, for each
// change that was not yet synced, what a power loss left of it (kept, dropped, garbled or torn),
// in the manner of SQLite's crash tests. It exports only the libc functions it wraps; nothing here
// is meant to be called directly, and it changes no result: every call is passed on unchanged.
//
// Environment (read once, when the library is loaded):
//   CRASHLOG_DIR   the folder whose changes are logged (a change elsewhere is not)
//   CRASHLOG_FILE  the log; records are appended, one write each, so processes run one after
//                  another can share it
//
// A record is a text line `OP INODE OFFSET LENGTH PATHLEN DATALEN\n` followed by PATHLEN bytes of
// path(s) (relative to CRASHLOG_DIR; two paths are separated by a NUL) and DATALEN bytes of data:
//   C  a file created at PATH (its inode INODE)      W  DATALEN bytes written at OFFSET of INODE
//   T  INODE truncated or extended to LENGTH         A  INODE allocated to OFFSET+LENGTH at least
//   S  INODE synced (fsync or fdatasync)             D  the folder PATH synced
//   M  folder PATH made                              X  folder PATH removed
//   U  PATH unlinked                                 R  PATH renamed to the second path
//   L  the second path linked to the file at PATH    ?  a change the shim cannot follow (PATH says which)
// Not seen: writes through mmap (SQLite's -shm file, which holds nothing durable), stdio's own
// writes (fopen/fwrite go through glibc's internal calls), mkstemp, symlink and openat2. Tapedeck
// uses none of these on a library; a full replay that differs from the real library shows when
// something unseen changed it. Set both variables or neither: a shim asked to log that cannot
// (a missing folder, an unwritable log) stops the process with a message rather than log nothing.
#ifndef TAPEDECK_CRASH_LOG_SHIM_H
#define TAPEDECK_CRASH_LOG_SHIM_H
#endif
