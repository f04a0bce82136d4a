/*
 * The ways of following a table after its first load, behind one
 * interface: each method is a module (follow_logical.c with logical_slot.c,
 * logical_tables.c and logical_stream.c, follow_feed.c, follow_notify.c), runs its own thread and hands every committed row to
 * the table module (table_add_row), proves freshness its own way
 * (table_advance) and says when it may have lost rows (table_gap).  The
 * rebuild scheduler (scheduler.c) asks a table's follower for a ticket before
 * each COPY and for catch-ups; it knows no method by name.
 *
 * This file also chooses the method of each table ([sync] method = auto |
 * logical | feed | notify) from what the server offers, and holds the
 * helpers the methods share.
 */
#ifndef BLOOMGUARD_FOLLOW_H
#define BLOOMGUARD_FOLLOW_H

#include <libpq-fe.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "config.h"
#include "log.h"
#include "table.h"

struct follower;

/* What a COPY gets from its table's follower before its snapshot starts. */
struct follow_ticket {
    uint64_t epoch;                 /* the table's epoch the COPY starts in */
    int64_t start;                  /* boot clock before the COPY's snapshot was taken, when that
                                       was before the COPY (an exported one); 0: the COPY's start */
    char position[TABLE_POS_MAX];   /* where the loaded filter will be exact, "" = none */
    char snapshot[64];              /* COPY inside this exported snapshot; "" = its own */
    /*
     * Transactions whose rows the follower already gave the live filter and
     * that a new snapshot may not see yet (xidsnap.h): the COPY's own
     * snapshot must see each.  malloc'ed; the scheduler frees it.
     */
    uint32_t *must_see;
    size_t n_must_see;
};

enum follow_state {
    FOLLOW_CONNECTING,              /* never connected yet */
    FOLLOW_CONNECTED,
    FOLLOW_RECONNECTING,            /* lost (or failing), retrying with backoff */
    FOLLOW_NONE                     /* no follower: nothing can follow the table, or [sync] enabled = no */
};
const char *follow_state_name(enum follow_state s);

/* A follower's connection, for /stats and /metrics. */
struct follow_status {
    enum follow_state state;
    time_t since;
    bool listening;                 /* ready for a COPY: LISTENing, polling, or a slot streaming */
    char last_error[160];           /* public part only (no hosts, paths, roles); "" = none */
    char sqlstate[6];               /* the last error's SQLSTATE (pgerror.h), "" = unknown */
    /* logical only */
    char slot[64];                  /* the replication slot, "" = none */
    bool slot_temporary;
    int64_t slot_lag_bytes;         /* WAL the slot holds back on the primary; -1: unknown */
    char wal_status[16];            /* pg_replication_slots.wal_status, "" = unknown */
    /* upstream only */
    char upstream[256];             /* the upstream followed now, "" = none */
    uint64_t upstream_switches;     /* times another upstream was followed */
    bool upstream_replica;          /* it follows an upstream itself */
    bool mirror;                    /* a snapshot of it is live: the figures below are its */
    uint64_t mirror_history;        /* the history the filter follows */
    uint64_t mirror_seq;            /* every key of it up to here is in the filter */
    uint64_t heard_seq;             /* the upstream's newest, as it said last */
    uint64_t mirror_snapshots, mirror_resumes, mirror_violations, mirror_keys;
    char mirror_commit[32];         /* "TLI:LSN": every row committed up to it is in the filter */
    char mirror_lost[160];          /* why a snapshot is awaited, "" = none */
};

/*
 * Each method's operations, behind follow_new, follow_start, follow_stop,
 * follow_status and follow_position (which do the common part).  Every
 * function but size/init/fini/run/interrupt may be called from the
 * scheduler's thread while the follower's own runs, and the
 * implementations lock what they share.
 */
struct follow_mirror;

