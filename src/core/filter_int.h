/*
 * The insides of the filter, shared by its four files: filter.c (building,
 * images and views), filter_grow.c (layers, budget shares, growth),
 * filter_model.c (the rate model, sizing, fill estimates) and
 * filter_lookup.c (hashing, lookups, inserts, figures).
 * Nothing outside them includes it; filter.h is the contract.  It sees the
 * filter's values (filter_types.h), never filter.h, whose functions sit above.
 */
#ifndef BLOOMGUARD_FILTER_INT_H
#define BLOOMGUARD_FILTER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "filter_types.h"

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
    enum filter_kind kind;        /* the filter's: the model and sizing read it from here */
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
 * The only inserts that take grow_mu are those of a key the newest layer
 * lacks that find it full (filter_add_hash): they wait for the next one rather than overfill
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
/*
 * How a filter's lookups run, chosen once from its kind and the CPU
 * (filter_lookup_choose) so that a lookup branches once, on this, whatever
 * the kind: a new kind is one more value and one more case in contains_in.
 */
enum filter_lookup {
    LOOKUP_BLOCKED,           /* contains_scalar per layer */
    LOOKUP_BLOCKED_AVX2       /* contains_avx2 over the layers */
};

struct filter {
    _Atomic unsigned nlayers;          /* >= 1 */
    enum filter_kind kind;             /* every layer's */
    unsigned char lookup;              /* enum filter_lookup */
    bool view;                         /* filter_view_new: read-only, layers borrowed */
    struct filter_alloc alloc;         /* where the layers' bits come from */
    atomic_bool blocked;               /* the last attempt to add a layer could not */
    atomic_bool wide;                  /* a layer sets two bits in some word (probes > 8) */
    atomic_bool narrow;                /* a layer leaves some word without a bit (probes < 8) */
    double target_fpp;
    struct filter_growth growth;
    pthread_mutex_t grow_mu;
    struct layer *layer[FILTER_MAX_LAYERS];
    /*
     * What a lookup reads of each layer, side by side: one cache line for
     * four layers' addresses and sizes instead of a line of each struct
     * layer.  Written with the layer, before it is published.
     */
    struct filter_slot {
        const _Atomic uint64_t *words;
        uint64_t blocks;
    } slot[FILTER_MAX_LAYERS];
};

/*
 * Publish l as layer n of f's n layers: a lookup that reads the new count
 * (acquire) sees the whole layer, and f->wide if the layer needs it.
 */
static inline void filter_publish_layer(struct filter *f, unsigned n, struct layer *l)
{
    f->layer[n] = l;
    f->slot[n] = (struct filter_slot){ l->words, l->blocks };
    if (l->probes > WORDS_PER_BLOCK)
        atomic_store_explicit(&f->wide, true, memory_order_relaxed);
    if (l->probes < WORDS_PER_BLOCK)
        atomic_store_explicit(&f->narrow, true, memory_order_relaxed);
    atomic_store_explicit(&f->nlayers, n + 1, memory_order_release);
}

/* Probes word w of a block receives when a key sets k bits. */
static inline unsigned probes_in_word(unsigned k, unsigned w)
{
    return k / WORDS_PER_BLOCK + (w < k % WORDS_PER_BLOCK);
}

/*
 * The lookup f's kind takes, with SIMD when simd says so and the CPU has it.
 * Only before f is shared.
 */
void filter_lookup_choose(struct filter *f, bool simd);

/*
 * A layer's false-positive rate estimated from bits_set of its bits set
 * (filter_layer_rate) or from its counter now (filter_layer_rate_now).
 * Pure; safe from any thread.
 */
double filter_layer_rate(const struct layer *l, uint64_t bits_set);
double filter_layer_rate_now(const struct layer *l);
/*
 * Makes share the rate at which layer l is full: sets share_fpp, full_bits
 * and grow_at.  Only before the layer is shared, or under the filter's
 * grow_mu for its newest layer.
 */
void filter_layer_set_share(struct layer *l, double share);
/* The bits_set at which layer l's estimated rate reaches rate (its whole size at most). */
uint64_t filter_layer_bits_at(const struct layer *l, double rate);
/*
 * The rate a load's first layer may reach before it counts as full
 * (filter_loading): all of a filter of rate p's budget but a reserve, so
 * that a load past its estimate can still add a layer.
 */
double filter_load_rate(double p);
/*
 * The newest of n layers has reached grow_at: adds a layer unless another
 * thread did (takes grow_mu; see filter_grow.c).  From inserts only.
 */
void filter_grow(struct filter *f, unsigned n);

/*
 * A layer of a plan's geometry, its bits not yet set (filter_layer_shell:
 * for views, whose bits are borrowed), or with zeroed bits from a for
 * layer index (filter_layer_new); NULL only on no memory.
 * filter_layer_free gives the bits back to a (unless borrowed) and frees
 * the layer; NULL is a no-op.
 */
struct layer *filter_layer_shell(const struct filter_plan *plan);
struct layer *filter_layer_new(const struct filter_alloc *a, unsigned index,
                               const struct filter_plan *plan);
void filter_layer_free(const struct filter_alloc *a, unsigned index, struct layer *l);
/*
 * The share of the error budget layer i gets: given keep = prod_{j<i}
 * (1 - rate_j) of the layers before it (filter_share_after), or from f's
 * older layers' measured fill (filter_share_for); 0 when nothing is left.
 */
double filter_share_after(double p, const struct filter_growth *g, unsigned i, double keep);
double filter_share_for(const struct filter *f, unsigned i);

#endif
