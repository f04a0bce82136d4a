/*
 * The verified-absent set (vset.h): fixed slots in one block, a seqlock
 * per slot for readers that hold no lock, a compare-and-swap for the kills
 * any thread makes.  The block is the same bytes in the daemon and in a
 * reader that maps it, so everything here is offsets, never pointers.
 */
#include "vset.h"

#include <string.h>

#define STATE_BITS 3u
#define STATE_MASK UINT64_C(7)
#define VERSION_MASK UINT64_C(0x1fffffff)

struct vset {
    struct vset_header h;
};

static inline enum vset_state state_of(uint64_t m)
{
    return (enum vset_state)(m & STATE_MASK);
}

static inline uint64_t version_of(uint64_t m)
{
    return (m >> STATE_BITS) & VERSION_MASK;
}

static inline uint64_t make_meta(enum vset_state st, uint64_t version, uint32_t tag)
{
    return (uint64_t)st | (version & VERSION_MASK) << STATE_BITS | (uint64_t)tag << 32;
}

static inline uint32_t tag_of(uint64_t h)
{
    return (uint32_t)(h >> 32);
}

/* The meta words follow the header; the key slots follow them (64-byte aligned: nslots >= 16). */
static inline _Atomic uint64_t *meta_at(const struct vset *s, uint64_t i)
{
    return (_Atomic uint64_t *)((char *)s + sizeof(struct vset_header)) + i;
}

static inline _Atomic uint64_t *slot_at(const struct vset *s, uint64_t i)
{
    return (_Atomic uint64_t *)((char *)s + sizeof(struct vset_header) + s->h.nslots * 8
                                + i * VSET_SLOT_BYTES);
}

static uint64_t nslots_for(uint32_t max_entries)
{
    /* Room to spare, so that two-choice buckets rarely both fill before max_entries does. */
    uint64_t want = (uint64_t)max_entries + max_entries / 4 + 1, n = 2 * VSET_BUCKET;
    while (n < want)
        n <<= 1;
    return n;
}

size_t vset_bytes(uint32_t max_entries)
{
    if (max_entries < VSET_MIN_ENTRIES || max_entries > VSET_MAX_ENTRIES)
        return 0;
    return sizeof(struct vset_header) + (size_t)nslots_for(max_entries) * (8 + VSET_SLOT_BYTES);
}

struct vset *vset_make(void *mem, size_t bytes, uint32_t max_entries)
{
    size_t need = vset_bytes(max_entries);
    if (need == 0 || bytes < need || ((uintptr_t)mem & 63) != 0)
        return NULL;
    memset(mem, 0, need);
    struct vset *s = mem;
    memcpy(s->h.magic, VSET_MAGIC, 8);
    s->h.slot_bytes = VSET_SLOT_BYTES;
    s->h.key_max = VSET_KEY_MAX;
    s->h.nslots = nslots_for(max_entries);
    s->h.max_entries = max_entries;
    atomic_init(&s->h.live, 0);
    atomic_init(&s->h.hand, 0);
    return s;
}

const struct vset *vset_view(const void *mem, size_t bytes)
{
    const struct vset *s = mem;
    if (mem == NULL || ((uintptr_t)mem & 63) != 0 || bytes < sizeof(struct vset_header)
        || memcmp(s->h.magic, VSET_MAGIC, 8) != 0 || s->h.slot_bytes != VSET_SLOT_BYTES
        || s->h.key_max != VSET_KEY_MAX)
        return NULL;
    uint64_t n = s->h.nslots;
    if (n < 2 * VSET_BUCKET || (n & (n - 1)) != 0 || n > (UINT64_C(1) << 40)
        || (bytes - sizeof(struct vset_header)) / (8 + VSET_SLOT_BYTES) < n)
        return NULL;
    return s;
}

void vset_buckets(uint64_t h, uint64_t nbuckets, uint64_t *b1, uint64_t *b2)
{
    /* murmur3's fmix64: a second choice apart from the first and from the tag. */
    uint64_t x = h;
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    x *= UINT64_C(0xc4ceb9fe1a85ec53);
    x ^= x >> 33;
    *b1 = h & (nbuckets - 1);
    *b2 = x & (nbuckets - 1);
    if (*b2 == *b1)
        *b2 = (*b1 + 1) & (nbuckets - 1);
}

/* Word k (0-based) of key, zero-padded past len: the form a slot stores. */
static inline uint64_t key_word(const unsigned char *key, size_t len, size_t k)
{
    uint64_t w = 0;
    size_t off = 8 * k, n = len - off < 8 ? len - off : 8;
    memcpy(&w, key + off, n);
    return w;
}

/* Whether slot i holds key, read word by word (relaxed: the caller's seqlock decides). */
static bool slot_equals(const struct vset *s, uint64_t i, const void *key, size_t len)
{
    _Atomic uint64_t *w = slot_at(s, i);
    if (atomic_load_explicit(&w[0], memory_order_relaxed) != len)
        return false;
    for (size_t k = 0; 8 * k < len; k++)
        if (atomic_load_explicit(&w[1 + k], memory_order_relaxed) != key_word(key, len, k))
            return false;
    return true;
}

