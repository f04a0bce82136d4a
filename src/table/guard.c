/*
 * Read-copy-update for the served filter: lookups and inserts run in rcu.h
 * read sections (two atomic adds, no locks); a writer that replaces a
 * filter waits for a grace period before it frees anything.
 */
#include "guard.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "rcu.h"

struct guard {
    _Atomic(struct filter *) live;
    _Atomic(struct filter *) next;
    atomic_bool bulk;           /* next is being bulk-loaded: use the backlog */
    pthread_mutex_t backlog_mu;
    uint64_t *backlog;          /* hashes added while bulk, for next */
    size_t backlog_n, backlog_cap;
    bool backlog_oom;
    struct rcu rcu;             /* readers of live and next */
};

struct guard *guard_new(void)
{
    struct guard *g = aligned_alloc(64, sizeof(struct guard));
    if (g == NULL)
        return NULL;
    atomic_init(&g->live, NULL);
    atomic_init(&g->next, NULL);
    atomic_init(&g->bulk, false);
    g->backlog = NULL;
    g->backlog_n = g->backlog_cap = 0;
    g->backlog_oom = false;
    pthread_mutex_init(&g->backlog_mu, NULL);
    if (!rcu_init(&g->rcu)) {
        pthread_mutex_destroy(&g->backlog_mu);
        free(g);
        return NULL;
    }
    return g;
}

void guard_free(struct guard *g)
{
    if (g == NULL)
        return;
    filter_free(atomic_load(&g->live));
    filter_free(atomic_load(&g->next));
    free(g->backlog);
    pthread_mutex_destroy(&g->backlog_mu);
    rcu_destroy(&g->rcu);
    free(g);
}

enum guard_answer guard_lookup(struct guard *g, const void *key, size_t len)
{
    uint64_t h = filter_hash(key, len);
    struct rcu_read t = rcu_read_enter(&g->rcu);
    struct filter *f = atomic_load_explicit(&g->live, memory_order_acquire);
    enum guard_answer a = f == NULL ? GUARD_NOT_READY
                        : filter_contains_hash(f, h) ? GUARD_MAYBE : GUARD_ABSENT;
    rcu_read_exit(t);
    return a;
}

struct rcu_read guard_read_enter(struct guard *g, const struct filter **live)
{
    struct rcu_read t = rcu_read_enter(&g->rcu);
    *live = atomic_load_explicit(&g->live, memory_order_acquire);
    return t;
}

void guard_read_exit(struct rcu_read r)
{
    rcu_read_exit(r);
}

static void backlog_push(struct guard *g, uint64_t h)
{
    pthread_mutex_lock(&g->backlog_mu);
    if (g->backlog_n == g->backlog_cap) {
        size_t nc = g->backlog_cap ? g->backlog_cap * 2 : 4096;
        uint64_t *nb = realloc(g->backlog, nc * sizeof(*nb));
        if (nb == NULL) {
            g->backlog_oom = true;
            pthread_mutex_unlock(&g->backlog_mu);
            return;
        }
        g->backlog = nb;
        g->backlog_cap = nc;
    }
    g->backlog[g->backlog_n++] = h;
    pthread_mutex_unlock(&g->backlog_mu);
}

static void backlog_clear(struct guard *g)
{
    pthread_mutex_lock(&g->backlog_mu);
    free(g->backlog);
    g->backlog = NULL;
    g->backlog_n = g->backlog_cap = 0;
    g->backlog_oom = false;
    pthread_mutex_unlock(&g->backlog_mu);
}

bool guard_add(struct guard *g, const void *key, size_t len)
{
    return guard_add_hash(g, filter_hash(key, len));
}

bool guard_add_hash(struct guard *g, uint64_t h)
{
    struct rcu_read t = rcu_read_enter(&g->rcu);
    /*
     * next before live: guard_commit stores live = next before clearing next,
     * so a reader that finds next already cleared is sure to find the new live.
     */
    struct filter *n = atomic_load_explicit(&g->next, memory_order_acquire);
    struct filter *f = atomic_load_explicit(&g->live, memory_order_acquire);
    if (n != NULL && atomic_load(&g->bulk))
        backlog_push(g, h);
    else if (n != NULL)
        filter_add_hash(n, h);
    if (f != NULL && f != n)
        filter_add_hash(f, h);
    rcu_read_exit(t);
    return n != NULL || f != NULL;
}

