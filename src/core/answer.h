/*
 * The rule that decides whether a filter's "absent" may be told as absent,
 * in one place for the daemon (table.c, and the degraded time table_follow.c
 * counts) and for the readers of its published filters (reader.c,
 * libbloomguard, the nginx module), so that a reader out of process answers
 * exactly as the daemon would.  Pure, and total: a horizon read from a
 * shared file may be anything, so no value of any argument overflows or is
 * undefined behaviour.
 */
#ifndef BLOOMGUARD_ANSWER_H
#define BLOOMGUARD_ANSWER_H

#include <stdbool.h>
#include <stdint.h>

/*
 * A horizon more than this past now is another clock's (another boot,
 * another time namespace, a forged file): it proves nothing.
 */
#define ANSWER_FUTURE_SLACK_NS INT64_C(1000000000)

/*
 * Whether an "absent" of a filter whose horizon is h (ns of CLOCK_BOOTTIME,
 * table.h) must be answered "maybe" (degraded) at now.  It must when
 *   - unsure: the filter cannot vouch for any absence, whatever its horizon
 *     (it is saturated, filter.h; or acknowledged POSTs may be missing from
 *     it, table_hold_absent);
 *   - or max_stale_ns is not 0 (0: never by age), and
 *       - max_stale_ns < 0: no bound can be read from it;
 *       - h <= 0: no horizon yet (a restored snapshot before its catch-up);
 *       - h > now + ANSWER_FUTURE_SLACK_NS: another clock's horizon;
 *       - now - h > max_stale_ns (computed without overflow).
 */
bool answer_degraded(int64_t now, int64_t h, int64_t max_stale_ns, bool unsure);

/*
 * How many nanoseconds of [from, to] answer_degraded(t, h, max_stale_ns,
 * false) holds for (h fixed): the degraded time to count for a stretch
 * under one horizon.  0 when to <= from; saturates at INT64_MAX.
 */
int64_t answer_degraded_ns(int64_t from, int64_t to, int64_t h, int64_t max_stale_ns);

/* now - h, saturated to the int64 range: a horizon's age for figures. */
int64_t answer_age(int64_t now, int64_t h);

#endif
