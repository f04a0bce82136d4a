/*
 * What the catalog says of a filter's table (loader.h): its names quoted
 * for SQL, its column's identity (what a snapshot and a follower check
 * they still follow) and its row count, before any COPY.
 */
#include "loader.h"

#include "pgerror.h"
#include "spell.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
