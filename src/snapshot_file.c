/*
 * The durable snapshot file: write to a temporary file beside the target,
 * fsync, rename over it and fsync the directory, so a crash leaves either
 * the old snapshot or the new one, never half of one; and sweep the
 * temporaries a crash left behind.  The bytes come from snapshot.c.
 */
#include "snapshot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static bool write_fd(void *ctx, const void *buf, size_t len)
{
    int fd = *(const int *)ctx;
    const char *p = buf;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = ENOSPC;
            return false;
        }
        p += w;
        len -= (size_t)w;
    }
    return true;
}

/* The directory of path ("." for a bare name): malloc'ed, NULL on no memory. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (slash == NULL)
        return strdup(".");
    if (slash == path)
        return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

static uint64_t random64(void)
{
    uint64_t r;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) == (ssize_t)sizeof r)
        return r;
    /* Uniqueness, not secrecy: O_EXCL catches the rare collision. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_nsec * UINT64_C(0x9e3779b97f4a7c15) ^ (uint64_t)ts.tv_sec;
}

int snapshot_write(const char *path, const struct snapshot_meta *m, const struct filter *f,
                   struct pending *journal, uint64_t now)
{
    int err = 0, fd = -1;
    size_t tmplen = strlen(path) + 64;
    char *tmp = malloc(tmplen), *dir = dir_of(path);
    if (tmp == NULL || dir == NULL) {
        err = ENOMEM;
        goto out;
    }
    for (int tries = 0; fd < 0 && tries < 8; tries++) {
        snprintf(tmp, tmplen, "%s.tmp.%ld.%016llx", path, (long)getpid(),
                 (unsigned long long)random64());
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST) {
            err = errno;
            goto out;           /* nothing created */
        }
    }
    if (fd < 0) {
        err = EEXIST;
        goto out;
    }
    err = snapshot_write_to(write_fd, &fd, m, f, journal, now);
    /* The data must be on disk before the name points at it. */
    if (err == 0 && fsync(fd) != 0)
        err = errno;
    if (close(fd) != 0 && err == 0)
        err = errno;
    fd = -1;
    if (err == 0 && rename(tmp, path) != 0)
        err = errno;
    if (err != 0) {
        unlink(tmp);
        goto out;
    }
    /* And the rename on disk before we say the snapshot is written. */
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || fsync(dfd) != 0)
        err = errno;
    if (dfd >= 0)
        close(dfd);
out:
    free(tmp);
    free(dir);
    return err;
}

/* Whether name is base + ".tmp." + digits + "." + 16 hex digits. */
static bool is_temp_of(const char *name, const char *base)
{
    size_t bl = strlen(base);
    if (strncmp(name, base, bl) != 0 || strncmp(name + bl, ".tmp.", 5) != 0)
        return false;
    const char *p = name + bl + 5;
    if (*p < '0' || *p > '9')
        return false;
    while (*p >= '0' && *p <= '9')
        p++;
    if (*p++ != '.')
        return false;
    size_t hex = strspn(p, "0123456789abcdef");
    return hex == 16 && p[16] == '\0';
}

int snapshot_clean_temps(const char *path)
{
    char *dir = dir_of(path);
    if (dir == NULL) {
        errno = ENOMEM;
        return -1;
    }
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    DIR *d = opendir(dir);
    free(dir);
    if (d == NULL)
        return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (is_temp_of(de->d_name, base) && unlinkat(dirfd(d), de->d_name, 0) == 0)
            n++;
    closedir(d);
    return n;
}