void guard_begin(struct guard *g, struct filter *next)
{
    struct filter *old = atomic_exchange(&g->next, next);
    /* Inserts that started before the store may have missed next: wait them out. */
    rcu_synchronize(&g->rcu);
    filter_free(old);          /* only if a caller broke the protocol */
}

void guard_begin_bulk(struct guard *g, struct filter *next)
{
    backlog_clear(g);
    /* Set before next is published: an insert that finds next sees bulk. */
    atomic_store(&g->bulk, true);
    guard_begin(g, next);
}

void guard_replace_bulk(struct guard *g, struct filter *next)
{
    struct filter *old = atomic_exchange(&g->next, next);
    /* Inserts that found the old one only compared it with live: wait them out. */
    rcu_synchronize(&g->rcu);
    filter_free(old);
}

bool guard_end_bulk(struct guard *g)
{
    atomic_store(&g->bulk, false);
    /* Every insert that chose the backlog has finished appending. */
    rcu_synchronize(&g->rcu);
    struct filter *next = atomic_load(&g->next);
    pthread_mutex_lock(&g->backlog_mu);
    bool ok = !g->backlog_oom;
    for (size_t i = 0; next != NULL && i < g->backlog_n; i++)
        filter_add_hash(next, g->backlog[i]);       /* others write next now too */
    pthread_mutex_unlock(&g->backlog_mu);
    backlog_clear(g);
    return ok;
}

void guard_commit(struct guard *g)
{
    struct filter *next = atomic_load(&g->next);
    if (next == NULL)
        return;
    struct filter *old = atomic_exchange(&g->live, next);
    atomic_store(&g->next, NULL);
    rcu_synchronize(&g->rcu);
    filter_free(old);
}

void guard_abort(struct guard *g)
{
    struct filter *next = atomic_exchange(&g->next, NULL);
    rcu_synchronize(&g->rcu);
    atomic_store(&g->bulk, false);
    backlog_clear(g);
    filter_free(next);
}

bool guard_ready(struct guard *g)
{
    return atomic_load_explicit(&g->live, memory_order_acquire) != NULL;
}

bool guard_writable(struct guard *g)
{
    return atomic_load(&g->live) != NULL || atomic_load(&g->next) != NULL;
}

static bool info_of(struct guard *g, _Atomic(struct filter *) *slot, struct filter_info *out)
{
    struct rcu_read t = rcu_read_enter(&g->rcu);
    struct filter *f = atomic_load(slot);
    if (f != NULL)
        filter_info(f, out);
    rcu_read_exit(t);
    return f != NULL;
}

bool guard_info(struct guard *g, struct filter_info *out)
{
    return info_of(g, &g->live, out);
}

bool guard_next_info(struct guard *g, struct filter_info *out)
{
    return info_of(g, &g->next, out);
}

bool guard_saturated(struct guard *g)
{
    struct rcu_read t = rcu_read_enter(&g->rcu);
    struct filter *f = atomic_load_explicit(&g->live, memory_order_acquire);
    bool s = f != NULL && filter_saturated(f);
    rcu_read_exit(t);
    return s;
}

unsigned guard_layers(struct guard *g, struct filter_layer_info *out, unsigned cap)
{
    struct rcu_read t = rcu_read_enter(&g->rcu);
    struct filter *f = atomic_load(&g->live);
    unsigned n = 0;
    while (f != NULL && n < cap && filter_layer_info(f, n, &out[n]))
        n++;
    rcu_read_exit(t);
    return n;
}

const struct filter *guard_live(struct guard *g)
{
    return atomic_load_explicit(&g->live, memory_order_acquire);
}

void guard_with_live(struct guard *g, void (*fn)(void *arg, const struct filter *f), void *arg)
{
    struct rcu_read t = rcu_read_enter(&g->rcu);
    fn(arg, atomic_load_explicit(&g->live, memory_order_acquire));
    rcu_read_exit(t);
}
