/*
 * One guarded table: its filter (through a guard), its POST journal, its
 * horizon, and what it wants done next.  This is the core protocol of
 * bloomguard: whether an answer may be "absent" is decided here and nowhere
 * else, so handlers ask a table and never look below it.  Pure: no libpq,
 * no threads of its own, no logging, so every rule here is unit-tested
 * without PostgreSQL (tests/check_table.c).
 *
 * The horizon.  H is a time such that every row committed before H is in
 * the filter.  A follower (follow.h) proves it, each in its own way, and
 * moves it with table_advance; an "absent" answer is given only while
 * now - H <= [sync] max_staleness, else it is "degraded" (answered as
 * "maybe"): answer_degraded (answer.h) is the rule, with no H yet (0)
 * degraded too.  H moves only while the live filter covers the current epoch:
 * an epoch is a stretch in which the follower's view of the table is
 * whole.  Anything that may have lost rows (a new LISTEN connection, a new
 * replication slot, an ID too long to notify, a publication changed) starts
 * a new epoch with table_gap, and H stays put until a load (a COPY, or a
 * catch-up from a position) that started in that epoch is live.
 *
 * Verified absent (issue 35).  An ID the filter answers "maybe" for again
 * and again (hot.h), or that a service reports missing (POST /absent), is
 * a candidate; the verifier looks it up in PostgreSQL; one the table lacks
 * goes into an exact set (vset.h) that the lookup sequence (answer.h)
 * denies from, subject to the horizon like any absent answer (degraded
 * tables answer "maybe").  Every add of a key (a followed row, a POST, a
 * row a COPY reads) ends its denial before it returns, and a lookup an add
 * overtakes (an insert committed after its snapshot, followed before its
 * answer) is not believed: table_adapt.h proves it, step by step, and
 * has the calls of the verifier and of POST /absent.
 *
 * Clocks: H and every `when` below are nanoseconds of CLOCK_BOOTTIME
 * (monoclock_boot_ns), which keeps counting while the machine sleeps, so a suspend
 * never makes an old horizon look fresh.
 */
#ifndef BLOOMGUARD_TABLE_H
#define BLOOMGUARD_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "config.h"
#include "monoclock.h"
#include "filter.h"
#include "spell.h"
#include "table_fleet.h"
#include "table_publish.h"
#include "table_store.h"

struct table;

#include "table_adapt.h"    /* verified-absent IDs: the verifier's calls, POST /absent */

/* Longest position (follow.h) a table keeps, terminator included. */
#define TABLE_POS_MAX 384
/* Bytes of a method's reason (table_set_method), whole: a cut one reads as another reason. */
#define TABLE_METHOD_WHY_MAX 320

/*
 * What PostgreSQL says the guarded column is, read at every load with the
 * daemon's own session (loader_identify): the relation by OID, not by name,
 * and the column's type, which decides how an ID is spelled (spell.h).
 */
struct table_ident {
    uint32_t relid;                 /* pg_class oid of the table the name resolved to; 0: unknown */
    int attnum;                     /* the column's number */
    uint32_t typid;                 /* its type (a domain's own oid) */
    uint32_t base_typid;            /* the type through domains */
    int32_t typmod;
    bool deterministic;             /* its collation compares bytes */
    enum spell_type spell;          /* spell_type_of(base_typid, typmod, deterministic) */
    uint32_t dboid;                 /* the database */
    char sysid[24];                 /* the cluster's system identifier */
    char type_name[64];             /* format_type, for /stats */
    /*
     * What the table's SELECT reads, as a fingerprint (loader.h's
     * LOADER_SHAPE_SQL): the relation and every inheritance child or
     * partition under it, and in each the column's number, type and
     * catalog row version, so a rename, a type change, a drop or a new
     * child changes it.  "" = not known (a snapshot's metadata has none).
     */
    char shape[33];
};


/*
 * A table for filter fc of cfg (both must outlive it), owning a new guard
 * and a new journal sized from fc.  It reads [sync] max_staleness (0 =
 * never degraded) and min_rebuild_interval from cfg.  NULL on allocation
 * failure.
 */
struct table *table_new(const struct config *cfg, const struct filter_config *fc);
/*
 * wake(arg) is called (under no lock of the table) whenever a load becomes
 * wanted, so the rebuild scheduler can wake; NULL: nobody.  Set it before
 * other threads use the table.
 */
