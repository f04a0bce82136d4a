/*
 * Cache-line-blocked Bloom filter layers, and the stack of them that grows
 * in memory (the rules are in filter.h).  Each key hashes once (XXH3) to one
 * 512-bit block and k bit positions inside it per layer, so a lookup reads
 * one cache line per layer and an insert is a handful of atomic ORs on one.
 */
#include "filter.h"

#include <endian.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define XXH_INLINE_ALL
#include <xxhash.h>

#define WORDS_PER_BLOCK (FILTER_BLOCK_BITS / 64u)
#define MAX_PROBES (2u * WORDS_PER_BLOCK)
/*
 * Size for a model rate a little under the target: the measured rate then
 * stays under it with room for sampling noise, without oversizing.
 */
#define SIZING_MARGIN 0.9
/* Bits per key the sizing may choose between. */
#define MIN_BITS_PER_KEY 1.0
#define MAX_BITS_PER_KEY 128.0

/*
 * One blocked Bloom filter.  Everything but the counters and grow_at is
 * written before the layer is published (filter.nlayers) and only read
 * after, except share_fpp and full_bits of the newest layer, which
 * filter_set_growth may change before the filter is shared.
 */
struct layer {
    _Atomic uint64_t *words;      /* blocks * 8 words, 64-byte aligned (the filter's alloc) */
    uint64_t blocks;
    size_t map_bytes;
    bool borrowed;                /* a view's: someone else's memory, never freed here */
    unsigned probes;
    uint64_t first[WORDS_PER_BLOCK];   /* all ones where word w takes >= 1 probe */
    uint64_t second[WORDS_PER_BLOCK];  /* all ones where word w takes 2 probes */
    uint64_t capacity;
    double target_fpp;            /* the rate it was sized for */
    double share_fpp;             /* the rate at which it is full */
    uint64_t full_bits;           /* bits_set at which its estimated rate reaches share_fpp */
    _Atomic uint64_t grow_at;     /* bits_set from which an insert tries to add a layer */
    _Atomic uint64_t items;
    _Atomic uint64_t bits_set;
};

/*
 * Concurrency.  Lookups and inserts take no lock: they read nlayers
 * (acquire) and use layer[0 .. nlayers - 1], which are never changed nor
 * freed while the filter lives.  Adding a layer takes grow_mu: the layer is
 * built, stored in layer[n], and then published by the release store of
 * nlayers = n + 1, so a thread that reads the new count sees a whole layer.
 * The only inserts that take grow_mu are those that find the newest layer
 * full (top_for_insert): they wait for the next one rather than overfill
 * that one while the next is being sized (2 to 13 ms measured on a busy
 * 2-core box, once per growth); lookups never take it.
 *
 * Why no insert is lost when it races with growth: an insert puts its key
 * into the layer that was the newest when it read nlayers.  If a layer is
 * added meanwhile, the key lands in what is now an older layer, but every
 * lookup checks every layer it knows of, and a lookup that happens after
 * filter_add returned reads an nlayers at least as large as the insert read
 * (nlayers only grows; read-read coherence), so it checks that layer too,
 * and sees the bits (the insert's release ORs, the lookup's acquire loads,
 * the caller's synchronisation in between).  The cost of the race is at
 * most one key per inserting thread in a layer that was already full: the
 * next layer's share is computed from the older layers' measured fill, so
 * it pays for them.
 */
struct filter {
    _Atomic unsigned nlayers;          /* >= 1 */
    bool avx2;                         /* lookups may use contains_avx2 */
    bool view;                         /* filter_view_new: read-only, layers borrowed */
    struct filter_alloc alloc;         /* where the layers' bits come from */
    atomic_bool blocked;               /* the last attempt to add a layer could not */
    double target_fpp;
    struct filter_growth growth;
    pthread_mutex_t grow_mu;
    struct layer *layer[FILTER_MAX_LAYERS];
};

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
    }
    return "unknown filter error";
}