/* Whether slot i holds key h as a reader sees it: the seqlock of vset.h's layout note. */
static bool holds(const struct vset *s, uint64_t i, uint64_t want, uint64_t mask, const void *key,
                  size_t len)
{
    _Atomic uint64_t *mp = meta_at(s, i);
    uint64_t m = atomic_load_explicit(mp, memory_order_acquire);
    if (((m ^ want) & mask) != 0)
        return false;
    bool eq = slot_equals(s, i, key, len);
    /* The seqlock's second read: a key rewritten meanwhile shows in meta. */
    atomic_thread_fence(memory_order_acquire);
    return eq && atomic_load_explicit(mp, memory_order_relaxed) == m;
}

/*
 * vset_has past its first test, out of line: an empty set (the usual one,
 * asked on every "maybe") then answers without this one's frame (23
 * instructions a call with it, bench/lookup_ir).  A slot may hold h's key
 * when its meta word is ACTIVE with h's tag, (m ^ want) & mask == 0: a
 * bucket's eight meta words (one cache line) are scanned first, unrolled
 * and without a branch each, and only a bucket with such a slot is read
 * as the seqlock reads it (holds), from its first read on: a slot that
 * became one after the scan is missed, as a reader may miss an entry
 * entered while it reads.  A miss in a set of 1,000 entries cost some 220
 * instructions with a branch per slot (callgrind).
 */
__attribute__((noinline)) static bool has(const struct vset *s, uint64_t h, const void *key, size_t len)
{
    const uint64_t want = (uint64_t)tag_of(h) << 32 | VSET_ACTIVE;
    const uint64_t mask = UINT64_C(0xffffffff00000000) | STATE_MASK;
    uint64_t b[2];
    vset_buckets(h, s->h.nslots / VSET_BUCKET, &b[0], &b[1]);
    for (int j = 0; j < 2; j++) {
        _Atomic uint64_t *mp = meta_at(s, b[j] * VSET_BUCKET);
        bool any = false;
#pragma GCC unroll 8
        for (unsigned k = 0; k < VSET_BUCKET; k++)
            any |= ((atomic_load_explicit(&mp[k], memory_order_relaxed) ^ want) & mask) == 0;
        if (!any)
            continue;
        for (uint64_t i = b[j] * VSET_BUCKET; i < (b[j] + 1) * VSET_BUCKET; i++)
            if (holds(s, i, want, mask, key, len))
                return true;
    }
    return false;
}

bool vset_has(const struct vset *s, uint64_t h, const void *key, size_t len)
{
    if (len > VSET_KEY_MAX || atomic_load_explicit(&((struct vset *)s)->h.live,
                                                   memory_order_relaxed) == 0)
        return false;
    return has(s, h, key, len);
}

uint64_t vset_count(const struct vset *s)
{
    return atomic_load(&((struct vset *)s)->h.live);
}

uint32_t vset_max_entries(const struct vset *s)
{
    return s->h.max_entries;
}

/* Kill slot i if it is PENDING or ACTIVE and passes match(m); true if this call killed it. */
static bool kill_slot(struct vset *s, uint64_t i, uint32_t tag, bool any_tag, bool *was_active)
{
    _Atomic uint64_t *mp = meta_at(s, i);
    uint64_t m = atomic_load(mp);
    for (;;) {
        enum vset_state st = state_of(m);
        if ((st != VSET_PENDING && st != VSET_ACTIVE) || (!any_tag && (uint32_t)(m >> 32) != tag))
            return false;
        if (atomic_compare_exchange_weak(mp, &m, make_meta(VSET_DEAD, version_of(m), tag_of(m)))) {
            atomic_fetch_sub(&s->h.live, 1);
            *was_active = st == VSET_ACTIVE;
            return true;
        }
    }
}

unsigned vset_kill(struct vset *s, uint64_t h)
{
    uint64_t b[2];
    unsigned active = 0;
    vset_buckets(h, s->h.nslots / VSET_BUCKET, &b[0], &b[1]);
    for (int j = 0; j < 2; j++)
        for (uint64_t i = b[j] * VSET_BUCKET; i < (b[j] + 1) * VSET_BUCKET; i++) {
            bool was = false;
            if (kill_slot(s, i, tag_of(h), false, &was))
                active += was;
        }
    return active;
}

/* The writer makes room: one entry killed from the clock hand on.  False: none to kill. */
static bool evict_one(struct vset *s)
{
    uint64_t n = s->h.nslots, hand = atomic_load_explicit(&s->h.hand, memory_order_relaxed);
    for (uint64_t k = 0; k < n; k++) {
        uint64_t i = (hand + k) & (n - 1);
        bool was = false;
        if (kill_slot(s, i, 0, true, &was)) {
            atomic_store_explicit(&s->h.hand, (i + 1) & (n - 1), memory_order_relaxed);
            return true;
        }
    }
    return false;
}

