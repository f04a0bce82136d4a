/*
 * Grace periods from a striped, epoch-tagged reader count: a reader adds
 * itself to the stripe of its thread under the current epoch's parity; a
 * writer flips the epoch and waits for the old parity to drain.  Readers
 * take no lock and never wait for a writer.
 */
#include "rcu.h"

#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

static unsigned my_stripe(void)
{
    /* Thread identity mixed down to a stripe; stable for a thread's lifetime. */
    uint64_t x = (uint64_t)(uintptr_t)pthread_self();
    x ^= x >> 29;
    x *= UINT64_C(0xbf58476d1ce4e5b9);
    x ^= x >> 32;
    return (unsigned)(x % RCU_STRIPES);
}

bool rcu_init(struct rcu *r)
{
    atomic_init(&r->epoch, 0);
    for (unsigned i = 0; i < RCU_STRIPES; i++) {
        atomic_init(&r->stripes[i].readers[0], 0);
        atomic_init(&r->stripes[i].readers[1], 0);
    }
    return pthread_mutex_init(&r->writer, NULL) == 0;
}

void rcu_destroy(struct rcu *r)
{
    pthread_mutex_destroy(&r->writer);
}

struct rcu_read rcu_read_enter(struct rcu *r)
{
    struct rcu_stripe *s = &r->stripes[my_stripe()];
    for (;;) {
        unsigned long e = atomic_load(&r->epoch);
        unsigned parity = (unsigned)(e & 1);
        atomic_fetch_add(&s->readers[parity], 1);
        /*
         * If the epoch moved between the load and the add, a writer may have
         * finished waiting for this parity already: step back and retry.
         * Otherwise the writer's flip is ordered after the add and it will
         * wait for this reader (all seq_cst).
         */
        if (atomic_load(&r->epoch) == e)
            return (struct rcu_read){ s, parity };
        atomic_fetch_sub(&s->readers[parity], 1);
    }
}

void rcu_read_exit(struct rcu_read t)
{
    atomic_fetch_sub_explicit(&t.s->readers[t.parity], 1, memory_order_release);
}

void rcu_synchronize(struct rcu *r)
{
    pthread_mutex_lock(&r->writer);
    unsigned long e = atomic_fetch_add(&r->epoch, 1);
    unsigned parity = (unsigned)(e & 1);
    for (unsigned spins = 0;; spins++) {
        long busy = 0;
        for (unsigned i = 0; i < RCU_STRIPES; i++)
            busy += atomic_load(&r->stripes[i].readers[parity]);
        if (busy == 0)
            break;
        if (spins < 100) {
            sched_yield();
        } else {
            struct timespec ts = { 0, 100000 };   /* 0.1 ms */
            nanosleep(&ts, NULL);
        }
    }
    pthread_mutex_unlock(&r->writer);
}
