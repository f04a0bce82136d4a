/*
 * A background thread that works in rounds and naps between them: the stop
 * flag its loops check, the wake-up that cuts a nap short, and its start
 * and stop.  The scheduler and the verifier are such threads; each embeds
 * a struct worker and keeps its own state beside it.
 */
#ifndef BLOOMGUARD_WORKER_H
#define BLOOMGUARD_WORKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

struct worker {
    atomic_bool stop;               /* set once by worker_stop; loops and stoppable I/O read it */
    pthread_t thread;
    bool started;
    pthread_mutex_t mu;             /* guards woken; the owner may guard its own fields with it */
    pthread_cond_t cv;
    bool woken;                     /* under mu: a wake since the last nap */
};

/* Ready to start, not stopped (monoclock_cond_init's clock).  worker_destroy undoes it. */
void worker_init(struct worker *w);
void worker_destroy(struct worker *w);

/* Run fn(arg) on a new thread; false when it cannot be made. */
bool worker_start(struct worker *w, void *(*fn)(void *), void *arg);

/* Whether worker_stop was called.  Thread-safe. */
static inline bool worker_stopping(struct worker *w)
{
    return atomic_load(&w->stop);
}

/* Cut the thread's current or next nap short.  Thread-safe. */
void worker_wake(struct worker *w);

/* The thread itself: sleep up to ms, waking early on worker_wake or worker_stop. */
void worker_nap(struct worker *w, unsigned ms);

/* Tell the thread to stop, wake it and wait for it to return (none started: no wait). */
void worker_stop(struct worker *w);

#endif
