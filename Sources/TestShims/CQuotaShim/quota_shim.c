// See include/quota_shim.h. Test support only: never linked into Tapedeck itself.
#define _GNU_SOURCE
#include "quota_shim.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static long long quota_free = -1; // bytes left; negative: the shim is off
static char quota_dir[PATH_MAX];
static size_t quota_dir_len;
static char quota_log[PATH_MAX];
static int quota_logged;
static pthread_mutex_t quota_lock = PTHREAD_MUTEX_INITIALIZER;

static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static int (*real_fallocate)(int, int, off_t, off_t);
static int (*real_posix_fallocate)(int, off_t, off_t);
static int (*real_ftruncate)(int, off_t);
static int (*real_truncate)(const char *, off_t);
static int (*real_unlink)(const char *);
static int (*real_unlinkat)(int, const char *, int);
static int (*real_rename)(const char *, const char *);
static int (*real_renameat)(int, const char *, int, const char *);

__attribute__((constructor)) static void quota_init(void) {
    real_write = dlsym(RTLD_NEXT, "write");
    real_pwrite = dlsym(RTLD_NEXT, "pwrite64");
    real_writev = dlsym(RTLD_NEXT, "writev");
    real_fallocate = dlsym(RTLD_NEXT, "fallocate64");
    real_posix_fallocate = dlsym(RTLD_NEXT, "posix_fallocate64");
    real_ftruncate = dlsym(RTLD_NEXT, "ftruncate64");
    real_truncate = dlsym(RTLD_NEXT, "truncate64");
    real_unlink = dlsym(RTLD_NEXT, "unlink");
    real_unlinkat = dlsym(RTLD_NEXT, "unlinkat");
    real_rename = dlsym(RTLD_NEXT, "rename");
    real_renameat = dlsym(RTLD_NEXT, "renameat");
    const char *bytes = getenv("QUOTA_SHIM_BYTES"), *dir = getenv("QUOTA_SHIM_DIR"), *log = getenv("QUOTA_SHIM_LOG");
    if (!bytes || !dir) return;
    if (!realpath(dir, quota_dir)) snprintf(quota_dir, sizeof quota_dir, "%s", dir);
    quota_dir_len = strlen(quota_dir);
    if (log) snprintf(quota_log, sizeof quota_log, "%s", log);
    quota_free = atoll(bytes);
}

// Whether `path` lies inside the quota folder.
static int path_counted(const char *path) {
    return strncmp(path, quota_dir, quota_dir_len) == 0 && path[quota_dir_len] == '/';
}

// Whether `fd` is a regular file inside the quota folder; its size in *size.
static int fd_counted(int fd, off_t *size) {
    if (quota_free < 0) return 0;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    char link[64], path[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0) return 0;
    path[n] = 0;
    *size = st.st_size;
    return path_counted(path);
}

