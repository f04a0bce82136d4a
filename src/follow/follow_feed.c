/*
 * Method feed: sql/notify.sql's trigger appends each written ID to
 * bloomguard_feed_log in the writing transaction (no NOTIFY, so commits
 * do not queue on the notification lock), and this follower reads what was
 * committed since each table's position every [sync] poll_interval, on one
 * connection for all its tables.  Each read runs in one REPEATABLE READ
 * snapshot taken after its start, so once its rows are in the filter every
 * row committed before that start is too (docs/feed.md argues why a
 * position is exact): the horizon moves to the start of each read.  A
 * lost connection loses nothing (the position stays), so it is no gap.
 *
 * The feed's reads are also how method notify closes its gaps, so the
 * shared part (positions for COPYs, one read) is here too.
 */
#include "follow.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "feed.h"
#include "loader.h"

struct feedf {
    struct follower base;           /* base.listening: connected, so a COPY may start */
    /* The follower's thread only: deletes seen in pg_stat_user_tables, -1 = not read yet. */
    int64_t n_tup_del[CONFIG_MAX_FILTERS];
    int64_t next_deletes;           /* monoclock_boot_ns of the next read of the counts */
    /* A table without a position: when to look again whether the feed serves it. */
    int64_t next_serve_check[CONFIG_MAX_FILTERS];
};

static struct feedf *of(struct follower *f)
{
    return (struct feedf *)f;
}

/* ----------------------------------------------------- the shared part -- */

void follow_feed_position(struct follower *f, struct table *t, PGconn *conn, char *pos,
                          size_t cap)
{
    const struct filter_config *fc = table_config(t);
    char why[512] = "", p[FEED_POS_MAX] = "", merr[256];
    bool avail = false;
    if (!feed_available(conn, fc->table, fc->column, &avail, why, sizeof why))
        avail = false;
    else if (avail && !feed_mark(conn, merr, sizeof merr))
        /* A restart soon after this load then copies again: slower, never wrong. */
        log_debug(f->lg, "%s: %s", fc->name, merr);
    if (avail && !feed_position(conn, p, why, sizeof why))
        avail = false;
    struct table_status st;
    table_status(t, &st);
    table_set_feed_available(t, avail);
    bool first = st.copies == 0;
    if (avail && (!st.feed_available || first))
        log_fields(f->lg, LOG_LVL_INFO, fc->name, "feed_available",
                   "%s: the change feed serves %s.%s: restarts and reconnects read only what "
                   "changed",
                   fc->name, fc->table, fc->column);
    else if (!avail && (st.feed_available || first))
        log_fields(f->lg, LOG_LVL_INFO, fc->name, "feed_unavailable",
                   "%s: no change feed (%s): restarts and reconnects copy the table", fc->name,
                   why);
    snprintf(pos, cap, "%s", avail ? p : "");
}

/* Each ID the feed returns goes into the live filter (adding one twice is harmless). */
static bool on_id(void *arg, const char *id, size_t len)
{
    void **a = arg;
    table_add_row(a[0], id, len);
    return !atomic_load((atomic_bool *)a[1]);
}

/* The feed does not serve t (why): its proofs wait until it does again (table_schema). */
static void unserved(struct table *t, const char *why)
{
    const struct filter_config *fc = table_config(t);
    char text[320];
    snprintf(text, sizeof text, "the change feed does not serve %s.%s (%s): degraded until "
             "SELECT bloomguard_watch('%s', '%s', method => 'feed')", fc->table, fc->column,
             why, fc->table, fc->column);
    table_schema(t, NULL, text);
}

