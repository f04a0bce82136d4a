/*
 * libpq side of the change feed: positions, resumable reads and pruning of
 * sql/notify.sql's bloomguard_feed_log.  What makes a position safe is
 * argued in docs/feed.md; the SQL side (bloomguard_feed_floor,
 * bloomguard_feed_origin, the marks) keeps the rules, this file asks.
 */
#include "feed.h"

#include "decimal.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "loader.h"

#define SQLSTATE_NO_PRIVILEGE "42501"
/*
 * A position is "<xmin>/<origin>/<database oid>".  An origin
 * ("<sysid>.<timeline>.<reset>") is about 50 bytes; xids are cluster-wide,
 * so the database rides along: a position from another database of the same
 * cluster (a snapshot moved between sidecars configured for different
 * databases) would otherwise resume as if its filter held this one's rows.
 */
#define ORIGIN_MAX 84
_Static_assert(ORIGIN_MAX + 2 * 21 <= FEED_POS_MAX, "a position holds an xmin, an origin and an oid");
#define CURRENT_DB "(SELECT oid FROM pg_database WHERE datname = current_database())"

static bool no_privilege(const PGresult *r)
{
    const char *st = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    return st != NULL && strcmp(st, SQLSTATE_NO_PRIVILEGE) == 0;
}

/* The connection a read runs on, and its bound (NULL: wait as long as it takes). */
struct link {
    PGconn *conn;
    struct feed_bound *bound;
};

/* One slice of waiting for conn's answer; see feed_exec. */
static bool await_slice(PGconn *conn, struct feed_bound *b, int *silent_ms)
{
    struct pollfd p = { .fd = PQsocket(conn), .events = POLLIN };
    if (p.fd < 0)
        return PQconsumeInput(conn) != 0;       /* no socket: libpq says what is wrong */
    int n = poll(&p, 1, FEED_SLICE_MS);
    if (n < 0 && errno != EINTR)
        return false;                           /* not spinning on a broken poll */
    if (n > 0)
        *silent_ms = 0;
    else if (n == 0 && (*silent_ms += FEED_SLICE_MS) >= b->stall_s * 1000) {
        /* Unread TLS bytes never reach poll: libpq gets its chance first. */
        if (PQconsumeInput(conn) == 0)
            return false;
        if (!PQisBusy(conn))
            return true;
        b->stalled = true;
        shutdown(p.fd, SHUT_RDWR);              /* libpq then reads its end: CONNECTION_BAD */
        (void)PQconsumeInput(conn);
        return false;
    }
    /* Every slice, not only when poll says so: TLS may hold bytes already read. */
    return PQconsumeInput(conn) != 0;
}

PGresult *feed_exec(PGconn *conn, struct feed_bound *b, const char *sql, int nparams,
                    const char *const *params)
{
    if (b == NULL) {
        if (sql == NULL)
            return PQgetResult(conn);
        return nparams > 0 ? PQexecParams(conn, sql, nparams, NULL, params, NULL, NULL, 0)
                           : PQexec(conn, sql);
    }
    if (sql != NULL) {
        int sent = nparams > 0 ? PQsendQueryParams(conn, sql, nparams, NULL, params, NULL, NULL, 0)
                               : PQsendQuery(conn, sql);
        if (!sent)
            return PQmakeEmptyPGresult(conn, PGRES_FATAL_ERROR);
    }
    PGresult *first = NULL, *r;
    int silent_ms = 0;
    for (;;) {
        while (PQisBusy(conn))
            if (!await_slice(conn, b, &silent_ms))
                return first != NULL ? first : PQmakeEmptyPGresult(conn, PGRES_FATAL_ERROR);
        if ((r = PQgetResult(conn)) == NULL)
            break;
        ExecStatusType st = PQresultStatus(r);
        if (first == NULL)
            first = r;
        else
            PQclear(r);
        if (st == PGRES_COPY_IN || st == PGRES_COPY_OUT || st == PGRES_COPY_BOTH)
            break;                              /* the rows are the caller's to read */
    }
    return first != NULL ? first : PQmakeEmptyPGresult(conn, PGRES_FATAL_ERROR);
}

int feed_copy_row(PGconn *conn, struct feed_bound *b, char **buf, size_t *len)
{
    int silent_ms = 0;
    for (;;) {
        int n = PQgetCopyData(conn, buf, 1);
        if (n > 0) {
            /* As loader_copy_row hands a row out: one line, unescaped in place. */
            size_t l = (size_t)n;
            if ((*buf)[l - 1] == '\n')
                l--;
            if (memchr(*buf, '\\', l) != NULL)
                l = loader_unescape(*buf, l);
            (*buf)[l] = '\0';
            *len = l;
            return 1;
        }
        if (n == -1)
            return 0;
        if (n < -1 || !await_slice(conn, b, &silent_ms))
            return -1;
    }
}

