/*
 * libpq side of loading: COPY of one column, row by row, straight into a
 * filter.  Nothing here logs (but libpq's notices, passed on) or keeps state
 * between calls.
 */
#include "loader.h"

#include "log.h"
#include "monoclock.h"
#include "pgerror.h"
#include "spell.h"
#include "xidsnap.h"

#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* "what: message" into err; with a code, cut short enough that its tag fits whole. */
static void set_error(char *err, size_t errlen, const char *what, PGconn *conn,
                      const char *code)
{
    const char *msg = conn ? PQerrorMessage(conn) : "";
    size_t n = strlen(msg);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
        n--;
    size_t tag = code ? sizeof " (SQLSTATE 00000)" - 1 : 0;
    size_t cap = errlen > tag ? errlen - tag : errlen;
    snprintf(err, cap, "%s%s%.*s", what, n ? ": " : "", (int)n, msg);
    pgerror_tag(err, errlen, code);
}

void loader_set_error(char *err, size_t errlen, const char *what, PGconn *conn)
{
    set_error(err, errlen, what, conn, pgerror_guess_connect(conn ? PQerrorMessage(conn) : NULL));
}

void loader_set_result_error(char *err, size_t errlen, const char *what, PGconn *conn,
                             const PGresult *r)
{
    const char *code = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    if (code == NULL || code[0] == '\0')
        loader_set_error(err, errlen, what, conn);
    else
        set_error(err, errlen, what, conn, code);
}

bool loader_command(PGconn *conn, const char *sql, ExecStatusType want, const char *what,
                    char *err, size_t errlen)
{
    PGresult *r = PQexec(conn, sql);
    bool ok = PQresultStatus(r) == want;
    if (!ok)
        loader_set_result_error(err, errlen, what, conn, r);
    PQclear(r);
    return ok;
}

/*
 * libpq's notices and asynchronous errors ("FATAL:  terminating connection
 * due to administrator command") go through the daemon's log format and
 * priorities instead of raw onto stderr.
 */
static void notice_to_log(void *arg, const char *message)
{
    const struct config *cfg = arg;     /* the connection's, for [log] format */
    static const struct { const char *prefix; enum log_level level; } sev[] = {
        { "PANIC:", LOG_LVL_ERROR }, { "FATAL:", LOG_LVL_ERROR }, { "ERROR:", LOG_LVL_ERROR },
        { "WARNING:", LOG_LVL_WARN }, { "NOTICE:", LOG_LVL_INFO }, { "INFO:", LOG_LVL_INFO },
        { "LOG:", LOG_LVL_INFO }, { "DEBUG:", LOG_LVL_DEBUG },
    };
    enum log_level level = LOG_LVL_WARN;
    for (size_t i = 0; i < sizeof sev / sizeof sev[0]; i++)
        if (strncmp(message, sev[i].prefix, strlen(sev[i].prefix)) == 0)
            level = sev[i].level;
    size_t n = strlen(message);
    while (n > 0 && (message[n - 1] == '\n' || message[n - 1] == ' '))
        n--;
    log_msg_format(cfg ? cfg->log_format : LOG_FORMAT_TEXT, level, "postgres: %.*s", (int)n,
                   message);
}

