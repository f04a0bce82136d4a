/*
 * The POST log's file format, its group commit and its rewrite.  See
 * postlog.h for the contract.
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
#include "postlog.h"

#include "durable.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#define HEADER_LEN 16
#define REC_HEAD 8              /* body_len, count */
#define REC_SUM 8
#define ENTRY_HEAD 12           /* expires, len */
#define MAX_ID_LEN 65536        /* CONFIG_MAX_ID_BYTES: longer is damage */
#define REC_BODY_MAX (1u << 20) /* a record is closed once its body passes this */
#define SUM_SEED UINT64_C(0x62677073746c6f67)
#define DEFAULT_FLOOR (UINT64_C(1) << 20)
#define RETRY_SECONDS 1         /* between rewrites of a broken log */

static const unsigned char magic[8] = { 'b', 'g', 'p', 'o', 's', 't', 'l', 'g' };
#define LOG_VERSION 1

/* An append waiting for its batch: done is called once it is on disk or failed. */
struct waiter {
    struct waiter *next;
    postlog_done_fn done;
    void *arg;
    bool heap;                  /* postlog_submit's: freed after done */
};

struct buf {
    unsigned char *p;
    size_t len, cap;
};

struct postlog {
    char *path, *dir;
    struct postlog_opts o;
    pthread_mutex_t mu;
    pthread_cond_t work;        /* the writer: a batch to write, the swap over, or stop */
    pthread_cond_t idle;        /* a rewrite: the writer between batches */
    pthread_cond_t cwork;       /* the rewriting thread: a rewrite wanted, or stop */
    pthread_mutex_t compact_mu; /* one rewrite at a time */
    /* Under mu. */
    int fd;
    uint64_t end;               /* bytes written and synced */
    struct buf fill;            /* the next batch's records */
    struct buf spare;           /* the last batch's buffer, reused */
    struct waiter *head, **tail;
    bool writing;               /* the writer is between taking a batch and finishing it */
    bool swap;                  /* a rewrite is swapping files: take no batch */
    bool compacting, compact_wanted;
    bool stop;
    struct postlog_info info;
    pthread_t writer, compactor;
};

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

static bool reserve(struct buf *b, size_t more)
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

static void header(unsigned char *h)
{
    memcpy(h, magic, sizeof magic);
    put32(h + 8, LOG_VERSION);
    put32(h + 12, 0);
}

/*
 * Records being built at the end of a buffer: rec_add starts one when none
 * is open and closes it once its body passes REC_BODY_MAX, so that no
 * record grows without bound (a record is read back in one piece).
 */
struct rec {
    struct buf *b;
    size_t start;               /* of the open record; SIZE_MAX: none */
    uint32_t count;
};

static void rec_close(struct rec *r)
{
    if (r->start == SIZE_MAX)
        return;
    unsigned char *s = r->b->p + r->start;
    size_t body = r->b->len - r->start - REC_HEAD;
    put32(s, (uint32_t)body);
    put32(s + 4, r->count);
    put64(r->b->p + r->b->len, XXH64(s, REC_HEAD + body, SUM_SEED));
    r->b->len += REC_SUM;
    r->start = SIZE_MAX;
}

/* False on no memory (the buffer then holds a partial record: drop it). */
static bool rec_add(struct rec *r, const char *id, size_t len, uint64_t expires)
{
    if (!reserve(r->b, REC_HEAD + ENTRY_HEAD + len + REC_SUM))
        return false;
    if (r->start == SIZE_MAX) {
        r->start = r->b->len;
        r->count = 0;
        r->b->len += REC_HEAD;
    }
    unsigned char *e = r->b->p + r->b->len;
    put64(e, expires);
    put32(e + 8, (uint32_t)len);
    memcpy(e + ENTRY_HEAD, id, len);
    r->b->len += ENTRY_HEAD + len;
    r->count++;
    if (r->b->len - r->start - REC_HEAD >= REC_BODY_MAX) {
        /* The checksum's room was reserved above. */
        rec_close(r);
    }
    return true;
}

/*
 * The length of the well-formed record at off (its checksum right, its
 * entries filling its body exactly), or 0.
 */