struct follow_ops {
    enum sync_method method;        /* its row of SYNC_METHOD_LIST: its name */
    /*
     * Whether a table's position moves by itself as rows are followed (a
     * poll, a stream); else the scheduler catches up before a periodic
     * snapshot so the snapshot's position is fresh.
     */
    bool fresh_positions;
    /* The method's struct, its struct follower first: follow_new zeroes this much. */
    size_t size;
    /* Set up what the zeroed struct cannot start as.  May be NULL. */
    void (*init)(struct follower *f);
    /* Release what init made (not f itself).  May be NULL. */
    void (*fini)(struct follower *f);
    /* The follower's thread (follow_start runs it): follow until f->stop. */
    void (*run)(struct follower *f);
    /* Wake the thread's own waits so it sees f->stop (follow_stop).  May be NULL. */
    void (*interrupt)(struct follower *f);
    /*
     * Whether a COPY of t may start now (t LISTENed to, a slot in
     * place...): the scheduler waits while it may not, and the follower
     * calls wake when it becomes so.
     */
    bool (*ready)(struct follower *f, struct table *t);
    /*
     * On the COPY's connection, after table_load_begin and before the
     * COPY's snapshot: may a COPY of t start now (err says why not), in
     * which epoch, exact at which position, in which snapshot, or with
     * which transactions its own snapshot must see.
     */
    bool (*ticket)(struct follower *f, struct table *t, PGconn *conn, struct follow_ticket *tk,
                   char *err, size_t errlen);
    /* The COPY that got tk ended (ok: it is live).  May be NULL. */
    void (*copied)(struct follower *f, struct table *t, const struct follow_ticket *tk, bool ok);
    /*
     * Bring t's live filter up to date from its position without a COPY:
     * 1 done (*rows read), 0 failed (err: retry later), -1 the position
     * cannot be resumed from (counted and dropped by the follower): copy
     * the table instead.
     */
    int (*catch_up)(struct follower *f, struct table *t, uint64_t *rows, char *err, size_t errlen);
    /*
     * A load of t without PostgreSQL, instead of the scheduler's COPY (and
     * of catch_up): method upstream puts its upstream's snapshot live
     * (table_load_adopt .. table_load_commit).  True when it went live,
     * *rows its keys, *secs what it took; false (err: retried after a
     * backoff) otherwise.  NULL: a COPY.
     */
    bool (*load)(struct follower *f, struct table *t, const struct table_job *job,
                 uint64_t *rows, double *secs, char *err, size_t errlen);
    /* follow_position's, for a method that proves positions itself.  NULL: the table's own. */
    void (*position)(struct follower *f, struct table *t, char *out, size_t cap);
    /* A snapshot of t exact at pos is on disk (a slot may let go of older WAL).  May be NULL. */
    void (*saved)(struct follower *f, struct table *t, const char *pos);
    /* follow_status's method part, with f->mu held (the common part filled in).  May be NULL. */
    void (*status_locked)(struct follower *f, struct follow_status *out);
    /* What it adds for table t alone (follow_table_status), f->mu not held.  May be NULL. */
    void (*table_status)(struct follower *f, struct table *t, struct follow_status *out);
    /* follow_mirror's, for a method that mirrors an upstream.  May be NULL. */
    bool (*mirror)(struct follower *f, struct table *t, struct follow_mirror *out);
    /*
     * The transactions whose rows the follower gave t's filter and that a
     * snapshot taken now may not see finished yet (what a ticket's
     * must_see holds), malloc'ed into *xids and *n; false when it cannot
     * know (too many to keep: try later).  May be NULL: the method gives
     * only rows new snapshots see (NOTIFY, the feed).  Any thread.
     */
    bool (*unseen)(struct follower *f, struct table *t, uint32_t **xids, size_t *n);
};

/*
 * What every follower starts from; implementations put it first in their
 * own struct.  tables[0..n) are the tables it follows (it does not own
 * them).  Tables are only ever appended (follow_attach), so a reader loads
 * n (acquire) and reads the tables below it without a lock.  The
 * connection's state, kept here, is what /stats shows of every method.
 */
