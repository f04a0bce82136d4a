/*
 * Method logical: follow the tables through PostgreSQL's own logical
 * replication, so the application's writers pay nothing (no trigger; the
 * WAL is decoded by a walsender of bloomguard's).  One replication slot for
 * every table of the daemon, the built-in pgoutput plugin, a publication
 * carrying the guarded column (bloomguard_watch puts the table in it), and
 * a second, ordinary connection for the proofs of freshness.
 *
 * Exact start.  A slot created now exports a snapshot; a first load's COPY
 * runs in it (SET TRANSACTION SNAPSHOT) before the stream starts at the
 * slot's consistent point, so the stream begins exactly where the COPY
 * ends.  Any other COPY runs in a fresh snapshot while the slot exists:
 * what committed before it is in the COPY, what committed after it is in
 * the stream, since the slot keeps everything after its confirmed position.
 *
 * The horizon.  Every probe_interval the probe connection reads the WAL
 * insert position W at time T.  A transaction acknowledged before T has its
 * commit record below W, so once the stream has passed W (a Commit's end,
 * or a keepalive's position: the walsender sends a transaction whole when
 * it reads its commit record, before any later position) every row
 * committed before T has been applied: H moves to T.  The publication can
 * change under the stream (a table dropped from it is silently no longer
 * streamed), so a proof counts only once a later probe, sent after the
 * stream passed W, finds the table's publication entry unchanged; a change
 * is a gap.
 *
 * Restarts.  A snapshot records the WAL position its filter is proven
 * exact at (the last W a proof passed), with the slot, the cluster and the
 * publication entry it came from; the slot is confirmed only as far as
 * every table's written snapshot, so a kill -9 resumes from the slot with
 * nothing skipped.  Every stream starts at the slot's confirmed position,
 * the one point the server's history surely shares with the filter (a cold
 * copy of the data directory reuses later LSNs for other commits).  Without [snapshot], a temporary slot: nothing is kept
 * on the server once the daemon is gone, and a reconnect is a new slot.
 * A slot lost (dropped, invalidated by max_slot_wal_keep_size, absent on a
 * promoted standby) is a gap: degraded answers, a new slot, full loads.
 */
#include "follow.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "loader.h"
#include "persist.h"
#include "pgoutput.h"

#define NS_PER_S INT64_C(1000000000)
/* A status update at least this often: the walsender drops a silent client after wal_sender_timeout (60 s). */
#define STATUS_EVERY_NS (10 * NS_PER_S)
/* A probe, or a reply asked of the walsender, unanswered this long: the connection is gone. */
#define DEAD_NS (15 * NS_PER_S)
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

struct logical {
    struct follower base;
    pthread_t thread;
    bool started;
    unsigned rng;
    char slot[64];
    bool temporary;

    /* The follower's thread only, by table index. */
    struct pgoutput_rels *rels;
    uint32_t relid[CONFIG_MAX_FILTERS];         /* 0: unknown */
    int col[CONFIG_MAX_FILTERS];                /* the column's index in the relation's tuples */
    uint64_t col_version[CONFIG_MAX_FILTERS];   /* of the Relation message col was read from */
    char fp[CONFIG_MAX_FILTERS][FP_MAX];        /* publication entry the epoch started with */
    bool heard[CONFIG_MAX_FILTERS];             /* published with its column, fp known (written
                                                   under mu: logical_ready reads it) */
    uint64_t added[CONFIG_MAX_FILTERS], deleted[CONFIG_MAX_FILTERS];
    uint64_t blcksz, segsz;                     /* the server's WAL page and segment sizes */

    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* Everything below is guarded by mu. */
    enum follow_state state;
    time_t since;
    char error[160];
    unsigned known;                 /* tables [0, known) had their oid and entry read (written
                                       by the follower's thread) */
    bool slot_ready;                /* a slot of the current lineage exists: COPYs may start */
    uint64_t lineage;               /* bumped by each new slot */
    char sysid[24];                 /* the cluster's system identifier */
    char server_id[256];            /* the probe connection's server (loader_server_id) */
    char dboid[16];                 /* the database's oid */
    char export_name[64];           /* the slot's exported snapshot, "" = none (or gone) */
    int64_t export_time;            /* table_now just before the slot (and its snapshot) was made */
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
};

static struct logical *of(struct follower *f)
{
    return (struct logical *)f;
}

static struct follower *logical_create(void)
{
    struct logical *l = calloc(1, sizeof *l);
    if (l == NULL)
        return NULL;
    pthread_mutex_init(&l->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&l->cv, &ca);
    pthread_condattr_destroy(&ca);
    l->state = FOLLOW_CONNECTING;
    l->since = time(NULL);
    l->lag_bytes = -1;
    l->rng = (unsigned)time(NULL) ^ (unsigned)getpid() ^ 0x10c1;
    return &l->base;
}

static void logical_free(struct follower *f)
{
    struct logical *l = of(f);
    pgoutput_rels_free(l->rels);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    free(l);
}

static void set_state(struct logical *l, enum follow_state st, const char *err)
{
    pthread_mutex_lock(&l->mu);
    if (l->state != st) {
        l->state = st;
        l->since = time(NULL);
    }
    if (err)
        follow_public_error(l->error, sizeof l->error, err);
    else
        l->error[0] = '\0';
    pthread_mutex_unlock(&l->mu);
}

/* ------------------------------------------------------ the slot's name -- */

/*
 * [sync] slot: a name is a permanent slot; auto is a permanent slot whose
 * name is kept in the snapshot directory (made once, so a restart finds
 * its slot again), or a temporary one when there is no such directory.
 */
static bool choose_slot(struct logical *l, char *err, size_t errlen)
{
    const struct config *cfg = l->base.cfg;
    char dir[PERSIST_PATH_MAX], path[PERSIST_PATH_MAX + 32];
    if (strcmp(cfg->slot_name, "auto") != 0) {
        snprintf(l->slot, sizeof l->slot, "%s", cfg->slot_name);
        l->temporary = false;
        return true;
    }
    unsigned r1 = (unsigned)rand_r(&l->rng), r2 = (unsigned)rand_r(&l->rng);
    if (!persist_dir(cfg, dir, sizeof dir)) {
        snprintf(l->slot, sizeof l->slot, "bloomguard_tmp_%d_%04x", (int)getpid(), r1 & 0xffff);
        l->temporary = true;
        return true;
    }
    l->temporary = false;
    snprintf(path, sizeof path, "%s/logical-slot", dir);
    FILE *fp = fopen(path, "r");
    if (fp != NULL) {
        char name[64] = "";
        bool ok = fgets(name, sizeof name, fp) != NULL;
        fclose(fp);
        name[strcspn(name, "\n")] = '\0';
        if (ok && strncmp(name, "bloomguard_", 11) == 0 && strlen(name) < sizeof l->slot
            && strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_") == strlen(name)) {
            snprintf(l->slot, sizeof l->slot, "%s", name);
            return true;
        }
    }
    /* A new name, written atomically: temp file, fsync, rename. */
    char tmp[PERSIST_PATH_MAX + 48];
    snprintf(l->slot, sizeof l->slot, "bloomguard_%08x%04x", r1, r2 & 0xffff);
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    fp = fopen(tmp, "w");
    bool ok = fp != NULL && fprintf(fp, "%s\n", l->slot) > 0 && fflush(fp) == 0
              && fsync(fileno(fp)) == 0;
    if (fp != NULL && fclose(fp) != 0)
        ok = false;
    if (!ok || rename(tmp, path) != 0) {
        snprintf(err, errlen, "cannot keep the replication slot's name in %.200s: %s", path,
                 strerror(errno));
        unlink(tmp);
        return false;
    }
    return true;
}

