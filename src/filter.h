/*
 * The Bloom filter at the heart of bloomguard: a cache-line-blocked filter
 * whose negative lookups touch a single 64-byte block.  Pure: no I/O, no
 * logging, no global state.
 */
#ifndef BLOOMGUARD_FILTER_H
#define BLOOMGUARD_FILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct filter;

/* Bits in one block: one cache line. */
#define FILTER_BLOCK_BITS 512u
/*
 * False-positive rates filter_new accepts: strictly between these two.  The
 * configuration takes its bounds from here, so a rate that `bloomguard -t`
 * accepts is one every load can build.
 */
#define FILTER_MIN_FPP 1e-6
#define FILTER_MAX_FPP 0.5

/* Upper bound on expected items accepted by filter_new (10^12). */
#define FILTER_MAX_ITEMS UINT64_C(1000000000000)
/* Upper bound on the bit array (2^46 bytes = 64 TiB); larger is "absurd". */
#define FILTER_MAX_BYTES (UINT64_C(1) << 46)

/* Why filter_new failed. */
enum filter_error {
    FILTER_OK = 0,
    FILTER_EINVAL_FPP,   /* false-positive rate outside (FILTER_MIN_FPP, FILTER_MAX_FPP) or NaN */
    FILTER_ETOO_LARGE,   /* expected items or resulting size beyond the limits above */
    FILTER_ENOMEM,       /* the bit array could not be allocated */
    FILTER_EGEOMETRY     /* filter_new_from: blocks or probes are not what filter_plan
                            chooses for that capacity and rate */
};

/* Human text for an error code (static storage). */
const char *filter_strerror(enum filter_error e);

/*
 * The geometry chosen for (n, p): number of 512-bit blocks and probes per key.
 * filter_plan is what filter_new uses; it allocates nothing, so callers can
 * report the memory a filter would need before building it.  Returns
 * FILTER_OK or an error as for filter_new.
 */
struct filter_plan {
    uint64_t capacity;     /* n as requested */
    uint64_t blocks;       /* >= 1 */
    uint64_t bits;         /* blocks * 512 */
    unsigned probes;       /* k: bits set per key, all inside one block */
    double target_fpp;     /* p as requested */
    double model_fpp;      /* false-positive rate the model predicts at n items */
};
enum filter_error filter_plan(uint64_t expected_items, double fpp, struct filter_plan *out);

/*
 * Create an empty filter sized so that its false-positive rate after
 * expected_items distinct inserts is at most fpp.  expected_items may be 0
 * (one block).  Returns NULL and sets *err (if err is not NULL) on failure.
 * The caller owns the filter and releases it with filter_free.
 */
struct filter *filter_new(uint64_t expected_items, double fpp, enum filter_error *err);

/* Release a filter; NULL is a no-op.  No other thread may be using it. */
void filter_free(struct filter *f);

/*
 * Add a key of len bytes (any bytes, len may be 0).  Lock-free: safe to call
 * concurrently with filter_add and filter_contains on the same filter from
 * any number of threads.  Once filter_add returns, every later
 * filter_contains of the key (in any thread that synchronises with this one,
 * e.g. through a mutex, an atomic or a socket) returns true.
 */
void filter_add(struct filter *f, const void *key, size_t len);

/*
 * Maybe present (true) or surely absent (false).  Lock-free, never blocks,
 * never allocates, thread-safe as above.  No false negatives.
 */
bool filter_contains(const struct filter *f, const void *key, size_t len);

/*
 * The same two operations on a hash computed once by filter_hash, for
 * callers that add one key to two filters (live and rebuilding).
 */
uint64_t filter_hash(const void *key, size_t len);
void filter_add_hash(struct filter *f, uint64_t h);
bool filter_contains_hash(const struct filter *f, uint64_t h);

/*
 * Bulk insert of n hashes without atomic read-modify-writes, prefetching
 * blocks ahead: several times faster than filter_add_hash in a loop.  The
 * caller must be the only writer of f meanwhile (lookups may run).  A
 * filter being loaded while others insert gets their keys afterwards (see
 * guard_begin_bulk).
 */
void filter_add_hashes_exclusive(struct filter *f, const uint64_t *hs, size_t n);

