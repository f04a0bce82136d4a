/*
 * Unit tests for src/base/worker.c: a nap ends at its time, at a wake (one
 * given before the nap included) or at stop, and stop waits for the thread.
 * The thread starts through worker_start (pthread_create), so scripts/test
 * --tsan runs these too.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "check_main.h"
#include "monoclock.h"
#include "worker.h"

static int64_t ms_since(int64_t t0)
{
    return (monoclock_ns() - t0) / 1000000;
}

struct napper {
    struct worker w;
    atomic_int naps;                /* naps finished */
    atomic_llong last_ms;           /* how long the last one took */
    atomic_bool done;               /* set 100 ms after the loop ends, as the thread returns */
};

/* Naps of 10 s until stopped, counting each and timing the last. */
static void *napper_main(void *arg)
{
    struct napper *n = arg;
    while (!worker_stopping(&n->w)) {
        int64_t t0 = monoclock_ns();
        worker_nap(&n->w, 10000);
        atomic_store(&n->last_ms, ms_since(t0));
        atomic_fetch_add(&n->naps, 1);
    }
    /* Late on purpose: worker_stop must wait for the thread, not only tell it. */
    struct timespec ts = { 0, 100000000 };
    nanosleep(&ts, NULL);
    atomic_store(&n->done, true);
    return NULL;
}

/* Up to 5 s for the napper to finish its k-th nap. */
static bool naps_reach(struct napper *n, int k)
{
    int64_t t0 = monoclock_ns();
    while (atomic_load(&n->naps) < k && ms_since(t0) < 5000) {
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
    return atomic_load(&n->naps) >= k;
}

/* Nothing wakes it: the nap lasts its time. */
START_TEST(nap_lasts_its_time)
{
    struct worker w;
    worker_init(&w);
    int64_t t0 = monoclock_ns();
    worker_nap(&w, 50);
    int64_t took = ms_since(t0);
    ck_assert_int_ge(took, 50);
    ck_assert_int_lt(took, 5000);
    worker_destroy(&w);
}
END_TEST

/* A wake given before the nap ends the next nap at once, and only that one. */
START_TEST(wake_before_nap_is_kept_once)
{
    struct worker w;
    worker_init(&w);
    worker_wake(&w);
    int64_t t0 = monoclock_ns();
    worker_nap(&w, 10000);
    ck_assert_int_lt(ms_since(t0), 5000);
    t0 = monoclock_ns();
    worker_nap(&w, 50);
    ck_assert_int_ge(ms_since(t0), 50);
    worker_destroy(&w);
}
END_TEST

/* The thread's 10 s nap ends at a wake; stop ends the next and waits for the thread. */
START_TEST(wake_and_stop_end_the_threads_nap)
{
    struct napper n;
    worker_init(&n.w);
    atomic_init(&n.naps, 0);
    atomic_init(&n.last_ms, -1);
    atomic_init(&n.done, false);
    ck_assert(worker_start(&n.w, napper_main, &n));
    struct timespec ts = { 0, 50000000 };
    nanosleep(&ts, NULL);
    worker_wake(&n.w);
    ck_assert_msg(naps_reach(&n, 1), "a wake did not end the nap");
    long long last_ms = atomic_load(&n.last_ms);
    ck_assert_int_lt(last_ms, 5000);
    int64_t t0 = monoclock_ns();
    worker_stop(&n.w);
    ck_assert_int_lt(ms_since(t0), 5000);
    /* Returned: the thread has returned, its last nap counted. */
    bool done = atomic_load(&n.done);
    ck_assert_msg(done, "worker_stop returned before the thread did");
    int naps = atomic_load(&n.naps);
    ck_assert_int_eq(naps, 2);
    ck_assert(worker_stopping(&n.w));
    worker_stop(&n.w);
    worker_destroy(&n.w);
}
END_TEST

CHECK_SUITE("worker",
    CHECK_CASE("core", .timeout = 30),
    CHECK_TEST(nap_lasts_its_time),
    CHECK_TEST(wake_before_nap_is_kept_once),
    CHECK_TEST(wake_and_stop_end_the_threads_nap),
)