static PGconn *connect_as(const struct config *cfg, const char *app, bool replication, char *err,
                          size_t errlen)
{
    /*
     * Later entries win; conninfo (expanded from dbname) comes last, then
     * replication, which a conninfo must not turn off.  TCP keepalives
     * notice a dead server in about 25 s instead of the kernel's two hours,
     * so a follower on a vanished network reconnects.
     */
    const char *keys[] = { "connect_timeout", "keepalives", "keepalives_idle",
                           "keepalives_interval", "keepalives_count",
                           "fallback_application_name", "target_session_attrs",
                           "dbname", replication ? "replication" : NULL, NULL };
    /* Followers need the primary, and every COPY must read the followers' server. */
    const char *vals[] = { "10", "1", "10", "5", "3", app,
                           cfg->sync_enabled ? "primary" : "any", cfg->conninfo,
                           "database", NULL };
    PGconn *conn = PQconnectdbParams(keys, vals, 1);
    if (conn == NULL) {
        snprintf(err, errlen, "cannot connect to PostgreSQL: out of memory");
        return NULL;
    }
    if (PQstatus(conn) != CONNECTION_OK) {
        loader_set_error(err, errlen, "cannot connect to PostgreSQL", conn);
        PQfinish(conn);
        return NULL;
    }
    PQsetNoticeProcessor(conn, notice_to_log, (void *)cfg);
    /*
     * No CONTEXT lines in error texts: they quote our own queries' internals
     * ("unnamed portal parameter $1 = '...'"), never what an operator fixes.
     */
    PQsetErrorContextVisibility(conn, PQSHOW_CONTEXT_NEVER);
    /*
     * One text form for an ID, whatever the server's or the role's defaults:
     * COPY and sql/notify.sql's trigger (which pins the same settings with
     * SET clauses) must render every ID identically, in UTF-8.  Keep this
     * list and the trigger's in step.
     */
    if (!loader_command(conn, LOADER_SESSION_SETTINGS, PGRES_COMMAND_OK,
                        "cannot set the session's encoding and formats", err, errlen)) {
        PQfinish(conn);
        return NULL;
    }
    return conn;
}

PGconn *loader_connect(const struct config *cfg, char *err, size_t errlen)
{
    return connect_as(cfg, "bloomguard", false, err, errlen);
}

PGconn *loader_connect_as(const struct config *cfg, const char *app, char *err, size_t errlen)
{
    return connect_as(cfg, app, false, err, errlen);
}

PGconn *loader_connect_replication(const struct config *cfg, char *err, size_t errlen)
{
    return connect_as(cfg, "bloomguard logical", true, err, errlen);
}

bool loader_server_id(PGconn *conn, char *out, size_t outlen, char *err, size_t errlen)
{
    PGresult *r = PQexec(conn, "SELECT pg_is_in_recovery(), pg_postmaster_start_time(), "
                               "coalesce(inet_server_addr()::text, 'local'), "
                               "coalesce(inet_server_port(), 0), current_database()");
    bool ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 && PQnfields(r) == 5;
    if (!ok)
        loader_set_result_error(err, errlen, "cannot identify the server", conn, r);
    else if (strcmp(PQgetvalue(r, 0, 0), "t") == 0) {
        snprintf(err, errlen, "the server is a standby (in recovery): bloomguard needs the primary");
        ok = false;
    } else
        snprintf(out, outlen, "started %s, address %s port %s, database %s", PQgetvalue(r, 0, 1),
                 PQgetvalue(r, 0, 2), PQgetvalue(r, 0, 3), PQgetvalue(r, 0, 4));
    PQclear(r);
    return ok;
}

bool loader_quote_names(PGconn *conn, const struct filter_config *fc, char **tbl, char **col,
                        char *err, size_t errlen)
{
    return loader_quote_table(conn, fc->table, fc->column, tbl, col, err, errlen);
}

