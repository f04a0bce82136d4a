/*
 * The insides of method logical, shared by its four files: follow_logical.c
 * (the follower: its thread, sessions and ops), logical_slot.c (the slot,
 * positions), logical_tables.c (what the tables can be heard with) and
 * logical_stream.c (the replication stream and its proofs).  Nothing
 * outside them includes it.
 */
#ifndef BLOOMGUARD_LOGICAL_H
#define BLOOMGUARD_LOGICAL_H

#include <libpq-fe.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "config.h"
#include "follow.h"
#include "pgoutput.h"
#include "xidsnap.h"

/* A status update at least this often: the walsender drops a silent client after wal_sender_timeout (60 s). */
#define STATUS_EVERY_NS (10 * NS_PER_S)
/*
 * After a read that found changes, the stream is not read again for this
 * long: under a busy table the walsender's messages (three a transaction)
 * then arrive in batches of dozens, not one wakeup each, on the core the
 * daemon shares with the application (bench/write_cost: the daemon's CPU
 * fell by about 40%).  A change waits at most this long; an idle stream's
 * first change is read at once.
 */
#define READ_GAP_NS (2 * 1000000)
/* Longest wait, with no COPY using it, for first loads to take the exported snapshot. */
#define EXPORT_WAIT_NS (30 * NS_PER_S)
/* How long a catch-up waits for the stream to say whether a restored position resumes. */
#define RESUME_WAIT_MS 10000
/* The relation cache's bounds: far more than any publication bloomguard reads. */
#define RELS_MAX 4096
#define RELS_BYTES (16u << 20)
#define FP_MAX 160
/* The tables' quoted names in one probe parameter. */
#define NAMES_MAX (CONFIG_MAX_FILTERS * 300)
/* The most relations one table's rows stream under (FOLLOW_MEMBERS_SQL: leaf partitions). */
#define MEMBERS_MAX 4096

/*
 * A relation whose changes are rows of a table: the table itself, an
 * inheritance child, a leaf partition (without publish_via_partition_root),
 * and where the table's column is in its tuples.
 */
struct logical_member {
    uint32_t relid;
    struct pgoutput_track track;
};

struct logical {
    struct follower base;           /* base.mu guards what is marked so below */
    char slot[64];
    bool temporary;

    /* The follower's thread only, by table index. */
    struct pgoutput_rels *rels;
    uint32_t relid[CONFIG_MAX_FILTERS];         /* 0: unknown */
    /* The relations the stream carries each table's rows under, by relid (malloc'ed). */
    struct logical_member *members[CONFIG_MAX_FILTERS];
    unsigned nmembers[CONFIG_MAX_FILTERS];
    /*
     * Publication entry the epoch started with, then "~" and a digest of
     * the entries of the tables under it (logical_split_fps' callers).
     */
    char fp[CONFIG_MAX_FILTERS][FP_MAX];
    char unheard[CONFIG_MAX_FILTERS][256];      /* why not heard, for /stats; "" when heard */
    bool heard[CONFIG_MAX_FILTERS];             /* published with its column, fp known (written
                                                   under mu: logical_ready reads it) */
    uint64_t added[CONFIG_MAX_FILTERS], deleted[CONFIG_MAX_FILTERS];
    uint64_t blcksz, segsz;                     /* the server's WAL page and segment sizes */
    uint32_t xact;                              /* the streamed transaction's xid (its Begin) */
    bool xact_noted;                            /* ... is in unseen */

