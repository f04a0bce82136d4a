/*
 * An open-addressing hash set of strings under one mutex.  POSTs are rare
 * next to lookups and never on the lookup path, so a lock is fine here; the
 * loader's per-row check skips the lock while the set is empty.
 */
#include "pending.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct entry {
    uint64_t h;
    char *id;                   /* NULL: free (never used, or deleted if dead) */
    size_t len;
    uint64_t expires;           /* on the caller's clock */
    uint32_t holds;             /* reservations not yet committed or cancelled */
    bool acked;                 /* in the journal: exported and replayed (else only held) */
    bool dead;                  /* a tombstone: keeps probe chains intact */
};

struct pending {
    pthread_mutex_t mu;
    struct entry *slots;
    size_t cap;                 /* power of two */
    size_t used;                /* live + tombstones */
    uint64_t limit, max_bytes, ttl;
    _Atomic uint64_t count;
    _Atomic uint64_t bytes;
    _Atomic uint64_t refused;
    _Atomic uint64_t expired;
};

struct pending *pending_new(uint64_t limit, uint64_t max_bytes, uint64_t ttl)
{
    struct pending *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return NULL;
    pthread_mutex_init(&p->mu, NULL);
    p->limit = limit;
    p->max_bytes = max_bytes;
    p->ttl = ttl;
    atomic_init(&p->count, 0);
    atomic_init(&p->bytes, 0);
    atomic_init(&p->refused, 0);
    atomic_init(&p->expired, 0);
    return p;
}

void pending_free(struct pending *p)
{
    if (p == NULL)
        return;
    for (size_t i = 0; i < p->cap; i++)
        free(p->slots[i].id);
    free(p->slots);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

/* The slot holding id, or the first free one on its probe path.  Caller locks; cap > 0. */
static struct entry *find(struct pending *p, const char *id, size_t len, uint64_t h, bool *found)
{
    struct entry *free_slot = NULL;
    size_t mask = p->cap - 1;
    *found = false;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        struct entry *e = &p->slots[i];
        if (e->id == NULL && !e->dead)
            return free_slot ? free_slot : e;
        if (e->dead) {
            if (free_slot == NULL)
                free_slot = e;
        } else if (e->h == h && e->len == len && memcmp(e->id, id, len) == 0) {
            *found = true;
            return e;
        }
    }
}

static bool grow(struct pending *p)
{
    size_t ncap = p->cap ? p->cap * 2 : 1024;
    /* Rehash to the same size when tombstones, not entries, fill the table. */
    if (p->cap && atomic_load(&p->count) * 4 < p->cap)
        ncap = p->cap;
    struct entry *ns = calloc(ncap, sizeof(*ns));
    if (ns == NULL)
        return false;
    struct entry *old = p->slots;
    size_t ocap = p->cap;
    p->slots = ns;
    p->cap = ncap;
    p->used = 0;
    for (size_t i = 0; i < ocap; i++) {
        if (old[i].id == NULL)
            continue;
        bool found;
        *find(p, old[i].id, old[i].len, old[i].h, &found) = old[i];
        p->used++;
    }
    free(old);
    return true;
}

/* Turn a live entry into a tombstone.  Caller locks. */
static void drop(struct pending *p, struct entry *e)
{
    atomic_fetch_sub(&p->bytes, e->len);
    atomic_fetch_sub(&p->count, 1);
    free(e->id);
    *e = (struct entry){ .dead = true };
}

static void expire_locked(struct pending *p, uint64_t now)
{
    uint64_t n = 0;
    for (size_t i = 0; i < p->cap; i++) {
        struct entry *e = &p->slots[i];
        /* A held entry waits for its commit or cancel, which decide. */
        if (e->id != NULL && e->holds == 0 && e->expires <= now) {
            drop(p, e);
            n++;
        }
    }
    if (n)
        atomic_fetch_add(&p->expired, n);
}

/* Room the IDs not yet remembered would take.  Caller locks. */
static void room_needed(struct pending *p, size_t n, const char *const *ids, const size_t *lens,
                        const uint64_t *hashes, uint64_t *count, uint64_t *bytes)
{
    *count = *bytes = 0;
    for (size_t i = 0; i < n; i++) {
        bool found = false;
        if (p->cap > 0)
            find(p, ids[i], lens[i], hashes[i], &found);
        if (!found) {       /* a duplicate inside the batch counts twice: refuses early, never late */
            (*count)++;
            *bytes += lens[i];
        }
    }
}

