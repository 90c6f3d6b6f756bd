// See include/crash_log_shim.h. Test support only: never linked into Tapedeck itself.
#define _GNU_SOURCE
#include "crash_log_shim.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#ifndef FALLOC_FL_KEEP_SIZE
#define FALLOC_FL_KEEP_SIZE 0x01
#endif
#ifndef AT_REMOVEDIR
#define AT_REMOVEDIR 0x200
#endif

static char log_root[PATH_MAX];
static size_t log_root_len;
static int log_fd = -1;
// Held from before a change until its record is written, so the log's order is the order in
// which this process made its changes.
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t loaded = PTHREAD_ONCE_INIT;

static int (*real_openat)(int, const char *, int, ...);
static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static ssize_t (*real_pwritev)(int, const struct iovec *, int, off_t);
static int (*real_ftruncate)(int, off_t);
static int (*real_truncate)(const char *, off_t);
static int (*real_fallocate)(int, int, off_t, off_t);
static int (*real_posix_fallocate)(int, off_t, off_t);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_unlinkat)(int, const char *, int);
static int (*real_renameat2)(int, const char *, int, const char *, unsigned int);
static int (*real_linkat)(int, const char *, int, const char *, int);
static int (*real_mkdirat)(int, const char *, mode_t);
static ssize_t (*real_copy_file_range)(int, off_t *, int, off_t *, size_t, unsigned int);
static ssize_t (*real_sendfile)(int, int, off_t *, size_t);

