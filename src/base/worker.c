/*
 * The napping background thread of worker.h: one mutex and condition
 * variable per thread, the condition on CLOCK_MONOTONIC (monoclock.h) so
 * that a wall-clock step neither stretches nor cuts a nap.
 */
#include "worker.h"

#include "monoclock.h"

void worker_init(struct worker *w)
{
    atomic_init(&w->stop, false);
    w->started = false;
    w->woken = false;
    pthread_mutex_init(&w->mu, NULL);
    monoclock_cond_init(&w->cv);
}

void worker_destroy(struct worker *w)
{
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
}

bool worker_start(struct worker *w, void *(*fn)(void *), void *arg)
{
    if (pthread_create(&w->thread, NULL, fn, arg) != 0)
        return false;
    w->started = true;
    return true;
}

void worker_wake(struct worker *w)
{
    pthread_mutex_lock(&w->mu);
    w->woken = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

void worker_nap(struct worker *w, unsigned ms)
{
    struct timespec ts = monoclock_after_ms(ms);
    pthread_mutex_lock(&w->mu);
    if (!atomic_load(&w->stop) && !w->woken)
        pthread_cond_timedwait(&w->cv, &w->mu, &ts);
    w->woken = false;
    pthread_mutex_unlock(&w->mu);
}

void worker_stop(struct worker *w)
{
    /* Under mu: a nap that has just checked the flag cannot miss the wake. */
    pthread_mutex_lock(&w->mu);
    atomic_store(&w->stop, true);
    w->woken = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    if (w->started)
        pthread_join(w->thread, NULL);
    w->started = false;
}
