/*
 * The daemon's waits are measured on CLOCK_MONOTONIC, so that a wall-clock
 * step (NTP, an operator's date) neither stretches nor cuts a nap, a retry
 * or a sweep.  This is the one place that says how such a wait is set up.
 */
#ifndef BLOOMGUARD_MONOCLOCK_H
#define BLOOMGUARD_MONOCLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

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

/* The same, ns nanoseconds from now; and now itself in nanoseconds.  Thread-safe. */
struct timespec monoclock_after_ns(uint64_t ns);
uint64_t monoclock_ns(void);

#endif
