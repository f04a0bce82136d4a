/*
 * Reading IDs out of PostgreSQL: connecting, counting rows and streaming a
 * column with COPY ... TO STDOUT into a filter.  The caller decides which
 * filter (a new one built off to the side) and swaps it in afterwards.
 */
#ifndef BLOOMGUARD_LOADER_H
#define BLOOMGUARD_LOADER_H

#include <libpq-fe.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "filter.h"
#include "table.h"

/*
 * Connect with [postgres] conninfo (empty: libpq defaults and PG* variables),
 * with a 10 s connect timeout and TCP keepalives (idle 10 s, 3 probes 5 s
 * apart) unless conninfo sets them.  Returns NULL and
 * writes the reason to err on failure.  Close with PQfinish.
 */
PGconn *loader_connect(const struct config *cfg, char *err, size_t errlen);

/*
 * The same with application_name app unless conninfo sets one: each
 * follower names its connections ("bloomguard feed", ...) so that an
 * operator can tell them apart in pg_stat_activity.
 */
PGconn *loader_connect_as(const struct config *cfg, const char *app, char *err, size_t errlen);

/*
 * The same as a logical replication connection (replication=database), for
 * method logical's stream, with the same session settings: the walsender
 * renders every value with them and converts it to the client encoding.
 */
PGconn *loader_connect_replication(const struct config *cfg, char *err, size_t errlen);

/*
 * The settings every bloomguard session runs with (client encoding and the
 * output formats of dates, times, floats, bytea and intervals), so an ID's
 * text form does not depend on the server's or role's defaults.
 * sql/notify.sql's trigger function pins the same ones.
 */
#define LOADER_SESSION_SETTINGS \
    "SET client_encoding = 'UTF8'; SET DateStyle = 'ISO, MDY'; SET TimeZone = 'UTC'; " \
    "SET IntervalStyle = 'postgres'; SET extra_float_digits = 1; SET bytea_output = 'hex'"

/*
 * "what: <libpq's last error>" into err, without libpq's trailing newline
 * (just "what" when libpq says nothing): the form of every error here.
 */
void loader_set_error(char *err, size_t errlen, const char *what, PGconn *conn);
/*
 * Both end with " (SQLSTATE xxxxx)" when the code is known (pgerror.h): the
 * failed result's code here; loader_set_error reads it from a refused
 * connection's FATAL line only.  r may be NULL (then as loader_set_error).
 */
void loader_set_result_error(char *err, size_t errlen, const char *what, PGconn *conn,
                             const PGresult *r);

/*
 * PQexec sql (one or more commands, unbounded) and expect the last
 * result's status want (PGRES_COMMAND_OK, PGRES_COPY_BOTH...); else false
 * with "what: ..." in err (loader_set_result_error).  The result is cleared.
 */
bool loader_command(PGconn *conn, const char *sql, ExecStatusType want, const char *what,
                    char *err, size_t errlen);

/* PQprepare sql as statement name (nparams parameters, types inferred); else as loader_command. */
bool loader_prepare(PGconn *conn, const char *name, const char *sql, int nparams, const char *what,
                    char *err, size_t errlen);

/*
 * PQexec of one statement (no COPY), waiting at most LOADER_POLL_MS at a
 * time so that a stop ends the wait: its result (the caller PQclears it),
 * or NULL, with *interrupted set when stop (NULL: none) came first (the
 * statement may still run: PQfinish the connection), or when libpq failed
 * (PQerrorMessage).
 */
PGresult *loader_exec_stoppable(PGconn *conn, const char *sql, atomic_bool *stop,
                                bool *interrupted);

/*
 * Who the connection reached: the server's start time, address, port and
 * database in out, e.g. to check that two connections reach one server.
 * False (with the reason) when it cannot be read or the server is a standby.
 */
bool loader_server_id(PGconn *conn, char *out, size_t outlen, char *err, size_t errlen);

/*
 * The quoted, schema-qualified table name and quoted column for SQL, built
 * with PQescapeIdentifier so no name can inject SQL.  Writes "tbl" and "col"
 * (caller frees both with free()) or an error.
 */
bool loader_quote_names(PGconn *conn, const struct filter_config *fc, char **tbl, char **col,
                        char *err, size_t errlen);

/* The same for any table ("name" or "schema.name") and column. */
bool loader_quote_table(PGconn *conn, const char *table, const char *column, char **tbl,
                        char **col, char *err, size_t errlen);

/*
 * Rows the table holds, from the statistics when the table has been
 * analysed (instant: the larger of pg_class.reltuples and the live rows
 * counted since, pg_stat_get_live_tuples), else by count(*).  An estimate:
 * a COPY that finds more sizes again (loader_copy).  Fails if the table
 * does not exist or cannot be read.
 */
bool loader_estimate_rows(PGconn *conn, const struct filter_config *fc, uint64_t *rows,
                          char *err, size_t errlen);

/* Called every LOADER_PROGRESS_ROWS rows with the rows copied so far. */
#define LOADER_PROGRESS_ROWS 100000
typedef void (*loader_progress_fn)(void *arg, uint64_t rows);

struct load_result {
    uint64_t rows;      /* IDs added (NULLs are skipped by the query) */
    double seconds;     /* wall time of the COPY (both passes of a resized one) */
    uint64_t resized;   /* 0, or the items of the filter a second pass filled (loader_copy) */
};

