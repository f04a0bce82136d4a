/*
 * The arithmetic of a filter layer of each kind, with no memory of its
 * own: the false-positive model, sizing a plan for n keys at a rate p, and
 * a layer's rate estimated from its fill (and the fill at which it is
 * full).  The entry points switch on the kind; a kind missing from a
 * switch is a compiler warning (-Wswitch), so an error under --enable-werror.
 */
#include "filter_model.h"
#include "filter_int.h"

#include <math.h>
#include <stdatomic.h>

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


/* The blocked sizing behind filter_plan and filter_plan_layer: rates above floor. */
static enum filter_error plan_blocked(uint64_t n, double p, double floor_p, bool floor_open,
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

/* A plan of kind kind for rates above floor. */
static enum filter_error plan_above(enum filter_kind kind, uint64_t n, double p, double floor_p,
                                    bool floor_open, struct filter_plan *out)
{
    enum filter_error e = FILTER_EKIND;
    switch (kind) {
    case FILTER_KIND_BLOCKED:
        e = plan_blocked(n, p, floor_p, floor_open, out);
        break;
    case FILTER_KINDS:
        break;
    }
    if (e == FILTER_OK)
        out->kind = kind;
    return e;
}

enum filter_error filter_plan_kind(enum filter_kind kind, uint64_t n, double p,
                                   struct filter_plan *out)
{
    return plan_above(kind, n, p, FILTER_MIN_FPP, true, out);
}

enum filter_error filter_plan_layer_kind(enum filter_kind kind, uint64_t n, double p,
                                         struct filter_plan *out)
{
    return plan_above(kind, n, p, FILTER_MIN_LAYER_FPP, false, out);
}

enum filter_error filter_plan(uint64_t n, double p, struct filter_plan *out)
{
    return filter_plan_kind(FILTER_KIND_BLOCKED, n, p, out);
}

enum filter_error filter_plan_layer(uint64_t n, double p, struct filter_plan *out)
{
    return filter_plan_layer_kind(FILTER_KIND_BLOCKED, n, p, out);
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
 * A blocked layer's false-positive rate estimated from its fill: the keys
 * per block the fill implies (bisection: fill grows with lambda), then the
 * model for that many keys.
 */
static double blocked_rate(const struct layer *l, uint64_t bits_set)
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

double filter_layer_rate(const struct layer *l, uint64_t bits_set)
{
    switch (l->kind) {
    case FILTER_KIND_BLOCKED:
        return blocked_rate(l, bits_set);
    case FILTER_KINDS:
        break;
    }
    return 1.0;
}

double filter_layer_rate_now(const struct layer *l)
{
    return filter_layer_rate(l, atomic_load_explicit(&((struct layer *)l)->bits_set,
                                                     memory_order_relaxed));
}

/*
 * The bits_set at which blocked_rate() reaches share: the inverse, computed
 * once per layer so that an insert compares two integers.  Bisection on the
 * keys per block (the model grows with them), then their expected fill.
 */
static uint64_t blocked_bits_at_rate(const struct layer *l, double share)
{
    uint64_t bits = l->blocks * FILTER_BLOCK_BITS;
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

/* The same for a layer of any kind: 0 for no share. */
static uint64_t bits_at_rate(const struct layer *l, double share)
{
    if (!(share > 0))
        return 0;
    switch (l->kind) {
    case FILTER_KIND_BLOCKED:
        return blocked_bits_at_rate(l, share);
    case FILTER_KINDS:
        break;
    }
    return 0;
}

uint64_t filter_layer_bits_at(const struct layer *l, double rate)
{
    return bits_at_rate(l, rate);
}

void filter_layer_set_share(struct layer *l, double share)
{
    l->share_fpp = share;
    l->full_bits = bits_at_rate(l, share);
    atomic_store_explicit(&l->grow_at, l->full_bits, memory_order_relaxed);
}