static size_t record_at(const unsigned char *d, size_t size, size_t off)
{
    if (size - off < REC_HEAD + REC_SUM)
        return 0;
    uint32_t body = get32(d + off), count = get32(d + off + 4);
    if (count == 0 || body > size - off - REC_HEAD - REC_SUM
        || (uint64_t)count * ENTRY_HEAD > body)
        return 0;
    size_t q = off + REC_HEAD, end = q + body;
    for (uint32_t i = 0; i < count; i++) {
        if (end - q < ENTRY_HEAD)
            return 0;
        uint32_t len = get32(d + q + 8);
        if (len > MAX_ID_LEN || end - q - ENTRY_HEAD < len)
            return 0;
        q += ENTRY_HEAD + len;
    }
    if (q != end || XXH64(d + off, REC_HEAD + body, SUM_SEED) != get64(d + end))
        return 0;
    return REC_HEAD + body + REC_SUM;
}

/* ------------------------------------------------------------- files -- */

static uint64_t wall(const struct postlog *log)
{
    if (log->o.clock)
        return log->o.clock(log->o.clock_ctx);
    return (uint64_t)time(NULL);
}

/*
 * A new file beside path (path + ".tmp.<pid>.<16 hex>", the names
 * snapshot_clean_temps removes after a crash) holding data: created, written
 * and fsync'ed.  Returns its descriptor (the name in tmp), or -1 with the
 * errno value in *err and nothing left behind.
 */
