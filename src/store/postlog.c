/*
 * The POST log's group commit and rewrites (contract in postlog.h): one
 * writer thread commits concurrent appends together, one rewriting thread
 * compacts the file to its live entries.  The file format and its repair at
 * open are below it, in postlog_file.c; the zeros the writer keeps written
 * ahead of the end beside it, in postlog_ahead.c (the struct both use:
 * postlog_int.h).
 */
#include "postlog.h"
#include "postlog_file.h"
#include "postlog_int.h"

#include "durable.h"
#include "monoclock.h"

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

#define DEFAULT_FLOOR (UINT64_C(1) << 20)
#define RETRY_SECONDS 1         /* between rewrites of a broken log */

/* The log's clock: wall-clock unix seconds, or the test clock of its options. */
static uint64_t wall_clock(const struct postlog *log)
{
    if (log->o.clock)
        return log->o.clock(log->o.clock_ctx);
    return (uint64_t)time(NULL);
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
    if (log == NULL || (log->path = strdup(path)) == NULL
        || (log->dir = durable_dir_of(path)) == NULL) {
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
    if (log->o.prealloc == 0)
        log->o.prealloc = POSTLOG_PREALLOC;
    log->fd = -1;
    log->tail = &log->head;
    pthread_mutex_init(&log->mu, NULL);
    pthread_mutex_init(&log->compact_mu, NULL);
    monoclock_cond_init(&log->work);
    pthread_cond_init(&log->idle, NULL);
    monoclock_cond_init(&log->cwork);

    log->fd = open(path, O_RDWR | O_CLOEXEC);
    if (log->fd < 0 && errno == ENOENT) {
        /* Created whole under its name, so that a crash never leaves half a header. */
        char *tmp = malloc(strlen(path) + DURABLE_TEMP_EXTRA);
        unsigned char h[POSTLOG_HEADER_LEN];
        postlog_file_header(h, 0);
        if (tmp == NULL) {
            err = ENOMEM;
        } else if ((log->fd = postlog_file_temp(path, h, sizeof h, tmp,
                                                strlen(path) + DURABLE_TEMP_EXTRA, &err)) >= 0
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
        log->info.live_bytes = POSTLOG_HEADER_LEN;
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
        if ((err = postlog_file_load(log->path, log->dir, &log->fd, (uint64_t)st.st_size,
                                     wall_clock(log), log->o.ttl, each, ctx, r,
                                     &log->info.live_bytes, &log->latest, &log->end)) != 0)
            goto fail;
        log->hold = r->lost_until;
    }
    struct stat st;
    if (fstat(log->fd, &st) != 0) {
        err = errno;
        snprintf(r->why, sizeof r->why, "cannot read it: %s", strerror(err));
        goto fail;
    }
    if (r->created)
        log->end = (uint64_t)st.st_size;
    /*
     * Zeros an earlier run wrote ahead stay ahead (the load cut them if
     * anything else followed the records); the first append's fdatasync
     * makes whatever of them a crash left unsynced durable with it.
     */
    log->alloc_end = (uint64_t)st.st_size > log->end ? (uint64_t)st.st_size : log->end;
    log->info.bytes = log->end;
    log->info.ahead = log->alloc_end - log->end;
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

/* Wake the rewriting thread if the file has grown past its bound (postlog_int.h). */
void postlog_maybe_compact(struct postlog *log)
{
    if (log->o.live == NULL || log->compacting || log->compact_wanted)
        return;
    if (log->info.broken || log->end > 2 * log->info.live_bytes + log->o.compact_floor) {
        log->compact_wanted = true;
        pthread_cond_signal(&log->cwork);
    }
}

/*
 * One batch: write it at the end (at), fdatasync.  alloc_end: where the
 * zeros written ahead end.  Runs without the lock.
 */
static int write_batch(struct postlog *log, int fd, const struct postlog_buf *b, uint64_t at,
                       uint64_t alloc_end, bool *sync_failed)
{
    int err = log->o.fault ? log->o.fault(log->o.fault_ctx, POSTLOG_IO_WRITE) : 0;
    if (err == 0)
        err = durable_write_all(fd, b->p, b->len, at);
    if (err != 0) {
        /*
         * Nothing was acknowledged, but part of it may be in the file: cut
         * it, so that the next batch is not followed by a fragment.  Inside
         * the zeros it is zeroed again instead: they stay, so that a full
         * disk refuses only the appends that do not fit in them.
         */
        uint64_t upto = at + b->len < alloc_end ? at + b->len : alloc_end;
        if (ftruncate(fd, (off_t)(at > alloc_end ? at : alloc_end)) != 0
            || (upto > at && postlog_ahead_zeros(fd, at, upto, false, sync_failed) != 0))
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
    struct timespec gather_end = { 0, 0 };
    bool gathering = false, gathered = false;
    pthread_mutex_lock(&log->mu);
    for (;;) {
        if (postlog_ahead_due(log)) {
            postlog_ahead_top_up(log);
            continue;
        }
        if (log->fill.len == 0 || log->swap) {
            if (log->stop && log->fill.len == 0)
                break;
            log->wake_at = 1;
            pthread_cond_wait(&log->work, &log->mu);
            continue;
        }
        /*
         * The gather.  Clients that wait for their answer before they send
         * again (a POST per connection) come back from the last batch one
         * by one, the first of them while the others are still being
         * answered: taken at once, it would go alone, the rest would queue
         * behind its fdatasync, and from then on the appenders split into
         * two groups that each wait two fdatasyncs per append (half the
         * throughput; tests/check_postlog.c, test_gather).  So a batch
         * smaller than the last one waits for the rest, up to as long as
         * the last write and fdatasync took: no append waits more than one
         * such time longer than before, and a gather that runs out makes
         * the next one expect fewer.  Arrivals while the writer is busy
         * (an open load) fill the batch without any wait.
         */
        if (!log->stop && !gathered && log->queued < log->last_appends) {
            if (!gathering) {
                gathering = true;
                gather_end = monoclock_after_ns(log->last_ns);
            }
            log->wake_at = log->last_appends;
            if (pthread_cond_timedwait(&log->work, &log->mu, &gather_end) == ETIMEDOUT)
                gathered = true;
            continue;
        }
        gathering = gathered = false;
        log->wake_at = SIZE_MAX;        /* busy: it looks at the queue before it waits again */
        log->last_appends = log->queued;
        log->queued = 0;
        struct postlog_buf b = log->fill;
        log->fill = log->spare;
        log->fill.len = 0;
        struct waiter *w = log->head;
        log->head = NULL;
        log->tail = &log->head;
        log->writing = true;
        int fd = log->fd;
        uint64_t at = log->end, alloc_end = log->alloc_end;
        int broken = log->info.broken;
        pthread_mutex_unlock(&log->mu);

        bool sync_failed = false;
        uint64_t t0 = (uint64_t)monoclock_ns();
        int err = broken ? broken : write_batch(log, fd, &b, at, alloc_end, &sync_failed);
        uint64_t took = (uint64_t)monoclock_ns() - t0;

        pthread_mutex_lock(&log->mu);
        log->last_ns = took;
        log->info.batches += broken ? 0 : 1;
        if (err == 0) {
            log->end = at + b.len;
            log->info.bytes = log->end;
            log->info.syncs++;
        } else {
            if (sync_failed && log->info.broken == 0)
                log->info.broken = err;
        }
        if (log->alloc_end < log->end)
            log->alloc_end = log->end;  /* a batch past the zeros grew the file */
        log->info.ahead = log->alloc_end - log->end;
        if (err != 0)
            for (struct waiter *x = w; x != NULL; x = x->next)
                log->info.failures++;
        b.len = 0;
        if (b.cap > 4 * POSTLOG_REC_BODY_MAX) {
            /* One huge POST must not pin its buffer for the life of the daemon. */
            free(b.p);
            b = (struct postlog_buf){ NULL, 0, 0 };
        }
        log->spare = b;
        log->writing = false;
        log->notifying = true;
        pthread_cond_broadcast(&log->idle);
        postlog_maybe_compact(log);
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
        log->notifying = false;
        pthread_cond_broadcast(&log->idle);
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
            struct timespec ts = monoclock_after_ms(RETRY_SECONDS * 1000);
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
    uint64_t expires = wall_clock(log) + ttl;
    if (expires > log->latest)
        log->latest = expires;
    size_t start = log->fill.len;
    struct postlog_rec r = { &log->fill, SIZE_MAX, 0 };
    for (size_t i = 0; i < n; i++) {
        if (lens[i] > POSTLOG_MAX_ID_LEN || !postlog_file_rec_add(&r, ids[i], lens[i], expires)) {
            log->fill.len = start;
            log->info.failures++;
            return lens[i] > POSTLOG_MAX_ID_LEN ? EINVAL : ENOMEM;
        }
    }
    postlog_file_rec_close(&r);
    *log->tail = w;
    log->tail = &w->next;
    log->info.appends++;
    log->info.ids += n;
    if (++log->queued >= log->wake_at)
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
    struct postlog_rec r;
    uint64_t now;
    bool oom;
};

static bool export_count(void *ctx, uint64_t n, uint64_t bytes)
{
    struct export *x = ctx;
    uint64_t want = n * POSTLOG_ENTRY_HEAD + bytes
        + (n / 1024 + 1) * (POSTLOG_REC_HEAD + POSTLOG_REC_SUM);
    if (want > SIZE_MAX || !postlog_file_reserve(x->r.b, (size_t)want)) {
        x->oom = true;
        return false;
    }
    return true;
}

static bool export_each(void *ctx, const char *id, size_t len, uint64_t ttl_left)
{
    struct export *x = ctx;
    if (len > POSTLOG_MAX_ID_LEN)
        return true;            /* cannot be written: never was acknowledged through here */
    if (!postlog_file_rec_add(&x->r, id, len, x->now + ttl_left)) {
        x->oom = true;
        return false;
    }
    return true;
}

int postlog_compact(struct postlog *log)
{
    if (log->o.live == NULL)
        return EINVAL;
    int err = 0, nfd = -1;
    struct postlog_buf b = { NULL, 0, 0 };
    size_t tl = strlen(log->path) + DURABLE_TEMP_EXTRA;
    char *tmp = malloc(tl);
    pthread_mutex_lock(&log->compact_mu);
    pthread_mutex_lock(&log->mu);
    log->compacting = true;
    log->compact_wanted = false;
    /*
     * Every record before mark has had its done callbacks, which put its
     * IDs where the live walk below finds them (table.c: the journal takes
     * an ID only once the log has it, so that none refused is ever
     * rewritten): they are in the walk (unless expired or seen in the
     * table).  What is appended from here on is copied from the old file
     * at the swap.
     */
    while (log->notifying)
        pthread_cond_wait(&log->idle, &log->mu);
    uint64_t mark = log->end;
    pthread_mutex_unlock(&log->mu);

    struct export x = { { &b, SIZE_MAX, 0 }, wall_clock(log), false };
    if (tmp == NULL || !postlog_file_reserve(&b, POSTLOG_HEADER_LEN)) {
        err = ENOMEM;
        goto out;
    }
    /* A hold that is still on travels into the new file: a crash must not forget it. */
    pthread_mutex_lock(&log->mu);
    uint64_t hold = log->hold > x.now ? log->hold : 0;
    pthread_mutex_unlock(&log->mu);
    postlog_file_header(b.p, hold);
    b.len = POSTLOG_HEADER_LEN;
    if (!log->o.live(log->o.live_ctx, export_count, export_each, &x)) {
        err = x.oom ? ENOMEM : ECANCELED;
        goto out;
    }
    postlog_file_rec_close(&x.r);
    /* The bulk is written and synced before appends are held back. */
    if ((nfd = postlog_file_temp(log->path, b.p, b.len, tmp, tl, &err)) < 0)
        goto out;

    pthread_mutex_lock(&log->mu);
    log->swap = true;
    while (log->writing)
        pthread_cond_wait(&log->idle, &log->mu);
    uint64_t tail_end = log->end;
    int old_fd = log->fd;
    pthread_mutex_unlock(&log->mu);

    err = postlog_file_copy(old_fd, nfd, mark, tail_end, b.len);
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
        log->end = log->alloc_end = log->info.bytes = b.len + (tail_end - mark);
        log->info.ahead = 0;
        log->prealloc_after = 0;
        log->info.live_bytes = b.len;   /* the tail may be repeats: not known live (below) */
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
    else
        postlog_maybe_compact(log);     /* a tail past the live set and floor: again */
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
    /*
     * Every append is answered and none can follow: seal the file, so that
     * the next open tells a cut while stopped from a torn append.  A log
     * whose file state is unknown (a failed fdatasync) is not sealed: the
     * next open reads it as after a crash.  A seal that cannot be written
     * leaves the same.
     */
    if (log->fd >= 0 && log->info.broken == 0) {
        uint64_t now = wall_clock(log);
        postlog_file_seal(log->fd, log->end, log->hold > now ? log->hold : 0, log->latest);
    }
    postlog_destroy(log);
}
