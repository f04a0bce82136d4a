/*
 * bloomguard -t: the mistakes a configuration can carry that its parser
 * cannot see, found before the daemon starts rather than in its log: with
 * --connect also what each table's follower needs of the server, asked
 * with the follower's own probes (follow.c, feed.c, logical_slot.c) so
 * that -t and the daemon cannot disagree.
 */
#include "preflight.h"

#include <errno.h>
#include <libpq-fe.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dirlock.h"
#include "feed.h"
#include "follow.h"
#include "listen.h"
#include "loader.h"
#include "pgerror.h"
#include "persist.h"
#include "publish.h"

static void finding(FILE *out, unsigned *errors, bool error, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void finding(FILE *out, unsigned *errors, bool error, const char *fmt, ...)
{
    va_list ap;
    fprintf(out, "bloomguard: %s: ", error ? "error" : "warning");
    va_start(ap, fmt);
    vfprintf(out, fmt, ap);
    va_end(ap);
    fputc('\n', out);
    if (error)
        (*errors)++;
}

/* A directory the daemon writes into: it must exist, be a directory and be writable. */
static void check_dir(FILE *out, unsigned *errors, const char *key, const char *dir)
{
    struct stat st;
    if (stat(dir, &st) != 0) {
        finding(out, errors, true, "%s: %s: %s (create it, owned by the daemon's user)", key, dir,
                strerror(errno));
        return;
    }
    if (!S_ISDIR(st.st_mode)) {
        finding(out, errors, true, "%s: %s is not a directory", key, dir);
        return;
    }
    if (access(dir, W_OK | X_OK) != 0)
        finding(out, errors, true, "%s: %s is not writable by this user (chown it to the "
                "daemon's user)", key, dir);
}

/* A secret readable by every local user: a warning with the chmod that fixes it. */
static void check_secret(FILE *out, unsigned *errors, const char *what, const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0 && (st.st_mode & S_IROTH) != 0)
        finding(out, errors, false, "%s %s is readable by every user: chmod o-rwx %s", what, path,
                path);
}

/* Whether the conninfo sets a non-empty password (false when it does not parse). */
static bool conninfo_has_password(const char *conninfo)
{
    PQconninfoOption *opts = PQconninfoParse(conninfo, NULL);
    bool has = false;
    for (PQconninfoOption *o = opts; o != NULL && o->keyword != NULL; o++)
        if (strcmp(o->keyword, "password") == 0 && o->val != NULL && o->val[0] != '\0')
            has = true;
    PQconninfoFree(opts);
    return has;
}

bool preflight_listen(const struct config *c, char *err, size_t errlen, char *warn, size_t warnlen)
{
    gid_t gid;
    warn[0] = '\0';
    if (strncmp(c->listen_host, "unix:", 5) != 0)
        return true;
    if (!listen_group_id(c->listen_group, &gid, err, errlen))
        return false;
    /* Writes still need the admin token (a unix socket is not loopback); reads do not. */
    if ((c->listen_mode & S_IWOTH) != 0)
        snprintf(warn, warnlen, "[server] listen_mode = %04o: every local user can connect to "
                 "%s and ask for any id; give the proxy the group instead (listen_group, "
                 "listen_mode = 0660)", c->listen_mode, c->listen_host);
    return true;
}

bool preflight_upstream(const struct config *c, bool *replica_only, char *err, size_t errlen)
{
    bool all = c->n_filters > 0;
    for (unsigned i = 0; i < c->n_filters; i++)
        all = all && c->filters[i].method == SYNC_UPSTREAM;
    if (replica_only != NULL)
        *replica_only = all;
    for (unsigned i = 0; i < c->n_filters; i++)
        if (c->filters[i].method == SYNC_UPSTREAM && c->upstream[strspn(c->upstream, " \t")] == '\0') {
            snprintf(err, errlen, "filter %s: [sync] method = upstream needs [sync] upstream, "
                     "the bloomguard daemons to follow", c->filters[i].name);
            return false;
        }
    return true;
}

