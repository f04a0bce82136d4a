/*
 * Looking candidates up in PostgreSQL (verify.h).  The order is the proof
 * table.h gives: the caller took the tickets before this is called, and
 * the snapshot the lookup reads in is the transaction's first, taken here,
 * after them.
 */
#include "verify.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader.h"
#include "xidsnap.h"

PGconn *verify_connect(const struct config *cfg, char *sysid, size_t sysid_cap, uint32_t *dboid,
                       char *err, size_t errlen)
{
    PGconn *conn = loader_connect_as(cfg, "bloomguard verify", err, errlen);
    if (conn == NULL)
        return NULL;
    char sql[256];
    snprintf(sql, sizeof sql, "SET statement_timeout = %d; SET lock_timeout = %d; "
             "SET idle_in_transaction_session_timeout = %d", VERIFY_STATEMENT_MS, VERIFY_LOCK_MS,
             4 * VERIFY_STATEMENT_MS);
    if (!loader_command(conn, sql, PGRES_COMMAND_OK, "cannot bound the verifier's statements",
                        err, errlen)) {
        PQfinish(conn);
        return NULL;
    }
    PGresult *r = PQexec(conn, "SELECT pg_catalog.pg_is_in_recovery(), "
                               "(SELECT system_identifier FROM pg_catalog.pg_control_system()), "
                               "(SELECT oid FROM pg_catalog.pg_database "
                               "WHERE datname = pg_catalog.current_database())");
    bool ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 && PQnfields(r) == 3;
    if (!ok) {
        loader_set_result_error(err, errlen, "cannot identify the verifier's server", conn, r);
    } else if (strcmp(PQgetvalue(r, 0, 0), "f") != 0) {
        snprintf(err, errlen, "the server is a standby (in recovery): a lookup there may miss "
                 "rows the primary committed, so IDs are verified on the primary only");
        ok = false;
    } else {
        snprintf(sysid, sysid_cap, "%s", PQgetvalue(r, 0, 1));
        *dboid = (uint32_t)strtoul(PQgetvalue(r, 0, 2), NULL, 10);
    }
    PQclear(r);
    if (!ok) {
        PQfinish(conn);
        return NULL;
    }
    return conn;
}

/* ROLLBACK after a refusal; the connection's state says whether it still serves. */
static void rollback(PGconn *conn)
{
    PGresult *r = PQexec(conn, "ROLLBACK");
    PQclear(r);
}

