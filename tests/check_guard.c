/*
 * Unit tests of the served-filter swap (guard) and the POST journal
 * (pending): rebuilds racing inserts and lookups never lose an acknowledged
 * key, and the journal keeps exactly the keys the table has not shown.
 */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "guard.h"
#include "pending.h"

#define KEYS 60000u

static size_t key_of(char *buf, size_t cap, const char *prefix, unsigned i)
{
    return (size_t)snprintf(buf, cap, "%s-%u", prefix, i);
}

START_TEST(test_not_ready_then_ready)
{
    struct guard *g = guard_new();
    ck_assert_ptr_nonnull(g);
    ck_assert(!guard_ready(g));
    ck_assert(!guard_writable(g));
    ck_assert_int_eq(guard_lookup(g, "a", 1), GUARD_NOT_READY);
    ck_assert(!guard_add(g, "a", 1));
    struct filter_info fi;
    ck_assert(!guard_info(g, &fi));
    ck_assert_ptr_null(guard_live(g));

    /* During the first load inserts reach the filter being built. */
    struct filter *first = filter_new(100, 0.01, NULL);
    guard_begin(g, first);
    ck_assert_ptr_null(guard_live(g));          /* being built is not live */
    ck_assert(guard_writable(g));
    ck_assert(!guard_ready(g));
    ck_assert(guard_add(g, "early", 5));
    ck_assert(guard_next_info(g, &fi));
    ck_assert_uint_eq(fi.items, 1);
    guard_commit(g);
    ck_assert(guard_ready(g));
    ck_assert_int_eq(guard_lookup(g, "early", 5), GUARD_MAYBE);
    ck_assert_int_eq(guard_lookup(g, "never", 5), GUARD_ABSENT);
    ck_assert(!guard_next_info(g, &fi));
    ck_assert_ptr_eq(guard_live(g), first);
    ck_assert(filter_contains(guard_live(g), "early", 5));

    /* An aborted rebuild leaves the live filter as it was. */
    guard_begin(g, filter_new(100, 0.01, NULL));
    ck_assert(guard_add(g, "during", 6));
    ck_assert_ptr_eq(guard_live(g), first);     /* still live while the next fills */
    guard_abort(g);
    ck_assert_ptr_eq(guard_live(g), first);
    ck_assert_int_eq(guard_lookup(g, "during", 6), GUARD_MAYBE);
    ck_assert_int_eq(guard_lookup(g, "early", 5), GUARD_MAYBE);

    /* A committed rebuild: its filter is the live one from then on. */
    struct filter *second = filter_new(100, 0.01, NULL);
    guard_begin(g, second);
    guard_commit(g);
    ck_assert_ptr_eq(guard_live(g), second);
    guard_free(g);
    guard_free(NULL);
}
END_TEST

/*
 * A simulated table: rows are published in order (a counter), like commits
 * that a COPY sees up to its snapshot and NOTIFY reports after.
 */
struct world {
    struct guard *g;
    struct pending *p;
    _Atomic unsigned table_rows;    /* rows committed: "t-0" .. */
    _Atomic unsigned posted;        /* POST-only keys acknowledged: "p-0" .. */
    _Atomic unsigned notified;      /* table rows whose NOTIFY was applied */
    atomic_bool stop;
    _Atomic unsigned long false_neg;
    _Atomic unsigned rebuilds;
    bool bulk;                      /* rebuild as the source does: bulk + backlog */
};

/* Keep the writers in step with the rebuilds: about 20 swaps over the run. */
static void pace(struct world *w, unsigned i)
{
    while (atomic_load(&w->rebuilds) < i / (KEYS / 20) && !atomic_load(&w->stop))
        sched_yield();
}

static void *poster(void *arg)
{
    struct world *w = arg;
    char k[32];
    for (unsigned i = 0; i < KEYS && !atomic_load(&w->stop); i++) {
        pace(w, i);
        size_t n = key_of(k, sizeof k, "p", i);
        uint64_t h = filter_hash(k, n);
        ck_assert_int_eq(pending_add(w->p, k, n, h, 0), PENDING_OK);   /* the api's order: journal, then filter */
        guard_add_hash(w->g, h);
        atomic_store(&w->posted, i + 1);
    }
    return NULL;
}

