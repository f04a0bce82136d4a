/*
 * Unit tests of the Bloom filter core: no false negatives, a measured
 * false-positive rate inside [p/2, p], concurrency, limits and 64-bit math.
 */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "filter.h"

#define MILLION 1000000u

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

static void check_rate(double p, bool simd)
{
    char k[64];
    struct filter *f = filter_new(MILLION, p, NULL);
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
    uint64_t differ = 0, fp_f = 0, fp_g = 0;
    for (uint64_t i = 0; i < 400000; i++) {
        size_t n = key_of(k, sizeof k, i % 2 ? "in" : "out", i / 2);
        bool fs, gs, fv, gv;
        filter_use_simd(f, false);
        filter_use_simd(g, false);
        fs = filter_contains(f, k, n);
        gs = filter_contains(g, k, n);
        filter_use_simd(f, true);
        filter_use_simd(g, true);
        fv = filter_contains(f, k, n);
        gv = filter_contains(g, k, n);
        differ += (fs != fv) + (gs != gv);
        fp_f += i % 2 == 0 && fs;
        fp_g += i % 2 == 0 && gs;
    }
    ck_assert_uint_eq(differ, 0);
    /* Both paths are exercised on keys that are absent and present. */
    ck_assert_uint_gt(fp_g, 0);
    ck_assert_uint_lt(fp_f, fp_g);
    filter_free(f);
    filter_free(g);
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

Suite *check_suite(void)
{
    Suite *s = suite_create("filter");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_no_false_negatives);
    tcase_add_test(tc, test_fpp_1pct);
    tcase_add_test(tc, test_fpp_01pct);
    tcase_add_test(tc, test_fpp_1pct_portable);
    tcase_add_test(tc, test_simd_matches_scalar);
    tcase_add_test(tc, test_bits_per_key_bound);
    tcase_add_test(tc, test_concurrent);
    tcase_add_test(tc, test_bad_parameters);
    tcase_add_test(tc, test_tiny_filters);
    tcase_add_test(tc, test_index_math_64bit);
    suite_add_tcase(s, tc);
    return s;
}
