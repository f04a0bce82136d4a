/*
 * The stack of Bloom filter layers as a whole (the rules are in filter.h):
 * building one, adding a layer when the newest is full, and moving the
 * bits in and out (the parameters of a saved filter, views over published
 * ones, the images that snapshots and peers copy).
 */
#include "filter_int.h"

#include <endian.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

const char *filter_strerror(enum filter_error e)
{
    switch (e) {
    case FILTER_OK: return "success";
    case FILTER_EINVAL_FPP:
        return "false-positive rate must be greater than 0.000001 and less than 0.5";
    case FILTER_ETOO_LARGE: return "filter size is out of range";
    case FILTER_ENOMEM: return "not enough memory for the filter";
    case FILTER_EGEOMETRY:
        return "filter geometry is not the one sized for its capacity and false-positive rate";
    case FILTER_EINVAL_GROWTH:
        return "filter growth parameters are out of range";
    case FILTER_EKIND: return "a filter kind this build does not know";
    }
    return "unknown filter error";
}

/* The names of the kinds, by enum filter_kind: one per kind, checked below. */
static const char *const kind_names[] = {
    [FILTER_KIND_BLOCKED] = "blocked",
};
_Static_assert(sizeof kind_names / sizeof kind_names[0] == FILTER_KINDS,
               "each filter kind needs its name in kind_names[]");

bool filter_kind_known(unsigned k)
{
    return k < FILTER_KINDS;
}

const char *filter_kind_name(enum filter_kind kind)
{
    return filter_kind_known(kind) ? kind_names[kind] : NULL;
}

/* ---------------------------------------------------------- building -- */

/* The default allocator: private anonymous memory, zeroed, touched only on use. */
static void *mmap_alloc(void *ctx, unsigned layer, const struct filter_plan *plan, size_t bytes)
{
    (void)ctx;
    (void)layer;
    (void)plan;
    void *mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED)
        return NULL;
#ifdef MADV_HUGEPAGE
    if (bytes >= (size_t)2 << 20)
        (void)madvise(mem, bytes, MADV_HUGEPAGE);   /* fewer TLB misses */
#endif
    return mem;
}

static void mmap_free(void *ctx, unsigned layer, void *mem, size_t bytes)
{
    (void)ctx;
    (void)layer;
    munmap(mem, bytes);
}

static const struct filter_alloc default_alloc = { mmap_alloc, mmap_free, NULL, NULL };

