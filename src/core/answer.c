/*
 * The staleness rule (answer.h): one function, linked by the daemon and by
 * libbloomguard, and the arithmetic it needs done without overflow.
 */
#include "answer.h"

#include <time.h>

/* a - b, saturated: a horizon from a shared file may be INT64_MIN. */
static int64_t sat_sub(int64_t a, int64_t b)
{
    int64_t r;
    if (!__builtin_sub_overflow(a, b, &r))
        return r;
    return b < 0 ? INT64_MAX : INT64_MIN;
}

static int64_t sat_add(int64_t a, int64_t b)
{
    int64_t r;
    if (!__builtin_add_overflow(a, b, &r))
        return r;
    return b > 0 ? INT64_MAX : INT64_MIN;
}

int64_t answer_age(int64_t now, int64_t h)
{
    return sat_sub(now, h);
}

/* Whether no horizon can back an absent answer at any time: the age rule aside. */
static bool never_backed(int64_t h, int64_t max_stale_ns)
{
    return max_stale_ns < 0 || h <= 0;
}

bool answer_degraded(int64_t now, int64_t h, int64_t max_stale_ns, bool unsure)
{
    if (unsure)
        return true;
    if (max_stale_ns == 0)
        return false;
    if (never_backed(h, max_stale_ns))
        return true;
    /* Both tests compare against now: an age that overflows is simply huge. */
    return h > sat_add(now, ANSWER_FUTURE_SLACK_NS) || answer_age(now, h) > max_stale_ns;
}

/* The length of [a, b) (0 if empty), saturated. */
static int64_t span(int64_t a, int64_t b)
{
    return b > a ? sat_sub(b, a) : 0;
}

int64_t answer_degraded_ns(int64_t from, int64_t to, int64_t h, int64_t max_stale_ns)
{
    if (to <= from || max_stale_ns == 0)
        return 0;
    if (never_backed(h, max_stale_ns))
        return span(from, to);
    /*
     * answer_degraded holds for t < h - slack (a future horizon) and for
     * t > h + max_stale_ns (too old); h > 0 here, so h - slack cannot
     * overflow, and max_stale_ns > 0 makes the two stretches disjoint.
     */
    int64_t fresh_from = h - ANSWER_FUTURE_SLACK_NS, stale_after = sat_add(h, max_stale_ns);
    int64_t early = span(from, fresh_from < to ? fresh_from : to);
    int64_t late = span(stale_after > from ? stale_after : from, to);
    return sat_add(early, late);
}