/* Murmur3's finaliser: a bijection with full avalanche. */
static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    x *= UINT64_C(0xc4ceb9fe1a85ec53);
    x ^= x >> 33;
    return x;
}

uint64_t filter_block_index(uint64_t h, uint64_t nblocks)
{
    /* Lemire's multiply-shift: uniform over [0, nblocks) for any 64-bit nblocks. */
    return (uint64_t)(((unsigned __int128)h * nblocks) >> 64);
}

uint64_t filter_hash(const void *key, size_t len)
{
    return XXH3_64bits(key, len);
}

/*
 * Split-block layout: the 512-bit block is eight 64-bit words and a key's k
 * probes are dealt round-robin over the words (word w gets k/8 probes, one
 * more for w < k%8).  Each word's mask comes from fixed bit fields of two
 * remixed draws, so building it is straight-line code with no loops over
 * memory.  The block index uses the high bits of h; the draws are bijective
 * remixes, so the two are independent.
 */
static inline void probe_mask(const struct layer *l, uint64_t h, uint64_t mask[WORDS_PER_BLOCK])
{
    uint64_t d1 = mix64(h);
#pragma GCC unroll 8
    for (unsigned w = 0; w < WORDS_PER_BLOCK; w++)
        mask[w] = (UINT64_C(1) << ((d1 >> (6 * w)) & 63)) & l->first[w];
    if (l->probes > WORDS_PER_BLOCK) {      /* p below ~0.1%: a second bit per word */
        uint64_t d2 = mix64(h ^ UINT64_C(0x9e3779b97f4a7c15));
#pragma GCC unroll 8
        for (unsigned w = 0; w < WORDS_PER_BLOCK; w++)
            mask[w] |= (UINT64_C(1) << ((d2 >> (6 * w)) & 63)) & l->second[w];
    }
}

/* Probes word w of a block receives when a key sets k bits. */
static inline unsigned probes_in_word(unsigned k, unsigned w)
{
    return k / WORDS_PER_BLOCK + (w < k % WORDS_PER_BLOCK);
}

/*
 * The rate of lambda keys per block on average.  Keys per block are
 * Poisson(lambda).  In a block holding j keys, a word that gets r probes per
 * key has each bit set with probability q = 1 - (1 - 1/64)^(jr), and a
 * foreign key finds all its r bits there set with probability q^r; the
 * words are independent.  That is the sizing model (filter_plan, and so
 * every geometry ever stored), and it is a little optimistic when r = 2:
 * the key's two bits coincide one time in 64.  exact counts that: the two
 * bits are set with probability q/64 + 63/64 (1 - 2 (63/64)^(jr) +
 * (62/64)^(jr)): 3% more at k = 16, p 1.25e-4, as lookups measure it
 * (1.160e-4 over 1.2 x 10^8 absent keys; the sizing model says 1.125e-4).
 * The estimates from fill, and so the shares, use that.
 */
static double model_at(double lambda, unsigned k, bool exact)
{
    if (k == 0)
        return 1.0;
    if (lambda <= 0)
        return 0.0;
    double log_keep = log1p(-1.0 / 64.0), log_keep2 = log1p(-2.0 / 64.0);
    double jmax = lambda + 12.0 * sqrt(lambda) + 40.0;
    double logp = -lambda;                  /* log Poisson(0) */
    double sum = 0.0;
    for (double j = 0; j <= jmax; j++) {
        if (j > 0)
            logp += log(lambda) - log(j);
        /*
         * A word gets k/8 or k/8 + 1 probes: the term of each, once, then the
         * product over the words in their order (the same result as a term
         * per word, four times faster: filter_plan runs this a million times).
         */
        double term[MAX_PROBES / WORDS_PER_BLOCK + 2] = { 1.0 };
        for (unsigned r = k / WORDS_PER_BLOCK; r <= k / WORDS_PER_BLOCK + 1; r++) {
            double m = j * (double)r, q = -expm1(m * log_keep);
            if (r == 0)
                term[r] = 1.0;
            else if (r == 2 && exact)
                term[r] = q / 64.0 + 63.0 / 64.0 * (1.0 - 2.0 * exp(m * log_keep)
                                                     + exp(m * log_keep2));
            else
                term[r] = pow(q, (double)r);
        }
        double inblock = 1.0;
        for (unsigned w = 0; w < WORDS_PER_BLOCK; w++) {
            unsigned r = probes_in_word(k, w);
            if (r)
                inblock *= term[r];
        }
        sum += exp(logp) * inblock;
    }
    return sum > 1.0 ? 1.0 : sum;
}