struct follower {
    const struct follow_ops *ops;
    const struct config *cfg;
    const struct log *lg;
    struct table *tables[CONFIG_MAX_FILTERS];
    _Atomic unsigned n;
    atomic_bool stop;
    void (*wake)(void *arg);        /* the scheduler's: a COPY may be possible now */
    void *wake_arg;
    pthread_t thread;               /* ops->run's, while started */
    bool started;
    unsigned rng;                   /* the backoff's jitter; the follower's thread only */

    pthread_mutex_t mu;             /* guards what is below and the method's shared fields */
    enum follow_state state;
    time_t since;                   /* when state last changed */
    bool listening;                 /* connected and ready for a COPY (follow_status's) */
    char error[160];                /* public part of the last failure, "" = none */
    char server_id[256];            /* the server followed (loader_server_id), "" = none */
};

/* The methods, each in its own file. */
extern const struct follow_ops follow_notify_ops, follow_feed_ops, follow_logical_ops,
    follow_upstream_ops;

/*
 * A follower of method ops, following no table yet (state connecting);
 * NULL on allocation failure.  Nothing runs until follow_start.  wake(arg)
 * may be NULL.  follow_free(NULL) is a no-op; stop it first.
 */
struct follower *follow_new(const struct follow_ops *ops, const struct config *cfg,
                            const struct log *lg, void (*wake)(void *arg), void *arg);
void follow_free(struct follower *f);

/*
 * The thread's life: follow_start runs ops->run on a new thread (false if
 * it could not start); follow_stop sets f->stop, calls ops->interrupt and
 * joins the thread (within a second of a connection in progress).
 */
bool follow_start(struct follower *f);
void follow_stop(struct follower *f);

/* The connection's state, since, listening and error, then ops->status_locked's part. */
void follow_status(struct follower *f, struct follow_status *out);
/* After follow_status: what the method says of table t alone (ops->table_status), if anything. */
void follow_table_status(struct follower *f, struct table *t, struct follow_status *out);

/*
 * What t's live filter mirrors of its upstream (method upstream), in the
 * upstream's terms, read at once: what a replica that serves replicas of
 * its own answers them in (fleethub.c), so that they may resume on it at a
 * position another upstream of the same history gave them.  history and
 * seq: every key of history up to seq is in the live filter.  epoch: the
 * upstream's epoch as last heard; covered: the upstream's epoch the live
 * filter covers, 0 while it cannot be trusted to (no snapshot yet, or a
 * gap since, ours or the upstream's).  generation: the upstream's
 * generation it is a snapshot of.  False (out untouched) for every other
 * method, or before t's stream started.  Thread-safe; takes no lock of the
 * table's callers (never call it from a table tap).
 */
struct follow_mirror {
    uint64_t history, seq, epoch, covered, generation;
};
bool follow_mirror(struct follower *f, struct table *t, struct follow_mirror *out);

/*
 * The position t's live filter is exact at right now, for a snapshot about
 * to stream it ("" = none: a restart copies): ops->position's, else t's own.
 */
void follow_position(struct follower *f, struct table *t, char *out, size_t cap);

/*
 * ops->unseen's transactions (none for a method without it, or f NULL):
 * for a verification of an ID absent (table_adapt.h), whose
 * snapshot must see them finished.  *xids (NULL when *n is 0) is the
 * caller's to free.  False: not known now.
 */
bool follow_unseen(struct follower *f, struct table *t, uint32_t **xids, size_t *n);

/*
 * Follow t too, before or after start (its thread takes it up: LISTENs,
 * polls, streams it).  From the scheduler's thread only.
 */
void follow_attach(struct follower *f, struct table *t);
/* Tables followed now, and the i-th of them (i < follow_count). */
unsigned follow_count(const struct follower *f);
/* Index of t among f's tables, -1 if f does not follow it. */
int follow_index(const struct follower *f, const struct table *t);

/* ----------------------------------------------------- choosing methods -- */

/*
 * The methods are enum sync_method (config_data.h's SYNC_METHOD_LIST, one
 * row per method; sync_method_name names them).  The ops of method m, NULL
 * for SYNC_NONE or a value out of range.
 */