    pthread_cond_t cv;              /* on base.mu: the slot, an export or a resume moved */
    /* Everything below is guarded by base.mu. */
    unsigned known;                 /* tables [0, known) had their oid and entry read (written
                                       by the follower's thread) */
    bool slot_ready;                /* a slot of the current lineage exists: COPYs may start */
    uint64_t lineage;               /* bumped by each new slot */
    bool create_unsure;             /* a CREATE_REPLICATION_SLOT failed: it may have been made */
    char sysid[24];                 /* the cluster's system identifier */
    char tli[12];                   /* its timeline (a promoted standby's is a new one) */
    char lineage_tli[12];           /* the timeline the current lineage streams: positions' */
    char dboid[16];                 /* the database's oid */
    char export_name[64];           /* the slot's exported snapshot, "" = none (or gone) */
    int64_t export_time;            /* boot clock just before the slot and its snapshot were made */
    bool export_want[CONFIG_MAX_FILTERS];       /* a first load should COPY in it */
    bool export_busy;               /* a COPY holds it */
    uint64_t applied;               /* every commit ending at or before it has been applied */
    uint64_t proved[CONFIG_MAX_FILTERS];        /* last W a proof passed for the table, 0 none */
    char proved_fp[CONFIG_MAX_FILTERS][FP_MAX]; /* the publication entry of that proof */
    uint64_t saved[CONFIG_MAX_FILTERS];         /* LSN of the table's last written snapshot */
    int resumable[CONFIG_MAX_FILTERS];          /* restored position: 1 resumes, -1 no, 0 unknown */
    uint64_t resume_epoch[CONFIG_MAX_FILTERS];  /* the table's epoch when it resumed */
    int64_t lag_bytes;              /* -1 unknown */
    char wal_status[16];
    /*
     * Transactions the stream applied rows of that no probe's snapshot has
     * yet seen finished: a COPY's snapshot must see them (xidsnap.h).
     */
    struct xidset unseen;
};

/*
 * The probe: the WAL insert position, the slot's lag and state, and each
 * table's entry in the publication (its row in pg_publication_rel with the
 * publication's own row: any ALTER PUBLICATION changes one of them), "-"
 * where the table is not in it and the publication is not FOR ALL TABLES,
 * "" where the publication does not exist; and what each configured table
 * name means now (a rename or a drop and create changes it); and a
 * snapshot, whose finished transactions leave unseen; then per table a
 * digest of the publication's entries (and its schemas') of every table
 * under it (an inheritance child added or left out changes it), and the
 * shape of what its SELECT reads (LOADER_SHAPE_SQL, for table_schema).  $1
 * slot, $2 publication, $3 the tables' oids, $4 their quoted names and $5
 * their columns, as array literals.
 */
#define PROBE_SQL \
    "SELECT pg_current_wal_insert_lsn()::text, " \
    " (SELECT (pg_current_wal_lsn() - confirmed_flush_lsn)::bigint FROM pg_replication_slots " \
    "   WHERE slot_name = $1), " \
    " (SELECT wal_status FROM pg_replication_slots WHERE slot_name = $1), " \
    " (SELECT string_agg(coalesce((SELECT format('%s.%s.%s%s%s%s', p.oid, p.xmin, p.pubinsert::int, " \
    "        p.pubupdate::int, p.puballtables::int, p.pubviaroot::int) || coalesce( " \
    "        (SELECT format('.%s.%s.%s', pr.oid, pr.xmin, replace(pr.prattrs::text, ' ', '_')) " \
    "           FROM pg_publication_rel pr WHERE pr.prpubid = p.oid AND pr.prrelid = u.rel), " \
    "        CASE WHEN p.puballtables THEN '.all' ELSE '-' END) " \
    "        FROM pg_publication p WHERE p.pubname = $2), ''), ',' ORDER BY u.i) " \
    "    FROM unnest($3::oid[]) WITH ORDINALITY u(rel, i)), " \
    " (SELECT string_agg(coalesce(to_regclass(u.name)::oid::text, ''), ',' ORDER BY u.i) " \
    "    FROM unnest($4::text[]) WITH ORDINALITY u(name, i)), " \
    " pg_current_snapshot()::text, " \
    " (SELECT string_agg((SELECT left(md5(coalesce(string_agg(format('%s.%s.%s.%s.%s', " \
    "        tree.rel, pr.oid, pr.xmin, replace(pr.prattrs::text, ' ', '_'), " \
    "        (SELECT pn.oid || '.' || pn.xmin FROM pg_publication_namespace pn " \
    "          WHERE pn.pnpubid = p.oid AND pn.pnnspid = c.relnamespace)), ',' ORDER BY tree.rel), " \
    "        '')), 16) FROM " LOADER_TREE_SQL("u.rel") " " \
    "        LEFT JOIN pg_class c ON c.oid = tree.rel " \
    "        LEFT JOIN pg_publication p ON p.pubname = $2 " \
    "        LEFT JOIN pg_publication_rel pr ON pr.prpubid = p.oid AND pr.prrelid = tree.rel), " \
    "        ',' ORDER BY u.i) FROM unnest($3::oid[]) WITH ORDINALITY u(rel, i)), " \
    " (SELECT string_agg(" LOADER_SHAPE_SQL("u.rel", "u.col") ", ',' ORDER BY u.i) " \
    "    FROM unnest($3::oid[], $5::text[]) WITH ORDINALITY u(rel, col, i))"
