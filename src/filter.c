/*
 * Cache-line-blocked Bloom filter.  Each key hashes once (XXH3) to one
 * 512-bit block and k bit positions inside it, so a lookup reads one cache
 * line and inserts are a handful of atomic ORs on that line.
 */
#include "filter.h"

#include <endian.h>
#include <math.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define XXH_INLINE_ALL
#include <xxhash.h>

#define WORDS_PER_BLOCK (FILTER_BLOCK_BITS / 64u)
#define MAX_PROBES (2u * WORDS_PER_BLOCK)
/*
 * Size for a model rate a little under the target: the measured rate then
 * stays under it with room for sampling noise, without oversizing.
 */
#define SIZING_MARGIN 0.9
/* Bits per key the sizing may choose between. */
#define MIN_BITS_PER_KEY 1.0
#define MAX_BITS_PER_KEY 128.0

struct filter {
    _Atomic uint64_t *words;      /* blocks * 8 words, 64-byte aligned (mmap) */
    uint64_t blocks;
    size_t map_bytes;
    unsigned probes;
    bool avx2;                         /* lookups may use contains_avx2 */
    uint64_t first[WORDS_PER_BLOCK];   /* all ones where word w takes >= 1 probe */
    uint64_t second[WORDS_PER_BLOCK];  /* all ones where word w takes 2 probes */
    uint64_t capacity;
    double target_fpp;
    _Atomic uint64_t items;
    _Atomic uint64_t bits_set;
};

const char *filter_strerror(enum filter_error e)
{
    switch (e) {
    case FILTER_OK: return "success";
    case FILTER_EINVAL_FPP:
        return "false-positive rate must be greater than 0.000001 and less than 0.5";
    case FILTER_ETOO_LARGE: return "filter size is out of range";
    case FILTER_ENOMEM: return "not enough memory for the filter";
    case FILTER_EGEOMETRY:
        return "filter geometry is not the one sized for its capacity and false-positive rate";
    }
    return "unknown filter error";
}

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
static inline void probe_mask(const struct filter *f, uint64_t h, uint64_t mask[WORDS_PER_BLOCK])
{
    uint64_t d1 = mix64(h);
#pragma GCC unroll 8
    for (unsigned w = 0; w < WORDS_PER_BLOCK; w++)
        mask[w] = (UINT64_C(1) << ((d1 >> (6 * w)) & 63)) & f->first[w];
    if (f->probes > WORDS_PER_BLOCK) {      /* p below ~0.1%: a second bit per word */
        uint64_t d2 = mix64(h ^ UINT64_C(0x9e3779b97f4a7c15));
#pragma GCC unroll 8
        for (unsigned w = 0; w < WORDS_PER_BLOCK; w++)
            mask[w] |= (UINT64_C(1) << ((d2 >> (6 * w)) & 63)) & f->second[w];
    }
}

/* Probes word w of a block receives when a key sets k bits. */
static inline unsigned probes_in_word(unsigned k, unsigned w)
{
    return k / WORDS_PER_BLOCK + (w < k % WORDS_PER_BLOCK);
}

double filter_model_fpp(double n, uint64_t nblocks, unsigned k)
{
    if (nblocks == 0 || k == 0)
        return 1.0;
    if (n <= 0)
        return 0.0;
    /*
     * Keys per block are Poisson(lambda).  In a block holding j keys, a word
     * that gets r probes per key has each bit set with probability
     * 1 - (1 - 1/64)^(jr), and a foreign key finds all its r bits there set
     * with that probability to the power r; the words are independent.
     */
    double lambda = n / (double)nblocks;
    double log_keep = log1p(-1.0 / 64.0);
    double jmax = lambda + 12.0 * sqrt(lambda) + 40.0;
    double logp = -lambda;                  /* log Poisson(0) */
    double sum = 0.0;
    for (double j = 0; j <= jmax; j++) {
        if (j > 0)
            logp += log(lambda) - log(j);
        double inblock = 1.0;
        for (unsigned w = 0; w < WORDS_PER_BLOCK; w++) {
            unsigned r = probes_in_word(k, w);
            if (r)
                inblock *= pow(-expm1(j * (double)r * log_keep), (double)r);
        }
        sum += exp(logp) * inblock;
    }
    return sum > 1.0 ? 1.0 : sum;
}

/* Model rate at a given number of bits per key (lambda = B / c). */
static double fpp_at(double bits_per_key, unsigned k)
{
    /* One block holding B/c keys on average; use n = B/c and one block. */
    return filter_model_fpp(FILTER_BLOCK_BITS / bits_per_key, 1, k);
}

