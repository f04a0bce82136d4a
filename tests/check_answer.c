/*
 * Unit tests of the staleness rule (src/core/answer.c), the one the daemon's
 * table and every reader of a published filter apply: the plain cases, no
 * horizon, a future horizon, hostile values at the int64 extremes (a
 * horizon read from a shared file may be anything: scripts/test --sanitize
 * runs this under UBSan, which fails on any overflow), and the degraded
 * time counted for a stretch agreeing with the rule.
 */
#include <check.h>
#include <stdint.h>

#include "answer.h"
#include "check_main.h"

#define S INT64_C(1000000000)
#define SLACK ANSWER_FUTURE_SLACK_NS

struct rule_case {
    int64_t now, h, max;
    bool unsure, want;
};

static const struct rule_case cases[] = {
    /* Fresh, stale, and the bound itself (more than max_staleness is stale). */
    { 100 * S, 99 * S, 2 * S, false, false },
    { 100 * S, 97 * S, 2 * S, false, true },
    { 100 * S, 98 * S, 2 * S, false, false },
    { 100 * S, 98 * S - 1, 2 * S, false, true },
    /* Unsure (saturated, POSTs that may be lost): degraded whatever the horizon. */
    { 100 * S, 100 * S, 2 * S, true, true },
    { 100 * S, 100 * S, 0, true, true },
    /* max_staleness 0: never by age, not even without a horizon or with a hostile one. */
    { 100 * S, 0, 0, false, false },
    { 100 * S, INT64_MIN, 0, false, false },
    { 100 * S, INT64_MAX, 0, false, false },
    /* No horizon yet, a second after boot (or in a time namespace): degraded. */
    { 1 * S, 0, 2 * S, false, true },
    { 0, 0, 2 * S, false, true },
    { 1 * S, -1, 3600 * S, false, true },
    /* A future horizon: within the slack it is ours, past it another clock's. */
    { 100 * S, 100 * S + SLACK, 2 * S, false, false },
    { 100 * S, 100 * S + SLACK + 1, 2 * S, false, true },
    /* Hostile horizons (int64 and uint64 extremes as they read in an int64). */
    { 100 * S, INT64_MIN, 2 * S, false, true },
    { 100 * S, INT64_MIN + 1, 2 * S, false, true },
    { 100 * S, INT64_MAX, 2 * S, false, true },
    { 100 * S, (int64_t)UINT64_MAX, 2 * S, false, true },      /* -1 */
    { 100 * S, (int64_t)(UINT64_MAX / 2 + 1), 2 * S, false, true },
    { 100 * S, 1, INT64_MAX, false, false },
    /* Hostile bounds: nothing can be read from a negative one. */
    { 100 * S, 99 * S, -1, false, true },
    { 100 * S, 99 * S, INT64_MIN, false, true },
    { 100 * S, 99 * S, INT64_MAX, false, false },
    /* Clocks at the extremes (now as another clock would have it). */
    { INT64_MAX, 1, INT64_MAX, false, false },
    { INT64_MAX, 1, INT64_MAX - 2, false, true },
    { INT64_MAX, INT64_MAX, 1, false, false },
    { INT64_MIN, 1, 2 * S, false, true },
    { INT64_MIN, INT64_MIN, 2 * S, false, true },
    { INT64_MIN, INT64_MAX, INT64_MAX, false, true },
    { INT64_MAX - SLACK + 1, INT64_MAX, 2 * S, false, false },
};

START_TEST(test_rule)
{
    const struct rule_case *c = &cases[_i];
    ck_assert_msg(answer_degraded(c->now, c->h, c->max, c->unsure) == c->want,
                  "case %d: now %lld, h %lld, max %lld, unsure %d: want %s", _i,
                  (long long)c->now, (long long)c->h, (long long)c->max, c->unsure,
                  c->want ? "degraded" : "absent");
}
END_TEST

