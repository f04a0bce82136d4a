/*
 * Unit tests of the Bloom filter core: no false negatives, a measured
 * false-positive rate inside [p/2, p], concurrency, limits and 64-bit math;
 * and of its growth by layers: the measured rate of the whole under p
 * after 10x and 100x growth, saturation, the bulk path growing like the
 * atomic one, export and import of layers, inserts racing with growth.
 */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "bigmap.h"
#include "check_util.h"
#include "config.h"
#include "filter.h"

#define MILLION 1000000u

/* Growth parameters of a filter that never grows: one layer, as before layers. */
static const struct filter_growth ONE_LAYER = { 2.0, 0.5, 1 };

/* f's figures now (filter_info). */
static struct filter_info info_of(const struct filter *f)
{
    struct filter_info fi;
    filter_info(f, &fi);
    return fi;
}

static size_t key_of(char *buf, size_t cap, const char *prefix, uint64_t i)
{
    return (size_t)snprintf(buf, cap, "%s-%llu", prefix, (unsigned long long)i);
}

START_TEST(test_no_false_negatives)
{
    char k[64];
    struct filter *f = filter_new(MILLION, 0.01, NULL);
    ck_assert_ptr_nonnull(f);
    for (uint64_t i = 0; i < MILLION; i++)
        filter_add(f, k, key_of(k, sizeof k, "user", i));
    uint64_t missing = 0;
    for (uint64_t i = 0; i < MILLION; i++)
        missing += !filter_contains(f, k, key_of(k, sizeof k, "user", i));
    ck_assert_uint_eq(missing, 0);
    struct filter_info fi;
    filter_info(f, &fi);
    /* Keys that were false positives when added set no bit and are not counted. */
    ck_assert_uint_le(fi.items, MILLION);
    ck_assert_uint_ge(fi.items, MILLION - MILLION / 100);
    /* Duplicates never count: the next filter is sized from items. */
    uint64_t before = fi.items;
    for (int rep = 0; rep < 3; rep++)
        for (uint64_t i = 0; i < 10000; i++)
            filter_add(f, k, key_of(k, sizeof k, "user", i));
    uint64_t hs[256];
    for (size_t i = 0; i < 256; i++)
        hs[i] = filter_hash(k, key_of(k, sizeof k, "user", i));
    filter_add_hashes_exclusive(f, hs, 256);
    filter_info(f, &fi);
    ck_assert_uint_eq(fi.items, before);
    filter_free(f);
}
END_TEST

/* The sizing of one layer, filled to its capacity: it must not grow for that. */
static void check_rate(double p, bool simd)
{
    char k[64];
    struct filter *f = filter_new_growing(MILLION, p, &ONE_LAYER, NULL);
    ck_assert_ptr_nonnull(f);
    filter_use_simd(f, simd);
    for (uint64_t i = 0; i < MILLION; i++)
        filter_add(f, k, key_of(k, sizeof k, "present", i));
    uint64_t fp = 0;
    for (uint64_t i = 0; i < MILLION; i++)
        fp += filter_contains(f, k, key_of(k, sizeof k, "absent", i));
    double rate = (double)fp / MILLION;
    struct filter_info fi;
    filter_info(f, &fi);
    fprintf(stderr, "p=%g measured=%.6f estimated=%.6f bits/key=%.2f k=%u\n",
            p, rate, fi.estimated_fpp, (double)fi.bits / MILLION, fi.probes);
    ck_assert_msg(rate <= p, "measured rate %g above target %g", rate, p);
    ck_assert_msg(rate >= 0.5 * p, "measured rate %g far below %g: oversized", rate, p);
    /* The estimate from the fill ratio tracks the measurement. */
    ck_assert_double_le(fabs(fi.estimated_fpp - rate), 0.15 * p);
    filter_free(f);
}

START_TEST(test_fpp_1pct) { check_rate(0.01, true); }
END_TEST

START_TEST(test_fpp_01pct) { check_rate(0.001, true); }
END_TEST

START_TEST(test_fpp_1pct_portable) { check_rate(0.01, false); }
END_TEST

/* What both_paths counts: answers that differ, present keys missed, absent keys held. */
struct path_tally {
    uint64_t differ, missing, fp;
};

/*
 * Keys 0 .. n-1 alternating "out-<i/2>" (absent) and "in-<i/2>" asked of f
 * by the portable path, by AVX2 and by the batch (filter_contains_hashes,
 * against AVX2's answers and its count): how often they differ, how many of
 * the in-keys below held the AVX2 path misses, and how many out-keys it
 * holds (the same as the portable path's once differ is 0).
 */
static struct path_tally both_paths(struct filter *f, uint64_t n, uint64_t held)
{
    struct path_tally t = { 0 };
    char k[64];
    /* The batch form too, by runs of a length no multiple of its look-ahead, some shorter than it. */
    enum { RUN = 37 };
    uint64_t hs[RUN];
    bool one[RUN], batch[RUN];
    size_t run = 0, cut = 1;
    for (uint64_t i = 0; i < n; i++) {
        size_t len = key_of(k, sizeof k, i % 2 ? "in" : "out", i / 2);
        filter_use_simd(f, false);
        bool scalar = filter_contains(f, k, len);
        filter_use_simd(f, true);
        bool simd = filter_contains(f, k, len);
        t.differ += scalar != simd;
        t.missing += i % 2 && i / 2 < held && !simd;
        t.fp += i % 2 == 0 && simd;
        hs[run] = filter_hash(k, len);
        one[run++] = simd;
        if (run == cut || i == n - 1) {
            size_t maybe = filter_contains_hashes(f, hs, run, batch), held_too = 0;
            for (size_t j = 0; j < run; j++) {
                t.differ += batch[j] != one[j];
                held_too += one[j];
            }
            t.differ += maybe != held_too;
            run = 0;
            cut = cut % RUN + 1;        /* 1, 2, ..., RUN, 1, ... */
        }
    }
    return t;
}

