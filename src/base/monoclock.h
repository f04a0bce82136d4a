/*
 * The daemon's clocks, in one place: what "now" is for each purpose, and
 * how a wait is set up.  Waits and durations are measured on
 * CLOCK_MONOTONIC, so that a wall-clock step (NTP, an operator's date)
 * neither stretches nor cuts a nap, a retry or a sweep; the horizon and
 * the POST journal's expiries on CLOCK_BOOTTIME, which also counts while
 * the machine sleeps, so that a suspend never makes an old horizon look
 * fresh.  The readers are inline: libbloomguard and the nginx module use
 * them without the rest of this module.
 */
#ifndef BLOOMGUARD_MONOCLOCK_H
#define BLOOMGUARD_MONOCLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#define NS_PER_S INT64_C(1000000000)

/*
 * Nanoseconds of CLOCK_BOOTTIME: the horizon's clock (table.h) and the
 * published filters' (pubfmt.h).  Thread-safe, as are all below.
 */
static inline int64_t monoclock_boot_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

/*
 * Nanoseconds of CLOCK_MONOTONIC_RAW: the oscillator's own rate, which
 * NTP never slews (it slews CLOCK_BOOTTIME and CLOCK_MONOTONIC: chrony up
 * to 83,333 ppm while it corrects an offset) and which stops while the
 * machine is suspended.  Only for comparing two hosts' rates (the fleet's
 * anchors, upstream.h).
 */
static inline int64_t monoclock_raw_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

/* Whole seconds of CLOCK_BOOTTIME: the POST journal's expiries (pending.h). */
static inline uint64_t monoclock_boot_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (uint64_t)ts.tv_sec;
}

/* Nanoseconds of CLOCK_MONOTONIC: deadlines and durations. */
static inline int64_t monoclock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

/* The same in seconds, for durations told in logs and /stats. */
static inline double monoclock_seconds(void)
{
    return (double)monoclock_ns() / 1e9;
}

/*
 * CLOCK_MONOTONIC_COARSE nanoseconds: a few ms of resolution at next to no
 * cost, for deadlines checked on every request (the header sweeper, a
 * reader's recheck of its file).
 */
static inline int64_t monoclock_coarse_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

/*
 * Initialises *cv (default attributes but the clock) so that
 * pthread_cond_timedwait on it reads its deadline on CLOCK_MONOTONIC, such
 * as one from monoclock_after_ms.  Destroy it with pthread_cond_destroy.
 * Thread-safe for distinct cv.
 */
void monoclock_cond_init(pthread_cond_t *cv);

/*
 * The CLOCK_MONOTONIC time ms milliseconds from now, normalised
 * (0 <= tv_nsec < 1e9): an absolute deadline for a condition variable made
 * by monoclock_cond_init.  Thread-safe.
 */
struct timespec monoclock_after_ms(uint64_t ms);

/* The same, ns nanoseconds from now.  Thread-safe. */
struct timespec monoclock_after_ns(uint64_t ns);

#endif