/* ----------------------------------------------------------- positions -- */

/*
 * A position: "wal:<LSN> slot=<name> sysid=<id> db=<oid> pub=<entry>":
 * every commit ending at or before LSN is in the filter, as streamed from
 * that slot of that cluster's database while the table's publication entry
 * was that one.
 */
static void format_pos(char *out, size_t cap, uint64_t lsn, const char *slot, const char *sysid,
                       const char *db, const char *fp)
{
    char l[PGOUTPUT_LSN_BUFSIZE];
    pgoutput_lsn_format(lsn, l);
    snprintf(out, cap, "wal:%s slot=%s sysid=%s db=%s pub=%s", l, slot, sysid, db, fp);
}

/* The parts of a position; false when it is not one of ours (a feed position, garbage). */
static bool parse_pos(const char *pos, uint64_t *lsn, char *slot, char *sysid, char *db, char *fp)
{
    char l[32];
    if (strncmp(pos, "wal:", 4) != 0
        || sscanf(pos + 4, "%31s slot=%63s sysid=%23s db=%15s pub=%159s", l, slot, sysid, db, fp) != 5)
        return false;
    return pgoutput_lsn_parse(l, strlen(l), lsn);
}

/* ---------------------------------------------------------- connecting -- */

static PGresult *exec_params(PGconn *conn, const char *sql, int n, const char *const *params)
{
    return PQexecParams(conn, sql, n, NULL, params, NULL, NULL, 0);
}

/*
 * Both connections must reach one server: the replication connection's
 * IDENTIFY_SYSTEM and the probe's control data must agree on the cluster,
 * and the probe (loader_server_id) must be on the primary.
 */
static bool identify(struct logical *l, PGconn *repl, PGconn *probe, char *err, size_t errlen)
{
    char sid[256];
    if (!loader_server_id(probe, sid, sizeof sid, err, errlen))
        return false;
    PGresult *r = PQexec(repl, "IDENTIFY_SYSTEM");
    bool ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 && PQnfields(r) >= 4;
    char sysid[24] = "";
    if (!ok)
        loader_set_error(err, errlen, "IDENTIFY_SYSTEM failed", repl);
    else
        snprintf(sysid, sizeof sysid, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    if (!ok)
        return false;
    r = PQexec(probe, "SELECT (SELECT system_identifier FROM pg_control_system())::text, "
                      "(SELECT oid FROM pg_database WHERE datname = current_database())::text, "
                      "current_setting('wal_block_size')::bigint, "
                      "pg_size_bytes(current_setting('wal_segment_size'))");
    ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 && PQnfields(r) == 4;
    if (!ok)
        loader_set_error(err, errlen, "cannot read the cluster's identity", probe);
    else if (strcmp(PQgetvalue(r, 0, 0), sysid) != 0) {
        snprintf(err, errlen, "the replication connection reached another cluster (%s) than the "
                 "probe connection (%s): set a single host in conninfo", sysid,
                 PQgetvalue(r, 0, 0));
        ok = false;
    }
    if (ok) {
        l->blcksz = strtoull(PQgetvalue(r, 0, 2), NULL, 10);
        l->segsz = strtoull(PQgetvalue(r, 0, 3), NULL, 10);
        pthread_mutex_lock(&l->mu);
        snprintf(l->server_id, sizeof l->server_id, "%s", sid);
        snprintf(l->sysid, sizeof l->sysid, "%s", sysid);
        snprintf(l->dboid, sizeof l->dboid, "%s", PQgetvalue(r, 0, 1));
        pthread_mutex_unlock(&l->mu);
    }
    PQclear(r);
    return ok;
}

/* Each table's oid (OIDs, not names: the stream names relations by oid). */
static void read_relids(struct logical *l, PGconn *probe, unsigned from, unsigned to)
{
    for (unsigned i = from; i < to; i++) {
        const struct filter_config *fc = table_config(l->base.tables[i]);
        char *qtbl = NULL, *qcol = NULL;
        l->relid[i] = 0;
        l->col[i] = -1;
        l->col_version[i] = 0;
        if (!loader_quote_table(probe, fc->table, fc->column, &qtbl, &qcol, NULL, 0))
            continue;
        const char *params[1] = { qtbl };
        PGresult *r = exec_params(probe, "SELECT to_regclass($1)::oid", 1, params);
        if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 && !PQgetisnull(r, 0, 0))
            l->relid[i] = (uint32_t)strtoul(PQgetvalue(r, 0, 0), NULL, 10);
        PQclear(r);
        free(qtbl);
        free(qcol);
    }
}

/*
 * The probe: the WAL insert position, the slot's lag and state, and each
 * table's entry in the publication (its row in pg_publication_rel with the
 * publication's own row: any ALTER PUBLICATION changes one of them), "-"
 * where the table is not in it and the publication is not FOR ALL TABLES,
 * "" where the publication does not exist; and what each configured table
 * name means now (a rename or a drop and create changes it).  $1 slot, $2
 * publication, $3 the tables' oids and $4 their quoted names, as array
 * literals.
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
    "    FROM unnest($4::text[]) WITH ORDINALITY u(name, i))"

static void relid_array(struct logical *l, unsigned n, char *out, size_t cap)
{
    size_t used = (size_t)snprintf(out, cap, "{");
    for (unsigned i = 0; i < n && used < cap; i++)
        used += (size_t)snprintf(out + used, cap - used, "%s%" PRIu32, i ? "," : "", l->relid[i]);
    if (used < cap)
        snprintf(out + used, cap - used, "}");
}

/*
 * The tables' names as the loader quotes them, as an array literal: each
 * element double-quoted, with '"' and '\' escaped.  False when they do not
 * fit in cap.
 */