const struct follow_ops *follow_method_ops(enum sync_method m);

/*
 * What the server offers, read once at start on a regular connection:
 * what each table can be followed with, and the fleet already decoding.
 */
struct follow_offer {
    bool wal_logical;               /* wal_level = logical */
    bool may_replicate;             /* the role has REPLICATION (or is superuser) */
    unsigned other_slots;           /* bloomguard logical slots of other daemons on the server */
    char role[64];                  /* current_user, for the fixes the reasons name */
};
struct follow_table_offer {
    bool published;                 /* in [sync] publication with the column, and every table
                                       under it (FOLLOW_UNPUBLISHED_SQL) */
    bool feed;                      /* sql/notify.sql's feed serves it (bloomguard_feed_tables) */
    bool notify_trigger;            /* a bloomguard_notify trigger notifying [sync] channel, on
                                       it and every table under it (FOLLOW_UNTRIGGERED_SQL) */
    char unpublished[120];          /* tables under it the publication leaves out, "" = none */
    char untriggered[120];          /* tables under it without the trigger, "" = none */
    bool watched;                   /* a bloomguard_notify trigger of any kind (feed or notify) */
    /* The feed is installed but this role may not read it (bloomguard_feed_grant is the fix). */
    bool feed_denied;
};

/* Room for a reason follow_choose writes: table.h's method_why holds one whole. */
#define FOLLOW_WHY_MAX TABLE_METHOD_WHY_MAX

/*
 * A table's rows are those of every table under it too (inheritance
 * children, partitions: LOADER_TREE_SQL), and a follower hears them only
 * if it hears each of those.  SQL expressions of REL (the table's oid),
 * COL (the column's name), PUB (the publication's name) and CALL (the
 * trigger's call, "pg_notify('<channel>'"), as SQL text:
 *   FOLLOW_UNPUBLISHED_SQL  the tables holding rows (all but partitioned
 *       ones) that the publication does not stream with the column, itself
 *       or through a partitioned table above them (publish_via_partition_root),
 *       as a list of names; NULL when none;
 *   FOLLOW_MEMBERS_SQL  the oids, comma-separated, whose changes the
 *       stream carries for the table's rows: those of the tree that
 *       pg_publication_tables lists (the root alone with
 *       publish_via_partition_root, else each leaf; each inheritance child);
 *   FOLLOW_UNTRIGGERED_SQL  the tables holding rows without an enabled
 *       bloomguard_notify trigger making that call, as a list of names;
 *       NULL when none (a partition's is the clone of its parent's).
 */
#define FOLLOW_LISTED_SQL(COL, PUB)                                                         \
    "SELECT c2.oid AS rel FROM pg_catalog.pg_publication_tables pt "                        \
    "JOIN pg_catalog.pg_publication p ON p.pubname = pt.pubname AND p.pubinsert "           \
    "JOIN pg_catalog.pg_namespace n ON n.nspname = pt.schemaname "                          \
    "JOIN pg_catalog.pg_class c2 ON c2.relnamespace = n.oid AND c2.relname = pt.tablename " \
    "WHERE pt.pubname = " PUB " AND " COL " = ANY (pt.attnames)"
/* tree(rel) and listed(rel), the tree's listed members, as CTEs (each read once). */
#define FOLLOW_TREE_LISTED_CTE(REL, COL, PUB)                                               \
    "WITH RECURSIVE tree(rel) AS (SELECT " REL " UNION SELECT i.inhrelid "                  \
    "FROM pg_catalog.pg_inherits i JOIN tree ON i.inhparent = tree.rel), "                  \
    "listed AS MATERIALIZED (SELECT l0.rel FROM (" FOLLOW_LISTED_SQL(COL, PUB) ") l0 "      \
    "JOIN tree ON tree.rel = l0.rel) "
