/*
 * The rebuild scheduler: one thread that brings every table's filter up to
 * date, one table at a time (so a restart never runs every COPY at once,
 * and a table that fails retries on its own backoff without holding up the
 * others).  It puts snapshots in place at start, runs the loads the tables
 * want (a catch-up from a position where the want allows it, else a COPY),
 * writes snapshots and prunes the change feed.  It knows no follow method:
 * it asks each table's follower (follow.h) for tickets and catch-ups.
 */
#ifndef BLOOMGUARD_SCHEDULER_H
#define BLOOMGUARD_SCHEDULER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "follow.h"
#include "log.h"
#include "table.h"

struct scheduler;

/*
 * Callbacks into the process (sd_notify); each may be NULL.  i is the
 * table's index; both run on the scheduler's thread.
 */
struct scheduler_hooks {
    void *arg;
    /* Rows copied so far by the running load (every LOADER_PROGRESS_ROWS). */
    void (*progress)(void *arg, unsigned i, uint64_t rows, bool first);
    /* Load id of table i finished (ok or not); first = its first successful one. */
    void (*done)(void *arg, unsigned i, uint64_t id, bool ok, bool first, uint64_t rows,
                 double seconds);
};

/*
 * Called on the scheduler's thread after the snapshots are in place and
 * before any load: where the process chooses and starts each table's
 * follower (scheduler_set_follower).  Returns -1 when it failed (err says
 * why; retried with backoff before any load), 0 when some table has no
 * follower yet (loads go on, and it is called again every
 * SCHEDULER_PREPARE_AGAIN_S seconds), 1 when every table has its follower.
 */
typedef int (*scheduler_prepare_fn)(void *arg, char *err, size_t errlen);
#define SCHEDULER_PREPARE_AGAIN_S 5

/*
 * For n tables (the array is copied; the tables, cfg, lg and token must
 * outlive it).  token: the admin token sent to a [snapshot] bootstrap_from
 * peer, NULL = none.  NULL on allocation failure.
 */
struct scheduler *scheduler_new(const struct config *cfg, struct table *const *tables, unsigned n,
                        const struct log *lg, const struct scheduler_hooks *hooks, const char *token);
void scheduler_free(struct scheduler *s);

/* Table i's follower (NULL: none, e.g. [sync] enabled = no).  From prepare, or before start. */
void scheduler_set_follower(struct scheduler *s, unsigned i, struct follower *f);
struct follower *scheduler_follower(struct scheduler *s, unsigned i);

/* Wake the scheduler (a want, a follower now ready); arg is the struct scheduler.  Any thread. */
void scheduler_wake(void *arg);

/* Start the thread; false if it could not start. */
bool scheduler_start(struct scheduler *s, scheduler_prepare_fn prepare, void *arg);

/*
 * Stop the thread (interrupting a running load) and wait for it; it writes
 * each loaded table's snapshot before it ends.
 */
void scheduler_stop(struct scheduler *s);

#endif