static bool name_array(struct logical *l, PGconn *conn, unsigned n, char *out, size_t cap)
{
    size_t used = 0;
    out[used++] = '{';
    for (unsigned i = 0; i < n; i++) {
        const struct filter_config *fc = table_config(l->base.tables[i]);
        char *qtbl = NULL, *qcol = NULL;
        if (!loader_quote_table(conn, fc->table, fc->column, &qtbl, &qcol, NULL, 0))
            return false;
        if (used + 2 * strlen(qtbl) + 4 >= cap) {
            free(qtbl);
            free(qcol);
            return false;
        }
        if (i)
            out[used++] = ',';
        out[used++] = '"';
        for (const char *p = qtbl; *p; p++) {
            if (*p == '"' || *p == '\\')
                out[used++] = '\\';
            out[used++] = *p;
        }
        out[used++] = '"';
        free(qtbl);
        free(qcol);
    }
    out[used++] = '}';
    out[used] = '\0';
    return used < cap;
}

/* Split the probe's list of entries into fps[0..n); false if it does not have n of them. */
static bool split_fps(const char *list, unsigned n, char fps[][FP_MAX])
{
    const char *p = list;
    for (unsigned i = 0; i < n; i++) {
        size_t len = strcspn(p, ",");
        if (len >= FP_MAX || (p[len] == '\0' && i + 1 < n))
            return false;
        memcpy(fps[i], p, len);
        fps[i][len] = '\0';
        p += len + (p[len] != '\0');
    }
    return true;
}

/* Whether an entry says the table is published (not "", not ending in "-"). */
static bool published_fp(const char *fp)
{
    size_t n = strlen(fp);
    return n > 0 && fp[n - 1] != '-';
}

/*
 * What the tables [from, to) can be heard with, at the start of an epoch
 * (a connection, an attach): their publication entries, and for those
 * published, that the column is in the column list (pg_publication_tables
 * knows both ways of listing).  A table that is not heard is degraded until
 * it is; the log says why and what to do.
 */
static bool hear_tables(struct logical *l, PGconn *probe, unsigned from, unsigned to, char *err,
                        size_t errlen)
{
    struct follower *f = &l->base;
    char arr[CONFIG_MAX_FILTERS * 12 + 4], fps[CONFIG_MAX_FILTERS][FP_MAX];
    char names[NAMES_MAX];
    relid_array(l, to, arr, sizeof arr);
    if (!name_array(l, probe, to, names, sizeof names)) {
        snprintf(err, errlen, "the tables' names do not fit in a probe");
        return false;
    }
    const char *params[4] = { l->slot, f->cfg->publication, arr, names };
    PGresult *r = exec_params(probe, PROBE_SQL, 4, params);
    bool ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1
              && split_fps(PQgetvalue(r, 0, 3), to, fps);
    if (!ok)
        loader_set_error(err, errlen, "cannot read the publication", probe);
    PQclear(r);
    if (!ok)
        return false;
    for (unsigned i = from; i < to; i++) {
        struct table *t = f->tables[i];
        const struct filter_config *fc = table_config(t);
        struct follow_table_offer offer;
        char perr[256];
        bool was = l->heard[i];
        bool now = l->relid[i] != 0 && published_fp(fps[i])
                   && follow_probe_table(probe, f->cfg, fc, &offer, perr, sizeof perr)
                   && offer.published;
        /*
         * Heard again (back in the publication, a new table under the name),
         * or its entry changed while the stream was away (a reconnect: out of
         * the publication and back meanwhile): the rows written while it was
         * not published were not streamed, and a COPY that started before
         * now would not have been followed.
         */
        bool again = !was, changed = was && strcmp(l->fp[i], fps[i]) != 0;
        bool gap = i < l->known && now && table_loaded(t) && (again || changed);
        pthread_mutex_lock(&l->mu);
        l->heard[i] = now;
        pthread_mutex_unlock(&l->mu);
        if (gap) {
            if (again)
                log_warn(f->lg, "%s: the replication stream hears %s.%s again: degraded until "
                         "a COPY", fc->name, fc->table, fc->column);
            else
                log_warn(f->lg, "%s: its publication entry changed while the stream was away "
                         "(%s -> %s): degraded until a COPY", fc->name, l->fp[i], fps[i]);
        }
        snprintf(l->fp[i], sizeof l->fp[i], "%s", fps[i]);
        if (gap) {
            table_gap(t, WANT_POSITION);
            if (f->wake)
                f->wake(f->wake_arg);
        }
        if (!l->heard[i] && (was || i >= l->known))
            log_warn(f->lg, "%s: the replication stream cannot hear %s.%s: %s; degraded until "
                     "SELECT bloomguard_watch('%s', '%s', method => 'logical')", fc->name,
                     fc->table, fc->column, l->relid[i] == 0 ? "the table does not exist"
                     : "it is not in publication with the column", fc->table, fc->column);
    }
    return true;
}

/* ------------------------------------------------------------ the slot -- */

enum slot_state { SLOT_MISSING, SLOT_OK, SLOT_LOST };

static bool slot_state(struct logical *l, PGconn *probe, enum slot_state *st, uint64_t *confirmed,
                       char *err, size_t errlen)
{
    const char *params[1] = { l->slot };
    PGresult *r = exec_params(probe,
        "SELECT plugin, database = current_database(), "
        "       confirmed_flush_lsn::text, wal_status FROM pg_replication_slots WHERE slot_name = $1",
        1, params);
    bool ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) <= 1;
    *confirmed = 0;
    if (!ok) {
        loader_set_error(err, errlen, "cannot read the replication slot", probe);
    } else if (PQntuples(r) == 0) {
        *st = SLOT_MISSING;
    } else if (PQgetisnull(r, 0, 0) || strcmp(PQgetvalue(r, 0, 0), "pgoutput") != 0
               || strcmp(PQgetvalue(r, 0, 1), "t") != 0) {
        snprintf(err, errlen, "replication slot %s exists but is not a pgoutput slot of this "
                 "database: choose another [sync] slot", l->slot);
        ok = false;
    } else {
        const char *ws = PQgetvalue(r, 0, 3);
        *st = strcmp(ws, "lost") == 0 ? SLOT_LOST : SLOT_OK;
        if (!PQgetisnull(r, 0, 2))
            pgoutput_lsn_parse(PQgetvalue(r, 0, 2), strlen(PQgetvalue(r, 0, 2)), confirmed);
    }
    PQclear(r);
    return ok;
}

/*
 * CREATE_REPLICATION_SLOT, exporting a snapshot when a first load can use
 * it; *start gets the consistent point.
 */
