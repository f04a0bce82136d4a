/*
 * The hot path of the filter: a key's hash, its block and its bits in each
 * layer, lookups (scalar or AVX2 over every layer) and inserts (atomic ORs
 * into the newest layer), and the figures read from the counters.  Each
 * key hashes once (XXH3) to one 512-bit block, so a lookup reads one cache
 * line per layer and an insert is a handful of atomic ORs on one.
 */
#include "filter_lookup.h"
#include "filter_int.h"

#include <stdatomic.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define XXH_INLINE_ALL
#include <xxhash.h>

/* Murmur3's finaliser: a bijection with full avalanche. */
static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    x *= UINT64_C(0xc4ceb9fe1a85ec53);
    x ^= x >> 33;
    return x;
}

uint64_t filter_block_index(uint64_t h, uint64_t nblocks)
{
    /* Lemire's multiply-shift: uniform over [0, nblocks) for any 64-bit nblocks. */
    return (uint64_t)(((unsigned __int128)h * nblocks) >> 64);
}

uint64_t filter_hash(const void *key, size_t len)
{
    return XXH3_64bits(key, len);
}

/*
 * Split-block layout: the 512-bit block is eight 64-bit words and a key's k
 * probes are dealt round-robin over the words (word w gets k/8 probes, one
 * more for w < k%8).  Each word's mask comes from fixed bit fields of two
 * remixed draws, so building it is straight-line code with no loops over
 * memory.  The block index uses the high bits of h; the draws are bijective
 * remixes, so the two are independent.
 */
static inline void probe_mask(const struct layer *l, uint64_t h, uint64_t mask[WORDS_PER_BLOCK])
{
    uint64_t d1 = mix64(h);
#pragma GCC unroll 8
    for (unsigned w = 0; w < WORDS_PER_BLOCK; w++)
        mask[w] = (UINT64_C(1) << ((d1 >> (6 * w)) & 63)) & l->first[w];
    if (__builtin_expect(l->probes > WORDS_PER_BLOCK, 0)) {   /* p below ~0.1%: a second bit per word */
        uint64_t d2 = mix64(h ^ UINT64_C(0x9e3779b97f4a7c15));
#pragma GCC unroll 8
        for (unsigned w = 0; w < WORDS_PER_BLOCK; w++)
            mask[w] |= (UINT64_C(1) << ((d2 >> (6 * w)) & 63)) & l->second[w];
    }
}

/* -------------------------------------------------- lookups and inserts -- */

/* Bits set in x, for x with at most two (a word takes at most two probes). */
static inline uint64_t bits_in(uint64_t x)
{
    return (uint64_t)(x != 0) + (uint64_t)((x & (x - 1)) != 0);
}

static inline _Atomic uint64_t *block_of(const struct layer *l, uint64_t h)
{
    return l->words + filter_block_index(h, l->blocks) * WORDS_PER_BLOCK;
}

static bool contains_scalar(const struct layer *l, uint64_t h)
{
    uint64_t mask[WORDS_PER_BLOCK];
    probe_mask(l, h, mask);
    _Atomic uint64_t *b = block_of(l, h);
    uint64_t miss = 0;
    /* Branch-free over the whole line: no mispredicted early exits. */
#pragma GCC unroll 8
    for (unsigned w = 0; w < WORDS_PER_BLOCK; w++)
        miss |= mask[w] & ~atomic_load_explicit(&b[w], memory_order_acquire);
    return miss == 0;
}