/* follow_feed_read, its waits bounded by bound (NULL: unbounded). */
static int read_table(struct follower *f, struct table *t, PGconn *conn, struct feed_bound *bound,
                      uint64_t epoch, bool catchup, bool resume, uint64_t *rows, char *err,
                      size_t errlen)
{
    const struct filter_config *fc = table_config(t);
    char since[TABLE_POS_MAX], next[FEED_POS_MAX];
    bool too_old = false;
    table_position(t, since, sizeof since);
    if (since[0] == '\0') {
        snprintf(err, errlen, "no change-feed position to resume from");
        return -1;
    }
    *rows = 0;
    void *arg[2] = { t, &f->stop };
    char shape[FEED_SHAPE_MAX];
    int64_t start = monoclock_boot_ns();    /* before the read's snapshot: H may move this far */
    if (!feed_read(conn, bound, fc->table, fc->column, since, resume, on_id, arg, next, rows,
                   &too_old, shape, err, errlen))
        return 0;
    if (too_old) {
        log_fields(f->lg, LOG_LVL_WARN, fc->name, "feed_too_old",
                   "%s: the change feed cannot resume from the filter's position (%s): "
                   "copying the table",
                   fc->name, err);
        table_count_too_old(t);
        if (!catchup) {
            /* Degraded, saying why, until the feed serves the table again (serves_again). */
            unserved(t, err);
            table_gap(t, WANT_POSITION);
        }
        return -1;
    }
    table_set_feed_available(t, true);
    /*
     * The trigger logs a renamed column by its number, but a new type
     * respells IDs the filter holds in the old spelling, and a new child
     * table's rows are not logged at all until bloomguard_watch runs again
     * (the feed's floor says so): the shape, read in the read's snapshot,
     * after start, lets the poll prove only what the live filter spells.
     */
    if (!catchup && table_schema(t, shape, NULL) == TABLE_SCHEMA_CHANGED)
        log_fields(f->lg, LOG_LVL_WARN, fc->name, "degraded",
                   "%s: %s.%s or the tables it is read from changed (a column renamed, "
                   "retyped or dropped, a child table or partition): degraded until a COPY",
                   fc->name, fc->table, fc->column);
    if (catchup)
        table_caught_up(t, epoch, start, next, *rows);
    else
        table_polled(t, epoch, start, next, *rows);
    return 1;
}

int follow_feed_read(struct follower *f, struct table *t, PGconn *conn, uint64_t epoch,
                     bool catchup, bool resume, uint64_t *rows, char *err, size_t errlen)
{
    return read_table(f, t, conn, NULL, epoch, catchup, resume, rows, err, errlen);
}

int follow_feed_catch_up(struct follower *f, struct table *t, follow_epoch_fn epoch_of,
                         uint64_t *rows, char *err, size_t errlen)
{
    PGconn *conn = loader_connect(f->cfg, err, errlen);
    if (conn == NULL)
        return 0;
    uint64_t epoch = table_epoch(t);
    int r = epoch_of == NULL || epoch_of(f, t, conn, &epoch, err, errlen)
        ? follow_feed_read(f, t, conn, epoch, true, true, rows, err, errlen) : 0;
    PQfinish(conn);
    return r;
}

/* ------------------------------------------------------ method feed -- */

static void feed_init(struct follower *f)
{
    struct feedf *d = of(f);
    for (unsigned i = 0; i < CONFIG_MAX_FILTERS; i++)
        d->n_tup_del[i] = -1;
}

/*
 * The log holds no deletes (a trigger on them would cost every delete), so
 * they are counted from the table's statistics, towards [sync]
 * rebuild_after_deletes: pg_stat_user_tables.n_tup_del, which PostgreSQL
 * updates about once a second.  It counts rolled-back deletes too, which can
 * only bring a rebuild forward.  A counter that went down was reset (a
 * crash, pg_stat_reset): counting starts again from it.
 */
static void count_deletes(struct feedf *d, PGconn *conn, struct feed_bound *bound, unsigned count)
{
    for (unsigned i = 0; i < count; i++) {
        struct table *t = d->base.tables[i];
        const struct filter_config *fc = table_config(t);
        char *qtbl = NULL, *qcol = NULL;
        if (fc->rebuild_after_deletes == 0
            || !loader_quote_table(conn, fc->table, fc->column, &qtbl, &qcol, NULL, 0))
            continue;
        const char *params[1] = { qtbl };
        PGresult *r = feed_exec(conn, bound, "SELECT n_tup_del FROM pg_stat_user_tables "
                                "WHERE relid = $1::regclass", 1, params);
        if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
            int64_t now = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
            if (d->n_tup_del[i] >= 0 && now > d->n_tup_del[i])
                table_count_rows(t, 0, (uint64_t)(now - d->n_tup_del[i]));
            d->n_tup_del[i] = now;
        }
        PQclear(r);
        free(qtbl);
        free(qcol);
    }
}

