/*
 * Read-copy-update grace periods: readers announce themselves with two
 * atomic adds and never wait; a writer that has unpublished a pointer waits
 * in rcu_synchronize until no reader can still hold it, then frees it.  Used
 * for the served filters (guard.c) and the configuration in force (live.c).
 */
#ifndef BLOOMGUARD_RCU_H
#define BLOOMGUARD_RCU_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

/* Readers are spread over stripes so threads rarely share a cache line. */
#define RCU_STRIPES 32

struct rcu_stripe {
    _Atomic long readers[2];    /* in-flight readers, by epoch parity */
} __attribute__((aligned(64)));

/*
 * One grace-period domain.  Embed it (it is 64-byte aligned: allocate the
 * containing struct with aligned_alloc or on the stack/static); the fields
 * are private to rcu.c.
 */
struct rcu {
    _Atomic unsigned long epoch;
    pthread_mutex_t writer;     /* one synchronize at a time */
    struct rcu_stripe stripes[RCU_STRIPES];
};

/* What rcu_read_exit needs; a plain value, keep it on the reader's stack. */
struct rcu_read {
    struct rcu_stripe *s;
    unsigned parity;
};

/* False if the mutex cannot be set up.  rcu_destroy: no reader or writer may remain. */
bool rcu_init(struct rcu *r);
void rcu_destroy(struct rcu *r);

/*
 * A read section: pointers loaded (with acquire) after rcu_read_enter stay
 * valid until the matching rcu_read_exit.  Lock-free, any thread, may nest;
 * keep sections short: a writer's rcu_synchronize waits for them.
 */
struct rcu_read rcu_read_enter(struct rcu *r);
void rcu_read_exit(struct rcu_read t);

/*
 * Wait until every read section that began before this call has ended.
 * Must not be called inside a read section of the same domain (it would
 * wait for itself).  Thread-safe; callers are serialised.
 */
void rcu_synchronize(struct rcu *r);

#endif
