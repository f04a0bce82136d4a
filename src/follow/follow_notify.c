/*
 * Method notify: one LISTEN connection for every table it follows, adding
 * each notified ID as its transaction commits.  Only when chosen
 * explicitly (or when a table has nothing else): a transaction that sends
 * a notification takes a database-wide lock at commit and holds it through
 * the WAL flush, so notifying commits go one at a time.
 *
 * Freshness: PostgreSQL delivers to a listening session, before the result
 * of its next query, every notification of a transaction whose commit was
 * acknowledged before that query started.  So each time the probe (a tiny
 * SELECT every probe_interval) comes back and the notifications that came
 * with it are applied, every row committed before the probe was sent is in
 * the filter.  A new connection (notifications sent while away are lost)
 * and a row whose ID did not fit in a notification are gaps.  Where
 * sql/notify.sql's change feed serves a table, a gap is closed by a
 * catch-up from the feed instead of a COPY.
 */
#include "follow.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "feed.h"
#include "loader.h"

/* How long one wait for the connection may last before the loop looks around. */
#define TICK_MS 500
/*
 * PostgreSQL refuses NOTIFY payloads of 8000 bytes or more, counted in the
 * server's encoding; in UTF-8 such an ID may take as little as half that.
 * An ID shorter than this in UTF-8 always fits in a notification.
 */
#define NOTIFY_MIN_LONG_UTF8 4000

struct notify {
    struct follower base;           /* base.listening: LISTENing on a connection */
    long backend_pid;               /* of the listening session */
    bool prepared;                  /* PROBE_STMT is prepared on the session */
    /* Per table, by index in base.tables: for the follower's thread only. */
    char del_channel[CONFIG_MAX_FILTERS][80];   /* <channel>_deleted */
    uint64_t epoch[CONFIG_MAX_FILTERS];         /* the epoch the running probe proves */
    uint64_t added[CONFIG_MAX_FILTERS], deleted[CONFIG_MAX_FILTERS], long_ids[CONFIG_MAX_FILTERS];

    /* Guarded by base.mu. */
    unsigned listened;              /* tables [0, listened) are LISTENed on the connection */
};

static struct notify *of(struct follower *f)
{
    return (struct notify *)f;
}

static bool listen_on(PGconn *conn, const char *channel, char *err, size_t errlen)
{
    char *q = PQescapeIdentifier(conn, channel, strlen(channel));
    char sql[160];
    if (q == NULL) {
        loader_set_error(err, errlen, "cannot quote the channel name", conn);
        return false;
    }
    snprintf(sql, sizeof sql, "LISTEN %s", q);
    PQfreemem(q);
    return loader_command(conn, sql, PGRES_COMMAND_OK, sql, err, errlen);
}

/* The table whose channel (or <channel>_deleted, *deleted) a notification came on, -1 if none. */
static int table_of(struct notify *n, unsigned count, const char *relname, bool *deleted)
{
    for (unsigned i = 0; i < count; i++) {
        if (strcmp(relname, table_config(n->base.tables[i])->channel) == 0) {
            *deleted = false;
            return (int)i;
        }
        if (strcmp(relname, n->del_channel[i]) == 0) {
            *deleted = true;
            return (int)i;
        }
    }
    return -1;
}

static void apply_notifies(struct notify *n, PGconn *conn)
{
    struct follower *f = &n->base;
    unsigned count = follow_count(f);
    PGnotify *nt;
    bool any = false;
    memset(n->added, 0, sizeof n->added);
    memset(n->deleted, 0, sizeof n->deleted);
    memset(n->long_ids, 0, sizeof n->long_ids);
    while ((nt = PQnotifies(conn)) != NULL) {
        bool deleted = false;
        int i = table_of(n, count, nt->relname, &deleted);
        if (i < 0) {
            /* LISTEN only names our channels; nothing else can arrive. */
        } else if (deleted) {
            n->deleted[i]++;
            any = true;
        } else if (nt->extra != NULL && nt->extra[0] != '\0') {
            table_add_row(f->tables[i], nt->extra, strlen(nt->extra));
            n->added[i]++;
            any = true;
        } else {
            n->long_ids[i]++;   /* sql/notify.sql's marker for an ID too long to notify */
            any = true;
        }
        PQfreemem(nt);
    }
    if (!any)
        return;
    /* Only an ID that a request may carry can be a false negative. */
    bool long_matters = f->cfg->max_id_bytes >= NOTIFY_MIN_LONG_UTF8;
    for (unsigned i = 0; i < count; i++) {
        struct table *t = f->tables[i];
        if (n->added[i] || n->deleted[i])
            table_count_rows(t, n->added[i], n->deleted[i]);
        for (uint64_t k = 0; k < n->long_ids[i]; k++)
            table_count_long_id(t);
        if (n->long_ids[i] > 0 && long_matters) {
            table_gap(t, WANT_LONG_ID);
            log_fields(f->lg, LOG_LVL_WARN, table_name(t), "degraded",
                       "%s: a row's id was too long for a notification: degraded until a "
                       "catch-up or a rebuild reads it",
                       table_name(t));
        }
    }
}