#if defined(__x86_64__)
/*
 * The same test in a dozen AVX2 instructions per layer: the eight masks come
 * from per-lane variable shifts, computed once for all layers.  Fewer
 * instructions per lookup let the CPU keep more lookups' cache misses in
 * flight at once, and for an absent key the layers' loads do not depend on
 * each other, so their misses overlap too.  The two 256-bit loads read each
 * 64-bit word whole (aligned), like the relaxed loads above; inserts only
 * ever set bits, so a lookup sees each word before or after an insert,
 * never torn.  Layers n-1 down to 0, each tested as soon as it is loaded:
 * a present key's search ends in its layer (the newest, the largest, holds
 * the most keys once it holds more than the older ones together).  An
 * absent key's tests are predicted to fail, so the next layer's loads
 * issue before this layer's test and the misses overlap anyway:
 * prefetching every layer's block first gained nothing, and testing every
 * layer without the early exit (tried 2026-11-29, bench/filter_bench)
 * left absent keys as they were and made present ones cost 1.9-4.4x one
 * layer instead of 1.3-1.5x.
 *
 * The masks of a second bit per word are drawn only when a layer takes
 * them (f->wide): drawn inside the loop, the compiler would hoist them out
 * of it and pay a second mix64 and its shifts on every lookup.
 */
__attribute__((target("avx2")))
static inline __m256i bit_masks(uint64_t d, __m256i shifts)
{
    const __m256i m63 = _mm256_set1_epi64x(63), one = _mm256_set1_epi64x(1);
    return _mm256_sllv_epi64(one, _mm256_and_si256(_mm256_srlv_epi64(_mm256_set1_epi64x((long long)d),
                                                                      shifts), m63));
}

/*
 * Layers n-1 down to 0 against the masks lo, hi (and lo2, hi2 where a
 * layer takes two bits in a word); masked: whether any layer has fewer
 * or more than 8 probes, so that its first[] and second[] matter (for 8,
 * first[] is all ones and second[] all zeros).  Inlined twice, so that the
 * usual filter (8 probes in every layer, p from 0.1% to 2%) runs a loop
 * without them.  n >= 1 (every filter has a layer): the loop tests its
 * end after a layer, not before, 13 to 14 instructions a layer in all.
 */
__attribute__((target("avx2,bmi2"), always_inline))
static inline bool layers_avx2(const struct filter *f, unsigned n, uint64_t h, __m256i lo1,
                               __m256i hi1, __m256i lo2, __m256i hi2, bool masked)
{
    const struct filter_slot *s = f->slot + n - 1;
    for (;; s--) {
        const __m256i *b = (const __m256i *)(const void *)(s->words + filter_block_index(h, s->blocks)
                                                                      * WORDS_PER_BLOCK);
        __m256i lo = lo1, hi = hi1;
        if (masked) {
            const struct layer *l = f->layer[s - f->slot];
            lo = _mm256_or_si256(_mm256_and_si256(lo, _mm256_loadu_si256((const __m256i *)(const void *)&l->first[0])),
                                 _mm256_and_si256(lo2, _mm256_loadu_si256((const __m256i *)(const void *)&l->second[0])));
            hi = _mm256_or_si256(_mm256_and_si256(hi, _mm256_loadu_si256((const __m256i *)(const void *)&l->first[4])),
                                 _mm256_and_si256(hi2, _mm256_loadu_si256((const __m256i *)(const void *)&l->second[4])));
        }
        /* andnot(block, mask) = mask & ~block: the probed bits still clear. */
        __m256i miss = _mm256_or_si256(_mm256_andnot_si256(_mm256_load_si256(&b[0]), lo),
                                       _mm256_andnot_si256(_mm256_load_si256(&b[1]), hi));
        if (_mm256_testz_si256(miss, miss))
            return true;
        if (s == f->slot)
            return false;
    }
}

/*
 * The usual filter's layers (8 probes each) when there are N of them, N a
 * constant: straight-line code, every block's address computed before any
 * test, newest first as in layers_avx2, without its loop.  Lookups back to
 * back (a batch of IDs, many clients) overlap each other's misses only as
 * far as the CPU's reorder window reaches, and an absent key's lookup holds
 * it until its last layer's line arrives: every instruction of a lookup is
 * room another lookup's misses cannot have.  Without the loop, and the
 * moves a 64-bit multiply into fixed registers needs (mulq; BMI2's mulx
 * takes any), an absent key's filter_contains in four layers is 119
 * instructions (callgrind), from 128; 114 with the test by inverted masks
 * below (one layer: 88); the memory's own floor
 * (bench/filter_bench's lookup_layers_floor_ns) is 88, the hash (a call
 * of filter_hash, as the daemon's lookups make it) counted in both.
 */