#define PROBE_FIELDS 8
/* PROBE_SQL as a statement of the probe's session (logical_prepare_probe). */
#define PROBE_NAME "bloomguard_probe"
/*
 * PROBE_SQL that also takes a transaction ID (a ninth field): its commit
 * record, written after W was read, has the WAL writer flush the WAL past
 * W (a commit wakes it, even from hibernation).  The walsender decodes
 * flushed WAL only, and WAL written by a transaction that aborted without
 * a transaction ID (a statement cancelled after it pruned a page) stays
 * unflushed until the next commit or standby snapshot, up to 15 s on a
 * quiet server: the stream cannot pass W, the horizon stops, while every
 * row is followed (bench/attack: 5.7 s below W, the WAL writer
 * hibernating).  Sent only when a proof has waited two probe_intervals for
 * the stream, once per such proof: an XID, and a commit record, each time.
 */
#define PROBE_FLUSH_NAME "bloomguard_probe_flush"

/*
 * Every function below runs on the follower's thread only and takes mu
 * itself around the fields it guards.  err/errlen receive a message when a
 * function returns false (logical_stream: always, with why it returned).
 */

/* [sync] slot: fills l->slot and l->temporary (auto keeps a name in the snapshot directory). */
bool logical_choose_slot(struct logical *l, char *err, size_t errlen);

/*
 * A position: "wal:<LSN> tli=<timeline> slot=<name> sysid=<id> db=<oid>
 * pub=<entry>" (logical_slot.c says what it means).  parse_pos returns
 * false when pos is not a logical position of this form.
 */
struct logical_pos {
    uint64_t lsn;
    char tli[12], slot[64], sysid[24], db[16], fp[FP_MAX];
};
void logical_format_pos(char *out, size_t cap, const struct logical_pos *p);
bool logical_parse_pos(const char *pos, struct logical_pos *p);
/* This lineage's position of table i at lsn, for logical_format_pos.  Caller holds base.mu. */
void logical_pos_here_locked(const struct logical *l, unsigned i, uint64_t lsn,
                             struct logical_pos *p);

/*
 * PROBE_SQL prepared as PROBE_NAME on the probe's session, with one plan for
 * the session's life (plan_cache_mode): the catalog joins of its checks took
 * a few milliseconds to plan, every probe_interval, which a loaded server
 * made into stalls of the proofs.
 */
bool logical_prepare_probe(PGconn *probe, char *err, size_t errlen);

/* PQexecParams with text parameters and a text result (logical_slot.c). */
PGresult *logical_exec(PGconn *conn, const char *sql, int n, const char *const *params);
/* Both connections reach one primary of one cluster; reads sysid, dboid, WAL sizes. */
bool logical_identify(struct logical *l, PGconn *repl, PGconn *probe, char *err, size_t errlen);
/* Each of the tables [from, to) gets its oid (l->relid, 0 when unknown). */
void logical_read_relids(struct logical *l, PGconn *probe, unsigned from, unsigned to);
/* The tables [0, n)'s oids, and their quoted names, as array literals (false: too long). */
void logical_relid_array(struct logical *l, unsigned n, char *out, size_t cap);
bool logical_name_array(struct logical *l, PGconn *conn, unsigned n, char *out, size_t cap);
/* The tables [0, n)'s columns as an array literal (false: too long). */
bool logical_column_array(struct logical *l, unsigned n, char *out, size_t cap);
/* The probe's comma-separated entries into fps[0..n); false if there are not n. */
bool logical_split_fps(const char *list, unsigned n, char fps[][FP_MAX]);
/*
 * The probe's answer r (PROBE_FIELDS fields) for n tables: each table's
 * publication entry and the digest of those under it, as "entry~digest",
 * into fps, and its shape into shapes; false if the lists do not hold n.
 */
