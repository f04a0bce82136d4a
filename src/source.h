/*
 * Keeping the guard in step with PostgreSQL: the first load, rebuilds (on
 * request, on a timer, after reconnects, for growth) and the LISTEN/NOTIFY
 * follower that adds new rows as they are committed.  It also keeps the
 * horizon: a time H such that every row committed before H is in the
 * filter, which is what lets a 404 be trusted (see source_degraded).
 */
#ifndef BLOOMGUARD_SOURCE_H
#define BLOOMGUARD_SOURCE_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "config.h"
#include "guard.h"
#include "log.h"
#include "pending.h"
#include "stats.h"

struct source;

/* Callbacks into the process (sd_notify); each may be NULL. */
struct source_hooks {
    void *arg;
    /* Rows copied so far by the running load (every LOADER_PROGRESS_ROWS). */
    void (*progress)(void *arg, uint64_t rows, bool first);
    /* Rebuild id finished (ok or not); first = it was the first successful one. */
    void (*done)(void *arg, uint64_t id, bool ok, bool first, uint64_t rows, double seconds);
};

enum source_state {
    SOURCE_CONNECTING,      /* never connected yet */
    SOURCE_CONNECTED,
    SOURCE_RECONNECTING     /* lost (or failing), retrying with backoff */
};
const char *source_state_name(enum source_state s);

struct source_status {
    enum source_state state;
    time_t state_since;
    bool listening;                 /* follower LISTEN is active */
    /*
     * Why the last attempt failed, without hosts, paths or role names (it is
     * shown on unauthenticated endpoints; the log has the detail).  Empty if
     * none.
     */
    char last_error[128];
    /* last successful load */
    uint64_t last_rows;
    double last_seconds;
    time_t last_finished;           /* 0: none yet */
    char last_reason[32];
    /* rebuilds */
    bool running;
    uint64_t running_id;
    uint64_t running_rows;          /* copied so far */
    time_t running_since;
    char running_reason[32];
    uint64_t requested_id;          /* newest requested rebuild id */
    uint64_t completed_id;          /* newest rebuild id that finished ok */
    uint64_t rebuilds_ok, rebuilds_failed;
    double rebuild_seconds_sum;
    uint64_t notifications;         /* IDs applied from NOTIFY */
    uint64_t deletes;               /* delete notifications since the last rebuild */
    uint64_t long_ids;              /* rows whose ID did not fit in a notification */
    double next_rebuild_in;         /* seconds min_rebuild_interval still holds a wanted rebuild back */
    /* The horizon (see source_degraded). */
    double horizon_age;             /* seconds since H; negative: no H yet */
    bool degraded;
    double degraded_seconds;        /* total time spent degraded */
};

/*
 * Create (nothing runs yet).  cfg, g, pending, st and lg must outlive the
 * source.  Rebuilds replay pending into each new filter before the swap.
 * NULL on allocation failure.
 */
struct source *source_new(const struct config *cfg, struct guard *g, struct pending *pending,
                          struct stats *st, const struct log *lg,
                          const struct source_hooks *hooks);

/* Start the rebuild thread (which begins the first load at once) and, when
 * [sync] enabled, the follower.  False if a thread could not start. */
bool source_start(struct source *s);

/*
 * Ask for a rebuild; reason is a short word for logs ("SIGHUP", "api").
 * Returns the id of the rebuild that will satisfy the request: requests made
 * while one is already pending share its id (coalesced, *coalesced = true).
 * Thread-safe.
 */
uint64_t source_request_rebuild(struct source *s, const char *reason, bool *coalesced);

void source_status(struct source *s, struct source_status *out);

/*
 * Whether a "surely absent" answer cannot be trusted now: [sync]
 * max_staleness is not 0 and bloomguard cannot show that its filter holds
 * every row committed more than max_staleness ago (the follower is
 * disconnected or cut off, PostgreSQL is down, a long ID or a reconnect is
 * waiting for its rebuild).  Callers then answer "maybe".  Lock-free and
 * cheap (an atomic load and a clock read): call it only for answers that
 * would be "absent".
 */
bool source_degraded(struct source *s);

/* Stop the threads (interrupting a running load) and wait for them. */
void source_stop(struct source *s);
void source_free(struct source *s);

#endif