bool feed_bound_session(PGconn *conn, struct feed_bound *b, char *err, size_t errlen)
{
    char sql[64];
    snprintf(sql, sizeof sql, "SET lock_timeout = %d", b->stall_s * 2000 / 3);
    PGresult *r = feed_exec(conn, b, sql, 0, NULL);
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok && b->stalled)
        snprintf(err, errlen, "no answer in %d s (a silent network or a frozen proxy)", b->stall_s);
    else if (!ok)
        loader_set_error(err, errlen, "cannot set the session's lock_timeout", conn);
    PQclear(r);
    return ok;
}

static PGresult *run(struct link *l, const char *sql, int nparams, const char *const *params)
{
    return feed_exec(l->conn, l->bound, sql, nparams, params);
}

static bool exec_cmd(struct link *l, const char *sql, const char *what, char *err, size_t errlen)
{
    PGconn *conn = l->conn;
    PGresult *r = run(l, sql, 0, NULL);
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok)
        loader_set_error(err, errlen, what, conn);
    PQclear(r);
    return ok;
}

/* A number PostgreSQL returned as text: plain decimal, within 64 bits. */
static bool parse_u64(const char *s, uint64_t *out)
{
    return decimal_parse_u64(s, out) == DECIMAL_OK;
}

/* What one query tells about the feed of a table, in the caller's snapshot. */
struct probe {
    bool installed;
    bool registered;            /* a bloomguard_feed_tables row for the table */
    bool column_ok;             /* ... for this column */
    bool triggers_ok;           /* ... and its triggers unchanged since bloomguard_watch */
    bool has_floor;
    uint64_t floor;             /* bloomguard_feed_floor */
    uint64_t xmin, xmax;        /* of the snapshot */
    char origin[ORIGIN_MAX];
    char relid[16];
    char shape[33];             /* LOADER_SHAPE_SQL of the table and column */
    char why[160];              /* set when not usable */
};

/*
 * Fill p for table (quoted, for regclass) and column.  The first query of a
 * REPEATABLE READ transaction takes its snapshot, so feed_read's checks and
 * its COPY see one state.  False on an error; a missing privilege is not an
 * error but a reason (p->why) the feed cannot be used.
 */
static bool probe(struct link *l, const char *qtbl, const char *column, struct probe *p,
                  char *err, size_t errlen)
{
    PGconn *conn = l->conn;
    memset(p, 0, sizeof *p);
    PGresult *r = run(l, "SELECT to_regprocedure('bloomguard_feed_floor(regclass,name)') "
                      "IS NOT NULL AND to_regprocedure('bloomguard_feed_origin()') IS NOT NULL"
                      " AND to_regclass('bloomguard_feed_log') IS NOT NULL", 0, NULL);
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
        loader_set_error(err, errlen, "cannot look for the change feed", conn);
        PQclear(r);
        return false;
    }
    p->installed = strcmp(PQgetvalue(r, 0, 0), "t") == 0;
    PQclear(r);
    if (!p->installed) {
        snprintf(p->why, sizeof p->why, "the change feed is not installed in this database "
                 "(sql/notify.sql)");
        return true;
    }
    const char *params[2] = { qtbl, column };
    r = run(l, "SELECT bloomguard_feed_floor($1::regclass, $2), t.relid IS NOT NULL, "
            "t.colname = $2, t.triggers = bloomguard_feed_triggers($1::regclass), "
            "pg_snapshot_xmin(pg_current_snapshot()), pg_snapshot_xmax(pg_current_snapshot()), "
            "bloomguard_feed_origin(), $1::regclass::oid, "
            LOADER_SHAPE_SQL("$1::regclass::oid", "$2") " "
            "FROM (SELECT 1) one LEFT JOIN bloomguard_feed_tables t "
            "ON t.relid = $1::regclass", 2, params);
    if (PQresultStatus(r) != PGRES_TUPLES_OK && no_privilege(r)) {
        loader_set_error(p->why, sizeof p->why, "this role may not read the change feed "
                         "(SELECT bloomguard_feed_grant(role))", conn);
        PQclear(r);
        p->installed = false;
        return true;
    }
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1 || PQnfields(r) != 9) {
        loader_set_error(err, errlen, "cannot read the change feed's state", conn);
        PQclear(r);
        return false;
    }
    p->has_floor = !PQgetisnull(r, 0, 0) && parse_u64(PQgetvalue(r, 0, 0), &p->floor);
    p->registered = strcmp(PQgetvalue(r, 0, 1), "t") == 0;
    p->column_ok = strcmp(PQgetvalue(r, 0, 2), "t") == 0;
    p->triggers_ok = strcmp(PQgetvalue(r, 0, 3), "t") == 0;
    bool ok = parse_u64(PQgetvalue(r, 0, 4), &p->xmin) && parse_u64(PQgetvalue(r, 0, 5), &p->xmax);
    ok = ok && strlen(PQgetvalue(r, 0, 6)) < sizeof p->origin;
    snprintf(p->origin, sizeof p->origin, "%s", PQgetvalue(r, 0, 6));
    snprintf(p->relid, sizeof p->relid, "%s", PQgetvalue(r, 0, 7));
    snprintf(p->shape, sizeof p->shape, "%s", PQgetvalue(r, 0, 8));
    PQclear(r);
    if (!ok) {
        snprintf(err, errlen, "cannot read the change feed's state: unexpected snapshot");
        return false;
    }
    if (!p->registered)
        snprintf(p->why, sizeof p->why, "the table is not watched with the change feed "
                 "(SELECT bloomguard_watch(table, column))");
    else if (!p->column_ok)
        snprintf(p->why, sizeof p->why, "the table's change feed is of another column");
    else if (!p->triggers_ok)
        snprintf(p->why, sizeof p->why, "the table's bloomguard_notify trigger was disabled, "
                 "replaced or a partition changed since bloomguard_watch: run it again");
    else if (!p->has_floor)
        snprintf(p->why, sizeof p->why, "the change feed has no floor for the table");
    return true;
}

