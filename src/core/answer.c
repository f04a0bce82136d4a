/*
 * The staleness rule (answer.h): one function, linked by the daemon and by
 * libbloomguard.
 */
#include "answer.h"

#include <time.h>

bool answer_degraded(int64_t now, int64_t h, int64_t max_stale_ns, bool saturated)
{
    return (max_stale_ns != 0 && now - h > max_stale_ns) || saturated;
}

int64_t answer_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (int64_t)ts.tv_sec * INT64_C(1000000000) + ts.tv_nsec;
}