bool vset_stage(struct vset *s, uint64_t h, const void *key, size_t len, struct vset_ref *ref,
                unsigned *evicted)
{
    if (len > VSET_KEY_MAX)
        return false;
    uint64_t b[2];
    vset_buckets(h, s->h.nslots / VSET_BUCKET, &b[0], &b[1]);
    unsigned used[2] = { 0, 0 };
    for (int j = 0; j < 2; j++)
        for (uint64_t i = b[j] * VSET_BUCKET; i < (b[j] + 1) * VSET_BUCKET; i++) {
            uint64_t m = atomic_load(meta_at(s, i));
            enum vset_state st = state_of(m);
            if (st != VSET_PENDING && st != VSET_ACTIVE)
                continue;
            used[j]++;
            /* Only this writer writes keys: no seqlock needed to read its own. */
            if ((uint32_t)(m >> 32) == tag_of(h) && slot_equals(s, i, key, len))
                return false;
        }
    while (atomic_load(&s->h.live) >= s->h.max_entries && evict_one(s))
        (*evicted)++;
    /* The emptier bucket, its first free slot; both full: the first's slot chosen by the hash. */
    int j = used[1] < used[0];
    uint64_t pick = UINT64_MAX;
    for (int t = 0; t < 2 && pick == UINT64_MAX; t++, j ^= 1)
        for (uint64_t i = b[j] * VSET_BUCKET; i < (b[j] + 1) * VSET_BUCKET; i++) {
            enum vset_state st = state_of(atomic_load(meta_at(s, i)));
            if (st == VSET_FREE || st == VSET_DEAD) {
                pick = i;
                break;
            }
        }
    if (pick == UINT64_MAX) {
        bool was = false;
        pick = b[0] * VSET_BUCKET + ((h >> 8) & (VSET_BUCKET - 1));
        if (kill_slot(s, pick, 0, true, &was))
            (*evicted)++;
    }
    _Atomic uint64_t *mp = meta_at(s, pick), *w = slot_at(s, pick);
    uint64_t version = version_of(atomic_load(mp)) + 1;
    /* The seqlock's write: WRITING, a release fence, the words, then the new meta. */
    atomic_store_explicit(mp, make_meta(VSET_WRITING, version, 0), memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&w[0], len, memory_order_relaxed);
    for (size_t k = 0; k < (VSET_SLOT_BYTES - 8) / 8; k++)
        atomic_store_explicit(&w[1 + k], 8 * k < len ? key_word(key, len, k) : 0,
                              memory_order_relaxed);
    atomic_fetch_add(&s->h.live, 1);
    ref->slot = pick;
    ref->meta = make_meta(VSET_PENDING, version, tag_of(h));
    atomic_store(mp, ref->meta);        /* seq_cst: table_adapt.c's proof needs it */
    return true;
}

bool vset_activate(struct vset *s, const struct vset_ref *ref)
{
    uint64_t m = ref->meta;
    return atomic_compare_exchange_strong(meta_at(s, ref->slot), &m,
                                          make_meta(VSET_ACTIVE, version_of(m), (uint32_t)(m >> 32)));
}

void vset_unstage(struct vset *s, const struct vset_ref *ref)
{
    _Atomic uint64_t *mp = meta_at(s, ref->slot);
    uint64_t m = atomic_load(mp);
    /* Only while it is still this staging's entry (same version). */
    if (version_of(m) == version_of(ref->meta)) {
        bool was = false;
        kill_slot(s, ref->slot, 0, true, &was);
    }
}

unsigned vset_clear(struct vset *s)
{
    unsigned active = 0;
    for (uint64_t i = 0; i < s->h.nslots; i++) {
        bool was = false;
        if (kill_slot(s, i, 0, true, &was))
            active += was;
    }
    return active;
}

unsigned vset_prune(struct vset *s, bool (*keep)(void *arg, const char *key, size_t len),
                    void *arg)
{
    unsigned killed = 0;
    char key[VSET_KEY_MAX];
    for (uint64_t i = 0; i < s->h.nslots; i++) {
        uint64_t m = atomic_load(meta_at(s, i));
        if (state_of(m) != VSET_ACTIVE)
            continue;
        _Atomic uint64_t *w = slot_at(s, i);
        size_t len = (size_t)atomic_load_explicit(&w[0], memory_order_relaxed);
        if (len > VSET_KEY_MAX)
            continue;
        for (size_t k = 0; 8 * k < len; k++) {
            uint64_t word = atomic_load_explicit(&w[1 + k], memory_order_relaxed);
            memcpy(key + 8 * k, &word, len - 8 * k < 8 ? len - 8 * k : 8);
        }
        bool was = false;
        if (!keep(arg, key, len) && kill_slot(s, i, 0, true, &was))
            killed++;
    }
    return killed;
}