/* The AVX2 and the portable lookups answer alike, key for key. */
START_TEST(test_simd_matches_scalar)
{
    char k[64];
    struct filter *f = filter_new(200000, 0.0001, NULL);  /* k > 8: both draws */
    struct filter *g = filter_new(200000, 0.05, NULL);    /* k <= 8 */
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(g);
    struct filter_info fi;
    filter_info(f, &fi);
    ck_assert_uint_gt(fi.probes, 8);
    filter_info(g, &fi);
    ck_assert_uint_le(fi.probes, 8);
    for (uint64_t i = 0; i < 200000; i++) {
        size_t n = key_of(k, sizeof k, "in", i);
        filter_add(f, k, n);
        filter_add(g, k, n);
    }
    struct path_tally tf = both_paths(f, 400000, UINT64_MAX);
    struct path_tally tg = both_paths(g, 400000, UINT64_MAX);
    ck_assert_uint_eq(tf.differ, 0);
    ck_assert_uint_eq(tg.differ, 0);
    ck_assert_uint_eq(tf.missing, 0);
    ck_assert_uint_eq(tg.missing, 0);
    /* Both paths are exercised on keys that are absent and present. */
    ck_assert_uint_gt(tg.fp, 0);
    ck_assert_uint_lt(tf.fp, tg.fp);
    filter_free(f);
    filter_free(g);

    /*
     * A grown filter whose first layer sets one bit per word and a later
     * one two (its tighter share): the SIMD lookup draws the second masks
     * from the moment such a layer is added, never before.
     */
    struct filter *h = filter_new(2000, 0.002, NULL);
    ck_assert_ptr_nonnull(h);
    for (uint64_t i = 0; i < 100000; i++)
        filter_add(h, k, key_of(k, sizeof k, "in", i));
    struct filter_layer_info first, last;
    ck_assert(filter_layer_info(h, 0, &first));
    ck_assert(filter_layer_info(h, filter_layers(h) - 1, &last));
    ck_assert_uint_le(first.probes, 8);
    ck_assert_uint_gt(last.probes, 8);
    struct path_tally th = both_paths(h, 200000, UINT64_MAX);
    ck_assert_uint_eq(th.differ, 0);
    ck_assert_uint_eq(th.missing, 0);

    /*
     * Fewer than 8 probes (no sizing chooses it, but a view maps whatever a
     * published file says): a view of 4 probes over h's first layer, whose
     * keys set bits in all 8 words, holds every key of that layer by the
     * bits of words 0-3, and both paths agree.
     */
    struct filter_params hp;
    filter_export(h, &hp);
    size_t bytes = (size_t)(hp.layer[0].blocks * FILTER_BLOCK_BYTES);
    void *img = aligned_alloc(64, bytes);
    ck_assert(filter_bits_read(h, 0, 0, img, bytes));
    struct filter *v = filter_view_new(FILTER_KIND_BLOCKED, 0.002, hp.layer[0].blocks, 4, img);
    ck_assert_ptr_nonnull(v);
    struct path_tally tv = both_paths(v, 20000, hp.layer[0].items);
    ck_assert_uint_eq(tv.differ, 0);
    ck_assert_uint_eq(tv.missing, 0);
    ck_assert_uint_gt(tv.fp, 0);    /* fewer bits to test: more false positives, both paths alike */
    filter_free(v);
    free(img);
    filter_free(h);
}
END_TEST

/*
 * The usual filter (8 probes in every layer) at each count of layers: its
 * AVX2 lookup is straight-line code for 1 to 4 layers and a loop past
 * them, and every one of them answers as the portable path, key for key,
 * with no false negative.
 */
START_TEST(test_simd_matches_scalar_by_layers)
{
    char k[64];
    struct filter *f = filter_new(1000, 0.01, NULL);
    ck_assert_ptr_nonnull(f);
    uint64_t added = 0;
    for (unsigned want = 1; want <= 6; want++) {
        while (filter_layers(f) < want && added < 1000000)
            filter_add(f, k, key_of(k, sizeof k, "in", added++));
        ck_assert_uint_eq(filter_layers(f), want);
        struct filter_layer_info li;
        for (unsigned i = 0; want <= 4 && i < want; i++) {
            ck_assert(filter_layer_info(f, i, &li));
            ck_assert_uint_eq(li.probes, 8);        /* the unrolled path's case */
        }
        struct path_tally t = both_paths(f, 2 * added + 2000, added);
        ck_assert_uint_eq(t.differ, 0);
        ck_assert_uint_eq(t.missing, 0);
    }
    filter_free(f);
}
END_TEST

START_TEST(test_bits_per_key_bound)
{
    /* At p = 1% the blocked layout stays within 1.6 x log2(1/p) bits per key. */
    struct filter_plan plan;
    ck_assert_int_eq(filter_plan(10 * MILLION, 0.01, &plan), FILTER_OK);
    double bpk = (double)plan.bits / (10.0 * MILLION);
    ck_assert_double_le(bpk, 1.6 * log2(100.0));
    ck_assert_double_le(plan.model_fpp, 0.01);
}
END_TEST

struct worker {
    struct filter *f;
    unsigned id;
    uint64_t count;
    uint64_t bad;            /* readers: keys already confirmed that vanished */
    volatile int *stop;
};

static void *inserter(void *arg)
{
    struct worker *w = arg;
    char k[64];
    for (uint64_t i = 0; i < w->count; i++)
        filter_add(w->f, k, key_of(k, sizeof k, w->id ? "b" : "a", i));
    return NULL;
}

static void *reader(void *arg)
{
    struct worker *w = arg;
    char k[64];
    uint64_t i = 0;
    /* Keys inserted before this thread started must be present throughout. */
    while (!*w->stop) {
        w->bad += !filter_contains(w->f, k, key_of(k, sizeof k, "pre", i % 50000));
        (void)filter_contains(w->f, k, key_of(k, sizeof k, w->id ? "a" : "b", i % w->count));
        i++;
    }
    return NULL;
}

START_TEST(test_concurrent)
{
    const uint64_t per = 300000;
    char k[64];
    volatile int stop = 0;
    struct filter *f = filter_new(2 * per + 50000, 0.01, NULL);
    ck_assert_ptr_nonnull(f);
    for (uint64_t i = 0; i < 50000; i++)
        filter_add(f, k, key_of(k, sizeof k, "pre", i));

    struct worker ins[2], rd[2];
    pthread_t ti[2], tr[2];
    for (unsigned t = 0; t < 2; t++) {
        rd[t] = (struct worker){ .f = f, .id = t, .count = per, .stop = &stop };
        ck_assert_int_eq(pthread_create(&tr[t], NULL, reader, &rd[t]), 0);
    }
    for (unsigned t = 0; t < 2; t++) {
        ins[t] = (struct worker){ .f = f, .id = t, .count = per, .stop = &stop };
        ck_assert_int_eq(pthread_create(&ti[t], NULL, inserter, &ins[t]), 0);
    }
    for (unsigned t = 0; t < 2; t++)
        pthread_join(ti[t], NULL);
    stop = 1;
    for (unsigned t = 0; t < 2; t++) {
        pthread_join(tr[t], NULL);
        ck_assert_uint_eq(rd[t].bad, 0);
    }
    uint64_t missing = 0;
    for (uint64_t i = 0; i < per; i++) {
        missing += !filter_contains(f, k, key_of(k, sizeof k, "a", i));
        missing += !filter_contains(f, k, key_of(k, sizeof k, "b", i));
    }
    ck_assert_uint_eq(missing, 0);
    struct filter_info fi;
    filter_info(f, &fi);
    ck_assert_uint_le(fi.items, 2 * per + 50000);
    ck_assert_uint_ge(fi.items, (2 * per + 50000) * 99 / 100);
    filter_free(f);
}
END_TEST