/*
 * The shape of what `SELECT col FROM rel` reads, as an SQL expression (a
 * scalar subquery) of REL, an expression giving the relation's oid, and COL,
 * one giving the column's name (both as SQL text): the md5, in hex, of the
 * relation and every table under it (inheritance children and partitions,
 * at any depth), each with its kind and its column of that name: number,
 * type, typmod and the catalog row's version (xmin), which any ALTER of
 * the column makes anew, a rename and its undoing included.  "" when REL is
 * NULL (no such table).  loader_identify reads it into table_ident.shape,
 * followers compare it (table_schema).
 */
#define LOADER_SHAPE_SQL(REL, COL)                                                          \
    "(SELECT coalesce(md5(string_agg(format('%s:%s:%s:%s:%s:%s', c.oid, c.relkind, "        \
    "a.attnum, a.atttypid, a.atttypmod, a.xmin), ',' ORDER BY c.oid)), '') "                \
    "FROM " LOADER_TREE_SQL(REL) " JOIN pg_catalog.pg_class c ON c.oid = tree.rel "         \
    "LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attname = " COL " "    \
    "AND a.attnum > 0 AND NOT a.attisdropped)"
/*
 * A FROM item, tree(rel): the oid REL (an SQL expression) and those of every
 * table under it, inheritance children and partitions at any depth (rows
 * whose SELECT FROM the table, without ONLY, returns).
 */
#define LOADER_TREE_SQL(REL)                                                                \
    "(WITH RECURSIVE tree(rel) AS (SELECT " REL " UNION SELECT i.inhrelid "                 \
    "FROM pg_catalog.pg_inherits i JOIN tree ON i.inhparent = tree.rel) SELECT rel "        \
    "FROM tree) tree"

/*
 * What the table name means now, with this connection's session (its
 * search_path): the relation's OID, the column's number and type (through
 * domains), its collation, the database and the cluster, and the shape of
 * what the COPY reads (LOADER_SHAPE_SQL), into out.  Fails
 * (err) when the table or the column does not exist or may not be read.
 * Every load asks it on its COPY's connection, so a rename, a drop and
 * create, or another schema's table of the same name is seen for what it
 * is.
 */
bool loader_identify(PGconn *conn, const struct filter_config *fc, struct table_ident *out,
                     char *err, size_t errlen);

/* What a COPY may be asked besides its table; every field may be 0/NULL. */
struct loader_copy_opts {
    const char *snapshot;       /* run in this exported snapshot (SET TRANSACTION SNAPSHOT) */
    const uint32_t *must_see;   /* else: in a snapshot that sees these transactions finished */
    size_t n_must_see;
    enum spell_type spell;      /* each row is added by its key for this spelling (spell.h) */
    atomic_bool *stop;          /* stop early with an error once true (see loader_copy) */
    loader_progress_fn progress;
    void *progress_arg;
};

/*
 * Stream every non-NULL ID (the column's text form) of the table into the
 * load's filter (table_load_filter) with COPY (SELECT col::text ...) TO
 * STDOUT, telling the load about each one (table_load_seen).  The COPY
 * runs in a REPEATABLE READ transaction: with o->snapshot, one that
 * imports that snapshot first (a replication slot's: the stream then
 * begins exactly where the COPY ends).  Else, with o->must_see, one whose
 * snapshot sees each of those transactions finished (xidsnap.h): a
 * snapshot that does not is let go and another taken every
 * LOADER_VISIBLE_TICK_MS, for LOADER_VISIBLE_WAIT_S at most (then an error
 * naming the first one).  The copy is the filter's only writer meanwhile
 * (bulk inserts without atomics; see guard_begin_bulk).  Holds no result
 * set and allocates nothing per row itself.  After a failure the
 * connection may be left inside the COPY: PQfinish it.
 *
 * A table holding more rows than the filter was sized for (it grows a
 * layer, or cannot keep its rate): the rest of the COPY is only counted,
 * then table_load_resize makes a filter for that count and the same
 * snapshot is copied into it again, so the load ends in one layer sized
 * for what it read (res->resized says so), never in a stack of layers.
 * Once only: a second pass that outgrows its filter grows it.
 *
 * Once *o->stop is true the copy fails ("load interrupted") within about
 * LOADER_POLL_MS, whether rows are streaming, the server is slow to produce
 * the next one, or the statement waits for a lock before its first: every
 * wait for the server is a poll of at most LOADER_POLL_MS, and the flag is
 * looked at before each row.  (The statement may go on in the server until
 * the caller's PQfinish closes the connection.)
 */
#define LOADER_POLL_MS 100
/* A COPY's snapshot that does not see o->must_see is taken again this often, this long. */
#define LOADER_VISIBLE_TICK_MS 10
#define LOADER_VISIBLE_WAIT_S 60
bool loader_copy(PGconn *conn, const struct filter_config *fc, struct table_load *l,
                 const struct loader_copy_opts *o, struct load_result *res, char *err,
                 size_t errlen);

/*
 * The next row of a single-column COPY ... TO STDOUT in text format: *buf
 * (free it with PQfreemem) gets the value unescaped and NUL-terminated,
 * *len its length.  1 for a row, 0 at the end of the COPY (collect its
 * result with PQgetResult), -1 on failure (PQerrorMessage says why).
 */
int loader_copy_row(PGconn *conn, char **buf, size_t *len);

/*
 * Undo COPY text-format escaping (\\, \n, \t, \r, \b, \f, \v, \NNN octal,
 * \xHH) in place; returns the new length.  Exposed for tests.
 */
size_t loader_unescape(char *s, size_t len);

#endif