void table_set_wake(struct table *t, void (*wake)(void *arg), void *arg);
/*
 * Whether the table vouches for no absence at now, whatever its horizon:
 * its live filter is saturated, a cut POST log holds absent answers
 * (table_hold_absent), or a filter from elsewhere is on probation
 * (table_vet_begin).  answer_degraded's "unsure".  Lock-free, any thread.
 */
bool table_unsure(struct table *t, int64_t now);

/* Free the table, its guard and its journal; no other thread may use it.  NULL: no-op. */
void table_free(struct table *t);

/*
 * The filter's configuration at start.  Its [filter] sizing keys may have
 * been reloaded since: table_sizing has the ones the next load uses.
 */
const struct filter_config *table_config(const struct table *t);

/*
 * The [filter] keys a SIGHUP may change without a restart (CONFIG_REBUILD):
 * they size the next load's filter; the live one keeps its own.
 */
struct table_sizing {
    uint64_t expected_items;
    double false_positive_rate;
    double headroom;
    unsigned max_layers;
    double growth;
    enum filter_kind kind;
};

/* Put fc's sizing keys in force for t's next load.  Any thread; fc is only read. */
void table_set_sizing(struct table *t, const struct filter_config *fc);

/* The sizing the next load uses (table_config's until table_set_sizing).  Any thread. */
struct table_sizing table_sizing(struct table *t);
const char *table_name(const struct table *t);

/* ------------------------------------------------------------ answers -- */

enum table_answer {
    TABLE_NOT_READY = -1,   /* no filter loaded yet: 503 */
    TABLE_ABSENT = 0,       /* surely absent: 404, /auth denies */
    TABLE_MAYBE = 1,        /* maybe present: 200 */
    TABLE_DEGRADED = 2,     /* the filter says absent, but the horizon cannot back it: "maybe" */
    TABLE_UNPROVABLE = 3    /* this spelling cannot be proven absent (spell.h): "maybe" */
};

/*
 * Look an ID up, as the request spelled it: by its key for the column's
 * type (spell_key: "0005" finds the bigint 5, an upper-case uuid its row; a
 * value the type refuses or cannot hold is absent; a spelling whose value
 * cannot be known is TABLE_UNPROVABLE).  Lock-free, from any thread.  The
 * horizon is read before the filter (every swap and every add is published
 * before the horizon that covers it), so an answer pairs a filter with a
 * horizon no newer than it.
 */
enum table_answer table_lookup(struct table *t, const void *id, size_t len);

/*
 * Many IDs under one read section and one horizon: out[i] for ids[i], each
 * what table_lookup would answer (whether the horizon is stale is judged
 * once for the batch).  False when not ready (out untouched).
 */
bool table_lookup_many(struct table *t, size_t n, const char *const *ids, const size_t *lens,
                       enum table_answer *out);

/*
 * Acknowledged POSTs may be missing from the journal (the POST log was cut
 * while stopped, or damaged: postlog.h) and could have been read back
 * until `until` (monoclock_boot_ns's clock): until then every absent answer is
 * "maybe" (degraded), whatever the horizon, so that none of them answers
 * 404; a publisher (publish.c) flags its readers the same way.  A later
 * until extends it, an earlier one changes nothing.  table_held_for: the
 * seconds still to go (0: none).  Thread-safe, lock-free.
 */
void table_hold_absent(struct table *t, int64_t until);
double table_held_for(struct table *t);

/*
 * The column's spelling now (the last load's, or a restored snapshot's):
 * what table_lookup applies.  SPELL_TEXT before any load.
 */
enum spell_type table_spell(const struct table *t);
/* The identity of the live filter's load (zeros before any). */
void table_ident(struct table *t, struct table_ident *out);

enum table_insert_result {
    TABLE_INSERTED = 0,
    TABLE_INSERT_NOT_READY,     /* no filter to add to (nothing was journalled) */
    TABLE_INSERT_NOT_A_VALUE,   /* an ID the column's type refuses (*err: its index): none added */
    TABLE_INSERT_FULL_COUNT,    /* the journal holds pending_limit IDs: none added */
    TABLE_INSERT_FULL_BYTES,    /* the journal holds pending_max_bytes: none added */
    TABLE_INSERT_NOT_DURABLE,   /* the durable log failed (*err): none acknowledged */
    TABLE_INSERT_NOMEM,
    TABLE_INSERT_LATER          /* table_insert_later: the result comes through its callback */
};