double filter_model_fpp(double n, uint64_t nblocks, unsigned k)
{
    if (nblocks == 0)
        return 1.0;
    return model_at(n / (double)nblocks, k, false);
}

/* Model rate at a given number of bits per key (lambda = B / c). */
static double fpp_at(double bits_per_key, unsigned k)
{
    /* One block holding B/c keys on average; use n = B/c and one block. */
    return filter_model_fpp(FILTER_BLOCK_BITS / bits_per_key, 1, k);
}


/* The sizing behind filter_plan and filter_plan_layer: rates above floor. */
static enum filter_error plan_above(uint64_t n, double p, double floor_p, bool floor_open,
                                    struct filter_plan *out)
{
    bool above = floor_open ? p > floor_p : p >= floor_p;
    if (!(above && p < FILTER_MAX_FPP))     /* also rejects NaN */
        return FILTER_EINVAL_FPP;
    if (n > FILTER_MAX_ITEMS)
        return FILTER_ETOO_LARGE;

    double goal = p * SIZING_MARGIN;
    double best_c = 0;
    unsigned best_k = 0;
    /*
     * The fewest bits per key over k, the smallest k among equals.  The k
     * near log2(1/p) first, then outwards: once the best is found, a k that
     * misses the goal at the best bits per key so far needs more (the rate
     * falls as bits per key grow), its bisection could only end above best_c,
     * and one evaluation dismisses it.  The same plan as trying every k in
     * turn, six times faster (growth sizes a layer while inserts wait).
     */
    int k0 = (int)ceil(log2(1.0 / goal)) + 1;
    k0 = k0 < 1 ? 1 : k0 > (int)MAX_PROBES ? (int)MAX_PROBES : k0;
    for (int step = 0; step < 2 * (int)MAX_PROBES; step++) {
        int kk = k0 + (step % 2 ? (step + 1) / 2 : -(step / 2));
        if (kk < 1 || kk > (int)MAX_PROBES)
            continue;
        unsigned k = (unsigned)kk;
        if (fpp_at(MAX_BITS_PER_KEY, k) > goal)
            continue;
        if (best_k != 0 && fpp_at(best_c, k) > goal)
            continue;
        double lo = MIN_BITS_PER_KEY, hi = MAX_BITS_PER_KEY;
        for (int it = 0; it < 48; it++) {
            double mid = 0.5 * (lo + hi);
            if (fpp_at(mid, k) <= goal)
                hi = mid;
            else
                lo = mid;
        }
        if (best_k == 0 || hi < best_c || (hi == best_c && k < best_k)) {
            best_c = hi;
            best_k = k;
        }
    }
    if (best_k == 0)
        return FILTER_EINVAL_FPP;

    double want_bits = ceil((double)n * best_c);
    uint64_t blocks = (uint64_t)ceil(want_bits / FILTER_BLOCK_BITS);
    if (blocks == 0)
        blocks = 1;
    if (blocks > FILTER_MAX_BYTES / 64)
        return FILTER_ETOO_LARGE;

    out->capacity = n;
    out->blocks = blocks;
    out->bits = blocks * FILTER_BLOCK_BITS;
    out->probes = best_k;
    out->target_fpp = p;
    out->model_fpp = filter_model_fpp((double)n, blocks, best_k);
    return FILTER_OK;
}

