/*
 * The POST log's file format: building records, and reading, checking and
 * repairing a file at open (contract in postlog_file.h).  The group commit
 * and rewrites, above it, are postlog.c.
 *
 * The file: a 16-byte header ("bgpostlg", version, 0), then records:
 *
 *   u32 body_len  u32 count  body  u64 XXH64(everything before it in the record)
 *   body = count x { u64 expires (unix seconds)  u32 len  len bytes of ID }
 *
 * little-endian.  Each append is one or more records; a record is never
 * acknowledged before an fdatasync that followed its write, so a record that
 * is bad at the end of the file is the remains of an append no one was told
 * about, while a bad one followed by good ones is damage.
 */
#include "postlog_file.h"

#include "durable.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#define LOG_VERSION 1
#define SUM_SEED UINT64_C(0x62677073746c6f67)

static const unsigned char magic[8] = { 'b', 'g', 'p', 'o', 's', 't', 'l', 'g' };

/* ------------------------------------------------------------ encoding -- */

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint64_t get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

bool postlog_file_reserve(struct postlog_buf *b, size_t more)
{
    if (b->cap - b->len >= more)
        return true;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->len < more) {
        if (cap > SIZE_MAX / 2)
            return false;
        cap *= 2;
    }
    unsigned char *p = realloc(b->p, cap);
    if (p == NULL)
        return false;
    b->p = p;
    b->cap = cap;
    return true;
}

void postlog_file_header(unsigned char *h)
{
    memcpy(h, magic, sizeof magic);
    put32(h + 8, LOG_VERSION);
    put32(h + 12, 0);
}


void postlog_file_rec_close(struct postlog_rec *r)
{
    if (r->start == SIZE_MAX)
        return;
    unsigned char *s = r->b->p + r->start;
    size_t body = r->b->len - r->start - POSTLOG_REC_HEAD;
    put32(s, (uint32_t)body);
    put32(s + 4, r->count);
    put64(r->b->p + r->b->len, XXH64(s, POSTLOG_REC_HEAD + body, SUM_SEED));
    r->b->len += POSTLOG_REC_SUM;
    r->start = SIZE_MAX;
}

/* False on no memory (the buffer then holds a partial record: drop it). */
bool postlog_file_rec_add(struct postlog_rec *r, const char *id, size_t len, uint64_t expires)
{
    if (!postlog_file_reserve(r->b, POSTLOG_REC_HEAD + POSTLOG_ENTRY_HEAD + len + POSTLOG_REC_SUM))
        return false;
    if (r->start == SIZE_MAX) {
        r->start = r->b->len;
        r->count = 0;
        r->b->len += POSTLOG_REC_HEAD;
    }
    unsigned char *e = r->b->p + r->b->len;
    put64(e, expires);
    put32(e + 8, (uint32_t)len);
    memcpy(e + POSTLOG_ENTRY_HEAD, id, len);
    r->b->len += POSTLOG_ENTRY_HEAD + len;
    r->count++;
    if (r->b->len - r->start - POSTLOG_REC_HEAD >= POSTLOG_REC_BODY_MAX) {
        /* The checksum's room was reserved above. */
        postlog_file_rec_close(r);
    }
    return true;
}

/*
 * The length of the well-formed record at off (its checksum right, its
 * entries filling its body exactly), or 0.
 */
static size_t record_at(const unsigned char *d, size_t size, size_t off)
{
    if (size - off < POSTLOG_REC_HEAD + POSTLOG_REC_SUM)
        return 0;
    uint32_t body = get32(d + off), count = get32(d + off + 4);
    if (count == 0 || body > size - off - POSTLOG_REC_HEAD - POSTLOG_REC_SUM
        || (uint64_t)count * POSTLOG_ENTRY_HEAD > body)
        return 0;
    size_t q = off + POSTLOG_REC_HEAD, end = q + body;
    for (uint32_t i = 0; i < count; i++) {
        if (end - q < POSTLOG_ENTRY_HEAD)
            return 0;
        uint32_t len = get32(d + q + 8);
        if (len > POSTLOG_MAX_ID_LEN || end - q - POSTLOG_ENTRY_HEAD < len)
            return 0;
        q += POSTLOG_ENTRY_HEAD + len;
    }
    if (q != end || XXH64(d + off, POSTLOG_REC_HEAD + body, SUM_SEED) != get64(d + end))
        return 0;
    return POSTLOG_REC_HEAD + body + POSTLOG_REC_SUM;
}