/*
 * filter_block_index by BMI2's mulx (the high half of h * nblocks), which
 * GCC does not choose by itself: mulq takes h in rax and writes rdx, a
 * move before each layer's multiply and one after.
 */
__attribute__((target("bmi2"), always_inline))
static inline uint64_t block_index_bmi2(uint64_t h, uint64_t nblocks)
{
    uint64_t hi, lo;
    __asm__("mulxq %2, %1, %0" : "=r"(hi), "=r"(lo) : "rm"(nblocks), "d"(h));
    (void)lo;
    return hi;
}

/*
 * nlo, nhi: the masks inverted, so a layer holds the key when (block | ~mask)
 * is all ones; each 32-byte load folds into its vpor: vpor, vpor, vpand,
 * vptest (CF), four vector instructions a layer where andnot took six.  An
 * absent key's vector ops wait for their lines, and at four layers they cap
 * how many lookups overlap (bench/filter_bench: the floor by 8-byte loads
 * costs 4 layers 1.5-1.9x one, by the filter's own loads and test 1.9-3.5x).
 */
__attribute__((target("avx2,bmi2"), always_inline))
static inline bool layers_avx2_n(const struct filter *f, unsigned N, uint64_t h, __m256i nlo,
                                 __m256i nhi)
{
    const __m256i ones = _mm256_set1_epi64x(-1);
    const __m256i *b[4];
#pragma GCC unroll 4
    for (unsigned i = 0; i < N; i++)
        b[i] = (const __m256i *)(const void *)(f->slot[i].words + block_index_bmi2(h, f->slot[i].blocks)
                                                                  * WORDS_PER_BLOCK);
#pragma GCC unroll 4
    for (unsigned i = N; i-- > 0;) {
        __m256i all = _mm256_and_si256(_mm256_or_si256(_mm256_load_si256(&b[i][0]), nlo),
                                       _mm256_or_si256(_mm256_load_si256(&b[i][1]), nhi));
        if (_mm256_testc_si256(all, ones))
            return true;
    }
    return false;
}

__attribute__((target("avx2,bmi2")))
static bool contains_avx2(const struct filter *f, unsigned n, uint64_t h)
{
    const __m256i sh_lo = _mm256_setr_epi64x(0, 6, 12, 18);
    const __m256i sh_hi = _mm256_setr_epi64x(24, 30, 36, 42);
    uint64_t d1 = mix64(h);
    __m256i lo1 = bit_masks(d1, sh_lo), hi1 = bit_masks(d1, sh_hi);
    __m256i lo2 = _mm256_setzero_si256(), hi2 = _mm256_setzero_si256();
    bool wide = atomic_load_explicit(&((struct filter *)f)->wide, memory_order_relaxed);
    bool narrow = atomic_load_explicit(&((struct filter *)f)->narrow, memory_order_relaxed);
    if (!wide && !narrow) {
        const __m256i ones = _mm256_set1_epi64x(-1);
        __m256i nlo = _mm256_xor_si256(lo1, ones), nhi = _mm256_xor_si256(hi1, ones);
        switch (n) {
        case 1:
            return layers_avx2_n(f, 1, h, nlo, nhi);
        case 2:
            return layers_avx2_n(f, 2, h, nlo, nhi);
        case 3:
            return layers_avx2_n(f, 3, h, nlo, nhi);
        case 4:
            return layers_avx2_n(f, 4, h, nlo, nhi);
        default:
            return layers_avx2(f, n, h, lo1, hi1, lo2, hi2, false);
        }
    }
    if (wide) {
        uint64_t d2 = mix64(h ^ UINT64_C(0x9e3779b97f4a7c15));
        lo2 = bit_masks(d2, sh_lo);
        hi2 = bit_masks(d2, sh_hi);
    }
    return layers_avx2(f, n, h, lo1, hi1, lo2, hi2, true);
}
#endif

