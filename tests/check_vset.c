/*
 * Unit tests of the verified-absent set (src/core/vset.c): exact keys (a
 * hash shared with a kept key denies nothing else), bounds and eviction,
 * kills by hash, a view of the same bytes, and the readers' promise under
 * threads: once a kill or an unstage has returned, no reader finds the
 * key, even while its slot is rewritten with another key of the same hash.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "filter.h"
#include "vset.h"

static struct vset *new_set(uint32_t max, void **memp)
{
    size_t bytes = vset_bytes(max);
    ck_assert_uint_gt(bytes, 0);
    *memp = aligned_alloc(64, (bytes + 63) / 64 * 64);
    ck_assert_ptr_nonnull(*memp);
    struct vset *made = vset_make(*memp, bytes, max);
    ck_assert_ptr_nonnull(made);
    return made;
}

/* Stage and activate key; true when it went in. */
static bool put(struct vset *s, const char *key, unsigned *evicted)
{
    struct vset_ref ref;
    size_t len = strlen(key);
    if (!vset_stage(s, filter_hash(key, len), key, len, &ref, evicted))
        return false;
    return vset_activate(s, &ref);
}

static bool has(const struct vset *s, const char *key)
{
    size_t len = strlen(key);
    return vset_has(s, filter_hash(key, len), key, len);
}

/* The set of the single-threaded tests, its memory and its count of evictions. */
static void *mem;
static struct vset *s;
static unsigned ev;

static void setup_64(void)
{
    s = new_set(64, &mem);
    ev = 0;
}

static void setup_100(void)
{
    s = new_set(100, &mem);
    ev = 0;
}

static void teardown(void)
{
    free(mem);
}

START_TEST(test_exact_keys)
{
    ck_assert(!has(s, "a"));
    ck_assert(put(s, "a", &ev));
    ck_assert(has(s, "a"));
    ck_assert(!has(s, "b"));
    ck_assert_uint_eq(vset_count(s), 1);
    /* Again: nothing staged twice. */
    struct vset_ref ref;
    ck_assert(!vset_stage(s, filter_hash("a", 1), "a", 1, &ref, &ev));
    /* Another key under a's very hash (a collision) is not denied: the key's bytes decide. */
    uint64_t ha = filter_hash("a", 1);
    ck_assert(!vset_has(s, ha, "z", 1));
    ck_assert(!vset_has(s, ha, "a\0", 2));
    /* Keys that differ past the first word, and keys of every length up to the limit. */
    char k1[VSET_KEY_MAX + 2], k2[VSET_KEY_MAX + 2];
    for (size_t len = 1; len <= VSET_KEY_MAX; len += 7) {
        memset(k1, 'x', len);
        k1[len] = '\0';
        memcpy(k2, k1, len + 1);
        k2[len - 1] = 'y';
        ck_assert_msg(put(s, k1, &ev), "len %zu", len);
        ck_assert_msg(has(s, k1), "len %zu", len);
        ck_assert_msg(!vset_has(s, filter_hash(k1, len), k2, len), "len %zu", len);
    }
    /* Too long to keep: never staged, never found. */
    memset(k1, 'x', VSET_KEY_MAX + 1);
    k1[VSET_KEY_MAX + 1] = '\0';
    ck_assert(!vset_stage(s, filter_hash(k1, VSET_KEY_MAX + 1), k1, VSET_KEY_MAX + 1, &ref, &ev));
    ck_assert(!has(s, k1));
    ck_assert_uint_eq(ev, 0);
}
END_TEST

START_TEST(test_pending_is_not_believed)
{
    struct vset_ref ref;
    uint64_t h = filter_hash("p", 1);
    ck_assert(vset_stage(s, h, "p", 1, &ref, &ev));
    ck_assert(!has(s, "p"));                    /* staged: not yet denied */
    /* A kill before the activation wins: the activation fails. */
    ck_assert_uint_eq(vset_kill(s, h), 0);      /* it was not active yet */
    ck_assert(!vset_activate(s, &ref));
    ck_assert(!has(s, "p"));
    ck_assert_uint_eq(vset_count(s), 0);
    /* Activated, then killed: gone, counted as an active one. */
    ck_assert(put(s, "p", &ev));
    ck_assert(has(s, "p"));
    ck_assert_uint_eq(vset_kill(s, h), 1);
    ck_assert(!has(s, "p"));
    /* Unstaged: gone too; a later unstage of the same ref touches no new entry in its slot. */
    ck_assert(vset_stage(s, h, "p", 1, &ref, &ev));
    ck_assert(vset_activate(s, &ref));
    vset_unstage(s, &ref);
    ck_assert(!has(s, "p"));
    ck_assert(put(s, "p", &ev));
    vset_unstage(s, &ref);
    ck_assert(has(s, "p"));
}
END_TEST