enum filter_error filter_plan(uint64_t n, double p, struct filter_plan *out)
{
    return plan_above(n, p, FILTER_MIN_FPP, true, out);
}

enum filter_error filter_plan_layer(uint64_t n, double p, struct filter_plan *out)
{
    return plan_above(n, p, FILTER_MIN_LAYER_FPP, false, out);
}

bool filter_growth_valid(const struct filter_growth *g)
{
    return g->expansion >= FILTER_MIN_EXPANSION && g->expansion <= FILTER_MAX_EXPANSION
           && g->tightening >= FILTER_MIN_TIGHTENING && g->tightening <= FILTER_MAX_TIGHTENING
           && g->max_layers >= 1 && g->max_layers <= FILTER_MAX_LAYERS;
}

/* ---------------------------------------------------- fill and estimates -- */

/* Expected share of a block's bits set with lambda keys in it on average. */
static double fill_at(unsigned k, double lambda)
{
    double fill = 0.0;
    for (unsigned w = 0; w < WORDS_PER_BLOCK; w++) {
        unsigned r = probes_in_word(k, w);
        fill += -expm1(-lambda * -expm1((double)r * log1p(-1.0 / 64.0)));
    }
    return fill / WORDS_PER_BLOCK;
}

/*
 * A layer's false-positive rate estimated from its fill: the keys per block
 * the fill implies (bisection: fill grows with lambda), then the model for
 * that many keys.
 */
static double estimate(const struct layer *l, uint64_t bits_set)
{
    double fill_ratio = (double)bits_set / (double)(l->blocks * FILTER_BLOCK_BITS);
    double lo = 0.0, hi = 64.0 * WORDS_PER_BLOCK * 4;
    for (int it = 0; it < 64; it++) {
        double mid = 0.5 * (lo + hi);
        if (fill_at(l->probes, mid) < fill_ratio)
            lo = mid;
        else
            hi = mid;
    }
    return model_at(lo, l->probes, true);
}

static double layer_estimate(const struct layer *l)
{
    return estimate(l, atomic_load_explicit(&((struct layer *)l)->bits_set, memory_order_relaxed));
}

/*
 * The bits_set at which estimate() reaches share: the inverse, computed
 * once per layer so that an insert compares two integers.  Bisection on the
 * keys per block (the model grows with them), then their expected fill.
 */
static uint64_t bits_at_rate(const struct layer *l, double share)
{
    uint64_t bits = l->blocks * FILTER_BLOCK_BITS;
    if (!(share > 0))
        return 0;
    double lo = 0.0, hi = 512.0;
    if (model_at(hi, l->probes, true) < share)
        return bits;
    for (int it = 0; it < 60; it++) {
        double mid = 0.5 * (lo + hi);
        if (model_at(mid, l->probes, true) < share)
            lo = mid;
        else
            hi = mid;
    }
    double b = ceil(fill_at(l->probes, hi) * (double)bits);
    return b >= (double)bits ? bits : (uint64_t)b;
}

