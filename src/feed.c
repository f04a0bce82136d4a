/*
 * libpq side of the change feed: positions, resumable reads and pruning of
 * sql/notify.sql's bloomguard_feed_log.  What makes a position safe is
 * argued in docs/feed.md; the SQL side (bloomguard_feed_floor,
 * bloomguard_feed_origin, the marks) keeps the rules, this file asks.
 */
#include "feed.h"

#include "decimal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static bool exec_cmd(PGconn *conn, const char *sql, const char *what, char *err, size_t errlen)
{
    PGresult *r = loader_exec(conn, sql, 0, NULL);
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
    char why[160];              /* set when not usable */
};

/*
 * Fill p for table (quoted, for regclass) and column.  The first query of a
 * REPEATABLE READ transaction takes its snapshot, so feed_read's checks and
 * its COPY see one state.  False on an error; a missing privilege is not an
 * error but a reason (p->why) the feed cannot be used.
 */
static bool probe(PGconn *conn, const char *qtbl, const char *column, struct probe *p,
                  char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    PGresult *r = loader_exec(conn, "SELECT to_regprocedure('bloomguard_feed_floor(regclass,name)') IS NOT NULL"
                              " AND to_regprocedure('bloomguard_feed_origin()') IS NOT NULL"
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
    r = loader_exec(conn,
                    "SELECT bloomguard_feed_floor($1::regclass, $2), t.relid IS NOT NULL, "
                    "t.colname = $2, t.triggers = bloomguard_feed_triggers($1::regclass), "
                    "pg_snapshot_xmin(pg_current_snapshot()), pg_snapshot_xmax(pg_current_snapshot()), "
                    "bloomguard_feed_origin(), $1::regclass::oid "
                    "FROM (SELECT 1) one LEFT JOIN bloomguard_feed_tables t "
                    "ON t.relid = $1::regclass", 2, params);
    if (PQresultStatus(r) != PGRES_TUPLES_OK && no_privilege(r)) {
        loader_set_error(p->why, sizeof p->why, "this role may not read the change feed "
                         "(SELECT bloomguard_feed_grant(role))", conn);
        PQclear(r);
        p->installed = false;
        return true;
    }
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1 || PQnfields(r) != 8) {
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
    char *qtbl = NULL, *qcol = NULL;
    struct probe p;
    *available = false;
    if (!loader_quote_table(conn, table, column, &qtbl, &qcol, err, errlen))
        return false;
    bool ok = probe(conn, qtbl, column, &p, err, errlen);
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
    PGresult *r = loader_exec(conn, "SELECT pg_snapshot_xmin(pg_current_snapshot()), "
                              "bloomguard_feed_origin(), " CURRENT_DB, 0, NULL);
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
static bool current_db(PGconn *conn, uint64_t *oid, char *err, size_t errlen)
{
    PGresult *r = loader_exec(conn, "SELECT " CURRENT_DB, 0, NULL);
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
static bool rewind_to_mark(PGconn *conn, const char *origin, uint64_t xmin, uint64_t *from,
                           bool *found, char *err, size_t errlen)
{
    char x[24];
    snprintf(x, sizeof x, "%" PRIu64, xmin);
    const char *params[2] = { origin, x };
    PGresult *r = loader_exec(conn, "SELECT max(snap_xmin) FROM bloomguard_feed_marks "
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
static bool copy_ids(PGconn *conn, const char *relid, uint64_t from, feed_id_fn fn, void *arg,
                     uint64_t *rows, char *err, size_t errlen)
{
    char sql[200];
    uint64_t n = 0;
    /* relid and from are numbers this file formatted: nothing to quote. */
    snprintf(sql, sizeof sql, "COPY (SELECT id FROM bloomguard_feed_log WHERE relid = %s "
             "AND xid >= '%" PRIu64 "'::xid8) TO STDOUT", relid, from);
    PGresult *r = loader_exec(conn, sql, 0, NULL);
    if (PQresultStatus(r) != PGRES_COPY_OUT) {
        loader_set_error(err, errlen, "cannot read the change feed", conn);
        PQclear(r);
        return false;
    }
    PQclear(r);
    for (;;) {
        char *buf = NULL;
        size_t idlen;
        int got = loader_copy_row(conn, &buf, &idlen);
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
    r = PQgetResult(conn);
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok)
        loader_set_error(err, errlen, "cannot read the change feed", conn);
    PQclear(r);
    while ((r = PQgetResult(conn)) != NULL)
        PQclear(r);
    if (rows)
        *rows = n;
    return ok;
}

bool feed_read(PGconn *conn, const char *table, const char *column, const char *since,
               bool resume, feed_id_fn fn, void *arg, char *next, uint64_t *rows, bool *too_old,
               char *err, size_t errlen)
{
    char *qtbl = NULL, *qcol = NULL;
    char origin[ORIGIN_MAX];
    uint64_t xmin, from, db, this_db = 0;
    struct probe p;
    bool in_tx = false, ok = false;

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
    if (!exec_cmd(conn, "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY",
                  "cannot start the change feed read", err, errlen))
        goto done;
    in_tx = true;
    if (!probe(conn, qtbl, column, &p, err, errlen) || !current_db(conn, &this_db, err, errlen))
        goto done;
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
            if (!rewind_to_mark(conn, origin, xmin, &from, &found, err, errlen))
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
        if (!rewind_to_mark(conn, origin, xmin, &from, &found, err, errlen))
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
    if (!copy_ids(conn, p.relid, from, fn, arg, rows, err, errlen))
        goto done;
    if (!exec_cmd(conn, "COMMIT", "cannot end the change feed read", err, errlen))
        goto done;
    in_tx = false;
    snprintf(next, FEED_POS_MAX, "%" PRIu64 "/%s/%" PRIu64, p.xmin, p.origin, this_db);
    ok = true;
done:
    if (in_tx && PQtransactionStatus(conn) != PQTRANS_ACTIVE) {
        PGresult *r = loader_exec(conn, "ROLLBACK", 0, NULL);
        PQclear(r);
    }
    free(qtbl);
    free(qcol);
    return ok;
}

bool feed_mark(PGconn *conn, char *err, size_t errlen)
{
    PGresult *r = loader_exec(conn, "SELECT bloomguard_feed_mark()", 0, NULL);
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
    PGresult *r = loader_exec(conn, "SELECT bloomguard_feed_prune(make_interval(secs => $1::float8))", 1, params);
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