START_TEST(test_bounded_and_evicting)
{
    char key[32];
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof key, "key-%d", i);
        ck_assert(put(s, key, &ev));
        ck_assert_uint_le(vset_count(s), 100);
    }
    /* Every key went in; each that is not kept was evicted (a full bucket pair evicts early). */
    uint64_t n = vset_count(s);
    ck_assert_uint_ge(n, 90);
    ck_assert_uint_eq(ev + n, 1000);
    /* The newest is always there; the evicted ones are simply not denied any more. */
    ck_assert(has(s, "key-999"));
    int kept = 0;
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof key, "key-%d", i);
        kept += has(s, key);
    }
    ck_assert_int_eq(kept, (int)n);
    ck_assert_uint_eq(vset_clear(s), n);
    ck_assert_uint_eq(vset_count(s), 0);
    ck_assert(!has(s, "key-999"));
    /* Out of range. */
    ck_assert_uint_eq(vset_bytes(VSET_MIN_ENTRIES - 1), 0);
    ck_assert_uint_eq(vset_bytes(VSET_MAX_ENTRIES + 1), 0);
}
END_TEST

static bool keep_even(void *arg, const char *key, size_t len)
{
    (void)arg;
    return (key[len - 1] - '0') % 2 == 0;
}

START_TEST(test_prune_and_view)
{
    char key[16];
    for (int i = 0; i < 10; i++) {
        snprintf(key, sizeof key, "k%d", i);
        ck_assert(put(s, key, &ev));
    }
    ck_assert_uint_eq(vset_prune(s, keep_even, NULL), 5);
    ck_assert(has(s, "k4"));
    ck_assert(!has(s, "k5"));
    /* A reader's view of the same bytes answers the same. */
    const struct vset *v = vset_view(mem, vset_bytes(64));
    ck_assert_ptr_nonnull(v);
    ck_assert(has(v, "k4"));
    ck_assert(!has(v, "k5"));
    ck_assert_ptr_null(vset_view(mem, vset_bytes(64) - 1));     /* cut short */
    ((char *)mem)[0] = 'X';
    ck_assert_ptr_null(vset_view(mem, vset_bytes(64)));         /* not a set */
}
END_TEST

/* ---------------------------------------------------------- threads -- */

#define ROUNDS 200000
#define READERS 3

/* READERS threads of reader and one of writer on arg, until all have ended. */
static void run_race(void *(*writer_fn)(void *), void *(*reader_fn)(void *), void *arg)
{
    pthread_t w, rd[READERS];
    for (int i = 0; i < READERS; i++)
        ck_assert_int_eq(pthread_create(&rd[i], NULL, reader_fn, arg), 0);
    ck_assert_int_eq(pthread_create(&w, NULL, writer_fn, arg), 0);
    pthread_join(w, NULL);
    for (int i = 0; i < READERS; i++)
        pthread_join(rd[i], NULL);
}

struct race {
    struct vset *s;
    _Atomic long dead_upto;         /* keys 0 .. dead_upto are gone (-1: none yet) */
    _Atomic long active_upto;
    atomic_bool done;
    _Atomic long wrong, seen;
    uint64_t h;                     /* every key's hash: one bucket pair, slots reused */
};

static void key_of(char *buf, size_t cap, long i)
{
    snprintf(buf, cap, "key-%ld-padding-to-two-words", i);
}

static void *writer(void *arg)
{
    struct race *r = arg;
    struct vset_ref refs[8];
    unsigned evicted = 0;
    char key[64];
    for (long i = 0; i < ROUNDS; i++) {
        key_of(key, sizeof key, i);
        ck_assert(vset_stage(r->s, r->h, key, strlen(key), &refs[i % 8], &evicted));
        ck_assert(vset_activate(r->s, &refs[i % 8]));
        atomic_store_explicit(&r->active_upto, i, memory_order_release);
        if (i >= 4) {
            /* Gone before dead_upto says so: a reader that reads dead_upto first must miss it. */
            vset_unstage(r->s, &refs[(i - 4) % 8]);
            atomic_store_explicit(&r->dead_upto, i - 4, memory_order_release);
        }
    }
    atomic_store(&r->done, true);
    return NULL;
}