/* Commits rows and applies their notifications (as the follower would). */
static void *committer(void *arg)
{
    struct world *w = arg;
    char k[32];
    for (unsigned i = 0; i < KEYS && !atomic_load(&w->stop); i++) {
        pace(w, i);
        atomic_store(&w->table_rows, i + 1);            /* commit */
        size_t n = key_of(k, sizeof k, "t", i);
        uint64_t h = filter_hash(k, n);
        guard_add_hash(w->g, h);                        /* NOTIFY applied (never touches the journal) */
        atomic_store(&w->notified, i + 1);
    }
    return NULL;
}

static void *rebuilder(void *arg)
{
    struct world *w = arg;
    char k[32];
    while (!atomic_load(&w->stop)) {
        struct filter *f = filter_new(4 * KEYS, 0.01, NULL);
        if (w->bulk)
            guard_begin_bulk(w->g, f);
        else
            guard_begin(w->g, f);
        unsigned snap = atomic_load(&w->table_rows);    /* the COPY's snapshot */
        for (unsigned i = 0; i < snap; i++) {
            size_t n = key_of(k, sizeof k, "t", i);
            uint64_t h = filter_hash(k, n);
            if (w->bulk)
                filter_add_hashes_exclusive(f, &h, 1);
            else
                filter_add_hash(f, h);
            pending_seen(w->p, k, n, h);
        }
        if (w->bulk)
            ck_assert(guard_end_bulk(w->g));
        pending_replay(w->p, f);
        guard_commit(w->g);
        atomic_fetch_add(&w->rebuilds, 1);
    }
    return NULL;
}

static void *checker(void *arg)
{
    struct world *w = arg;
    char k[32];
    while (!atomic_load(&w->stop)) {
        unsigned np = atomic_load(&w->posted), nt = atomic_load(&w->notified);
        for (unsigned i = 0; i < np; i += 7) {
            size_t n = key_of(k, sizeof k, "p", i);
            if (guard_lookup(w->g, k, n) != GUARD_MAYBE)
                atomic_fetch_add(&w->false_neg, 1);
        }
        for (unsigned i = 0; i < nt; i += 7) {
            size_t n = key_of(k, sizeof k, "t", i);
            if (guard_lookup(w->g, k, n) != GUARD_MAYBE)
                atomic_fetch_add(&w->false_neg, 1);
        }
    }
    return NULL;
}

static void race(bool bulk)
{
    struct world w;
    memset(&w, 0, sizeof w);
    w.bulk = bulk;
    w.g = guard_new();
    w.p = pending_new(10 * KEYS, UINT64_MAX, 3600);
    guard_begin(w.g, filter_new(4 * KEYS, 0.01, NULL));
    guard_commit(w.g);

    pthread_t tp, tc, tr, tk;
    pthread_create(&tr, NULL, rebuilder, &w);
    pthread_create(&tk, NULL, checker, &w);
    pthread_create(&tp, NULL, poster, &w);
    pthread_create(&tc, NULL, committer, &w);
    pthread_join(tp, NULL);
    pthread_join(tc, NULL);
    atomic_store(&w.stop, true);
    pthread_join(tr, NULL);
    pthread_join(tk, NULL);

    char k[32];
    unsigned long missing = 0;
    for (unsigned i = 0; i < KEYS; i++) {
        size_t n = key_of(k, sizeof k, "p", i);
        missing += guard_lookup(w.g, k, n) != GUARD_MAYBE;
        n = key_of(k, sizeof k, "t", i);
        missing += guard_lookup(w.g, k, n) != GUARD_MAYBE;
    }
    unsigned rebuilds = atomic_load(&w.rebuilds);
    unsigned long false_neg = atomic_load(&w.false_neg);
    fprintf(stderr, "rebuilds during the race: %u\n", rebuilds);
    ck_assert_uint_ge(rebuilds, 19);
    ck_assert_uint_eq(false_neg, 0);
    ck_assert_uint_eq(missing, 0);
    /* Table rows left the journal; POST-only keys stayed. */
    struct pending_info pi;
    pending_info(w.p, &pi);
    ck_assert_uint_eq(pi.count, KEYS);
    pending_free(w.p);
    guard_free(w.g);
}

START_TEST(test_rebuilds_race_inserts) { race(false); }
END_TEST

/* As the source rebuilds: the copy is the new filter's only writer and
 * concurrent inserts wait in the backlog. */
START_TEST(test_bulk_rebuilds_race_inserts) { race(true); }
END_TEST

