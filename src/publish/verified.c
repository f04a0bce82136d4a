/*
 * The verified-absent set's published file (verified.h): made anew under a
 * random temporary name, as publish.c makes each generation (whoever
 * opened the file first could write the daemon's own memory), then renamed
 * into place.
 */
#include "verified.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pubfmt.h"

struct verified {
    int fd;
    void *map;
    size_t map_len;
    char *path;
};

struct verified *verified_new(const char *dir, const char *path, const char *name,
                              uint64_t instance, const uint8_t boot_id[16], unsigned mode,
                              gid_t gid, size_t bytes, const struct log *lg)
{
    struct verified *v = calloc(1, sizeof *v);
    char tmp[4096];
    uint64_t rnd[2];
    int e = 0;
    if (v == NULL || (v->path = strdup(path)) == NULL) {
        free(v);
        log_warn(lg, "%s: no memory to publish the verified-absent set", name);
        return NULL;
    }
    v->fd = -1;
    v->map = MAP_FAILED;
    v->map_len = PUBFMT_HEADER_BYTES + (bytes + PUBFMT_ALIGN - 1) / PUBFMT_ALIGN * PUBFMT_ALIGN;
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        goto fail;
    snprintf(tmp, sizeof tmp, "%s/.%s.%016llx%016llx.tmp", dir, name,
             (unsigned long long)rnd[0], (unsigned long long)rnd[1]);
    v->fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (v->fd < 0 || (gid != (gid_t)-1 && fchown(v->fd, (uid_t)-1, gid) != 0)
        || fchmod(v->fd, mode) != 0 || (e = posix_fallocate(v->fd, 0, (off_t)v->map_len)) != 0)
        goto fail_tmp;
    v->map = mmap(NULL, v->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, v->fd, 0);
    if (v->map == MAP_FAILED)
        goto fail_tmp;
    struct pubfmt_vset_header *h = v->map;
    memcpy(h->magic, PUBFMT_VSET_MAGIC, 8);
    h->version = PUBFMT_VSET_VERSION;
    h->header_bytes = PUBFMT_HEADER_BYTES;
    h->byte_order = PUBFMT_BYTE_ORDER;
    h->instance = instance;
    memcpy(h->boot_id, boot_id, 16);
    h->set_offset = PUBFMT_HEADER_BYTES;
    h->set_bytes = bytes;
    h->pid = (uint32_t)getpid();
    snprintf(h->name, sizeof h->name, "%s", name);
    /* The set starts empty (vset_make); a reader mapping it now denies nothing yet. */
    if (rename(tmp, path) != 0)
        goto fail_tmp;
    return v;
fail_tmp:
    e = e ? e : errno;
    if (v->fd >= 0)
        unlink(tmp);
fail:
    e = e ? e : errno;
    log_warn(lg, "%s: cannot publish the verified-absent set in %s: %s; readers of the "
             "published filter do not deny its IDs (the daemon does)", name, dir, strerror(e));
    if (v->map != MAP_FAILED)
        munmap(v->map, v->map_len);
    if (v->fd >= 0)
        close(v->fd);
    free(v->path);
    free(v);
    return NULL;
}

void *verified_memory(struct verified *v)
{
    return (char *)v->map + PUBFMT_HEADER_BYTES;
}

void verified_free(struct verified *v)
{
    if (v == NULL)
        return;
    struct stat at, mine;
    if (stat(v->path, &at) == 0 && fstat(v->fd, &mine) == 0 && at.st_ino == mine.st_ino
        && at.st_dev == mine.st_dev)
        unlink(v->path);
    munmap(v->map, v->map_len);
    close(v->fd);
    free(v->path);
    free(v);
}