/*
 * Where an acknowledged POST becomes durable: fn writes the IDs somewhere
 * that survives a crash (persist.c: the POST log) and returns 0 once they
 * are there, or an errno value.  It is called by table_insert, from any
 * thread, after the journal held room for the IDs and before the journal
 * and the filter take them (pending_reserve).  Set it before other threads
 * use the table; NULL (the default): memory only.
 */
typedef int (*table_durable_fn)(void *arg, size_t n, const char *const *ids, const size_t *lens,
                                uint64_t ttl);
/*
 * The same step without waiting: submit queues the IDs (copying them) and
 * returns 0, then calls done(done_arg, err) exactly once, from another
 * thread, with 0 once they are durable or an errno value; or it returns an
 * errno value at once, done never called.  The journal takes the IDs (or
 * gives their room back) inside done, so a log that reads the journal to
 * rewrite itself must wait for the done calls of what it wrote before
 * (postlog_submit does).  When set, table_insert uses it too (and waits);
 * NULL: both wait on fn.
 */
typedef void (*table_durable_done_fn)(void *done_arg, int err);
typedef int (*table_durable_submit_fn)(void *arg, size_t n, const char *const *ids,
                                       const size_t *lens, uint64_t ttl,
                                       table_durable_done_fn done, void *done_arg);
void table_set_durable(struct table *t, table_durable_fn fn, table_durable_submit_fn submit,
                       void *arg);
/* Whether POSTs are made durable before they are acknowledged. */
bool table_durable(const struct table *t);

/*
 * POST /ids: each ID by its key for the column's type (an ID the type
 * refuses can never be a row: TABLE_INSERT_NOT_A_VALUE, *err its index);
 * room in the journal first, all or nothing, then the durable log, then
 * the journal and the filter.  A rebuild that replays the journal before
 * the adds is sure to find the IDs in its new filter, a crash after the
 * 2xx finds them in the log, and an ID the journal or the log cannot keep
 * is refused, never acknowledged, and leaves no trace: no rebuild, snapshot
 * or restart brings it back.  Thread-safe.  *inserted gets the IDs added; *err (may be
 * NULL) the errno value of TABLE_INSERT_NOT_DURABLE.
 */
enum table_insert_result table_insert(struct table *t, size_t n, const char *const *ids,
                                      const size_t *lens, size_t *inserted, int *err);

/*
 * As table_insert, for a server that suspends the request while the disk
 * works (one fdatasync then commits many requests of one thread): when the
 * durable step runs in the background, returns TABLE_INSERT_LATER and
 * later calls done(arg, result, inserted, err) exactly once, from another
 * thread, with what table_insert would have returned; otherwise returns
 * that at once (done never called).  The IDs are copied before it returns.
 */
typedef void (*table_insert_done_fn)(void *arg, enum table_insert_result r, size_t inserted,
                                     int err);
enum table_insert_result table_insert_later(struct table *t, size_t n, const char *const *ids,
                                            const size_t *lens, size_t *inserted, int *err,
                                            table_insert_done_fn done, void *arg);

/* ------------------------------------------------------- from followers -- */

/*
 * A committed row's ID, as a follower saw it (the column's text), by its
 * key: into the live filter and the one being built.  Never into the journal (any role may send a
 * notification; only a COPY removes journal entries).  False when there is
 * no filter yet (the first load will copy the row).  Thread-safe.
 */
bool table_add_row(struct table *t, const void *id, size_t len);

/*
 * Counts for /stats: rows a follower added and deletes it saw.  Deletes
 * count towards [sync] rebuild_after_deletes, which then wants a COPY.
 */
void table_count_rows(struct table *t, uint64_t added, uint64_t deleted);

/*
 * The table was truncated: every row it had is gone, which counts as
 * reaching [sync] rebuild_after_deletes (when set).
 */
void table_note_truncate(struct table *t);

/* The current epoch (see the top of this file). */
uint64_t table_epoch(struct table *t);


/*
 * Rows may have been lost: start a new epoch (the horizon waits for a load
 * that starts in it) and want a load for why.  Thread-safe.
 */
enum table_want;
void table_gap(struct table *t, enum table_want why);

/*
 * Every row committed before when is in the live filter, as far as the
 * caller's epoch goes: H moves to when if the live filter covers the
 * current epoch and epoch is still it.  Returns whether that held (the
 * proof applies to the table), even when H was already past when.
 * Thread-safe.
 */
bool table_advance(struct table *t, uint64_t epoch, int64_t when);

/* Whether the live filter covers the current epoch (no gap since its load). */
bool table_covered(struct table *t);