START_TEST(test_bad_parameters)
{
    enum filter_error e = FILTER_OK;
    double bad_p[] = { 0.0, -0.1, 0.5, 0.7, 1.0, NAN, INFINITY, 1e-9 };
    for (size_t i = 0; i < sizeof bad_p / sizeof bad_p[0]; i++) {
        ck_assert_ptr_null(filter_new(100, bad_p[i], &e));
        ck_assert_int_eq(e, FILTER_EINVAL_FPP);
    }
    ck_assert_ptr_null(filter_new(FILTER_MAX_ITEMS + 1, 0.01, &e));
    ck_assert_int_eq(e, FILTER_ETOO_LARGE);
    ck_assert_ptr_null(filter_new(UINT64_MAX, 0.01, &e));
    ck_assert_int_eq(e, FILTER_ETOO_LARGE);
    ck_assert_str_ne(filter_strerror(FILTER_ETOO_LARGE), "");
    filter_free(NULL);
}
END_TEST

START_TEST(test_tiny_filters)
{
    struct filter_info fi;
    struct filter *f0 = filter_new(0, 0.01, NULL);
    ck_assert_ptr_nonnull(f0);
    ck_assert(!filter_contains(f0, "x", 1));
    filter_info(f0, &fi);
    ck_assert_uint_eq(fi.bits, FILTER_BLOCK_BITS);
    ck_assert_uint_eq(fi.items, 0);
    ck_assert_double_eq(fi.fill_ratio, 0.0);
    ck_assert_double_eq(fi.estimated_fpp, 0.0);
    filter_add(f0, "x", 1);
    filter_add(f0, "", 0);
    ck_assert(filter_contains(f0, "x", 1));
    ck_assert(filter_contains(f0, "", 0));
    filter_free(f0);

    struct filter *f1 = filter_new(1, 0.01, NULL);
    ck_assert_ptr_nonnull(f1);
    ck_assert(!filter_contains(f1, "only", 4));
    filter_add(f1, "only", 4);
    ck_assert(filter_contains(f1, "only", 4));
    filter_info(f1, &fi);
    ck_assert_uint_eq(fi.items, 1);
    ck_assert_uint_eq(fi.capacity, 1);
    ck_assert_uint_le(fi.bits_set, fi.probes);
    ck_assert_uint_ge(fi.bits_set, 1);
    filter_free(f1);
}
END_TEST

START_TEST(test_index_math_64bit)
{
    /* A filter of 2^40 blocks (2^49 bits): far beyond 2^32, no allocation. */
    const uint64_t nb = UINT64_C(1) << 40;
    ck_assert_uint_eq(filter_block_index(0, nb), 0);
    ck_assert_uint_eq(filter_block_index(UINT64_MAX, nb), nb - 1);
    ck_assert_uint_eq(filter_block_index(UINT64_C(1) << 63, nb), nb / 2);
    ck_assert_uint_eq(filter_block_index(UINT64_C(3) << 62, nb), 3 * (nb / 4));
    /* Blocks above 2^32 are reachable, i.e. no truncation to 32 bits. */
    ck_assert_uint_gt(filter_block_index(UINT64_MAX - 12345, nb), UINT64_C(1) << 32);
    /* nblocks that is not a power of two and above 2^32. */
    const uint64_t odd = (UINT64_C(1) << 33) + 7;
    ck_assert_uint_eq(filter_block_index(UINT64_MAX, odd), odd - 1);
    ck_assert_uint_lt(filter_block_index(UINT64_MAX, UINT64_MAX), UINT64_MAX);

    /* 10^9 keys at 1%: more than 2^32 bits, planned exactly in 64 bits. */
    struct filter_plan plan;
    ck_assert_int_eq(filter_plan(UINT64_C(1000000000), 0.01, &plan), FILTER_OK);
    ck_assert_uint_gt(plan.bits, UINT64_C(1) << 32);
    ck_assert_uint_eq(plan.bits, plan.blocks * FILTER_BLOCK_BITS);
    ck_assert_double_le(plan.model_fpp, 0.01);
    double bpk = (double)plan.bits / 1e9;
    ck_assert_double_lt(bpk, 11.0);
    ck_assert_double_gt(bpk, 9.0);

    /* The model agrees with itself across scales: same keys per block, same rate. */
    double a = filter_model_fpp(1e3, 20, 7), b = filter_model_fpp(1e12, 20000000000ull, 7);
    ck_assert_double_le(fabs(a - b), 1e-9);
}
END_TEST

/* ------------------------------------------------------------- layers -- */

/* Share of n absent keys ("absent-<i>") that f answers as present. */
static double measured_rate(const struct filter *f, uint64_t n)
{
    char k[64];
    uint64_t fp = 0;
    for (uint64_t i = 0; i < n; i++)
        fp += filter_contains(f, k, key_of(k, sizeof k, "absent", i));
    return (double)fp / (double)n;
}

/* A filter that never grows is the one filter_plan sizes, as before layers. */
START_TEST(test_one_layer_unchanged)
{
    char k[64];
    struct filter_plan plan;
    ck_assert_int_eq(filter_plan(100000, 0.01, &plan), FILTER_OK);
    struct filter *f = filter_new_growing(100000, 0.01, &ONE_LAYER, NULL);
    struct filter *g = filter_new(100000, 0.01, NULL);
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(g);
    struct filter_info fi = info_of(f), gi = info_of(g);
    /* The growing one's first layer is the same filter: same geometry and memory. */
    ck_assert_uint_eq(fi.bits, plan.bits);
    ck_assert_uint_eq(gi.bits, plan.bits);
    ck_assert_uint_eq(fi.probes, plan.probes);
    ck_assert_uint_eq(fi.memory_bytes, gi.memory_bytes);
    ck_assert_uint_eq(fi.layers, 1);
    ck_assert(!fi.saturated);
    /* Twice its capacity: still one layer, saturated, and the rate is above p. */
    for (uint64_t i = 0; i < 200000; i++)
        filter_add(f, k, key_of(k, sizeof k, "in", i));
    filter_info(f, &fi);
    ck_assert_uint_eq(fi.layers, 1);
    ck_assert(fi.saturated);
    ck_assert_double_gt(fi.estimated_fpp, 0.01);
    struct filter_layer_info li;
    ck_assert(filter_layer_info(f, 0, &li));
    ck_assert(!filter_layer_info(f, 1, &li));
    ck_assert_double_eq(li.share_fpp, 0.95 * 0.01);
    ck_assert_uint_eq(li.bits, fi.bits);
    ck_assert_uint_eq(li.items, fi.items);
    filter_free(f);
    filter_free(g);
}
END_TEST

/*
 * mult[0], mult[1] times the first layer's capacity: no false negative, and
 * the rate measured over `absent` absent keys under p (at p = 1%, 10^6 keys
 * give about 10^4 false positives: a standard deviation near 1% of p), with
 * the estimate under 0.95 p at every growth and the layers' figures adding
 * up to the whole's.  The first layer must not be tiny: the rate of a
 * filter of a few hundred blocks strays from its estimate by several
 * percent, one filter to the next.
 */