/* The portable lookup of the first n layers, newest first. */
static bool contains_layers_scalar(const struct filter *f, unsigned n, uint64_t h)
{
    for (unsigned i = n; i-- > 0;)
        if (contains_scalar(f->layer[i], h))
            return true;
    return false;
}

/*
 * Whether any of the first n layers holds h, newest first.  The one branch
 * of a lookup on what the filter is: f->lookup, set once from its kind.
 * Each case a call of its own, so that the SIMD one is a bare tail call
 * (the scalar loop, inlined, made every lookup save six registers first).
 */
static inline bool contains_in(const struct filter *f, unsigned n, uint64_t h)
{
    switch ((enum filter_lookup)f->lookup) {
    case LOOKUP_BLOCKED_AVX2:
#if defined(__x86_64__)
        return contains_avx2(f, n, h);
#endif
    case LOOKUP_BLOCKED:
        break;
    }
    return contains_layers_scalar(f, n, h);
}

/*
 * The lookup a filter of f's kind takes (contains_in branches on it
 * once per call), decided when a filter is made (filter.c) or told to (filter_use_simd): SIMD where the
 * kind has it and the CPU does.
 */
void filter_lookup_choose(struct filter *f, bool simd)
{
    bool avx2 = false;
#if defined(__x86_64__)
    avx2 = simd && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi2")
           && __builtin_cpu_supports("popcnt");     /* add_run_avx2 counts bits by it */
#else
    (void)simd;
#endif
    f->lookup = LOOKUP_BLOCKED;
    switch (f->kind) {
    case FILTER_KIND_BLOCKED:
        f->lookup = avx2 ? LOOKUP_BLOCKED_AVX2 : LOOKUP_BLOCKED;
        break;
    case FILTER_KINDS:
        break;
    }
}

bool filter_use_simd(struct filter *f, bool on)
{
    filter_lookup_choose(f, on);
    return f->lookup == LOOKUP_BLOCKED_AVX2;
}

bool filter_contains_hash(const struct filter *f, uint64_t h)
{
    unsigned n = atomic_load_explicit(&((struct filter *)f)->nlayers, memory_order_acquire);
    return contains_in(f, n, h);
}

/* Whether block b has every bit of mask set. */
static inline bool block_holds(_Atomic uint64_t *b, const uint64_t mask[WORDS_PER_BLOCK])
{
    uint64_t lack = 0;
#pragma GCC unroll 8
    for (unsigned w = 0; w < WORDS_PER_BLOCK; w++)
        lack |= mask[w] & ~atomic_load_explicit(&b[w], memory_order_relaxed);
    return lack == 0;
}

void filter_add_hash(struct filter *f, uint64_t h)
{
    unsigned n = atomic_load_explicit(&f->nlayers, memory_order_acquire);
    /* In an older layer for good: adding it again would only fill the newest. */
    if (n > 1 && contains_in(f, n - 1, h))
        return;
    struct layer *l;
    uint64_t mask[WORDS_PER_BLOCK];
    _Atomic uint64_t *b;
    for (;;) {
        l = f->layer[n - 1];
        probe_mask(l, h, mask);
        b = block_of(l, h);
        if (n >= f->growth.max_layers
            || atomic_load_explicit(&l->bits_set, memory_order_relaxed)
               < atomic_load_explicit(&l->grow_at, memory_order_relaxed))
            break;
        /*
         * Full.  A key it holds already (or a false positive of it) sets no
         * bit, so it makes it grow no more than it fills it: a POST of an ID
         * the filter has, or a follower's echo of a row its load copied,
         * costs no layer.  Any other goes to the next layer, once added
         * (see filter_grow).
         */
        if (block_holds(b, mask))
            return;
        filter_grow(f, n);
        unsigned m = atomic_load_explicit(&f->nlayers, memory_order_acquire);
        if (m == n)
            break;                  /* no layer could be added: into this one */
        n = m;
    }
    uint64_t added = 0;
    for (unsigned w = 0; w < WORDS_PER_BLOCK; w++) {
        if (mask[w] == 0)
            continue;
        /* Skip the locked OR when the bits are already there (re-inserts). */
        uint64_t cur = atomic_load_explicit(&b[w], memory_order_relaxed);
        if ((cur & mask[w]) == mask[w])
            continue;
        uint64_t old = atomic_fetch_or_explicit(&b[w], mask[w], memory_order_release);
        added += bits_in(mask[w] & ~old);
    }
    /*
     * A key that set no new bit was already in (or a false positive of) the
     * filter: counting it again would let duplicates inflate the size of the
     * next filter, which is planned from items.
     */
    if (added) {
        atomic_fetch_add_explicit(&l->bits_set, added, memory_order_relaxed);
        atomic_fetch_add_explicit(&l->items, 1, memory_order_relaxed);
    }
}

