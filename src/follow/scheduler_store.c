/*
 * The scheduler's snapshots: each table's put in place at start (from its
 * file or a peer), written after each load, periodically and on a clean
 * stop; and the change feed's pruning, the other periodic job.  On the
 * scheduler's thread, the only one that swaps a table's filter, so the
 * live filter it streams to disk stays alive while it does.
 */
#include "scheduler_int.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "feed.h"
#include "loader.h"
#include "monoclock.h"
#include "persist.h"

/* The horizon as wall-clock milliseconds, for a snapshot's header; 0: none. */
static uint64_t horizon_wall_ms(struct table *t)
{
    struct table_status st;
    table_status(t, &st);
    if (st.horizon_age < 0)
        return 0;
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    double ms = (double)wall.tv_sec * 1000.0 + (double)wall.tv_nsec / 1e6 - st.horizon_age * 1000.0;
    return ms > 0 ? (uint64_t)ms : 0;
}

/* Write table i's snapshot, if snapshots are on and it has a filter. */
void scheduler_save_table(struct scheduler *s, unsigned i)
{
    struct table *t = s->tables[i];
    struct follower *f = scheduler_follower(s, i);
    char pos[TABLE_POS_MAX], path[PERSIST_PATH_MAX];
    if (!persist_file(s->cfg, table_config(t), path, sizeof path))
        return;
    unsigned every = s->cfg->snapshot_interval;
    s->next_snapshot[i] = every ? monoclock_boot_ns() + (int64_t)every * NS_PER_S : 0;
    /* A peer's filter on probation is not ours to keep: a restart would believe the file. */
    if (!table_loaded(t) || table_vet(t, NULL) != TABLE_VET_NONE)
        return;
    /* The position first: every change after it is in the filter or read again on resume. */
    if (f != NULL)
        follow_position(f, t, pos, sizeof pos);
    else
        table_position(t, pos, sizeof pos);
    struct table_ident ident;
    table_ident(t, &ident);
    int e = persist_save(s->cfg, table_config(t), t, pos, horizon_wall_ms(t), &ident, s->lg);
    table_snapshot_written(t, e == 0);
    if (e == 0 && f != NULL && f->ops->saved)
        f->ops->saved(f, t, pos);
}

/* At start: each table's snapshot (file or peer) goes live before any load. */
void scheduler_restore_all(struct scheduler *s)
{
    for (unsigned i = 0; i < s->n && !worker_stopping(&s->w); i++) {
        struct table *t = s->tables[i];
        struct persist_restored r;
        /* Before a peer's filter can go live: not one of its "absent" answers believed yet. */
        bool peer = s->cfg->bootstrap_from[0] != '\0';
        if (peer)
            table_vet_begin(t);
        bool ok = persist_restore(s->cfg, table_config(t), s->token, &s->w.stop, t, s->lg, &r);
        if (peer && !(ok && r.from == PERSIST_PEER))
            table_vetted(t, true);      /* no filter from elsewhere after all */
        if (!ok)
            continue;
        if (s->hooks.done)
            s->hooks.done(s->hooks.arg, i, 0, true, true, r.items, r.seconds);
    }
}

/* A table whose periodic snapshot is due, -1 if none; *wait_ms shrinks to the next one. */
int scheduler_snapshot_due(struct scheduler *s, unsigned *wait_ms)
{
    int64_t now = monoclock_boot_ns();
    for (unsigned i = 0; i < s->n; i++) {
        if (s->next_snapshot[i] == 0 || !table_loaded(s->tables[i]))
            continue;
        if (s->next_snapshot[i] <= now)
            return (int)i;
        int64_t ms = (s->next_snapshot[i] - now) / 1000000 + 1;
        if (ms < *wait_ms)
            *wait_ms = (unsigned)ms;
    }
    return -1;
}

/*
 * The periodic snapshot: where positions do not move by themselves
 * (method notify), first move it up with a catch-up, so a restart reads
 * only what changed since this snapshot; a catch-up that fails leaves the
 * older position, still exact.
 */
void scheduler_periodic_snapshot(struct scheduler *s, unsigned i)
{
    struct table *t = s->tables[i];
    struct follower *f = scheduler_follower(s, i);
    char err[512], pos[TABLE_POS_MAX];
    uint64_t rows = 0;
    table_position(t, pos, sizeof pos);
    if (f != NULL && !f->ops->fresh_positions && f->ops->catch_up && pos[0] != '\0') {
        int r = f->ops->catch_up(f, t, &rows, err, sizeof err);
        if (r == 0)
            log_fields(s->lg, LOG_LVL_WARN, table_name(t), "snapshot_catchup_failed",
                       "%s: catch-up before the snapshot failed: %s", table_name(t), err);
        if (r == -1)
            table_want(t, WANT_POSITION, NULL);
    }
    scheduler_save_table(s, i);
}

/* Every prune_interval, forget the feed's log older than the retention (docs/feed.md). */
void scheduler_maybe_prune(struct scheduler *s, unsigned *wait_ms)
{
    const struct config *c = s->cfg;
    int64_t now = monoclock_boot_ns();
    if (!c->feed_enabled || c->feed_prune_interval == 0)
        return;
    if (now < s->next_prune) {
        int64_t ms = (s->next_prune - now) / 1000000 + 1;
        if (ms < *wait_ms)
            *wait_ms = (unsigned)ms;
        return;
    }
    s->next_prune = now + (int64_t)follow_jitter_ms(&s->rng, c->feed_prune_interval) * 1000000;
    bool any = false;
    for (unsigned i = 0; i < s->n && !any; i++) {
        struct table_status st;
        table_status(s->tables[i], &st);
        any = st.feed_available;
    }
    if (!any)
        return;
    char err[512];
    uint64_t deleted = 0;
    PGconn *conn = loader_connect(c, err, sizeof err);
    if (conn != NULL && feed_prune(conn, (double)c->feed_retention, &deleted, err, sizeof err))
        log_debug(s->lg, "change feed: pruned %llu log rows older than %u s",
                  (unsigned long long)deleted, c->feed_retention);
    else
        log_warn(s->lg, "change feed: prune failed: %s", err);
    PQfinish(conn);
}