// Stops the process under test with exit status 70: a log that silently misses changes would make
// every replay wrong.
static void fail(const char *what, const char *detail) {
    char message[PATH_MAX + 200];
    int n = snprintf(message, sizeof message, "libTapedeckCrashLogShim: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    if (n > 0) (void)!syscall(SYS_write, 2, message, (size_t)n < sizeof message ? (size_t)n : sizeof message - 1);
    _exit(70); // not abort(): nothing here may run more of the process (or the shim) again
}

static void *real(const char *name) {
    void *function = dlsym(RTLD_NEXT, name);
    if (!function) fail("this C library lacks a function the shim wraps", name);
    return function;
}

static void load_now(void) {
    real_openat = real("openat64");
    real_write = real("write");
    real_writev = real("writev");
    real_pwritev = real("pwritev64");
    real_ftruncate = real("ftruncate64");
    real_truncate = real("truncate64");
    real_fallocate = real("fallocate64");
    real_posix_fallocate = real("posix_fallocate64");
    real_fsync = real("fsync");
    real_fdatasync = real("fdatasync");
    real_unlinkat = real("unlinkat");
    real_renameat2 = real("renameat2");
    real_linkat = real("linkat");
    real_mkdirat = real("mkdirat");
    real_copy_file_range = real("copy_file_range");
    real_sendfile = real("sendfile64");
    const char *dir = getenv("CRASHLOG_DIR"), *file = getenv("CRASHLOG_FILE");
    if (!dir && !file) return; // loaded but not asked to log
    if (!dir || !file) fail("set both CRASHLOG_DIR and CRASHLOG_FILE", NULL);
    if (!realpath(dir, log_root)) fail("CRASHLOG_DIR must name an existing folder", dir);
    log_root_len = strlen(log_root);
    log_fd = real_openat(AT_FDCWD, file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (log_fd < 0) fail("cannot open CRASHLOG_FILE for appending", file);
}

static void load(void) { pthread_once(&loaded, load_now); }

// Loaded before the program runs; load() stays in every wrapper for calls made by other
// libraries' constructors that run before this one.
__attribute__((constructor)) static void load_at_start(void) { load(); }

// The library-relative part of the absolute path `full`, or NULL when it lies outside the folder.
static const char *inside(const char *full) {
    if (log_fd < 0 || strncmp(full, log_root, log_root_len) != 0) return NULL;
    if (full[log_root_len] == 0) return full + log_root_len;
    if (full[log_root_len] == '/') return full + log_root_len + 1;
    return NULL;
}

// `path` (relative to `dirfd`) made absolute, its folder resolved and its last component kept
// (a link is named, not followed). Returns the library-relative part, or NULL.
static const char *resolve(int dirfd, const char *path, char out[PATH_MAX]) {
    if (log_fd < 0 || !path) return NULL;
    char full[PATH_MAX];
    if (path[0] == '/') snprintf(full, PATH_MAX, "%s", path);
    else {
        char base[PATH_MAX];
        if (dirfd == AT_FDCWD) {
            if (!getcwd(base, sizeof base)) return NULL;
        } else {
            char link[64];
            snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
            ssize_t n = readlink(link, base, sizeof base - 1);
            if (n <= 0) return NULL;
            base[n] = 0;
        }
        snprintf(full, PATH_MAX, "%s/%s", base, path);
    }
    size_t len = strlen(full);
    while (len > 1 && full[len - 1] == '/') full[--len] = 0;
    char *slash = strrchr(full, '/');
    if (!slash) return NULL;
    *slash = 0;
    char folder[PATH_MAX];
    if (!realpath(slash == full ? "/" : full, folder)) snprintf(folder, sizeof folder, "%s", full);
    if (strcmp(slash + 1, ".") == 0 || strcmp(slash + 1, "..") == 0) return NULL;
    snprintf(out, PATH_MAX, "%s/%s", strcmp(folder, "/") == 0 ? "" : folder, slash + 1);
    return inside(out);
}

// Whether `fd` is a regular file or folder inside the library; its inode and kind, and (when
// `relative` is given, PATH_MAX bytes) its library-relative path.
static int tracked(int fd, ino_t *ino, int *is_dir, char *relative) {
    if (log_fd < 0 || fd < 0) return 0;
    struct stat st;
    if (fstat(fd, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))) return 0;
    char link[64], path[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0) return 0;
    path[n] = 0;
    const char *deleted = " (deleted)";
    size_t dl = strlen(deleted);
    if ((size_t)n > dl && strcmp(path + n - dl, deleted) == 0) path[n - dl] = 0;
    const char *inner = inside(path);
    if (!inner) return 0;
    if (relative) snprintf(relative, PATH_MAX, "%s", inner);
    *ino = st.st_ino;
    *is_dir = S_ISDIR(st.st_mode);
    return 1;
}

// Whether `fd` is a regular file inside the library, and its inode.
static int tracked_file(int fd, ino_t *ino) {
    int is_dir;
    return tracked(fd, ino, &is_dir, NULL) && !is_dir;
}

// Appends one record with a single write: the first `dlen` bytes of `iov` are its data. Called
// with log_lock held.
static void emit(char op, unsigned long long ino, long long offset, long long length,
                 const char *p1, const char *p2, const struct iovec *iov, int iovcnt, size_t dlen) {
    size_t l1 = p1 ? strlen(p1) : 0, l2 = p2 ? strlen(p2) + 1 : 0;
    char head[160];
    int hl = snprintf(head, sizeof head, "%c %llu %lld %lld %zu %zu\n", op, ino, offset, length, l1 + l2, dlen);
    size_t total = (size_t)hl + l1 + l2 + dlen;
    char *record = malloc(total);
    if (!record) fail("out of memory for a log record", NULL);
    char *at = record;
    memcpy(at, head, (size_t)hl); at += hl;
    if (l1) { memcpy(at, p1, l1); at += l1; }
    if (l2) { *at++ = 0; memcpy(at, p2, l2 - 1); at += l2 - 1; }
    size_t left = dlen;
    for (int i = 0; i < iovcnt && left > 0; i++) {
        size_t take = iov[i].iov_len < left ? iov[i].iov_len : left;
        memcpy(at, iov[i].iov_base, take); at += take; left -= take;
    }
    size_t done = 0;
    while (done < total) {
        ssize_t w = real_write(log_fd, record + done, total - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) fail("cannot write to CRASHLOG_FILE", strerror(errno));
        done += (size_t)w;
    }
    free(record);
}

// A record without data.
static void note(char op, unsigned long long ino, long long offset, long long length, const char *p1, const char *p2) {
    emit(op, ino, offset, length, p1, p2, NULL, 0, 0);
}

// ---- creating and truncating through open ----

static int logged_open(int dirfd, const char *path, int flags, mode_t mode) {
    load();
    char full[PATH_MAX];
    const char *relative = (flags & (O_CREAT | O_TRUNC | __O_TMPFILE)) ? resolve(dirfd, path, full) : NULL;
    if (!relative) return real_openat(dirfd, path, flags, mode);
    int saved = errno;
    pthread_mutex_lock(&log_lock);
    struct stat before;
    int existed = lstat(full, &before) == 0;
    errno = saved;
    int fd = real_openat(dirfd, path, flags, mode);
    int code = errno;
    if (fd >= 0) {
        struct stat st;
        if ((flags & __O_TMPFILE) == __O_TMPFILE) note('?', 0, 0, 0, "O_TMPFILE", NULL);
        else if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
            if (!existed) note('C', st.st_ino, 0, 0, relative, NULL);
            else if (flags & O_TRUNC) note('T', st.st_ino, 0, 0, NULL, NULL);
        }
    }
    pthread_mutex_unlock(&log_lock);
    errno = code;
    return fd;
}