static bool create_slot(struct logical *l, PGconn *repl, bool export, uint64_t *start, char *err,
                        size_t errlen)
{
    char sql[192];
    snprintf(sql, sizeof sql, "CREATE_REPLICATION_SLOT %s%s LOGICAL pgoutput (SNAPSHOT '%s')",
             l->slot, l->temporary ? " TEMPORARY" : "", export ? "export" : "nothing");
    int64_t before = table_now();   /* every commit acknowledged before this is in the snapshot */
    PGresult *r = PQexec(repl, sql);
    bool ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 && PQnfields(r) >= 3;
    if (!ok) {
        loader_set_error(err, errlen, "cannot create the replication slot", repl);
    } else {
        const char *cp = PQgetvalue(r, 0, 1);
        ok = pgoutput_lsn_parse(cp, strlen(cp), start);
        if (!ok)
            snprintf(err, errlen, "CREATE_REPLICATION_SLOT: unexpected consistent point");
        pthread_mutex_lock(&l->mu);
        snprintf(l->export_name, sizeof l->export_name, "%s",
                 export && !PQgetisnull(r, 0, 2) ? PQgetvalue(r, 0, 2) : "");
        l->export_time = before;
        pthread_mutex_unlock(&l->mu);
    }
    PQclear(r);
    return ok;
}

static void drop_slot(struct logical *l, PGconn *probe)
{
    const char *params[1] = { l->slot };
    PQclear(exec_params(probe, "SELECT pg_drop_replication_slot($1)", 1, params));
}

/*
 * A new lineage: every loaded table has lost the rows committed since the
 * old slot's last position (a gap that only a COPY closes, in a fresh
 * snapshot); tables never loaded take the exported snapshot for their
 * first COPY.
 */
static void new_lineage(struct logical *l, unsigned n)
{
    pthread_mutex_lock(&l->mu);
    l->lineage++;
    l->slot_ready = true;
    l->applied = 0;
    for (unsigned i = 0; i < n; i++) {
        struct table *t = l->base.tables[i];
        l->proved[i] = l->saved[i] = 0;
        l->resumable[i] = -1;
        l->export_want[i] = l->export_name[0] != '\0' && !table_loaded(t);
        if (table_loaded(t)) {
            table_drop_position(t);
            table_gap(t, WANT_RECONNECT);
        }
    }
    pthread_mutex_unlock(&l->mu);
}

/*
 * A permanent slot that exists: resume.  At start, each restored table's
 * position resumes if it came from this slot of this cluster's database
 * under the same publication entry, and the slot has not been confirmed
 * past it (another daemon on the slot could have); a table that cannot is
 * copied in a fresh snapshot, which the slot covers.
 *
 * The stream always starts at the slot's confirmed position, never at a
 * later one of ours, and no table is proven past it until a new proof:
 * that position is the one point this server's history is known to share
 * with the filter.  A cold copy of the data directory, started after the
 * daemon had moved on, keeps the system identifier, the timeline and the
 * slot as they were at the copy; its new history reuses the LSNs the
 * filter has already passed, and starting there would skip its rows.
 * Starting at the slot's position replays them (and, on the usual server,
 * at most one snapshot interval of changes already in the filter).
 */
static uint64_t resume_point(struct logical *l, unsigned n, uint64_t confirmed)
{
    pthread_mutex_lock(&l->mu);
    l->slot_ready = true;
    for (unsigned i = 0; i < n; i++) {
        if (l->proved[i] > confirmed)
            l->proved[i] = confirmed;
        if (l->saved[i] > confirmed)
            l->saved[i] = confirmed;
    }
    for (unsigned i = 0; i < n; i++) {
        struct table *t = l->base.tables[i];
        if (l->resumable[i] != 0)
            continue;
        char pos[TABLE_POS_MAX], slot[64], sysid[24], db[16], fp[FP_MAX];
        uint64_t lsn;
        table_position(t, pos, sizeof pos);
        bool ok = table_loaded(t) && parse_pos(pos, &lsn, slot, sysid, db, fp)
                  && strcmp(slot, l->slot) == 0 && strcmp(sysid, l->sysid) == 0
                  && strcmp(db, l->dboid) == 0 && l->heard[i] && strcmp(fp, l->fp[i]) == 0
                  && lsn >= confirmed;
        l->resumable[i] = ok ? 1 : -1;
        if (ok) {
            l->resume_epoch[i] = table_epoch(t);
            l->proved[i] = confirmed;
            snprintf(l->proved_fp[i], sizeof l->proved_fp[i], "%s", fp);
        } else if (table_loaded(t) && pos[0] != '\0') {
            log_warn(l->base.lg, "%s: the snapshot's position does not resume from slot %s (%s): "
                     "copying the table", table_name(t), l->slot,
                     strncmp(pos, "wal:", 4) != 0 ? "not a WAL position"
                     : lsn < confirmed ? "the slot was confirmed past it"
                     : "another slot, cluster, database or publication entry");
            table_drop_position(t);
        }
    }
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    return confirmed;
}

/* Until the first loads that wanted the exported snapshot have used it (or a while with none). */
static void wait_for_export(struct logical *l, unsigned n)
{
    int64_t idle_since = table_now();
    if (l->base.wake)
        l->base.wake(l->base.wake_arg);
    pthread_mutex_lock(&l->mu);
    while (!atomic_load(&l->base.stop)) {
        bool wanted = false;
        for (unsigned i = 0; i < n; i++)
            wanted = wanted || l->export_want[i];
        if (!wanted && !l->export_busy)
            break;
        if (l->export_busy)
            idle_since = table_now();
        else if (table_now() - idle_since > EXPORT_WAIT_NS)
            break;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 200 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&l->cv, &l->mu, &ts);
    }
    /* START_REPLICATION ends the export: later COPYs take fresh snapshots. */
    l->export_name[0] = '\0';
    for (unsigned i = 0; i < n; i++)
        l->export_want[i] = false;
    pthread_mutex_unlock(&l->mu);
}

/* ---------------------------------------------------------- the stream -- */

static bool send_status(struct logical *l, PGconn *repl, uint64_t received, bool reply,
                        char *err, size_t errlen)
{
    unsigned char buf[PGOUTPUT_STATUS_SIZE];
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int64_t us = (int64_t)now.tv_sec * 1000000 + now.tv_nsec / 1000;
    uint64_t flush = 0;
    unsigned n = follow_count(&l->base);
    pthread_mutex_lock(&l->mu);
    if (l->temporary) {
        flush = l->applied;         /* nothing outlives the connection anyway */
    } else {
        /* Only what every loaded table's written snapshot holds. */
        bool any = false;
        for (unsigned i = 0; i < n; i++) {
            if (!table_loaded(l->base.tables[i]) || !l->heard[i])
                continue;
            if (l->saved[i] == 0) {
                flush = 0;
                any = false;
                break;
            }
            if (!any || l->saved[i] < flush)
                flush = l->saved[i];
            any = true;
        }
        if (flush > l->applied)
            flush = l->applied;     /* a snapshot of another history (see resume_point) */
    }
    pthread_mutex_unlock(&l->mu);
    pgoutput_status_encode(buf, sizeof buf, received, flush, flush,
                           pgoutput_time_from_unix_us(us), reply);
    if (PQputCopyData(repl, (const char *)buf, (int)sizeof buf) != 1 || PQflush(repl) < 0) {
        loader_set_error(err, errlen, "cannot send a status update", repl);
        return false;
    }
    return true;
}

