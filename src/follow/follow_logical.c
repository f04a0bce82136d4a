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
 * A commit can be streamed before new snapshots see it (xidsnap.h): the
 * ticket hands the COPY the transactions the stream applied that no probe
 * has seen finished yet, and the COPY's snapshot must see them all.
 *
 * The horizon (the proofs of freshness) is logical_stream.c's; the slot,
 * positions and resumption are logical_slot.c's (logical.h holds what the
 * three files share).
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

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "loader.h"
#include "monoclock.h"
#include "logical.h"
#include "pgoutput.h"

static struct logical *of(struct follower *f)
{
    return (struct logical *)f;
}

static void logical_init(struct follower *f)
{
    struct logical *l = of(f);
    monoclock_cond_init(&l->cv);
    l->lag_bytes = -1;
    xidset_init(&l->unseen);
}

static void logical_fini(struct follower *f)
{
    struct logical *l = of(f);
    pgoutput_rels_free(l->rels);
    for (unsigned i = 0; i < CONFIG_MAX_FILTERS; i++)
        free(l->members[i]);
    xidset_free(&l->unseen);
    pthread_cond_destroy(&l->cv);
}

static bool start_replication(struct logical *l, PGconn *repl, uint64_t start, char *err,
                              size_t errlen)
{
    char sql[320], lsn[PGOUTPUT_LSN_BUFSIZE];
    pgoutput_lsn_format(start, lsn);
    snprintf(sql, sizeof sql, "START_REPLICATION SLOT %s LOGICAL %s (proto_version '1', "
             "publication_names '\"%s\"', messages 'true')", l->slot, lsn,
             l->base.cfg->publication);
    return loader_command(repl, sql, PGRES_COPY_BOTH, "START_REPLICATION failed", err, errlen);
}

/* What happened to the slot (what) and what answers are until the loads that follow. */
static void slot_degraded(struct logical *l, const char *what, const char *until)
{
    log_fields(l->base.lg, LOG_LVL_WARN, NULL, "degraded", "follower (logical): slot %s %s: %s",
               l->slot, what, until);
}