/* How far ahead the bulk insert prefetches blocks. */
#define PREFETCH_AHEAD 8

/*
 * The run of hs[i, n) that layer l (the newest of nl) takes in a bulk
 * insert: returns where it stopped (n, or the first key that needs a new
 * bit of l once bits_set + *added reaches grow_at), its new bits added to
 * *added and its keys that set any to *fresh.  Plain loads and stores
 * (relaxed atomics compile to movs): no other writer exists by contract,
 * and readers see each word whole.
 */
static size_t add_run_scalar(struct filter *f, struct layer *l, unsigned nl, const uint64_t *hs,
                             size_t i, size_t n, uint64_t set, uint64_t grow_at, uint64_t *added,
                             uint64_t *fresh)
{
    /* Where filter_add_hash would find it full: the same layers, key for key. */
    for (; i < n; i++) {
        if (i + PREFETCH_AHEAD < n)
            __builtin_prefetch((const void *)block_of(l, hs[i + PREFETCH_AHEAD]), 1, 3);
        if (nl > 1 && contains_in(f, nl - 1, hs[i]))
            continue;
        uint64_t mask[WORDS_PER_BLOCK];
        probe_mask(l, hs[i], mask);
        _Atomic uint64_t *b = block_of(l, hs[i]);
        if (set + *added >= grow_at) {
            if (block_holds(b, mask))
                continue;       /* full, but held: no bit to set, no growth */
            break;              /* full: this key goes to the next layer */
        }
        uint64_t key_added = 0;
        for (unsigned w = 0; w < WORDS_PER_BLOCK; w++) {
            uint64_t old = atomic_load_explicit(&b[w], memory_order_relaxed);
            key_added += bits_in(mask[w] & ~old);
            atomic_store_explicit(&b[w], old | mask[w], memory_order_relaxed);
        }
        *added += key_added;
        *fresh += key_added != 0;
    }
    return i;
}

#if defined(__x86_64__)
/*
 * add_run_scalar in AVX2 (issue 39: the scalar run was a third of a
 * load's instructions, 248 a key, its eight words one by one): the masks
 * by per-lane shifts as the lookup draws them (probe_mask's bits, word for
 * word), the block read and written as two aligned 256-bit halves (each
 * 64-bit word whole, as the lookups read them), and the new bits counted
 * from lane compares: a word takes at most two, so bits_in's two tests
 * per word are two compares per half, counted by their movemasks.
 */
