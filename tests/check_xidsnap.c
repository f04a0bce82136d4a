/*
 * Unit tests of src/pg/xidsnap.c: reading pg_current_snapshot()'s text, which
 * transactions it shows in progress (xip, xmax, 32-bit wraparound), and the
 * set the logical stream keeps until a snapshot shows its members finished.
 */
#include <stdint.h>
#include <stdio.h>

#include "check_main.h"
#include "xidsnap.h"

START_TEST(sees_finished_not_in_progress)
{
    const uint32_t done[] = { 99, 100, 104 };
    ck_assert(xidsnap_sees_all("100:105:101,103", done, 3, NULL));
    ck_assert(xidsnap_sees_all("100:105:", done, 3, NULL));
    ck_assert(xidsnap_sees_all("100:105:", NULL, 0, NULL));
    uint32_t first = 7;
    const uint32_t busy[] = { 100, 103 };
    ck_assert(!xidsnap_sees_all("100:105:101,103", busy, 2, &first));
    ck_assert_uint_eq(first, 103);
    const uint32_t later[] = { 105 };               /* at or past xmax: not yet */
    ck_assert(!xidsnap_sees_all("100:105:", later, 1, &first));
    ck_assert_uint_eq(first, 105);
}
END_TEST

/* xid8s past 2^32: the stream's 32-bit xids compare modulo 2^32. */
START_TEST(wraps_at_32_bits)
{
    /* epoch 1: xmin 2^32 + 10, xmax 2^32 + 20, 2^32 + 15 in progress */
    const char *snap = "4294967306:4294967316:4294967311";
    const uint32_t seen[] = { 10, 19, 4294967290u };   /* the last: just before the wrap */
    ck_assert(xidsnap_sees_all(snap, seen, 3, NULL));
    const uint32_t busy[] = { 15 };
    ck_assert(!xidsnap_sees_all(snap, busy, 1, NULL));
    const uint32_t ahead[] = { 20 };
    ck_assert(!xidsnap_sees_all(snap, ahead, 1, NULL));
}
END_TEST

START_TEST(refuses_what_is_not_a_snapshot)
{
    static const char *const bad[] = {
        "", "100", "100:105", "100:105:x", "105:100:", "100:105:99", "100:105:105",
        "100:105:101,", "100:105:,101", " 100:105:", "100:105: 101", "-1:105:",
        "100:99999999999999999999:",
    };
    const uint32_t one[] = { 1 };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint32_t first = 9;
        ck_assert_msg(!xidsnap_sees_all(bad[i], one, 1, &first), "took \"%s\"", bad[i]);
        ck_assert_uint_eq(first, 0);
        struct xidset s;
        xidset_init(&s);
        ck_assert(xidset_add(&s, 101));
        ck_assert_msg(!xidset_prune(&s, bad[i]), "pruned by \"%s\"", bad[i]);
        ck_assert_uint_eq(s.n, 1);
        xidset_free(&s);
    }
}
END_TEST

START_TEST(prune_keeps_only_in_progress)
{
    struct xidset s;
    xidset_init(&s);
    for (uint32_t x = 95; x < 110; x++)
        ck_assert(xidset_add(&s, x));
    ck_assert(xidset_prune(&s, "100:105:101,103"));
    /* 101 and 103 in progress, 105.. not yet started as far as the snapshot goes */
    uint32_t want[] = { 101, 103, 105, 106, 107, 108, 109 };
    ck_assert_uint_eq(s.n, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < s.n; i++)
        ck_assert_uint_eq(s.v[i], want[i]);
    ck_assert(xidset_prune(&s, "200:200:"));
    ck_assert_uint_eq(s.n, 0);
    ck_assert(!s.overflowed);
    xidset_free(&s);
}
END_TEST

/* Past XIDSNAP_MAX members the set says so, until a snapshot's xmin is past the ones it lost. */
START_TEST(overflow_until_xmin_passes)
{
    struct xidset s;
    xidset_init(&s);
    size_t kept = 0;                /* one assert, not a million (each writes to Check's pipe) */
    for (uint32_t x = 1000; x < 1000 + XIDSNAP_MAX; x++)
        kept += xidset_add(&s, x);
    ck_assert_uint_eq(kept, XIDSNAP_MAX);
    ck_assert(!s.overflowed);
    ck_assert(!xidset_add(&s, 1000 + XIDSNAP_MAX));
    ck_assert(!xidset_add(&s, 1001 + XIDSNAP_MAX));
    ck_assert(s.overflowed);
    char snap[64];
    snprintf(snap, sizeof snap, "%u:%u:", 1001 + XIDSNAP_MAX, 1002 + XIDSNAP_MAX);
    ck_assert(xidset_prune(&s, snap));                  /* xmin at the last lost: not past it */
    ck_assert(s.overflowed);
    ck_assert_uint_eq(s.n, 0);
    snprintf(snap, sizeof snap, "%u:%u:", 1002 + XIDSNAP_MAX, 1002 + XIDSNAP_MAX);
    ck_assert(xidset_prune(&s, snap));
    ck_assert(!s.overflowed);
    ck_assert(xidset_add(&s, 1003 + XIDSNAP_MAX));
    xidset_free(&s);
}
END_TEST

CHECK_SUITE("xidsnap",
    CHECK_CASE("snapshots"),
    CHECK_TEST(sees_finished_not_in_progress),
    CHECK_TEST(wraps_at_32_bits),
    CHECK_TEST(refuses_what_is_not_a_snapshot),
    CHECK_CASE("the set"),
    CHECK_TEST(prune_keeps_only_in_progress),
    CHECK_TEST(overflow_until_xmin_passes),
)
