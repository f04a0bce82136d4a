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

struct entry {
    uint64_t h;
    char *id;                   /* NULL: free (never used, or deleted if dead) */
    size_t len;
    bool dead;                  /* a tombstone: keeps probe chains intact */
};

struct pending {
    pthread_mutex_t mu;
    struct entry *slots;
    size_t cap;                 /* power of two */
    size_t used;                /* live + tombstones */
    uint64_t limit;
    _Atomic uint64_t count;
    _Atomic uint64_t dropped;
};

struct pending *pending_new(uint64_t limit)
{
    struct pending *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return NULL;
    pthread_mutex_init(&p->mu, NULL);
    p->limit = limit;
    atomic_init(&p->count, 0);
    atomic_init(&p->dropped, 0);
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

/* The slot holding id, or the first free one on its probe path.  Caller locks. */
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

bool pending_add(struct pending *p, const char *id, size_t len, uint64_t h)
{
    bool ok = false, found;
    pthread_mutex_lock(&p->mu);
    if ((p->used + 1) * 4 > p->cap * 3 && !grow(p))
        goto out;
    struct entry *e = find(p, id, len, h, &found);
    if (found) {
        ok = true;
        goto out;
    }
    if (atomic_load(&p->count) >= p->limit)
        goto out;
    char *copy = malloc(len ? len : 1);
    if (copy == NULL)
        goto out;
    memcpy(copy, id, len);
    if (!e->dead)
        p->used++;
    *e = (struct entry){ h, copy, len, false };
    atomic_fetch_add(&p->count, 1);
    ok = true;
out:
    pthread_mutex_unlock(&p->mu);
    if (!ok)
        atomic_fetch_add(&p->dropped, 1);
    return ok;
}

void pending_seen(struct pending *p, const char *id, size_t len, uint64_t h)
{
    if (atomic_load_explicit(&p->count, memory_order_relaxed) == 0)
        return;
    bool found;
    pthread_mutex_lock(&p->mu);
    if (p->cap > 0) {
        struct entry *e = find(p, id, len, h, &found);
        if (found) {
            free(e->id);
            *e = (struct entry){ 0, NULL, 0, true };
            atomic_fetch_sub(&p->count, 1);
        }
    }
    pthread_mutex_unlock(&p->mu);
}

void pending_replay(struct pending *p, struct filter *f)
{
    pthread_mutex_lock(&p->mu);
    for (size_t i = 0; i < p->cap; i++)
        if (p->slots[i].id != NULL)
            filter_add_hash(f, p->slots[i].h);
    pthread_mutex_unlock(&p->mu);
}

uint64_t pending_count(struct pending *p)
{
    return atomic_load(&p->count);
}

uint64_t pending_dropped(struct pending *p)
{
    return atomic_load(&p->dropped);
}