/*
 * The probe proves freshness only on the session that LISTENs.  Through a
 * connection pooler (PgBouncer in transaction mode) the LISTEN and the
 * probes may run on different server sessions and notifications are
 * dropped, so the follower insists on a direct connection: the backend pid
 * the server reports must be the one libpq got at connect (a pooler sends
 * its own), and each probe checks that it still runs on that session and
 * that the session still listens on every table's channel.
 */
static bool direct_session(struct notify *n, PGconn *conn, char *err, size_t errlen)
{
    PGresult *r = PQexec(conn, "SELECT pg_backend_pid()");
    bool ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
    long pid = ok ? strtol(PQgetvalue(r, 0, 0), NULL, 10) : 0;
    if (!ok)
        loader_set_result_error(err, errlen, "cannot read the backend pid", conn, r);
    PQclear(r);
    if (!ok)
        return false;
    if (pid != PQbackendPID(conn)) {
        snprintf(err, errlen, "the follower's connection goes through a connection pooler "
                 "(backend pid %ld, connection says %d): LISTEN needs a direct connection to "
                 "PostgreSQL", pid, PQbackendPID(conn));
        return false;
    }
    n->backend_pid = pid;
    return true;
}

/*
 * The probe's SQL for the first count tables (free it), prepared as
 * PROBE_STMT on conn (replacing the one before), or NULL with err: whether
 * it runs on the listening session, then per table the shape of what its
 * SELECT reads and the tables under it whose rows nothing notifies (NULL:
 * none), for table_schema.
 */
/*
 * The probe is a prepared statement of the listening session, planned once
 * per set of tables: its catalog checks took milliseconds to plan, every
 * probe_interval.
 */
#define PROBE_STMT "bloomguard_notify_probe"
static const char probe_shape[] = LOADER_SHAPE_SQL("v.rel", "v.col");
static const char probe_untriggered[] = FOLLOW_UNTRIGGERED_SQL("v.rel", "v.call");

#define PROBE_TABLE "(SELECT %s FROM (VALUES (to_regclass(%s)::oid, %s::name, %s::text)) " \
                    "v(rel, col, call))"