static void check_growth(double p, uint64_t n0, bool simd, const unsigned mult[2],
                         uint64_t absent)
{
    char k[64];
    struct filter *f = filter_new(n0, p, NULL);
    ck_assert_ptr_nonnull(f);
    filter_use_simd(f, simd);
    uint64_t added = 0;
    unsigned layers = 1;
    for (unsigned m = 0; m < 2; m++) {
        for (; added < mult[m] * n0; added++) {
            filter_add(f, k, key_of(k, sizeof k, "in", added));
            if (added % 1000 == 0) {
                struct filter_info fi;
                filter_info(f, &fi);
                ck_assert_uint_ge(fi.layers, layers);
                layers = fi.layers;
                ck_assert_msg(fi.estimated_fpp <= 0.95 * p * (1 + 1e-9),
                              "estimate %g above 0.95 p with %u layers", fi.estimated_fpp,
                              fi.layers);
                ck_assert(!fi.saturated);
            }
        }
        uint64_t missing = 0;
        for (uint64_t i = 0; i < added; i++)
            missing += !filter_contains(f, k, key_of(k, sizeof k, "in", i));
        ck_assert_uint_eq(missing, 0);
        double rate = measured_rate(f, absent);
        struct filter_info fi;
        filter_info(f, &fi);
        fprintf(stderr, "p=%g growth x%u: layers=%u measured=%.6f estimated=%.6f bits/key=%.2f\n",
                p, mult[m], fi.layers, rate, fi.estimated_fpp, (double)fi.bits / (double)added);
        ck_assert_msg(rate <= p, "measured rate %g above target %g after x%u", rate, p, mult[m]);
        ck_assert_uint_ge(fi.layers, mult[m] >= 100 ? 5 : 3);
        /* The whole is the sum of its layers; the rate their compound. */
        uint64_t items = 0, cap = 0, bits = 0, set = 0;
        double keep = 1.0;
        for (unsigned i = 0; i < fi.layers; i++) {
            struct filter_layer_info li;
            ck_assert(filter_layer_info(f, i, &li));
            items += li.items;
            cap += li.capacity;
            bits += li.bits;
            set += li.bits_set;
            keep *= 1 - li.estimated_fpp;
            ck_assert_double_le(li.target_fpp, p);
            /* Every layer but the newest has taken its share: full. */
            if (i + 1 < fi.layers)
                ck_assert_double_ge(li.estimated_fpp, li.share_fpp * (1 - 1e-6));
        }
        ck_assert_uint_eq(items, fi.items);
        ck_assert_uint_eq(cap, fi.capacity);
        ck_assert_uint_eq(bits, fi.bits);
        ck_assert_uint_eq(set, fi.bits_set);
        ck_assert_double_le(fabs((1 - keep) - fi.estimated_fpp), 1e-12);
        ck_assert_uint_le(fi.items, added);
        ck_assert_uint_ge(fi.items, added - added / 100);
    }
    filter_free(f);
}

static const unsigned X10_X100[2] = { 10, 100 }, X10_X20[2] = { 10, 20 };

START_TEST(test_growth_rate_1pct) { check_growth(0.01, 10000, true, X10_X100, MILLION); }
END_TEST

START_TEST(test_growth_rate_1pct_portable) { check_growth(0.01, 10000, false, X10_X100, MILLION); }
END_TEST

/* At p = 0.1%: 2 x 10^6 absent keys for about 1,700 false positives. */
START_TEST(test_growth_rate_01pct) { check_growth(0.001, 50000, true, X10_X20, 2 * MILLION); }
END_TEST

/* Hashes of keys prefix-0 .. prefix-(n-1), for the bulk path. */
static uint64_t *hashes_of(const char *prefix, uint64_t n)
{
    char k[64];
    uint64_t *hs = malloc(n * sizeof *hs);
    ck_assert_ptr_nonnull(hs);
    for (uint64_t i = 0; i < n; i++)
        hs[i] = filter_hash(k, key_of(k, sizeof k, prefix, i));
    return hs;
}

/*
 * A load's filter (filter_loading) holds the rows it was sized for, and a
 * few more, in its one layer at the rate p: a plain one starts growing at
 * 0.9 x its capacity (its share, 0.475 p), and a load of 200,005 rows into
 * a filter for 200,000 used to end in two layers at 34 bits per key.  Once
 * loaded, it grows for new keys as any filter, never for keys it holds.
 * Each row a rate and a kind of sizing: at p 1e-4 a key sets two bits in
 * some words (k 16), and the layer's rate at capacity is the highest.
 */
static const double load_rates[] = { 0.01, 0.001, 0.0001 };

START_TEST(test_load_holds_its_capacity)
{
    double p = load_rates[_i];
    const uint64_t n = 200000, more = n + n / 1000;
    uint64_t *hs = hashes_of("row", more + 1);
    struct filter *plain = filter_new(n, p, NULL), *f = filter_new(n, p, NULL);
    ck_assert(plain != NULL && f != NULL);
    filter_loading(f);
    filter_add_hashes_exclusive(plain, hs, n);
    ck_assert_msg(filter_layers(plain) >= 2, "p=%g: a plain filter grows before capacity", p);
    filter_add_hashes_exclusive(f, hs, more);
    struct filter_info fi;
    filter_info(f, &fi);
    ck_assert_msg(fi.layers == 1, "p=%g: %llu rows into a load's filter for %llu: %u layers",
                  p, (unsigned long long)more, (unsigned long long)n, fi.layers);
    ck_assert_msg(fi.estimated_fpp <= 0.95 * p, "p=%g: estimated %g", p, fi.estimated_fpp);
    struct filter_plan plan;
    ck_assert_int_eq(filter_plan(n, p, &plan), FILTER_OK);
    ck_assert_uint_eq(fi.bits, plan.bits);
    /* Loaded: keys it holds, by either path, never make it grow; a new one does. */
    filter_loaded(f);
    for (uint64_t i = 0; i < 1000; i++)
        filter_add_hash(f, hs[i]);
    filter_add_hashes_exclusive(f, hs, 1000);
    ck_assert_uint_eq(filter_layers(f), 1);
    ck_assert(!filter_saturated(f));
    filter_add_hash(f, hs[more]);
    ck_assert_uint_eq(filter_layers(f), 2);
    ck_assert(filter_contains_hash(f, hs[more]));
    filter_free(plain);
    filter_free(f);

    /* A load far past its estimate still grows: the caller then sizes again. */
    f = filter_new(n / 4, p, NULL);
    filter_loading(f);
    filter_add_hashes_exclusive(f, hs, n);
    ck_assert_uint_ge(filter_layers(f), 2);
    ck_assert(!filter_saturated(f));
    for (uint64_t i = 0; i < n; i++)
        ck_assert(filter_contains_hash(f, hs[i]));
    filter_free(f);
    free(hs);
}
END_TEST

