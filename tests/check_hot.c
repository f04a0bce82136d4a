/*
 * Unit tests of the hot-"maybe" sketch (src/core/hot.c): min_hits within
 * a window makes a candidate once; a settled one waits out its hold; a
 * given-back one counts again; a hot ID is found under a flood of distinct
 * ones, none of which (asked once each) ever becomes a candidate; threads
 * hammering the same IDs get each exactly once; the door a lookup takes
 * inline counts as hot_door's, across its generations.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "check_main.h"
#include "filter.h"
#include "hot.h"

static uint64_t h_of(unsigned i)
{
    char k[32];
    int n = snprintf(k, sizeof k, "id-%u", i);
    return filter_hash(k, (size_t)n);
}

START_TEST(test_min_hits_within_a_window)
{
    struct hot *s = hot_new(300, 8, 1000);
    ck_assert_ptr_nonnull(s);
    uint64_t h = h_of(1);
    for (int i = 0; i < 7; i++)
        ck_assert_msg(!hot_hit(s, h, 100 + (uint32_t)i), "hit %d", i + 1);
    ck_assert(hot_hit(s, h, 110));                  /* the 8th: a candidate */
    for (int i = 0; i < 100; i++)
        ck_assert(!hot_hit(s, h, 120 + (uint32_t)i));   /* once: queued */
    /*
     * Slower than 8 - HOT_DOOR_PASS a window: never (the door's hits may
     * be up to two windows old: hot.h).
     */
    uint64_t slow = h_of(2);
    for (uint32_t t = 0; t < 20000; t += 1000 / (8 - HOT_DOOR_PASS - 1) + 1)
        ck_assert_msg(!hot_hit(s, slow, 5000 + t), "at %u", t);
    /* The clock may wrap. */
    uint64_t w = h_of(3);
    int cand = 0;
    for (uint32_t i = 0; i < 8; i++)
        cand += hot_hit(s, w, UINT32_MAX - 3 + i);
    ck_assert_int_eq(cand, 1);
    hot_free(s);
}
END_TEST

START_TEST(test_settle_and_give_back)
{
    struct hot *s = hot_new(300, 2, 1000);
    uint64_t h = h_of(7);
    ck_assert(!hot_hit(s, h, 0));
    ck_assert(hot_hit(s, h, 1));
    /*
     * Settled: not nominated again within the hold, then counted again,
     * from the hit the door carries (its last one in the hold: the door
     * turns only when a hit goes on, hot.h): with min_hits 2, at once.
     */
    hot_settle(s, h, true, 10);
    uint32_t hold = 1000 * HOT_HOLD_WINDOWS;
    for (uint32_t t = 20; t < hold - 3000; t += 997)
        ck_assert_msg(!hot_hit(s, h, t), "within the hold at %u", t);
    ck_assert(!hot_nominate(s, h, hold / 2));       /* a report does not shorten it */
    ck_assert(!hot_hit(s, h, 9 + hold));
    ck_assert(hot_hit(s, h, 10 + hold));
    /*
     * Given back (not verified after all): counts again at once, from the
     * hits the door carries (here its one: a candidate again).
     */
    hot_settle(s, h, false, 12 + hold);
    ck_assert(hot_hit(s, h, 13 + hold));
    /* Queued and forgotten by the verifier: counts again once the queue time is over. */
    uint32_t q = 13 + hold + 1000 * HOT_QUEUE_WINDOWS;
    ck_assert(!hot_hit(s, h, q - 2));
    ck_assert(hot_hit(s, h, q));
    hot_free(s);
}
END_TEST

/*
 * The door keeps an ID's first HOT_DOOR_PASS "maybe" answers from the
 * buckets, and hands them on with the next: never late, whether the door
 * still knew the ID or had forgotten it.
 */
