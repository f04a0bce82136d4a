/*
 * The configuration in force as an RCU-published pointer.  A generation is
 * immutable once published, so a reader needs nothing but the pointer; the
 * writer swaps the pointer, waits one grace period and frees the old one.
 * Reference counts would put every request on one shared cache line (or a
 * lock); the striped read sections of rcu.c do not.
 */
#include "live.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "token.h"

struct gen {
    struct config cfg;
    char *admin_token;
};

struct live {
    _Atomic(struct gen *) cur;
    struct rcu rcu;
};

static struct gen *gen_new(struct config *cfg, char *admin_token)
{
    struct gen *g = malloc(sizeof *g);
    if (g == NULL)
        return NULL;
    g->cfg = *cfg;                      /* the strings move with the struct */
    memset(cfg, 0, sizeof *cfg);
    g->admin_token = admin_token;
    return g;
}

static void gen_free(struct gen *g)
{
    if (g == NULL)
        return;
    config_free(&g->cfg);
    token_free(g->admin_token);
    free(g);
}

struct live *live_new(struct config *cfg, char *admin_token)
{
    struct live *l = aligned_alloc(64, sizeof(struct live));
    struct gen *g;

    if (l == NULL)
        return NULL;
    if (!rcu_init(&l->rcu)) {
        free(l);
        return NULL;
    }
    g = gen_new(cfg, admin_token);
    if (g == NULL) {
        rcu_destroy(&l->rcu);
        free(l);
        return NULL;
    }
    atomic_init(&l->cur, g);
    return l;
}

void live_free(struct live *l)
{
    if (l == NULL)
        return;
    gen_free(atomic_load(&l->cur));
    rcu_destroy(&l->rcu);
    free(l);
}

struct live_view live_enter(struct live *l)
{
    struct live_view v;
    v.t = rcu_read_enter(&l->rcu);
    struct gen *g = atomic_load_explicit(&l->cur, memory_order_acquire);
    v.cfg = &g->cfg;
    v.admin_token = g->admin_token;
    return v;
}

void live_exit(struct live_view v)
{
    rcu_read_exit(v.t);
}

const struct config *live_current(const struct live *l)
{
    return &atomic_load_explicit(&l->cur, memory_order_relaxed)->cfg;
}

const char *live_current_token(const struct live *l)
{
    return atomic_load_explicit(&l->cur, memory_order_relaxed)->admin_token;
}

bool live_publish(struct live *l, struct config *cfg, char *admin_token)
{
    struct gen *g = gen_new(cfg, admin_token);
    if (g == NULL)
        return false;
    struct gen *old = atomic_exchange_explicit(&l->cur, g, memory_order_acq_rel);
    rcu_synchronize(&l->rcu);
    gen_free(old);
    return true;
}