bool logical_probe_lists(const PGresult *r, unsigned n, char fps[][FP_MAX], char shapes[][FP_MAX]);
/* The member of table i whose relid it is, NULL if none (follower's thread). */
struct logical_member *logical_member(struct logical *l, unsigned i, uint32_t relid);
/* At an epoch's start: which of the tables [from, to) are heard (l->heard, l->fp); logs why not. */
bool logical_hear_tables(struct logical *l, PGconn *probe, unsigned from, unsigned to,
                         char *err, size_t errlen);

enum slot_state { SLOT_MISSING, SLOT_OK, SLOT_LOST };

/* Whether the permanent slot exists and is usable, and its confirmed position. */
bool logical_slot_state(struct logical *l, PGconn *probe, enum slot_state *st,
                        uint64_t *confirmed, char *err, size_t errlen);
/* CREATE_REPLICATION_SLOT (exporting a snapshot if export); *start = its consistent point. */
bool logical_create_slot(struct logical *l, PGconn *repl, bool export, uint64_t *start,
                         char *err, size_t errlen);
/* Drops the slot (a lost one); best effort, a failure shows as the slot still there. */
void logical_drop_slot(struct logical *l, PGconn *probe);
/* A new slot: every loaded table of [0, n) has a gap; first loads want the export. */
void logical_new_lineage(struct logical *l, unsigned n);
/* An existing slot: which restored positions resume; returns where the stream starts. */
uint64_t logical_resume_point(struct logical *l, unsigned n, uint64_t confirmed);
/* Until the first loads that wanted the exported snapshot have used it (or EXPORT_WAIT_NS). */
void logical_wait_for_export(struct logical *l, unsigned n);

/* A proof in progress: W read at T; it holds once the stream passed W and a later probe agrees. */
struct proof {
    bool pending;
    unsigned n;                     /* tables the probe asked about */
    int64_t sent;                   /* T */
    uint64_t wal;                   /* W */
    bool passed_before_next;        /* the stream had passed W when the next probe was sent */
    uint64_t epoch[CONFIG_MAX_FILTERS];
};

/*
 * A probe's answer r: the slot's figures, each table's publication entry
 * (a change is a gap), then prev if it is pending and the stream had passed
 * its W before this probe was sent; cur gets its W.  False with err when
 * the answer or the slot is unusable (logical_proof.c).
 */
bool logical_take_probe(struct logical *l, PGresult *r, struct proof *prev, struct proof *cur,
                        char *err, size_t errlen);
/* A probe is about to leave: the proof its answer may confirm, into prev (logical_proof.c). */
void logical_arm(struct follower *f, struct proof *prev, struct proof *held, struct proof *cur,
                 uint64_t applied, int64_t now);

/*
 * The probe's sessions, two backends of one server: a probe not answered
 * after max(2 x probe_interval, max_staleness / 4) (its backend left
 * without a CPU while others on the server run: issue 35) is left to
 * finish while the next leaves on the other session, so one backend's wait
 * does not stop the horizon.  probes[0] also carries the follower's other
 * catalog reads.
 */
#define LOGICAL_PROBES 2

/* Streams (apply, keepalives, probes, status updates) until the connection fails or stop. */
void logical_stream(struct logical *l, PGconn *repl, PGconn *const probes[LOGICAL_PROBES],
                    char *err, size_t errlen);

#endif
