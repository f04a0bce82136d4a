/*
 * Method logical's slot and what it stands on: the slot's name, the
 * positions a snapshot records, the checks that both connections reach one
 * primary, and the slot's creation, loss and resumption (follow_logical.c
 * says why a stream starts where it does); what each table can be heard
 * with is logical_tables.c's.
 */
#include "logical.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "loader.h"
#include "persist.h"

/* ------------------------------------------------------ the slot's name -- */

bool follow_logical_known_slot(const struct config *cfg, char *name, size_t cap)
{
    char dir[PERSIST_PATH_MAX], path[PERSIST_PATH_MAX + 32], kept[64] = "";
    if (strcmp(cfg->slot_name, "auto") != 0) {
        snprintf(name, cap, "%s", cfg->slot_name);
        return true;
    }
    if (!persist_dir(cfg, dir, sizeof dir))
        return false;
    snprintf(path, sizeof path, "%s/logical-slot", dir);
    FILE *fp = fopen(path, "r");
    if (fp == NULL)
        return false;
    bool ok = fgets(kept, sizeof kept, fp) != NULL;
    fclose(fp);
    kept[strcspn(kept, "\n")] = '\0';
    /* Only a name this code could have written: anything else is replaced by a new one. */
    if (!ok || strncmp(kept, "bloomguard_", 11) != 0 || strlen(kept) >= cap
        || strspn(kept, "abcdefghijklmnopqrstuvwxyz0123456789_") != strlen(kept))
        return false;
    snprintf(name, cap, "%s", kept);
    return true;
}

/*
 * [sync] slot: a name is a permanent slot; auto is a permanent slot whose
 * name is kept in the snapshot directory (made once, so a restart finds
 * its slot again), or a temporary one when there is no such directory.
 */
bool logical_choose_slot(struct logical *l, char *err, size_t errlen)
{
    const struct config *cfg = l->base.cfg;
    char dir[PERSIST_PATH_MAX], path[PERSIST_PATH_MAX + 32];
    if (strcmp(cfg->slot_name, "auto") != 0) {
        snprintf(l->slot, sizeof l->slot, "%s", cfg->slot_name);
        l->temporary = false;
        return true;
    }
    unsigned r1 = (unsigned)rand_r(&l->base.rng), r2 = (unsigned)rand_r(&l->base.rng);
    if (!persist_dir(cfg, dir, sizeof dir)) {
        snprintf(l->slot, sizeof l->slot, "bloomguard_tmp_%d_%04x", (int)getpid(), r1 & 0xffff);
        l->temporary = true;
        return true;
    }
    l->temporary = false;
    if (follow_logical_known_slot(cfg, l->slot, sizeof l->slot))
        return true;
    /* A new name, written atomically: temp file, fsync, rename. */
    char tmp[PERSIST_PATH_MAX + 48];
    snprintf(path, sizeof path, "%s/logical-slot", dir);
    snprintf(l->slot, sizeof l->slot, "bloomguard_%08x%04x", r1, r2 & 0xffff);
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    FILE *fp = fopen(tmp, "w");
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
 * A position: "wal:<LSN> tli=<timeline> slot=<name> sysid=<id> db=<oid>
 * pub=<entry>": every commit ending at or before LSN is in the filter, as
 * streamed from that slot of that cluster's database on that timeline
 * while the table's publication entry was that one.  The timeline tells a
 * promoted standby's history from its old primary's: the two share the
 * system identifier and, after the fork, reuse each other's LSNs (a slot
 * of the same name on the new primary is another slot).
 */
void logical_format_pos(char *out, size_t cap, const struct logical_pos *p)
{
    char l[PGOUTPUT_LSN_BUFSIZE];
    pgoutput_lsn_format(p->lsn, l);
    snprintf(out, cap, "wal:%s tli=%s slot=%s sysid=%s db=%s pub=%s", l, p->tli, p->slot,
             p->sysid, p->db, p->fp);
}

/* "wal:" LSN " tli=" " slot=" " sysid=" " db=" " pub=", each field at its longest. */
_Static_assert(4 + 17 + 5 + 11 + 6 + 63 + 7 + 23 + 4 + 15 + 5 + (FP_MAX - 1) < TABLE_POS_MAX,
               "the longest logical position fits a table's position");