__attribute__((target("avx2,bmi2,popcnt")))
static size_t add_run_avx2(struct filter *f, struct layer *l, unsigned nl, const uint64_t *hs,
                           size_t i, size_t n, uint64_t set, uint64_t grow_at, uint64_t *added,
                           uint64_t *fresh)
{
    const __m256i sh_lo = _mm256_setr_epi64x(0, 6, 12, 18);
    const __m256i sh_hi = _mm256_setr_epi64x(24, 30, 36, 42);
    const __m256i zero = _mm256_setzero_si256(), one = _mm256_set1_epi64x(1);
    const __m256i first_lo = _mm256_loadu_si256((const __m256i *)(const void *)&l->first[0]);
    const __m256i first_hi = _mm256_loadu_si256((const __m256i *)(const void *)&l->first[4]);
    const __m256i second_lo = _mm256_loadu_si256((const __m256i *)(const void *)&l->second[0]);
    const __m256i second_hi = _mm256_loadu_si256((const __m256i *)(const void *)&l->second[4]);
    bool wide = l->probes > WORDS_PER_BLOCK;
    uint64_t add = *added, keys = *fresh;
    for (; i < n; i++) {
        uint64_t h = hs[i];
        if (i + PREFETCH_AHEAD < n)
            __builtin_prefetch((const void *)(l->words + block_index_bmi2(hs[i + PREFETCH_AHEAD], l->blocks)
                                              * WORDS_PER_BLOCK), 1, 3);
        if (nl > 1 && contains_in(f, nl - 1, h))
            continue;
        uint64_t d1 = mix64(h);
        __m256i lo = _mm256_and_si256(bit_masks(d1, sh_lo), first_lo);
        __m256i hi = _mm256_and_si256(bit_masks(d1, sh_hi), first_hi);
        if (__builtin_expect(wide, 0)) {    /* p below ~0.1%: a second bit per word */
            uint64_t d2 = mix64(h ^ UINT64_C(0x9e3779b97f4a7c15));
            lo = _mm256_or_si256(lo, _mm256_and_si256(bit_masks(d2, sh_lo), second_lo));
            hi = _mm256_or_si256(hi, _mm256_and_si256(bit_masks(d2, sh_hi), second_hi));
        }
        __m256i *b = (__m256i *)(void *)(l->words + block_index_bmi2(h, l->blocks) * WORDS_PER_BLOCK);
        __m256i old_lo = _mm256_load_si256(&b[0]), old_hi = _mm256_load_si256(&b[1]);
        /* andnot(block, mask) = mask & ~block: the bits this key sets. */
        __m256i new_lo = _mm256_andnot_si256(old_lo, lo), new_hi = _mm256_andnot_si256(old_hi, hi);
        if (set + add >= grow_at) {
            if (_mm256_testz_si256(_mm256_or_si256(new_lo, new_hi), _mm256_or_si256(new_lo, new_hi)))
                continue;       /* full, but held: no bit to set, no growth */
            break;              /* full: this key goes to the next layer */
        }
        _mm256_store_si256(&b[0], _mm256_or_si256(old_lo, lo));
        _mm256_store_si256(&b[1], _mm256_or_si256(old_hi, hi));
        /* Lanes with no new bit, and lanes with at most one (x & (x - 1) == 0). */
        unsigned none = (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpeq_epi64(new_lo, zero)))
                        | (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpeq_epi64(new_hi, zero))) << 4;
        unsigned single = (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpeq_epi64(
                              _mm256_and_si256(new_lo, _mm256_sub_epi64(new_lo, one)), zero)))
                          | (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpeq_epi64(
                              _mm256_and_si256(new_hi, _mm256_sub_epi64(new_hi, one)), zero))) << 4;
        uint64_t key_added = (uint64_t)(16 - __builtin_popcount(none) - __builtin_popcount(single));
        add += key_added;
        keys += none != 0xff;
    }
    *added = add;
    *fresh = keys;
    return i;
}
#endif

void filter_add_hashes_exclusive(struct filter *f, const uint64_t *hs, size_t n)
{
    size_t i = 0;
    /* One pass per layer: the first key that needs a new bit of a full layer ends it. */
    while (i < n) {
        unsigned nl = atomic_load_explicit(&f->nlayers, memory_order_acquire);
        struct layer *l = f->layer[nl - 1];
        uint64_t set = atomic_load_explicit(&l->bits_set, memory_order_relaxed);
        uint64_t grow_at = nl < f->growth.max_layers
                           ? atomic_load_explicit(&l->grow_at, memory_order_relaxed) : UINT64_MAX;
        uint64_t added = 0, fresh = 0;
#if defined(__x86_64__)
        if (f->lookup == LOOKUP_BLOCKED_AVX2)
            i = add_run_avx2(f, l, nl, hs, i, n, set, grow_at, &added, &fresh);
        else
#endif
            i = add_run_scalar(f, l, nl, hs, i, n, set, grow_at, &added, &fresh);
        atomic_fetch_add_explicit(&l->bits_set, added, memory_order_relaxed);
        atomic_fetch_add_explicit(&l->items, fresh, memory_order_relaxed);
        /*
         * Key i found the layer full: filter_grow adds the next one, or on
         * failure moves grow_at past bits_set, so that the next pass takes
         * at least one key.
         */
        if (i < n)
            filter_grow(f, nl);
    }
}

