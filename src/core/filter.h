/*
 * The Bloom filter at the heart of bloomguard: a stack of cache-line-blocked
 * filters (layers) whose negative lookups touch one 64-byte block per layer,
 * and which grows by a layer, in memory, when the newest one has taken its
 * share of the error budget.  Pure: no I/O, no logging, no global state.
 *
 * Growth (a scalable Bloom filter, Almeida et al. 2007).  Layer 0 is exactly
 * the filter filter_plan sizes for (expected_items, p): a filter that never
 * grows has the geometry, memory and rate it always had.  Inserts go to the
 * newest layer; a lookup checks every layer, newest first.  Each layer has a
 * share of the error budget, a rate it may reach: the compound rate
 * 1 - prod(1 - rate_i) stays under p at every moment because
 *   - the budget is 0.95 p: a layer's rate estimated from its fill runs a
 *     percent or two under what its lookups measure (few blocks, and the
 *     estimate sees their mean fill only), so the measured compound stays
 *     under p too;
 *   - a layer counts as full when its own rate, estimated from its fill (the
 *     bits actually set, not a count of inserts), reaches its share: the
 *     check is one comparison of bits_set against a threshold computed when
 *     the layer is made, after each insert that set a bit;
 *   - the next layer i gets the remaining budget R_i = 1 - (1 - 0.95 p) /
 *     prod_{j<i}(1 - rate_j), computed from the older layers' measured fill
 *     at that moment (so a layer that overshot its share, by a few racing
 *     inserts, is paid for by the later ones, never by the promise), and
 *     takes (1 - r) R_i of it as its share, r the tightening ratio, or all of
 *     R_i when it is the last layer allowed (max_layers);
 *   - a new layer is sized (filter_plan) for expansion x the items of the
 *     whole so far at its share.
 * With the defaults (expansion 2, r 0.5) the shares are 0.95 p x (1/2, 1/4,
 * 1/8, ...): while layer i is the newest, 0.95 p r^(i+1) of the budget is
 * still unused.  Measured (tests/check_filter.c, 10^6 absent keys): 0.84 p
 * after 10x growth, 0.93 p after 100x.  RedisBloom also halves the rate per
 * layer (its layer 0 gets p/2 and is sized for it; it grows when a count of
 * inserts reaches the capacity, and the next layer is expansion x the last
 * one); Almeida et al. suggest r 0.8-0.9 for less memory.  Our layer 0 keeps
 * the rate p it was sized for (so that a filter that never grows is
 * unchanged), and counts as full when its fill says 0.475 p: at about 0.9 x
 * its capacity at p 1% (a load's takes its capacity first: filter_loading).
 *
 * What callers must do: nothing to make it grow.  filter_info's saturated
 * says the promise can no longer be kept: the newest layer is past its share
 * and no layer can be added (max_layers reached, the next share below
 * FILTER_MIN_LAYER_FPP, or no memory for it).  From then on the rate climbs
 * with every insert.  A caller that advertises p must then replace the
 * filter (a new one sized from the true item count, e.g. by a COPY of the
 * table) or stop answering "absent".  A filter with max_layers 1 never
 * grows and is saturated once its fill says 0.95 p, a little past its
 * capacity.  Layers also cost lookup time (a cache line each, all of them
 * for an absent key: bench/filter_bench's lookup_layers_ns) and memory
 * (after 10x growth at p 1% and expansion 2: 40.5 bits per key against 10.3
 * for one filter sized for the final count, the newest layer being fresh
 * and mostly empty; 25.9 at expansion 1, with one layer more): a rebuild
 * sized for the items folds them back into one.
 */
#ifndef BLOOMGUARD_FILTER_H
#define BLOOMGUARD_FILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "filter_types.h"      /* kinds, limits, errors, plans, allocators */
#include "filter_model.h"      /* sizing: filter_plan ..., filter_growth_valid */
#include "filter_lookup.h"     /* inserts, lookups, figures */

struct filter;

/* A kind's name ("blocked"), as the configuration and /stats spell it; NULL for no kind. */
const char *filter_kind_name(enum filter_kind kind);
/* Whether k is a kind this build knows (k < FILTER_KINDS). */
bool filter_kind_known(unsigned k);