/* The parts of a position; false when it is not one of ours (a feed position, garbage). */
bool logical_parse_pos(const char *pos, struct logical_pos *p)
{
    char l[32];
    _Static_assert(FP_MAX == 160, "the pub= width below is FP_MAX - 1");
    if (strncmp(pos, "wal:", 4) != 0
        || sscanf(pos + 4, "%31s tli=%11s slot=%63s sysid=%23s db=%15s pub=%159s", l, p->tli,
                  p->slot, p->sysid, p->db, p->fp) != 6)
        return false;
    return pgoutput_lsn_parse(l, strlen(l), &p->lsn);
}

void logical_pos_here_locked(const struct logical *l, unsigned i, uint64_t lsn,
                             struct logical_pos *p)
{
    p->lsn = lsn;
    snprintf(p->tli, sizeof p->tli, "%s", l->lineage_tli);
    snprintf(p->slot, sizeof p->slot, "%s", l->slot);
    snprintf(p->sysid, sizeof p->sysid, "%s", l->sysid);
    snprintf(p->db, sizeof p->db, "%s", l->dboid);
    snprintf(p->fp, sizeof p->fp, "%s", l->proved_fp[i]);
}

/* ---------------------------------------------------------- connecting -- */

PGresult *logical_exec(PGconn *conn, const char *sql, int n, const char *const *params)
{
    return PQexecParams(conn, sql, n, NULL, params, NULL, NULL, 0);
}

/*
 * Both connections must reach one server: the replication connection's
 * IDENTIFY_SYSTEM and the probe's control data must agree on the cluster,
 * and the probe (loader_server_id) must be on the primary.
 */
bool logical_identify(struct logical *l, PGconn *repl, PGconn *probe, char *err, size_t errlen)
{
    char sid[256];
    if (!loader_server_id(probe, sid, sizeof sid, err, errlen))
        return false;
    PGresult *r = PQexec(repl, "IDENTIFY_SYSTEM");
    bool ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 && PQnfields(r) >= 4;
    char sysid[24] = "", tli[12] = "";
    if (!ok) {
        loader_set_error(err, errlen, "IDENTIFY_SYSTEM failed", repl);
    } else {
        snprintf(sysid, sizeof sysid, "%s", PQgetvalue(r, 0, 0));
        snprintf(tli, sizeof tli, "%s", PQgetvalue(r, 0, 1));
    }
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
        pthread_mutex_lock(&l->base.mu);
        snprintf(l->base.server_id, sizeof l->base.server_id, "%s", sid);
        snprintf(l->sysid, sizeof l->sysid, "%s", sysid);
        snprintf(l->tli, sizeof l->tli, "%s", tli);
        snprintf(l->dboid, sizeof l->dboid, "%s", PQgetvalue(r, 0, 1));
        pthread_mutex_unlock(&l->base.mu);
    }
    PQclear(r);
    return ok;
}

bool follow_logical_check_replication(const struct config *cfg, PGconn *probe, char *err,
                                      size_t errlen)
{
    PGconn *repl = loader_connect_replication(cfg, err, errlen);
    if (repl == NULL)
        return false;
    /* logical_identify's struct: only its identity fields are written, nothing is started. */
    struct logical *l = calloc(1, sizeof *l);
    bool ok = false;
    if (l == NULL) {
        snprintf(err, errlen, "out of memory");
    } else {
        l->base.cfg = cfg;
        pthread_mutex_init(&l->base.mu, NULL);
        ok = logical_identify(l, repl, probe, err, errlen);
        pthread_mutex_destroy(&l->base.mu);
        free(l);
    }
    PQfinish(repl);
    return ok;
}

/* ------------------------------------------------------------ the slot -- */