START_TEST(test_pending_set)
{
    struct pending *p = pending_new(3, 1000, 60);
    struct pending_info pi;
    ck_assert_ptr_nonnull(p);
    const char *ids[] = { "a", "bb", "ccc", "dddd" };
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(pending_add(p, ids[i], strlen(ids[i]), filter_hash(ids[i], strlen(ids[i])), 0),
                         PENDING_OK);
    ck_assert_int_eq(pending_add(p, "a", 1, filter_hash("a", 1), 0), PENDING_OK);   /* already there */
    ck_assert_int_eq(pending_add(p, "dddd", 4, filter_hash("dddd", 4), 0), PENDING_FULL_COUNT);
    pending_info(p, &pi);
    ck_assert_uint_eq(pi.count, 3);
    ck_assert_uint_eq(pi.bytes, 6);
    ck_assert_uint_eq(pi.refused, 1);

    pending_seen(p, "bb", 2, filter_hash("bb", 2));
    pending_seen(p, "zz", 2, filter_hash("zz", 2));                   /* not there */
    pending_info(p, &pi);
    ck_assert_uint_eq(pi.count, 2);
    ck_assert_uint_eq(pi.bytes, 4);
    ck_assert_int_eq(pending_add(p, "dddd", 4, filter_hash("dddd", 4), 0), PENDING_OK);  /* room again */

    struct filter *f = filter_new(100, 0.01, NULL);
    pending_replay(p, f);
    ck_assert(filter_contains(f, "a", 1));
    ck_assert(filter_contains(f, "ccc", 3));
    ck_assert(filter_contains(f, "dddd", 4));
    struct filter_info fi;
    filter_info(f, &fi);
    ck_assert_uint_eq(fi.items, 3);
    filter_free(f);

    /* Expiry: "a" was renewed at 0, the others added at 0; all expire at 60. */
    pending_expire(p, 59);
    pending_info(p, &pi);
    ck_assert_uint_eq(pi.count, 3);
    ck_assert_int_eq(pending_add(p, "a", 1, filter_hash("a", 1), 30), PENDING_OK);   /* renewed to 90 */
    pending_expire(p, 60);
    pending_info(p, &pi);
    ck_assert_uint_eq(pi.count, 1);
    ck_assert_uint_eq(pi.expired, 2);
    pending_free(p);

    /* A full journal makes room from expired entries before refusing. */
    p = pending_new(2, 1000, 10);
    ck_assert_int_eq(pending_add(p, "x", 1, filter_hash("x", 1), 0), PENDING_OK);
    ck_assert_int_eq(pending_add(p, "y", 1, filter_hash("y", 1), 5), PENDING_OK);
    ck_assert_int_eq(pending_add(p, "z", 1, filter_hash("z", 1), 9), PENDING_FULL_COUNT);
    ck_assert_int_eq(pending_add(p, "z", 1, filter_hash("z", 1), 10), PENDING_OK);  /* x expired */
    pending_free(p);

    /* Bytes bound, and a batch is all or nothing. */
    p = pending_new(100, 10, 60);
    const char *batch[] = { "1234", "5678", "abc" };
    size_t lens[] = { 4, 4, 3 };
    uint64_t hs[3];
    for (int i = 0; i < 3; i++)
        hs[i] = filter_hash(batch[i], lens[i]);
    ck_assert_int_eq(pending_add_many(p, 3, batch, lens, hs, 0), PENDING_FULL_BYTES);
    pending_info(p, &pi);
    ck_assert_uint_eq(pi.count, 0);
    ck_assert_uint_eq(pi.refused, 3);
    ck_assert_int_eq(pending_add_many(p, 2, batch, lens, hs, 0), PENDING_OK);
    ck_assert_int_eq(pending_add_many(p, 2, batch, lens, hs, 0), PENDING_OK);       /* no new room */
    pending_info(p, &pi);
    ck_assert_uint_eq(pi.bytes, 8);
    pending_free(p);

    /* Many adds and removes: growth and tombstone reuse keep it exact. */
    p = pending_new(1000000, UINT64_MAX, 60);
    char k[32];
    for (unsigned i = 0; i < 50000; i++) {
        size_t n = key_of(k, sizeof k, "x", i);
        ck_assert_int_eq(pending_add(p, k, n, filter_hash(k, n), 0), PENDING_OK);
        if (i % 2 == 0)
            pending_seen(p, k, n, filter_hash(k, n));
    }
    pending_info(p, &pi);
    ck_assert_uint_eq(pi.count, 25000);
    for (unsigned i = 0; i < 50000; i++) {
        size_t n = key_of(k, sizeof k, "x", i);
        pending_seen(p, k, n, filter_hash(k, n));
    }
    pending_info(p, &pi);
    ck_assert_uint_eq(pi.count, 0);
    ck_assert_uint_eq(pi.bytes, 0);
    pending_free(p);

    /*
     * A restart with smaller limits than the journal it restores (issue 22,
     * case 5): every restored entry is kept, new IDs are refused until
     * entries leave, an ID already there is still renewed.
     */
    p = pending_new(3, 10, 60);
    for (unsigned i = 0; i < 10; i++) {
        size_t n = key_of(k, sizeof k, "r", i);
        ck_assert_int_eq(pending_restore(p, k, n, filter_hash(k, n), 20 + i, 100), PENDING_OK);
    }
    pending_info(p, &pi);
    ck_assert_uint_eq(pi.count, 10);
    ck_assert_uint_gt(pi.bytes, 10);
    ck_assert_int_eq(pending_add(p, "new", 3, filter_hash("new", 3), 101), PENDING_FULL_COUNT);
    {
        size_t n = key_of(k, sizeof k, "r", 0);
        ck_assert_int_eq(pending_add(p, k, n, filter_hash(k, n), 101), PENDING_OK);  /* renewed */
    }
    f = filter_new(100, 0.01, NULL);
    pending_replay(p, f);
    for (unsigned i = 0; i < 10; i++) {
        size_t n = key_of(k, sizeof k, "r", i);
        ck_assert(filter_contains(f, k, n));
    }
    filter_free(f);
    /* Seen by a COPY: still 9 > 3, still refused. */
    {
        size_t n = key_of(k, sizeof k, "r", 9);
        pending_seen(p, k, n, filter_hash(k, n));
    }
    ck_assert_int_eq(pending_add(p, "new", 3, filter_hash("new", 3), 102), PENDING_FULL_COUNT);
    /* r1..r8 expire at 121..128 and r0 was renewed to 161: at 126 r0, r7, r8 fill it, at 127 not. */
    ck_assert_int_eq(pending_add(p, "new", 3, filter_hash("new", 3), 126), PENDING_FULL_COUNT);
    ck_assert_int_eq(pending_add(p, "new", 3, filter_hash("new", 3), 127), PENDING_OK);
    pending_info(p, &pi);
    ck_assert_uint_eq(pi.count, 3);
    pending_free(p);
    /* The same over the byte bound. */
    p = pending_new(100, 10, 60);
    for (unsigned i = 0; i < 5; i++) {
        size_t n = key_of(k, sizeof k, "b", i);
        ck_assert_int_eq(pending_restore(p, k, n, filter_hash(k, n), 60, 0), PENDING_OK);
    }
    pending_info(p, &pi);
    ck_assert_uint_eq(pi.count, 5);
    ck_assert_uint_gt(pi.bytes, 10);
    ck_assert_int_eq(pending_add(p, "z", 1, filter_hash("z", 1), 1), PENDING_FULL_BYTES);
    pending_free(p);

    p = pending_new(0, 0, 60);                          /* no journal: every POST refused */
    ck_assert_int_eq(pending_add(p, "a", 1, filter_hash("a", 1), 0), PENDING_FULL_COUNT);
    pending_info(p, &pi);
    ck_assert_uint_eq(pi.count, 0);
    pending_free(p);
}
END_TEST