bool loader_quote_table(PGconn *conn, const char *table, const char *column, char **tbl,
                        char **col, char *err, size_t errlen)
{
    char *schema = NULL, *name = NULL, *c = NULL, *out = NULL;
    const char *dot = strchr(table, '.');

    *tbl = *col = NULL;
    if (dot != NULL) {
        schema = PQescapeIdentifier(conn, table, (size_t)(dot - table));
        name = PQescapeIdentifier(conn, dot + 1, strlen(dot + 1));
    } else {
        name = PQescapeIdentifier(conn, table, strlen(table));
    }
    c = PQescapeIdentifier(conn, column, strlen(column));
    if (name == NULL || c == NULL || (dot != NULL && schema == NULL)) {
        loader_set_error(err, errlen, "cannot quote table or column name", conn);
        goto fail;
    }
    size_t n = strlen(name) + (schema ? strlen(schema) + 1 : 0) + 1;
    out = malloc(n);
    *col = strdup(c);
    if (out == NULL || *col == NULL) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    snprintf(out, n, "%s%s%s", schema ? schema : "", schema ? "." : "", name);
    *tbl = out;
    PQfreemem(schema);
    PQfreemem(name);
    PQfreemem(c);
    return true;

fail:
    free(out);
    free(*col);
    *col = NULL;
    PQfreemem(schema);
    PQfreemem(name);
    PQfreemem(c);
    return false;
}

bool loader_identify(PGconn *conn, const struct filter_config *fc, struct table_ident *out,
                     char *err, size_t errlen)
{
    char *tbl = NULL, *col = NULL;
    memset(out, 0, sizeof *out);
    if (!loader_quote_names(conn, fc, &tbl, &col, err, errlen))
        return false;
    /* The column by its name as configured (not quoted: attname is the bare name). */
    const char *params[2] = { tbl, fc->column };
    PGresult *r = PQexecParams(conn,
        "WITH RECURSIVE a AS (SELECT attrelid, attnum, atttypid, atttypmod, attcollation "
        "                       FROM pg_attribute WHERE attrelid = $1::regclass AND attname = $2 "
        "                        AND attnum > 0 AND NOT attisdropped), "
        " b(oid, typmod) AS (SELECT atttypid, atttypmod FROM a "
        "                    UNION ALL SELECT ty.typbasetype, ty.typtypmod FROM b "
        "                    JOIN pg_type ty ON ty.oid = b.oid WHERE ty.typtype = 'd') "
        "SELECT a.attrelid, a.attnum, a.atttypid, "
        "       (SELECT b.oid FROM b JOIN pg_type ty ON ty.oid = b.oid WHERE ty.typtype <> 'd'), "
        "       (SELECT b.typmod FROM b JOIN pg_type ty ON ty.oid = b.oid WHERE ty.typtype <> 'd'), "
        "       coalesce((SELECT collisdeterministic FROM pg_collation WHERE oid = a.attcollation), true), "
        "       (SELECT oid FROM pg_database WHERE datname = current_database()), "
        "       (SELECT system_identifier FROM pg_control_system()), "
        "       format_type(a.atttypid, a.atttypmod), "
        "       " LOADER_SHAPE_SQL("$1::regclass::oid", "$2") " "
        "  FROM a",
        2, NULL, params, NULL, NULL, 0);
    bool ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQnfields(r) == 10;
    if (!ok)
        loader_set_result_error(err, errlen, "cannot read the table's column", conn, r);
    else if (PQntuples(r) != 1) {
        snprintf(err, errlen, "table %s has no column %s", fc->table, fc->column);
        pgerror_tag(err, errlen, "42703");
        ok = false;
    } else {
        out->relid = (uint32_t)strtoul(PQgetvalue(r, 0, 0), NULL, 10);
        out->attnum = atoi(PQgetvalue(r, 0, 1));
        out->typid = (uint32_t)strtoul(PQgetvalue(r, 0, 2), NULL, 10);
        out->base_typid = (uint32_t)strtoul(PQgetvalue(r, 0, 3), NULL, 10);
        out->typmod = (int32_t)atoi(PQgetvalue(r, 0, 4));
        out->deterministic = strcmp(PQgetvalue(r, 0, 5), "t") == 0;
        out->dboid = (uint32_t)strtoul(PQgetvalue(r, 0, 6), NULL, 10);
        snprintf(out->sysid, sizeof out->sysid, "%s", PQgetvalue(r, 0, 7));
        snprintf(out->type_name, sizeof out->type_name, "%s", PQgetvalue(r, 0, 8));
        snprintf(out->shape, sizeof out->shape, "%s", PQgetvalue(r, 0, 9));
        out->spell = spell_type_of(out->base_typid, out->typmod, out->deterministic);
    }
    PQclear(r);
    free(tbl);
    free(col);
    return ok;
}