bool logical_slot_state(struct logical *l, PGconn *probe, enum slot_state *st,
                        uint64_t *confirmed, char *err, size_t errlen)
{
    const char *params[1] = { l->slot };
    PGresult *r = logical_exec(probe,
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
bool logical_create_slot(struct logical *l, PGconn *repl, bool export, uint64_t *start,
                         char *err, size_t errlen)
{
    char sql[192];
    snprintf(sql, sizeof sql, "CREATE_REPLICATION_SLOT %s%s LOGICAL pgoutput (SNAPSHOT '%s')",
             l->slot, l->temporary ? " TEMPORARY" : "", export ? "export" : "nothing");
    int64_t before = monoclock_boot_ns();   /* every commit acknowledged before it is in it */
    PGresult *r = PQexec(repl, sql);
    bool ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 && PQnfields(r) >= 3;
    if (!ok) {
        loader_set_error(err, errlen, "cannot create the replication slot", repl);
    } else {
        const char *cp = PQgetvalue(r, 0, 1);
        ok = pgoutput_lsn_parse(cp, strlen(cp), start);
        if (!ok)
            snprintf(err, errlen, "CREATE_REPLICATION_SLOT: unexpected consistent point");
        pthread_mutex_lock(&l->base.mu);
        snprintf(l->export_name, sizeof l->export_name, "%s",
                 export && !PQgetisnull(r, 0, 2) ? PQgetvalue(r, 0, 2) : "");
        l->export_time = before;
        pthread_mutex_unlock(&l->base.mu);
    }
    PQclear(r);
    return ok;
}

void logical_drop_slot(struct logical *l, PGconn *probe)
{
    const char *params[1] = { l->slot };
    PQclear(logical_exec(probe, "SELECT pg_drop_replication_slot($1)", 1, params));
}

/*
 * A new lineage: every loaded table has lost the rows committed since the
 * old slot's last position (a gap that only a COPY closes, in a fresh
 * snapshot); tables never loaded take the exported snapshot for their
 * first COPY.
 */
void logical_new_lineage(struct logical *l, unsigned n)
{
    pthread_mutex_lock(&l->base.mu);
    l->lineage++;
    l->create_unsure = false;
    snprintf(l->lineage_tli, sizeof l->lineage_tli, "%s", l->tli);
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
    pthread_mutex_unlock(&l->base.mu);
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
uint64_t logical_resume_point(struct logical *l, unsigned n, uint64_t confirmed)
{
    pthread_mutex_lock(&l->base.mu);
    l->slot_ready = true;
    snprintf(l->lineage_tli, sizeof l->lineage_tli, "%s", l->tli);
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
        char pos[TABLE_POS_MAX];
        struct logical_pos p;
        table_position(t, pos, sizeof pos);
        bool parsed = logical_parse_pos(pos, &p);
        bool ok = table_loaded(t) && parsed && strcmp(p.slot, l->slot) == 0
                  && strcmp(p.sysid, l->sysid) == 0 && strcmp(p.tli, l->tli) == 0
                  && strcmp(p.db, l->dboid) == 0 && l->heard[i] && strcmp(p.fp, l->fp[i]) == 0
                  && p.lsn >= confirmed;
        l->resumable[i] = ok ? 1 : -1;
        if (ok) {
            l->resume_epoch[i] = table_epoch(t);
            l->proved[i] = confirmed;
            snprintf(l->proved_fp[i], sizeof l->proved_fp[i], "%s", p.fp);
        } else if (table_loaded(t) && pos[0] != '\0') {
            log_warn(l->base.lg, "%s: the snapshot's position does not resume from slot %s (%s): "
                     "copying the table", table_name(t), l->slot,
                     !parsed ? "not a WAL position of this form"
                     : strcmp(p.tli, l->tli) != 0 ? "another timeline: a promoted standby's "
                                                    "history forks from its old primary's"
                     : p.lsn < confirmed ? "the slot was confirmed past it"
                     : "another slot, cluster, database or publication entry");
            table_drop_position(t);
        }
    }
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->base.mu);
    return confirmed;
}

/* Until the first loads that wanted the exported snapshot have used it (or a while with none). */
void logical_wait_for_export(struct logical *l, unsigned n)
{
    int64_t idle_since = monoclock_boot_ns();
    follow_wake(&l->base);
    pthread_mutex_lock(&l->base.mu);
    while (!atomic_load(&l->base.stop)) {
        bool wanted = false;
        for (unsigned i = 0; i < n; i++)
            wanted = wanted || l->export_want[i];
        if (!wanted && !l->export_busy)
            break;
        if (l->export_busy)
            idle_since = monoclock_boot_ns();
        else if (monoclock_boot_ns() - idle_since > EXPORT_WAIT_NS)
            break;
        struct timespec ts = monoclock_after_ms(200);
        pthread_cond_timedwait(&l->cv, &l->base.mu, &ts);
    }
    /* START_REPLICATION ends the export: later COPYs take fresh snapshots. */
    l->export_name[0] = '\0';
    for (unsigned i = 0; i < n; i++)
        l->export_want[i] = false;
    pthread_mutex_unlock(&l->base.mu);
}