#define FOLLOW_UNPUBLISHED_SQL(REL, COL, PUB)                                               \
    "(" FOLLOW_TREE_LISTED_CTE(REL, COL, PUB)                                               \
    "SELECT string_agg(c.oid::regclass::text, ', ' ORDER BY c.oid) FROM tree "              \
    "JOIN pg_catalog.pg_class c ON c.oid = tree.rel WHERE c.relkind <> 'p' AND NOT EXISTS " \
    "(SELECT 1 FROM listed l WHERE c.oid = l.rel "                                          \
    "OR c.oid IN (SELECT relid FROM pg_catalog.pg_partition_tree(l.rel))))"
#define FOLLOW_MEMBERS_SQL(REL, COL, PUB)                                                   \
    "(" FOLLOW_TREE_LISTED_CTE(REL, COL, PUB)                                               \
    "SELECT string_agg(rel::text, ',' ORDER BY rel) FROM listed)"
/* Whether the publication lists any table of the tree. */
#define FOLLOW_ANY_LISTED_SQL(REL, COL, PUB)                                                \
    "(" FOLLOW_TREE_LISTED_CTE(REL, COL, PUB) "SELECT EXISTS (SELECT 1 FROM listed))"
#define FOLLOW_UNTRIGGERED_SQL(REL, CALL)                                                   \
    "(SELECT string_agg(c.oid::regclass::text, ', ' ORDER BY c.oid) FROM "                  \
    LOADER_TREE_SQL(REL) " JOIN pg_catalog.pg_class c ON c.oid = tree.rel "                 \
    "WHERE c.relkind <> 'p' AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger t "         \
    "JOIN pg_catalog.pg_proc f ON f.oid = t.tgfoid WHERE t.tgrelid = c.oid "                \
    "AND t.tgname = 'bloomguard_notify' AND t.tgenabled <> 'D' "                            \
    "AND strpos(f.prosrc, " CALL ") > 0))"

bool follow_probe_server(PGconn *conn, const struct config *cfg, const char *own_slot,
                         struct follow_offer *out, char *err, size_t errlen);
bool follow_probe_table(PGconn *conn, const struct config *cfg, const struct filter_config *fc,
                        struct follow_table_offer *out, char *err, size_t errlen);

/*
 * The method for a table: [sync] method, or for auto the cheapest the
 * server offers (logical while fewer than [sync] logical_max_daemons other
 * daemons decode, then the feed).  why gets the reason, for the log and
 * /readyz.  SYNC_NONE: nothing can follow it (why says what to install);
 * the table then stays degraded after its load.  Method upstream asks no
 * server: srv and tbl may then be NULL.
 */
enum sync_method follow_choose(const struct config *cfg, const struct filter_config *fc,
                               const struct follow_offer *srv,
                               const struct follow_table_offer *tbl, char *why, size_t whylen);

/* ------------------------------------------ method logical, for bloomguard -t -- */

/*
 * The permanent slot a daemon of cfg uses, without making one ([sync] slot,
 * or for slot = auto the name kept in <snapshot path>/logical-slot), into
 * name (cap bytes, 64 is enough).  False when none is known: slot = auto
 * with no such file (a new name is made at start) or no snapshot directory
 * (a temporary slot).  Reads the file only; thread-safe.
 */
bool follow_logical_known_slot(const struct config *cfg, char *name, size_t cap);

/*
 * Whether method logical's replication connection can be opened as the
 * follower opens it (replication=database) and reaches probe's cluster and
 * primary (IDENTIFY_SYSTEM against probe's control data); it is closed
 * again, no slot is made.  False with err ("what: libpq's detail") if not.
 */
bool follow_logical_check_replication(const struct config *cfg, PGconn *probe, char *err,
                                      size_t errlen);

/* ------------------------------------------------------ shared helpers -- */

/*
 * The change feed's part that methods feed and notify share
 * (follow_feed.c).  follow_feed_position: the feed position a COPY about
 * to start on conn will be exact at, into pos ("" when the feed does not
 * serve t; the log says so when that changes).  follow_feed_read: every
 * row committed since t's position into its live filter, as a proof of
 * freshness in epoch (catchup: counted as a catch-up, else as rows
 * followed; resume: the first read on its connection, which proves the
 * database's history first: feed_read); 1 / 0 / -1 as ops->catch_up.  A
 * position the feed can no
 * longer serve is counted and dropped; a poll (not a catch-up) then also
 * starts a gap that wants a COPY.
 */