static bool query_u64(PGconn *conn, const char *sql, int nparams, const char *param,
                      int64_t *out, char *err, size_t errlen)
{
    PGresult *r = PQexecParams(conn, sql, nparams, NULL, &param, NULL, NULL, 0);
    bool ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
    if (!ok)
        loader_set_result_error(err, errlen, "cannot read the table", conn, r);
    else
        *out = PQgetisnull(r, 0, 0) ? -1 : strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    return ok;
}

bool loader_estimate_rows(PGconn *conn, const struct filter_config *fc, uint64_t *rows,
                          char *err, size_t errlen)
{
    char *tbl = NULL, *col = NULL, *sql = NULL;
    int64_t n = -1;
    bool ok = false;

    if (!loader_quote_names(conn, fc, &tbl, &col, err, errlen))
        return false;
    /*
     * Fails cleanly (no such table, no permission) before any COPY starts.
     * The larger of the last ANALYZE's count and the live rows the
     * statistics have counted since: inserts after an ANALYZE raise the
     * second at once.
     */
    if (!query_u64(conn, "SELECT CASE WHEN c.reltuples < 0 THEN -1 ELSE greatest("
                   "c.reltuples::bigint, pg_catalog.pg_stat_get_live_tuples(c.oid)) END "
                   "FROM pg_catalog.pg_class c WHERE c.oid = $1::regclass",
                   1, tbl, &n, err, errlen))
        goto done;
    if (n < 0) {
        /* Never analysed: reltuples is -1, count for real. */
        size_t len = strlen(tbl) + 64;
        sql = malloc(len);
        if (sql == NULL) {
            snprintf(err, errlen, "out of memory");
            goto done;
        }
        snprintf(sql, len, "SELECT count(*) FROM %s", tbl);
        if (!query_u64(conn, sql, 0, NULL, &n, err, errlen))
            goto done;
    }
    *rows = n > 0 ? (uint64_t)n : 0;
    ok = true;
done:
    free(sql);
    free(tbl);
    free(col);
    return ok;
}