/* Human text for an error code (static storage). */
const char *filter_strerror(enum filter_error e);

/*
 * Create an empty blocked filter of one layer sized so that its
 * false-positive rate after expected_items distinct inserts is at most fpp,
 * growing with the default parameters (FILTER_GROWTH_DEFAULT) past that.
 * expected_items may be 0 (one block).  Returns NULL and sets *err (if err
 * is not NULL) on failure.  The caller owns the filter and releases it with
 * filter_free.
 */
struct filter *filter_new(uint64_t expected_items, double fpp, enum filter_error *err);
/* The same with growth parameters g (NULL: the defaults). */
struct filter *filter_new_growing(uint64_t expected_items, double fpp,
                                  const struct filter_growth *g, enum filter_error *err);

/*
 * filter_new_growing of kind kind (FILTER_EKIND when this build does not
 * know it), with the layers' bits from a (NULL: the default).
 */
struct filter *filter_new_with(enum filter_kind kind, uint64_t expected_items, double fpp,
                               const struct filter_growth *g, const struct filter_alloc *a,
                               enum filter_error *err);
/* The kind f was made as (filter_new_with, filter_new_from, filter_view_new). */
enum filter_kind filter_kind(const struct filter *f);

/*
 * Change the growth parameters of f (e.g. of a filter read from a snapshot
 * to the configured ones).  The newest layer's share is recomputed from
 * them and from the older layers' fill.  False (nothing changed) when g is
 * out of bounds.  Not thread-safe: call it before sharing f.
 */
bool filter_set_growth(struct filter *f, const struct filter_growth *g);
void filter_get_growth(const struct filter *f, struct filter_growth *out);

/*
 * A filter made for a load: sized for the rows a COPY is about to read,
 * so its first layer must hold them all at the rate p it was sized for,
 * not start growing at its share (0.475 p: about 0.9 x its capacity at p
 * 1%).  filter_loading(f), before f is shared, lets layer 0 take keys
 * until its rate from its fill reaches nearly the whole budget (0.943 p:
 * its capacity, and a little past it), so that a load of as many rows as
 * it was sized for, or a few more, stays one layer; a load far past its
 * estimate still grows (the caller sees layers > 1 and sizes again).  Every
 * insert path obeys it alike.  filter_loaded(f) ends it (thread-safe,
 * beside inserts): from then on layer 0 counts as full at its share, so
 * keys added after the load grow the filter as in any other.  Both do
 * nothing to a filter that never grows (max_layers 1) or has grown.
 */
void filter_loading(struct filter *f);
void filter_loaded(struct filter *f);

/* Release a filter; NULL is a no-op.  No other thread may be using it. */
void filter_free(struct filter *f);

/*
 * Serialising a filter (snapshots) without a second copy of its bits.
 *
 * filter_export gives the parameters a filter is rebuilt from: the whole's
 * rate and growth, and each layer's geometry, as many layers as the filter
 * has at that moment (a layer added afterwards is not part of that export).
 * Each layer's bit array is read out in chunks of any size by
 * filter_bits_read, straight from the live filter, while other threads keep
 * calling filter_add.  A layer's byte image is FILTER_BLOCK_BITS / 8 bytes
 * per block, block after block; inside a block, eight 64-bit words, each
 * stored little-endian (the same bytes on every machine).
 *
 * The contract of a copy taken during inserts, per layer: inserts only ever
 * set bits, and each 64-bit word is read whole (an atomic load).  So the
 * bytes a sequence of filter_bits_read calls returns hold every bit that was
 * set when the first call began: every key whose filter_add returned before
 * filter_export (in a thread that synchronises with the reader) is in the
 * copy of the layers exported.  A key added while the copy runs may be in
 * it, absent, in it in part (some of its words copied before the insert
 * reached them), or in a layer added after the export; a caller that needs
 * those keys must replay them from a position taken before the export.  The
 * same holds for items as filter_export reads it: it may lag the bits.
 *
 * filter_new_from builds an empty filter of exactly these parameters after
 * checking them: the kind must be one this build knows (FILTER_EKIND: never
 * read an image of another kind as one of ours), each layer's geometry
 * must be the one filter_plan_layer_kind chooses for its (capacity,
 * target_fpp) (a layer's rate may be below FILTER_MIN_FPP, down to
 * FILTER_MIN_LAYER_FPP), layer 0's rate is the
 * whole's, no layer's rate or share is above it and the shares' compound is
 * not either, so a filter read back is one this build could have made
 * (FILTER_EGEOMETRY otherwise; filter_plan's errors for the whole's rate and
 * the capacities; FILTER_EINVAL_GROWTH for the growth; FILTER_ETOO_LARGE for
 * items beyond FILTER_MAX_ITEMS, which the inserts that follow could
 * otherwise wrap round).  It costs one filter_plan per layer.  A share of 0
 * means "as filter_new_growing would give it" (for a snapshot that stored
 * none, with the older layers taken at their shares).  filter_bits_write
 * then ORs the bytes of a layer's image in; it is safe beside concurrent
 * filter_add (atomic ORs), so keys may flow into the new filter while it is
 * being filled.
 */
