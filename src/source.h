/*
 * Keeping every guarded table's filter in step with PostgreSQL: first
 * loads, rebuilds (on request, on a timer, after reconnects, for growth),
 * one at a time across tables, and one LISTEN/NOTIFY follower connection
 * that adds new rows of every table as they are committed.  It also keeps,
 * per table, the horizon: a time H such that every row committed before H
 * is in the filter, which is what lets a 404 be trusted (see source_stale).
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

struct source;
struct postlog;

/*
 * Callbacks into the process (sd_notify); each may be NULL.  t is the
 * table's index; both run on the rebuild thread.
 */
struct source_hooks {
    void *arg;
    /* Rows copied so far by the running load (every LOADER_PROGRESS_ROWS). */
    void (*progress)(void *arg, unsigned t, uint64_t rows, bool first);
    /* Rebuild id of table t finished (ok or not); first = its first successful one. */
    void (*done)(void *arg, unsigned t, uint64_t id, bool ok, bool first, uint64_t rows,
                 double seconds);
};

/* One guarded table: what to read, the filter it feeds and its POST journal. */
struct source_table {
    const struct filter_config *fc;
    struct guard *g;
    struct pending *pending;
    struct postlog *postlog;    /* the journal's log on disk (postlog.h); NULL: no snapshot path */
};

enum source_state {
    SOURCE_CONNECTING,      /* never connected yet */
    SOURCE_CONNECTED,
    SOURCE_RECONNECTING     /* lost (or failing), retrying with backoff */
};
const char *source_state_name(enum source_state s);

/* One table's figures; the connection's (state, listening) are shared by all. */
struct source_status {
    enum source_state state;
    time_t state_since;
    bool listening;                 /* follower LISTEN is active */
    bool attempted;                 /* a first load has finished, ok or not */
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
    /* How the live filter was last brought up to date: "copy", "catchup", "snapshot", "peer". */
    char last_kind[12];
    /* The change feed (docs/feed.md). */
    bool feed_available;            /* the last load found it installed and readable */
    char feed_position[128];        /* the live filter's position, "" = none */
    uint64_t copies;                /* full loads (COPY) that succeeded */
    uint64_t catchups;              /* catch-ups from the feed that succeeded */
    uint64_t feed_rows_read;        /* rows the catch-ups read, in total */
    uint64_t last_feed_rows;        /* rows the last catch-up read */
    uint64_t too_old;               /* catch-ups the feed could not serve: full loads instead */
    /* Snapshots. */
    char restored_from[8];          /* "file", "peer", "" = not restored */
    uint64_t snapshot_writes, snapshot_failures;
    time_t snapshot_written;        /* 0: none yet */
    /* The horizon (see source_stale). */
    double horizon_age;             /* seconds since H; negative: no H yet */
    bool degraded;
    double degraded_seconds;        /* total time spent degraded */
};

/*
 * Create (nothing runs yet) for n tables (1..CONFIG_MAX_FILTERS), copied
 * from tables[]; cfg, what each table points to, lg and token (the admin
 * token sent to a [snapshot] bootstrap_from peer; NULL: none) must outlive
 * the source.  Rebuilds replay a table's journal into each new filter
 * before the swap.  NULL on allocation failure.
 *
 * With [snapshot] path, the rebuild thread first puts each table's snapshot
 * (or a peer's) in place, then catches up with the change feed from its
 * position instead of copying the table; it writes a table's snapshot after
 * each load or catch-up, every [snapshot] interval and when stopped.
 */
struct source *source_new(const struct config *cfg, const struct source_table *tables,
                          unsigned n, const struct log *lg,
                          const struct source_hooks *hooks, const char *token);

/* Number of tables. */
unsigned source_tables(const struct source *s);

/* Start the rebuild thread (which begins the first load at once) and, when
 * [sync] enabled, the follower.  False if a thread could not start. */
bool source_start(struct source *s);

/*
 * Ask for a rebuild of table t; reason is a short word for logs ("SIGHUP",
 * "api").  Returns the id (counted per table) of the rebuild that will
 * satisfy the request: requests made while one is already pending share its
 * id (coalesced, *coalesced = true).  Thread-safe.
 */
uint64_t source_request_rebuild(struct source *s, unsigned t, const char *reason,
                                bool *coalesced);

void source_status(struct source *s, unsigned t, struct source_status *out);

/*
 * Whether a "surely absent" answer from table t's filter cannot be trusted: [sync] max_staleness
 * is not 0 and bloomguard cannot show that its filter holds every row
 * committed more than max_staleness ago (the follower is disconnected or
 * cut off, PostgreSQL is down, a long ID or a reconnect is waiting for its
 * rebuild).  Callers then answer "maybe".
 *
 * Two steps, in this order: h = source_horizon(s, t) BEFORE looking the ID up
 * in the guard, then, only if the filter said "absent",
 * source_stale(s, h).  Every filter swap and notified add is published
 * before the horizon that covers it, so a lookup made after reading h sees
 * at least what h promises; reading the horizon after the lookup could pair
 * an old filter with a new horizon.  Both lock-free: an atomic load, and a
 * clock read.
 */
int64_t source_horizon(struct source *s, unsigned t);
bool source_stale(struct source *s, int64_t horizon);

/*
 * Stop the threads (interrupting a running load) and wait for them; the
 * rebuild thread writes each loaded table's snapshot before it ends.
 */
void source_stop(struct source *s);
void source_free(struct source *s);

#endif