size_t loader_unescape(char *s, size_t len)
{
    size_t i = 0, o = 0;
    while (i < len) {
        char ch = s[i++];
        if (ch != '\\' || i == len) {
            s[o++] = ch;
            continue;
        }
        char e = s[i++];
        switch (e) {
        case 'b': s[o++] = '\b'; break;
        case 'f': s[o++] = '\f'; break;
        case 'n': s[o++] = '\n'; break;
        case 'r': s[o++] = '\r'; break;
        case 't': s[o++] = '\t'; break;
        case 'v': s[o++] = '\v'; break;
        case 'x': {
            unsigned v = 0, d = 0;
            while (d < 2 && i < len && strchr("0123456789abcdefABCDEF", s[i]) && s[i]) {
                char h = s[i++];
                v = v * 16 + (unsigned)(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
                d++;
            }
            s[o++] = d ? (char)v : 'x';
            break;
        }
        default:
            if (e >= '0' && e <= '7') {
                unsigned v = (unsigned)(e - '0'), d = 1;
                while (d < 3 && i < len && s[i] >= '0' && s[i] <= '7') {
                    v = v * 8 + (unsigned)(s[i++] - '0');
                    d++;
                }
                s[o++] = (char)v;
            } else {
                s[o++] = e;         /* \\ and any other escaped char */
            }
        }
    }
    return o;
}

/* A row PQgetCopyData returned (n > 0), as loader_copy_row hands it out. */
static void copy_row_text(char *buf, int n, size_t *len)
{
    /* Text format: one row per message, ending in '\n'. */
    size_t l = (size_t)n;
    if (l > 0 && buf[l - 1] == '\n')
        l--;
    if (memchr(buf, '\\', l) != NULL)
        l = loader_unescape(buf, l);
    buf[l] = '\0';
    *len = l;
}

int loader_copy_row(PGconn *conn, char **buf, size_t *len)
{
    int n = PQgetCopyData(conn, buf, 0);
    if (n == -1)
        return 0;
    if (n < 0)
        return -1;
    copy_row_text(*buf, n, len);
    return 1;
}

static bool stopped(atomic_bool *stop)
{
    return stop != NULL && atomic_load_explicit(stop, memory_order_relaxed);
}

/*
 * Wait until conn's socket has bytes for libpq, at most LOADER_POLL_MS,
 * and read them in.  False when libpq cannot read (the connection is
 * broken: PQerrorMessage says why).
 */
static bool await_input(PGconn *conn)
{
    struct pollfd p = { .fd = PQsocket(conn), .events = POLLIN };
    if (p.fd < 0)
        return PQconsumeInput(conn) != 0;   /* no socket: let libpq say what is wrong */
    (void)poll(&p, 1, LOADER_POLL_MS);      /* EINTR or a timeout: consuming nothing is fine */
    return PQconsumeInput(conn) != 0;
}

/*
 * loader_copy_row without blocking for more than LOADER_POLL_MS at a time:
 * the server may take seconds per row (a slow view) or wait for a lock
 * before the first, and a stop must not wait with it.  -2 once *stop is
 * true; otherwise as loader_copy_row.
 */
static int copy_row_stoppable(PGconn *conn, char **buf, size_t *len, atomic_bool *stop)
{
    for (;;) {
        if (stopped(stop))
            return -2;
        int n = PQgetCopyData(conn, buf, 1);
        if (n > 0) {
            copy_row_text(*buf, n, len);
            return 1;
        }
        if (n == -1)
            return 0;
        if (n < -1 || !await_input(conn))
            return -1;
    }
}

/*
 * PQexec of one statement, waiting at most LOADER_POLL_MS at a time for its
 * answer so that a stop ends the wait.  Returns the first result (a COPY's
 * PGRES_COPY_OUT, or the statement's; the caller PQclears it), NULL with
 * *interrupted set when stop came first (the statement may still run: the
 * caller PQfinishes the connection), NULL when libpq failed.
 */
static PGresult *exec_stoppable(PGconn *conn, const char *sql, atomic_bool *stop,
                                bool *interrupted)
{
    *interrupted = false;
    if (!PQsendQuery(conn, sql))
        return NULL;
    while (PQisBusy(conn)) {
        if (stopped(stop)) {
            *interrupted = true;
            return NULL;
        }
        if (!await_input(conn))
            return NULL;
    }
    return PQgetResult(conn);
}

PGresult *loader_exec_stoppable(PGconn *conn, const char *sql, atomic_bool *stop,
                                bool *interrupted)
{
    PGresult *r = exec_stoppable(conn, sql, stop, interrupted);
    /* One statement: the rest (its end) drained, so the connection can run the next. */
    if (r != NULL)
        for (PGresult *x; (x = PQgetResult(conn)) != NULL;)
            PQclear(x);
    return r;
}


/* BEGIN REPEATABLE READ in an exported snapshot, for a COPY that must start exactly there. */
static bool in_snapshot(PGconn *conn, const char *snapshot, char *err, size_t errlen)
{
    char *lit = PQescapeLiteral(conn, snapshot, strlen(snapshot));
    if (lit == NULL) {
        loader_set_error(err, errlen, "cannot quote the snapshot name", conn);
        return false;
    }
    char sql[160];
    snprintf(sql, sizeof sql, "BEGIN ISOLATION LEVEL REPEATABLE READ; SET TRANSACTION SNAPSHOT %s",
             lit);
    PQfreemem(lit);
    return loader_command(conn, sql, PGRES_COMMAND_OK,
                          "cannot import the replication slot's snapshot", err, errlen);
}

/*
 * BEGIN REPEATABLE READ in a snapshot that sees must_see[0, n) finished:
 * they committed (the stream says so) but may still be leaving the proc
 * array, a moment on a busy server, or until a synchronous standby answers.
 */
static bool seeing(PGconn *conn, const uint32_t *must_see, size_t n, atomic_bool *stop,
                   char *err, size_t errlen)
{
    double until = monoclock_seconds() + LOADER_VISIBLE_WAIT_S;
    for (;;) {
        PGresult *r = PQexec(conn, "BEGIN ISOLATION LEVEL REPEATABLE READ; "
                                   "SELECT pg_catalog.pg_current_snapshot()::text");
        if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
            loader_set_result_error(err, errlen, "cannot take the COPY's snapshot", conn, r);
            PQclear(r);
            return false;
        }
        uint32_t first;
        bool all = xidsnap_sees_all(PQgetvalue(r, 0, 0), must_see, n, &first);
        PQclear(r);
        if (all)
            return true;
        if (!loader_command(conn, "ROLLBACK", PGRES_COMMAND_OK, "ROLLBACK failed", err, errlen))
            return false;
        if (first == 0) {
            snprintf(err, errlen, "cannot read the COPY's snapshot");
            return false;
        }
        if (stopped(stop)) {
            snprintf(err, errlen, "load interrupted");
            return false;
        }
        if (monoclock_seconds() > until) {
            snprintf(err, errlen, "transaction %" PRIu32 ", whose rows were streamed, is still "
                     "not visible after %d s (a synchronous standby that does not answer?)",
                     first, LOADER_VISIBLE_WAIT_S);
            return false;
        }
        struct timespec tick = { 0, LOADER_VISIBLE_TICK_MS * 1000000L };
        nanosleep(&tick, NULL);
    }
}

