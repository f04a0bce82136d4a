/*
 * The rule that decides whether a filter's "absent" may be told as absent,
 * in one place for the daemon (table.c) and for the readers of its
 * published filters (reader.c, libbloomguard, the nginx module), so that a
 * reader out of process answers exactly as the daemon would.  Pure.
 */
#ifndef BLOOMGUARD_ANSWER_H
#define BLOOMGUARD_ANSWER_H

#include <stdbool.h>
#include <stdint.h>

/*
 * Whether an "absent" of a filter whose horizon is h (ns of CLOCK_BOOTTIME,
 * table.h; 0 = none yet) must be answered "maybe" (degraded) at now: when
 * max_stale_ns is not 0 and now - h exceeds it, or when the filter is
 * saturated (it can no longer keep its rate).  max_stale_ns 0 = never by
 * age.
 */
bool answer_degraded(int64_t now, int64_t h, int64_t max_stale_ns, bool saturated);

/* Nanoseconds of CLOCK_BOOTTIME: the horizon's clock (table_now), for readers too. */
int64_t answer_now(void);

#endif