static bool usable(const struct probe *p)
{
    return p->installed && p->has_floor;
}

bool feed_available(PGconn *conn, const char *table, const char *column, bool *available,
                    char *err, size_t errlen)
{
    return feed_available_bounded(conn, NULL, table, column, available, err, errlen);
}

bool feed_available_bounded(PGconn *conn, struct feed_bound *bound, const char *table,
                            const char *column, bool *available, char *err, size_t errlen)
{
    char *qtbl = NULL, *qcol = NULL;
    struct probe p;
    *available = false;
    if (!loader_quote_table(conn, table, column, &qtbl, &qcol, err, errlen))
        return false;
    struct link l = { conn, bound };
    bool ok = probe(&l, qtbl, column, &p, err, errlen);
    if (ok) {
        *available = usable(&p);
        if (!*available)
            snprintf(err, errlen, "%s", p.why);
    }
    free(qtbl);
    free(qcol);
    return ok;
}

bool feed_position(PGconn *conn, char *pos, char *err, size_t errlen)
{
    PGresult *r = PQexec(conn, "SELECT pg_snapshot_xmin(pg_current_snapshot()), "
                               "bloomguard_feed_origin(), " CURRENT_DB);
    bool ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 && PQnfields(r) == 3
              && strlen(PQgetvalue(r, 0, 1)) < ORIGIN_MAX;
    if (!ok)
        loader_set_error(err, errlen, "cannot read the change feed position", conn);
    else
        snprintf(pos, FEED_POS_MAX, "%s/%s/%s", PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1),
                 PQgetvalue(r, 0, 2));
    PQclear(r);
    return ok;
}

/* "<xmin>/<origin>/<db>" into its parts (origin into a buffer); false when malformed. */
static bool split_pos(const char *pos, uint64_t *xmin, char origin[ORIGIN_MAX], uint64_t *db)
{
    char num[32];
    const char *slash = strchr(pos, '/');
    const char *last = strrchr(pos, '/');
    if (slash == NULL || slash == pos || (size_t)(slash - pos) >= sizeof num || last == slash
        || last == slash + 1 || (size_t)(last - slash - 1) >= ORIGIN_MAX || last[1] == '\0')
        return false;
    memcpy(num, pos, (size_t)(slash - pos));
    num[slash - pos] = '\0';
    memcpy(origin, slash + 1, (size_t)(last - slash - 1));
    origin[last - slash - 1] = '\0';
    return parse_u64(num, xmin) && parse_u64(last + 1, db);
}

