/*
 * Fuzz filter sizing (filter_plan, filter_new) with any n and p, as the
 * config and the table's row count may produce them, then the filter
 * itself: an error exactly when the header says, a plan whose model meets
 * the requested rate, a filter of that geometry, and no false negative at
 * any size, grown by layers or not.  Slow: each input runs the sizing search; fuzz/filter_keys
 * covers the key paths at speed.
 *
 * Input: byte 0 picks how n and p are read from bytes 1..16; the rest are
 * keys, each preceded by a length byte.
 */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "filter.h"
#include "fuzz.h"

/* Biggest bit array built here: the rest is checked on the plan alone. */
#define BUILD_MAX_BYTES (1u << 20)
#define MAX_KEYS 512

static uint64_t u64_at(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

FUZZ_TARGET(filter)
{
    if (size < 17)
        return 0;
    uint8_t mode = data[0];
    uint64_t n = u64_at(data + 1), praw = u64_at(data + 9);
    /* Mostly small n and rates inside (0, 0.5); sometimes any 64 bits. */
    if (!(mode & 1))
        n %= 200000;
    double p;
    if (mode & 2)
        memcpy(&p, &praw, sizeof p);
    else
        p = (double)(praw % 1000001) / 1000000.0 * 0.6;     /* 0 .. 0.6 */

    struct filter_plan plan;
    memset(&plan, 0xA5, sizeof plan);
    enum filter_error e = filter_plan(n, p, &plan);
    FUZZ_CHECK(filter_strerror(e) != NULL);
    bool rate_ok = p > FILTER_MIN_FPP && p < FILTER_MAX_FPP;   /* not NaN either */
    if (!rate_ok)
        FUZZ_CHECK(e == FILTER_EINVAL_FPP);
    else if (n > FILTER_MAX_ITEMS)
        FUZZ_CHECK(e == FILTER_ETOO_LARGE);
    else
        FUZZ_CHECK(e == FILTER_OK || e == FILTER_ETOO_LARGE);
    if (e != FILTER_OK) {
        enum filter_error e2 = FILTER_OK;
        FUZZ_CHECK(filter_new(n, p, &e2) == NULL && e2 == e);
        return 0;
    }
    FUZZ_CHECK(plan.capacity == n && plan.target_fpp == p);
    FUZZ_CHECK(plan.blocks >= 1 && plan.blocks <= FILTER_MAX_BYTES / 64);
    FUZZ_CHECK(plan.bits == plan.blocks * FILTER_BLOCK_BITS);
    FUZZ_CHECK(plan.probes >= 1 && plan.probes <= FILTER_BLOCK_BITS);
    /* Sized so that n keys give at most p. */
    FUZZ_CHECK(plan.model_fpp >= 0 && plan.model_fpp <= p);
    FUZZ_CHECK(plan.model_fpp == filter_model_fpp((double)n, plan.blocks, plan.probes));
    for (size_t i = 0; i + 8 <= size - 17 && i < 64; i += 8) {
        uint64_t h = u64_at(data + 17 + i);
        FUZZ_CHECK(filter_block_index(h, plan.blocks) < plan.blocks);
        FUZZ_CHECK(filter_block_index(h, UINT64_MAX) < UINT64_MAX);
    }
    if (plan.bits / 8 > BUILD_MAX_BYTES)
        return 0;

    enum filter_error fe = FILTER_ENOMEM;
    struct filter *f = filter_new(n, p, &fe);
    FUZZ_CHECK(f != NULL && fe == FILTER_OK);
    struct filter_info fi;
    filter_info(f, &fi);
    FUZZ_CHECK(fi.capacity == n && fi.bits == plan.bits && fi.probes == plan.probes);
    FUZZ_CHECK(fi.items == 0 && fi.bits_set == 0 && fi.target_fpp == p);

    const uint8_t *keys[MAX_KEYS];
    size_t lens[MAX_KEYS], nk = 0;
    uint64_t hs[MAX_KEYS];
    for (size_t pos = 17; pos < size && nk < MAX_KEYS; nk++) {
        size_t l = data[pos++] % 40;
        if (l > size - pos)
            l = size - pos;
        keys[nk] = data + pos;
        lens[nk] = l;
        hs[nk] = filter_hash(data + pos, l);
        pos += l;
        filter_add(f, keys[nk], lens[nk]);
        FUZZ_CHECK(filter_contains(f, keys[nk], lens[nk]));
    }
    for (int simd = 0; simd < 2; simd++) {
        filter_use_simd(f, simd);
        for (size_t i = 0; i < nk; i++)
            FUZZ_CHECK(filter_contains(f, keys[i], lens[i]) && filter_contains_hash(f, hs[i]));
    }
    filter_info(f, &fi);
    /* items counts keys that set a new bit: duplicates and false positives do not count. */
    FUZZ_CHECK(fi.items <= nk && (nk == 0 || fi.items >= 1) && fi.bits_set <= fi.bits);
    FUZZ_CHECK(fi.fill_ratio >= 0 && fi.fill_ratio <= 1);
    /* Grown or not, the whole is the sum of its layers, each keeping its bounds. */
    FUZZ_CHECK(fi.layers >= 1 && fi.layers <= FILTER_DEFAULT_MAX_LAYERS);
    uint64_t items = 0, set = 0, bits = 0;
    for (unsigned l = 0; l < fi.layers; l++) {
        struct filter_layer_info li;
        FUZZ_CHECK(filter_layer_info(f, l, &li));
        FUZZ_CHECK(li.bits_set <= li.bits && li.bits_set <= li.items * li.probes);
        FUZZ_CHECK(l == 0 ? li.target_fpp == p : li.target_fpp <= p);
        FUZZ_CHECK(li.share_fpp > 0 && li.share_fpp <= p);
        items += li.items;
        set += li.bits_set;
        bits += li.bits;
    }
    FUZZ_CHECK(items == fi.items && set == fi.bits_set && bits == fi.bits);
    FUZZ_CHECK(fi.bits_set <= (uint64_t)nk * 16);
    filter_free(f);
    return 0;
}