unsigned preflight_offline(const struct config *c, const char *config_file, FILE *out)
{
    unsigned errors = 0;
    char *msg = NULL;
    char dir[4096];

    PQconninfoOption *opts = PQconninfoParse(c->conninfo, &msg);
    if (opts == NULL) {
        size_t n = msg ? strlen(msg) : 0;
        while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
            n--;
        finding(out, &errors, true, "[postgres] conninfo: %.*s", (int)n,
                msg ? msg : "out of memory");
        PQfreemem(msg);
    } else {
        PQconninfoFree(opts);
        if (config_file != NULL && conninfo_has_password(c->conninfo))
            check_secret(out, &errors, "[postgres] conninfo holds a password, and the configuration",
                         config_file);
    }
    if (c->admin_token_file[0] != '\0')
        check_secret(out, &errors, "[server] admin_token_file", c->admin_token_file);
    /* TLS: both files or neither (http.c refuses to start otherwise), the key kept private. */
    if ((c->tls_cert_file[0] != '\0') != (c->tls_key_file[0] != '\0'))
        finding(out, &errors, true, "[server] tls_cert_file and tls_key_file go together: set both "
                "or neither");
    if (c->tls_key_file[0] != '\0')
        check_secret(out, &errors, "[server] tls_key_file", c->tls_key_file);
    if (c->replication_token_file[0] != '\0')
        check_secret(out, &errors, "[server] replication_token_file", c->replication_token_file);
    if (c->upstream_token_file[0] != '\0')
        check_secret(out, &errors, "[sync] upstream_token_file", c->upstream_token_file);
    char up[256];
    if (!preflight_upstream(c, NULL, up, sizeof up))
        finding(out, &errors, true, "%s", up);
    const char *passfile = getenv("PGPASSFILE");
    if (passfile != NULL && passfile[0] != '\0')
        check_secret(out, &errors, "PGPASSFILE", passfile);
    char why[512], warn[512];
    if (!preflight_listen(c, why, sizeof why, warn, sizeof warn))
        finding(out, &errors, true, "%s", why);
    else if (warn[0] != '\0')
        finding(out, &errors, false, "%s", warn);
    if (persist_dir(c, dir, sizeof dir))
        check_dir(out, &errors, "[snapshot] path", dir);
    /* publish.c's own rule, as the start applies it (but for creating a missing one). */
    if (publish_dir(c, dir, sizeof dir) && !publish_dir_check(c, dir, false, why, sizeof why))
        finding(out, &errors, true, "%s", why);
    /*
     * A daemon holding a directory is a warning, not an error: -t is run
     * beside the daemon its configuration configures (before a SIGHUP, by
     * a package upgrade), and the configuration is no less valid for it.
     * Only asked, never taken: a daemon starting now must not find it held.
     */
    long pid;
    const char *keys[2] = { "[snapshot] path", "[server] publish_dir" };
    for (int k = 0; k < 2; k++)
        if ((k == 0 ? persist_dir(c, dir, sizeof dir) : publish_dir(c, dir, sizeof dir))
            && dirlock_holder(dir, &pid))
            finding(out, &errors, false, "%s %s is in use by a running bloomguard (pid %ld%s): "
                    "a start with this configuration is refused while that one runs", keys[k],
                    dir, pid, pid > 0 ? "" : ": unknown");
    return errors;
}

/* What method logical needs of the server, read once for all filters. */
struct server_facts {
    char wal_level[32];
    char role[128];
    int max_slots, used_slots, max_senders, used_senders;
    bool slot_known;                /* a permanent slot name: [sync] slot or the kept one */
    char slot[64];
    bool slot_exists, slot_usable, slot_active, slot_lost;
    char slot_pid[16], slot_app[64];
};

