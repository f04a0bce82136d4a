/*
 * The layers of the stack and its growth (the rules are in filter.h):
 * making a layer from a plan and freeing it, the share of the error budget
 * each layer gets, and adding a layer when an insert finds the newest one
 * full.  Below filter.c (which builds filters from these) and
 * filter_lookup.c (whose inserts call filter_grow).
 */
#include "filter_model.h"
#include "filter_int.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

/* The layer figures of a plan, around words (not yet set). */
struct layer *filter_layer_shell(const struct filter_plan *plan)
{
    struct layer *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return NULL;
    l->kind = plan->kind;
    l->blocks = plan->blocks;
    l->probes = plan->probes;
    for (unsigned w = 0; w < WORDS_PER_BLOCK; w++) {
        unsigned r = probes_in_word(plan->probes, w);
        l->first[w] = r >= 1 ? UINT64_MAX : 0;
        l->second[w] = r >= 2 ? UINT64_MAX : 0;
    }
    l->capacity = plan->capacity;
    l->target_fpp = plan->target_fpp;
    l->map_bytes = (size_t)(plan->blocks * 64u);
    l->share_fpp = plan->target_fpp;
    l->full_bits = UINT64_MAX;
    atomic_init(&l->grow_at, UINT64_MAX);
    atomic_init(&l->items, 0);
    atomic_init(&l->bits_set, 0);
    return l;
}

/* An empty layer `index` of a plan, its bits from a; NULL only on no memory. */
struct layer *filter_layer_new(const struct filter_alloc *a, unsigned index,
                               const struct filter_plan *plan)
{
    struct layer *l = filter_layer_shell(plan);
    if (l == NULL)
        return NULL;
    void *mem = a->alloc(a->ctx, index, plan, l->map_bytes);
    if (mem == NULL) {
        free(l);
        return NULL;
    }
    l->words = mem;
    return l;
}

void filter_layer_free(const struct filter_alloc *a, unsigned index, struct layer *l)
{
    if (l == NULL)
        return;
    if (!l->borrowed)
        a->free(a->ctx, index, (void *)l->words, l->map_bytes);
    free(l);
}

/*
 * The layers share BUDGET_MARGIN x p, not p: a layer's rate estimated from
 * its fill can be a percent or two under what lookups measure (a small
 * layer's blocks are few, and the estimate sees only their mean fill).
 */
#define BUDGET_MARGIN 0.95

/*
 * The share layer i gets, given keep = prod_{j<i} (1 - rate_j) of the layers
 * before it: all of what they left of the budget for the last layer
 * allowed, (1 - r) of it otherwise; 0 when nothing is left.
 */
double filter_share_after(double p, const struct filter_growth *g, unsigned i, double keep)
{
    double left = 1.0 - (1.0 - BUDGET_MARGIN * p) / keep;
    if (i == 0)
        left = BUDGET_MARGIN * p;       /* exactly, not 1 - (1 - x) */
    if (!(left > 0))
        return 0.0;
    return i + 1 >= g->max_layers ? left : (1.0 - g->tightening) * left;
}

/*
 * A load's layer keeps 1/128 of the budget back: at its capacity a layer's
 * rate from its fill is 0.90 p (up to 0.935 p with two probes in a word,
 * k > 8), and the budget is 0.95 p; 0.943 p lets a load run a little past
 * its estimate (0.5% at p 1%) and still leaves a share for the layer that
 * a load far past it needs.
 */
#define LOAD_RESERVE (1.0 / 128.0)

double filter_load_rate(double p)
{
    return BUDGET_MARGIN * p * (1.0 - LOAD_RESERVE);
}

/* The same for layer i of f, from the older layers' measured fill. */
double filter_share_for(const struct filter *f, unsigned i)
{
    double keep = 1.0;
    for (unsigned j = 0; j < i; j++)
        keep *= 1.0 - filter_layer_rate_now(f->layer[j]);
    return filter_share_after(f->target_fpp, &f->growth, i, keep);
}

/*
 * Add layer n on top of f's n layers: sized for expansion x the items so
 * far, at its share of what is left of the budget.  Caller holds grow_mu.
 * False when it cannot: no share left (or below FILTER_MIN_LAYER_FPP), too
 * large, no memory.
 */
static bool grow_locked(struct filter *f, unsigned n)
{
    double share = filter_share_for(f, n);
    uint64_t items = 0;
    for (unsigned i = 0; i < n; i++)
        items += atomic_load_explicit(&f->layer[i]->items, memory_order_relaxed);
    double want = ceil(f->growth.expansion * (double)items);
    if (want < 1)
        want = 1;
    if (want > (double)FILTER_MAX_ITEMS)
        want = (double)FILTER_MAX_ITEMS;
    struct filter_plan plan;
    struct layer *l;
    if (share < FILTER_MIN_LAYER_FPP
        || filter_plan_layer_kind(f->kind, (uint64_t)want, share, &plan) != FILTER_OK
        || (l = filter_layer_new(&f->alloc, n, &plan)) == NULL) {
        atomic_store(&f->blocked, true);
        return false;
    }
    filter_layer_set_share(l, share);
    atomic_store(&f->blocked, false);
    filter_publish_layer(f, n, l);
    return true;
}

/*
 * The newest of n layers has taken its share: add a layer unless another
 * thread did meanwhile.  Every insert that finds the layer full comes here
 * and waits for the lock, so that none overfills it while the next one is
 * being sized (a few milliseconds); then all go on into the new layer.
 * On failure, try again only after 1/64 of the layer's bits more are set,
 * not at every insert.
 */
void filter_grow(struct filter *f, unsigned n)
{
    pthread_mutex_lock(&f->grow_mu);
    struct layer *top = f->layer[n - 1];
    uint64_t set = atomic_load_explicit(&top->bits_set, memory_order_relaxed);
    if (atomic_load_explicit(&f->nlayers, memory_order_relaxed) == n
        && set >= atomic_load_explicit(&top->grow_at, memory_order_relaxed)
        && !grow_locked(f, n))
        atomic_store_explicit(&top->grow_at, set + top->blocks * FILTER_BLOCK_BITS / 64 + 1,
                              memory_order_relaxed);
    pthread_mutex_unlock(&f->grow_mu);
}