/* The OID of the connection's database. */
static bool current_db(struct link *l, uint64_t *oid, char *err, size_t errlen)
{
    PGconn *conn = l->conn;
    PGresult *r = run(l, "SELECT " CURRENT_DB, 0, NULL);
    bool ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1
              && parse_u64(PQgetvalue(r, 0, 0), oid);
    if (!ok)
        loader_set_error(err, errlen, "cannot read the database's oid", conn);
    PQclear(r);
    return ok;
}

/* The system identifier part of an origin ("<sysid>.<timeline>.<reset>"). */
static size_t sysid_len(const char *origin)
{
    return strcspn(origin, ".");
}

/*
 * Where to resume a position of another origin (a crash or a failover
 * since): the newest prune mark of the position's own origin at or below
 * it.  Such a mark that is still visible survived the crash or was
 * replicated, and with it every commit and abort before its snapshot, so no
 * transaction id below its xmin can be handed out again.  Sets *found.
 */
static bool rewind_to_mark(struct link *l, const char *origin, uint64_t xmin, uint64_t *from,
                           bool *found, char *err, size_t errlen)
{
    PGconn *conn = l->conn;
    char x[24];
    snprintf(x, sizeof x, "%" PRIu64, xmin);
    const char *params[2] = { origin, x };
    PGresult *r = run(l, "SELECT max(snap_xmin) FROM bloomguard_feed_marks "
                      "WHERE origin = $1 AND snap_xmin <= $2::xid8", 2, params);
    bool ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
    if (!ok)
        loader_set_error(err, errlen, "cannot read the change feed's marks", conn);
    else
        *found = !PQgetisnull(r, 0, 0) && parse_u64(PQgetvalue(r, 0, 0), from);
    PQclear(r);
    return ok;
}

/* The COPY of the log rows at or after from, streamed to fn. */
static bool copy_ids(struct link *l, const char *relid, uint64_t from, feed_id_fn fn, void *arg,
                     uint64_t *rows, char *err, size_t errlen)
{
    PGconn *conn = l->conn;
    char sql[200];
    uint64_t n = 0;
    /* relid and from are numbers this file formatted: nothing to quote. */
    snprintf(sql, sizeof sql, "COPY (SELECT id FROM bloomguard_feed_log WHERE relid = %s "
             "AND xid >= '%" PRIu64 "'::xid8) TO STDOUT", relid, from);
    PGresult *r = run(l, sql, 0, NULL);
    if (PQresultStatus(r) != PGRES_COPY_OUT) {
        loader_set_error(err, errlen, "cannot read the change feed", conn);
        PQclear(r);
        return false;
    }
    PQclear(r);
    for (;;) {
        char *buf = NULL;
        size_t idlen;
        int got = l->bound != NULL ? feed_copy_row(conn, l->bound, &buf, &idlen)
                                   : loader_copy_row(conn, &buf, &idlen);
        if (got == 0)
            break;
        if (got < 0) {
            loader_set_error(err, errlen, "cannot read the change feed", conn);
            return false;
        }
        bool more = fn(arg, buf, idlen);
        PQfreemem(buf);
        n++;
        if (!more) {
            snprintf(err, errlen, "change feed read stopped");
            return false;
        }
    }
    /* The COPY's own result, then nothing: waited for as any answer. */
    r = run(l, NULL, 0, NULL);
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok)
        loader_set_error(err, errlen, "cannot read the change feed", conn);
    PQclear(r);
    if (rows)
        *rows = n;
    return ok;
}