static bool commit(PGconn *conn, char *err, size_t errlen)
{
    return loader_command(conn, "COMMIT", PGRES_COMMAND_OK, "COMMIT failed", err, errlen);
}

/*
 * One pass of the COPY sql into l's filter: *rows counts them.  With
 * resize, a filter that outgrows its first layer (or its rate) takes no
 * more: the rest is counted only and *over set.
 */
static bool copy_pass(PGconn *conn, const char *sql, struct table_load *l,
                      const struct loader_copy_opts *o, bool resize, uint64_t *rows, bool *over,
                      char *err, size_t errlen)
{
    struct filter *f = table_load_filter(l);
    bool interrupted, ok = false;
    *rows = 0;
    *over = false;
    PGresult *r = exec_stoppable(conn, sql, o->stop, &interrupted);
    if (interrupted) {
        snprintf(err, errlen, "load interrupted");
        return false;                   /* PQfinish by the caller ends the statement */
    }
    if (PQresultStatus(r) != PGRES_COPY_OUT) {
        loader_set_result_error(err, errlen, "COPY failed", conn, r);
        goto done;
    }
    PQclear(r);
    r = NULL;

    /* Hashes wait in a small batch so the filter can prefetch their blocks. */
    uint64_t batch[256];
    size_t nb = 0, keycap = 0;
    char *keybuf = NULL;
    for (;;) {
        char *buf = NULL;
        size_t idlen;
        int got = copy_row_stoppable(conn, &buf, &idlen, o->stop);
        if (got == 0)
            break;                              /* COPY done */
        if (got < 0) {
            if (got == -2)
                snprintf(err, errlen, "load interrupted");  /* PQfinish ends the COPY */
            else
                loader_set_error(err, errlen, "COPY failed", conn);
            free(keybuf);
            goto done;
        }
        (*rows)++;
        if (*over) {                            /* counted only, for the next filter's size */
            PQfreemem(buf);
            continue;
        }
        /* The row by its key (spell.h); a value whose key cannot be known, as it is. */
        const char *key = buf;
        size_t klen = idlen;
        if (o->spell != SPELL_TEXT) {
            size_t cap = spell_key_cap(o->spell, idlen);
            if (cap > keycap) {
                char *nk = realloc(keybuf, cap);
                if (nk == NULL) {
                    snprintf(err, errlen, "out of memory");
                    PQfreemem(buf);
                    free(keybuf);
                    goto done;
                }
                keybuf = nk;
                keycap = cap;
            }
            if (spell_key(o->spell, buf, idlen, keybuf, keycap, &klen) == SPELL_KEY)
                key = keybuf;
            else
                klen = idlen;
        }
        uint64_t h = filter_hash(key, klen);
        batch[nb++] = h;
        if (nb == sizeof batch / sizeof batch[0]) {
            filter_add_hashes_exclusive(f, batch, nb);
            nb = 0;
            *over = resize && (filter_layers(f) > 1 || filter_saturated(f));
        }
        table_load_seen(l, key, klen, h);
        PQfreemem(buf);
        if (*rows % LOADER_PROGRESS_ROWS == 0 && o->progress)
            o->progress(o->progress_arg, *rows);
    }
    if (!*over)
        filter_add_hashes_exclusive(f, batch, nb);
    *over = resize && (filter_layers(f) > 1 || filter_saturated(f));
    free(keybuf);
    r = PQgetResult(conn);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
        loader_set_result_error(err, errlen, "COPY failed", conn, r);
        goto done;
    }
    ok = true;