// The size of the regular file at `path` if it is counted and removing it frees its bytes.
static off_t path_freed(int dirfd, const char *path) {
    if (quota_free < 0) return 0;
    char full[PATH_MAX];
    if (path[0] == '/' || dirfd == AT_FDCWD) {
        if (path[0] == '/') snprintf(full, sizeof full, "%s", path);
        else {
            char cwd[PATH_MAX];
            if (!getcwd(cwd, sizeof cwd)) return 0;
            snprintf(full, sizeof full, "%s/%s", cwd, path);
        }
    } else {
        char link[64], dir[PATH_MAX];
        snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
        ssize_t n = readlink(link, dir, sizeof dir - 1);
        if (n <= 0) return 0;
        dir[n] = 0;
        snprintf(full, sizeof full, "%s/%s", dir, path);
    }
    struct stat st;
    if (!path_counted(full) || lstat(full, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) return 0;
    return st.st_size;
}

static void note_refusal(void) {
    if (quota_logged || !quota_log[0]) return;
    quota_logged = 1;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    char line[64];
    int len = snprintf(line, sizeof line, "first-enospc %lld\n", (long long)now.tv_sec * 1000000000LL + now.tv_nsec);
    int fd = open(quota_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
        real_write(fd, line, (size_t)len);
        close(fd);
    }
}

// How many of `len` bytes at `offset` of a file of `size` fit; takes their space. Lock held.
static size_t admit(off_t size, off_t offset, size_t len) {
    off_t end = offset + (off_t)len;
    if (end <= size) return len;
    off_t growth = end - (offset > size ? offset : size);
    if (growth <= quota_free) {
        quota_free -= growth;
        return len;
    }
    off_t fits_end = (offset > size ? offset : size) + quota_free;
    size_t fits = fits_end > offset ? (size_t)(fits_end - offset) : 0;
    quota_free = 0;
    return fits;
}

// One write through the quota: admits what fits of `len` bytes at `offset` (the descriptor's
// cursor, or its end for O_APPEND, when `offset` is negative) and lets `perform` write that many,
// holding the lock throughout so sizes cannot change between the check and the write.
typedef ssize_t (*perform_fn)(int fd, size_t fits, const void *context);

static ssize_t guarded(int fd, off_t size, off_t offset, size_t len, perform_fn perform, const void *context) {
    pthread_mutex_lock(&quota_lock);
    if (offset < 0) offset = (fcntl(fd, F_GETFL) & O_APPEND) ? size : lseek(fd, 0, SEEK_CUR);
    size_t fits = admit(size, offset, len);
    ssize_t r;
    if (len > 0 && fits == 0) {
        note_refusal();
        errno = ENOSPC;
        r = -1;
    } else {
        r = perform(fd, fits, context);
    }
    pthread_mutex_unlock(&quota_lock);
    return r;
}

struct plain { const void *buf; off_t offset; };

static ssize_t perform_write(int fd, size_t fits, const void *context) {
    return real_write(fd, ((const struct plain *)context)->buf, fits);
}

static ssize_t perform_pwrite(int fd, size_t fits, const void *context) {
    const struct plain *p = context;
    return real_pwrite(fd, p->buf, fits, p->offset);
}

struct vector { const struct iovec *iov; int count; };

static ssize_t perform_writev(int fd, size_t fits, const void *context) {
    const struct vector *v = context;
    struct iovec cut[1024];
    int n = 0;
    for (size_t left = fits; n < v->count && left > 0; n++) {
        cut[n] = v->iov[n];
        if (cut[n].iov_len > left) cut[n].iov_len = left;
        left -= cut[n].iov_len;
    }
    return real_writev(fd, cut, n);
}

ssize_t write(int fd, const void *buf, size_t len) {
    off_t size;
    if (!fd_counted(fd, &size)) return real_write(fd, buf, len);
    struct plain p = { buf, -1 };
    return guarded(fd, size, -1, len, perform_write, &p);
}

ssize_t pwrite(int fd, const void *buf, size_t len, off_t offset) {
    off_t size;
    if (!fd_counted(fd, &size) || offset < 0) return real_pwrite(fd, buf, len, offset);
    struct plain p = { buf, offset };
    return guarded(fd, size, offset, len, perform_pwrite, &p);
}

ssize_t pwrite64(int fd, const void *buf, size_t len, off_t offset) { return pwrite(fd, buf, len, offset); }

ssize_t writev(int fd, const struct iovec *iov, int count) {
    off_t size;
    if (!fd_counted(fd, &size) || count <= 0 || count > 1024) return real_writev(fd, iov, count);
    size_t total = 0;
    for (int i = 0; i < count; i++) total += iov[i].iov_len;
    struct vector v = { iov, count };
    return guarded(fd, size, -1, total, perform_writev, &v);
}

// Takes the space that allocating `len` bytes at `offset` of a file of `size` needs: 0, or
// ENOSPC when it does not fit (nothing taken). Lock held.
static int take_allocation(off_t size, off_t offset, off_t len) {
    off_t end = offset + len, growth = end > size ? end - size : 0;
    if (growth > quota_free) {
        note_refusal();
        return ENOSPC;
    }
    quota_free -= growth;
    return 0;
}

int posix_fallocate(int fd, off_t offset, off_t len) {
    off_t size;
    if (!fd_counted(fd, &size)) return real_posix_fallocate(fd, offset, len);
    pthread_mutex_lock(&quota_lock);
    int refused = take_allocation(size, offset, len);
    int r = refused ? refused : real_posix_fallocate(fd, offset, len);
    pthread_mutex_unlock(&quota_lock);
    return r;
}

int posix_fallocate64(int fd, off_t offset, off_t len) { return posix_fallocate(fd, offset, len); }

int fallocate(int fd, int mode, off_t offset, off_t len) {
    off_t size;
    if (!fd_counted(fd, &size) || mode != 0) return real_fallocate(fd, mode, offset, len);
    pthread_mutex_lock(&quota_lock);
    int refused = take_allocation(size, offset, len);
    int r = refused ? (errno = refused, -1) : real_fallocate(fd, mode, offset, len);
    pthread_mutex_unlock(&quota_lock);
    return r;
}

int fallocate64(int fd, int mode, off_t offset, off_t len) { return fallocate(fd, mode, offset, len); }

int ftruncate(int fd, off_t length) {
    off_t size;
    if (!fd_counted(fd, &size)) return real_ftruncate(fd, length);
    pthread_mutex_lock(&quota_lock);
    int r = real_ftruncate(fd, length);
    if (r == 0 && length < size) quota_free += size - length;
    pthread_mutex_unlock(&quota_lock);
    return r;
}

int ftruncate64(int fd, off_t length) { return ftruncate(fd, length); }

int truncate(const char *path, off_t length) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return real_truncate(path, length);
    int r = ftruncate(fd, length);
    int saved = errno;
    close(fd);
    errno = saved;
    return r;
}