/* At max_layers the filter stops growing, and says so once past the share. */
START_TEST(test_saturation)
{
    char k[64];
    const struct filter_growth three = { 2.0, 0.5, 3 };
    struct filter *f = filter_new_growing(1000, 0.01, &three, NULL);
    ck_assert_ptr_nonnull(f);
    struct filter_info fi;
    bool was = false;
    uint64_t i;
    for (i = 0; i < 100000 && !was; i++) {
        filter_add(f, k, key_of(k, sizeof k, "in", i));
        filter_info(f, &fi);
        if (!fi.saturated)
            ck_assert_double_le(fi.estimated_fpp, 0.95 * 0.01 * (1 + 1e-9));
        was = fi.saturated;
    }
    ck_assert(was);
    ck_assert_uint_eq(fi.layers, 3);
    /* The last layer took all that was left of the budget: 0.95 p, reached. */
    ck_assert_double_ge(fi.estimated_fpp, 0.95 * 0.01 * (1 - 1e-6));
    ck_assert_double_le(fi.estimated_fpp, 0.0096);
    for (; i < 100000; i++)
        filter_add(f, k, key_of(k, sizeof k, "in", i));
    filter_info(f, &fi);
    ck_assert_uint_eq(fi.layers, 3);
    ck_assert(fi.saturated);
    ck_assert_double_gt(fi.estimated_fpp, 0.01);
    /*
     * Room for a fourth layer comes too late: the third overran the budget,
     * there is no share left for another, and the filter stays saturated.
     */
    const struct filter_growth four = { 2.0, 0.5, 4 };
    ck_assert(filter_set_growth(f, &four));
    for (uint64_t j = 0; j < 1000; j++)
        filter_add(f, k, key_of(k, sizeof k, "late", j));
    filter_info(f, &fi);
    ck_assert_uint_eq(fi.layers, 3);
    ck_assert(fi.saturated);
    filter_free(f);

    /* Given in time, it is used: a filter made for 3 layers grows to 4. */
    f = filter_new_growing(1000, 0.01, &three, NULL);
    for (i = 0; i < 5000; i++)
        filter_add(f, k, key_of(k, sizeof k, "in", i));
    filter_info(f, &fi);
    ck_assert_uint_eq(fi.layers, 3);
    ck_assert(!fi.saturated);
    ck_assert(filter_set_growth(f, &four));
    for (; fi.layers < 4 && i < 100000; i++) {
        filter_add(f, k, key_of(k, sizeof k, "in", i));
        filter_info(f, &fi);
    }
    ck_assert_uint_eq(fi.layers, 4);
    ck_assert(!fi.saturated);
    ck_assert_double_le(fi.estimated_fpp, 0.95 * 0.01 * (1 + 1e-9));
    filter_free(f);

    /* Growth parameters out of bounds are refused. */
    enum filter_error e = FILTER_OK;
    const struct filter_growth bad[] = {
        { 0.5, 0.5, 8 }, { 17, 0.5, 8 }, { NAN, 0.5, 8 }, { 2, 0.05, 8 }, { 2, 0.95, 8 },
        { 2, NAN, 8 }, { 2, 0.5, 0 }, { 2, 0.5, FILTER_MAX_LAYERS + 1 },
    };
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
        ck_assert(!filter_growth_valid(&bad[b]));
        ck_assert_ptr_null(filter_new_growing(100, 0.01, &bad[b], &e));
        ck_assert_int_eq(e, FILTER_EINVAL_GROWTH);
    }
    const struct filter_growth def = FILTER_GROWTH_DEFAULT;
    ck_assert(filter_growth_valid(&def));
    f = filter_new(100, 0.01, NULL);
    ck_assert(!filter_set_growth(f, &bad[0]));
    struct filter_growth g;
    filter_get_growth(f, &g);
    ck_assert_uint_eq(g.max_layers, FILTER_DEFAULT_MAX_LAYERS);
    ck_assert_double_eq(g.expansion, FILTER_DEFAULT_EXPANSION);
    ck_assert_str_ne(filter_strerror(FILTER_EINVAL_GROWTH), "unknown filter error");
    filter_free(f);
}
END_TEST

/* Every bit of every layer of f and g, and their parameters, are the same. */
static void assert_same_filter(const struct filter *f, const struct filter *g)
{
    check_same_layers(f, g);
    struct filter_params fp, gp;
    filter_export(f, &fp);
    filter_export(g, &gp);
    ck_assert_double_eq(fp.target_fpp, gp.target_fpp);
    ck_assert_mem_eq(&fp.growth, &gp.growth, sizeof fp.growth);
    for (unsigned i = 0; i < fp.layers; i++) {
        ck_assert_double_eq(fp.layer[i].share_fpp, gp.layer[i].share_fpp);
        ck_assert_uint_eq(fp.layer[i].items, gp.layer[i].items);
    }
    struct filter_info fi = info_of(f), gi = info_of(g);
    ck_assert_uint_eq(fi.bits_set, gi.bits_set);
    ck_assert_uint_eq(fi.items, gi.items);
    ck_assert_int_eq(fi.saturated, gi.saturated);
}

/*
 * The bulk loader's path grows where filter_add grows, key for key: a load
 * that outgrows its size estimate ends with the filter the inserts would
 * have built.
 */
START_TEST(test_bulk_grows_like_add)
{
    char k[64];
    const uint64_t n = 300000;
    struct filter *f = filter_new(5000, 0.01, NULL), *b = filter_new(5000, 0.01, NULL);
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(b);
    uint64_t *hs = malloc(n * sizeof *hs);
    ck_assert_ptr_nonnull(hs);
    for (uint64_t i = 0; i < n; i++) {
        /* Some duplicates, which neither path may count twice. */
        hs[i] = filter_hash(k, key_of(k, sizeof k, "bulk", i % 7 == 3 ? i / 2 : i));
        filter_add_hash(f, hs[i]);
    }
    for (uint64_t at = 0; at < n; at += 1000)
        filter_add_hashes_exclusive(b, hs + at, n - at < 1000 ? n - at : 1000);
    struct filter_info bi;
    filter_info(b, &bi);
    ck_assert_uint_ge(bi.layers, 5);
    assert_same_filter(f, b);
    for (uint64_t i = 0; i < n; i++)
        ck_assert(filter_contains_hash(b, hs[i]));
    free(hs);
    filter_free(f);
    filter_free(b);
}
END_TEST

/*
 * A grown filter exported and imported layer by layer is the same filter,
 * bit for bit, and goes on growing as the original does.
 */