static bool read_facts(PGconn *conn, const struct config *c, struct server_facts *sf,
                       char *err, size_t errlen)
{
    memset(sf, 0, sizeof *sf);
    sf->slot_known = follow_logical_known_slot(c, sf->slot, sizeof sf->slot);
    const char *params[1] = { sf->slot };
    /* Every view here is readable by any role (pg_stat_replication's other columns are not). */
    PGresult *r = PQexecParams(conn,
        "SELECT current_setting('wal_level'), current_user, "
        "       current_setting('max_replication_slots')::int, "
        "       (SELECT count(*) FROM pg_replication_slots), "
        "       current_setting('max_wal_senders')::int, "
        "       (SELECT count(*) FROM pg_stat_replication), "
        "       s.slot_name IS NOT NULL, "
        "       coalesce(s.plugin = 'pgoutput' AND s.database = current_database(), false), "
        "       coalesce(s.active, false), coalesce(s.wal_status = 'lost', false), "
        "       coalesce(s.active_pid::text, ''), "
        "       coalesce((SELECT application_name FROM pg_stat_activity a "
        "                  WHERE a.pid = s.active_pid), '') "
        "  FROM (SELECT 1) one LEFT JOIN pg_replication_slots s ON s.slot_name = $1",
        1, NULL, params, NULL, NULL, 0);
    bool ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 && PQnfields(r) == 12;
    if (!ok) {
        loader_set_result_error(err, errlen, "cannot read the server's replication settings",
                                conn, r);
    } else {
        snprintf(sf->wal_level, sizeof sf->wal_level, "%s", PQgetvalue(r, 0, 0));
        snprintf(sf->role, sizeof sf->role, "%s", PQgetvalue(r, 0, 1));
        sf->max_slots = atoi(PQgetvalue(r, 0, 2));
        sf->used_slots = atoi(PQgetvalue(r, 0, 3));
        sf->max_senders = atoi(PQgetvalue(r, 0, 4));
        sf->used_senders = atoi(PQgetvalue(r, 0, 5));
        sf->slot_exists = strcmp(PQgetvalue(r, 0, 6), "t") == 0;
        sf->slot_usable = strcmp(PQgetvalue(r, 0, 7), "t") == 0;
        sf->slot_active = strcmp(PQgetvalue(r, 0, 8), "t") == 0;
        sf->slot_lost = strcmp(PQgetvalue(r, 0, 9), "t") == 0;
        snprintf(sf->slot_pid, sizeof sf->slot_pid, "%s", PQgetvalue(r, 0, 10));
        snprintf(sf->slot_app, sizeof sf->slot_app, "%s", PQgetvalue(r, 0, 11));
    }
    PQclear(r);
    return ok;
}

/*
 * Method logical's server-side needs beyond wal_level and REPLICATION
 * (checked where the method is named): room for a slot and a walsender,
 * the slot's name free or this daemon's, and a replication connection that
 * opens and reaches the same primary.
 */
static void check_logical_server(PGconn *conn, const struct config *c,
                                 const struct server_facts *sf, FILE *out, unsigned *errors)
{
    char err[1024];
    bool room = true;
    /* A running bloomguard's slot: its walsender and slot are already counted, and ours. */
    bool ours_running = sf->slot_active && strcmp(sf->slot_app, "bloomguard logical") == 0;

    if (sf->slot_exists && !sf->slot_usable) {
        finding(out, errors, true, "[sync] slot: replication slot %s exists but is not a pgoutput "
                "slot of this database: choose another [sync] slot", sf->slot);
        return;
    }
    if (sf->slot_active && !ours_running) {
        finding(out, errors, true, "[sync] slot: replication slot %s is in use by another client "
                "(walsender pid %s): stop it, or choose another [sync] slot", sf->slot,
                sf->slot_pid);
        return;
    }
    if (ours_running)
        finding(out, errors, false, "[sync] slot: replication slot %s is streaming to a running "
                "bloomguard (walsender pid %s): fine if that is this configuration's daemon; "
                "a second daemon needs its own [sync] slot", sf->slot, sf->slot_pid);
    else if (sf->slot_lost)
        finding(out, errors, false, "[sync] slot: replication slot %s was invalidated (wal_status "
                "lost): the daemon drops it, makes a new one and copies its tables; raise "
                "max_slot_wal_keep_size if this recurs", sf->slot);
    if (!sf->slot_exists && sf->used_slots >= sf->max_slots) {
        finding(out, errors, true, "max_replication_slots = %d and all are in use: raise it and "
                "restart PostgreSQL, or drop a slot nobody uses (SELECT slot_name, active FROM "
                "pg_replication_slots)", sf->max_slots);
        room = false;
    }
    if (!ours_running && sf->used_senders >= sf->max_senders) {
        finding(out, errors, true, "max_wal_senders = %d and all are in use: raise it and "
                "restart PostgreSQL", sf->max_senders);
        room = false;
    }
    if (room && !follow_logical_check_replication(c, conn, err, sizeof err))
        finding(out, errors, true, "method logical: %s (the replication connection uses the "
                "same conninfo with replication=database: pg_hba.conf must admit the role to the "
                "database)", err);
}