START_TEST(test_door_counts_every_hit)
{
    struct hot *s = hot_new(300, 8, 1000);
    /* Seen once, back 900 ms later: the 8th within the window is the candidate. */
    uint64_t a = h_of(11);
    ck_assert(!hot_hit(s, a, 0));
    for (uint32_t i = 0; i < 6; i++)
        ck_assert_msg(!hot_hit(s, a, 900 + i), "hit %u", i + 2);
    ck_assert(hot_hit(s, a, 906));
    /*
     * Seen twice, then silent (and no other hit went on, so the door did
     * not turn: hot.h): those two may count, never more than the door's
     * pass; a candidate by the 8th hit after the silence, not before the
     * 6th.
     */
    uint64_t b = h_of(12);
    ck_assert(!hot_hit(s, b, 5000));
    ck_assert(!hot_hit(s, b, 5001));
    unsigned k = 1;
    while (k <= 8 && !hot_hit(s, b, 9000 + k))
        k++;
    ck_assert_msg(k >= 6 && k <= 8, "a candidate at hit %u after the silence", k);
    /*
     * Asked 8 - HOT_DOOR_PASS - 1 times a window (the door's hits are the
     * most it carries early), for 20 windows: never.
     */
    uint64_t c = h_of(13);
    for (uint32_t t = 20000; t < 40000; t += 1000 / (8 - HOT_DOOR_PASS - 1) + 1)
        ck_assert_msg(!hot_hit(s, c, t), "at %u", t);
    /* 100,000 IDs asked once each, and then each again once: none is a candidate. */
    for (int round = 0; round < 2; round++)
        for (unsigned i = 0; i < 100000; i++)
            ck_assert(!hot_hit(s, h_of(1000 + i), 50000 + (uint32_t)round));
    /* With min_hits 1 there is no door: the first "maybe" is the candidate. */
    struct hot *one = hot_new(300, 1, 1000);
    ck_assert(hot_hit(one, a, 0));
    hot_free(one);
    hot_free(s);
}
END_TEST

/*
 * IDs asked up to HOT_DOOR_PASS times stay at the door: a crowd of them
 * (each asked three times) does not push a hot ID out of a sketch of one
 * bucket, whose 8th hit makes it a candidate.  With a door of one hit
 * they took the bucket's entries, each inheriting the weight of the one
 * it replaced (Space-Saving), until the hot ID's entry went too and its
 * hits with it.
 */
START_TEST(test_door_keeps_the_sketch)
{
    struct hot *s = hot_new(3, 8, 10000);
    ck_assert_uint_eq(hot_capacity(s), 3);
    uint64_t hot = h_of(77);
    for (uint32_t i = 0; i < 7; i++)
        ck_assert(!hot_hit(s, hot, i));
    for (int round = 0; round < 3; round++)
        for (unsigned i = 0; i < 200; i++)
            ck_assert(!hot_hit(s, h_of(5000 + i), 100 + (uint32_t)round));
    ck_assert(hot_hit(s, hot, 200));
    hot_free(s);
}
END_TEST

/*
 * The door as a lookup takes it inline (hot_door_hit on hot_doorkeeper):
 * the door hot_door counts in; HOT_DOOR_PASS hits kept, then handed on
 * with them, and no write once at the pass; a generation's hits count as
 * the one before's after a turn (the door turns when a hit goes on with
 * the clock past the window) and are forgotten after two; no door with
 * min_hits 1.
 */
START_TEST(test_the_inline_door)
{
    struct hot *one = hot_new(300, 1, 1000);
    ck_assert_ptr_null(hot_doorkeeper(one));
    hot_free(one);
    struct hot *s = hot_new(300, 8, 1000);
    const struct hot_door *d = hot_doorkeeper(s);
    ck_assert_ptr_nonnull(d);
    ck_assert_uint_eq(d->pass, HOT_DOOR_PASS);
    uint64_t a = h_of(21), b = h_of(22), c = h_of(23);
    for (unsigned i = 0; i < HOT_DOOR_PASS; i++)
        ck_assert_int_eq(hot_door_hit(d, a), -1);
    ck_assert_int_eq(hot_door_hit(d, a), (int)HOT_DOOR_PASS);
    ck_assert_int_eq(hot_door(s, a), (int)HOT_DOOR_PASS);      /* one door */
    ck_assert_int_eq(hot_door_hit(d, b), -1);
    ck_assert_int_eq(hot_door_hit(d, b), -1);
    ck_assert(!hot_count(s, a, (int)HOT_DOOR_PASS, 1500));        /* a turn */
    /* b's two hits are the generation before's now: one more kept, then on with three. */
    ck_assert_int_eq(hot_door_hit(d, b), -1);
    ck_assert_int_eq(hot_door_hit(d, b), (int)HOT_DOOR_PASS);
    ck_assert_int_eq(hot_door_hit(d, c), -1);
    ck_assert_int_eq(hot_door_hit(d, c), -1);
    ck_assert(!hot_count(s, a, (int)HOT_DOOR_PASS, 2600));        /* a turn */
    ck_assert(!hot_count(s, a, (int)HOT_DOOR_PASS, 3700));        /* and another */
    /* c's two are older than the generation before: forgotten, three kept again. */
    for (unsigned i = 0; i < HOT_DOOR_PASS; i++)
        ck_assert_int_eq(hot_door_hit(d, c), -1);
    ck_assert_int_eq(hot_door_hit(d, c), (int)HOT_DOOR_PASS);
    hot_free(s);
}
END_TEST

