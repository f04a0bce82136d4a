/*
 * A replica's journal of acknowledged POSTs (fleetjournal.h): an open
 * addressing table of key hash -> expiry, grown by doubling up to its
 * limit, purged of expired keys when full.
 */
#include "fleetjournal.h"

#include <stdlib.h>
#include <string.h>

struct slot {
    uint64_t h;
    uint64_t until;                 /* 0: empty */
};

struct fleetjournal {
    uint64_t limit;
    struct slot *slots;
    size_t cap;                     /* a power of two, or 0 */
    uint64_t count, refused;
};

struct fleetjournal *fleetjournal_new(uint64_t limit)
{
    struct fleetjournal *j = calloc(1, sizeof *j);
    if (j != NULL)
        j->limit = limit;
    return j;
}

void fleetjournal_free(struct fleetjournal *j)
{
    if (j == NULL)
        return;
    free(j->slots);
    free(j);
}

/* The slot of h, or the empty one where it goes. */
static struct slot *find(struct slot *slots, size_t cap, uint64_t h)
{
    size_t i = (size_t)(h ^ (h >> 29)) & (cap - 1);
    while (slots[i].until != 0 && slots[i].h != h)
        i = (i + 1) & (cap - 1);
    return &slots[i];
}

/* Rebuild into cap slots, keeping the keys live at now. */
static bool rehash(struct fleetjournal *j, size_t cap, uint64_t now)
{
    struct slot *s = calloc(cap, sizeof *s);
    if (s == NULL)
        return false;
    uint64_t n = 0;
    for (size_t i = 0; i < j->cap; i++)
        if (j->slots[i].until > now) {
            *find(s, cap, j->slots[i].h) = j->slots[i];
            n++;
        }
    free(j->slots);
    j->slots = s;
    j->cap = cap;
    j->count = n;
    return true;
}

bool fleetjournal_add(struct fleetjournal *j, uint64_t h, uint64_t ttl, uint64_t now)
{
    uint64_t until = now + (ttl ? ttl : 1);
    if (j->cap > 0) {
        struct slot *s = find(j->slots, j->cap, h);
        if (s->until != 0) {
            if (s->until < until)
                s->until = until;
            return true;
        }
    }
    /* At the limit: only the expired can make room. */
    if (j->count + 1 > j->limit && j->cap > 0)
        rehash(j, j->cap, now);
    if (j->count + 1 > j->limit) {
        j->refused++;
        return false;
    }
    /* Keep the load under a half: drop the expired first, then grow. */
    if ((j->count + 1) * 2 > j->cap) {
        if (j->cap > 0)
            rehash(j, j->cap, now);
        size_t cap = j->cap ? j->cap : 64;
        while ((j->count + 1) * 2 > cap)
            cap *= 2;
        if (j->count + 1 > j->limit || (cap != j->cap && !rehash(j, cap, now))) {
            j->refused++;
            return false;
        }
    }
    struct slot *s = find(j->slots, j->cap, h);
    *s = (struct slot){ h, until };
    j->count++;
    return true;
}

void fleetjournal_each(struct fleetjournal *j, uint64_t now, void (*fn)(void *arg, uint64_t h),
                       void *arg)
{
    if (j->cap > 0)
        rehash(j, j->cap, now);     /* the expired go first (out of memory: kept a while longer) */
    for (size_t i = 0; i < j->cap; i++)
        if (j->slots[i].until > now)
            fn(arg, j->slots[i].h);
}

uint64_t fleetjournal_count(const struct fleetjournal *j)
{
    return j->count;
}

uint64_t fleetjournal_refused(const struct fleetjournal *j)
{
    return j->refused;
}