done:
    PQclear(r);
    /* Drain to the end so the connection can run the next command. */
    while (ok && (r = PQgetResult(conn)) != NULL)
        PQclear(r);
    return ok;
}

bool loader_copy(PGconn *conn, const struct filter_config *fc, struct table_load *l,
                 const struct loader_copy_opts *o, struct load_result *res, char *err,
                 size_t errlen)
{
    const struct loader_copy_opts none = { 0 };
    if (o == NULL)
        o = &none;
    char *tbl = NULL, *col = NULL, *sql = NULL;
    bool ok = false, over = true;
    uint64_t rows = 0;
    double t0 = monoclock_seconds();

    if (!loader_quote_names(conn, fc, &tbl, &col, err, errlen))
        return false;
    size_t len = strlen(tbl) + 2 * strlen(col) + 96;
    sql = malloc(len);
    if (sql == NULL) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    snprintf(sql, len, "COPY (SELECT %s::text FROM %s WHERE %s IS NOT NULL) TO STDOUT",
             col, tbl, col);
    /* A transaction always: a second pass (a resize) reads the very rows of the first. */
    if (o->snapshot && o->snapshot[0] ? !in_snapshot(conn, o->snapshot, err, errlen)
        : o->n_must_see > 0 ? !seeing(conn, o->must_see, o->n_must_see, o->stop, err, errlen)
        : !loader_command(conn, "BEGIN ISOLATION LEVEL REPEATABLE READ", PGRES_COMMAND_OK,
                          "BEGIN failed", err, errlen))
        goto done;
    res->resized = 0;
    for (int pass = 0; over; pass++) {
        if (!copy_pass(conn, sql, l, o, pass == 0, &rows, &over, err, errlen))
            goto done;
        enum filter_error fe;
        if (over && table_load_resize(l, rows, &res->resized, &fe) == NULL) {
            snprintf(err, errlen, "the table holds %llu rows, more than its estimate: cannot "
                     "create a filter for %llu items: %s", (unsigned long long)rows,
                     (unsigned long long)res->resized, filter_strerror(fe));
            goto done;
        }
    }
    if (!commit(conn, err, errlen))
        goto done;
    res->rows = rows;
    res->seconds = monoclock_seconds() - t0;
    ok = true;
done:
    free(sql);
    free(tbl);
    free(col);
    return ok;
}