START_TEST(test_reports)
{
    struct hot *s = hot_new(300, 8, 1000);
    uint64_t h = h_of(9);
    ck_assert(hot_nominate(s, h, 0));               /* at once, without a hit */
    ck_assert(!hot_nominate(s, h, 1));              /* already queued */
    for (int i = 0; i < 20; i++)
        ck_assert(!hot_hit(s, h, 2 + (uint32_t)i));
    hot_settle(s, h, true, 30);
    ck_assert(!hot_nominate(s, h, 40));
    hot_free(s);
}
END_TEST

START_TEST(test_hot_under_a_flood)
{
    /* 3,072 entries against 200,000 distinct IDs asked once each, and one asked every 50th. */
    struct hot *s = hot_new(3000, 8, 10000);
    uint64_t hot = h_of(UINT32_MAX);
    int found = 0, noise = 0;
    uint32_t now = 0;
    for (unsigned i = 0; i < 200000; i++, now += (i % 20 == 0)) {
        noise += hot_hit(s, h_of(i), now);
        if (i % 50 == 0 && hot_hit(s, hot, now))
            found++;
    }
    ck_assert_int_eq(noise, 0);             /* asked once: never a candidate */
    ck_assert_int_eq(found, 1);
    /* An ID asked 7 times among the flood never is either: 7 < 8 real hits. */
    uint64_t seven = h_of(UINT32_MAX - 1);
    int c = 0;
    for (unsigned i = 0; i < 70000; i++, now += (i % 20 == 0)) {
        hot_hit(s, h_of(300000 + i), now);
        if (i % 10000 == 0)
            c += hot_hit(s, seven, now);
    }
    ck_assert_int_eq(c, 0);
    hot_free(s);
}
END_TEST

#define THREADS 4
#define IDS 10
#define HITS 5000

struct hammer {
    struct hot *s;
    _Atomic int cand[IDS];
};

static void *hammer(void *arg)
{
    struct hammer *hm = arg;
    for (int k = 0; k < HITS; k++)
        for (unsigned i = 0; i < IDS; i++)
            if (hot_hit(hm->s, h_of(i), (uint32_t)k / 100))
                atomic_fetch_add(&hm->cand[i], 1);
    return NULL;
}

START_TEST(test_threads_each_once)
{
    struct hammer hm = { .s = hot_new(3000, 8, 1000000) };
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, hammer, &hm), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    for (unsigned i = 0; i < IDS; i++)
        ck_assert_msg(atomic_load(&hm.cand[i]) == 1, "id %u: %d candidacies", i,
                      atomic_load(&hm.cand[i]));
    hot_free(hm.s);
}
END_TEST

CHECK_SUITE("hot",
    CHECK_CASE("core", .timeout = 60),
    CHECK_TEST(test_min_hits_within_a_window),
    CHECK_TEST(test_settle_and_give_back),
    CHECK_TEST(test_door_counts_every_hit),
    CHECK_TEST(test_door_keeps_the_sketch),
    CHECK_TEST(test_reports),
    CHECK_TEST(test_hot_under_a_flood),
    CHECK_TEST(test_threads_each_once),
    CHECK_TEST(test_the_inline_door),
)
