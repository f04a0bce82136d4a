/*
 * Unit tests for src/base/monoclock.c: the monotonic deadline every napping
 * thread computes, and the condition variable that waits on it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "check_main.h"
#include "monoclock.h"

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The deadline lies ms past a reading taken around it, carried into tv_sec. */
START_TEST(after_ms_is_normalised)
{
    static const uint64_t ms[] = { 0, 1, 999, 1000, 1999, 86400123 };
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
        int64_t before = mono_ns();
        struct timespec d = monoclock_after_ms(ms[i]);
        int64_t after = mono_ns();
        ck_assert_int_ge(d.tv_nsec, 0);
        ck_assert_int_lt(d.tv_nsec, 1000000000);
        int64_t at = (int64_t)d.tv_sec * 1000000000 + d.tv_nsec - (int64_t)ms[i] * 1000000;
        ck_assert_int_ge(at, before);
        ck_assert_int_le(at, after);
    }
}
END_TEST

/* A wait on a deadline already past returns at once: the cv reads the monotonic clock. */
START_TEST(cond_waits_on_monotonic)
{
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cv;
    monoclock_cond_init(&cv);
    struct timespec past = monoclock_after_ms(0);
    pthread_mutex_lock(&mu);
    ck_assert_int_eq(pthread_cond_timedwait(&cv, &mu, &past), ETIMEDOUT);
    pthread_mutex_unlock(&mu);
    pthread_cond_destroy(&cv);
}
END_TEST

CHECK_SUITE("monoclock",
    CHECK_CASE("core"),
    CHECK_TEST(after_ms_is_normalised),
    CHECK_TEST(cond_waits_on_monotonic),
)