/* The tables a relation's changes go to: by oid (two filters may guard two columns of one). */
static void apply_tuple(struct logical *l, uint32_t relid, const struct pgoutput_tuple *tuple,
                        unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        if (l->relid[i] != relid || !l->heard[i])
            continue;
        const struct pgoutput_rel *rel = pgoutput_rels_get(l->rels, relid);
        if (rel == NULL)
            continue;
        if (l->col_version[i] != rel->version) {
            l->col[i] = pgoutput_rels_column(l->rels, relid, table_config(l->base.tables[i])->column);
            l->col_version[i] = rel->version;
        }
        struct pgoutput_col c;
        if (l->col[i] < 0 || !pgoutput_tuple_get(tuple, (unsigned)l->col[i], &c))
            continue;
        /* 'n': NULL is no ID; 'u': an unchanged TOASTed value, so not a new ID. */
        if (c.kind == 't' && table_add_row(l->base.tables[i], c.value, c.len))
            l->added[i]++;
    }
}

static void flush_counts(struct logical *l, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        if (l->added[i] || l->deleted[i])
            table_count_rows(l->base.tables[i], l->added[i], l->deleted[i]);
        l->added[i] = l->deleted[i] = 0;
    }
}

/* One XLogData message; false (err) when it cannot be read. */
static bool apply_message(struct logical *l, const struct pgoutput_frame *fr, unsigned n,
                          char *err, size_t errlen)
{
    struct pgoutput_msg m;
    enum pgoutput_error e = pgoutput_decode(fr->data, fr->len, &m);
    if (e != PGOUTPUT_OK) {
        snprintf(err, errlen, "cannot decode the replication stream: %s", pgoutput_strerror(e));
        return false;
    }
    switch (m.type) {
    case PGOUTPUT_RELATION:
        e = pgoutput_rels_put(l->rels, &m);
        if (e != PGOUTPUT_OK) {
            snprintf(err, errlen, "cannot keep a relation of the stream: %s", pgoutput_strerror(e));
            return false;
        }
        break;
    case PGOUTPUT_INSERT:
        apply_tuple(l, m.insert.relid, &m.insert.tuple, n);
        break;
    case PGOUTPUT_UPDATE:
        apply_tuple(l, m.update.relid, &m.update.tuple, n);
        break;
    case PGOUTPUT_DELETE:
        for (unsigned i = 0; i < n; i++)
            l->deleted[i] += l->relid[i] == m.delete.relid && l->heard[i];
        break;
    case PGOUTPUT_TRUNCATE:
        for (uint32_t k = 0; k < m.truncate.nrelids; k++)
            for (unsigned i = 0; i < n; i++)
                if (l->relid[i] == pgoutput_truncate_relid(&m, k) && l->heard[i])
                    table_note_truncate(l->base.tables[i]);
        break;
    case PGOUTPUT_COMMIT:
        flush_counts(l, n);
        pthread_mutex_lock(&l->mu);
        if (m.commit.end_lsn > l->applied)
            l->applied = m.commit.end_lsn;
        pthread_mutex_unlock(&l->mu);
        break;
    case PGOUTPUT_BEGIN:
    case PGOUTPUT_ORIGIN:
    case PGOUTPUT_TYPE:
    case PGOUTPUT_MESSAGE:
        break;
    }
    return true;
}

/*
 * The insert position, as pg_current_wal_insert_lsn gives it, points past
 * the page header when it is at the start of a page; the stream's positions
 * (a record's end) point at the page's start.  Both mean the same boundary:
 * without this, an idle server whose last record ended on a page boundary
 * would never let a proof pass.  Only a header at a page's start is taken
 * off (a short one, or a long one at a segment's start).
 */
#define PAGE_HEADER_SHORT 24u
#define PAGE_HEADER_LONG 40u
static uint64_t record_boundary(const struct logical *l, uint64_t w)
{
    if (l->blcksz == 0 || l->segsz == 0)
        return w;
    if (w % l->segsz == PAGE_HEADER_LONG)
        return w - PAGE_HEADER_LONG;
    if (w % l->segsz >= l->blcksz && w % l->blcksz == PAGE_HEADER_SHORT)
        return w - PAGE_HEADER_SHORT;
    return w;
}

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
 * A probe's answer: the slot's figures, each table's publication entry
 * (a change is a gap), then the proof a probe before it started, if the
 * stream had passed its W before this one was sent.
 */
static bool take_probe(struct logical *l, PGresult *r, struct proof *prev, struct proof *cur,
                       unsigned n, char *err, size_t errlen)
{
    char fps[CONFIG_MAX_FILTERS][FP_MAX], oids[CONFIG_MAX_FILTERS][FP_MAX];
    (void)n;
    n = cur->n;
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1 || PQnfields(r) != 5
        || !split_fps(PQgetvalue(r, 0, 3), n, fps) || !split_fps(PQgetvalue(r, 0, 4), n, oids)) {
        snprintf(err, errlen, "probe failed: %s", PQresultErrorMessage(r));
        return false;
    }
    const char *w = PQgetvalue(r, 0, 0);
    if (!pgoutput_lsn_parse(w, strlen(w), &cur->wal)) {
        snprintf(err, errlen, "probe failed: unexpected WAL position");
        return false;
    }
    cur->wal = record_boundary(l, cur->wal);
    pthread_mutex_lock(&l->mu);
    l->lag_bytes = PQgetisnull(r, 0, 1) ? -1 : strtoll(PQgetvalue(r, 0, 1), NULL, 10);
    snprintf(l->wal_status, sizeof l->wal_status, "%s", PQgetisnull(r, 0, 2) ? "" : PQgetvalue(r, 0, 2));
    pthread_mutex_unlock(&l->mu);
    if (PQgetisnull(r, 0, 2) && !l->temporary) {
        snprintf(err, errlen, "the replication slot %s is gone", l->slot);
        return false;
    }
    if (strcmp(l->wal_status, "lost") == 0) {
        snprintf(err, errlen, "the replication slot %s was invalidated "
                 "(max_slot_wal_keep_size): the WAL it needed is gone", l->slot);
        return false;
    }
    bool changed = false;
    for (unsigned i = 0; i < n; i++) {
        uint32_t now_oid = (uint32_t)strtoul(oids[i], NULL, 10);
        if (now_oid != l->relid[i] && l->heard[i]) {
            /* The name now means another relation (a rename, a drop and create): its rows are others. */
            struct table *t = l->base.tables[i];
            log_warn(l->base.lg, "%s: %s is now another table (oid %s, was %" PRIu32 "): degraded "
                     "until a COPY of it", table_name(t), table_config(t)->table,
                     oids[i][0] ? oids[i] : "none", l->relid[i]);
            pthread_mutex_lock(&l->mu);
            l->heard[i] = false;    /* first: no COPY may start in the new epoch until heard */
            pthread_mutex_unlock(&l->mu);
            table_gap(t, WANT_POSITION);
            changed = true;
            continue;
        }
        if (strcmp(fps[i], l->fp[i]) == 0)
            continue;
        /* The publication entry changed: rows may not have been streamed since. */
        struct table *t = l->base.tables[i];
        log_warn(l->base.lg, "%s: its publication entry changed (%s -> %s): degraded until a "
                 "COPY", table_name(t), l->fp[i][0] ? l->fp[i] : "none", fps[i][0] ? fps[i] : "none");
        pthread_mutex_lock(&l->mu);
        l->heard[i] = false;
        pthread_mutex_unlock(&l->mu);
        table_gap(t, WANT_POSITION);
        changed = true;
    }
    if (changed)
        return true;                /* hear_tables again before any proof */
    if (prev->pending && prev->passed_before_next) {
        for (unsigned i = 0; i < prev->n; i++) {
            if (!l->heard[i] || !table_advance(l->base.tables[i], prev->epoch[i], prev->sent))
                continue;
            pthread_mutex_lock(&l->mu);
            if (prev->wal > l->proved[i])
                l->proved[i] = prev->wal;
            snprintf(l->proved_fp[i], sizeof l->proved_fp[i], "%s", l->fp[i]);
            pthread_mutex_unlock(&l->mu);
        }
        prev->pending = false;
    }
    return true;
}