static mode_t mode_arg(int flags, va_list ap) {
    return (flags & (O_CREAT | __O_TMPFILE)) ? (mode_t)va_arg(ap, int) : 0;
}

int open(const char *path, int flags, ...) {
    va_list ap; va_start(ap, flags); mode_t mode = mode_arg(flags, ap); va_end(ap);
    return logged_open(AT_FDCWD, path, flags, mode);
}
int open64(const char *path, int flags, ...) {
    va_list ap; va_start(ap, flags); mode_t mode = mode_arg(flags, ap); va_end(ap);
    return logged_open(AT_FDCWD, path, flags, mode);
}
int openat(int dirfd, const char *path, int flags, ...) {
    va_list ap; va_start(ap, flags); mode_t mode = mode_arg(flags, ap); va_end(ap);
    return logged_open(dirfd, path, flags, mode);
}
int openat64(int dirfd, const char *path, int flags, ...) {
    va_list ap; va_start(ap, flags); mode_t mode = mode_arg(flags, ap); va_end(ap);
    return logged_open(dirfd, path, flags, mode);
}
int creat(const char *path, mode_t mode) { return logged_open(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode); }
int creat64(const char *path, mode_t mode) { return creat(path, mode); }

// ---- writing ----

// Where a write through `fd` lands: at `offset` for a positional write (-1: at the descriptor's
// position), except that with O_APPEND Linux appends whatever the offset.
static off_t landing(int fd, off_t offset) {
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0 && (flags & O_APPEND)) {
        struct stat st;
        return fstat(fd, &st) == 0 ? st.st_size : -1;
    }
    return offset >= 0 ? offset : lseek(fd, 0, SEEK_CUR);
}

// Writes `iov` to the library file `fd` (inode `ino`) at `offset` (-1: at its position) and logs
// what was written.
static ssize_t logged_write(int fd, ino_t ino, const struct iovec *iov, int count, off_t offset) {
    pthread_mutex_lock(&log_lock);
    off_t at = landing(fd, offset);
    ssize_t r = offset >= 0 ? real_pwritev(fd, iov, count, offset) : real_writev(fd, iov, count);
    int code = errno;
    if (r > 0) emit('W', ino, at, r, NULL, NULL, iov, count, (size_t)r);
    pthread_mutex_unlock(&log_lock);
    errno = code;
    return r;
}

// Descriptors that are not library files (the stop-signal pipe written from a signal handler
// among them) pass straight to the C library, without the lock.
ssize_t write(int fd, const void *buf, size_t len) {
    load();
    ino_t ino;
    if (!tracked_file(fd, &ino)) return real_write(fd, buf, len);
    struct iovec one = { (void *)buf, len };
    return logged_write(fd, ino, &one, 1, -1);
}
ssize_t pwrite(int fd, const void *buf, size_t len, off_t offset) {
    load();
    struct iovec one = { (void *)buf, len };
    ino_t ino;
    if (!tracked_file(fd, &ino)) return real_pwritev(fd, &one, 1, offset);
    return logged_write(fd, ino, &one, 1, offset);
}
ssize_t pwrite64(int fd, const void *buf, size_t len, off_t offset) { return pwrite(fd, buf, len, offset); }
ssize_t writev(int fd, const struct iovec *iov, int count) {
    load();
    ino_t ino;
    if (!tracked_file(fd, &ino)) return real_writev(fd, iov, count);
    return logged_write(fd, ino, iov, count, -1);
}
ssize_t pwritev(int fd, const struct iovec *iov, int count, off_t offset) {
    load();
    ino_t ino;
    if (!tracked_file(fd, &ino)) return real_pwritev(fd, iov, count, offset);
    return logged_write(fd, ino, iov, count, offset);
}
ssize_t pwritev64(int fd, const struct iovec *iov, int count, off_t offset) { return pwritev(fd, iov, count, offset); }