START_TEST(test_layers_round_trip)
{
    char k[64];
    struct filter *f = filter_new(2000, 0.01, NULL);
    ck_assert_ptr_nonnull(f);
    for (uint64_t i = 0; i < 40000; i++)
        filter_add(f, k, key_of(k, sizeof k, "in", i));
    struct filter_params fp;
    filter_export(f, &fp);
    ck_assert_uint_ge(fp.layers, 4);
    enum filter_error e = FILTER_ENOMEM;
    struct filter *g = filter_new_from(&fp, &e);
    ck_assert_ptr_nonnull(g);
    ck_assert_int_eq(e, FILTER_OK);
    for (unsigned l = 0; l < fp.layers; l++) {
        uint64_t size = fp.layer[l].blocks * FILTER_BLOCK_BYTES;
        unsigned char *img = malloc(size);
        /* In odd chunks, as a stream hands them over. */
        for (uint64_t at = 0; at < size;) {
            size_t n = (size_t)(at % 11) + 1;
            if (n > size - at)
                n = size - at;
            ck_assert(filter_bits_read(f, l, at, img + at, n));
            ck_assert(filter_bits_write(g, l, at, img + at, n));
            at += n;
        }
        ck_assert(!filter_bits_read(f, l, size, img, 1));
        ck_assert(!filter_bits_write(g, l, size - 3, img, 4));
        free(img);
    }
    unsigned char byte;
    ck_assert(!filter_bits_read(f, fp.layers, 0, &byte, 1));
    ck_assert(!filter_bits_write(g, fp.layers, 0, &byte, 1));
    assert_same_filter(f, g);
    /* Both go on the same way: same layers added at the same keys. */
    for (uint64_t i = 40000; i < 150000; i++) {
        size_t n = key_of(k, sizeof k, "in", i);
        filter_add(f, k, n);
        filter_add(g, k, n);
    }
    assert_same_filter(f, g);
    filter_free(g);

    /* Shares of 0 (a format that stored none) are given as filter_new gives them. */
    struct filter *one = filter_new(1000, 0.01, NULL);
    struct filter_params op;
    filter_export(one, &op);
    op.layer[0].share_fpp = 0;
    struct filter *back = filter_new_from(&op, &e);
    ck_assert_ptr_nonnull(back);
    assert_same_filter(one, back);
    filter_free(back);
    filter_free(one);

    /* Parameters this build would not have made are refused. */
    struct filter_params bad = fp;
    bad.layer[1].share_fpp = 0.02;                      /* above p */
    check_refused_params(&bad, FILTER_EGEOMETRY, "layer[1].share_fpp = 0.02");
    bad = fp;
    bad.layer[1].share_fpp = bad.layer[2].share_fpp = 0.006;   /* the compound above p */
    check_refused_params(&bad, FILTER_EGEOMETRY, "layer[1].share_fpp = bad.layer[2].share_fpp = 0.006");
    bad = fp;
    bad.layer[2].probes++;
    check_refused_params(&bad, FILTER_EGEOMETRY, "layer[2].probes++");
    bad = fp;
    bad.layer[0].target_fpp = 0.005;                    /* layer 0 is sized at p */
    check_refused_params(&bad, FILTER_EGEOMETRY, "layer[0].target_fpp = 0.005");
    bad = fp;
    bad.layers = 0;
    check_refused_params(&bad, FILTER_EGEOMETRY, "layers = 0");
    bad = fp;
    bad.layers = FILTER_MAX_LAYERS + 1;
    check_refused_params(&bad, FILTER_EGEOMETRY, "layers = FILTER_MAX_LAYERS + 1");
    bad = fp;
    bad.growth.max_layers = 0;
    check_refused_params(&bad, FILTER_EINVAL_GROWTH, "growth.max_layers = 0");
    bad = fp;
    bad.layer[3].target_fpp = 1e-13;                    /* below any layer's floor */
    check_refused_params(&bad, FILTER_EINVAL_FPP, "layer[3].target_fpp = 1e-13");
    bad = fp;
    bad.layer[3].items = FILTER_MAX_ITEMS + 1;
    check_refused_params(&bad, FILTER_ETOO_LARGE, "layer[3].items = FILTER_MAX_ITEMS + 1");
    filter_free(f);
}
END_TEST

/*
 * Inserts racing with growth.  Each writer publishes how many of its keys
 * have been added (a release store after filter_add returned); readers
 * check keys below that mark, which must be present however many layers
 * were added meanwhile, and look up absent keys besides.
 */
#define RACE_WRITERS 3
#define RACE_READERS 2
#define RACE_KEYS 60000u

struct race {
    struct filter *f;
    _Atomic uint64_t done[RACE_WRITERS];
    atomic_bool stop;
};

struct racer {
    struct race *r;
    unsigned id;
    uint64_t checked, bad;
};

static void *race_writer(void *arg)
{
    struct racer *w = arg;
    char k[64], prefix[8];
    snprintf(prefix, sizeof prefix, "w%u", w->id);
    for (uint64_t i = 0; i < RACE_KEYS; i++) {
        filter_add(w->r->f, k, key_of(k, sizeof k, prefix, i));
        atomic_store_explicit(&w->r->done[w->id], i + 1, memory_order_release);
    }
    return NULL;
}

static void *race_reader(void *arg)
{
    struct racer *w = arg;
    char k[64], prefix[8];
    uint64_t x = 88172645463325252ull + w->id;
    while (!atomic_load(&w->r->stop)) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        unsigned who = (unsigned)(x % RACE_WRITERS);
        uint64_t done = atomic_load_explicit(&w->r->done[who], memory_order_acquire);
        if (done == 0)
            continue;
        snprintf(prefix, sizeof prefix, "w%u", who);
        /* The newest key confirmed, and one at random below it. */
        w->bad += !filter_contains(w->r->f, k, key_of(k, sizeof k, prefix, done - 1));
        w->bad += !filter_contains(w->r->f, k, key_of(k, sizeof k, prefix, (x >> 20) % done));
        (void)filter_contains(w->r->f, k, key_of(k, sizeof k, "absent", x >> 24));
        w->checked += 2;
    }
    return NULL;
}

START_TEST(test_concurrent_growth)
{
    static struct race r;
    r.f = filter_new(1000, 0.01, NULL);
    ck_assert_ptr_nonnull(r.f);
    atomic_store(&r.stop, false);
    for (unsigned i = 0; i < RACE_WRITERS; i++)
        atomic_store(&r.done[i], 0);
    struct racer ws[RACE_WRITERS], rs[RACE_READERS];
    pthread_t tw[RACE_WRITERS], tr[RACE_READERS];
    for (unsigned i = 0; i < RACE_READERS; i++) {
        rs[i] = (struct racer){ .r = &r, .id = i };
        ck_assert_int_eq(pthread_create(&tr[i], NULL, race_reader, &rs[i]), 0);
    }
    for (unsigned i = 0; i < RACE_WRITERS; i++) {
        ws[i] = (struct racer){ .r = &r, .id = i };
        ck_assert_int_eq(pthread_create(&tw[i], NULL, race_writer, &ws[i]), 0);
    }
    for (unsigned i = 0; i < RACE_WRITERS; i++)
        pthread_join(tw[i], NULL);
    atomic_store(&r.stop, true);
    uint64_t checked = 0;
    for (unsigned i = 0; i < RACE_READERS; i++) {
        pthread_join(tr[i], NULL);
        ck_assert_uint_eq(rs[i].bad, 0);
        checked += rs[i].checked;
    }
    ck_assert_uint_gt(checked, 0);
    char k[64], prefix[8];
    uint64_t missing = 0;
    for (unsigned w = 0; w < RACE_WRITERS; w++) {
        snprintf(prefix, sizeof prefix, "w%u", w);
        for (uint64_t i = 0; i < RACE_KEYS; i++)
            missing += !filter_contains(r.f, k, key_of(k, sizeof k, prefix, i));
    }
    ck_assert_uint_eq(missing, 0);
    struct filter_info fi;
    filter_info(r.f, &fi);
    fprintf(stderr, "concurrent growth: %u layers, %llu lookups of confirmed keys\n", fi.layers,
            (unsigned long long)checked);
    /* 180,000 keys from 1,000: several growths, while the readers ran. */
    ck_assert_uint_ge(fi.layers, 5);
    ck_assert(!fi.saturated);
    ck_assert_uint_le(fi.items, RACE_WRITERS * RACE_KEYS);
    ck_assert_uint_ge(fi.items, RACE_WRITERS * RACE_KEYS * 99 / 100);
    ck_assert_double_le(fi.estimated_fpp, 0.01);
    filter_free(r.f);
}
END_TEST