struct filter_layer_params {
    uint64_t capacity;     /* expected items the layer was sized for */
    double target_fpp;     /* the rate it was sized for */
    double share_fpp;      /* the rate at which it counts as full (0: see above) */
    uint64_t blocks;       /* 512-bit blocks: the image is blocks * 64 bytes */
    unsigned probes;       /* bits set per key */
    uint64_t items;        /* as filter_layer_info's items */
};
struct filter_params {
    enum filter_kind kind; /* every layer's */
    double target_fpp;     /* p of the whole */
    struct filter_growth growth;
    unsigned layers;       /* 1 ..= FILTER_MAX_LAYERS */
    struct filter_layer_params layer[FILTER_MAX_LAYERS];
};
void filter_export(const struct filter *f, struct filter_params *out);


/*
 * Copy len bytes of layer's image from byte offset on into buf.  False
 * (nothing copied) when the filter has no such layer or [offset, offset +
 * len) is not inside its image.  Lock-free, never blocks inserts or lookups.
 */
bool filter_bits_read(const struct filter *f, unsigned layer, uint64_t offset, void *buf,
                      size_t len);

struct filter *filter_new_from(const struct filter_params *p, enum filter_error *err);

/* filter_new_from with the layers' bits from a (NULL: the default; see filter_alloc). */
struct filter *filter_new_from_with(const struct filter_params *p, const struct filter_alloc *a,
                                    enum filter_error *err);

/*
 * OR len bytes of an image into layer from byte offset on (bits_set
 * follows).  False (nothing written) when there is no such layer or the
 * range is not inside its image.  Safe beside filter_add, filter_contains
 * and other filter_bits_write calls.  It never adds a layer: a layer filled
 * past its share makes the next insert add one.
 */
bool filter_bits_write(struct filter *f, unsigned layer, uint64_t offset, const void *buf,
                       size_t len);

/*
 * Views: a read-only filter over layers whose bits live in memory that
 * someone else writes, e.g. another process's published filter (publish.h)
 * mapped read-only.  Lookups (filter_contains, filter_contains_hash) are
 * the very code the writer's own lookups run; the writer's inserts only
 * ever set bits, with whole-word stores, so a view sees each word before
 * or after an insert, never torn.
 *
 * filter_view_new makes a view of one layer of kind kind: blocks 512-bit
 * blocks at words (64-byte aligned, blocks * FILTER_BLOCK_BYTES bytes,
 * readable for the view's life), each key setting probes bits.
 * filter_view_add appends the next layer (of the view's kind) and
 * publishes it (release) to lookups running concurrently: the same
 * append-only rule as growth, so adds must not overlap one another,
 * lookups may run.  NULL / false when the geometry is not one a filter can
 * have (a kind this build does not know, blocks 0 or beyond
 * FILTER_MAX_BYTES, probes outside 1..16, words unaligned), or the view
 * has FILTER_MAX_LAYERS layers, or no memory.  filter_free releases the
 * view, never the bits.  Never call an insert on a view.  target_fpp is
 * only reported back.
 */
struct filter *filter_view_new(enum filter_kind kind, double target_fpp, uint64_t blocks,
                               unsigned probes, const void *words);
bool filter_view_add(struct filter *f, uint64_t blocks, unsigned probes, const void *words);
/* Layers f has now (acquire): a lookup checks these. */
unsigned filter_layers(const struct filter *f);

#endif