/*
 * A follower's check of what the table's SELECT reads, made after the T of
 * the proof it is about to give (table_advance, table_polled), so that a
 * change before T is seen:
 *   shape      the fingerprint of the column and the tables it is read
 *              from now (LOADER_SHAPE_SQL), "" when the table or the
 *              column does not exist; NULL: not read this time (the last
 *              one stands, only the coverage is news);
 *   uncovered  NULL when the follower hears every row of those tables,
 *              else why not, for the log and /stats (an inheritance child
 *              without the trigger, a relation not in the publication).
 * A shape or coverage other than the last check's starts a new epoch that
 * wants a COPY (WANT_SCHEMA): rows may have been written in a form the
 * filter does not spell (a type changed), under a name nobody read (a
 * rename), or into a table nobody heard (a new child).  While the shape is
 * not the live filter's load's (ident.shape; a restored filter adopts the
 * first one checked) or a table is not covered, proofs do not move the
 * horizon (degraded, with the reason in /stats' horizon.reason); a shape
 * that stays unlike the load's with no load wanted (a COPY that identified
 * the column just before the change) wants one.  A load's commit makes its
 * own shape the last one seen.  Before the first load it only remembers.
 * Thread-safe.
 */
enum table_schema_verdict {
    TABLE_SCHEMA_SAME,      /* as the live filter's load: proofs hold */
    TABLE_SCHEMA_CHANGED,   /* changed since the last check: a gap was started (log it) */
    TABLE_SCHEMA_OFF        /* unlike the load's or not covered, as already known */
};
enum table_schema_verdict table_schema(struct table *t, const char *shape, const char *uncovered);

/* ------------------------------------------------------------- wants -- */

/*
 * Why a load is wanted.  Each reason says whether a catch-up (reading only
 * what changed since the filter's position) can satisfy it or whether it
 * needs a fresh COPY of the table: policy is this table, not the text of a
 * reason.
 */
enum table_want {
    WANT_NONE = 0,
    WANT_START,         /* the first load, or bringing a restored snapshot up to date */
    WANT_RECONNECT,     /* the follower's view had a gap: catch up if a position allows */
    WANT_LONG_ID,       /* a row's ID did not fit in a notification */
    WANT_POSITION,      /* the position went bad (too old, another history): copy */
    WANT_API,           /* POST /reload: a fresh COPY, as it promises */
    WANT_SIGHUP,        /* SIGHUP: a fresh COPY */
    WANT_INTERVAL,      /* [sync] rebuild_interval */
    WANT_DELETES,       /* [sync] rebuild_after_deletes */
    WANT_GROWTH,        /* the filter outgrew its capacity: a larger one from the table */
    WANT_SCHEMA,        /* the column or the tables it is read from changed (table_schema): copy */
    WANT_REPUBLISH,     /* the published file was lost (a tmpfs mounted anew): a load to publish */
    WANT_COUNT
};
/* The word for logs and /stats ("start", "reconnect", "api", ...). */
const char *table_want_name(enum table_want w);
/* Whether a catch-up from the filter's position may satisfy w. */
bool table_want_may_catch_up(enum table_want w);

/*
 * Ask for a load.  Returns the id (counted per table) of the load that
 * will satisfy the request: requests made while one is pending share its
 * id (*coalesced = true; may be NULL).  A pending want that a catch-up
 * could satisfy is upgraded when one that needs a COPY joins it, so a
 * POST /reload never becomes a catch-up.  Thread-safe.
 */
uint64_t table_want(struct table *t, enum table_want why, bool *coalesced);

/* A job the scheduler took: which load, why, and whether it may be a catch-up. */
struct table_job {
    uint64_t id;
    enum table_want why;
    bool may_catch_up;          /* why allows it and the table has a position */
    bool first;                 /* no load has succeeded yet */
};

/*
 * For the scheduler: whether t has a load it may start at now (ns of
 * monoclock_boot_ns); if so, take it (*job filled, the table shows it running).
 * COPYs wait [sync] min_rebuild_interval after the previous load ends and
 * a failed load waits its backoff; catch-ups wait only for the backoff.
 * Otherwise *wait_ns (unchanged if larger) shrinks to when it may.
 */
bool table_take_job(struct table *t, int64_t now, struct table_job *job, int64_t *wait_ns);

/*
 * The job ended.  kind: "copy", "catchup", "stream" (what ran).  A failed
 * job stays wanted and is retried after retry_ms; a successful one clears
 * the delete count and the error.
 */