/* Method feed (or notify's catch-ups): the change feed serves the table and the role reads it. */
static void check_feed(PGconn *conn, const struct filter_config *fc, const char *role,
                       FILE *out, unsigned *errors)
{
    char why[512] = "";
    bool available = false;
    if (!feed_available(conn, fc->table, fc->column, &available, why, sizeof why)) {
        finding(out, errors, true, "filter %s: method feed: %s", fc->name, why);
        return;
    }
    if (available)
        return;
    /* feed.c's own hint (a trailing "(...)") gives way to the fix with this filter's names. */
    size_t n = strlen(why);
    char *hint = strstr(why, " (");
    if (n > 0 && why[n - 1] == ')' && hint != NULL && strchr(hint, ':') == NULL)
        *hint = '\0';
    if (strstr(why, "bloomguard_feed_grant") != NULL)
        finding(out, errors, true, "filter %s: method feed: %s; fix: SELECT "
                "bloomguard_feed_grant('%s')", fc->name, why, role);
    else
        finding(out, errors, true, "filter %s: method feed: %s; fix: %sSELECT "
                "bloomguard_watch('%s', '%s', method => 'feed') as the table's owner", fc->name,
                why, strstr(why, "not installed") != NULL ? "psql -f sql/notify.sql, then " : "",
                fc->table, fc->column);
}

/* Method logical's per-table need: the table in the publication with its column. */
static void check_published(PGconn *conn, const struct config *c, const struct filter_config *fc,
                            FILE *out, unsigned *errors)
{
    const char *params[1] = { c->publication };
    PGresult *r = PQexecParams(conn, "SELECT 1 FROM pg_publication WHERE pubname = $1", 1, NULL,
                               params, NULL, NULL, 0);
    bool exists = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
    PQclear(r);
    finding(out, errors, true, "filter %s: method logical: %s.%s is not in publication %s%s: "
            "SELECT bloomguard_watch('%s', '%s', method => 'logical') as the table's owner "
            "(sql/notify.sql; it creates the publication)", fc->name, fc->table, fc->column,
            c->publication, exists ? "" : " (it does not exist)", fc->table, fc->column);
}

/*
 * Each filter's method, as the daemon would choose it (follow_choose on
 * the follower's probes), and what that method needs of the server.  A
 * method the server cannot serve is an error, auto finding nothing too:
 * the daemon would run and pick up a later bloomguard_watch by itself, but
 * until then it answers "maybe" to every absent ID, a guard that guards
 * nothing, which is what -t is there to catch before it runs.
 */
static void check_followers(PGconn *conn, const struct config *c, const bool *readable,
                            FILE *out, unsigned *errors)
{
    char err[1024];
    struct server_facts sf;
    struct follow_offer srv;
    if (!read_facts(conn, c, &sf, err, sizeof err)
        || !follow_probe_server(conn, c, sf.slot_known ? sf.slot : NULL, &srv, err, sizeof err)) {
        finding(out, errors, true, "[sync]: %s", err);
        return;
    }
    bool named_logical = false, need_logical = false;
    for (unsigned t = 0; t < c->n_filters && t < CONFIG_MAX_FILTERS; t++)
        if (readable[t] && c->filters[t].method == SYNC_LOGICAL)
            named_logical = true;
    if (named_logical && !srv.wal_logical)
        finding(out, errors, true, "[sync] method = logical: wal_level is %s: set wal_level = "
                "logical and restart PostgreSQL, or use [sync] method = feed", sf.wal_level);
    if (named_logical && !srv.may_replicate)
        finding(out, errors, true, "[sync] method = logical: role %s lacks REPLICATION: ALTER "
                "ROLE %s REPLICATION (as a superuser), or use [sync] method = feed", sf.role,
                sf.role);

    for (unsigned t = 0; t < c->n_filters && t < CONFIG_MAX_FILTERS; t++) {
        const struct filter_config *fc = &c->filters[t];
        struct follow_table_offer tbl;
        char why[FOLLOW_WHY_MAX];
        if (!readable[t])
            continue;       /* its table's finding is above */
        if (!follow_probe_table(conn, c, fc, &tbl, err, sizeof err)) {
            finding(out, errors, true, "filter %s: %s", fc->name, err);
            continue;
        }
        switch (fc->method) {
        case SYNC_LOGICAL:
            if (!tbl.published)
                check_published(conn, c, fc, out, errors);
            need_logical = true;
            break;
        case SYNC_FEED:
            check_feed(conn, fc, sf.role, out, errors);
            break;
        case SYNC_NOTIFY:
            if (follow_choose(c, fc, &srv, &tbl, why, sizeof why) == SYNC_NONE)
                finding(out, errors, true, "filter %s: %s", fc->name, why);
            break;
        default: {
            enum sync_method m = follow_choose(c, fc, &srv, &tbl, why, sizeof why);
            if (m == SYNC_NONE)
                finding(out, errors, true, "filter %s: %s", fc->name, why);
            else
                fprintf(out, "bloomguard: filter %s: %s\n", fc->name, why);
            if (m == SYNC_LOGICAL)
                need_logical = true;
            break;
        }
        }
    }
    /* wal_level and REPLICATION are said above; nothing further holds without them. */
    if (need_logical && srv.wal_logical && srv.may_replicate)
        check_logical_server(conn, c, &sf, out, errors);
}