/* An export's result: how many entries and whether "old" came with its own ttl. */
struct export_seen {
    uint64_t n;
    char ids[8][8];
    uint64_t left[8];
};

static bool export_count(void *ctx, uint64_t n, uint64_t bytes)
{
    (void)bytes;
    ((struct export_seen *)ctx)->n = n;
    return n <= 8;
}

static bool export_each(void *ctx, const char *id, size_t len, uint64_t ttl_left)
{
    struct export_seen *x = ctx;
    size_t i = 0;
    while (i < 8 && x->ids[i][0] != '\0')
        i++;
    ck_assert_uint_lt(i, 8);
    ck_assert_uint_lt(len, sizeof x->ids[0]);
    memcpy(x->ids[i], id, len);
    x->left[i] = ttl_left;
    return true;
}

/*
 * A POST that must reach the disk: reserved (room taken, in no journal),
 * then committed or cancelled.  A cancelled one leaves no trace, not in a
 * replay or an export; what was acknowledged before stays as it was.
 */
START_TEST(test_pending_reserve)
{
    struct pending *p = pending_new(3, 1000, 60);
    struct pending_info pi;
    uint64_t h_old = filter_hash("old", 3), h_new = filter_hash("new", 3),
             h_two = filter_hash("two", 3), h_full = filter_hash("full", 4);
    ck_assert_int_eq(pending_add(p, "old", 3, h_old, 0), PENDING_OK);
    const char *ids[] = { "old", "new", "new" };    /* "new" twice: two holds */
    size_t lens[] = { 3, 3, 3 };
    uint64_t hs[] = { h_old, h_new, h_new };
    ck_assert_int_eq(pending_reserve(p, 3, ids, lens, hs, 10), PENDING_OK);
    pending_info(p, &pi);
    ck_assert_uint_eq(pi.count, 2);                 /* the room is taken */
    /* Held: neither replayed nor exported; a COPY or an expiry does not drop it. */
    struct filter *f = filter_new(100, 0.001, NULL);
    pending_replay(p, f);
    ck_assert(filter_contains(f, "old", 3));
    ck_assert(!filter_contains(f, "new", 3));
    filter_free(f);
    struct export_seen x = { 0 };
    ck_assert(pending_export(p, 10, export_count, export_each, &x));
    ck_assert_uint_eq(x.n, 1);
    ck_assert_str_eq(x.ids[0], "old");
    ck_assert_uint_eq(x.left[0], 50);               /* the reservation refreshed nothing */
    pending_seen(p, "new", 3, h_new);
    pending_expire(p, 1000);                        /* "old" expired at 60, but both are held */
    pending_info(p, &pi);
    ck_assert_uint_eq(pi.count, 2);
    /* The room is shared with other POSTs: one more fits in 3, a second does not. */
    ck_assert_int_eq(pending_add(p, "two", 3, h_two, 1000), PENDING_OK);
    ck_assert_int_eq(pending_add(p, "full", 4, h_full, 1000), PENDING_FULL_COUNT);

    /* Refused: "new" leaves; "old", acknowledged before, stays until the next expiry. */
    pending_cancel(p, 3, ids, lens, hs);
    pending_info(p, &pi);
    ck_assert_uint_eq(pi.count, 2);
    pending_expire(p, 1000);
    pending_info(p, &pi);
    ck_assert_uint_eq(pi.count, 1);
    f = filter_new(100, 0.001, NULL);
    pending_replay(p, f);
    ck_assert(!filter_contains(f, "new", 3));
    filter_free(f);
    pending_free(p);

    /* Acknowledged: in the journal with a fresh expiry. */
    p = pending_new(3, 1000, 60);
    ck_assert_int_eq(pending_add(p, "old", 3, h_old, 0), PENDING_OK);
    ck_assert_int_eq(pending_reserve(p, 3, ids, lens, hs, 10), PENDING_OK);
    pending_commit(p, 3, ids, lens, hs, 20);
    memset(&x, 0, sizeof x);
    ck_assert(pending_export(p, 20, export_count, export_each, &x));
    ck_assert_uint_eq(x.n, 2);
    ck_assert_uint_eq(x.left[0], 60);
    ck_assert_uint_eq(x.left[1], 60);
    /* Refused after it was acknowledged: "old" keeps what it had. */
    ck_assert_int_eq(pending_reserve(p, 1, ids, lens, hs, 30), PENDING_OK);
    pending_cancel(p, 1, ids, lens, hs);
    pending_info(p, &pi);
    ck_assert_uint_eq(pi.count, 2);
    memset(&x, 0, sizeof x);
    ck_assert(pending_export(p, 30, export_count, export_each, &x));
    ck_assert_uint_eq(x.n, 2);
    /* A full journal refuses a reservation whole and holds nothing. */
    const char *big[] = { "a", "b" };
    size_t bl[] = { 1, 1 };
    uint64_t bh[] = { filter_hash("a", 1), filter_hash("b", 1) };
    ck_assert_int_eq(pending_reserve(p, 2, big, bl, bh, 30), PENDING_FULL_COUNT);
    pending_info(p, &pi);
    ck_assert_uint_eq(pi.count, 2);
    pending_free(p);
}
END_TEST

CHECK_SUITE("guard",
    CHECK_CASE("core", .timeout = 120),
    CHECK_TEST(test_not_ready_then_ready),
    CHECK_TEST(test_rebuilds_race_inserts),
    CHECK_TEST(test_bulk_rebuilds_race_inserts),
    CHECK_TEST(test_pending_set),
    CHECK_TEST(test_pending_reserve),
)