/* ------------------------------------------------------------- files -- */

/*
 * A new file beside path (path + ".tmp.<pid>.<16 hex>", the names
 * snapshot_clean_temps removes after a crash) holding data: created, written
 * and fsync'ed.  Returns its descriptor (the name in tmp), or -1 with the
 * errno value in *err and nothing left behind.
 */
int postlog_file_temp(const char *path, const unsigned char *data, size_t len, char *tmp,
                      size_t tmplen, int *err)
{
    int fd = durable_temp_open(path, tmp, tmplen, err);
    if (fd < 0)
        return -1;
    *err = durable_write_all(fd, data, len, 0);
    if (*err == 0 && fsync(fd) != 0)
        *err = errno;
    if (*err != 0) {
        close(fd);
        unlink(tmp);
        return -1;
    }
    return fd;
}

/* ------------------------------------------------------------ opening -- */

/*
 * Whether d (size bytes, size < POSTLOG_HEADER_LEN) is what a creation cut short
 * can leave: nothing, or the start of a header.
 */
static bool header_prefix(const unsigned char *d, size_t size)
{
    unsigned char h[POSTLOG_HEADER_LEN];
    postlog_file_header(h);
    return size == 0 || memcmp(d, h, size) == 0;
}

/* Give the entries of the well-formed records in [POSTLOG_HEADER_LEN, end) to each. */
static bool replay(const unsigned char *d, size_t end, uint64_t now, uint64_t ttl,
                   postlog_entry_fn each, void *ctx, struct postlog_opened *r, uint64_t *live)
{
    size_t off = POSTLOG_HEADER_LEN;
    while (off < end) {
        uint32_t body = get32(d + off), count = get32(d + off + 4);
        size_t q = off + POSTLOG_REC_HEAD;
        for (uint32_t i = 0; i < count; i++) {
            uint64_t expires = get64(d + q);
            uint32_t len = get32(d + q + 8);
            if (expires > now) {
                uint64_t left = expires - now;
                if (left > ttl)
                    left = ttl;
                if (!each(ctx, (const char *)d + q + POSTLOG_ENTRY_HEAD, len, left))
                    return false;
                r->entries++;
                *live += POSTLOG_ENTRY_HEAD + len;
            } else {
                r->expired++;
            }
            q += POSTLOG_ENTRY_HEAD + len;
        }
        off += POSTLOG_REC_HEAD + body + POSTLOG_REC_SUM;
    }
    return true;
}

/*
 * Read the file on fd (size bytes), give its entries to each, and repair
 * it: cut a torn tail, or set a damaged file aside and put its good prefix
 * in its place (then *fd is the new file's).  0, or an errno value with
 * r->why.
 */