static int temp_file(const char *path, const unsigned char *data, size_t len, char *tmp,
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
 * Whether d (size bytes, size < HEADER_LEN) is what a creation cut short
 * can leave: nothing, or the start of a header.
 */
static bool header_prefix(const unsigned char *d, size_t size)
{
    unsigned char h[HEADER_LEN];
    header(h);
    return size == 0 || memcmp(d, h, size) == 0;
}

/* Give the entries of the well-formed records in [HEADER_LEN, end) to each. */
static bool replay(const struct postlog *log, const unsigned char *d, size_t end,
                   postlog_entry_fn each, void *ctx, struct postlog_opened *r, uint64_t *live)
{
    uint64_t now = wall(log);
    size_t off = HEADER_LEN;
    while (off < end) {
        uint32_t body = get32(d + off), count = get32(d + off + 4);
        size_t q = off + REC_HEAD;
        for (uint32_t i = 0; i < count; i++) {
            uint64_t expires = get64(d + q);
            uint32_t len = get32(d + q + 8);
            if (expires > now) {
                uint64_t left = expires - now;
                if (left > log->o.ttl)
                    left = log->o.ttl;
                if (!each(ctx, (const char *)d + q + ENTRY_HEAD, len, left))
                    return false;
                r->entries++;
                *live += ENTRY_HEAD + len;
            } else {
                r->expired++;
            }
            q += ENTRY_HEAD + len;
        }
        off += REC_HEAD + body + REC_SUM;
    }
    return true;
}

/*
 * Read the file on fd (size bytes), give its entries to each, and repair
 * it: cut a torn tail, or set a damaged file aside and put its good prefix
 * in its place (then *fd is the new file's).  0, or an errno value with
 * r->why.
 */
static int load(struct postlog *log, int *fd, uint64_t size, postlog_entry_fn each, void *ctx,
                struct postlog_opened *r)
{
    int err = 0;
    unsigned char *d = NULL;
    uint64_t live = HEADER_LEN;
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
    if (size < HEADER_LEN) {
        if (!header_prefix(d, (size_t)size)) {
            snprintf(r->why, sizeof r->why, "not a bloomguard POST log (%llu bytes, no header)",
                     (unsigned long long)size);
            err = EINVAL;
            goto out;
        }
        /* A creation cut short: start over with a header. */
        unsigned char h[HEADER_LEN];
        header(h);
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
    size_t off = HEADER_LEN, n;
    while (off < size && (n = record_at(d, (size_t)size, off)) > 0)
        off += n;
    size_t good = off;
    /* Is there a good record after the bad one?  Then it is damage, not a torn append. */
    for (size_t p = good + 1; good < size && p + REC_HEAD + REC_SUM <= size && !r->corrupt; p++)
        if (record_at(d, (size_t)size, p) > 0)
            r->corrupt = true;
    if (!replay(log, d, good, each, ctx, r, &live)) {
        snprintf(r->why, sizeof r->why, "the caller refused an entry");
        err = ECANCELED;
        goto out;
    }
    if (r->corrupt) {
        char *aside = NULL, *tmp = NULL;
        size_t tl = strlen(log->path) + DURABLE_TEMP_EXTRA;
        r->corrupt_offset = good;
        r->lost_bytes = size - good;
        snprintf(r->why, sizeof r->why, "a damaged record at byte %zu of %llu, with good ones "
                 "after it: %llu bytes from there are dropped", good, (unsigned long long)size,
                 (unsigned long long)r->lost_bytes);
        if ((aside = malloc(tl)) == NULL || (tmp = malloc(tl)) == NULL) {
            err = ENOMEM;
        } else {
            /* Kept for a post-mortem: a hard link, so it costs no copy. */
            snprintf(aside, tl, "%s.corrupt", log->path);
            unlink(aside);
            if (link(log->path, aside) != 0) {
                /* Best effort: a file system without hard links keeps no copy. */
            }
            int nfd = temp_file(log->path, d, good, tmp, tl, &err);
            if (nfd >= 0 && (err = durable_install(tmp, log->path, log->dir)) == 0) {
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
    log->info.live_bytes = live;
out:
    if (d != NULL)
        munmap(d, (size_t)size);
    return err;
}

/* --------------------------------------------------------- the threads -- */

static void *writer_main(void *arg);
static void *compactor_main(void *arg);

static void postlog_destroy(struct postlog *log)
{
    pthread_mutex_destroy(&log->mu);
    pthread_mutex_destroy(&log->compact_mu);
    pthread_cond_destroy(&log->work);
    pthread_cond_destroy(&log->idle);
    pthread_cond_destroy(&log->cwork);
    if (log->fd >= 0)
        close(log->fd);
    free(log->fill.p);
    free(log->spare.p);
    free(log->path);
    free(log->dir);
    free(log);
}

struct postlog *postlog_open(const char *path, const struct postlog_opts *o, postlog_entry_fn each,
                             void *ctx, struct postlog_opened *r)
{
    int err = 0;
    memset(r, 0, sizeof *r);
    struct postlog *log = calloc(1, sizeof *log);
    if (log == NULL || (log->path = strdup(path)) == NULL || (log->dir = durable_dir_of(path)) == NULL) {
        if (log != NULL) {
            free(log->path);
            free(log);
        }
        snprintf(r->why, sizeof r->why, "out of memory");
        errno = ENOMEM;
        return NULL;
    }
    log->o = *o;
    if (log->o.compact_floor == 0)
        log->o.compact_floor = DEFAULT_FLOOR;
    log->fd = -1;
    log->tail = &log->head;
    pthread_mutex_init(&log->mu, NULL);
    pthread_mutex_init(&log->compact_mu, NULL);
    pthread_cond_init(&log->work, NULL);
    pthread_cond_init(&log->idle, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&log->cwork, &ca);
    pthread_condattr_destroy(&ca);

    log->fd = open(path, O_RDWR | O_CLOEXEC);
    if (log->fd < 0 && errno == ENOENT) {
        /* Created whole under its name, so that a crash never leaves half a header. */
        char *tmp = malloc(strlen(path) + DURABLE_TEMP_EXTRA);
        unsigned char h[HEADER_LEN];
        header(h);
        if (tmp == NULL) {
            err = ENOMEM;
        } else if ((log->fd = temp_file(path, h, sizeof h, tmp, strlen(path) + DURABLE_TEMP_EXTRA, &err)) >= 0
                   && (err = durable_install(tmp, path, log->dir)) != 0) {
            close(log->fd);
            log->fd = -1;
        }
        free(tmp);
        if (err != 0) {
            snprintf(r->why, sizeof r->why, "cannot create it: %s", strerror(err));
            goto fail;
        }
        r->created = true;
        log->info.live_bytes = HEADER_LEN;
    } else if (log->fd < 0) {
        err = errno;
        snprintf(r->why, sizeof r->why, "cannot open it: %s", strerror(err));
        goto fail;
    } else {
        struct stat st;
        if (fstat(log->fd, &st) != 0) {
            err = errno;
            snprintf(r->why, sizeof r->why, "cannot read it: %s", strerror(err));
            goto fail;
        }
        if ((err = load(log, &log->fd, (uint64_t)st.st_size, each, ctx, r)) != 0)
            goto fail;
    }
    struct stat st;
    if (fstat(log->fd, &st) != 0) {
        err = errno;
        snprintf(r->why, sizeof r->why, "cannot read it: %s", strerror(err));
        goto fail;
    }
    log->end = log->info.bytes = (uint64_t)st.st_size;
    if (log->info.live_bytes > log->end)
        log->info.live_bytes = log->end;
    /* A file mostly made of expired entries is rewritten at once. */
    log->compact_wanted = log->o.live != NULL
        && log->end > 2 * log->info.live_bytes + log->o.compact_floor;
    if ((err = pthread_create(&log->writer, NULL, writer_main, log)) != 0) {
        snprintf(r->why, sizeof r->why, "cannot start its thread: %s", strerror(err));
        goto fail;
    }
    if ((err = pthread_create(&log->compactor, NULL, compactor_main, log)) != 0) {
        snprintf(r->why, sizeof r->why, "cannot start its thread: %s", strerror(err));
        pthread_mutex_lock(&log->mu);
        log->stop = true;
        pthread_cond_broadcast(&log->work);
        pthread_mutex_unlock(&log->mu);
        pthread_join(log->writer, NULL);
        goto fail;
    }
    return log;
fail:
    postlog_destroy(log);
    errno = err;
    return NULL;
}

/* Wake the rewriting thread if the file has grown past its bound.  Caller locks. */
static void maybe_compact(struct postlog *log)
{
    if (log->o.live == NULL || log->compacting || log->compact_wanted)
        return;
    if (log->info.broken || log->end > 2 * log->info.live_bytes + log->o.compact_floor) {
        log->compact_wanted = true;
        pthread_cond_signal(&log->cwork);
    }
}

/* One batch: write it at the end, fdatasync.  Runs without the lock. */
static int write_batch(struct postlog *log, int fd, const struct buf *b, uint64_t at,
                       bool *sync_failed)
{
    int err = log->o.fault ? log->o.fault(log->o.fault_ctx, POSTLOG_IO_WRITE) : 0;
    if (err == 0)
        err = durable_write_all(fd, b->p, b->len, at);
    if (err != 0) {
        /*
         * Nothing was acknowledged, but part of it may be in the file: cut
         * it, so that the next batch is not followed by a fragment.
         */
        if (ftruncate(fd, (off_t)at) != 0)
            *sync_failed = true;
        return err;
    }
    err = log->o.fault ? log->o.fault(log->o.fault_ctx, POSTLOG_IO_SYNC) : 0;
    if (err == 0 && fdatasync(fd) != 0)
        err = errno;
    /*
     * After a failed fdatasync the kernel may have dropped the dirty pages
     * and will not report it again: nothing in the file can be trusted
     * until it has been rewritten.
     */
    if (err != 0)
        *sync_failed = true;
    return err;
}

static void *writer_main(void *arg)
{
    struct postlog *log = arg;
    pthread_mutex_lock(&log->mu);
    for (;;) {
        if (log->fill.len == 0 || log->swap) {
            if (log->stop && log->fill.len == 0)
                break;
            pthread_cond_wait(&log->work, &log->mu);
            continue;
        }
        struct buf b = log->fill;
        log->fill = log->spare;
        log->fill.len = 0;
        struct waiter *w = log->head;
        log->head = NULL;
        log->tail = &log->head;
        log->writing = true;
        int fd = log->fd;
        uint64_t at = log->end;
        int broken = log->info.broken;
        pthread_mutex_unlock(&log->mu);

        bool sync_failed = false;
        int err = broken ? broken : write_batch(log, fd, &b, at, &sync_failed);

        pthread_mutex_lock(&log->mu);
        log->info.batches += broken ? 0 : 1;
        if (err == 0) {
            log->end = at + b.len;
            log->info.bytes = log->end;
            log->info.syncs++;
        } else if (sync_failed && log->info.broken == 0) {
            log->info.broken = err;
        }
        if (err != 0)
            for (struct waiter *x = w; x != NULL; x = x->next)
                log->info.failures++;
        b.len = 0;
        if (b.cap > 4 * REC_BODY_MAX) {
            /* One huge POST must not pin its buffer for the life of the daemon. */
            free(b.p);
            b = (struct buf){ NULL, 0, 0 };
        }
        log->spare = b;
        log->writing = false;
        pthread_cond_broadcast(&log->idle);
        maybe_compact(log);
        /* Outside the lock: a callback may take locks of its own (resume a request). */
        pthread_mutex_unlock(&log->mu);
        while (w != NULL) {
            struct waiter *next = w->next;
            bool heap = w->heap;
            w->done(w->arg, err);
            if (heap)
                free(w);
            w = next;
        }
        pthread_mutex_lock(&log->mu);
    }
    pthread_mutex_unlock(&log->mu);
    return NULL;
}

static void *compactor_main(void *arg)
{
    struct postlog *log = arg;
    pthread_mutex_lock(&log->mu);
    while (!log->stop) {
        if (log->compact_wanted) {
            pthread_mutex_unlock(&log->mu);
            postlog_compact(log);
            pthread_mutex_lock(&log->mu);
            continue;
        }
        if (log->info.broken && log->o.live != NULL) {
            /* A failed rewrite of a broken log: try again in a while, not in a loop. */
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_sec += RETRY_SECONDS;
            pthread_cond_timedwait(&log->cwork, &log->mu, &ts);
            if (log->info.broken && !log->stop)
                log->compact_wanted = true;
            continue;
        }
        pthread_cond_wait(&log->cwork, &log->mu);
    }
    pthread_mutex_unlock(&log->mu);
    return NULL;
}

/* ------------------------------------------------------------- appends -- */

/* Put n IDs in the next batch, to be reported to w.  0 or an errno value.  Caller locks. */
static int enqueue(struct postlog *log, size_t n, const char *const *ids, const size_t *lens,
                   uint64_t ttl, struct waiter *w)
{
    if (log->info.broken) {
        /* The rewriting thread is on it (retrying every RETRY_SECONDS). */
        log->info.failures++;
        return log->info.broken;
    }
    uint64_t expires = wall(log) + ttl;
    size_t start = log->fill.len;
    struct rec r = { &log->fill, SIZE_MAX, 0 };
    for (size_t i = 0; i < n; i++) {
        if (lens[i] > MAX_ID_LEN || !rec_add(&r, ids[i], lens[i], expires)) {
            log->fill.len = start;
            log->info.failures++;
            return lens[i] > MAX_ID_LEN ? EINVAL : ENOMEM;
        }
    }
    rec_close(&r);
    *log->tail = w;
    log->tail = &w->next;
    log->info.appends++;
    log->info.ids += n;
    pthread_cond_signal(&log->work);
    return 0;
}

int postlog_submit(struct postlog *log, size_t n, const char *const *ids, const size_t *lens,
                   uint64_t ttl, postlog_done_fn done, void *arg)
{
    if (n == 0)
        return EINVAL;
    struct waiter *w = malloc(sizeof *w);
    if (w == NULL)
        return ENOMEM;
    *w = (struct waiter){ NULL, done, arg, true };
    pthread_mutex_lock(&log->mu);
    int err = enqueue(log, n, ids, lens, ttl, w);
    pthread_mutex_unlock(&log->mu);
    if (err != 0)
        free(w);
    return err;
}

/* postlog_append's wait: its own condition, so that a batch wakes each appender once. */
struct sync_wait {
    pthread_mutex_t *mu;
    pthread_cond_t cv;
    bool done;
    int err;
};

static void wake(void *arg, int err)
{
    struct sync_wait *sw = arg;
    pthread_mutex_lock(sw->mu);
    sw->err = err;
    sw->done = true;
    pthread_cond_signal(&sw->cv);
    pthread_mutex_unlock(sw->mu);
}

int postlog_append(struct postlog *log, size_t n, const char *const *ids, const size_t *lens,
                   uint64_t ttl)
{
    if (n == 0)
        return 0;
    struct sync_wait sw = { .mu = &log->mu };
    struct waiter w = { NULL, wake, &sw, false };
    pthread_cond_init(&sw.cv, NULL);
    pthread_mutex_lock(&log->mu);
    int err = enqueue(log, n, ids, lens, ttl, &w);
    while (err == 0 && !sw.done)
        pthread_cond_wait(&sw.cv, &log->mu);
    pthread_mutex_unlock(&log->mu);
    pthread_cond_destroy(&sw.cv);
    return err != 0 ? err : sw.err;
}

/* ------------------------------------------------------------ rewrites -- */

struct export {
    struct rec r;
    uint64_t now;
    bool oom;
};

static bool export_count(void *ctx, uint64_t n, uint64_t bytes)
{
    struct export *x = ctx;
    uint64_t want = n * ENTRY_HEAD + bytes + (n / 1024 + 1) * (REC_HEAD + REC_SUM);
    if (want > SIZE_MAX || !reserve(x->r.b, (size_t)want)) {
        x->oom = true;
        return false;
    }
    return true;
}

static bool export_each(void *ctx, const char *id, size_t len, uint64_t ttl_left)
{
    struct export *x = ctx;
    if (len > MAX_ID_LEN)
        return true;            /* cannot be written: never was acknowledged through here */
    if (!rec_add(&x->r, id, len, x->now + ttl_left)) {
        x->oom = true;
        return false;
    }
    return true;
}

/* Copy [from, to) of the old file to the end of the new one (at). */
static int copy_tail(int from_fd, int to_fd, uint64_t from, uint64_t to, uint64_t at)
{
    unsigned char chunk[65536];
    while (from < to) {
        size_t want = to - from < sizeof chunk ? (size_t)(to - from) : sizeof chunk;
        ssize_t got = pread(from_fd, chunk, want, (off_t)from);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return got < 0 ? errno : EIO;
        int err = durable_write_all(to_fd, chunk, (size_t)got, at);
        if (err != 0)
            return err;
        from += (uint64_t)got;
        at += (uint64_t)got;
    }
    return 0;
}

int postlog_compact(struct postlog *log)
{
    if (log->o.live == NULL)
        return EINVAL;
    int err = 0, nfd = -1;
    struct buf b = { NULL, 0, 0 };
    size_t tl = strlen(log->path) + DURABLE_TEMP_EXTRA;
    char *tmp = malloc(tl);
    pthread_mutex_lock(&log->compact_mu);
    pthread_mutex_lock(&log->mu);
    log->compacting = true;
    log->compact_wanted = false;
    /*
     * Every record before mark was written after its IDs entered the
     * journal, and the journal is read after this: they are in the walk
     * below (unless expired or seen in the table).  What is appended from
     * here on is copied from the old file at the swap.
     */
    uint64_t mark = log->end;
    pthread_mutex_unlock(&log->mu);

    struct export x = { { &b, SIZE_MAX, 0 }, wall(log), false };
    if (tmp == NULL || !reserve(&b, HEADER_LEN)) {
        err = ENOMEM;
        goto out;
    }
    header(b.p);
    b.len = HEADER_LEN;
    if (!log->o.live(log->o.live_ctx, export_count, export_each, &x)) {
        err = x.oom ? ENOMEM : ECANCELED;
        goto out;
    }
    rec_close(&x.r);
    /* The bulk is written and synced before appends are held back. */
    if ((nfd = temp_file(log->path, b.p, b.len, tmp, tl, &err)) < 0)
        goto out;

    pthread_mutex_lock(&log->mu);
    log->swap = true;
    while (log->writing)
        pthread_cond_wait(&log->idle, &log->mu);
    uint64_t tail_end = log->end;
    int old_fd = log->fd;
    pthread_mutex_unlock(&log->mu);

    err = copy_tail(old_fd, nfd, mark, tail_end, b.len);
    if (err == 0 && tail_end > mark && fdatasync(nfd) != 0)
        err = errno;
    if (err == 0)
        err = durable_install(tmp, log->path, log->dir);
    else
        unlink(tmp);

    pthread_mutex_lock(&log->mu);
    if (err == 0) {
        close(old_fd);
        log->fd = nfd;
        nfd = -1;
        log->end = log->info.bytes = log->info.live_bytes = b.len + (tail_end - mark);
        log->info.broken = 0;
        log->info.compactions++;
    }
    log->swap = false;
    pthread_cond_broadcast(&log->work);
    pthread_mutex_unlock(&log->mu);
out:
    if (nfd >= 0)
        close(nfd);
    pthread_mutex_lock(&log->mu);
    log->compacting = false;
    if (err != 0)
        log->info.compact_failures++;
    pthread_mutex_unlock(&log->mu);
    pthread_mutex_unlock(&log->compact_mu);
    free(b.p);
    free(tmp);
    return err;
}

/* ---------------------------------------------------------------- rest -- */

void postlog_info(struct postlog *log, struct postlog_info *out)
{
    pthread_mutex_lock(&log->mu);
    *out = log->info;
    pthread_mutex_unlock(&log->mu);
}

void postlog_close(struct postlog *log)
{
    if (log == NULL)
        return;
    pthread_mutex_lock(&log->mu);
    log->stop = true;
    pthread_cond_broadcast(&log->work);
    pthread_cond_broadcast(&log->cwork);
    pthread_mutex_unlock(&log->mu);
    pthread_join(log->compactor, NULL);
    pthread_join(log->writer, NULL);
    postlog_destroy(log);
}
