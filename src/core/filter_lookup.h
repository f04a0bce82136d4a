/*
 * Inserts, lookups and a filter's figures (filter_lookup.c): the hot path,
 * and the calls that read a filter while others write it.  Below filter.h,
 * which includes it; filter.h makes and frees the filters these take.
 */
#ifndef BLOOMGUARD_FILTER_LOOKUP_H
#define BLOOMGUARD_FILTER_LOOKUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "filter_types.h"      /* enum filter_kind */

struct filter;

/*
 * Add a key of len bytes (any bytes, len may be 0).  Lock-free: safe to call
 * concurrently with filter_add and filter_contains on the same filter from
 * any number of threads.  Once filter_add returns, every later
 * filter_contains of the key (in any thread that synchronises with this one,
 * e.g. through a mutex, an atomic or a socket) returns true.  A key the
 * filter already holds (or answers as a false positive) sets no bit and so
 * never makes it grow: re-inserts of present keys cost no layer.  The one
 * wait: an insert of a new key that finds the newest layer full adds the
 * next one, under a mutex, and inserts that find it full meanwhile wait for
 * it (a few milliseconds, once per growth: sizing the layer) rather than
 * overfill it.  Lookups never wait.
 */
static inline void filter_add(struct filter *f, const void *key, size_t len);

/*
 * Maybe present (true) or surely absent (false).  Lock-free, never blocks,
 * never allocates, thread-safe as above.  No false negatives.
 */
static inline bool filter_contains(const struct filter *f, const void *key, size_t len);

/*
 * The same two operations on a hash computed once by filter_hash, for
 * callers that add one key to two filters (live and rebuilding).
 */
uint64_t filter_hash(const void *key, size_t len);
void filter_add_hash(struct filter *f, uint64_t h);
bool filter_contains_hash(const struct filter *f, uint64_t h);

static inline void filter_add(struct filter *f, const void *key, size_t len)
{
    filter_add_hash(f, filter_hash(key, len));
}

static inline bool filter_contains(const struct filter *f, const void *key, size_t len)
{
    return filter_contains_hash(f, filter_hash(key, len));
}

/*
 * Every layer's block of h prefetched into the cache, for a caller that
 * will ask filter_contains_hash(f, h) a few keys later (a batch): only a
 * hint, no answer.  Thread-safe as a lookup.
 */
void filter_prefetch_hash(const struct filter *f, uint64_t h);

/*
 * filter_contains_hash of each of hs[0, n) into out[i], as a batch: every
 * layer's block of a key is prefetched several keys ahead, so that the
 * cache misses of consecutive keys overlap (a POST /exists batch, a
 * bench's stream).  Returns how many answered maybe.  Same answers, the
 * same guarantees, as n calls of filter_contains_hash.
 */
size_t filter_contains_hashes(const struct filter *f, const uint64_t *hs, size_t n, bool *out);

/*
 * Bulk insert of n hashes without atomic read-modify-writes, prefetching
 * blocks ahead: several times faster than filter_add_hash in a loop.  The
 * caller must be the only writer of f meanwhile (lookups may run).  A
 * filter being loaded while others insert gets their keys afterwards (see
 * guard_begin_bulk).  It grows exactly as filter_add_hash would, key for
 * key (the same layers, the same bits), so a load whose size estimate was
 * low grows while it loads.
 */
void filter_add_hashes_exclusive(struct filter *f, const uint64_t *hs, size_t n);

/*
 * Lookups use AVX2 when the CPU has it (same answers, fewer instructions).
 * filter_use_simd(f, false) forces the portable code, for tests and
 * benchmarks; returns whether SIMD is now in use.  Not thread-safe: call it
 * before sharing f.
 */
bool filter_use_simd(struct filter *f, bool on);

/*
 * A snapshot of the filter's figures, of the whole; safe to take while others
 * insert (each layer's counters are read on their own, so the sums may mix
 * moments).
 */
struct filter_info {
    enum filter_kind kind;
    uint64_t items;        /* keys that set at least one new bit: distinct keys, less
                              the few that were false positives when added (sum of layers) */
    uint64_t capacity;     /* expected items the layers were sized for (sum) */
    uint64_t bits;         /* size of the bit arrays (sum) */
    uint64_t bits_set;     /* bits currently 1 (sum) */
    uint64_t memory_bytes; /* bytes allocated for the bit arrays and headers */
    unsigned probes;       /* bits set per key in the newest layer */
    unsigned layers;       /* layers now (1 until the first growth) */
    double target_fpp;     /* p the filter was sized for */
    double fill_ratio;     /* bits_set / bits */
    double bits_per_key;   /* bits / items: what each key costs, all layers counted (0: empty) */
    double estimated_fpp;  /* compound rate 1 - prod(1 - rate_i), each layer's rate
                              estimated from its fill ratio */
    bool saturated;        /* the newest layer is past its share and no layer can be
                              added: estimated_fpp may rise above target_fpp from now on */
};
void filter_info(const struct filter *f, struct filter_info *out);

/*
 * filter_info's saturated alone, cheaply (a few atomic loads): for callers
 * that check it after every batch of inserts.
 */
bool filter_saturated(const struct filter *f);

/* One layer's figures; false (out untouched) when the filter has no layer i. */
struct filter_layer_info {
    uint64_t items, capacity, bits, bits_set;
    unsigned probes;
    double target_fpp;     /* the rate it was sized for: p for layer 0, its share after */
    double share_fpp;      /* the rate at which it counts as full */
    double fill_ratio;
    double estimated_fpp;  /* its own rate, from its fill ratio */
};
bool filter_layer_info(const struct filter *f, unsigned i, struct filter_layer_info *out);

/*
 * The block a hash selects among nblocks (any value up to 2^64-1, no
 * overflow), exposed for tests.
 */
uint64_t filter_block_index(uint64_t h, uint64_t nblocks);

#endif