/*
 * Stream until the connection fails or stop: apply changes, answer
 * keepalives, probe every probe_interval, update the slot every
 * STATUS_EVERY_NS.  Returns with the reason in err.
 */
static void stream(struct logical *l, PGconn *repl, PGconn *probe, char *err, size_t errlen)
{
    struct follower *f = &l->base;
    int64_t interval = (int64_t)(f->cfg->probe_interval * (double)NS_PER_S);
    int64_t next_probe = table_now(), last_status = 0, probe_sent = 0;
    uint64_t received = 0;
    bool probe_in_flight = false;
    struct proof prev = { 0 }, cur = { 0 };
    char arr[CONFIG_MAX_FILTERS * 12 + 4];

    while (!atomic_load(&f->stop)) {
        unsigned n = follow_count(f);
        int64_t now = table_now();
        if (n > l->known) {
            /* Tables attached since: their oids and entries, before they count in a probe. */
            if (probe_in_flight)
                goto wait;
            read_relids(l, probe, l->known, n);
            if (!hear_tables(l, probe, l->known, n, err, errlen))
                return;
            pthread_mutex_lock(&l->mu);
            l->known = n;
            pthread_mutex_unlock(&l->mu);
            if (f->wake)
                f->wake(f->wake_arg);
        }
        if (!probe_in_flight && now >= next_probe) {
            bool again = false;
            for (unsigned i = 0; i < n; i++)
                again = again || !l->heard[i];
            if (again) {
                /* A table not heard (now): its oid and entry again, it may be back. */
                read_relids(l, probe, 0, n);
                if (!hear_tables(l, probe, 0, n, err, errlen))
                    return;
            }
            pthread_mutex_lock(&l->mu);
            uint64_t applied = l->applied;
            pthread_mutex_unlock(&l->mu);
            if (cur.pending) {
                cur.passed_before_next = applied >= cur.wal;
                prev = cur;
            }
            cur.pending = true;
            cur.passed_before_next = false;
            cur.n = n;
            for (unsigned i = 0; i < n; i++)
                cur.epoch[i] = table_epoch(f->tables[i]);
            relid_array(l, n, arr, sizeof arr);
            char *names = malloc(NAMES_MAX);
            if (names == NULL || !name_array(l, probe, n, names, NAMES_MAX)) {
                free(names);
                snprintf(err, errlen, "the tables' names do not fit in a probe");
                return;
            }
            const char *params[4] = { l->slot, f->cfg->publication, arr, names };
            cur.sent = now;         /* before the query leaves: H may move only this far */
            int sent = PQsendQueryParams(probe, PROBE_SQL, 4, NULL, params, NULL, NULL, 0);
            free(names);
            if (!sent) {
                loader_set_error(err, errlen, "probe failed", probe);
                return;
            }
            probe_in_flight = true;
            probe_sent = now;
            next_probe = now + interval;
        }
        if (probe_in_flight && now - probe_sent > DEAD_NS) {
            snprintf(err, errlen, "connection lost: no answer to a probe in %lld s",
                     (long long)(DEAD_NS / NS_PER_S));
            return;
        }
        if (now - last_status >= STATUS_EVERY_NS) {
            if (!send_status(l, repl, received, false, err, errlen))
                return;
            last_status = now;
        }
    wait:;
        struct pollfd pfd[2] = { { .fd = PQsocket(repl), .events = POLLIN },
                                 { .fd = PQsocket(probe), .events = POLLIN } };
        if (PQflush(probe) == 1)
            pfd[1].events |= POLLOUT;
        int pr = poll(pfd, 2, 100);
        if (pr < 0 && errno != EINTR) {
            snprintf(err, errlen, "connection lost: poll: %s", strerror(errno));
            return;
        }
        if ((pfd[0].revents || pr == 0) && !PQconsumeInput(repl)) {
            loader_set_error(err, errlen, "connection lost", repl);
            return;
        }
        char *buf;
        int got;
        while ((got = PQgetCopyData(repl, &buf, 1)) > 0) {
            struct pgoutput_frame fr;
            enum pgoutput_error e = pgoutput_frame_decode(buf, (size_t)got, &fr);
            bool ok = e == PGOUTPUT_OK;
            if (!ok)
                snprintf(err, errlen, "cannot read the replication stream: %s", pgoutput_strerror(e));
            else if (fr.type == PGOUTPUT_XLOGDATA)
                ok = apply_message(l, &fr, n, err, errlen);
            if (ok && fr.type == PGOUTPUT_KEEPALIVE) {
                /* Every transaction that committed before this position was sent before it. */
                flush_counts(l, n);
                pthread_mutex_lock(&l->mu);
                if (fr.wal_end > l->applied)
                    l->applied = fr.wal_end;
                pthread_mutex_unlock(&l->mu);
            }
            if (ok && fr.wal_end > received)
                received = fr.wal_end;
            PQfreemem(buf);
            if (!ok)
                return;
            if (fr.type == PGOUTPUT_KEEPALIVE && fr.reply_requested) {
                if (!send_status(l, repl, received, false, err, errlen))
                    return;
                last_status = table_now();
            }
        }
        if (got == -2 || got == -1) {
            /*
             * -1: the server ended the COPY; its result says why (a walsender
             * terminated, a shutdown, a slot invalidated), into the error.
             */
            PGresult *end;
            while (got == -1 && (end = PQgetResult(repl)) != NULL)
                PQclear(end);
            loader_set_error(err, errlen, "the replication stream ended", repl);
            return;
        }
        if (probe_in_flight && (pfd[1].revents || pr == 0)) {
            if (!PQconsumeInput(probe)) {
                loader_set_error(err, errlen, "connection lost", probe);
                return;
            }
            if (!PQisBusy(probe)) {
                PGresult *r = PQgetResult(probe), *extra;
                bool ok = take_probe(l, r, &prev, &cur, n, err, errlen);
                PQclear(r);
                while ((extra = PQgetResult(probe)) != NULL)
                    PQclear(extra);
                probe_in_flight = false;
                if (!ok)
                    return;
                /* Ask the walsender where it is now: its answer may pass W at once. */
                if (!send_status(l, repl, received, true, err, errlen))
                    return;
            }
        }
        if (PQstatus(repl) != CONNECTION_OK || PQstatus(probe) != CONNECTION_OK) {
            loader_set_error(err, errlen, "connection lost", PQstatus(repl) != CONNECTION_OK ? repl : probe);
            return;
        }
    }
}