START_TEST(test_age_saturates)
{
    ck_assert_int_eq(answer_age(100 * S, 98 * S), 2 * S);
    ck_assert_int_eq(answer_age(98 * S, 100 * S), -2 * S);
    ck_assert_int_eq(answer_age(INT64_MAX, INT64_MIN), INT64_MAX);
    ck_assert_int_eq(answer_age(100 * S, INT64_MIN), INT64_MAX);
    ck_assert_int_eq(answer_age(INT64_MIN, INT64_MAX), INT64_MIN);
    ck_assert_int_eq(answer_age(-2, INT64_MAX), INT64_MIN);
    ck_assert_int_eq(answer_age(INT64_MIN, 0), INT64_MIN);
    ck_assert_int_eq(answer_age(0, INT64_MIN + 1), INT64_MAX);
}
END_TEST

START_TEST(test_degraded_time)
{
    /* Fresh throughout, stale from h + max on, future before h - slack. */
    ck_assert_int_eq(answer_degraded_ns(100 * S, 101 * S, 100 * S, 2 * S), 0);
    ck_assert_int_eq(answer_degraded_ns(100 * S, 110 * S, 100 * S, 2 * S), 8 * S);
    ck_assert_int_eq(answer_degraded_ns(0, 200 * S, 100 * S, 2 * S), 99 * S + 98 * S);
    ck_assert_int_eq(answer_degraded_ns(0, 200 * S, 100 * S, 0), 0);
    /* No horizon, a bad bound: all of it. */
    ck_assert_int_eq(answer_degraded_ns(5 * S, 7 * S, 0, 2 * S), 2 * S);
    ck_assert_int_eq(answer_degraded_ns(5 * S, 7 * S, 6 * S, -1), 2 * S);
    /* An empty or reversed stretch counts nothing. */
    ck_assert_int_eq(answer_degraded_ns(7 * S, 7 * S, 0, 2 * S), 0);
    ck_assert_int_eq(answer_degraded_ns(7 * S, 5 * S, 0, 2 * S), 0);
    /* Stretches add up, and each agrees with the rule at its points. */
    int64_t h = 50 * S, max = 3 * S, cuts[] = { 0, 10 * S, 49 * S - 1, 49 * S, 52 * S,
                                                53 * S, 53 * S + 1, 90 * S };
    int64_t sum = 0;
    for (size_t i = 0; i + 1 < sizeof cuts / sizeof cuts[0]; i++) {
        int64_t d = answer_degraded_ns(cuts[i], cuts[i + 1], h, max);
        sum += d;
        /* A stretch whose ends are both degraded (or both fresh) is all (or none) of it here. */
        bool deg = answer_degraded(cuts[i + 1], h, max, false)
                   && answer_degraded(cuts[i], h, max, false);
        bool fresh = !answer_degraded(cuts[i + 1], h, max, false)
                     && !answer_degraded(cuts[i], h, max, false);
        if (deg)
            ck_assert_int_eq(d, cuts[i + 1] - cuts[i]);
        if (fresh)
            ck_assert_int_eq(d, 0);
    }
    ck_assert_int_eq(sum, answer_degraded_ns(0, 90 * S, h, max));
    ck_assert_int_eq(sum, (49 * S - 0) + (90 * S - 53 * S));
    /* Hostile values saturate instead of wrapping. */
    ck_assert_int_eq(answer_degraded_ns(INT64_MIN, INT64_MAX, INT64_MIN, 2 * S), INT64_MAX);
    ck_assert_int_eq(answer_degraded_ns(INT64_MIN, INT64_MAX, 0, 2 * S), INT64_MAX);
    /* From the far past up to h - slack, then never stale again (h + max saturates). */
    ck_assert_int_eq(answer_degraded_ns(INT64_MIN, INT64_MAX, 1, INT64_MAX), INT64_MAX - SLACK + 2);
    ck_assert_int_eq(answer_degraded_ns(INT64_MIN, INT64_MAX, 1, 1), INT64_MAX);
    ck_assert_int_eq(answer_degraded_ns(0, INT64_MAX, INT64_MAX, INT64_MAX), INT64_MAX - SLACK);
    ck_assert_int_eq(answer_degraded_ns(0, 10 * S, INT64_MAX, INT64_MAX), 10 * S);
    ck_assert_int_eq(answer_degraded_ns(INT64_MAX - 1, INT64_MAX, 1, 1), 1);
}
END_TEST

CHECK_SUITE("answer",
    CHECK_CASE("rule"),
    CHECK_EACH(test_rule, cases),
    CHECK_TEST(test_age_saturates),
    CHECK_TEST(test_degraded_time),
)