int truncate64(const char *path, off_t length) { return truncate(path, length); }

int unlink(const char *path) {
    pthread_mutex_lock(&quota_lock);
    off_t freed = path_freed(AT_FDCWD, path);
    int r = real_unlink(path);
    if (r == 0) quota_free += freed;
    pthread_mutex_unlock(&quota_lock);
    return r;
}

int unlinkat(int dirfd, const char *path, int flags) {
    pthread_mutex_lock(&quota_lock);
    off_t freed = (flags & AT_REMOVEDIR) ? 0 : path_freed(dirfd, path);
    int r = real_unlinkat(dirfd, path, flags);
    if (r == 0) quota_free += freed;
    pthread_mutex_unlock(&quota_lock);
    return r;
}

int rename(const char *from, const char *to) {
    pthread_mutex_lock(&quota_lock);
    off_t freed = path_freed(AT_FDCWD, to);
    int r = real_rename(from, to);
    if (r == 0) quota_free += freed;
    pthread_mutex_unlock(&quota_lock);
    return r;
}

int renameat(int fromfd, const char *from, int tofd, const char *to) {
    pthread_mutex_lock(&quota_lock);
    off_t freed = path_freed(tofd, to);
    int r = real_renameat(fromfd, from, tofd, to);
    if (r == 0) quota_free += freed;
    pthread_mutex_unlock(&quota_lock);
    return r;
}

// The free space statvfs reports inside the quota folder is what the quota leaves, so a program
// that looks before it writes (an export refused for want of room) sees the same disk its writes meet.
#include <sys/statvfs.h>
static int (*real_statvfs)(const char *, struct statvfs *);

static void quota_statvfs(const char *path, struct statvfs *info) {
    if (quota_free < 0) return;
    char resolved[PATH_MAX];
    const char *full = realpath(path, resolved) ? resolved : path;
    if (!(path_counted(full) || strcmp(full, quota_dir) == 0) || info->f_frsize == 0) return;
    pthread_mutex_lock(&quota_lock);
    unsigned long long blocks = (unsigned long long)(quota_free > 0 ? quota_free : 0) / info->f_frsize;
    pthread_mutex_unlock(&quota_lock);
    if (blocks < info->f_bavail) info->f_bavail = blocks;
    if (blocks < info->f_bfree) info->f_bfree = blocks;
}

int statvfs(const char *path, struct statvfs *info) {
    if (!real_statvfs) real_statvfs = dlsym(RTLD_NEXT, "statvfs");
    int result = real_statvfs(path, info);
    if (result == 0) quota_statvfs(path, info);
    return result;
}

int statvfs64(const char *path, struct statvfs64 *info) { return statvfs(path, (struct statvfs *)info); }
