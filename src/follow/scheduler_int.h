/*
 * What the scheduler*.c files share and no one else sees: the scheduler's
 * state and the jobs one file gives the loop.  scheduler.c is the thread
 * and its loads; scheduler_store.c its snapshots (at start, periodic, on a
 * clean stop) and the change feed's pruning; scheduler_vet.c its check of
 * a peer's snapshot.  Every function here runs on the scheduler's thread,
 * the only one that swaps a table's filter.
 */
#ifndef BLOOMGUARD_SCHEDULER_INT_H
#define BLOOMGUARD_SCHEDULER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "scheduler.h"
#include "spotcheck.h"
#include "worker.h"

struct scheduler {
    const struct config *cfg;
    const struct log *lg;
    struct scheduler_hooks hooks;
    const char *token;
    struct table **tables;
    struct follower **follower;     /* per table, NULL: none */
    unsigned *backoff;              /* per table: seconds before retrying a failed load */
    int64_t *next_snapshot;         /* per table: boot clock of the next periodic one; 0: none */
    struct vetting *vetting;        /* per table: checking a peer's snapshot (table_vet) */
    unsigned n;
    unsigned next_pick;             /* where the round robin resumes */
    int64_t next_prune;
    unsigned rng;

    scheduler_prepare_fn prepare;
    void *prepare_arg;
    int64_t prepare_again;          /* monoclock_boot_ns of the next prepare; 0: none needed */

    /* The thread; its mu guards follower[] too, its wakes: a want, a follower ready. */
    struct worker w;
};

/* One table's check of a peer's snapshot against a sample of its rows (spotcheck.h). */
struct vetting {
    struct spotcheck sample;
    bool taken;
    int64_t taken_at;               /* boot clock once the sample was read: every row is older */
    int64_t retry_at;               /* boot clock before which a failed read is not tried again */
    unsigned backoff;               /* seconds */
};

/* Write table i's snapshot, if snapshots are on and it has a filter (scheduler_store.c). */
void scheduler_save_table(struct scheduler *s, unsigned i);
/* At start: each table's snapshot (file or peer) goes live before any load. */
void scheduler_restore_all(struct scheduler *s);
/* A table whose periodic snapshot is due, -1 if none; *wait_ms shrinks to the next one. */
int scheduler_snapshot_due(struct scheduler *s, unsigned *wait_ms);
/* Table i's periodic snapshot, after a catch-up where positions do not move by themselves. */
void scheduler_periodic_snapshot(struct scheduler *s, unsigned i);
/* Every prune_interval, forget the feed's log older than the retention; *wait_ms shrinks. */
void scheduler_maybe_prune(struct scheduler *s, unsigned *wait_ms);
/* Each table on probation: its sample, then its verdict once proved (scheduler_vet.c). */
void scheduler_vet_all(struct scheduler *s, unsigned *wait_ms);

#endif