static enum pending_result fits(const struct pending *p, uint64_t count, uint64_t bytes)
{
    /* Over the limits after a restore, what takes no room is still fine. */
    if (count == 0 && bytes == 0)
        return PENDING_OK;
    if (atomic_load(&p->count) + count > p->limit)
        return PENDING_FULL_COUNT;
    if (atomic_load(&p->bytes) + bytes > p->max_bytes)
        return PENDING_FULL_BYTES;
    return PENDING_OK;
}

/*
 * Take back the first n IDs' holds of a reservation that will not be
 * committed: an entry that no other hold keeps and that was never in the
 * journal leaves it.  Caller locks.
 */
static void release_locked(struct pending *p, size_t n, const char *const *ids,
                           const size_t *lens, const uint64_t *hashes)
{
    for (size_t i = 0; i < n && p->cap > 0; i++) {
        bool found;
        struct entry *e = find(p, ids[i], lens[i], hashes[i], &found);
        if (!found || e->holds == 0)
            continue;
        if (--e->holds == 0 && !e->acked)
            drop(p, e);
    }
}

/* How an insert path treats the IDs it is given. */
enum add_mode {
    ADD_POST,       /* within the limits, in the journal at once */
    ADD_RESERVE,    /* within the limits, held: in the journal at pending_commit */
    ADD_RESTORE     /* acknowledged once: past the limits, expires[i] */
};

/*
 * The one insert path, for POSTs, reservations and restored entries:
 * expires[i], or now + ttl when expires is NULL.  An ID already there
 * keeps the later of its two expiries (for a POST the new one: the clock
 * is monotonic).  A restored entry was acknowledged once: it is kept past
 * the limits, which only refuse what has not been acknowledged yet.  A
 * reservation holds each entry (new ones are not in the journal yet) and,
 * failing half way, gives back what it held.
 */
static enum pending_result add_until(struct pending *p, size_t n, const char *const *ids,
                                     const size_t *lens, const uint64_t *hashes,
                                     const uint64_t *expires, uint64_t now, enum add_mode mode)
{
    enum pending_result r = PENDING_OK;
    uint64_t need, need_bytes;
    size_t i = 0;
    pthread_mutex_lock(&p->mu);
    if (mode != ADD_RESTORE) {
        room_needed(p, n, ids, lens, hashes, &need, &need_bytes);
        r = fits(p, need, need_bytes);
    }
    if (r != PENDING_OK) {
        /* Expired entries hold room only until someone needs it. */
        expire_locked(p, now);
        r = fits(p, need, need_bytes);
    }
    if (r != PENDING_OK) {
        atomic_fetch_add(&p->refused, n);
        goto out;
    }
    for (i = 0; i < n; i++) {
        bool found;
        if ((p->used + 1) * 4 > p->cap * 3 && !grow(p)) {
            r = PENDING_NOMEM;
            goto out;
        }
        uint64_t until = expires ? expires[i] : now + p->ttl;
        struct entry *e = find(p, ids[i], lens[i], hashes[i], &found);
        if (found) {
            /* A reservation refreshes nothing yet: pending_commit does. */
            if (mode == ADD_RESERVE)
                e->holds++;
            else if (until > e->expires)
                e->expires = until;
            if (mode != ADD_RESERVE)
                e->acked = true;
            continue;
        }
        char *copy = malloc(lens[i] ? lens[i] : 1);
        if (copy == NULL) {
            r = PENDING_NOMEM;
            goto out;
        }
        memcpy(copy, ids[i], lens[i]);
        if (!e->dead)
            p->used++;
        *e = (struct entry){ .h = hashes[i], .id = copy, .len = lens[i], .expires = until,
                             .holds = mode == ADD_RESERVE, .acked = mode != ADD_RESERVE };
        atomic_fetch_add(&p->count, 1);
        atomic_fetch_add(&p->bytes, lens[i]);
    }
out:
    if (r != PENDING_OK && mode == ADD_RESERVE)
        release_locked(p, i, ids, lens, hashes);
    pthread_mutex_unlock(&p->mu);
    return r;
}

enum pending_result pending_add_many(struct pending *p, size_t n, const char *const *ids,
                                     const size_t *lens, const uint64_t *hashes, uint64_t now)
{
    return add_until(p, n, ids, lens, hashes, NULL, now, ADD_POST);
}

enum pending_result pending_reserve(struct pending *p, size_t n, const char *const *ids,
                                    const size_t *lens, const uint64_t *hashes, uint64_t now)
{
    return add_until(p, n, ids, lens, hashes, NULL, now, ADD_RESERVE);
}