static void set_share(struct layer *l, double share)
{
    l->share_fpp = share;
    l->full_bits = bits_at_rate(l, share);
    atomic_store_explicit(&l->grow_at, l->full_bits, memory_order_relaxed);
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

/* A filter around an empty layer 0 (taken over, freed on failure), its layers from a. */
static struct filter *filter_around(struct layer *l0, double p, const struct filter_growth *g,
                                    const struct filter_alloc *a)
{
    struct filter *f = calloc(1, sizeof(*f));
    if (f == NULL) {
        layer_free(a, 0, l0);
        return NULL;
    }
#if defined(__x86_64__)
    f->avx2 = __builtin_cpu_supports("avx2");
#endif
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
        keep *= 1.0 - layer_estimate(f->layer[j]);
    return share_after(f->target_fpp, &f->growth, i, keep);
}

struct filter *filter_new_with(uint64_t n, double p, const struct filter_growth *g,
                               const struct filter_alloc *a, enum filter_error *err)
{
    struct filter_plan plan;
    struct filter *f = NULL;
    struct layer *l0 = NULL;
    const struct filter_growth def = FILTER_GROWTH_DEFAULT;
    if (g == NULL)
        g = &def;
    if (a == NULL)
        a = &default_alloc;
    enum filter_error e = filter_growth_valid(g) ? filter_plan(n, p, &plan) : FILTER_EINVAL_GROWTH;
    if (e == FILTER_OK && ((l0 = layer_new(a, 0, &plan)) == NULL
                           || (f = filter_around(l0, p, g, a)) == NULL))
        e = FILTER_ENOMEM;
    if (f != NULL)
        set_share(l0, share_for(f, 0));
    else
        alloc_done(a);
    if (err)
        *err = e;
    return f;
}

struct filter *filter_new_growing(uint64_t n, double p, const struct filter_growth *g,
                                  enum filter_error *err)
{
    return filter_new_with(n, p, g, NULL, err);
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
    set_share(f->layer[n - 1], share_for(f, n - 1));
    atomic_store(&f->blocked, false);
    return true;
}

void filter_get_growth(const struct filter *f, struct filter_growth *out)
{
    *out = f->growth;
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
    if (share < FILTER_MIN_LAYER_FPP || filter_plan_layer((uint64_t)want, share, &plan) != FILTER_OK
        || (l = layer_new(&f->alloc, n, &plan)) == NULL) {
        atomic_store(&f->blocked, true);
        return false;
    }
    set_share(l, share);
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
static void grow(struct filter *f, unsigned n)
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

/*
 * The newest layer for an insert: the newest of the n it finds, unless that
 * one is full and may be followed by another: then the next, once added.
 */
static unsigned top_for_insert(struct filter *f)
{
    unsigned n = atomic_load_explicit(&f->nlayers, memory_order_acquire);
    struct layer *l = f->layer[n - 1];
    if (n < f->growth.max_layers
        && atomic_load_explicit(&l->bits_set, memory_order_relaxed)
           >= atomic_load_explicit(&l->grow_at, memory_order_relaxed)) {
        grow(f, n);
        n = atomic_load_explicit(&f->nlayers, memory_order_acquire);
    }
    return n;
}

/* --------------------------------------------------------- serialising -- */

void filter_export(const struct filter *f, struct filter_params *out)
{
    unsigned n = atomic_load_explicit(&((struct filter *)f)->nlayers, memory_order_acquire);
    memset(out, 0, sizeof(*out));
    out->target_fpp = f->target_fpp;
    out->growth = f->growth;
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
    if (!(p0 > FILTER_MIN_FPP && p0 < FILTER_MAX_FPP))
        return FILTER_EINVAL_FPP;
    if (!filter_growth_valid(&p->growth))
        return FILTER_EINVAL_GROWTH;
    if (p->layers < 1 || p->layers > FILTER_MAX_LAYERS)
        return FILTER_EGEOMETRY;
    double keep = 1.0;          /* prod (1 - share) so far */
    for (unsigned i = 0; i < p->layers; i++) {
        const struct filter_layer_params *l = &p->layer[i];
        enum filter_error e = filter_plan_layer(l->capacity, l->target_fpp, &plan[i]);
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
        set_share(top, top->share_fpp);
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
static struct layer *view_layer(uint64_t blocks, unsigned probes, const void *words)
{
    if (blocks < 1 || blocks > FILTER_MAX_BYTES / FILTER_BLOCK_BYTES || probes < 1
        || probes > MAX_PROBES || words == NULL || (uintptr_t)words % 64 != 0)
        return NULL;
    struct filter_plan plan = { .blocks = blocks, .bits = blocks * FILTER_BLOCK_BITS,
                                .probes = probes };
    struct layer *l = layer_shell(&plan);
    if (l == NULL)
        return NULL;
    l->words = (_Atomic uint64_t *)(uintptr_t)words;
    l->borrowed = true;
    return l;
}

struct filter *filter_view_new(double target_fpp, uint64_t blocks, unsigned probes,
                               const void *words)
{
    struct layer *l0 = view_layer(blocks, probes, words);
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
    struct layer *l = view_layer(blocks, probes, words);
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

/* -------------------------------------------------- lookups and inserts -- */

/* Bits set in x, for x with at most two (a word takes at most two probes). */
static inline uint64_t bits_in(uint64_t x)
{
    return (uint64_t)(x != 0) + (uint64_t)((x & (x - 1)) != 0);
}

static inline _Atomic uint64_t *block_of(const struct layer *l, uint64_t h)
{
    return l->words + filter_block_index(h, l->blocks) * WORDS_PER_BLOCK;
}

static bool contains_scalar(const struct layer *l, uint64_t h)
{
    uint64_t mask[WORDS_PER_BLOCK];
    probe_mask(l, h, mask);
    _Atomic uint64_t *b = block_of(l, h);
    uint64_t miss = 0;
    /* Branch-free over the whole line: no mispredicted early exits. */
#pragma GCC unroll 8
    for (unsigned w = 0; w < WORDS_PER_BLOCK; w++)
        miss |= mask[w] & ~atomic_load_explicit(&b[w], memory_order_acquire);
    return miss == 0;
}

#if defined(__x86_64__)
/*
 * The same test in a dozen AVX2 instructions per layer: the eight masks come
 * from per-lane variable shifts, computed once for all layers.  Fewer
 * instructions per lookup let the CPU keep more lookups' cache misses in
 * flight at once, and for an absent key the layers' loads do not depend on
 * each other, so their misses overlap too.  The two 256-bit loads read each
 * 64-bit word whole (aligned), like the relaxed loads above; inserts only
 * ever set bits, so a lookup sees each word before or after an insert,
 * never torn.  Layers n-1 down to 0.
 */
__attribute__((target("avx2")))
static bool contains_avx2(struct layer *const *layers, unsigned n, uint64_t h)
{
    const __m256i m63 = _mm256_set1_epi64x(63), one = _mm256_set1_epi64x(1);
    const __m256i sh_lo = _mm256_setr_epi64x(0, 6, 12, 18);
    const __m256i sh_hi = _mm256_setr_epi64x(24, 30, 36, 42);
    __m256i d1 = _mm256_set1_epi64x((long long)mix64(h));
    __m256i lo1 = _mm256_sllv_epi64(one, _mm256_and_si256(_mm256_srlv_epi64(d1, sh_lo), m63));
    __m256i hi1 = _mm256_sllv_epi64(one, _mm256_and_si256(_mm256_srlv_epi64(d1, sh_hi), m63));
    __m256i lo2 = _mm256_setzero_si256(), hi2 = _mm256_setzero_si256();
    bool second = false;
    for (unsigned i = n; i-- > 0;) {
        const struct layer *l = layers[i];
        const __m256i *b = (const __m256i *)(const void *)block_of(l, h);
        __m256i lo = _mm256_and_si256(lo1, _mm256_loadu_si256((const __m256i *)(const void *)&l->first[0]));
        __m256i hi = _mm256_and_si256(hi1, _mm256_loadu_si256((const __m256i *)(const void *)&l->first[4]));
        if (l->probes > WORDS_PER_BLOCK) {
            if (!second) {
                __m256i d2 = _mm256_set1_epi64x((long long)mix64(h ^ UINT64_C(0x9e3779b97f4a7c15)));
                lo2 = _mm256_sllv_epi64(one, _mm256_and_si256(_mm256_srlv_epi64(d2, sh_lo), m63));
                hi2 = _mm256_sllv_epi64(one, _mm256_and_si256(_mm256_srlv_epi64(d2, sh_hi), m63));
                second = true;
            }
            lo = _mm256_or_si256(lo, _mm256_and_si256(lo2, _mm256_loadu_si256((const __m256i *)(const void *)&l->second[0])));
            hi = _mm256_or_si256(hi, _mm256_and_si256(hi2, _mm256_loadu_si256((const __m256i *)(const void *)&l->second[4])));
        }
        /* andnot(block, mask) = mask & ~block: the probed bits still clear. */
        __m256i miss = _mm256_or_si256(_mm256_andnot_si256(_mm256_load_si256(&b[0]), lo),
                                       _mm256_andnot_si256(_mm256_load_si256(&b[1]), hi));
        if (_mm256_testz_si256(miss, miss))
            return true;
    }
    return false;
}
#endif

/* Whether any of the first n layers holds h, newest first. */
static inline bool contains_in(const struct filter *f, unsigned n, uint64_t h)
{
#if defined(__x86_64__)
    if (f->avx2)
        return contains_avx2(f->layer, n, h);
#endif
    for (unsigned i = n; i-- > 0;)
        if (contains_scalar(f->layer[i], h))
            return true;
    return false;
}

bool filter_use_simd(struct filter *f, bool on)
{
#if defined(__x86_64__)
    f->avx2 = on && __builtin_cpu_supports("avx2");
    return f->avx2;
#else
    (void)f;
    (void)on;
    return false;
#endif
}

bool filter_contains_hash(const struct filter *f, uint64_t h)
{
    unsigned n = atomic_load_explicit(&((struct filter *)f)->nlayers, memory_order_acquire);
    return contains_in(f, n, h);
}

void filter_add_hash(struct filter *f, uint64_t h)
{
    unsigned n = top_for_insert(f);
    /* In an older layer for good: adding it again would only fill the newest. */
    if (n > 1 && contains_in(f, n - 1, h))
        return;
    struct layer *l = f->layer[n - 1];
    uint64_t mask[WORDS_PER_BLOCK];
    probe_mask(l, h, mask);
    _Atomic uint64_t *b = block_of(l, h);
    uint64_t added = 0;
    for (unsigned w = 0; w < WORDS_PER_BLOCK; w++) {
        if (mask[w] == 0)
            continue;
        /* Skip the locked OR when the bits are already there (re-inserts). */
        uint64_t cur = atomic_load_explicit(&b[w], memory_order_relaxed);
        if ((cur & mask[w]) == mask[w])
            continue;
        uint64_t old = atomic_fetch_or_explicit(&b[w], mask[w], memory_order_release);
        added += bits_in(mask[w] & ~old);
    }
    /*
     * A key that set no new bit was already in (or a false positive of) the
     * filter: counting it again would let duplicates inflate the size of the
     * next filter, which is planned from items.
     */
    if (added) {
        atomic_fetch_add_explicit(&l->bits_set, added, memory_order_relaxed);
        atomic_fetch_add_explicit(&l->items, 1, memory_order_relaxed);
    }
}

/* How far ahead the bulk insert prefetches blocks. */
#define PREFETCH_AHEAD 8

void filter_add_hashes_exclusive(struct filter *f, const uint64_t *hs, size_t n)
{
    size_t i = 0;
    /* One pass per layer: the key that fills the newest layer ends it. */
    while (i < n) {
        unsigned nl = top_for_insert(f);
        struct layer *l = f->layer[nl - 1];
        uint64_t set = atomic_load_explicit(&l->bits_set, memory_order_relaxed);
        uint64_t grow_at = nl < f->growth.max_layers
                           ? atomic_load_explicit(&l->grow_at, memory_order_relaxed) : UINT64_MAX;
        uint64_t added = 0, fresh = 0;
        /* Where filter_add_hash would find it full: the same layers, key for key. */
        for (; i < n && set + added < grow_at; i++) {
            if (i + PREFETCH_AHEAD < n)
                __builtin_prefetch((const void *)block_of(l, hs[i + PREFETCH_AHEAD]), 1, 3);
            if (nl > 1 && contains_in(f, nl - 1, hs[i]))
                continue;
            uint64_t mask[WORDS_PER_BLOCK];
            probe_mask(l, hs[i], mask);
            _Atomic uint64_t *b = block_of(l, hs[i]);
            /*
             * Plain loads and stores (relaxed atomics compile to movs): no other
             * writer exists by contract, and readers see each word whole.
             */
            uint64_t key_added = 0;
            for (unsigned w = 0; w < WORDS_PER_BLOCK; w++) {
                uint64_t old = atomic_load_explicit(&b[w], memory_order_relaxed);
                key_added += bits_in(mask[w] & ~old);
                atomic_store_explicit(&b[w], old | mask[w], memory_order_relaxed);
            }
            added += key_added;
            fresh += key_added != 0;
        }
        atomic_fetch_add_explicit(&l->bits_set, added, memory_order_relaxed);
        atomic_fetch_add_explicit(&l->items, fresh, memory_order_relaxed);
        /*
         * Next pass: top_for_insert adds a layer, or on failure moves grow_at
         * past bits_set, so that every pass takes at least one key.
         */
    }
}

void filter_add(struct filter *f, const void *key, size_t len)
{
    filter_add_hash(f, filter_hash(key, len));
}

bool filter_contains(const struct filter *f, const void *key, size_t len)
{
    return filter_contains_hash(f, filter_hash(key, len));
}

/* ------------------------------------------------------------- figures -- */

static void layer_figures(const struct layer *l, struct filter_layer_info *out)
{
    memset(out, 0, sizeof(*out));
    out->items = atomic_load_explicit(&((struct layer *)l)->items, memory_order_relaxed);
    out->bits_set = atomic_load_explicit(&((struct layer *)l)->bits_set, memory_order_relaxed);
    out->capacity = l->capacity;
    out->bits = l->blocks * FILTER_BLOCK_BITS;
    out->probes = l->probes;
    out->target_fpp = l->target_fpp;
    out->share_fpp = l->share_fpp;
    out->fill_ratio = (double)out->bits_set / (double)out->bits;
    out->estimated_fpp = estimate(l, out->bits_set);
}

bool filter_layer_info(const struct filter *f, unsigned i, struct filter_layer_info *out)
{
    if (i >= atomic_load_explicit(&((struct filter *)f)->nlayers, memory_order_acquire))
        return false;
    layer_figures(f->layer[i], out);
    return true;
}

bool filter_saturated(const struct filter *f)
{
    unsigned n = atomic_load_explicit(&((struct filter *)f)->nlayers, memory_order_acquire);
    const struct layer *top = f->layer[n - 1];
    return atomic_load_explicit(&((struct layer *)top)->bits_set, memory_order_relaxed) >= top->full_bits
           && (n >= f->growth.max_layers || atomic_load(&((struct filter *)f)->blocked));
}

void filter_info(const struct filter *f, struct filter_info *out)
{
    unsigned n = atomic_load_explicit(&((struct filter *)f)->nlayers, memory_order_acquire);
    double keep = 1.0;
    struct filter_layer_info li = { 0 };
    memset(out, 0, sizeof(*out));
    out->memory_bytes = sizeof(*f);
    for (unsigned i = 0; i < n; i++) {
        layer_figures(f->layer[i], &li);
        out->items += li.items;
        out->capacity += li.capacity;
        out->bits += li.bits;
        out->bits_set += li.bits_set;
        out->memory_bytes += (uint64_t)f->layer[i]->map_bytes + sizeof(struct layer);
        keep *= 1.0 - li.estimated_fpp;
    }
    const struct layer *top = f->layer[n - 1];
    out->layers = n;
    out->probes = top->probes;
    out->target_fpp = f->target_fpp;
    out->fill_ratio = (double)out->bits_set / (double)out->bits;
    out->estimated_fpp = n == 1 ? li.estimated_fpp : 1.0 - keep;
    out->saturated = li.bits_set >= top->full_bits
                     && (n >= f->growth.max_layers || atomic_load(&((struct filter *)f)->blocked));
}
