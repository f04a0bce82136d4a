/*
 * The stack of Bloom filter layers as a whole (the rules are in filter.h):
 * building one (its layers and growth are filter_grow.c's), and moving the
 * bits in and out (the parameters of a saved filter, views over published
 * ones, the images that snapshots and peers copy).
 */
#include "filter.h"
#include "filter_int.h"
#include "bigmap.h"

#include <endian.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>

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

/* The names of the kinds, by enum filter_kind (FILTER_KIND_LIST). */
static const char *const kind_names[] = {
#define KIND_NAME(id, number, name) [id] = (name),
    FILTER_KIND_LIST(KIND_NAME)
#undef KIND_NAME
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

/*
 * The default allocator: private anonymous memory, zeroed, touched only on
 * use, on 2 MiB boundaries (bigmap.h): lookups land anywhere in a layer,
 * and a layer's 4 KiB pages cost them page walks that its huge pages do not.
 */
static void *mmap_alloc(void *ctx, unsigned layer, const struct filter_plan *plan, size_t bytes)
{
    (void)ctx;
    (void)layer;
    (void)plan;
    return bigmap_new(bytes);
}

static void mmap_free(void *ctx, unsigned layer, void *mem, size_t bytes)
{
    (void)ctx;
    (void)layer;
    bigmap_free(mem, bytes);
}

static const struct filter_alloc default_alloc = { mmap_alloc, mmap_free, NULL, NULL };

/* A filter around an empty layer 0 (taken over, freed on failure), its layers from a. */
static struct filter *filter_around(struct layer *l0, double p, const struct filter_growth *g,
                                    const struct filter_alloc *a)
{
    struct filter *f = calloc(1, sizeof(*f));
    if (f == NULL) {
        filter_layer_free(a, 0, l0);
        return NULL;
    }
    f->kind = l0->kind;
    filter_lookup_choose(f, true);
    f->alloc = *a;
    f->target_fpp = p;
    f->growth = *g;
    pthread_mutex_init(&f->grow_mu, NULL);
    atomic_init(&f->blocked, false);
    atomic_init(&f->wide, l0->probes > WORDS_PER_BLOCK);
    atomic_init(&f->narrow, l0->probes < WORDS_PER_BLOCK);
    f->layer[0] = l0;
    f->slot[0] = (struct filter_slot){ l0->words, l0->blocks };
    atomic_init(&f->nlayers, 1);
    return f;
}

/* An allocator that will serve no filter: its owner learns it now. */
static void alloc_done(const struct filter_alloc *a)
{
    if (a->done)
        a->done(a->ctx);
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
    if (e == FILTER_OK && ((l0 = filter_layer_new(a, 0, &plan)) == NULL
                           || (f = filter_around(l0, p, g, a)) == NULL))
        e = FILTER_ENOMEM;
    if (f != NULL)
        filter_layer_set_share(l0, filter_share_for(f, 0));
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
    filter_layer_set_share(f->layer[n - 1], filter_share_for(f, n - 1));
    atomic_store(&f->blocked, false);
    return true;
}

void filter_loading(struct filter *f)
{
    struct layer *l = f->layer[0];
    if (atomic_load(&f->nlayers) != 1 || f->growth.max_layers < 2)
        return;
    uint64_t at = filter_layer_bits_at(l, filter_load_rate(f->target_fpp));
    if (at > l->full_bits)
        atomic_store_explicit(&l->grow_at, at, memory_order_relaxed);
}

void filter_loaded(struct filter *f)
{
    pthread_mutex_lock(&f->grow_mu);
    struct layer *l = f->layer[0];
    /* Layer 0 the newest still: from now on it is full at its share, as in any filter. */
    if (atomic_load_explicit(&f->nlayers, memory_order_relaxed) == 1
        && atomic_load_explicit(&l->grow_at, memory_order_relaxed) > l->full_bits)
        atomic_store_explicit(&l->grow_at, l->full_bits, memory_order_relaxed);
    pthread_mutex_unlock(&f->grow_mu);
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
        filter_layer_free(&f->alloc, i, f->layer[i]);
    pthread_mutex_destroy(&f->grow_mu);
    struct filter_alloc a = f->alloc;
    free(f);
    alloc_done(&a);
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
        if (share[i] == 0 && !((share[i] = filter_share_after(p0, &p->growth, i, keep)) > 0))
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
        struct layer *l = filter_layer_new(i == 0 ? a : &f->alloc, i, &plan[i]);
        if (l == NULL || (i == 0 && (f = filter_around(l, p->target_fpp, &p->growth, a)) == NULL)) {
            if (i > 0)
                filter_layer_free(&f->alloc, i, l);
            e = FILTER_ENOMEM;
            break;
        }
        l->share_fpp = share[i];
        atomic_store_explicit(&l->items, lp->items, memory_order_relaxed);
        if (i > 0)
            filter_publish_layer(f, i, l);
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
    struct layer *l = filter_layer_shell(&plan);
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
    /* As grow_locked: a lookup that reads the new count sees the whole layer. */
    filter_publish_layer(f, n, l);
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