void follow_feed_position(struct follower *f, struct table *t, PGconn *conn, char *pos,
                          size_t cap);
int follow_feed_read(struct follower *f, struct table *t, PGconn *conn, uint64_t epoch,
                     bool catchup, bool resume, uint64_t *rows, char *err, size_t errlen);

/*
 * An ops->catch_up from the feed: follow_feed_read on a connection of its
 * own, in the epoch epoch_of reads on it (false with err: 0, no read; NULL:
 * t's epoch now).
 */
typedef bool (*follow_epoch_fn)(struct follower *f, struct table *t, PGconn *conn,
                                uint64_t *epoch, char *err, size_t errlen);
int follow_feed_catch_up(struct follower *f, struct table *t, follow_epoch_fn epoch_of,
                         uint64_t *rows, char *err, size_t errlen);

/*
 * The public part of an error: the text before the first ": ", where the
 * detail from libpq (hosts, socket paths, role names) goes, which only the
 * log shows.  A SQLSTATE tagged anywhere in err (pgerror.h) follows it, as
 * " (SQLSTATE xxxxx)": the code names nothing secret.
 */
void follow_public_error(char *out, size_t outlen, const char *err);

/* A follower's public error (as above) into out's last_error and sqlstate. */
void follow_status_set_error(struct follow_status *out, const char *pub);

/*
 * The connection's state: since moves when it changes, listening is
 * whether it is FOLLOW_CONNECTED, and the error is err's public part ("" for
 * NULL).  _locked: the caller holds f->mu.
 */
void follow_set_state(struct follower *f, enum follow_state st, const char *err);
void follow_set_state_locked(struct follower *f, enum follow_state st, const char *err);

/*
 * Whether mine, the server a COPY's or a catch-up's connection reaches
 * (loader_server_id), is the one f follows (f->server_id): a read of
 * another server (a multi-host conninfo, a lagging standby) would pair
 * two histories.  False with err if not.  Caller holds f->mu.
 */
bool follow_same_server_locked(struct follower *f, const char *mine, char *err, size_t errlen);

/* Tell the scheduler a COPY may be possible now (f->wake, when there is one). */
void follow_wake(struct follower *f);

/*
 * The follower's thread after a connection attempt or a session failed
 * (err, its trailing newlines cut): the state (reconnecting if it had
 * connected before, else connecting), a follower_retry warning, a
 * jittered nap of *backoff seconds (cut short by stop), and *backoff
 * doubled up to [sync] retry_max_seconds.
 */
void follow_retry(struct follower *f, char *err, bool had, unsigned *backoff);

/*
 * The follower's thread after a connection it followed on was lost (err,
 * its trailing newlines cut): reconnecting with no server, and a
 * follower_reconnect warning.  The caller reconnects at once.
 */
void follow_lost(struct follower *f, char *err);

/*
 * A probe (a proof of freshness) unanswered for [sync] silence_timeout
 * seconds means the connection is gone: a partition that drops packets
 * never closes it.  Degraded answers start long before; this only decides
 * when to give up on the connection, which costs a catch-up or a COPY, so
 * its default is generous.  Whether a probe sent at sent (monoclock_boot_ns) is
 * unanswered at now for longer than timeout_s (err says so).
 */
bool follow_probe_dead(int64_t sent, int64_t now, unsigned timeout_s, char *err, size_t errlen);

/* Backoff with +-25% jitter, so that a fleet does not reconnect in step; rng is the caller's. */
unsigned follow_jitter_ms(unsigned *rng, unsigned seconds);

/* Sleep up to ms or until *stop (checked every 100 ms). */
void follow_nap(atomic_bool *stop, unsigned ms);

#endif