/*
 * Lookups use AVX2 when the CPU has it (same answers, fewer instructions).
 * filter_use_simd(f, false) forces the portable code, for tests and
 * benchmarks; returns whether SIMD is now in use.  Not thread-safe: call it
 * before sharing f.
 */
bool filter_use_simd(struct filter *f, bool on);

/* A snapshot of the filter's figures; safe to take while others insert. */
struct filter_info {
    uint64_t items;        /* keys that set at least one new bit: distinct keys, less
                              the few that were false positives when added */
    uint64_t capacity;     /* expected items the filter was sized for */
    uint64_t bits;         /* size of the bit array */
    uint64_t bits_set;     /* bits currently 1 */
    uint64_t memory_bytes; /* bytes allocated for the bit array and header */
    unsigned probes;       /* bits set per key */
    double target_fpp;     /* p the filter was sized for */
    double fill_ratio;     /* bits_set / bits */
    double estimated_fpp;  /* false-positive rate estimated from fill_ratio */
};
void filter_info(const struct filter *f, struct filter_info *out);

/*
 * Serialising a filter (snapshots) without a second copy of its bits.
 *
 * filter_export gives the parameters a filter is rebuilt from; the bit array
 * itself is read out in chunks of any size by filter_bits_read, straight
 * from the live filter, while other threads keep calling filter_add.  Its
 * byte image is FILTER_BLOCK_BITS / 8 bytes per block, block after block;
 * inside a block, eight 64-bit words, each stored little-endian (the same
 * bytes on every machine).
 *
 * The contract of a copy taken during inserts: inserts only ever set bits,
 * and each 64-bit word is read whole (an atomic load).  So the bytes a
 * sequence of filter_bits_read calls returns hold every bit that was set
 * when the first call began: every key whose filter_add returned before it
 * (in a thread that synchronises with the reader) is in the copy.  A key
 * added while the copy runs may be in it, absent, or in it in part (some of
 * its words copied before the insert reached them); a caller that needs
 * those keys must replay them from a position taken before the copy began.
 * The same holds for items as filter_export reads it: it may lag the bits.
 *
 * filter_new_from builds an empty filter of exactly these parameters after
 * checking them: the geometry must be the one filter_plan chooses for
 * (capacity, target_fpp), so a filter read back is one this build could have
 * made (FILTER_EGEOMETRY otherwise; filter_plan's errors for the rate and
 * capacity; FILTER_ETOO_LARGE for items beyond FILTER_MAX_ITEMS, which the
 * inserts that follow could otherwise wrap round).  It costs one filter_plan.  filter_bits_write then ORs the
 * bytes of the image in; it is safe beside concurrent filter_add (atomic
 * ORs), so keys may flow into the new filter while it is being filled.
 */
struct filter_params {
    uint64_t capacity;     /* expected items the filter was sized for */
    double target_fpp;     /* p it was sized for */
    uint64_t blocks;       /* 512-bit blocks: the image is blocks * 64 bytes */
    unsigned probes;       /* bits set per key */
    uint64_t items;        /* as filter_info's items */
};
void filter_export(const struct filter *f, struct filter_params *out);

/* Bytes of the image of a filter with these parameters: blocks * 64. */
#define FILTER_BLOCK_BYTES (FILTER_BLOCK_BITS / 8u)

/*
 * Copy len bytes of the image from byte offset on into buf.  False (nothing
 * copied) when [offset, offset + len) is not inside the image.  Lock-free,
 * never blocks inserts or lookups.
 */
bool filter_bits_read(const struct filter *f, uint64_t offset, void *buf, size_t len);

struct filter *filter_new_from(const struct filter_params *p, enum filter_error *err);

/*
 * OR len bytes of an image into f from byte offset on (bits_set follows).
 * False (nothing written) when the range is not inside the image.  Safe
 * beside filter_add, filter_contains and other filter_bits_write calls.
 */
bool filter_bits_write(struct filter *f, uint64_t offset, const void *buf, size_t len);

/*
 * Index math, exposed for tests: the block a hash selects among nblocks
 * (any value up to 2^64-1, no overflow), and the false-positive rate the
 * model predicts for n keys in nblocks blocks with k probes.
 */
uint64_t filter_block_index(uint64_t h, uint64_t nblocks);
double filter_model_fpp(double n, uint64_t nblocks, unsigned k);

#endif
