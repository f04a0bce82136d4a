/*
 * The resumable change feed (sql/notify.sql's bloomguard_feed_log, design in
 * docs/feed.md): what a restarted or reconnected bloomguard reads instead of
 * copying the whole table again.  A position says "every row committed
 * before it is already in the filter"; reading from it returns every ID
 * committed since (and perhaps some again) and the position to resume from
 * next time.
 *
 * Nothing here starts threads, logs or keeps state between calls (but a
 * struct feed_bound the caller keeps).  Each call
 * uses the connection it is given and nothing else; a connection must not be
 * used by two threads at once (libpq's rule), so callers give each thread its
 * own.  Errors and the reasons for "too old" and "unavailable" are written to
 * err as text: a short public part, then ": " and the detail from libpq.
 */
#ifndef BLOOMGUARD_FEED_H
#define BLOOMGUARD_FEED_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * A position is an opaque NUL-terminated string shorter than FEED_POS_MAX
 * ("<xmin>/<origin>"), to be stored as is (e.g. in a snapshot's header) and
 * handed back to feed_read.
 */
#define FEED_POS_MAX 128

/*
 * A bound on silence, for the method feed follower's own session only: a
 * silent partition behind something that still answers TCP (a frozen
 * proxy ACKs, keepalives pass) would leave a blocking query waiting
 * forever.  With a bound, each answer is waited for in slices of
 * FEED_SLICE_MS (libpq reads at each, TLS included); after stall_s seconds
 * ([sync] silence_timeout for the follower) without a byte the socket is
 * shut down (PQstatus turns CONNECTION_BAD) and stalled is set.  A long
 * answer that keeps arriving is never cut.
 *
 * Never bound a connection that may wait on a lock or run long without
 * answering (the scheduler's loads and prunes): giving the socket up leaves
 * the backend queued on the server.  The follower's session sets
 * lock_timeout below the bound (feed_bound_session), so a lock wait ends
 * with an error, which frees the backend, before the bound.
 *
 * One struct per connection, owned by its one thread; the caller clears
 * stalled when it reconnects.
 */
#define FEED_SLICE_MS 100
struct feed_bound {
    int stall_s;                /* > 0 */
    bool stalled;               /* set by a call that gave the connection up */
};

/*
 * Set the session's lock_timeout to two thirds of b->stall_s (err on
 * failure), bounded by b: call it once after connecting a bounded session.
 */
bool feed_bound_session(PGconn *conn, struct feed_bound *b, char *err, size_t errlen);

/*
 * PQexecParams (nparams 0: PQexec, several statements allowed) waiting as
 * b bounds (NULL: PQexec's unbounded wait).  Returns the first result (a
 * COPY's PGRES_COPY_*: then read the rows with feed_copy_row), never NULL;
 * after a stall a PGRES_FATAL_ERROR result.  sql NULL: no query is sent, the
 * pending one's next result is collected the same way (the end of a COPY).
 * The caller PQclears.
 */
PGresult *feed_exec(PGconn *conn, struct feed_bound *b, const char *sql, int nparams,
                    const char *const *params);

/* loader_copy_row (loader.h: 1 row, 0 end, -1 failure) waiting as b (non-NULL) bounds. */
int feed_copy_row(PGconn *conn, struct feed_bound *b, char **buf, size_t *len);

/*
 * Whether the feed is installed in the connection's database for table
 * ("name" or "schema.name", as [postgres] table) and column, and this role
 * may read it: sets *available.  When it is not, err says why (not
 * installed, table not watched with the feed, another column, its trigger
 * disabled or replaced since bloomguard_watch, no permission).  Returns
 * false only on an error (err), e.g. the connection failed or the table does
 * not exist.  Call it outside any transaction: a query that fails (no
 * privilege) would abort the caller's.
 */
bool feed_available(PGconn *conn, const char *table, const char *column, bool *available,
                    char *err, size_t errlen);
/* The same, waiting as bound bounds (the follower's own session; NULL: unbounded). */
bool feed_available_bounded(PGconn *conn, struct feed_bound *bound, const char *table,
                            const char *column, bool *available, char *err, size_t errlen);

/*
 * The position of the connection's current snapshot, into pos
 * (FEED_POS_MAX bytes).  For a full load: call it inside the COPY's
 * REPEATABLE READ transaction, or before the COPY starts (a position taken
 * earlier is only more cautious); never after a COPY that ran in its own
 * snapshot.  False with err when the feed is not installed or on error.
 */
bool feed_position(PGconn *conn, char *pos, char *err, size_t errlen);

/*
 * Called with each ID read, NUL-terminated, len bytes (an ID may contain
 * NUL bytes: use len).  The buffer is valid only during the call.  Return
 * false to stop the read.
 */
typedef bool (*feed_id_fn)(void *arg, const char *id, size_t len);

/*
 * Stream every ID of table's column committed at or after position since
 * to fn (IDs may come more than once, and some committed before since),
 * in one REPEATABLE READ transaction of its own (conn must be idle, outside
 * any transaction).  On success writes the position to resume from next
 * time to next (FEED_POS_MAX bytes), *rows (may be NULL) to the IDs read,
 * and returns true.  When the feed cannot resume from since (pruned past it,
 * the table watched after it, the trigger changed, another cluster, the feed
 * not installed) it reads nothing, sets *too_old, writes why to err and
 * returns true: load the table instead.  Returns false with err on an error
 * or when fn stopped the read; the connection may then be left inside a
 * COPY: PQfinish it.
 *
 * bound: NULL, or the session's bound (see struct feed_bound): after a
 * stall it returns false with err "no answer in N s ...", bound->stalled
 * set and the connection CONNECTION_BAD.
 *
 * resume: the first read on a connection, after a restart or a reconnect.
 * The database may then be another history than the position's (a cold
 * backup restored keeps the cluster's identity, and hands out again the
 * transaction ids the position passed), so the read starts from the newest
 * mark of the position's history at or below it that this database still
 * has (a mark's row is there only if this history committed it, and with
 * it every transaction below its snapshot): re-reading what came after the
 * mark, never skipping a transaction of this history.  No such mark: too
 * old.  Reads on one connection after the first are one history: no
 * rewind.
 *
 * shape: NULL, or FEED_SHAPE_MAX bytes for the shape of the table and
 * column (loader.h's LOADER_SHAPE_SQL) as the read's snapshot saw it, set
 * once the read got that far (a follower's table_schema check, made after
 * the read's start).
 */
#define FEED_SHAPE_MAX 33
bool feed_read(PGconn *conn, struct feed_bound *bound, const char *table, const char *column,
               const char *since, bool resume, feed_id_fn fn, void *arg, char *next,
               uint64_t *rows, bool *too_old, char *shape, char *err, size_t errlen);

/*
 * Record a mark of this history now (bloomguard_feed_mark: the snapshot's
 * xmin and the origin), so that a position taken after it can be resumed
 * from after a restore (see feed_read's resume).  Called before a COPY's
 * position is taken; prunes record marks too.  False (err) when the
 * function is missing (an older sql/notify.sql) or fails: positions then
 * rewind to the prunes' marks only.
 */
bool feed_mark(PGconn *conn, char *err, size_t errlen);

/*
 * Forget what is older than retention_seconds: bloomguard_feed_prune (which
 * this role may only EXECUTE).  Positions younger than the retention stay
 * valid; older ones may read as too old.  Writes the number of log rows
 * deleted to *deleted (may be NULL).  Cheap and safe to call from every
 * sidecar; each call also records the mark later prunes and post-crash
 * resumes cut at, so call it regularly (docs/feed.md).
 */
bool feed_prune(PGconn *conn, double retention_seconds, uint64_t *deleted,
                char *err, size_t errlen);

#endif