void filter_prefetch_hash(const struct filter *f, uint64_t h)
{
    unsigned nl = atomic_load_explicit(&((struct filter *)f)->nlayers, memory_order_acquire);
    for (unsigned l = 0; l < nl; l++)
        __builtin_prefetch((const void *)block_of(f->layer[l], h));
}

/* Key i's blocks prefetched while key i - LOOKAHEAD (4-32 tried: 8) is tested. */
#define LOOKAHEAD 8
size_t filter_contains_hashes(const struct filter *f, const uint64_t *hs, size_t n, bool *out)
{
    size_t maybe = 0;
    for (size_t i = 0; i < n + LOOKAHEAD; i++) {
        if (i < n)
            filter_prefetch_hash(f, hs[i]);
        if (i >= LOOKAHEAD)
            maybe += out[i - LOOKAHEAD] = filter_contains_hash(f, hs[i - LOOKAHEAD]);
    }
    return maybe;
}

/* ------------------------------------------------------------- figures -- */

static void layer_figures(const struct layer *l, struct filter_layer_info *out)
{
    memset(out, 0, sizeof(*out));
    out->items = atomic_load_explicit(&((struct layer *)l)->items, memory_order_relaxed);
    out->bits_set = atomic_load_explicit(&((struct layer *)l)->bits_set, memory_order_relaxed);
    out->capacity = l->capacity;
    out->bits = l->blocks * FILTER_BLOCK_BITS;
    out->probes = l->probes;
    out->target_fpp = l->target_fpp;
    out->share_fpp = l->share_fpp;
    out->fill_ratio = (double)out->bits_set / (double)out->bits;
    out->estimated_fpp = filter_layer_rate(l, out->bits_set);
}

bool filter_layer_info(const struct filter *f, unsigned i, struct filter_layer_info *out)
{
    if (i >= atomic_load_explicit(&((struct filter *)f)->nlayers, memory_order_acquire))
        return false;
    layer_figures(f->layer[i], out);
    return true;
}

bool filter_saturated(const struct filter *f)
{
    unsigned n = atomic_load_explicit(&((struct filter *)f)->nlayers, memory_order_acquire);
    const struct layer *top = f->layer[n - 1];
    return atomic_load_explicit(&((struct layer *)top)->bits_set, memory_order_relaxed) >= top->full_bits
           && (n >= f->growth.max_layers || atomic_load(&((struct filter *)f)->blocked));
}

void filter_info(const struct filter *f, struct filter_info *out)
{
    unsigned n = atomic_load_explicit(&((struct filter *)f)->nlayers, memory_order_acquire);
    double keep = 1.0;
    struct filter_layer_info li = { 0 };
    memset(out, 0, sizeof(*out));
    out->memory_bytes = sizeof(*f);
    out->kind = f->kind;
    for (unsigned i = 0; i < n; i++) {
        layer_figures(f->layer[i], &li);
        out->items += li.items;
        out->capacity += li.capacity;
        out->bits += li.bits;
        out->bits_set += li.bits_set;
        out->memory_bytes += (uint64_t)f->layer[i]->map_bytes + sizeof(struct layer);
        keep *= 1.0 - li.estimated_fpp;
    }
    const struct layer *top = f->layer[n - 1];
    out->layers = n;
    out->probes = top->probes;
    out->target_fpp = f->target_fpp;
    out->fill_ratio = (double)out->bits_set / (double)out->bits;
    out->bits_per_key = out->items ? (double)out->bits / (double)out->items : 0.0;
    out->estimated_fpp = n == 1 ? li.estimated_fpp : 1.0 - keep;
    out->saturated = li.bits_set >= top->full_bits
                     && (n >= f->growth.max_layers || atomic_load(&((struct filter *)f)->blocked));
}