/*
 * Bulk adds of hs[0, n) (filter_add_hashes_exclusive, its SIMD run or its
 * scalar one) make the very filter that filter_add_hash makes of them:
 * layers, bits, bits_set and items.
 */
static void check_bulk_same(enum filter_kind kind, double p, bool simd, const uint64_t *hs,
                            size_t n)
{
    enum filter_error e;
    const char *name = filter_kind_name(kind);
    struct filter *f = filter_new_with(kind, 20000, p, NULL, NULL, &e);
    struct filter *bulk = filter_new_with(kind, 20000, p, NULL, NULL, &e);
    ck_assert(f != NULL && bulk != NULL);
    for (size_t i = 0; i < n; i++)
        filter_add_hash(f, hs[i]);
    (void)filter_use_simd(bulk, simd);
    filter_add_hashes_exclusive(bulk, hs, 10000);
    filter_add_hashes_exclusive(bulk, hs + 10000, n - 10000);
    unsigned layers = filter_layers(f);
    ck_assert_uint_ge(layers, 2);
    ck_assert_msg(filter_layers(bulk) == layers, "%s p=%g simd=%d: %u layers, not %u", name, p,
                  simd, filter_layers(bulk), layers);
    for (unsigned l = 0; l < layers; l++) {
        struct filter_layer_info a, b;
        ck_assert(filter_layer_info(f, l, &a) && filter_layer_info(bulk, l, &b));
        ck_assert_msg(a.bits == b.bits && a.bits_set == b.bits_set && a.items == b.items,
                      "%s p=%g simd=%d: layer %u differs between filter_add and the bulk path "
                      "(bits_set %llu/%llu, items %llu/%llu)", name, p, simd, l,
                      (unsigned long long)a.bits_set, (unsigned long long)b.bits_set,
                      (unsigned long long)a.items, (unsigned long long)b.items);
        size_t size = (size_t)(a.bits / 8);
        unsigned char *x = malloc(size), *y = malloc(size);
        ck_assert(filter_bits_read(f, l, 0, x, size) && filter_bits_read(bulk, l, 0, y, size));
        ck_assert_msg(memcmp(x, y, size) == 0, "%s p=%g simd=%d: layer %u's bits differ", name,
                      p, simd, l);
        free(x);
        free(y);
    }
    filter_free(f);
    filter_free(bulk);
}

/*
 * Each kind (_i), through everything that takes a kind: made by its
 * constructor, it says its kind (filter_kind, filter_info, filter_export),
 * holds every key, keeps its rate, grows (the bulk path into the same
 * layers and bits as the atomic one), and comes back the same filter of
 * the same kind from its image, and a view over the image answers as it
 * does.  A new kind is tested here by being in enum filter_kind.
 */
START_TEST(test_each_kind)
{
    enum filter_kind kind = (enum filter_kind)_i;
    char k[64];
    const char *name = filter_kind_name(kind);
    ck_assert_ptr_nonnull(name);
    enum filter_error e = FILTER_ENOMEM;
    struct filter *f = filter_new_with(kind, 20000, 0.01, NULL, NULL, &e);
    ck_assert_msg(f != NULL, "%s: %s", name, filter_strerror(e));
    ck_assert_int_eq(filter_kind(f), kind);
    for (uint64_t i = 0; i < 20000; i++)
        filter_add(f, k, key_of(k, sizeof k, "in", i));
    uint64_t fp = 0, absent = 200000;
    for (uint64_t i = 0; i < absent; i++)
        fp += filter_contains(f, k, key_of(k, sizeof k, "out", i));
    double rate = (double)fp / (double)absent;
    ck_assert_msg(rate <= 0.01 && rate >= 0.0025, "%s: measured rate %g at capacity, target 0.01",
                  name, rate);
    /* Past its capacity it grows, in its own kind, and keeps every key. */
    for (uint64_t i = 20000; i < 100000; i++)
        filter_add(f, k, key_of(k, sizeof k, "in", i));
    for (uint64_t i = 0; i < 100000; i++)
        ck_assert_msg(filter_contains(f, k, key_of(k, sizeof k, "in", i)), "%s: lost key %llu",
                      name, (unsigned long long)i);
    struct filter_info info;
    filter_info(f, &info);
    ck_assert_int_eq(info.kind, kind);
    ck_assert_uint_ge(info.layers, 2);
    ck_assert_msg(info.estimated_fpp <= 0.01, "%s: estimated %g after growth", name,
                  info.estimated_fpp);
    /*
     * The bulk path, key for key as filter_add: the same layers, bit for
     * bit, by its SIMD run and its scalar one, at a rate of one bit a word
     * and at one (1e-4) that takes two in some words.
     */
    uint64_t *hs = malloc(100000 * sizeof *hs);
    for (uint64_t i = 0; i < 100000; i++)
        hs[i] = filter_hash(k, key_of(k, sizeof k, "in", i));
    for (unsigned c = 0; c < 4; c++)
        check_bulk_same(kind, c < 2 ? 0.01 : 0.0001, c % 2 == 1, hs, 100000);
    free(hs);

    /* Its image: back as the same kind, bit for bit; and a view over it. */
    struct filter_params p;
    filter_export(f, &p);
    ck_assert_int_eq(p.kind, kind);
    struct filter *g = filter_new_from(&p, &e);
    ck_assert_msg(g != NULL, "%s: %s", name, filter_strerror(e));
    ck_assert_int_eq(filter_kind(g), kind);
    void *img[FILTER_MAX_LAYERS];
    struct filter *v = NULL;
    for (unsigned l = 0; l < p.layers; l++) {
        size_t size = (size_t)(p.layer[l].blocks * FILTER_BLOCK_BYTES);
        img[l] = aligned_alloc(64, size);
        ck_assert(filter_bits_read(f, l, 0, img[l], size));
        ck_assert(filter_bits_write(g, l, 0, img[l], size));
        if (l == 0)
            v = filter_view_new(kind, p.target_fpp, p.layer[0].blocks, p.layer[0].probes, img[0]);
        else
            ck_assert(filter_view_add(v, p.layer[l].blocks, p.layer[l].probes, img[l]));
        ck_assert_ptr_nonnull(v);
    }
    ck_assert_int_eq(filter_kind(v), kind);
    for (uint64_t i = 0; i < 50000; i++) {
        size_t n = key_of(k, sizeof k, i % 2 ? "in" : "out", i);
        bool want = filter_contains(f, k, n);
        ck_assert_msg(filter_contains(g, k, n) == want && filter_contains(v, k, n) == want,
                      "%s: key %s answered differently read back", name, k);
    }
    filter_free(v);
    for (unsigned l = 0; l < p.layers; l++)
        free(img[l]);
    filter_free(g);
    filter_free(f);
}
END_TEST