/*
 * The fix for a table or column the daemon cannot read, from the failure's
 * SQLSTATE: only a missing right is fixed by a GRANT.
 */
static void table_finding(FILE *out, unsigned *errors, const struct filter_config *fc,
                          const char *err)
{
    char code[PGERROR_SQLSTATE_LEN];
    const char *fix;
    char grant[512];
    pgerror_find(err, code);
    if (strcmp(code, "42P01") == 0 || strcmp(code, "3F000") == 0)
        fix = "check [postgres] table: it names no table of this database";
    else if (strcmp(code, "42703") == 0)
        fix = "check [postgres] column: the table has no such column";
    else if (strcmp(code, "42501") == 0 || code[0] == '\0') {
        snprintf(grant, sizeof grant, "GRANT USAGE ON SCHEMA and SELECT (%s) ON %s TO the "
                 "daemon's role", fc->column, fc->table);
        fix = grant;
    } else
        fix = NULL;
    if (fix != NULL)
        finding(out, errors, true, "filter %s: %s (%s)", fc->name, err, fix);
    else
        finding(out, errors, true, "filter %s: %s", fc->name, err);
}

unsigned preflight_connect(const struct config *c, FILE *out)
{
    unsigned errors = 0;
    char err[1024];

    PGconn *conn = loader_connect(c, err, sizeof err);
    if (conn == NULL) {
        const char *pf = getenv("PGPASSFILE");
        if (strstr(err, "no password supplied") != NULL)
            finding(out, &errors, true, "[postgres] conninfo: %s (the server wants a password: "
                    "put a line host:port:dbname:user:password, mode 0600, in %s%s)", err,
                    pf && pf[0] ? pf : "the file pgpass beside the configuration, which the unit "
                    "hands the service as PGPASSFILE", pf && pf[0] ? " (PGPASSFILE)" : "");
        else
            finding(out, &errors, true, "[postgres] conninfo: %s", err);
        return errors;
    }
    bool readable[CONFIG_MAX_FILTERS] = { false };
    for (unsigned t = 0; t < c->n_filters && t < CONFIG_MAX_FILTERS; t++) {
        const struct filter_config *fc = &c->filters[t];
        struct table_ident id;
        char *tbl = NULL, *col = NULL, sql[1024];
        if (!loader_identify(conn, fc, &id, err, sizeof err)) {
            table_finding(out, &errors, fc, err);
            continue;
        }
        if (!loader_quote_names(conn, fc, &tbl, &col, err, sizeof err)) {
            finding(out, &errors, true, "filter %s: %s", fc->name, err);
            continue;
        }
        /* What the COPY needs: the right to read the column, checked without reading a row. */
        snprintf(sql, sizeof sql, "SELECT %s FROM %s LIMIT 0", col, tbl);
        free(tbl);
        free(col);
        PGresult *r = PQexec(conn, sql);
        if (PQresultStatus(r) != PGRES_TUPLES_OK) {
            loader_set_result_error(err, sizeof err, "cannot read the column", conn, r);
            table_finding(out, &errors, fc, err);
        } else {
            readable[t] = true;
        }
        PQclear(r);
    }
    if (c->sync_enabled)
        check_followers(conn, c, readable, out, &errors);
    PQfinish(conn);
    return errors;
}