static char *probe_sql(struct notify *n, PGconn *conn, unsigned count, char *err, size_t errlen)
{
    char *lit[CONFIG_MAX_FILTERS][4] = { { NULL } };
    char *probe = NULL;
    size_t cap = 160, len = 0;
    for (unsigned i = 0; i < count; i++) {
        const struct filter_config *fc = table_config(n->base.tables[i]);
        char *qtbl = NULL, *qcol = NULL, call[96];
        if (!loader_quote_table(conn, fc->table, fc->column, &qtbl, &qcol, err, errlen))
            goto out;
        snprintf(call, sizeof call, "pg_notify('%s'", fc->channel);  /* [A-Za-z0-9_] */
        lit[i][0] = PQescapeLiteral(conn, fc->channel, strlen(fc->channel));
        lit[i][1] = PQescapeLiteral(conn, qtbl, strlen(qtbl));
        lit[i][2] = PQescapeLiteral(conn, fc->column, strlen(fc->column));
        lit[i][3] = PQescapeLiteral(conn, call, strlen(call));
        free(qtbl);
        free(qcol);
        for (int k = 0; k < 4; k++) {
            if (lit[i][k] == NULL) {
                loader_set_error(err, errlen, "cannot quote the table's names", conn);
                goto out;
            }
            cap += 3 * strlen(lit[i][k]);
        }
        cap += sizeof probe_shape + sizeof probe_untriggered + 2 * sizeof PROBE_TABLE;
    }
    if ((probe = malloc(cap)) == NULL) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    len = (size_t)snprintf(probe, cap, "SELECT pg_backend_pid() = %ld AND ARRAY[", n->backend_pid);
    for (unsigned i = 0; i < count; i++)
        len += (size_t)snprintf(probe + len, cap - len, "%s%s", i ? ", " : "", lit[i][0]);
    len += (size_t)snprintf(probe + len, cap - len,
                            "]::text[] <@ ARRAY(SELECT pg_listening_channels())");
    for (unsigned i = 0; i < count; i++)
        for (int k = 0; k < 2; k++)
            len += (size_t)snprintf(probe + len, cap - len, ", " PROBE_TABLE,
                                    k == 0 ? probe_shape : probe_untriggered, lit[i][1],
                                    lit[i][2], lit[i][3]);
    if ((n->prepared && !loader_command(conn, "DEALLOCATE " PROBE_STMT, PGRES_COMMAND_OK,
                                        "cannot replace the probe", err, errlen))
        || !loader_prepare(conn, PROBE_STMT, probe, 0, "cannot prepare the probe", err, errlen)) {
        free(probe);
        probe = NULL;
    }
    n->prepared = probe != NULL;
out:
    for (unsigned i = 0; i < count; i++)
        for (int k = 0; k < 4; k++)
            PQfreemem(lit[i][k]);
    return probe;
}

/*
 * The probe's answer holds, after the listening check, each table's shape
 * and the tables under it nothing notifies: table_schema decides whether
 * the proof holds (false: degraded; a change is logged).
 */
static bool schema_holds(struct notify *n, const PGresult *r, unsigned i)
{
    struct table *t = n->base.tables[i];
    const struct filter_config *fc = table_config(t);
    char why[320];
    const char *unc = NULL;
    if (!PQgetisnull(r, 0, 2 + 2 * (int)i)) {
        snprintf(why, sizeof why, "%.60s has no bloomguard_notify trigger notifying %s: "
                 "SELECT bloomguard_watch('%s', '%s', method => 'notify') again",
                 PQgetvalue(r, 0, 2 + 2 * (int)i), fc->channel, fc->table, fc->column);
        unc = why;
    }
    enum table_schema_verdict v = table_schema(t, PQgetvalue(r, 0, 1 + 2 * (int)i), unc);
    if (v == TABLE_SCHEMA_CHANGED)
        log_fields(n->base.lg, LOG_LVL_WARN, fc->name, "degraded",
                   "%s: %s.%s or the tables it is read from changed (a column renamed, "
                   "retyped or dropped, a child table or partition)%s%s: degraded until a COPY",
                   fc->name, fc->table, fc->column, unc ? "; " : "", unc ? unc : "");
    return v == TABLE_SCHEMA_SAME;
}

/* LISTEN on the channels of tables [from, to). */
static bool listen_range(struct notify *n, PGconn *conn, unsigned from, unsigned to, char *err,
                         size_t errlen)
{
    for (unsigned i = from; i < to; i++) {
        snprintf(n->del_channel[i], sizeof n->del_channel[i], "%s_deleted",
                 table_config(n->base.tables[i])->channel);
        if (!listen_on(conn, table_config(n->base.tables[i])->channel, err, errlen)
            || !listen_on(conn, n->del_channel[i], err, errlen))
            return false;
    }
    return true;
}

/*
 * Tables attached since the connection's LISTENs: LISTEN on theirs too and
 * probe for them, then let the scheduler copy them.  Only between probes.
 */
static bool take_new_tables(struct notify *n, PGconn *conn, char **probe, char *err, size_t errlen)
{
    unsigned count = follow_count(&n->base);
    pthread_mutex_lock(&n->base.mu);
    unsigned had = n->listened;
    pthread_mutex_unlock(&n->base.mu);
    if (count <= had)
        return true;
    char *p;
    if (!listen_range(n, conn, had, count, err, errlen)
        || (p = probe_sql(n, conn, count, err, errlen)) == NULL)
        return false;
    free(*probe);
    *probe = p;
    pthread_mutex_lock(&n->base.mu);
    n->listened = count;
    pthread_mutex_unlock(&n->base.mu);
    log_info(n->base.lg, "follower (notify): now listening on the channels of %u tables", count);
    follow_wake(&n->base);
    return true;
}