// A copy into a library file through the kernel cannot be replayed: it is logged as such.
static void unfollowable(int fd, const char *what) {
    ino_t ino;
    if (!tracked_file(fd, &ino)) return;
    pthread_mutex_lock(&log_lock);
    note('?', ino, 0, 0, what, NULL);
    pthread_mutex_unlock(&log_lock);
}
ssize_t copy_file_range(int in, off_t *in_off, int out, off_t *out_off, size_t len, unsigned int flags) {
    load();
    unfollowable(out, "copy_file_range");
    return real_copy_file_range(in, in_off, out, out_off, len, flags);
}
ssize_t sendfile(int out, int in, off_t *offset, size_t count) {
    load();
    unfollowable(out, "sendfile");
    return real_sendfile(out, in, offset, count);
}
ssize_t sendfile64(int out, int in, off_t *offset, size_t count) { return sendfile(out, in, offset, count); }

// ---- sizes ----

int ftruncate(int fd, off_t length) {
    load();
    ino_t ino;
    if (!tracked_file(fd, &ino)) return real_ftruncate(fd, length);
    pthread_mutex_lock(&log_lock);
    int r = real_ftruncate(fd, length);
    int code = errno;
    if (r == 0) note('T', ino, 0, length, NULL, NULL);
    pthread_mutex_unlock(&log_lock);
    errno = code;
    return r;
}
int ftruncate64(int fd, off_t length) { return ftruncate(fd, length); }

int truncate(const char *path, off_t length) {
    load();
    char full[PATH_MAX];
    if (!resolve(AT_FDCWD, path, full)) return real_truncate(path, length);
    pthread_mutex_lock(&log_lock);
    int r = real_truncate(path, length);
    int code = errno;
    struct stat st;
    if (r == 0 && stat(full, &st) == 0) note('T', st.st_ino, 0, length, NULL, NULL);
    pthread_mutex_unlock(&log_lock);
    errno = code;
    return r;
}
int truncate64(const char *path, off_t length) { return truncate(path, length); }

int fallocate(int fd, int mode, off_t offset, off_t length) {
    load();
    ino_t ino;
    if (!tracked_file(fd, &ino)) return real_fallocate(fd, mode, offset, length);
    pthread_mutex_lock(&log_lock);
    int r = real_fallocate(fd, mode, offset, length);
    int code = errno;
    if (r == 0) {
        if (mode == 0) note('A', ino, offset, length, NULL, NULL);
        else if (mode != FALLOC_FL_KEEP_SIZE) note('?', ino, 0, 0, "fallocate mode", NULL);
    }
    pthread_mutex_unlock(&log_lock);
    errno = code;
    return r;
}
int fallocate64(int fd, int mode, off_t offset, off_t length) { return fallocate(fd, mode, offset, length); }

int posix_fallocate(int fd, off_t offset, off_t length) {
    load();
    ino_t ino;
    if (!tracked_file(fd, &ino)) return real_posix_fallocate(fd, offset, length);
    pthread_mutex_lock(&log_lock);
    int r = real_posix_fallocate(fd, offset, length);
    if (r == 0) note('A', ino, offset, length, NULL, NULL);
    pthread_mutex_unlock(&log_lock);
    return r;
}
int posix_fallocate64(int fd, off_t offset, off_t length) { return posix_fallocate(fd, offset, length); }

// ---- syncing ----