void preflight_unit_environment(const struct config *c, const char *config_file,
                                const char *dflt_dir, FILE *out)
{
    const char *pf = getenv("PGPASSFILE");
    if ((pf == NULL || pf[0] == '\0') && !conninfo_has_password(c->conninfo)) {
        char path[4096];
        const char *slash = config_file ? strrchr(config_file, '/') : NULL;
        if (config_file == NULL)
            snprintf(path, sizeof path, "%s/pgpass", dflt_dir);
        else if (slash == NULL)
            snprintf(path, sizeof path, "pgpass");
        else
            snprintf(path, sizeof path, "%.*s/pgpass", (int)(slash - config_file), config_file);
        if (access(path, F_OK) == 0 && setenv("PGPASSFILE", path, 1) == 0)
            fprintf(out, "bloomguard: password file %s (beside the configuration, as the unit "
                    "hands it to the service; PGPASSFILE overrides)\n", path);
    }
    const char *sd = getenv("STATE_DIRECTORY");
    struct stat st;
    if (strcmp(c->snapshot_path, "auto") == 0 && (sd == NULL || sd[0] == '\0')
        && stat(PREFLIGHT_UNIT_STATE_DIR, &st) == 0 && S_ISDIR(st.st_mode)
        && setenv("STATE_DIRECTORY", PREFLIGHT_UNIT_STATE_DIR, 1) == 0)
        fprintf(out, "bloomguard: [snapshot] path = auto: %s (the unit's state directory; "
                "STATE_DIRECTORY overrides)\n", PREFLIGHT_UNIT_STATE_DIR);
}

int preflight_drop_slot(const struct config *c, FILE *out)
{
    char slot[64] = "", err[1024], dir[4096];

    if (!follow_logical_known_slot(c, slot, sizeof slot))
        slot[0] = '\0';
    if (slot[0] == '\0') {
        if (persist_dir(c, dir, sizeof dir))
            fprintf(out, "bloomguard: no permanent replication slot: [sync] slot = auto and no "
                    "logical-slot file in %s\n", dir);
        else
            fprintf(out, "bloomguard: no permanent replication slot: [sync] slot = auto and no "
                     "snapshot directory ([snapshot] path is empty, or auto without "
                     "STATE_DIRECTORY and without %s): a daemon without one uses a temporary "
                     "slot, which goes with its connection\n", PREFLIGHT_UNIT_STATE_DIR);
        return 1;
    }
    PGconn *conn = loader_connect(c, err, sizeof err);
    if (conn == NULL) {
        fprintf(out, "bloomguard: error: [postgres] conninfo: %s\n", err);
        return 1;
    }
    const char *params[1] = { slot };
    PGresult *r = PQexecParams(conn, "SELECT active FROM pg_replication_slots WHERE slot_name = $1",
                               1, NULL, params, NULL, NULL, 0);
    int rc = 0;
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        loader_set_error(err, sizeof err, "cannot read pg_replication_slots", conn);
        fprintf(out, "bloomguard: error: slot %s: %s\n", slot, err);
        rc = 1;
    } else if (PQntuples(r) == 0) {
        fprintf(out, "bloomguard: slot %s: not on the server (nothing to drop)\n", slot);
    } else if (strcmp(PQgetvalue(r, 0, 0), "t") == 0) {
        fprintf(out, "bloomguard: error: slot %s is in use: stop the daemon first\n", slot);
        rc = 1;
    } else {
        PQclear(r);
        r = PQexecParams(conn, "SELECT pg_drop_replication_slot($1)", 1, NULL, params, NULL, NULL,
                         0);
        if (PQresultStatus(r) != PGRES_TUPLES_OK) {
            loader_set_error(err, sizeof err, "cannot drop the slot", conn);
            fprintf(out, "bloomguard: error: slot %s: %s\n", slot, err);
            rc = 1;
        } else {
            fprintf(out, "bloomguard: dropped replication slot %s\n", slot);
        }
    }
    PQclear(r);
    PQfinish(conn);
    return rc;
}
