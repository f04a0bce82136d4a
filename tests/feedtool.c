/*
 * The change feed (src/pg/feed.c) from the command line, for tests/feed.test:
 * each command is one call on a fresh connection, so the test can run them
 * between, and concurrently with, the writers it starts.
 *
 *   feedtool [-d CONNINFO] available TABLE COLUMN   "yes", or "no: why"
 *   feedtool [-d CONNINFO] position                 a position
 *   feedtool [-d CONNINFO] load TABLE COLUMN        a full load: the column's
 *       ids on stdout, "next POSITION" on stderr (COPY and position in one
 *       REPEATABLE READ transaction, as the daemon's load would)
 *   feedtool [-d CONNINFO] read TABLE COLUMN SINCE  ids on stdout, then on
 *       stderr "next POSITION ROWS" or "too_old WHY"
 *   feedtool [-d CONNINFO] prune SECONDS            rows deleted
 *
 * Ids are written one a line, as they are (the test's ids have no newline).
 * Exit 0 on success, 1 on an error (on stderr), 2 on bad usage.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "feed.h"
#include "loader.h"

static bool print_id(void *arg, const char *id, size_t len)
{
    (void)arg;
    fwrite(id, 1, len, stdout);
    putchar('\n');
    return true;
}

static int usage(void)
{
    fprintf(stderr, "usage: feedtool [-d CONNINFO] available TABLE COLUMN | position | "
            "load TABLE COLUMN | read TABLE COLUMN SINCE | resume TABLE COLUMN SINCE | mark | "
            "prune SECONDS\n");
    return 2;
}

static bool exec_ok(PGconn *conn, const char *sql, ExecStatusType want)
{
    PGresult *r = PQexec(conn, sql);
    bool ok = PQresultStatus(r) == want;
    if (!ok)
        fprintf(stderr, "feedtool: %s: %s", sql, PQerrorMessage(conn));
    PQclear(r);
    return ok;
}

/* A full load as the daemon would run it: the position in the COPY's snapshot. */
static int load(PGconn *conn, const char *table, const char *column)
{
    char pos[FEED_POS_MAX], err[512], *tbl = NULL, *col = NULL, sql[600];
    if (!loader_quote_table(conn, table, column, &tbl, &col, err, sizeof err)) {
        fprintf(stderr, "feedtool: %s\n", err);
        return 1;
    }
    snprintf(sql, sizeof sql, "COPY (SELECT %s::text FROM %s WHERE %s IS NOT NULL) TO STDOUT",
             col, tbl, col);
    free(tbl);
    free(col);
    if (!exec_ok(conn, "BEGIN ISOLATION LEVEL REPEATABLE READ", PGRES_COMMAND_OK))
        return 1;
    if (!feed_position(conn, pos, err, sizeof err)) {
        fprintf(stderr, "feedtool: %s\n", err);
        return 1;
    }
    if (!exec_ok(conn, sql, PGRES_COPY_OUT))
        return 1;
    char *buf;
    int n;
    while ((n = PQgetCopyData(conn, &buf, 0)) >= 0) {
        fwrite(buf, 1, (size_t)n, stdout);      /* ids without escapes in these tests */
        PQfreemem(buf);
    }
    PGresult *r;
    while ((r = PQgetResult(conn)) != NULL)
        PQclear(r);
    if (!exec_ok(conn, "COMMIT", PGRES_COMMAND_OK))
        return 1;
    fprintf(stderr, "next %s\n", pos);
    return 0;
}

int main(int argc, char **argv)
{
    const char *conninfo = "";
    char err[512];
    int rc = 1;

    if (argc > 2 && strcmp(argv[1], "-d") == 0) {
        conninfo = argv[2];
        argc -= 2;
        argv += 2;
    }
    if (argc < 2)
        return usage();
    const char *cmd = argv[1];
    PGconn *conn = PQconnectdb(conninfo);
    if (PQstatus(conn) != CONNECTION_OK) {
        fprintf(stderr, "feedtool: cannot connect: %s", PQerrorMessage(conn));
        PQfinish(conn);
        return 1;
    }
    if (!exec_ok(conn, LOADER_SESSION_SETTINGS, PGRES_COMMAND_OK))
        goto done;

    if (strcmp(cmd, "available") == 0 && argc == 4) {
        bool yes;
        if (!feed_available(conn, argv[2], argv[3], &yes, err, sizeof err)) {
            fprintf(stderr, "feedtool: %s\n", err);
            goto done;
        }
        if (yes)
            printf("yes\n");
        else
            printf("no: %s\n", err);
        rc = 0;
    } else if (strcmp(cmd, "position") == 0 && argc == 2) {
        char pos[FEED_POS_MAX];
        if (!feed_position(conn, pos, err, sizeof err)) {
            fprintf(stderr, "feedtool: %s\n", err);
            goto done;
        }
        printf("%s\n", pos);
        rc = 0;
    } else if (strcmp(cmd, "load") == 0 && argc == 4) {
        rc = load(conn, argv[2], argv[3]);
    } else if ((strcmp(cmd, "read") == 0 || strcmp(cmd, "resume") == 0) && argc == 5) {
        /* resume: as after a restart, proving the history first (feed_read). */
        bool resume = strcmp(cmd, "resume") == 0;
        char next[FEED_POS_MAX];
        uint64_t rows = 0;
        bool too_old;
        if (!feed_read(conn, NULL, argv[2], argv[3], argv[4], resume, print_id, NULL, next, &rows,
                       &too_old, NULL, err, sizeof err)) {
            fprintf(stderr, "feedtool: %s\n", err);
            goto done;
        }
        fflush(stdout);
        if (too_old)
            fprintf(stderr, "too_old %s\n", err);
        else
            fprintf(stderr, "next %s %" PRIu64 "\n", next, rows);
        rc = 0;
    } else if (strcmp(cmd, "mark") == 0 && argc == 2) {
        if (!feed_mark(conn, err, sizeof err)) {
            fprintf(stderr, "feedtool: %s\n", err);
            goto done;
        }
        rc = 0;
    } else if (strcmp(cmd, "prune") == 0 && argc == 3) {
        uint64_t deleted = 0;
        if (!feed_prune(conn, strtod(argv[2], NULL), &deleted, err, sizeof err)) {
            fprintf(stderr, "feedtool: %s\n", err);
            goto done;
        }
        printf("%" PRIu64 "\n", deleted);
        rc = 0;
    } else {
        rc = usage();
    }
done:
    PQfinish(conn);
    return rc;
}