/*
 * A loaded table without a position was copied while the feed did not
 * serve it (its trigger disabled or replaced, a child table or partition
 * made since bloomguard_watch): it stays degraded until a COPY takes a
 * position.  Every few seconds, look whether the feed serves it again
 * (bloomguard_watch ran): table_schema then sees it covered again and
 * wants that COPY.
 */
#define SERVE_CHECK_NS (2 * NS_PER_S)
static void serves_again(struct feedf *d, PGconn *conn, struct feed_bound *bound, unsigned i)
{
    struct table *t = d->base.tables[i];
    const struct filter_config *fc = table_config(t);
    int64_t now = monoclock_boot_ns();
    char why[512];
    bool avail = false;
    if (!table_loaded(t) || now < d->next_serve_check[i])
        return;
    d->next_serve_check[i] = now + SERVE_CHECK_NS;
    if (!feed_available_bounded(conn, bound, fc->table, fc->column, &avail, why, sizeof why))
        return;
    if (!avail) {
        unserved(t, why);
        return;
    }
    /* Else (the COPY's ticket could not read the feed, say) no load may be coming: ask. */
    struct table_status st;
    table_status(t, &st);
    bool pending = st.running || st.requested_id > st.completed_id;
    if (table_schema(t, NULL, NULL) != TABLE_SCHEMA_CHANGED && pending)
        return;
    if (!pending)
        table_gap(t, WANT_POSITION);
    log_fields(d->base.lg, LOG_LVL_INFO, fc->name, "feed_available",
               "%s: the change feed serves %s.%s again: copying the table for a position",
               fc->name, fc->table, fc->column);
}

/*
 * Read every table once; false when the connection failed (err).  fresh:
 * the first reads on this connection, which must prove the history (see
 * feed_read's resume).
 */
static bool poll_all(struct feedf *d, PGconn *conn, struct feed_bound *bound, bool fresh,
                     char *err, size_t errlen)
{
    struct follower *f = &d->base;
    unsigned count = follow_count(f);
    for (unsigned i = 0; i < count && !atomic_load(&f->stop); i++) {
        struct table *t = f->tables[i];
        char pos[TABLE_POS_MAX];
        uint64_t rows;
        table_position(t, pos, sizeof pos);
        if (pos[0] == '\0') {
            /* Nothing to resume from until a COPY gives a position. */
            serves_again(d, conn, bound, i);
            continue;
        }
        uint64_t epoch = table_epoch(t);
        if (read_table(f, t, conn, bound, epoch, false, fresh, &rows, err, errlen) == 0) {
            /* Retried at the next poll; a lock wait ends here (lock_timeout), say so. */
            log_debug(f->lg, "follower (feed): %s", err);
            return PQstatus(conn) == CONNECTION_OK;
        }
    }
    if (monoclock_boot_ns() >= d->next_deletes) {
        count_deletes(d, conn, bound, count);
        if (bound->stalled) {
            snprintf(err, errlen, "no answer in %d s (a silent network or a frozen proxy): the "
                     "connection is given up", bound->stall_s);
            return false;
        }
        d->next_deletes = monoclock_boot_ns() + NS_PER_S;
    }
    return true;
}