bool feed_read(PGconn *conn, struct feed_bound *bound, const char *table, const char *column,
               const char *since, bool resume, feed_id_fn fn, void *arg, char *next,
               uint64_t *rows, bool *too_old, char *shape, char *err, size_t errlen)
{
    char *qtbl = NULL, *qcol = NULL;
    char origin[ORIGIN_MAX];
    uint64_t xmin, from, db, this_db = 0;
    struct probe p;
    bool in_tx = false, ok = false;
    struct link l = { conn, bound };

    *too_old = false;
    if (rows)
        *rows = 0;
    if (PQtransactionStatus(conn) != PQTRANS_IDLE) {
        snprintf(err, errlen, "change feed read needs a connection outside any transaction");
        return false;
    }
    if (!split_pos(since, &xmin, origin, &db)) {
        *too_old = true;
        snprintf(err, errlen, "not a change feed position: \"%.40s\"", since);
        return true;
    }
    if (!loader_quote_table(conn, table, column, &qtbl, &qcol, err, errlen))
        return false;
    /*
     * One snapshot for the checks and the COPY: a prune that commits after
     * it cannot take rows away from this read, and next is that snapshot's
     * xmin, below every transaction the COPY might not have seen.
     */
    if (!exec_cmd(&l, "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY",
                  "cannot start the change feed read", err, errlen))
        goto done;
    in_tx = true;
    if (!probe(&l, qtbl, column, &p, err, errlen) || !current_db(&l, &this_db, err, errlen))
        goto done;
    if (shape != NULL)
        snprintf(shape, FEED_SHAPE_MAX, "%s", p.shape);
    from = xmin;
    if (usable(&p) && db != this_db) {
        snprintf(p.why, sizeof p.why, "the position is from another database");
        p.has_floor = false;
    }
    if (usable(&p) && strcmp(origin, p.origin) != 0) {
        bool found = false;
        size_t n = sysid_len(origin);
        if (n != sysid_len(p.origin) || strncmp(origin, p.origin, n) != 0) {
            snprintf(p.why, sizeof p.why, "the position is from another database cluster");
        } else {
            if (!rewind_to_mark(&l, origin, xmin, &from, &found, err, errlen))
                goto done;
            if (!found)
                snprintf(p.why, sizeof p.why, "the server crashed or failed over since the "
                         "position, and no prune mark from before is left to resume from");
        }
        if (!found)
            p.has_floor = false;
    } else if (usable(&p) && resume) {
        /* Same origin: but is it the same history?  Only a mark of it says so. */
        bool found = false;
        if (!rewind_to_mark(&l, origin, xmin, &from, &found, err, errlen))
            goto done;
        if (!found) {
            snprintf(p.why, sizeof p.why, "no mark of the position's history at or before it is "
                     "in this database (restored from a backup?, or none written yet)");
            p.has_floor = false;
        }
    }
    if (usable(&p) && from < p.floor) {
        snprintf(p.why, sizeof p.why, "the position (%" PRIu64 ") is older than the change feed "
                 "keeps (%" PRIu64 "): pruned, or the table was watched after it", from, p.floor);
        p.has_floor = false;
    }
    if (usable(&p) && from > p.xmax) {
        snprintf(p.why, sizeof p.why, "the position (%" PRIu64 ") is ahead of the server (%"
                 PRIu64 ")", from, p.xmax);
        p.has_floor = false;
    }
    if (!usable(&p)) {
        *too_old = true;
        snprintf(err, errlen, "%s", p.why);
        ok = true;
        goto done;
    }
    if (!copy_ids(&l, p.relid, from, fn, arg, rows, err, errlen))
        goto done;
    if (!exec_cmd(&l, "COMMIT", "cannot end the change feed read", err, errlen))
        goto done;
    in_tx = false;
    snprintf(next, FEED_POS_MAX, "%" PRIu64 "/%s/%" PRIu64, p.xmin, p.origin, this_db);
    ok = true;
done:
    if (in_tx && PQtransactionStatus(conn) != PQTRANS_ACTIVE) {
        PGresult *r = run(&l, "ROLLBACK", 0, NULL);
        PQclear(r);
    }
    if (bound != NULL && bound->stalled)
        snprintf(err, errlen, "no answer in %d s (a silent network or a frozen proxy): the "
                 "connection is given up", bound->stall_s);
    free(qtbl);
    free(qcol);
    return ok;
}

bool feed_mark(PGconn *conn, char *err, size_t errlen)
{
    PGresult *r = PQexec(conn, "SELECT bloomguard_feed_mark()");
    bool ok = PQresultStatus(r) == PGRES_TUPLES_OK;
    if (!ok)
        loader_set_error(err, errlen, "cannot record a mark of the change feed", conn);
    PQclear(r);
    return ok;
}

bool feed_prune(PGconn *conn, double retention_seconds, uint64_t *deleted,
                char *err, size_t errlen)
{
    char secs[40];
    if (!(retention_seconds >= 0)) {
        snprintf(err, errlen, "the change feed retention must be 0 or more seconds");
        return false;
    }
    snprintf(secs, sizeof secs, "%.6f", retention_seconds);
    const char *params[1] = { secs };
    PGresult *r = PQexecParams(conn, "SELECT bloomguard_feed_prune(make_interval(secs => $1::float8))",
                               1, NULL, params, NULL, NULL, 0);
    bool ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
    uint64_t n = 0;
    if (!ok)
        loader_set_error(err, errlen, "cannot prune the change feed", conn);
    else if (!parse_u64(PQgetvalue(r, 0, 0), &n)) {
        snprintf(err, errlen, "cannot prune the change feed: unexpected answer");
        ok = false;
    }
    PQclear(r);
    if (ok && deleted)
        *deleted = n;
    return ok;
}