/*
 * A kind this build does not know is refused everywhere one comes in:
 * never made, read back or viewed as another.  And [filter] kind accepts
 * exactly the kinds, by their names.
 */
/* AnonHugePages (bytes) of the mappings that overlap [p, p + len), from /proc/self/smaps. */
static size_t huge_bytes_in(const void *p, size_t len)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    size_t total = 0;
    bool in = false;
    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        size_t kb;
        /* A mapping's line starts with its range; its fields' lines with a capital. */
        if (!(line[0] >= 'A' && line[0] <= 'Z') && sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
            in = lo < (uintptr_t)p + len && (uintptr_t)p < hi;
            continue;
        }
        if (in && sscanf(line, "AnonHugePages: %zu kB", &kb) == 1)
            total += kb * 1024;
    }
    fclose(f);
    return total;
}

/*
 * Layers from 2 MiB up start on a 2 MiB boundary (bigmap_new, filter.c's
 * allocator), so that transparent huge pages can back every 2 MiB of them:
 * mmap's 4 KiB alignment left a layer's first and last stretches, and all
 * of a layer under 4 MiB, in 4 KiB pages.  Sizes of bench/filter_bench's
 * grown filter.  Where THP is on ("always" or "madvise"), the filled
 * layer's whole 2 MiB stretches are huge pages (most of them: the kernel may
 * lack a free 2 MiB for one).
 */
START_TEST(test_bigmap_huge_boundaries)
{
    static const size_t sizes[] = { 1075072, 2501952, 8640128, 29742912, (size_t)16 << 20 };
    char mode[128] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (f != NULL) {
        if (fgets(mode, sizeof mode, f) == NULL)
            mode[0] = 0;
        fclose(f);
    }
    bool thp = strstr(mode, "[always]") != NULL || strstr(mode, "[madvise]") != NULL;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t bytes = sizes[i], span = bigmap_span(bytes);
        unsigned char *mem = bigmap_new(bytes);
        ck_assert_ptr_nonnull(mem);
        ck_assert_uint_ge(span, bytes);
        ck_assert_uint_le(span - bytes, bytes < BIGMAP_HUGE ? 0 : bytes / 16);
        if (bytes == 29742912)
            ck_assert_uint_eq(span % BIGMAP_HUGE, 0);   /* its last stretch rounded up */
        if (bytes >= BIGMAP_HUGE)
            ck_assert_msg((uintptr_t)mem % BIGMAP_HUGE == 0, "%zu bytes at %p: not on a 2 MiB boundary",
                          bytes, (void *)mem);
        for (size_t at = 0; at < bytes; at += 4096)
            ck_assert_uint_eq(mem[at], 0);          /* zeroed, and every page touched */
        memset(mem, 0xa5, bytes);
        size_t whole = span / BIGMAP_HUGE * BIGMAP_HUGE, huge = huge_bytes_in(mem, span);
        if (thp && bytes >= BIGMAP_HUGE)
            ck_assert_msg(huge >= whole * 3 / 4, "%zu bytes: %zu in huge pages of %zu possible",
                          bytes, huge, whole);
        bigmap_free(mem, bytes);
    }
    bigmap_free(NULL, 1);
}
END_TEST

START_TEST(test_unknown_kind)
{
    enum filter_error e = FILTER_OK;
    enum filter_kind bad = FILTER_KINDS;
    ck_assert_ptr_null(filter_kind_name(bad));
    ck_assert(!filter_kind_known(FILTER_KINDS));
    ck_assert(!filter_kind_known(UINT32_MAX));
    ck_assert_ptr_null(filter_new_with(bad, 1000, 0.01, NULL, NULL, &e));
    ck_assert_int_eq(e, FILTER_EKIND);
    struct filter_plan plan;
    ck_assert_int_eq(filter_plan_kind(bad, 1000, 0.01, &plan), FILTER_EKIND);
    struct filter *f = filter_new(1000, 0.01, NULL);
    struct filter_params p;
    filter_export(f, &p);
    ck_assert_int_eq(p.kind, FILTER_KIND_BLOCKED);          /* filter_new's */
    p.kind = bad;
    e = FILTER_OK;
    ck_assert_ptr_null(filter_new_from(&p, &e));
    ck_assert_int_eq(e, FILTER_EKIND);
    ck_assert_str_eq(filter_strerror(e), "a filter kind this build does not know");
    void *words = aligned_alloc(64, FILTER_BLOCK_BYTES);
    ck_assert_ptr_null(filter_view_new(bad, 0.01, 1, 4, words));
    free(words);
    filter_free(f);

    char want[256] = "", got[256];
    for (unsigned k = 0; k < FILTER_KINDS; k++)
        snprintf(want + strlen(want), sizeof want - strlen(want), "%s%s", k ? " | " : "",
                 filter_kind_name((enum filter_kind)k));
    size_t i = 0;
    const char *section, *name;
    while (config_key_at(i, &section, &name, NULL, NULL)
           && !(strcmp(section, "filter") == 0 && strcmp(name, "kind") == 0))
        i++;
    ck_assert_msg(i < config_key_count(), "no key [filter] kind");
    config_key_values(i, got, sizeof got);
    ck_assert_str_eq(got, want);
}
END_TEST

CHECK_SUITE("filter",
    CHECK_CASE("core", .timeout = 120),
    CHECK_TEST(test_no_false_negatives),
    CHECK_TEST(test_fpp_1pct),
    CHECK_TEST(test_fpp_01pct),
    CHECK_TEST(test_fpp_1pct_portable),
    CHECK_TEST(test_simd_matches_scalar),
    CHECK_TEST(test_simd_matches_scalar_by_layers),
    CHECK_TEST(test_bits_per_key_bound),
    CHECK_TEST(test_bad_parameters),
    CHECK_TEST(test_tiny_filters),
    CHECK_TEST(test_index_math_64bit),
    CHECK_TEST(test_one_layer_unchanged),
    CHECK_TEST(test_growth_rate_1pct),
    CHECK_TEST(test_growth_rate_1pct_portable),
    CHECK_TEST(test_growth_rate_01pct),
    CHECK_TEST(test_saturation),
    CHECK_EACH(test_load_holds_its_capacity, load_rates),
    CHECK_TEST(test_bulk_grows_like_add),
    CHECK_TEST(test_layers_round_trip),
    CHECK_LOOP(test_each_kind, FILTER_KINDS),
    CHECK_TEST(test_unknown_kind),
    CHECK_TEST(test_bigmap_huge_boundaries),
    /* Alone, for a ThreadSanitizer build: CK_RUN_CASE=concurrency. */
    CHECK_CASE("concurrency", .timeout = 600),
    CHECK_TEST(test_concurrent),
    CHECK_TEST(test_concurrent_growth),
)