void pending_commit(struct pending *p, size_t n, const char *const *ids, const size_t *lens,
                    const uint64_t *hashes, uint64_t now)
{
    pthread_mutex_lock(&p->mu);
    for (size_t i = 0; i < n && p->cap > 0; i++) {
        bool found;
        struct entry *e = find(p, ids[i], lens[i], hashes[i], &found);
        /* Held entries are never dropped (pending_seen, expiry): it is there. */
        if (!found)
            continue;
        if (e->holds > 0)
            e->holds--;
        e->acked = true;
        if (now + p->ttl > e->expires)
            e->expires = now + p->ttl;
    }
    pthread_mutex_unlock(&p->mu);
}

void pending_cancel(struct pending *p, size_t n, const char *const *ids, const size_t *lens,
                    const uint64_t *hashes)
{
    pthread_mutex_lock(&p->mu);
    release_locked(p, n, ids, lens, hashes);
    pthread_mutex_unlock(&p->mu);
}

enum pending_result pending_restore(struct pending *p, const char *id, size_t len, uint64_t h,
                                    uint64_t ttl_left, uint64_t now)
{
    uint64_t until = now + (ttl_left < p->ttl ? ttl_left : p->ttl);
    return add_until(p, 1, &id, &len, &h, &until, now, ADD_RESTORE);
}

bool pending_export(struct pending *p, uint64_t now, pending_count_fn count,
                    pending_each_fn each, void *ctx)
{
    bool ok = true;
    uint64_t n = 0, bytes = 0;
    pthread_mutex_lock(&p->mu);
    /* Held entries are not acknowledged (yet, or ever): no snapshot or rewrite may keep them. */
    for (size_t i = 0; i < p->cap; i++)
        if (p->slots[i].id != NULL && p->slots[i].acked && p->slots[i].expires > now) {
            n++;
            bytes += p->slots[i].len;
        }
    ok = count(ctx, n, bytes);
    for (size_t i = 0; ok && i < p->cap; i++) {
        const struct entry *e = &p->slots[i];
        if (e->id != NULL && e->acked && e->expires > now)
            ok = each(ctx, e->id, e->len, e->expires - now);
    }
    pthread_mutex_unlock(&p->mu);
    return ok;
}

enum pending_result pending_add(struct pending *p, const char *id, size_t len, uint64_t h,
                                uint64_t now)
{
    return pending_add_many(p, 1, &id, &len, &h, now);
}

void pending_seen(struct pending *p, const char *id, size_t len, uint64_t h)
{
    if (atomic_load_explicit(&p->count, memory_order_relaxed) == 0)
        return;
    bool found;
    pthread_mutex_lock(&p->mu);
    if (p->cap > 0) {
        struct entry *e = find(p, id, len, h, &found);
        /* A held entry stays for its commit or cancel; a later COPY or its ttl takes it. */
        if (found && e->holds == 0)
            drop(p, e);
    }
    pthread_mutex_unlock(&p->mu);
}

bool pending_holds(struct pending *p, uint64_t h)
{
    if (atomic_load(&p->count) == 0)
        return false;
    bool held = false;
    pthread_mutex_lock(&p->mu);
    size_t mask = p->cap - 1;
    for (size_t i = h & mask; p->cap > 0; i = (i + 1) & mask) {
        struct entry *e = &p->slots[i];
        if (e->id == NULL && !e->dead)
            break;
        if (e->id != NULL && e->h == h) {
            held = true;
            break;
        }
    }
    pthread_mutex_unlock(&p->mu);
    return held;
}

void pending_expire(struct pending *p, uint64_t now)
{
    if (atomic_load_explicit(&p->count, memory_order_relaxed) == 0)
        return;
    pthread_mutex_lock(&p->mu);
    expire_locked(p, now);
    pthread_mutex_unlock(&p->mu);
}

void pending_replay(struct pending *p, struct filter *f)
{
    pthread_mutex_lock(&p->mu);
    /* Held entries reach the filter through their insert, once committed (table.c). */
    for (size_t i = 0; i < p->cap; i++)
        if (p->slots[i].id != NULL && p->slots[i].acked)
            filter_add_hash(f, p->slots[i].h);
    pthread_mutex_unlock(&p->mu);
}

void pending_info(struct pending *p, struct pending_info *out)
{
    out->count = atomic_load(&p->count);
    out->bytes = atomic_load(&p->bytes);
    out->refused = atomic_load(&p->refused);
    out->expired = atomic_load(&p->expired);
    out->limit = p->limit;
    out->max_bytes = p->max_bytes;
    out->ttl = p->ttl;
}