/* One connection's life: identify, find or make the slot, start, stream. */
static void session(struct logical *l, PGconn *repl, PGconn *const probes[LOGICAL_PROBES],
                    bool *had, char *err, size_t errlen)
{
    struct follower *f = &l->base;
    PGconn *probe = probes[0];
    unsigned n = follow_count(f);
    if (!logical_identify(l, repl, probe, err, errlen) || !logical_prepare_probe(probe, err, errlen))
        return;
    for (unsigned k = 1; k < LOGICAL_PROBES; k++) {
        /* The same server as the first: a W read elsewhere would prove nothing of this stream. */
        char sid[sizeof l->base.server_id];
        if (!loader_server_id(probes[k], sid, sizeof sid, err, errlen)
            || !logical_prepare_probe(probes[k], err, errlen))
            return;
        pthread_mutex_lock(&l->base.mu);
        bool same = strcmp(sid, l->base.server_id) == 0;
        pthread_mutex_unlock(&l->base.mu);
        if (!same) {
            snprintf(err, errlen, "the probe's second connection reached another server (%s) "
                     "than its first: set a single host in conninfo", sid);
            return;
        }
    }
    logical_read_relids(l, probe, 0, n);
    if (!logical_hear_tables(l, probe, 0, n, err, errlen))
        return;
    pthread_mutex_lock(&l->base.mu);
    l->known = n;
    pthread_mutex_unlock(&l->base.mu);
    enum slot_state st = SLOT_MISSING;
    uint64_t confirmed = 0, start = 0;
    if (!l->temporary && !logical_slot_state(l, probe, &st, &confirmed, err, errlen))
        return;
    if (st == SLOT_LOST) {
        slot_degraded(l, "was invalidated (max_slot_wal_keep_size)",
                      "degraded until a new slot's full loads");
        logical_drop_slot(l, probe);
        st = SLOT_MISSING;
    }
    if (st == SLOT_OK && !*had && l->lineage == 0)
        log_fields(f->lg, LOG_LVL_INFO, NULL, "follower_connected",
                   "follower (logical): resuming from slot %s", l->slot);
    if (st == SLOT_OK) {
        pthread_mutex_lock(&l->base.mu);
        bool gap = l->lineage != 0 && l->applied != 0 && confirmed > l->applied;
        bool unsure = l->create_unsure;
        pthread_mutex_unlock(&l->base.mu);
        if (unsure) {
            /*
             * Made by the attempt whose answer was lost (or by someone else
             * meanwhile): it starts where that attempt began, not where this
             * daemon's filters are (applied may be of the old primary's LSNs).
             */
            slot_degraded(l, "exists, made by an attempt whose answer was lost",
                          "degraded until full loads");
            logical_new_lineage(l, n);
            start = confirmed;
        } else if (gap) {
            /* Someone confirmed the slot past what this daemon applied: that stretch is lost. */
            slot_degraded(l, "was confirmed past what this daemon applied",
                          "degraded until full loads");
            logical_new_lineage(l, n);
            start = confirmed;
        } else {
            if (l->lineage == 0)
                l->lineage = 1;
            start = logical_resume_point(l, n, confirmed);
        }
    } else {
        bool export = false;
        for (unsigned i = 0; i < n && !export; i++)
            export = !table_loaded(f->tables[i]);
        if (*had || l->lineage != 0)
            slot_degraded(l, l->temporary ? "went with the connection" : "is gone",
                          "a new slot; degraded until full loads");
        /* PostgreSQL makes a logical slot once every transaction with an xid
         * running now has ended: a long one holds the start back, say so. */
        log_info(f->lg, "follower (logical): creating %s slot %s (it waits for the "
                 "transactions running now to end)", l->temporary ? "temporary" : "permanent",
                 l->slot);
        int64_t t0 = monoclock_boot_ns();
        if (!logical_create_slot(l, repl, export, &start, err, errlen)) {
            pthread_mutex_lock(&l->base.mu);
            l->create_unsure = !l->temporary;
            pthread_mutex_unlock(&l->base.mu);
            return;
        }
        logical_new_lineage(l, n);
        log_fields(f->lg, LOG_LVL_INFO, NULL, "follower_connected",
                   "follower (logical): %s slot %s created at its consistent point "
                   "after %.1f s", l->temporary ? "temporary" : "permanent", l->slot,
                   (double)(monoclock_boot_ns() - t0) / NS_PER_S);
        logical_wait_for_export(l, n);
    }
    if (!start_replication(l, repl, start, err, errlen))
        return;
    pthread_mutex_lock(&l->base.mu);
    l->applied = start;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->base.mu);
    follow_set_state(f, FOLLOW_CONNECTED, NULL);
    *had = true;
    {
        char lsn[PGOUTPUT_LSN_BUFSIZE];
        pgoutput_lsn_format(start, lsn);
        log_info(f->lg, "follower (logical): streaming %u table%s from slot %s at %s, "
                 "publication %s", n, n == 1 ? "" : "s", l->slot, lsn, f->cfg->publication);
    }
    follow_wake(f);
    logical_stream(l, repl, probes, err, errlen);
}