static void *reader(void *arg)
{
    struct race *r = arg;
    unsigned seed = 7;
    char key[64];
    while (!atomic_load(&r->done)) {
        long d = atomic_load_explicit(&r->dead_upto, memory_order_acquire);
        if (d < 0)
            continue;
        long j = d - (long)(rand_r(&seed) % 4);
        if (j >= 0) {
            key_of(key, sizeof key, j);
            if (vset_has(r->s, r->h, key, strlen(key)))
                atomic_fetch_add(&r->wrong, 1);
        }
        long a = atomic_load_explicit(&r->active_upto, memory_order_acquire);
        key_of(key, sizeof key, a);
        atomic_fetch_add(&r->seen, vset_has(r->s, r->h, key, strlen(key)));
    }
    return NULL;
}

START_TEST(test_readers_never_find_a_gone_key)
{
    struct race r = { .s = s, .h = filter_hash("one hash", 8) };
    atomic_init(&r.dead_upto, -1);
    atomic_init(&r.active_upto, -1);
    run_race(writer, reader, &r);
    long wrong = atomic_load(&r.wrong), seen = atomic_load(&r.seen);
    printf("vset race: %ld wrong, %ld live keys found\n", wrong, seen);
    ck_assert_msg(wrong == 0, "%ld lookups found a key after its unstage returned", wrong);
    ck_assert_int_gt(seen, 0);
}
END_TEST

#define KILL_KEYS 20000

struct killrace {
    struct vset *s;
    _Atomic long killed_upto;
    atomic_bool done;
    _Atomic long wrong;
};

static void *killer(void *arg)
{
    struct killrace *k = arg;
    char key[32];
    for (long i = 0; i < KILL_KEYS; i++) {
        snprintf(key, sizeof key, "kill-%ld", i);
        vset_kill(k->s, filter_hash(key, strlen(key)));
        atomic_store_explicit(&k->killed_upto, i, memory_order_release);
    }
    atomic_store(&k->done, true);
    return NULL;
}

static void *kill_reader(void *arg)
{
    struct killrace *k = arg;
    char key[32];
    unsigned seed = 3;
    while (!atomic_load(&k->done)) {
        long d = atomic_load_explicit(&k->killed_upto, memory_order_acquire);
        if (d < 0)
            continue;
        long j = (long)(rand_r(&seed) % (unsigned long)(d + 1));
        snprintf(key, sizeof key, "kill-%ld", j);
        if (has(k->s, key))
            atomic_fetch_add(&k->wrong, 1);
    }
    return NULL;
}

START_TEST(test_kills_from_other_threads)
{
    struct killrace k = { .s = new_set(KILL_KEYS, &mem) };
    atomic_init(&k.killed_upto, -1);
    unsigned evicted = 0;
    char key[32];
    for (long i = 0; i < KILL_KEYS; i++) {
        snprintf(key, sizeof key, "kill-%ld", i);
        ck_assert(put(k.s, key, &evicted));
    }
    ck_assert_uint_eq(evicted, 0);
    ck_assert_uint_eq(vset_count(k.s), KILL_KEYS);
    run_race(killer, kill_reader, &k);
    long wrong = atomic_load(&k.wrong);
    ck_assert_msg(wrong == 0, "%ld lookups found a key after its kill returned", wrong);
    ck_assert_uint_eq(vset_count(k.s), 0);
    free(mem);
}
END_TEST

CHECK_SUITE("vset",
    CHECK_CASE("core", .timeout = 120, .setup = setup_64, .teardown = teardown),
    CHECK_TEST(test_exact_keys),
    CHECK_TEST(test_pending_is_not_believed),
    CHECK_TEST(test_prune_and_view),
    CHECK_TEST(test_readers_never_find_a_gone_key),
    CHECK_CASE("bounded", .setup = setup_100, .teardown = teardown),
    CHECK_TEST(test_bounded_and_evicting),
    CHECK_CASE("kills", .timeout = 120),
    CHECK_TEST(test_kills_from_other_threads),
)