/* The statement that looks keys up: SELECT col::text FROM tbl WHERE col IN ('k1', ...). */
static char *lookup_sql(PGconn *conn, const char *tbl, const char *col, const char *const *keys,
                        const size_t *lens, size_t n, char *err, size_t errlen)
{
    size_t cap = strlen(tbl) + 2 * strlen(col) + 64, used = 0;
    for (size_t i = 0; i < n; i++)
        cap += 2 * lens[i] + 8;
    char *sql = malloc(cap);
    if (sql == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    used = (size_t)snprintf(sql, cap, "SELECT %s::text FROM %s WHERE %s IN (", col, tbl, col);
    for (size_t i = 0; i < n; i++) {
        /* A literal of unknown type: read by the column type's input function, as `col = $1`. */
        char *lit = PQescapeLiteral(conn, keys[i], lens[i]);
        if (lit == NULL) {
            loader_set_error(err, errlen, "cannot quote a key", conn);
            free(sql);
            return NULL;
        }
        used += (size_t)snprintf(sql + used, cap - used, "%s%s", i ? ", " : "", lit);
        PQfreemem(lit);
    }
    snprintf(sql + used, cap - used, ")");
    return sql;
}

/* Mark the candidates the rows r (each `col::text`) are. */
static void mark(const PGresult *r, enum spell_type spell, const char *const *keys,
                 const size_t *lens, size_t n, bool *present)
{
    for (int row = 0; row < PQntuples(r); row++) {
        const char *v = PQgetvalue(r, row, 0);
        size_t vlen = (size_t)PQgetlength(r, row, 0), klen = 0;
        char buf[256], *heap = NULL;
        const char *key;
        bool matched = false;
        if (spell_key_buf(spell, v, vlen, buf, sizeof buf, &heap, &key, &klen) == SPELL_KEY)
            for (size_t i = 0; i < n; i++)
                if (lens[i] == klen && memcmp(keys[i], key, klen) == 0)
                    present[i] = matched = true;
        free(heap);
        /* A row equal to some key whose own key matches none: which one is unknown, so all. */
        if (!matched)
            for (size_t i = 0; i < n; i++)
                present[i] = true;
    }
}

enum verify_result verify_lookup(PGconn *conn, const struct filter_config *fc, uint32_t relid,
                                 enum spell_type spell, const char *const *keys,
                                 const size_t *lens, size_t n, const uint32_t *must_see,
                                 size_t n_must_see, atomic_bool *stop, bool *present, char *err,
                                 size_t errlen)
{
    char *tbl = NULL, *col = NULL, *lit = NULL, *sql = NULL;
    PGresult *r = NULL;
    enum verify_result out = VERIFY_FAILED;
    bool interrupted = false, begun = false;
    for (size_t i = 0; i < n; i++)
        present[i] = false;
    if (n == 0 || n > VERIFY_BATCH) {
        snprintf(err, errlen, "internal error: %zu keys in one lookup", n);
        return VERIFY_FAILED;
    }
    if (!loader_quote_names(conn, fc, &tbl, &col, err, errlen))
        return VERIFY_FAILED;
    if ((lit = PQescapeLiteral(conn, tbl, strlen(tbl))) == NULL) {
        loader_set_error(err, errlen, "cannot quote the table's name", conn);
        goto done;
    }
    /*
     * The snapshot is the transaction's first, taken by this statement,
     * after the caller's tickets; the lookup below reads in it.
     */
    size_t len = strlen(lit) + 256;
    if ((sql = malloc(len)) == NULL) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    if (!loader_command(conn, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
                        PGRES_COMMAND_OK, "cannot begin the lookup", err, errlen))
        goto done;
    begun = true;
    snprintf(sql, len, "SELECT pg_catalog.pg_current_snapshot()::text, "
             "pg_catalog.to_regclass(%s)::oid", lit);
    r = loader_exec_stoppable(conn, sql, stop, &interrupted);
    if (interrupted) {
        snprintf(err, errlen, "interrupted");
        goto done;
    }
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
        loader_set_result_error(err, errlen, "cannot take the lookup's snapshot", conn, r);
        goto done;
    }
    uint32_t first = 0;
    if (!xidsnap_sees_all(PQgetvalue(r, 0, 0), must_see, n_must_see, &first)) {
        if (first == 0)
            snprintf(err, errlen, "cannot read the lookup's snapshot");
        else
            out = VERIFY_NOT_YET;
        goto done;
    }
    if (PQgetisnull(r, 0, 1) || strtoul(PQgetvalue(r, 0, 1), NULL, 10) != relid) {
        snprintf(err, errlen, "%s names another relation than the one loaded (oid %" PRIu32
                 "): nothing is verified until a load reads it", fc->table, relid);
        goto done;
    }
    PQclear(r);
    free(sql);
    if ((sql = lookup_sql(conn, tbl, col, keys, lens, n, err, errlen)) == NULL) {
        r = NULL;
        goto done;
    }
    r = loader_exec_stoppable(conn, sql, stop, &interrupted);
    if (interrupted) {
        snprintf(err, errlen, "interrupted");
        goto done;
    }
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        loader_set_result_error(err, errlen, "the lookup failed", conn, r);
        goto done;
    }
    mark(r, spell, keys, lens, n, present);
    out = VERIFY_OK;
done:
    PQclear(r);
    if (begun && !interrupted) {
        if (out == VERIFY_OK
            && !loader_command(conn, "COMMIT", PGRES_COMMAND_OK, "COMMIT failed", err, errlen))
            out = VERIFY_FAILED;
        else if (out != VERIFY_OK)
            rollback(conn);
    }
    PQfreemem(lit);
    free(sql);
    free(tbl);
    free(col);
    return out;
}