int postlog_file_load(const char *path, const char *dir, int *fd, uint64_t size, uint64_t now,
                      uint64_t ttl, postlog_entry_fn each, void *ctx, struct postlog_opened *r,
                      uint64_t *live_bytes)
{
    int err = 0;
    unsigned char *d = NULL;
    uint64_t live = POSTLOG_HEADER_LEN;
    if (size > SIZE_MAX) {
        snprintf(r->why, sizeof r->why, "too large to read (%llu bytes)", (unsigned long long)size);
        return EFBIG;
    }
    if (size > 0) {
        d = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, *fd, 0);
        if (d == MAP_FAILED) {
            err = errno;
            snprintf(r->why, sizeof r->why, "cannot read it: %s", strerror(err));
            return err;
        }
    }
    if (size < POSTLOG_HEADER_LEN) {
        if (!header_prefix(d, (size_t)size)) {
            snprintf(r->why, sizeof r->why, "not a bloomguard POST log (%llu bytes, no header)",
                     (unsigned long long)size);
            err = EINVAL;
            goto out;
        }
        /* A creation cut short: start over with a header. */
        unsigned char h[POSTLOG_HEADER_LEN];
        postlog_file_header(h);
        if ((err = durable_write_all(*fd, h, sizeof h, 0)) != 0 || fdatasync(*fd) != 0) {
            err = err ? err : errno;
            snprintf(r->why, sizeof r->why, "cannot write its header: %s", strerror(err));
            goto out;
        }
        r->created = size == 0;
        r->torn_bytes = size;
        goto out;
    }
    if (memcmp(d, magic, sizeof magic) != 0) {
        snprintf(r->why, sizeof r->why, "not a bloomguard POST log (no \"bgpostlg\" header)");
        err = EINVAL;
        goto out;
    }
    if (get32(d + 8) != LOG_VERSION) {
        snprintf(r->why, sizeof r->why, "a POST log of format version %u (this bloomguard reads %u)",
                 get32(d + 8), LOG_VERSION);
        err = EINVAL;
        goto out;
    }
    size_t off = POSTLOG_HEADER_LEN, n;
    while (off < size && (n = record_at(d, (size_t)size, off)) > 0)
        off += n;
    size_t good = off;
    /* Is there a good record after the bad one?  Then it is damage, not a torn append. */
    for (size_t p = good + 1;
         good < size && p + POSTLOG_REC_HEAD + POSTLOG_REC_SUM <= size && !r->corrupt; p++)
        if (record_at(d, (size_t)size, p) > 0)
            r->corrupt = true;
    if (!replay(d, good, now, ttl, each, ctx, r, &live)) {
        snprintf(r->why, sizeof r->why, "the caller refused an entry");
        err = ECANCELED;
        goto out;
    }
    if (r->corrupt) {
        char *aside = NULL, *tmp = NULL;
        size_t tl = strlen(path) + DURABLE_TEMP_EXTRA;
        r->corrupt_offset = good;
        r->lost_bytes = size - good;
        snprintf(r->why, sizeof r->why, "a damaged record at byte %zu of %llu, with good ones "
                 "after it: %llu bytes from there are dropped", good, (unsigned long long)size,
                 (unsigned long long)r->lost_bytes);
        if ((aside = malloc(tl)) == NULL || (tmp = malloc(tl)) == NULL) {
            err = ENOMEM;
        } else {
            /* Kept for a post-mortem: a hard link, so it costs no copy. */
            snprintf(aside, tl, "%s.corrupt", path);
            unlink(aside);
            if (link(path, aside) != 0) {
                /* Best effort: a file system without hard links keeps no copy. */
            }
            int nfd = postlog_file_temp(path, d, good, tmp, tl, &err);
            if (nfd >= 0 && (err = durable_install(tmp, path, dir)) == 0) {
                close(*fd);
                *fd = nfd;
            } else if (nfd >= 0) {
                close(nfd);
            }
        }
        if (err != 0)
            snprintf(r->why, sizeof r->why, "a damaged record at byte %zu, and the repaired "
                     "file cannot be written: %s", good, strerror(err));
        free(aside);
        free(tmp);
    } else if (good < size) {
        r->torn_bytes = size - good;
        if (ftruncate(*fd, (off_t)good) != 0 || fdatasync(*fd) != 0) {
            err = errno;
            snprintf(r->why, sizeof r->why, "cannot cut off an incomplete last append: %s",
                     strerror(err));
        }
    }
    *live_bytes = live;
out:
    if (d != NULL)
        munmap(d, (size_t)size);
    return err;
}