/*
 * Follow one connection until it fails or stop: apply notifications and
 * probe every probe_interval.  Returns with the reason in err.
 */
static void follow(struct notify *n, PGconn *conn, char **probe, char *err, size_t errlen)
{
    struct follower *f = &n->base;
    int64_t interval = (int64_t)(f->cfg->probe_interval * (double)NS_PER_S);
    int64_t sent = 0, next_probe = monoclock_boot_ns();
    bool in_flight = false;
    unsigned probed = 0;            /* tables the probe in flight covers */

    while (!atomic_load(&f->stop)) {
        int64_t now = monoclock_boot_ns();
        if (!in_flight && !take_new_tables(n, conn, probe, err, errlen))
            return;
        if (!in_flight && now >= next_probe) {
            pthread_mutex_lock(&f->mu);
            probed = n->listened;
            pthread_mutex_unlock(&f->mu);
            for (unsigned i = 0; i < probed; i++)
                n->epoch[i] = table_epoch(f->tables[i]);
            sent = now;             /* before the query leaves: H may move only this far */
            if (!PQsendQueryPrepared(conn, PROBE_STMT, 0, NULL, NULL, NULL, 0)) {
                loader_set_error(err, errlen, "probe failed", conn);
                return;
            }
            in_flight = true;
            next_probe = sent + interval;
        }
        if (in_flight && follow_probe_dead(sent, now, f->cfg->silence_timeout, err, errlen))
            return;
        int64_t wait = in_flight ? 100 * 1000000 : next_probe - now;
        if (wait > TICK_MS * 1000000LL)
            wait = TICK_MS * 1000000LL;
        struct pollfd pfd = { .fd = PQsocket(conn), .events = POLLIN };
        if (PQflush(conn) == 1)
            pfd.events |= POLLOUT;
        int pr = poll(&pfd, 1, (int)(wait / 1000000) + 1);
        if (pr < 0 && errno != EINTR) {
            snprintf(err, errlen, "connection lost: poll: %s", strerror(errno));
            return;
        }
        if (pr > 0 && !PQconsumeInput(conn)) {
            loader_set_error(err, errlen, "connection lost", conn);
            return;
        }
        apply_notifies(n, conn);
        if (in_flight && !PQisBusy(conn)) {
            bool ok = true, same = true;
            PGresult *r, *answer = NULL;
            while ((r = PQgetResult(conn)) != NULL) {
                bool this_ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1
                               && PQnfields(r) == 1 + 2 * (int)probed;
                if (ok && !this_ok)
                    loader_set_result_error(err, errlen, "probe failed", conn, r);
                ok = ok && this_ok;
                same = ok && strcmp(PQgetvalue(r, 0, 0), "t") == 0;
                PQclear(answer);
                answer = r;
            }
            if (!ok) {
                PQclear(answer);
                return;
            }
            if (!same) {
                PQclear(answer);
                snprintf(err, errlen, "the probe ran on a session that does not listen "
                         "(a connection pooler?)");
                return;
            }
            in_flight = false;
            /* Everything that came before the answer is applied: H may move to sent. */
            apply_notifies(n, conn);
            for (unsigned i = 0; i < probed; i++)
                if (schema_holds(n, answer, i))
                    table_advance(f->tables[i], n->epoch[i], sent);
            PQclear(answer);
        }
        if (PQstatus(conn) != CONNECTION_OK) {
            loader_set_error(err, errlen, "connection lost", conn);
            return;
        }
    }
}

