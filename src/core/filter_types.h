/*
 * The filter's values and limits: its kinds, the bounds of its rates, sizes
 * and growth, its error codes, a sizing plan and the allocator contract.
 * No code of its own, so that the files below filter.c (the model, the
 * lookups, growth, and the insides they share) see them without filter.h.
 */
#ifndef BLOOMGUARD_FILTER_TYPES_H
#define BLOOMGUARD_FILTER_TYPES_H

#include <stddef.h>
#include <stdint.h>

/*
 * What a filter is: its kind picks the layout of a layer's bits (and so
 * the lookup, the sizing and the model).  Every layer of one filter is of
 * the filter's kind.  The value is stored in images (a snapshot's kind
 * field, snapshot.h; a published file's blocks_scheme, pubfmt.h): never
 * renumber a kind, add new ones before FILTER_KINDS.
 *   blocked  a split-block Bloom filter: a key's probes all fall in one
 *            512-bit block (one cache line per layer per lookup).
 */
#define FILTER_KIND_LIST(X) \
    X(FILTER_KIND_BLOCKED, 0, "blocked")
/*
 * One row per kind: X(constant, number, name).  The name is what
 * `[filter] kind`, the log and /stats say (filter_kind_name, the
 * configuration's values: both made from this list).
 */
enum filter_kind {
#define FILTER_KIND_ENUM(id, number, name) id = (number),
    FILTER_KIND_LIST(FILTER_KIND_ENUM)
#undef FILTER_KIND_ENUM
    FILTER_KINDS            /* how many; not a kind */
};

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

/*
 * Growth.  Layers a filter may have at most (FILTER_MAX_LAYERS bounds
 * max_layers), the defaults, and the bounds filter_growth_valid checks (the
 * configuration takes its bounds from here).  FILTER_MIN_LAYER_FPP is the
 * smallest share a layer may be given: below it no layer is added.
 */
#define FILTER_MAX_LAYERS 32u
#define FILTER_DEFAULT_MAX_LAYERS 8u
#define FILTER_DEFAULT_EXPANSION 2.0
#define FILTER_MIN_EXPANSION 1.0
#define FILTER_MAX_EXPANSION 16.0
#define FILTER_DEFAULT_TIGHTENING 0.5
#define FILTER_MIN_TIGHTENING 0.1
#define FILTER_MAX_TIGHTENING 0.9
#define FILTER_MIN_LAYER_FPP 1e-12

struct filter_growth {
    double expansion;      /* a new layer is sized for expansion x the items so far */
    double tightening;     /* r: a layer that is not the last takes (1 - r) of what is left */
    unsigned max_layers;   /* 1 = never grow */
};
#define FILTER_GROWTH_DEFAULT \
    ((struct filter_growth){ FILTER_DEFAULT_EXPANSION, FILTER_DEFAULT_TIGHTENING, \
                             FILTER_DEFAULT_MAX_LAYERS })

/* Why filter_new failed. */
enum filter_error {
    FILTER_OK = 0,
    FILTER_EINVAL_FPP,   /* false-positive rate outside (FILTER_MIN_FPP, FILTER_MAX_FPP) or NaN */
    FILTER_ETOO_LARGE,   /* expected items or resulting size beyond the limits above */
    FILTER_ENOMEM,       /* the bit array could not be allocated */
    FILTER_EGEOMETRY,    /* filter_new_from: blocks or probes are not what filter_plan
                            chooses for that capacity and rate, or the layers' rates and
                            shares do not fit in the filter's */
    FILTER_EINVAL_GROWTH, /* growth parameters outside the bounds above */
    FILTER_EKIND         /* filter_new_from: a kind this build does not know */
};

/*
 * The geometry chosen for (n, p): number of 512-bit blocks and probes per key.
 * filter_plan is what filter_new uses; it allocates nothing, so callers can
 * report the memory a filter would need before building it.  Returns
 * FILTER_OK or an error as for filter_new.
 */
struct filter_plan {
    enum filter_kind kind; /* the kind it is a plan for */
    uint64_t capacity;     /* n as requested */
    uint64_t blocks;       /* >= 1 */
    uint64_t bits;         /* blocks * 512 */
    unsigned probes;       /* k: bits set per key, all inside one block */
    double target_fpp;     /* p as requested */
    double model_fpp;      /* false-positive rate the model predicts at n items */
};

/*
 * Where a filter's layers keep their bits.  By default each layer's bit
 * array is private anonymous memory; a caller that shares the bits with
 * other processes (publish.h: file-backed shared mappings) passes its own.
 *
 * alloc returns bytes (a multiple of FILTER_BLOCK_BYTES) of zeroed memory,
 * 64-byte aligned, for layer `layer` of geometry plan, or NULL (no memory:
 * the filter is not made, or the layer not added).  It is called before
 * the layer can receive any insert or serve any lookup: when the filter is
 * made (layers 0 .. n-1 of filter_new_from_with, in order), or by growth
 * under the filter's growth mutex before the filter publishes the layer to
 * its own threads.  So a caller that announces the layer to readers
 * elsewhere inside alloc announces it before any key is written to it.
 * Calls for one filter never overlap.
 * free gives back what alloc returned, when the filter is freed.
 * done (may be NULL) is called once when the allocator will serve this
 * filter no more: after the last free of filter_free, or before a
 * constructor that was given it returns NULL.
 * ctx is passed to each; the struct is copied, ctx must outlive done.
 */
struct filter_alloc {
    void *(*alloc)(void *ctx, unsigned layer, const struct filter_plan *plan, size_t bytes);
    void (*free)(void *ctx, unsigned layer, void *mem, size_t bytes);
    void (*done)(void *ctx);
    void *ctx;
};

/* Bytes of the image of one block: a layer's image is blocks * this. */
#define FILTER_BLOCK_BYTES (FILTER_BLOCK_BITS / 8u)

#endif
