/*
 * Crash-safe file replacement (contract in durable.h): the temporary-file,
 * fsync and rename steps the snapshot and the POST log both take, written
 * once so their crash behaviour and their temporaries' names agree.
 */
#include "durable.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

char *durable_dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (slash == NULL)
        return strdup(".");
    if (slash == path)
        return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

int durable_write_all(int fd, const void *buf, size_t len, uint64_t off)
{
    const unsigned char *p = buf;
    while (len > 0) {
        ssize_t w = pwrite(fd, p, len, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return errno;
        if (w == 0)
            return EIO;
        p += w;
        len -= (size_t)w;
        off += (uint64_t)w;
    }
    return 0;
}

int durable_read_all(int fd, void *buf, size_t len, size_t *got)
{
    *got = 0;
    while (*got < len) {
        ssize_t r = read(fd, (char *)buf + *got, len - *got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return errno;
        if (r == 0)
            break;
        *got += (size_t)r;
    }
    return 0;
}

int durable_sync_dir(const char *dir)
{
    int err = 0, dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || fsync(dfd) != 0)
        err = errno;
    if (dfd >= 0)
        close(dfd);
    return err;
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

int durable_temp_open(const char *path, char *tmp, size_t tmplen, int *err)
{
    for (int tries = 0; tries < 8; tries++) {
        snprintf(tmp, tmplen, "%s.tmp.%ld.%016llx", path, (long)getpid(),
                 (unsigned long long)random64());
        int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd >= 0)
            return fd;
        if (errno != EEXIST) {
            *err = errno;
            return -1;
        }
    }
    *err = EEXIST;
    return -1;
}

int durable_install(const char *tmp, const char *path, const char *dir)
{
    if (rename(tmp, path) != 0) {
        int err = errno;
        unlink(tmp);
        return err;
    }
    return durable_sync_dir(dir);
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

int durable_clean_temps(const char *path)
{
    char *dir = durable_dir_of(path);
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
