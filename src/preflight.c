/*
 * bloomguard -t: the mistakes a configuration can carry that its parser
 * cannot see, found before the daemon starts rather than in its log.
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

#include "listen.h"
#include "loader.h"
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
    if (publish_dir(c, dir, sizeof dir))
        check_dir(out, &errors, "[server] publish_dir", dir);
    return errors;
}

unsigned preflight_connect(const struct config *c, FILE *out)
{
    unsigned errors = 0;
    char err[1024];

    PGconn *conn = loader_connect(c, err, sizeof err);
    if (conn == NULL) {
        finding(out, &errors, true, "[postgres] conninfo: %s", err);
        return errors;
    }
    for (unsigned t = 0; t < c->n_filters; t++) {
        const struct filter_config *fc = &c->filters[t];
        struct table_ident id;
        char *tbl = NULL, *col = NULL, sql[1024];
        if (!loader_identify(conn, fc, &id, err, sizeof err)) {
            finding(out, &errors, true, "filter %s: %s (GRANT USAGE ON SCHEMA and SELECT (%s) "
                    "ON %s TO the daemon's role)", fc->name, err, fc->column, fc->table);
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
            loader_set_error(err, sizeof err, "cannot read the column", conn);
            finding(out, &errors, true, "filter %s: %s (GRANT SELECT (%s) ON %s TO the daemon's "
                    "role)", fc->name, err, fc->column, fc->table);
        }
        PQclear(r);
    }
    PQfinish(conn);
    return errors;
}

int preflight_drop_slot(const struct config *c, FILE *out)
{
    char dir[PERSIST_PATH_MAX], path[PERSIST_PATH_MAX + 32], slot[64] = "", err[1024];

    if (strcmp(c->slot_name, "auto") != 0) {
        snprintf(slot, sizeof slot, "%s", c->slot_name);
    } else if (persist_dir(c, dir, sizeof dir)) {
        snprintf(path, sizeof path, "%s/logical-slot", dir);
        FILE *fp = fopen(path, "r");
        if (fp != NULL) {
            if (fgets(slot, sizeof slot, fp) == NULL)
                slot[0] = '\0';
            fclose(fp);
            slot[strcspn(slot, "\n")] = '\0';
        }
    }
    if (slot[0] == '\0') {
        fprintf(out, "bloomguard: no permanent replication slot: [sync] slot = auto and no "
                "logical-slot file in the snapshot directory\n");
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