static void feed_run(struct follower *f)
{
    struct feedf *d = of(f);
    char err[512], sid[256];
    unsigned backoff = 1, stall_backoff = 1;
    bool had = false;
    int64_t interval = (int64_t)(f->cfg->poll_interval * (double)NS_PER_S);

    while (!atomic_load(&f->stop)) {
        /*
         * This session only is bounded (feed.h): it reads, and its
         * lock_timeout ends a lock wait before the bound gives it up.
         */
        struct feed_bound bound = { .stall_s = (int)f->cfg->silence_timeout, .stalled = false };
        PGconn *conn = loader_connect_as(f->cfg, "bloomguard feed", err, sizeof err);
        if (conn != NULL && (!feed_bound_session(conn, &bound, err, sizeof err)
                             || !loader_server_id(conn, sid, sizeof sid, err, sizeof err))) {
            PQfinish(conn);
            conn = NULL;
        }
        if (conn == NULL) {
            follow_retry(f, err, had, &backoff);
            continue;
        }
        backoff = 1;
        had = true;
        pthread_mutex_lock(&f->mu);
        snprintf(f->server_id, sizeof f->server_id, "%s", sid);
        follow_set_state_locked(f, FOLLOW_CONNECTED, NULL);
        pthread_mutex_unlock(&f->mu);
        log_fields(f->lg, LOG_LVL_INFO, NULL, "follower_connected",
                   "follower (feed): reading the change feed every %.3f s", f->cfg->poll_interval);
        follow_wake(f);
        bool fresh = true;
        while (!atomic_load(&f->stop)) {
            int64_t begun = monoclock_boot_ns();
            if (!poll_all(d, conn, &bound, fresh, err, sizeof err)
                || PQstatus(conn) != CONNECTION_OK)
                break;
            fresh = false;
            stall_backoff = 1;
            int64_t left = begun + interval - monoclock_boot_ns();
            if (left > 0)
                follow_nap(&f->stop, (unsigned)(left / 1000000) + 1);
        }
        PQfinish(conn);
        if (atomic_load(&f->stop))
            break;
        follow_lost(f, err);
        if (!bound.stalled)
            continue;
        /*
         * A stall may be a server too busy to answer: reconnecting at once,
         * each time, would pile connections onto it.  The retry's doubling.
         */
        log_fields(f->lg, LOG_LVL_INFO, NULL, "follower_backoff",
                   "follower (feed): the connection stalled; reconnecting in %u s", stall_backoff);
        follow_nap(&f->stop, follow_jitter_ms(&f->rng, stall_backoff));
        stall_backoff = stall_backoff * 2 > f->cfg->retry_max_seconds
                        ? f->cfg->retry_max_seconds : stall_backoff * 2;
    }
}

/* The reader must be connected: a COPY's position is read on the server it reads. */
static bool feed_ready(struct follower *f, struct table *t)
{
    (void)t;
    pthread_mutex_lock(&f->mu);
    bool ready = f->listening;
    pthread_mutex_unlock(&f->mu);
    return ready;
}

/*
 * A COPY of another server than the reader's (a multi-host conninfo, a
 * lagging standby) would pair the reader's positions with another
 * history: refused, as the other methods refuse it.
 */
static bool feed_ticket(struct follower *f, struct table *t, PGconn *conn,
                        struct follow_ticket *tk, char *err, size_t errlen)
{
    char mine[sizeof f->server_id];
    if (!loader_server_id(conn, mine, sizeof mine, err, errlen))
        return false;
    /* Connected is having a server (follow_lost forgets it): one check says both. */
    pthread_mutex_lock(&f->mu);
    bool ok = follow_same_server_locked(f, mine, err, errlen);
    pthread_mutex_unlock(&f->mu);
    if (!ok)
        return false;
    tk->epoch = table_epoch(t);
    follow_feed_position(f, t, conn, tk->position, sizeof tk->position);
    return true;
}

static int feed_catch_up(struct follower *f, struct table *t, uint64_t *rows, char *err,
                         size_t errlen)
{
    return follow_feed_catch_up(f, t, NULL, rows, err, errlen);
}

const struct follow_ops follow_feed_ops = {
    .method = SYNC_FEED,
    .fresh_positions = true,
    .size = sizeof(struct feedf),
    .init = feed_init,
    .run = feed_run,
    .ready = feed_ready,
    .ticket = feed_ticket,
    .catch_up = feed_catch_up,
};