static bool start_replication(struct logical *l, PGconn *repl, uint64_t start, char *err,
                              size_t errlen)
{
    char sql[320], lsn[PGOUTPUT_LSN_BUFSIZE];
    pgoutput_lsn_format(start, lsn);
    snprintf(sql, sizeof sql, "START_REPLICATION SLOT %s LOGICAL %s (proto_version '1', "
             "publication_names '\"%s\"', messages 'true')", l->slot, lsn,
             l->base.cfg->publication);
    PGresult *r = PQexec(repl, sql);
    bool ok = PQresultStatus(r) == PGRES_COPY_BOTH;
    if (!ok)
        loader_set_error(err, errlen, "START_REPLICATION failed", repl);
    PQclear(r);
    return ok;
}

/* One connection's life: identify, find or make the slot, start, stream. */
static void session(struct logical *l, PGconn *repl, PGconn *probe, bool *had, char *err,
                    size_t errlen)
{
    struct follower *f = &l->base;
    unsigned n = follow_count(f);
    if (!identify(l, repl, probe, err, errlen))
        return;
    read_relids(l, probe, 0, n);
    if (!hear_tables(l, probe, 0, n, err, errlen))
        return;
    pthread_mutex_lock(&l->mu);
    l->known = n;
    pthread_mutex_unlock(&l->mu);
    enum slot_state st = SLOT_MISSING;
    uint64_t confirmed = 0, start = 0;
    if (!l->temporary && !slot_state(l, probe, &st, &confirmed, err, errlen))
        return;
    if (st == SLOT_LOST) {
        log_warn(f->lg, "follower (logical): slot %s was invalidated (max_slot_wal_keep_size): "
                 "degraded until a new slot's full loads", l->slot);
        drop_slot(l, probe);
        st = SLOT_MISSING;
    }
    if (st == SLOT_OK && !*had && l->lineage == 0)
        log_info(f->lg, "follower (logical): resuming from slot %s", l->slot);
    if (st == SLOT_OK) {
        pthread_mutex_lock(&l->mu);
        bool gap = l->lineage != 0 && l->applied != 0 && confirmed > l->applied;
        pthread_mutex_unlock(&l->mu);
        if (gap) {
            /* Someone confirmed the slot past what this daemon applied: that stretch is lost. */
            log_warn(f->lg, "follower (logical): slot %s was confirmed past what this daemon "
                     "applied: degraded until full loads", l->slot);
            new_lineage(l, n);
            start = confirmed;
        } else {
            if (l->lineage == 0)
                l->lineage = 1;
            start = resume_point(l, n, confirmed);
        }
    } else {
        bool export = false;
        for (unsigned i = 0; i < n && !export; i++)
            export = !table_loaded(f->tables[i]);
        if (*had || l->lineage != 0)
            log_warn(f->lg, "follower (logical): slot %s %s: a new slot; degraded until full loads",
                     l->slot, l->temporary ? "went with the connection" : "is gone");
        if (!create_slot(l, repl, export, &start, err, errlen))
            return;
        new_lineage(l, n);
        log_info(f->lg, "follower (logical): %s slot %s created at %s", l->temporary ? "temporary"
                 : "permanent", l->slot, "its consistent point");
        wait_for_export(l, n);
    }
    if (!start_replication(l, repl, start, err, errlen))
        return;
    pthread_mutex_lock(&l->mu);
    l->applied = start;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    set_state(l, FOLLOW_CONNECTED, NULL);
    *had = true;
    {
        char lsn[PGOUTPUT_LSN_BUFSIZE];
        pgoutput_lsn_format(start, lsn);
        log_info(f->lg, "follower (logical): streaming %u table%s from slot %s at %s, "
                 "publication %s", n, n == 1 ? "" : "s", l->slot, lsn, f->cfg->publication);
    }
    if (f->wake)
        f->wake(f->wake_arg);
    stream(l, repl, probe, err, errlen);
}

static void *logical_main(void *arg)
{
    struct logical *l = arg;
    struct follower *f = &l->base;
    char err[512];
    unsigned backoff = 1;
    bool had = false;

    l->rels = pgoutput_rels_new(RELS_MAX, RELS_BYTES);
    if (l->rels == NULL || !choose_slot(l, err, sizeof err)) {
        if (l->rels == NULL)
            snprintf(err, sizeof err, "out of memory");
        set_state(l, FOLLOW_CONNECTING, err);
        log_error(f->lg, "follower (logical): %s", err);
        return NULL;
    }
    while (!atomic_load(&f->stop)) {
        err[0] = '\0';
        PGconn *probe = loader_connect_as(f->cfg, "bloomguard logical probe", err, sizeof err);
        PGconn *repl = probe ? loader_connect_replication(f->cfg, err, sizeof err) : NULL;
        if (repl != NULL) {
            int64_t t0 = table_now();
            session(l, repl, probe, &had, err, sizeof err);
            if (table_now() - t0 > 30 * NS_PER_S)
                backoff = 1;        /* it had been up for a while: a quick first retry */
        }
        PQfinish(repl);
        PQfinish(probe);
        if (atomic_load(&f->stop))
            break;
        for (size_t i = strlen(err); i > 0 && err[i - 1] == '\n'; i--)
            err[i - 1] = '\0';
        pthread_mutex_lock(&l->mu);
        /* A temporary slot went with its connection: no COPY until a new one exists. */
        if (l->temporary)
            l->slot_ready = false;
        pthread_mutex_unlock(&l->mu);
        set_state(l, had ? FOLLOW_RECONNECTING : FOLLOW_CONNECTING, err);
        log_warn(f->lg, "follower (logical): %s; retrying in %u s", err, backoff);
        follow_nap(&f->stop, follow_jitter_ms(&l->rng, backoff));
        backoff = backoff * 2 > f->cfg->retry_max_seconds ? f->cfg->retry_max_seconds : backoff * 2;
    }
    return NULL;
}

/* ------------------------------------------------------------ the ops -- */