static void logical_run(struct follower *f)
{
    struct logical *l = of(f);
    char err[512];
    unsigned backoff = 1;
    bool had = false;

    l->rels = pgoutput_rels_new(RELS_MAX, RELS_BYTES);
    if (l->rels == NULL || !logical_choose_slot(l, err, sizeof err)) {
        if (l->rels == NULL)
            snprintf(err, sizeof err, "out of memory");
        follow_set_state(f, FOLLOW_CONNECTING, err);
        log_fields(f->lg, LOG_LVL_ERROR, NULL, "follower_failed", "follower (logical): %s", err);
        return;
    }
    while (!atomic_load(&f->stop)) {
        err[0] = '\0';
        PGconn *probes[LOGICAL_PROBES] = { NULL }, *repl = NULL;
        bool up = true;
        for (unsigned k = 0; k < LOGICAL_PROBES && up; k++)
            up = (probes[k] = loader_connect_as(f->cfg, "bloomguard logical probe", err,
                                                sizeof err)) != NULL;
        repl = up ? loader_connect_replication(f->cfg, err, sizeof err) : NULL;
        if (repl != NULL) {
            int64_t t0 = monoclock_boot_ns();
            session(l, repl, probes, &had, err, sizeof err);
            if (monoclock_boot_ns() - t0 > 30 * NS_PER_S)
                backoff = 1;        /* it had been up for a while: a quick first retry */
        }
        PQfinish(repl);
        for (unsigned k = 0; k < LOGICAL_PROBES; k++)
            PQfinish(probes[k]);
        if (atomic_load(&f->stop))
            break;
        pthread_mutex_lock(&f->mu);
        /* A temporary slot went with its connection: no COPY until a new one exists. */
        if (l->temporary)
            l->slot_ready = false;
        pthread_mutex_unlock(&f->mu);
        follow_retry(f, err, had, &backoff);
    }
}

/* ------------------------------------------------------------ the ops -- */

/* A catch-up or the export's wait on cv sees stop at once. */
static void logical_interrupt(struct follower *f)
{
    struct logical *l = of(f);
    pthread_mutex_lock(&f->mu);
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&f->mu);
}

/*
 * Caller holds base.mu: whether a COPY of table i may start as far as the stream
 * goes.  A loaded table the stream cannot hear (out of the publication, its
 * name now another table's) is not copied until it is heard again: the rows
 * committed after the COPY would not be followed.  A first load goes ahead
 * (the table is served, degraded).
 */
static bool hearing(struct logical *l, int i, struct table *t)
{
    return l->heard[i] || !table_loaded(t);
}

/* Caller holds base.mu: the table's index among those the stream knows, -1 if none. */
static int known_index(struct logical *l, struct table *t)
{
    int i = follow_index(&l->base, t);
    return i >= 0 && (unsigned)i < l->known ? i : -1;
}

static bool logical_ready(struct follower *f, struct table *t)
{
    struct logical *l = of(f);
    pthread_mutex_lock(&l->base.mu);
    int i = known_index(l, t);
    bool ready = l->slot_ready && i >= 0 && hearing(l, i, t);
    pthread_mutex_unlock(&l->base.mu);
    return ready;
}

static bool logical_ticket(struct follower *f, struct table *t, PGconn *conn,
                           struct follow_ticket *tk, char *err, size_t errlen)
{
    struct logical *l = of(f);
    char mine[sizeof f->server_id];
    if (!loader_server_id(conn, mine, sizeof mine, err, errlen))
        return false;
    pthread_mutex_lock(&l->base.mu);
    int i = known_index(l, t);
    bool ok = l->slot_ready && i >= 0;
    if (!ok) {
        snprintf(err, errlen, "no replication slot yet: no COPY before the slot that covers "
                 "what commits after it");
    } else if (!hearing(l, i, t)) {
        snprintf(err, errlen, "the replication stream cannot hear the table (not in the "
                 "publication with its column): no COPY it would not follow");
        ok = false;
    } else if (!follow_same_server_locked(f, mine, err, errlen)) {
        ok = false;             /* the slot streams one server */
    } else {
        tk->epoch = table_epoch(t);
        if (l->export_name[0] && l->export_want[i] && !l->export_busy) {
            snprintf(tk->snapshot, sizeof tk->snapshot, "%s", l->export_name);
            tk->start = l->export_time;
            l->export_busy = true;
        } else if (l->unseen.overflowed) {
            snprintf(err, errlen, "too many streamed transactions not yet seen finished: no "
                     "COPY until a probe sees them");
            ok = false;
        } else if (l->unseen.n > 0) {
            /* The load has begun: what the stream applied before it, the COPY must see. */
            tk->must_see = malloc(l->unseen.n * sizeof *tk->must_see);
            if (tk->must_see == NULL) {
                snprintf(err, errlen, "out of memory");
                ok = false;
            } else {
                memcpy(tk->must_see, l->unseen.v, l->unseen.n * sizeof *tk->must_see);
                tk->n_must_see = l->unseen.n;
            }
        }
    }
    pthread_mutex_unlock(&l->base.mu);
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
    pthread_mutex_lock(&l->base.mu);
    int i = follow_index(f, t);
    if (i >= 0)
        l->export_want[i] = false;  /* tried: a retry takes a fresh snapshot */
    l->export_busy = false;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->base.mu);
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
    int64_t until = monoclock_boot_ns() + (int64_t)RESUME_WAIT_MS * 1000000;
    pthread_mutex_lock(&l->base.mu);
    int i = follow_index(f, t);
    while (i >= 0 && l->resumable[i] == 0 && monoclock_boot_ns() < until
           && !atomic_load(&f->stop)) {
        struct timespec ts = monoclock_after_ms(1000);
        pthread_cond_timedwait(&l->cv, &l->base.mu, &ts);
    }
    int r = i < 0 ? -1 : l->resumable[i];
    uint64_t epoch = i >= 0 ? l->resume_epoch[i] : 0;
    pthread_mutex_unlock(&l->base.mu);
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
    pthread_mutex_lock(&l->base.mu);
    int i = follow_index(f, t);
    if (!l->temporary && i >= 0 && l->proved[i] != 0 && table_covered(t)) {
        struct logical_pos p;
        logical_pos_here_locked(l, (unsigned)i, l->proved[i], &p);
        logical_format_pos(out, cap, &p);
    }
    pthread_mutex_unlock(&l->base.mu);
}