enum filter_error filter_plan(uint64_t n, double p, struct filter_plan *out)
{
    if (!(p > FILTER_MIN_FPP && p < FILTER_MAX_FPP))     /* also rejects NaN */
        return FILTER_EINVAL_FPP;
    if (n > FILTER_MAX_ITEMS)
        return FILTER_ETOO_LARGE;

    double goal = p * SIZING_MARGIN;
    double best_c = 0;
    unsigned best_k = 0;
    for (unsigned k = 1; k <= MAX_PROBES; k++) {
        if (fpp_at(MAX_BITS_PER_KEY, k) > goal)
            continue;
        double lo = MIN_BITS_PER_KEY, hi = MAX_BITS_PER_KEY;
        for (int it = 0; it < 48; it++) {
            double mid = 0.5 * (lo + hi);
            if (fpp_at(mid, k) <= goal)
                hi = mid;
            else
                lo = mid;
        }
        if (best_k == 0 || hi < best_c) {
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

/*
 * An empty filter of a plan that filter_plan made: the one constructor
 * behind filter_new and filter_new_from.  NULL only on no memory.
 */
static struct filter *build(const struct filter_plan *plan)
{
    uint64_t n = plan->capacity;
    double p = plan->target_fpp;
    struct filter *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return NULL;
    f->blocks = plan->blocks;
    f->probes = plan->probes;
#if defined(__x86_64__)
    f->avx2 = __builtin_cpu_supports("avx2");
#endif
    for (unsigned w = 0; w < WORDS_PER_BLOCK; w++) {
        unsigned r = probes_in_word(plan->probes, w);
        f->first[w] = r >= 1 ? UINT64_MAX : 0;
        f->second[w] = r >= 2 ? UINT64_MAX : 0;
    }
    f->capacity = n;
    f->target_fpp = p;
    f->map_bytes = (size_t)(plan->blocks * 64u);
    /* mmap gives zeroed, page-aligned memory that is only touched on use. */
    void *mem = mmap(NULL, f->map_bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) {
        free(f);
        return NULL;
    }
#ifdef MADV_HUGEPAGE
    if (f->map_bytes >= (size_t)2 << 20)
        (void)madvise(mem, f->map_bytes, MADV_HUGEPAGE);   /* fewer TLB misses */
#endif
    f->words = mem;
    atomic_init(&f->items, 0);
    atomic_init(&f->bits_set, 0);
    return f;
}

struct filter *filter_new(uint64_t n, double p, enum filter_error *err)
{
    struct filter_plan plan;
    struct filter *f = NULL;
    enum filter_error e = filter_plan(n, p, &plan);
    if (e == FILTER_OK && (f = build(&plan)) == NULL)
        e = FILTER_ENOMEM;
    if (err)
        *err = e;
    return f;
}

void filter_export(const struct filter *f, struct filter_params *out)
{
    out->capacity = f->capacity;
    out->target_fpp = f->target_fpp;
    out->blocks = f->blocks;
    out->probes = f->probes;
    out->items = atomic_load_explicit(&((struct filter *)f)->items, memory_order_relaxed);
}

/*
 * Geometry is checked against filter_plan itself rather than against bounds
 * of its own: one rule in one place, and a filter read back behaves (rate,
 * growth, lookups) exactly like one this build sized.
 */
struct filter *filter_new_from(const struct filter_params *p, enum filter_error *err)
{
    struct filter_plan plan;
    struct filter *f = NULL;
    enum filter_error e = filter_plan(p->capacity, p->target_fpp, &plan);
    if (e == FILTER_OK && (plan.blocks != p->blocks || plan.probes != p->probes))
        e = FILTER_EGEOMETRY;
    /* The count goes on growing with every insert: it must start within bounds. */
    if (e == FILTER_OK && p->items > FILTER_MAX_ITEMS)
        e = FILTER_ETOO_LARGE;
    if (e == FILTER_OK && (f = build(&plan)) == NULL)
        e = FILTER_ENOMEM;
    if (f != NULL)
        atomic_store_explicit(&f->items, p->items, memory_order_relaxed);
    if (err)
        *err = e;
    return f;
}

/* Whether [offset, offset + len) lies inside the image; no overflow. */
static bool in_image(const struct filter *f, uint64_t offset, size_t len)
{
    uint64_t size = f->blocks * FILTER_BLOCK_BYTES;
    return offset <= size && (uint64_t)len <= size - offset;
}

bool filter_bits_read(const struct filter *f, uint64_t offset, void *buf, size_t len)
{
    if (!in_image(f, offset, len))
        return false;
    unsigned char *out = buf;
    while (len > 0) {
        /* One whole-word atomic load per word: never a torn word. */
        uint64_t w = atomic_load_explicit(&f->words[offset / 8], memory_order_acquire);
        uint64_t le = htole64(w);
        size_t at = (size_t)(offset % 8), n = 8 - at;
        if (n > len)
            n = len;
        memcpy(out, (const unsigned char *)&le + at, n);
        out += n;
        offset += n;
        len -= n;
    }
    return true;
}

bool filter_bits_write(struct filter *f, uint64_t offset, const void *buf, size_t len)
{
    if (!in_image(f, offset, len))
        return false;
    const unsigned char *in = buf;
    uint64_t added = 0;
    while (len > 0) {
        size_t at = (size_t)(offset % 8), n = 8 - at;
        if (n > len)
            n = len;
        uint64_t le = 0;
        memcpy((unsigned char *)&le + at, in, n);
        uint64_t w = le64toh(le);
        if (w != 0) {
            uint64_t old = atomic_fetch_or_explicit(&f->words[offset / 8], w,
                                                    memory_order_release);
            added += (uint64_t)__builtin_popcountll(w & ~old);
        }
        in += n;
        offset += n;
        len -= n;
    }
    atomic_fetch_add_explicit(&f->bits_set, added, memory_order_relaxed);
    return true;
}

void filter_free(struct filter *f)
{
    if (f == NULL)
        return;
    munmap((void *)f->words, f->map_bytes);
    free(f);
}

/* Bits set in x, for x with at most two (a word takes at most two probes). */
static inline uint64_t bits_in(uint64_t x)
{
    return (uint64_t)(x != 0) + (uint64_t)((x & (x - 1)) != 0);
}

static inline _Atomic uint64_t *block_of(const struct filter *f, uint64_t h)
{
    return f->words + filter_block_index(h, f->blocks) * WORDS_PER_BLOCK;
}

void filter_add_hash(struct filter *f, uint64_t h)
{
    uint64_t mask[WORDS_PER_BLOCK];
    probe_mask(f, h, mask);
    _Atomic uint64_t *b = f->words + filter_block_index(h, f->blocks) * WORDS_PER_BLOCK;
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
        atomic_fetch_add_explicit(&f->bits_set, added, memory_order_relaxed);
        atomic_fetch_add_explicit(&f->items, 1, memory_order_relaxed);
    }
}

/* How far ahead the bulk insert prefetches blocks. */
#define PREFETCH_AHEAD 8

void filter_add_hashes_exclusive(struct filter *f, const uint64_t *hs, size_t n)
{
    uint64_t added = 0, fresh = 0;
    for (size_t i = 0; i < n; i++) {
        if (i + PREFETCH_AHEAD < n)
            __builtin_prefetch((const void *)block_of(f, hs[i + PREFETCH_AHEAD]), 1, 3);
        uint64_t mask[WORDS_PER_BLOCK];
        probe_mask(f, hs[i], mask);
        _Atomic uint64_t *b = block_of(f, hs[i]);
        /*
         * Plain loads and stores (relaxed atomics compile to movs): no other
         * writer exists by contract, and readers see each word whole.
         */
        uint64_t key_added = 0;
        for (unsigned w = 0; w < WORDS_PER_BLOCK; w++) {
            uint64_t old = atomic_load_explicit(&b[w], memory_order_relaxed);
            key_added += bits_in(mask[w] & ~old);
            atomic_store_explicit(&b[w], old | mask[w], memory_order_relaxed);
        }
        added += key_added;
        fresh += key_added != 0;
    }
    atomic_fetch_add_explicit(&f->bits_set, added, memory_order_relaxed);
    atomic_fetch_add_explicit(&f->items, fresh, memory_order_relaxed);
}

static bool contains_scalar(const struct filter *f, uint64_t h)
{
    uint64_t mask[WORDS_PER_BLOCK];
    probe_mask(f, h, mask);
    _Atomic uint64_t *b = f->words + filter_block_index(h, f->blocks) * WORDS_PER_BLOCK;
    uint64_t miss = 0;
    /* Branch-free over the whole line: no mispredicted early exits. */
#pragma GCC unroll 8
    for (unsigned w = 0; w < WORDS_PER_BLOCK; w++)
        miss |= mask[w] & ~atomic_load_explicit(&b[w], memory_order_acquire);
    return miss == 0;
}

#if defined(__x86_64__)
/*
 * The same test in a dozen AVX2 instructions: the eight masks come from
 * per-lane variable shifts.  Fewer instructions per lookup let the CPU keep
 * more lookups' cache misses in flight at once.  The two 256-bit loads read
 * each 64-bit word whole (aligned), like the relaxed loads above; inserts
 * only ever set bits, so a lookup sees each word before or after an insert,
 * never torn.
 */
__attribute__((target("avx2")))
static bool contains_avx2(const struct filter *f, uint64_t h)
{
    const __m256i m63 = _mm256_set1_epi64x(63), one = _mm256_set1_epi64x(1);
    const __m256i sh_lo = _mm256_setr_epi64x(0, 6, 12, 18);
    const __m256i sh_hi = _mm256_setr_epi64x(24, 30, 36, 42);
    const __m256i *b = (const __m256i *)(const void *)
        (f->words + filter_block_index(h, f->blocks) * WORDS_PER_BLOCK);
    __m256i d1 = _mm256_set1_epi64x((long long)mix64(h));
    __m256i lo = _mm256_sllv_epi64(one, _mm256_and_si256(_mm256_srlv_epi64(d1, sh_lo), m63));
    __m256i hi = _mm256_sllv_epi64(one, _mm256_and_si256(_mm256_srlv_epi64(d1, sh_hi), m63));
    lo = _mm256_and_si256(lo, _mm256_loadu_si256((const __m256i *)(const void *)&f->first[0]));
    hi = _mm256_and_si256(hi, _mm256_loadu_si256((const __m256i *)(const void *)&f->first[4]));
    if (f->probes > WORDS_PER_BLOCK) {
        __m256i d2 = _mm256_set1_epi64x((long long)mix64(h ^ UINT64_C(0x9e3779b97f4a7c15)));
        __m256i lo2 = _mm256_sllv_epi64(one, _mm256_and_si256(_mm256_srlv_epi64(d2, sh_lo), m63));
        __m256i hi2 = _mm256_sllv_epi64(one, _mm256_and_si256(_mm256_srlv_epi64(d2, sh_hi), m63));
        lo = _mm256_or_si256(lo, _mm256_and_si256(lo2, _mm256_loadu_si256((const __m256i *)(const void *)&f->second[0])));
        hi = _mm256_or_si256(hi, _mm256_and_si256(hi2, _mm256_loadu_si256((const __m256i *)(const void *)&f->second[4])));
    }
    /* andnot(block, mask) = mask & ~block: the probed bits still clear. */
    __m256i miss = _mm256_or_si256(_mm256_andnot_si256(_mm256_load_si256(&b[0]), lo),
                                   _mm256_andnot_si256(_mm256_load_si256(&b[1]), hi));
    return _mm256_testz_si256(miss, miss);
}
#endif

bool filter_use_simd(struct filter *f, bool on)
{
#if defined(__x86_64__)
    f->avx2 = on && __builtin_cpu_supports("avx2");
    return f->avx2;
#else
    (void)f;
    (void)on;
    return false;
#endif
}

bool filter_contains_hash(const struct filter *f, uint64_t h)
{
#if defined(__x86_64__)
    if (f->avx2)
        return contains_avx2(f, h);
#endif
    return contains_scalar(f, h);
}

void filter_add(struct filter *f, const void *key, size_t len)
{
    filter_add_hash(f, filter_hash(key, len));
}

bool filter_contains(const struct filter *f, const void *key, size_t len)
{
    return filter_contains_hash(f, filter_hash(key, len));
}

void filter_info(const struct filter *f, struct filter_info *out)
{
    memset(out, 0, sizeof(*out));
    out->items = atomic_load_explicit(&((struct filter *)f)->items, memory_order_relaxed);
    out->bits_set = atomic_load_explicit(&((struct filter *)f)->bits_set, memory_order_relaxed);
    out->capacity = f->capacity;
    out->bits = f->blocks * FILTER_BLOCK_BITS;
    out->memory_bytes = (uint64_t)f->map_bytes + sizeof(*f);
    out->probes = f->probes;
    out->target_fpp = f->target_fpp;
    out->fill_ratio = (double)out->bits_set / (double)out->bits;
    /*
     * Invert the expected fill, averaged over the words of a block, to the
     * keys per block it implies (bisection: fill grows with lambda), then
     * ask the model for that many keys.
     */
    double lo = 0.0, hi = 64.0 * WORDS_PER_BLOCK * 4;
    for (int it = 0; it < 64; it++) {
        double mid = 0.5 * (lo + hi), fill = 0.0;
        for (unsigned w = 0; w < WORDS_PER_BLOCK; w++) {
            unsigned r = probes_in_word(f->probes, w);
            fill += -expm1(-mid * -expm1((double)r * log1p(-1.0 / 64.0)));
        }
        if (fill / WORDS_PER_BLOCK < out->fill_ratio)
            lo = mid;
        else
            hi = mid;
    }
    out->estimated_fpp = filter_model_fpp(lo * (double)f->blocks, f->blocks, f->probes);
}