static void notify_run(struct follower *f)
{
    struct notify *n = of(f);
    char err[512], sid[256];
    unsigned backoff = 1;
    bool had_connection = false;

    while (!atomic_load(&f->stop)) {
        char *probe = NULL;
        unsigned count = follow_count(f);
        n->prepared = false;        /* a new session has none */
        PGconn *conn = loader_connect_as(f->cfg, "bloomguard notify", err, sizeof err);
        if (conn == NULL || !listen_range(n, conn, 0, count, err, sizeof err)
            || !direct_session(n, conn, err, sizeof err)
            || (probe = probe_sql(n, conn, count, err, sizeof err)) == NULL
            || !loader_server_id(conn, sid, sizeof sid, err, sizeof err)) {
            PQfinish(conn);
            free(probe);
            follow_retry(f, err, had_connection, &backoff);
            continue;
        }
        backoff = 1;
        pthread_mutex_lock(&f->mu);
        follow_set_state_locked(f, FOLLOW_CONNECTED, NULL);
        n->listened = count;
        snprintf(f->server_id, sizeof f->server_id, "%s", sid);
        /* Notifications sent while we were away are lost: only a catch-up or a COPY covers them. */
        for (unsigned i = 0; i < count; i++)
            table_gap(f->tables[i], had_connection ? WANT_RECONNECT : WANT_NONE);
        pthread_mutex_unlock(&f->mu);
        follow_wake(f);
        if (count == 1)
            log_fields(f->lg, LOG_LVL_INFO, NULL, "follower_connected",
                       "follower (notify): listening on channel \"%s\"",
                       table_config(f->tables[0])->channel);
        else
            log_fields(f->lg, LOG_LVL_INFO, NULL, "follower_connected",
                       "follower (notify): listening on the channels of %u tables", count);
        had_connection = true;

        follow(n, conn, &probe, err, sizeof err);
        PQfinish(conn);
        free(probe);
        if (atomic_load(&f->stop))
            break;
        pthread_mutex_lock(&f->mu);
        n->listened = 0;
        pthread_mutex_unlock(&f->mu);
        follow_lost(f, err);
    }
}

/* Whether t's channel is LISTENed to now.  Caller holds base.mu. */
static bool listens_locked(struct notify *n, struct table *t)
{
    int i = follow_index(&n->base, t);
    return n->base.listening && i >= 0 && (unsigned)i < n->listened;
}

static bool notify_ready(struct follower *f, struct table *t)
{
    struct notify *n = of(f);
    pthread_mutex_lock(&f->mu);
    bool ready = listens_locked(n, t);
    pthread_mutex_unlock(&f->mu);
    return ready;
}

/*
 * No COPY or catch-up without LISTEN on the server the read reaches: with
 * a multi-host conninfo two connections could land on different servers
 * (one a lagging standby), and LISTEN-first would prove nothing.  Checked
 * in the same locked section that reads the epoch, so a follower that
 * moves to another server afterwards starts a new epoch the read does not
 * cover.
 */
static bool same_listener(struct follower *f, struct table *t, PGconn *conn, uint64_t *epoch,
                          char *err, size_t errlen)
{
    struct notify *n = of(f);
    char mine[sizeof f->server_id];
    if (!loader_server_id(conn, mine, sizeof mine, err, errlen))
        return false;
    pthread_mutex_lock(&f->mu);
    bool ok = listens_locked(n, t);
    if (!ok)
        snprintf(err, errlen, "the follower is not listening: no COPY or catch-up without LISTEN");
    else
        ok = follow_same_server_locked(f, mine, err, errlen);
    *epoch = table_epoch(t);
    pthread_mutex_unlock(&f->mu);
    return ok;
}

static bool notify_ticket(struct follower *f, struct table *t, PGconn *conn,
                          struct follow_ticket *tk, char *err, size_t errlen)
{
    if (!same_listener(f, t, conn, &tk->epoch, err, errlen))
        return false;
    /* Before the COPY's snapshot: a position taken earlier is only more cautious. */
    if (f->cfg->feed_enabled)
        follow_feed_position(f, t, conn, tk->position, sizeof tk->position);
    return true;
}

static int notify_catch_up(struct follower *f, struct table *t, uint64_t *rows, char *err,
                           size_t errlen)
{
    if (!f->cfg->feed_enabled)
        return -1;
    return follow_feed_catch_up(f, t, same_listener, rows, err, errlen);
}

const struct follow_ops follow_notify_ops = {
    .method = SYNC_NOTIFY,
    .fresh_positions = false,
    .size = sizeof(struct notify),
    .run = notify_run,
    .ready = notify_ready,
    .ticket = notify_ticket,
    .catch_up = notify_catch_up,
};