static bool logical_start(struct follower *f)
{
    struct logical *l = of(f);
    if (pthread_create(&l->thread, NULL, logical_main, l) != 0)
        return false;
    l->started = true;
    return true;
}

static void logical_stop(struct follower *f)
{
    struct logical *l = of(f);
    atomic_store(&f->stop, true);
    pthread_mutex_lock(&l->mu);
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    if (l->started)
        pthread_join(l->thread, NULL);
    l->started = false;
}

/*
 * Caller holds mu: whether a COPY of table i may start as far as the stream
 * goes.  A loaded table the stream cannot hear (out of the publication, its
 * name now another table's) is not copied until it is heard again: the rows
 * committed after the COPY would not be followed.  A first load goes ahead
 * (the table is served, degraded).
 */
static bool hearing(struct logical *l, int i, struct table *t)
{
    return l->heard[i] || !table_loaded(t);
}

/* Caller holds mu: the table's index among those the stream knows, -1 if none. */
static int known_index(struct logical *l, struct table *t)
{
    int i = follow_index(&l->base, t);
    return i >= 0 && (unsigned)i < l->known ? i : -1;
}

static bool logical_ready(struct follower *f, struct table *t)
{
    struct logical *l = of(f);
    pthread_mutex_lock(&l->mu);
    int i = known_index(l, t);
    bool ready = l->slot_ready && i >= 0 && hearing(l, i, t);
    pthread_mutex_unlock(&l->mu);
    return ready;
}

static bool logical_ticket(struct follower *f, struct table *t, PGconn *conn,
                           struct follow_ticket *tk, char *err, size_t errlen)
{
    struct logical *l = of(f);
    char mine[256];
    if (!loader_server_id(conn, mine, sizeof mine, err, errlen))
        return false;
    pthread_mutex_lock(&l->mu);
    int i = known_index(l, t);
    bool ok = l->slot_ready && i >= 0;
    if (!ok) {
        snprintf(err, errlen, "no replication slot yet: no COPY before the slot that covers "
                 "what commits after it");
    } else if (!hearing(l, i, t)) {
        snprintf(err, errlen, "the replication stream cannot hear the table (not in the "
                 "publication with its column): no COPY it would not follow");
        ok = false;
    } else if (strcmp(mine, l->server_id) != 0) {
        /* The slot streams one server: a COPY of another would pair two histories. */
        snprintf(err, errlen, "the COPY connection reached another server than the follower: "
                 "[%.150s] against [%.150s]; set a single host in conninfo", mine, l->server_id);
        ok = false;
    } else {
        tk->epoch = table_epoch(t);
        if (l->export_name[0] && l->export_want[i] && !l->export_busy) {
            snprintf(tk->snapshot, sizeof tk->snapshot, "%s", l->export_name);
            tk->start = l->export_time;
            l->export_busy = true;
        }
    }
    pthread_mutex_unlock(&l->mu);
    if (ok && tk->snapshot[0])
        log_info(f->lg, "%s: the first load copies in snapshot %s, exported by slot %s: the "
                 "stream starts exactly where the COPY ends", table_name(t), tk->snapshot,
                 l->slot);
    return ok;
}

static void logical_copied(struct follower *f, struct table *t, const struct follow_ticket *tk,
                           bool ok)
{
    struct logical *l = of(f);
    (void)ok;
    if (tk->snapshot[0] == '\0')
        return;
    pthread_mutex_lock(&l->mu);
    int i = follow_index(f, t);
    if (i >= 0)
        l->export_want[i] = false;  /* tried: a retry takes a fresh snapshot */
    l->export_busy = false;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

/*
 * A restored table catches up by being streamed from its position: wait
 * for the stream to say whether the position resumes.
 */
static int logical_catch_up(struct follower *f, struct table *t, uint64_t *rows, char *err,
                            size_t errlen)
{
    struct logical *l = of(f);
    *rows = 0;
    int64_t until = table_now() + (int64_t)RESUME_WAIT_MS * 1000000;
    pthread_mutex_lock(&l->mu);
    int i = follow_index(f, t);
    while (i >= 0 && l->resumable[i] == 0 && table_now() < until && !atomic_load(&f->stop)) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&l->cv, &l->mu, &ts);
    }
    int r = i < 0 ? -1 : l->resumable[i];
    uint64_t epoch = i >= 0 ? l->resume_epoch[i] : 0;
    pthread_mutex_unlock(&l->mu);
    if (r == 0) {
        snprintf(err, errlen, "the replication stream has not started yet");
        return 0;
    }
    if (r < 0)
        return -1;
    /* Covered from its position on; the probes move the horizon. */
    char pos[TABLE_POS_MAX];
    table_position(t, pos, sizeof pos);
    table_caught_up(t, epoch, 0, pos, 0);
    return 1;
}

static void logical_position(struct follower *f, struct table *t, char *out, size_t cap)
{
    struct logical *l = of(f);
    out[0] = '\0';
    pthread_mutex_lock(&l->mu);
    int i = follow_index(f, t);
    if (!l->temporary && i >= 0 && l->proved[i] != 0 && table_covered(t))
        format_pos(out, cap, l->proved[i], l->slot, l->sysid, l->dboid, l->proved_fp[i]);
    pthread_mutex_unlock(&l->mu);
}

static void logical_saved(struct follower *f, struct table *t, const char *pos)
{
    struct logical *l = of(f);
    char slot[64], sysid[24], db[16], fp[FP_MAX];
    uint64_t lsn;
    if (!parse_pos(pos, &lsn, slot, sysid, db, fp))
        return;
    pthread_mutex_lock(&l->mu);
    int i = follow_index(f, t);
    if (i >= 0 && strcmp(slot, l->slot) == 0)
        l->saved[i] = lsn;
    pthread_mutex_unlock(&l->mu);
}

static void logical_status(struct follower *f, struct follow_status *out)
{
    struct logical *l = of(f);
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&l->mu);
    out->state = l->state;
    out->since = l->since;
    out->listening = l->slot_ready && l->state == FOLLOW_CONNECTED;
    snprintf(out->last_error, sizeof out->last_error, "%s", l->error);
    snprintf(out->slot, sizeof out->slot, "%s", l->slot);
    out->slot_temporary = l->temporary;
    out->slot_lag_bytes = l->lag_bytes;
    snprintf(out->wal_status, sizeof out->wal_status, "%s", l->wal_status);
    pthread_mutex_unlock(&l->mu);
}

const struct follow_ops follow_logical_ops = {
    .name = "logical",
    .fresh_positions = true,
    .create = logical_create,
    .start = logical_start,
    .stop = logical_stop,
    .free = logical_free,
    .ready = logical_ready,
    .ticket = logical_ticket,
    .copied = logical_copied,
    .catch_up = logical_catch_up,
    .position = logical_position,
    .saved = logical_saved,
    .status = logical_status,
};