static int logged_sync(int fd, int (*perform)(int)) {
    ino_t ino; int is_dir; char relative[PATH_MAX];
    if (!tracked(fd, &ino, &is_dir, relative)) return perform(fd);
    pthread_mutex_lock(&log_lock);
    int r = perform(fd);
    int code = errno;
    if (r == 0) {
        if (is_dir) note('D', ino, 0, 0, relative, NULL);
        else note('S', ino, 0, 0, NULL, NULL);
    }
    pthread_mutex_unlock(&log_lock);
    errno = code;
    return r;
}
int fsync(int fd) { load(); return logged_sync(fd, real_fsync); }
int fdatasync(int fd) { load(); return logged_sync(fd, real_fdatasync); }

// ---- names ----

int unlinkat(int dirfd, const char *path, int flags) {
    load();
    char full[PATH_MAX];
    const char *relative = resolve(dirfd, path, full);
    if (!relative) return real_unlinkat(dirfd, path, flags);
    pthread_mutex_lock(&log_lock);
    int r = real_unlinkat(dirfd, path, flags);
    int code = errno;
    if (r == 0) note((flags & AT_REMOVEDIR) ? 'X' : 'U', 0, 0, 0, relative, NULL);
    pthread_mutex_unlock(&log_lock);
    errno = code;
    return r;
}
int unlink(const char *path) { return unlinkat(AT_FDCWD, path, 0); }
int rmdir(const char *path) { return unlinkat(AT_FDCWD, path, AT_REMOVEDIR); }
int remove(const char *path) {
    load();
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode)) return rmdir(path);
    return unlink(path);
}

int renameat2(int fromfd, const char *from, int tofd, const char *to, unsigned int flags) {
    load();
    char full_from[PATH_MAX], full_to[PATH_MAX];
    const char *rel_from = resolve(fromfd, from, full_from), *rel_to = resolve(tofd, to, full_to);
    if (!rel_from && !rel_to) return real_renameat2(fromfd, from, tofd, to, flags);
    pthread_mutex_lock(&log_lock);
    int r = real_renameat2(fromfd, from, tofd, to, flags);
    int code = errno;
    if (r == 0) {
        if (flags & 2 /* RENAME_EXCHANGE */) note('?', 0, 0, 0, "RENAME_EXCHANGE", NULL);
        else if (rel_from && rel_to) note('R', 0, 0, 0, rel_from, rel_to);
        else if (rel_from) note('U', 0, 0, 0, rel_from, NULL);
        else note('?', 0, 0, 0, "a file moved in from outside", rel_to);
    }
    pthread_mutex_unlock(&log_lock);
    errno = code;
    return r;
}
int renameat(int fromfd, const char *from, int tofd, const char *to) { return renameat2(fromfd, from, tofd, to, 0); }
int rename(const char *from, const char *to) { return renameat2(AT_FDCWD, from, AT_FDCWD, to, 0); }

int linkat(int fromfd, const char *from, int tofd, const char *to, int flags) {
    load();
    char full_from[PATH_MAX], full_to[PATH_MAX];
    const char *rel_from = resolve(fromfd, from, full_from), *rel_to = resolve(tofd, to, full_to);
    if (!rel_to) return real_linkat(fromfd, from, tofd, to, flags);
    pthread_mutex_lock(&log_lock);
    int r = real_linkat(fromfd, from, tofd, to, flags);
    int code = errno;
    if (r == 0) {
        if (rel_from) note('L', 0, 0, 0, rel_from, rel_to);
        else note('?', 0, 0, 0, "a file linked in from outside", rel_to);
    }
    pthread_mutex_unlock(&log_lock);
    errno = code;
    return r;
}
int link(const char *from, const char *to) { return linkat(AT_FDCWD, from, AT_FDCWD, to, 0); }

int mkdirat(int dirfd, const char *path, mode_t mode) {
    load();
    char full[PATH_MAX];
    const char *relative = resolve(dirfd, path, full);
    if (!relative) return real_mkdirat(dirfd, path, mode);
    pthread_mutex_lock(&log_lock);
    int r = real_mkdirat(dirfd, path, mode);
    int code = errno;
    if (r == 0) note('M', 0, 0, 0, relative, NULL);
    pthread_mutex_unlock(&log_lock);
    errno = code;
    return r;
}
int mkdir(const char *path, mode_t mode) { return mkdirat(AT_FDCWD, path, mode); }