static void logical_saved(struct follower *f, struct table *t, const char *pos)
{
    struct logical *l = of(f);
    struct logical_pos p;
    if (!logical_parse_pos(pos, &p))
        return;
    pthread_mutex_lock(&l->base.mu);
    int i = follow_index(f, t);
    /* Of this slot on this timeline: a save that began before a failover confirms nothing. */
    if (i >= 0 && strcmp(p.slot, l->slot) == 0 && strcmp(p.tli, l->lineage_tli) == 0
        && strcmp(p.sysid, l->sysid) == 0)
        l->saved[i] = p.lsn;
    pthread_mutex_unlock(&l->base.mu);
}

static void logical_status_locked(struct follower *f, struct follow_status *out)
{
    struct logical *l = of(f);
    out->listening = l->slot_ready && f->state == FOLLOW_CONNECTED;
    snprintf(out->slot, sizeof out->slot, "%s", l->slot);
    out->slot_temporary = l->temporary;
    out->slot_lag_bytes = l->lag_bytes;
    snprintf(out->wal_status, sizeof out->wal_status, "%s", l->wal_status);
}

/* The stream's transactions a new snapshot may not see yet: every table's (one slot). */
static bool logical_unseen(struct follower *f, struct table *t, uint32_t **xids, size_t *n)
{
    struct logical *l = of(f);
    (void)t;
    pthread_mutex_lock(&l->base.mu);
    bool ok = !l->unseen.overflowed;
    if (ok && l->unseen.n > 0) {
        *xids = malloc(l->unseen.n * sizeof **xids);
        ok = *xids != NULL;
        if (ok) {
            memcpy(*xids, l->unseen.v, l->unseen.n * sizeof **xids);
            *n = l->unseen.n;
        }
    }
    pthread_mutex_unlock(&l->base.mu);
    return ok;
}

const struct follow_ops follow_logical_ops = {
    .method = SYNC_LOGICAL,
    .fresh_positions = true,
    .size = sizeof(struct logical),
    .init = logical_init,
    .fini = logical_fini,
    .run = logical_run,
    .interrupt = logical_interrupt,
    .ready = logical_ready,
    .ticket = logical_ticket,
    .copied = logical_copied,
    .catch_up = logical_catch_up,
    .position = logical_position,
    .saved = logical_saved,
    .status_locked = logical_status_locked,
    .unseen = logical_unseen,
};
