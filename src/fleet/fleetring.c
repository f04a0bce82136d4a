/*
 * The replication ring (fleetring.h): a circular buffer of key hashes and
 * their ttls under one mutex, the writers being the threads that add to a
 * table and the readers its replicas' streams.
 */
#include "fleetring.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* Commit marks kept (fleetring.h): the oldest go first; most are past the ring's oldest key anyway. */
#define MARKS 4096

struct mark {
    uint64_t seq, epoch, lo, hi;
    uint32_t tli;
};

struct fleetring {
    uint64_t capacity;
    pthread_mutex_t mu;
    /* Under mu: */
    uint64_t history;               /* fleetring_append_at and _rebase may change it */
    uint64_t last;                  /* the newest seq */
    uint64_t oldest;                /* the oldest seq kept; last + 1 when none is */
    uint64_t *hashes;               /* NULL until enabled; seq s at (s - 1) % capacity */
    uint32_t *ttls;
    struct mark *marks;             /* MARKS of them, made with the buffer; marks[(first + i) % MARKS] */
    unsigned n_marks, first_mark;
};

uint64_t fleetring_new_history(void)
{
    uint64_t h = 0;
    while (h == 0) {
        if (getrandom(&h, sizeof h, 0) != (ssize_t)sizeof h) {
            /* No entropy source: a clock and the pid still differ between lifetimes. */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            h = ((uint64_t)ts.tv_sec << 32) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 16);
        }
    }
    return h;
}

struct fleetring *fleetring_new(uint64_t capacity, uint64_t history)
{
    if (capacity == 0)
        return NULL;
    struct fleetring *r = calloc(1, sizeof *r);
    if (r == NULL)
        return NULL;
    r->history = history;
    r->capacity = capacity;
    r->oldest = 1;
    pthread_mutex_init(&r->mu, NULL);
    return r;
}

void fleetring_free(struct fleetring *r)
{
    if (r == NULL)
        return;
    pthread_mutex_destroy(&r->mu);
    free(r->hashes);
    free(r->ttls);
    free(r->marks);
    free(r);
}

uint64_t fleetring_history(struct fleetring *r)
{
    pthread_mutex_lock(&r->mu);
    uint64_t h = r->history;
    pthread_mutex_unlock(&r->mu);
    return h;
}

void fleetring_where(struct fleetring *r, uint64_t *history, uint64_t *last)
{
    pthread_mutex_lock(&r->mu);
    *history = r->history;
    *last = r->last;
    pthread_mutex_unlock(&r->mu);
}

/* Another history, or a jump in this one: nothing kept, last = seq (r->mu held). */
static void reset_locked(struct fleetring *r, uint64_t history, uint64_t seq)
{
    r->history = history;
    r->last = seq;
    r->oldest = seq + 1;
    r->n_marks = 0;                 /* they spoke of the seqs before */
}

void fleetring_rebase(struct fleetring *r, uint64_t history, uint64_t seq)
{
    pthread_mutex_lock(&r->mu);
    if (r->history != history)
        reset_locked(r, history, seq);
    pthread_mutex_unlock(&r->mu);
}

bool fleetring_enable(struct fleetring *r)
{
    pthread_mutex_lock(&r->mu);
    bool ok = r->hashes != NULL;
    if (!ok && r->capacity <= SIZE_MAX / sizeof *r->hashes) {
        uint64_t *h = malloc((size_t)r->capacity * sizeof *h);
        uint32_t *t = malloc((size_t)r->capacity * sizeof *t);
        struct mark *m = malloc(MARKS * sizeof *m);
        if (h != NULL && t != NULL && m != NULL) {
            r->hashes = h;
            r->ttls = t;
            r->marks = m;
            r->n_marks = 0;
            r->oldest = r->last + 1;    /* what came before was only counted */
            ok = true;
        } else {
            free(h);
            free(t);
            free(m);
        }
    }
    pthread_mutex_unlock(&r->mu);
    return ok;
}

static void append_locked(struct fleetring *r, const uint64_t *hashes, size_t n, uint32_t ttl)
{
    if (r->hashes == NULL) {
        r->last += n;
        r->oldest = r->last + 1;
    } else {
        for (size_t i = 0; i < n; i++) {
            uint64_t at = r->last % r->capacity;     /* seq last + 1 */
            r->hashes[at] = hashes[i];
            r->ttls[at] = ttl;
            r->last++;
        }
        if (r->last - r->oldest + 1 > r->capacity)
            r->oldest = r->last - r->capacity + 1;
    }
}

uint64_t fleetring_append(struct fleetring *r, const uint64_t *hashes, size_t n, uint32_t ttl)
{
    pthread_mutex_lock(&r->mu);
    append_locked(r, hashes, n, ttl);
    uint64_t last = r->last;
    pthread_mutex_unlock(&r->mu);
    return last;
}

uint64_t fleetring_append_at(struct fleetring *r, uint64_t history, uint64_t first,
                             const uint64_t *hashes, size_t n, uint32_t ttl)
{
    pthread_mutex_lock(&r->mu);
    /* Not the next keys of this history: the ring keeps only what follows on without a hole. */
    if (r->history != history || first != r->last + 1)
        reset_locked(r, history, first - 1);
    append_locked(r, hashes, n, ttl);
    uint64_t last = r->last;
    pthread_mutex_unlock(&r->mu);
    return last;
}

