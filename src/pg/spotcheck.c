/*
 * The sample of a table's IDs that a peer's snapshot is checked against.
 * See spotcheck.h for its size and what it proves.
 */
#include "spotcheck.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader.h"

/* One statement's tuples, or NULL with err. */
static PGresult *query(PGconn *conn, const char *sql, atomic_bool *stop, char *err, size_t errlen)
{
    bool interrupted;
    PGresult *r = loader_exec_stoppable(conn, sql, stop, &interrupted);
    if (interrupted) {
        snprintf(err, errlen, "interrupted");
        return NULL;
    }
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        loader_set_result_error(err, errlen, "reading a sample of the table", conn, r);
        PQclear(r);
        return NULL;
    }
    return r;
}

/*
 * The pages TABLESAMPLE would read (a partitioned table's leaves summed),
 * or -1 for a relation it cannot sample (a view, a foreign table).
 */
static bool pages_of(PGconn *conn, const char *tbl, atomic_bool *stop, double *pages, char *err,
                     size_t errlen)
{
    char *lit = PQescapeLiteral(conn, tbl, strlen(tbl));
    if (lit == NULL) {
        loader_set_error(err, errlen, "quoting the table's name", conn);
        return false;
    }
    size_t len = 3 * strlen(lit) + 512;
    char *sql = malloc(len);
    PGresult *r = NULL;
    if (sql != NULL) {
        snprintf(sql, len,
                 "SELECT CASE c.relkind WHEN 'p' THEN (SELECT coalesce(sum(pg_relation_size(t.relid)), 0) "
                 "FROM pg_partition_tree(c.oid) t WHERE t.isleaf) "
                 "WHEN 'r' THEN pg_relation_size(c.oid) WHEN 'm' THEN pg_relation_size(c.oid) "
                 "ELSE -1 END / current_setting('block_size')::float8 "
                 "FROM pg_class c WHERE c.oid = %s::regclass", lit);
        r = query(conn, sql, stop, err, errlen);
    } else {
        snprintf(err, errlen, "out of memory");
    }
    PQfreemem(lit);
    free(sql);
    if (r == NULL)
        return false;
    bool ok = PQntuples(r) == 1;
    if (ok)
        *pages = strtod(PQgetvalue(r, 0, 0), NULL);
    else
        snprintf(err, errlen, "reading a sample of the table: no such relation");
    PQclear(r);
    return ok;
}

static bool keep(struct spotcheck *out, const PGresult *r)
{
    int rows = PQntuples(r);
    out->rows = calloc((size_t)rows + 1, sizeof *out->rows);
    out->lens = calloc((size_t)rows + 1, sizeof *out->lens);
    if (out->rows == NULL || out->lens == NULL)
        return false;
    for (int i = 0; i < rows; i++) {
        size_t len = (size_t)PQgetlength(r, i, 0);
        char *v = malloc(len + 1);
        if (v == NULL)
            return false;
        memcpy(v, PQgetvalue(r, i, 0), len);
        v[len] = '\0';
        out->rows[out->n] = v;
        out->lens[out->n++] = len;
    }
    return true;
}

bool spotcheck_take(PGconn *conn, const struct filter_config *fc, unsigned n, atomic_bool *stop,
                    struct spotcheck *out, char *err, size_t errlen)
{
    char *tbl = NULL, *col = NULL, *sql = NULL;
    PGresult *r = NULL;
    bool ok = false;
    double pages = 0;
    memset(out, 0, sizeof *out);
    if (!loader_quote_names(conn, fc, &tbl, &col, err, errlen))
        return false;
    if (!pages_of(conn, tbl, stop, &pages, err, errlen))
        goto done;
    size_t len = strlen(tbl) + 2 * strlen(col) + 256;
    if ((sql = malloc(len)) == NULL) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    /* About 2n pages, each kept with the same chance (spotcheck.h). */
    double pct = pages > 2.0 * n ? 100.0 * 2.0 * n / pages : 100.0;
    if (pct < 1e-6)
        pct = 1e-6;
    for (int pass = 0; pass < 2; pass++) {
        if (pages < 0)
            snprintf(sql, len, "SELECT %s::text FROM %s WHERE %s IS NOT NULL ORDER BY random() "
                     "LIMIT %u", col, tbl, col, n);
        else
            snprintf(sql, len, "SELECT %s::text FROM %s TABLESAMPLE SYSTEM (%.6f) WHERE %s IS NOT "
                     "NULL ORDER BY random() LIMIT %u", col, tbl, pct, col, n);
        PQclear(r);
        if ((r = query(conn, sql, stop, err, errlen)) == NULL)
            goto done;
        /* Pages picked that hold too few live rows: every page, once. */
        if (pages < 0 || pct >= 100.0 || (unsigned)PQntuples(r) >= n)
            break;
        pct = 100.0;
    }
    if (pages < 0)
        snprintf(out->how, sizeof out->how, "ORDER BY random() of every row (not a table)");
    else
        snprintf(out->how, sizeof out->how, "TABLESAMPLE SYSTEM (%.4g%%) of %.0f pages", pct, pages);
    if (!keep(out, r)) {
        spotcheck_release(out);
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    ok = true;
done:
    PQclear(r);
    free(sql);
    free(tbl);
    free(col);
    return ok;
}

void spotcheck_release(struct spotcheck *s)
{
    for (size_t i = 0; s->rows != NULL && i < s->n; i++)
        free(s->rows[i]);
    free(s->rows);
    free(s->lens);
    memset(s, 0, sizeof *s);
}