void table_job_done(struct table *t, const struct table_job *job, bool ok, const char *kind,
                    uint64_t rows, double seconds, unsigned retry_ms);

/* Rows copied so far by the running load (for /stats). */
void table_job_progress(struct table *t, uint64_t rows);

/*
 * On the scheduler's ticks: want a load when rebuild_interval passed, or
 * (auto_grow) the filter is saturated, or grew layers and added none for
 * min_rebuild_interval.
 */
void table_check_timers(struct table *t);

/* The growth a filter of fc's gets: [filter] growth and max_layers (filter.h). */
struct filter_growth table_growth(const struct filter_config *fc);

/* The same from a reloaded sizing. */
struct filter_growth table_growth_of(const struct table_sizing *sz);

/*
 * Items to size a load for: the rows (the most of the estimate, the last
 * load's, the live filter's items) times headroom, or while they fit in
 * expected_items (a floor) it, "fit" allowing 2% over it for the
 * estimate's sampling error (a load that finds more rows than the filter
 * takes copies again: table_load_resize); a WANT_GROWTH load (a fold) the
 * rows times the larger of headroom and growth, at least the floor.
 * Bounded.
 */
uint64_t table_plan_items(struct table *t, uint64_t estimated_rows);

/* ------------------------------------------------------------- loads -- */

struct table_load;

/*
 * Start building a new filter for items IDs of the column ident describes
 * (loader_identify, on the COPY's connection): from now on every insert
 * (POSTs, followers) reaches it too, through a backlog while the COPY
 * bulk-loads it.  The COPY adds each row by its key (spell_key with
 * ident->spell), as table_load_seen's id.  The caller then gets a ticket from its follower (the
 * epoch, in the same locked section that shows the follower may start a
 * COPY) and starts the COPY's snapshot.  NULL with *err when the filter
 * cannot be made.
 */
struct table_load *table_load_begin(struct table *t, uint64_t items,
                                    const struct table_ident *ident, enum filter_error *err);
/* The filter being built (for loader_copy.c's bulk adds: the caller is its only bulk writer). */
struct filter *table_load_filter(struct table_load *l);
/*
 * The COPY outgrew the filter: one for rows (*items: table_plan_items's,
 * or the rows themselves where that is no larger than the filter they
 * outgrew) replaces it, inserts kept; NULL: *err.
 */
struct filter *table_load_resize(struct table_load *l, uint64_t rows, uint64_t *items,
                                 enum filter_error *err);
/*
 * One row of the COPY, already hashed: the journal forgets it (the table
 * holds it now).  Called for each row by the copy's row callback.
 */
void table_load_seen(struct table_load *l, const char *id, size_t len, uint64_t h);
/*
 * The COPY's rows hs[0, n) went, or are going, into the filter: whatever
 * was verified absent of their IDs is over (table_adapt.h, step 3).  In
 * batches, from the load's one thread, for every row read (once is
 * enough; again is harmless), before table_load_commit.
 */
void table_load_added(struct table_load *l, const uint64_t *hs, size_t n);

/*
 * The COPY (which started after start, in epoch) is done: the journal is
 * replayed into the new filter, which goes live with its identity; the table covers epoch,
 * its horizon moves to start and its position becomes pos ("" = none).
 * False when the inserts made meanwhile ran out of memory (the load is
 * then aborted).  Frees l either way.
 */
bool table_load_commit(struct table_load *l, uint64_t epoch, int64_t start, const char *pos);
/* Drop the new filter.  Frees l. */
void table_load_abort(struct table_load *l);

/*
 * A catch-up read the rows committed since the position into the live
 * filter: as a load that started at start in epoch, with the new position.
 */
void table_caught_up(struct table *t, uint64_t epoch, int64_t start, const char *pos,
                     uint64_t rows);

/*
 * A poll of the change feed read every row committed since the position:
 * as a catch-up (the table covers epoch, H moves to start, the position to
 * pos), counted as rows followed rather than as a catch-up.
 */
void table_polled(struct table *t, uint64_t epoch, int64_t start, const char *pos,
                  uint64_t rows);

/* The live filter's position ("" = none) into out (TABLE_POS_MAX bytes). */
void table_position(struct table *t, char *out, size_t cap);
/* Forget the position: the next load copies the table. */
void table_drop_position(struct table *t);
/* Whether a load has succeeded (or a snapshot was restored). */
bool table_loaded(struct table *t);

/* -------------------------------------------------------------- status -- */