uint64_t fleetring_last(struct fleetring *r)
{
    pthread_mutex_lock(&r->mu);
    uint64_t last = r->last;
    pthread_mutex_unlock(&r->mu);
    return last;
}

bool fleetring_holds_in(struct fleetring *r, uint64_t history, uint64_t after)
{
    pthread_mutex_lock(&r->mu);
    bool ok = r->history == history && after <= r->last
              && (after + 1 >= r->oldest || after == r->last);
    pthread_mutex_unlock(&r->mu);
    return ok;
}

bool fleetring_holds(struct fleetring *r, uint64_t after)
{
    return fleetring_holds_in(r, fleetring_history(r), after);
}

long fleetring_read(struct fleetring *r, uint64_t from, uint64_t *hashes, uint32_t *ttls,
                    size_t max)
{
    return fleetring_read_in(r, fleetring_history(r), from, hashes, ttls, max);
}

long fleetring_read_in(struct fleetring *r, uint64_t history, uint64_t from, uint64_t *hashes,
                       uint32_t *ttls, size_t max)
{
    long n = 0;
    pthread_mutex_lock(&r->mu);
    if (r->history != history) {
        n = -2;
    } else if (from > r->last) {
        n = 0;
    } else if (from < r->oldest || r->hashes == NULL) {
        n = -1;
    } else {
        uint64_t avail = r->last - from + 1;
        if (max > (size_t)LONG_MAX)
            max = (size_t)LONG_MAX;
        n = avail < max ? (long)avail : (long)max;
        for (long i = 0; i < n; i++) {
            uint64_t at = (from - 1 + (uint64_t)i) % r->capacity;
            hashes[i] = r->hashes[at];
            ttls[i] = r->ttls[at];
        }
    }
    pthread_mutex_unlock(&r->mu);
    return n;
}

/* ------------------------------------------------------ commit marks -- */

static struct mark *mark_at(struct fleetring *r, unsigned i)
{
    return &r->marks[(r->first_mark + i) % MARKS];
}

void fleetring_mark(struct fleetring *r, uint64_t epoch, uint32_t tli, uint64_t lsn)
{
    pthread_mutex_lock(&r->mu);
    if (r->marks == NULL || lsn == 0)
        goto out;
    struct mark *m = r->n_marks > 0 ? mark_at(r, r->n_marks - 1) : NULL;
    if (m != NULL && (m->epoch != epoch || m->tli != tli)) {
        /* Another epoch (a gap) or timeline: nothing before proves anything now. */
        r->n_marks = 0;
        m = NULL;
    }
    if (m != NULL && lsn <= m->hi)
        goto out;                   /* replayed: the first time made its mark */
    if (m != NULL && m->seq == r->last) {
        m->hi = lsn;                /* no key since: (a) and (b) hold up to lsn too */
        goto out;
    }
    if (r->n_marks == MARKS) {
        r->first_mark = (r->first_mark + 1) % MARKS;
        r->n_marks--;
    }
    *mark_at(r, r->n_marks++) = (struct mark){ r->last, epoch, lsn, lsn, tli };
out:
    pthread_mutex_unlock(&r->mu);
}

bool fleetring_position(struct fleetring *r, uint64_t history, uint64_t epoch, uint64_t upto,
                        uint64_t *seq, uint32_t *tli, uint64_t *lsn)
{
    bool ok = false;
    pthread_mutex_lock(&r->mu);
    for (unsigned i = r->n_marks; r->history == history && i-- > 0;) {
        const struct mark *m = mark_at(r, i);
        if (m->seq <= upto) {
            ok = m->epoch == epoch;
            *seq = m->seq;
            *tli = m->tli;
            *lsn = m->hi;
            break;
        }
    }
    pthread_mutex_unlock(&r->mu);
    return ok;
}

bool fleetring_at_commit(struct fleetring *r, uint64_t epoch, uint32_t tli, uint64_t lsn,
                         uint64_t *after)
{
    bool ok = false;
    pthread_mutex_lock(&r->mu);
    for (unsigned i = r->n_marks; r->hashes != NULL && i-- > 0;) {
        const struct mark *m = mark_at(r, i);
        if (m->epoch != epoch || m->tli != tli)
            break;                  /* (all of them are of the newest's) */
        if (m->lo <= lsn) {
            /* Every key after m->seq must still be here to be sent. */
            ok = m->seq <= r->last && (m->seq + 1 >= r->oldest || m->seq == r->last);
            *after = m->seq;
            break;
        }
    }
    pthread_mutex_unlock(&r->mu);
    return ok;
}

void fleetring_info(struct fleetring *r, struct fleetring_info *out)
{
    pthread_mutex_lock(&r->mu);
    out->last = r->last;
    out->oldest = r->oldest;
    out->held = r->last + 1 - r->oldest;
    out->capacity = r->capacity;
    out->enabled = r->hashes != NULL;
    out->marks = r->n_marks;
    out->mark_lsn = r->n_marks > 0 ? mark_at(r, r->n_marks - 1)->hi : 0;
    pthread_mutex_unlock(&r->mu);
}
