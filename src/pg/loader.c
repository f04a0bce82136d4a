/*
 * The libpq toolbox's sessions: connecting with the daemon's settings (its
 * notices into the daemon's log), errors with their SQLSTATE, one-shot
 * commands; loader_catalog.c asks the catalog, loader_copy.c runs the COPY.
 * Nothing here logs (but libpq's notices, passed on) or keeps state between
 * calls.
 */
#include "loader.h"

#include "log.h"
#include "pgerror.h"

#include <stdio.h>
#include <string.h>

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

/* Whether r has status want; else "what: ..." in err.  r is cleared either way. */
static bool result_is(PGconn *conn, PGresult *r, ExecStatusType want, const char *what,
                      char *err, size_t errlen)
{
    bool ok = PQresultStatus(r) == want;
    if (!ok)
        loader_set_result_error(err, errlen, what, conn, r);
    PQclear(r);
    return ok;
}

bool loader_command(PGconn *conn, const char *sql, ExecStatusType want, const char *what,
                    char *err, size_t errlen)
{
    return result_is(conn, PQexec(conn, sql), want, what, err, errlen);
}

bool loader_prepare(PGconn *conn, const char *name, const char *sql, int nparams, const char *what,
                    char *err, size_t errlen)
{
    return result_is(conn, PQprepare(conn, name, sql, nparams, NULL), PGRES_COMMAND_OK, what,
                     err, errlen);
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
