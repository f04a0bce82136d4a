/*
 * Fuzz the filter's key paths, which see every ID a client or the table
 * sends: no false negative on any of them (filter_add, the exclusive bulk
 * load, SIMD and portable lookups), and the two ways of adding set the same
 * bits, in a load's filter (filter_loading) too.  fuzz/filter covers
 * sizing; building a filter takes a sizing search, so the filters here are
 * kept across inputs and renewed before they fill up.
 *
 * Input: byte 0 picks the filter size; then keys, each preceded by a
 * length byte.
 */
#include <stdbool.h>
#include <string.h>

#include "filter.h"
#include "fuzz.h"

#define MAX_KEYS 512

static const uint64_t sizes[] = { 0, 1000, 100000 };
#define NSIZES (sizeof sizes / sizeof sizes[0])
static struct filter *atomic_f[NSIZES], *bulk_f[NSIZES];

FUZZ_TARGET(filter_keys)
{
    if (size < 1)
        return 0;
    size_t s = data[0] % NSIZES;
    struct filter_info fi;
    if (atomic_f[s] != NULL) {
        filter_info(atomic_f[s], &fi);
        if (fi.items > 4 * fi.capacity + 1000) {
            filter_free(atomic_f[s]);
            filter_free(bulk_f[s]);
            atomic_f[s] = NULL;
        }
    }
    if (atomic_f[s] == NULL) {
        atomic_f[s] = filter_new(sizes[s], 0.01, NULL);
        bulk_f[s] = filter_new(sizes[s], 0.01, NULL);
        FUZZ_CHECK(atomic_f[s] != NULL && bulk_f[s] != NULL);
        /* The middle size as a load's filter: both paths obey its first layer's limit alike. */
        if (s == 1) {
            filter_loading(atomic_f[s]);
            filter_loading(bulk_f[s]);
        }
    }
    struct filter *f = atomic_f[s], *bulk = bulk_f[s];

    const uint8_t *keys[MAX_KEYS];
    size_t lens[MAX_KEYS], nk = 0;
    uint64_t hs[MAX_KEYS];
    for (size_t pos = 1; pos < size && nk < MAX_KEYS; nk++) {
        size_t l = data[pos++];
        if (l > size - pos)
            l = size - pos;
        keys[nk] = data + pos;
        lens[nk] = l;
        hs[nk] = filter_hash(data + pos, l);
        FUZZ_CHECK(hs[nk] == filter_hash(data + pos, l));
        pos += l;
        filter_add(f, keys[nk], lens[nk]);
        FUZZ_CHECK(filter_contains(f, keys[nk], lens[nk]));
    }
    filter_add_hashes_exclusive(bulk, hs, nk);
    for (int simd = 0; simd < 2; simd++) {
        filter_use_simd(f, simd);
        filter_use_simd(bulk, simd);
        for (size_t i = 0; i < nk; i++) {
            FUZZ_CHECK(filter_contains(f, keys[i], lens[i]));
            FUZZ_CHECK(filter_contains_hash(f, hs[i]));
            FUZZ_CHECK(filter_contains(bulk, keys[i], lens[i]));
        }
        /* Same bits, so the same answers for anything, present or not. */
        for (size_t i = 0; i + 8 <= size; i++) {
            uint64_t h;
            memcpy(&h, data + i, sizeof h);
            FUZZ_CHECK(filter_contains_hash(f, h) == filter_contains_hash(bulk, h));
        }
    }
    filter_info(f, &fi);
    struct filter_info bi;
    filter_info(bulk, &bi);
    FUZZ_CHECK(fi.items == bi.items && fi.bits_set == bi.bits_set && fi.bits_set <= fi.bits);
    return 0;
}