/* Whether a filter is live (loaded or restored): lookups answer.  Any thread. */
bool table_ready(struct table *t);

/*
 * The live filter's figures (filter.h) and its layers, oldest first, into
 * layer[0 .. cap) (*n_layers of them): false, with *info zeroed and
 * *n_layers 0, when no filter is live yet.  Any thread.
 */
bool table_filter_info(struct table *t, struct filter_info *info,
                       struct filter_layer_info *layer, unsigned cap, unsigned *n_layers);

/* The POSTed IDs the table keeps until a COPY shows them (its journal). */
struct table_posts {
    uint64_t count;         /* IDs kept now (more than limit after a restore into smaller limits) */
    uint64_t bytes;         /* their bytes */
    uint64_t refused;       /* IDs refused because the journal was full */
    uint64_t expired;       /* entries dropped by [filter] pending_ttl */
    uint64_t limit, max_bytes, ttl;     /* [filter] pending_limit, pending_max_bytes, pending_ttl */
};
void table_posts(struct table *t, struct table_posts *out);

/*
 * How the table is followed: set by the follower that took it, or "none"
 * with what is missing.  method_since moves only when either changes.
 * Returns whether either changed.
 */
bool table_set_method(struct table *t, const char *method, const char *why);

/*
 * A load or catch-up failed: the reason (public part only: no hosts, paths,
 * roles), as follow_public_error makes it; a trailing SQLSTATE tag is kept
 * apart in last_sqlstate.
 */
void table_set_error(struct table *t, const char *err);

/* Snapshot writes, for /stats. */
void table_snapshot_written(struct table *t, bool ok);

/* The position could not be resumed from (counted; the position is dropped). */
void table_count_too_old(struct table *t);
void table_set_feed_available(struct table *t, bool available);

struct table_status {
    char method[16];                /* "logical", "feed", "notify", "none", "" = not chosen yet */
    char method_why[TABLE_METHOD_WHY_MAX];  /* why that one */
    time_t method_since;            /* when method or method_why last changed; 0: not chosen yet */
    bool attempted;                 /* a first load has finished, ok or not */
    char last_error[160];           /* the last failure's public part, "" = none */
    char last_sqlstate[6];          /* its SQLSTATE (pgerror.h), "" = none or unknown */
    /* last successful load */
    uint64_t last_rows;
    double last_seconds;
    time_t last_finished;           /* 0: none yet */
    char last_reason[16];           /* table_want_name */
    char last_kind[12];             /* "copy", "catchup", "stream", "snapshot", "peer" */
    /* loads */
    bool running;
    uint64_t running_id, running_rows;
    time_t running_since;
    char running_reason[16];
    uint64_t requested_id, completed_id;
    uint64_t rebuilds_ok, rebuilds_failed;
    double rebuild_seconds_sum;
    double next_rebuild_in;         /* seconds min_rebuild_interval still holds a wanted COPY back */
    /* rows from the follower */
    uint64_t notifications;         /* IDs a follower added (notified, polled, streamed) */
    uint64_t deletes;               /* deletes seen since the last COPY */
    uint64_t long_ids;              /* rows whose ID did not fit in a notification */
    /* positions and catch-ups */
    bool feed_available;
    char position[TABLE_POS_MAX];   /* "" = none */
    uint64_t copies, catchups, feed_rows_read, last_feed_rows, too_old;
    /* snapshots */
    char restored_from[8];          /* "file", "peer", "" */
    char peer_check[10];            /* a peer's snapshot (table_vet): "pending", "passed", "refused", "" */
    struct table_ident ident;       /* the live filter's column (zeros before any load) */
    uint64_t not_a_value;           /* IDs the column's type refused, looked up or POSTed */
    uint64_t snapshot_writes, snapshot_failures;
    time_t snapshot_written;
    /* the horizon */
    double horizon_age;             /* seconds since H; negative: no H yet */
    bool degraded;                  /* loaded, and absent answers are "maybe" (answer_degraded) */
    bool saturated;                 /* the filter can no longer keep its rate (filter.h) */
    char schema_why[320];           /* why table_schema holds proofs back, "" = it does not */
    double held_for;                /* seconds absent answers stay "maybe" for lost POSTs (0: none) */
    double degraded_seconds;        /* total time spent degraded (loaded: not before) */
};
void table_status(struct table *t, struct table_status *out);

/* Counts a follower reports with table_count_long_id. */
void table_count_long_id(struct table *t);

#endif
