/*
 * The verified-absent set: keys PostgreSQL was asked about and did not
 * have, kept exactly (the key's bytes, not a fingerprint: a present ID
 * whose hash collides with a denied one must never be denied), in a fixed
 * block of memory that the daemon writes and any number of readers read
 * without a lock, in this process or, mapped from a published file, in
 * another (publish.h, pubfmt.h).  Pure: no I/O, no allocation, no clock.
 * What an entry proves, and when it must go, is the table's to say
 * (table_adapt.c); this module keeps entries and the ordering that makes
 * its readers safe:
 *
 *   a reader may miss an entry (a false "maybe"), never find one that is
 *   gone: vset_has answers true only for a key whose entry was ACTIVE from
 *   before its first load of the slot to after its last.
 *
 * Layout (native byte order and alignment; the block starts 64-byte
 * aligned; a reader in another language follows this):
 *   struct vset_header (64 bytes), then nslots meta words (uint64), then
 *   nslots key slots of VSET_SLOT_BYTES: word 0 the key's length, then
 *   the key's bytes (at most VSET_KEY_MAX), zero-padded.
 *   A meta word is state (bits 0-2) | version (bits 3-31) | the key
 *   hash's high 32 bits (bits 32-63); hash is XXH3_64bits (filter_hash).
 *   The slots form buckets of VSET_BUCKET; a key lives in bucket
 *   (hash mod nbuckets) or bucket (vset_mix(hash) mod nbuckets), or the
 *   next one when that is the same (vset_buckets).
 *   A reader checks a slot as a seqlock: meta (acquire), then the key's
 *   words, then an acquire fence and meta again; the key counts only if
 *   meta was ACTIVE and unchanged.
 */
#ifndef BLOOMGUARD_VSET_H
#define BLOOMGUARD_VSET_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VSET_MAGIC "BGVSET01"           /* 8 bytes, no terminator */
#define VSET_SLOT_BYTES 128u
#define VSET_KEY_MAX (VSET_SLOT_BYTES - 8u)   /* a longer key is never kept: it stays "maybe" */
#define VSET_BUCKET 8u                  /* slots per bucket: one cache line of meta words */
#define VSET_MIN_ENTRIES 16u
#define VSET_MAX_ENTRIES 1000000u

/* A slot's state, bits 0-2 of its meta word. */
enum vset_state {
    VSET_FREE = 0,      /* never used */
    VSET_WRITING = 1,   /* the writer is filling it in */
    VSET_PENDING = 2,   /* written, not yet believed: readers skip it */
    VSET_ACTIVE = 3,    /* believed: readers deny its key */
    VSET_DEAD = 4       /* killed (invalidated, evicted, dropped): free for the writer */
};

struct vset_header {
    char magic[8];              /* VSET_MAGIC */
    uint32_t slot_bytes;        /* VSET_SLOT_BYTES */
    uint32_t key_max;           /* VSET_KEY_MAX */
    uint64_t nslots;            /* a power of two, at least 2 * VSET_BUCKET */
    uint32_t max_entries;       /* PENDING + ACTIVE entries kept at most */
    uint32_t reserved;
    _Atomic uint64_t live;      /* PENDING + ACTIVE entries now: 0 lets a reader skip */
    _Atomic uint64_t hand;      /* the writer's eviction clock (a slot index) */
    uint8_t pad[16];
};
_Static_assert(sizeof(struct vset_header) == 64, "the header is one cache line");

struct vset;

/* Bytes a set of max_entries entries takes (VSET_MIN_ENTRIES..VSET_MAX_ENTRIES; 0: out of range). */
size_t vset_bytes(uint32_t max_entries);

/*
 * An empty set in mem (vset_bytes(max_entries) bytes, 64-byte aligned; its
 * contents are overwritten), owned by the caller, who frees mem (nothing
 * else to free).  NULL when bytes is too small or max_entries out of range.
 */
struct vset *vset_make(void *mem, size_t bytes, uint32_t max_entries);

/*
 * A set made by vset_make (in another process, mapped read-only) checked
 * for use by readers: magic, slot size, geometry within bytes.  NULL when
 * it is not one this build reads.
 */
const struct vset *vset_view(const void *mem, size_t bytes);

/* The two buckets key hash h may live in, for nbuckets buckets (a power of two). */
void vset_buckets(uint64_t h, uint64_t nbuckets, uint64_t *b1, uint64_t *b2);

/*
 * Whether key (len bytes, filter_hash h) is ACTIVE in s.  Lock-free, any
 * thread or process, never blocks the writer.  False for a key longer than
 * VSET_KEY_MAX, and whenever a racing writer leaves doubt.
 */
bool vset_has(const struct vset *s, uint64_t h, const void *key, size_t len);

/*
 * Whether s holds no entry now (the header's live count, relaxed): the
 * first test vset_has makes, for a caller on a hot path to make without a
 * call (answer_lookup: the set is empty on most "maybe" answers).  A reader
 * that sees 0 may miss an entry being entered, as vset_has may.
 */
static inline bool vset_empty(const struct vset *s)
{
    return atomic_load_explicit(&((struct vset_header *)s)->live, memory_order_relaxed) == 0;
}

/*
 * PENDING + ACTIVE entries now (a seq_cst load: 0 proves to a killer that
 * no entry was staged before its own earlier seq_cst operations).
 */
uint64_t vset_count(const struct vset *s);
uint32_t vset_max_entries(const struct vset *s);

/*
 * The writer's side.  vset_stage, vset_activate, vset_unstage and
 * vset_clear are called by one thread at a time (the caller's lock);
 * vset_kill from any thread at any time.
 *
 * vset_stage: a PENDING entry for key (readers skip it), stored with a
 * sequentially consistent store so that a vset_kill that runs after the
 * caller's next seq_cst load of anything finds it; *ref names it.  Makes
 * room first when max_entries are kept, or both of the key's buckets are
 * full: the entry killed is counted in *evicted (it returns to "maybe").
 * False (nothing staged) for a key longer than VSET_KEY_MAX or one already
 * PENDING or ACTIVE.
 *
 * vset_activate: PENDING -> ACTIVE, unless a vset_kill got there first
 * (false: the entry is dead).
 *
 * vset_unstage: kill the entry ref names (if still PENDING or ACTIVE).
 *
 * vset_kill: kill every PENDING or ACTIVE entry whose hash has the same
 * high 32 bits as h in h's buckets (more than the key asked for is safe:
 * a killed entry only returns its key to "maybe").  Returns how many were
 * ACTIVE.  Sequentially consistent loads, so that it finds every entry
 * staged before the caller's earlier seq_cst store (the table's count of
 * adds: table_adapt.c's proof).
 *
 * vset_clear: kill every entry; returns how many were ACTIVE.
 */
struct vset_ref {
    uint64_t slot;
    uint64_t meta;              /* the PENDING meta word it was staged with */
};
bool vset_stage(struct vset *s, uint64_t h, const void *key, size_t len, struct vset_ref *ref,
                unsigned *evicted);
bool vset_activate(struct vset *s, const struct vset_ref *ref);
void vset_unstage(struct vset *s, const struct vset_ref *ref);
unsigned vset_kill(struct vset *s, uint64_t h);
unsigned vset_clear(struct vset *s);

/*
 * Each ACTIVE entry's key and hash high bits, for the writer (under its
 * lock): fn(arg, key, len) returning false kills the entry (counted in the
 * return value).  For a prune at a load's commit.
 */
unsigned vset_prune(struct vset *s, bool (*keep)(void *arg, const char *key, size_t len),
                    void *arg);

#endif