/* The layer figures of a plan, around words (not yet set). */
static struct layer *layer_shell(const struct filter_plan *plan)
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
static struct layer *layer_new(const struct filter_alloc *a, unsigned index,
                               const struct filter_plan *plan)
{
    struct layer *l = layer_shell(plan);
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

static void layer_free(const struct filter_alloc *a, unsigned index, struct layer *l)
{
    if (l == NULL)
        return;
    if (!l->borrowed)
        a->free(a->ctx, index, (void *)l->words, l->map_bytes);
    free(l);
}

/*
 * The lookup a filter of f's kind takes (filter_lookup.c branches on it
 * once per call), decided here where filters are made: SIMD where the
 * kind has it and the CPU does.
 */
void filter_lookup_choose(struct filter *f, bool simd)
{
    bool avx2 = false;
#if defined(__x86_64__)
    avx2 = simd && __builtin_cpu_supports("avx2");
#else
    (void)simd;
#endif
    f->lookup = LOOKUP_BLOCKED;
    switch (f->kind) {
    case FILTER_KIND_BLOCKED:
        f->lookup = avx2 ? LOOKUP_BLOCKED_AVX2 : LOOKUP_BLOCKED;
        break;
    case FILTER_KINDS:
        break;
    }
}

/* A filter around an empty layer 0 (taken over, freed on failure), its layers from a. */
static struct filter *filter_around(struct layer *l0, double p, const struct filter_growth *g,
                                    const struct filter_alloc *a)
{
    struct filter *f = calloc(1, sizeof(*f));
    if (f == NULL) {
        layer_free(a, 0, l0);
        return NULL;
    }
    f->kind = l0->kind;
    filter_lookup_choose(f, true);
    f->alloc = *a;
    f->target_fpp = p;
    f->growth = *g;
    pthread_mutex_init(&f->grow_mu, NULL);
    atomic_init(&f->blocked, false);
    f->layer[0] = l0;
    atomic_init(&f->nlayers, 1);
    return f;
}

/* An allocator that will serve no filter: its owner learns it now. */
static void alloc_done(const struct filter_alloc *a)
{
    if (a->done)
        a->done(a->ctx);
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
static double share_after(double p, const struct filter_growth *g, unsigned i, double keep)
{
    double left = 1.0 - (1.0 - BUDGET_MARGIN * p) / keep;
    if (i == 0)
        left = BUDGET_MARGIN * p;       /* exactly, not 1 - (1 - x) */
    if (!(left > 0))
        return 0.0;
    return i + 1 >= g->max_layers ? left : (1.0 - g->tightening) * left;
}

/* The same for layer i of f, from the older layers' measured fill. */
static double share_for(const struct filter *f, unsigned i)
{
    double keep = 1.0;
    for (unsigned j = 0; j < i; j++)
        keep *= 1.0 - filter_layer_rate_now(f->layer[j]);
    return share_after(f->target_fpp, &f->growth, i, keep);
}

struct filter *filter_new_with(enum filter_kind kind, uint64_t n, double p,
                               const struct filter_growth *g, const struct filter_alloc *a,
                               enum filter_error *err)
{
    struct filter_plan plan;
    struct filter *f = NULL;
    struct layer *l0 = NULL;
    const struct filter_growth def = FILTER_GROWTH_DEFAULT;
    if (g == NULL)
        g = &def;
    if (a == NULL)
        a = &default_alloc;
    enum filter_error e = filter_growth_valid(g) ? filter_plan_kind(kind, n, p, &plan)
                                                 : FILTER_EINVAL_GROWTH;
    if (e == FILTER_OK && ((l0 = layer_new(a, 0, &plan)) == NULL
                           || (f = filter_around(l0, p, g, a)) == NULL))
        e = FILTER_ENOMEM;
    if (f != NULL)
        filter_layer_set_share(l0, share_for(f, 0));
    else
        alloc_done(a);
    if (err)
        *err = e;
    return f;
}

struct filter *filter_new_growing(uint64_t n, double p, const struct filter_growth *g,
                                  enum filter_error *err)
{
    return filter_new_with(FILTER_KIND_BLOCKED, n, p, g, NULL, err);
}

struct filter *filter_new(uint64_t n, double p, enum filter_error *err)
{
    return filter_new_growing(n, p, NULL, err);
}

bool filter_set_growth(struct filter *f, const struct filter_growth *g)
{
    if (!filter_growth_valid(g))
        return false;
    f->growth = *g;
    unsigned n = atomic_load(&f->nlayers);
    filter_layer_set_share(f->layer[n - 1], share_for(f, n - 1));
    atomic_store(&f->blocked, false);
    return true;
}

void filter_get_growth(const struct filter *f, struct filter_growth *out)
{
    *out = f->growth;
}

enum filter_kind filter_kind(const struct filter *f)
{
    return f->kind;
}

void filter_free(struct filter *f)
{
    if (f == NULL)
        return;
    unsigned n = atomic_load(&f->nlayers);
    for (unsigned i = 0; i < n; i++)
        layer_free(&f->alloc, i, f->layer[i]);
    pthread_mutex_destroy(&f->grow_mu);
    struct filter_alloc a = f->alloc;
    free(f);
    alloc_done(&a);
}

/*
 * Add layer n on top of f's n layers: sized for expansion x the items so
 * far, at its share of what is left of the budget.  Caller holds grow_mu.
 * False when it cannot: no share left (or below FILTER_MIN_LAYER_FPP), too
 * large, no memory.
 */
static bool grow_locked(struct filter *f, unsigned n)
{
    double share = share_for(f, n);
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
        || (l = layer_new(&f->alloc, n, &plan)) == NULL) {
        atomic_store(&f->blocked, true);
        return false;
    }
    filter_layer_set_share(l, share);
    f->layer[n] = l;
    atomic_store(&f->blocked, false);
    atomic_store_explicit(&f->nlayers, n + 1, memory_order_release);
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
/* --------------------------------------------------------- serialising -- */

void filter_export(const struct filter *f, struct filter_params *out)
{
    unsigned n = atomic_load_explicit(&((struct filter *)f)->nlayers, memory_order_acquire);
    memset(out, 0, sizeof(*out));
    out->kind = f->kind;
    out->target_fpp = f->target_fpp;
    /* Field by field: the struct's padding is the caller's stack, and images are compared. */
    out->growth.expansion = f->growth.expansion;
    out->growth.tightening = f->growth.tightening;
    out->growth.max_layers = f->growth.max_layers;
    out->layers = n;
    for (unsigned i = 0; i < n; i++) {
        struct layer *l = f->layer[i];
        out->layer[i] = (struct filter_layer_params){
            .capacity = l->capacity, .target_fpp = l->target_fpp, .share_fpp = l->share_fpp,
            .blocks = l->blocks, .probes = l->probes,
            .items = atomic_load_explicit(&l->items, memory_order_relaxed),
        };
    }
}

/*
 * Geometry is checked against filter_plan itself rather than against bounds
 * of its own: one rule in one place, and a filter read back behaves (rate,
 * growth, lookups) exactly like one this build sized.
 */
static enum filter_error check_params(const struct filter_params *p, double share[],
                                      struct filter_plan plan[])
{
    double p0 = p->target_fpp;
    /* First: another kind's geometry means nothing to the checks below. */
    if (!filter_kind_known(p->kind))
        return FILTER_EKIND;
    if (!(p0 > FILTER_MIN_FPP && p0 < FILTER_MAX_FPP))
        return FILTER_EINVAL_FPP;
    if (!filter_growth_valid(&p->growth))
        return FILTER_EINVAL_GROWTH;
    if (p->layers < 1 || p->layers > FILTER_MAX_LAYERS)
        return FILTER_EGEOMETRY;
    double keep = 1.0;          /* prod (1 - share) so far */
    for (unsigned i = 0; i < p->layers; i++) {
        const struct filter_layer_params *l = &p->layer[i];
        enum filter_error e = filter_plan_layer_kind(p->kind, l->capacity, l->target_fpp, &plan[i]);
        if (e != FILTER_OK)
            return e;
        if (plan[i].blocks != l->blocks || plan[i].probes != l->probes)
            return FILTER_EGEOMETRY;
        /* The count goes on growing with every insert: it must start within bounds. */
        if (l->items > FILTER_MAX_ITEMS)
            return FILTER_ETOO_LARGE;
        if ((i == 0 && l->target_fpp != p0) || l->target_fpp > p0
            || !(l->share_fpp >= 0 && l->share_fpp <= p0))
            return FILTER_EGEOMETRY;
        share[i] = l->share_fpp;
        /* 0: as filter_new_growing gives it, the older layers taken at their shares. */
        if (share[i] == 0 && !((share[i] = share_after(p0, &p->growth, i, keep)) > 0))
            return FILTER_EGEOMETRY;
        keep *= 1.0 - share[i];
    }
    /* The compound of the shares is the promise: never above p (rounding aside). */
    if (1.0 - keep > p0 * (1.0 + 1e-9))
        return FILTER_EGEOMETRY;
    return FILTER_OK;
}

struct filter *filter_new_from_with(const struct filter_params *p, const struct filter_alloc *a,
                                    enum filter_error *err)
{
    double share[FILTER_MAX_LAYERS];
    struct filter_plan plan[FILTER_MAX_LAYERS];
    struct filter *f = NULL;
    if (a == NULL)
        a = &default_alloc;
    enum filter_error e = check_params(p, share, plan);
    for (unsigned i = 0; e == FILTER_OK && i < p->layers; i++) {
        const struct filter_layer_params *lp = &p->layer[i];
        struct layer *l = layer_new(i == 0 ? a : &f->alloc, i, &plan[i]);
        if (l == NULL || (i == 0 && (f = filter_around(l, p->target_fpp, &p->growth, a)) == NULL)) {
            if (i > 0)
                layer_free(&f->alloc, i, l);
            e = FILTER_ENOMEM;
            break;
        }
        l->share_fpp = share[i];
        atomic_store_explicit(&l->items, lp->items, memory_order_relaxed);
        f->layer[i] = l;
        atomic_store(&f->nlayers, i + 1);
    }
    if (e == FILTER_OK) {
        struct layer *top = f->layer[p->layers - 1];
        filter_layer_set_share(top, top->share_fpp);
    } else {
        if (f == NULL)
            alloc_done(a);
        filter_free(f);
        f = NULL;
    }
    if (err)
        *err = e;
    return f;
}

struct filter *filter_new_from(const struct filter_params *p, enum filter_error *err)
{
    return filter_new_from_with(p, NULL, err);
}

/* ---------------------------------------------------------------- views -- */

/* A layer of a view over words, or NULL when the geometry is not one a filter has. */
static struct layer *view_layer(enum filter_kind kind, uint64_t blocks, unsigned probes,
                                const void *words)
{
    if (!filter_kind_known(kind) || blocks < 1 || blocks > FILTER_MAX_BYTES / FILTER_BLOCK_BYTES
        || probes < 1 || probes > MAX_PROBES || words == NULL || (uintptr_t)words % 64 != 0)
        return NULL;
    struct filter_plan plan = { .kind = kind, .blocks = blocks,
                                .bits = blocks * FILTER_BLOCK_BITS, .probes = probes };
    struct layer *l = layer_shell(&plan);
    if (l == NULL)
        return NULL;
    l->words = (_Atomic uint64_t *)(uintptr_t)words;
    l->borrowed = true;
    return l;
}

struct filter *filter_view_new(enum filter_kind kind, double target_fpp, uint64_t blocks,
                               unsigned probes, const void *words)
{
    struct layer *l0 = view_layer(kind, blocks, probes, words);
    if (l0 == NULL)
        return NULL;
    struct filter_growth g = FILTER_GROWTH_DEFAULT;
    g.max_layers = FILTER_MAX_LAYERS;
    struct filter *f = filter_around(l0, target_fpp, &g, &default_alloc);
    if (f != NULL)
        f->view = true;
    return f;
}

bool filter_view_add(struct filter *f, uint64_t blocks, unsigned probes, const void *words)
{
    unsigned n = atomic_load_explicit(&f->nlayers, memory_order_relaxed);
    if (!f->view || n >= FILTER_MAX_LAYERS)
        return false;
    struct layer *l = view_layer(f->kind, blocks, probes, words);
    if (l == NULL)
        return false;
    f->layer[n] = l;
    /* As grow_locked: a lookup that reads the new count sees the whole layer. */
    atomic_store_explicit(&f->nlayers, n + 1, memory_order_release);
    return true;
}

unsigned filter_layers(const struct filter *f)
{
    return atomic_load_explicit(&((struct filter *)f)->nlayers, memory_order_acquire);
}

/* Layer i of f if it has one, and whether [offset, offset + len) lies inside its image. */
static struct layer *image_of(const struct filter *f, unsigned i, uint64_t offset, size_t len)
{
    if (i >= atomic_load_explicit(&((struct filter *)f)->nlayers, memory_order_acquire))
        return NULL;
    struct layer *l = f->layer[i];
    uint64_t size = l->blocks * FILTER_BLOCK_BYTES;
    return offset <= size && (uint64_t)len <= size - offset ? l : NULL;
}

bool filter_bits_read(const struct filter *f, unsigned layer, uint64_t offset, void *buf,
                      size_t len)
{
    const struct layer *l = image_of(f, layer, offset, len);
    if (l == NULL)
        return false;
    unsigned char *out = buf;
    while (len > 0) {
        /* One whole-word atomic load per word: never a torn word. */
        uint64_t w = atomic_load_explicit(&l->words[offset / 8], memory_order_acquire);
        uint64_t le = htole64(w);
        size_t at = (size_t)(offset % 8), n = 8 - at;
        if (n > len)
            n = len;
        memcpy(out, (const unsigned char *)&le + at, n);
        out += n;
        offset += n;
        len -= n;
    }
    return true;
}

bool filter_bits_write(struct filter *f, unsigned layer, uint64_t offset, const void *buf,
                       size_t len)
{
    struct layer *l = image_of(f, layer, offset, len);
    if (l == NULL)
        return false;
    const unsigned char *in = buf;
    uint64_t added = 0;
    while (len > 0) {
        size_t at = (size_t)(offset % 8), n = 8 - at;
        if (n > len)
            n = len;
        uint64_t le = 0;
        memcpy((unsigned char *)&le + at, in, n);
        uint64_t w = le64toh(le);
        if (w != 0) {
            uint64_t old = atomic_fetch_or_explicit(&l->words[offset / 8], w,
                                                    memory_order_release);
            added += (uint64_t)__builtin_popcountll(w & ~old);
        }
        in += n;
        offset += n;
        len -= n;
    }
    atomic_fetch_add_explicit(&l->bits_set, added, memory_order_relaxed);
    return true;
}
