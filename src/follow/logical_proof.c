/*
 * Method logical's proofs of freshness: a probe's answer taken (its checks,
 * the proof it confirms) and a proof armed as the next probe leaves
 * (logical_stream.c says what a proof is).
 */
#include "logical.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/*
 * A probe's answer: the slot's figures, each table's publication entry
 * (a change is a gap), then the proof a probe before it started, if the
 * stream had passed its W before this one was sent.
 */
bool logical_take_probe(struct logical *l, PGresult *r, struct proof *prev, struct proof *cur,
                        char *err, size_t errlen)
{
    char fps[CONFIG_MAX_FILTERS][FP_MAX], oids[CONFIG_MAX_FILTERS][FP_MAX];
    char shapes[CONFIG_MAX_FILTERS][FP_MAX];
    bool holds[CONFIG_MAX_FILTERS];
    unsigned n = cur->n;            /* the tables the probe asked about */
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1
        || (PQnfields(r) != PROBE_FIELDS && PQnfields(r) != PROBE_FIELDS + 1)
        || !logical_probe_lists(r, n, fps, shapes)
        || !logical_split_fps(PQgetvalue(r, 0, 4), n, oids)) {
        snprintf(err, errlen, "probe failed: %s", PQresultErrorMessage(r));
        return false;
    }
    const char *w = PQgetvalue(r, 0, 0);
    if (!pgoutput_lsn_parse(w, strlen(w), &cur->wal)) {
        snprintf(err, errlen, "probe failed: unexpected WAL position");
        return false;
    }
    cur->wal = record_boundary(l, cur->wal);
    pthread_mutex_lock(&l->base.mu);
    /* What this snapshot sees finished, a COPY's later snapshot sees too. */
    xidset_prune(&l->unseen, PQgetvalue(r, 0, 5));
    l->lag_bytes = PQgetisnull(r, 0, 1) ? -1 : strtoll(PQgetvalue(r, 0, 1), NULL, 10);
    snprintf(l->wal_status, sizeof l->wal_status, "%s", PQgetisnull(r, 0, 2) ? "" : PQgetvalue(r, 0, 2));
    pthread_mutex_unlock(&l->base.mu);
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
            log_fields(l->base.lg, LOG_LVL_WARN, table_name(t), "degraded",
                       "%s: %s is now another table (oid %s, was %" PRIu32 "): degraded "
                       "until a COPY of it",
                       table_name(t), table_config(t)->table, oids[i][0] ? oids[i] : "none",
                       l->relid[i]);
            pthread_mutex_lock(&l->base.mu);
            l->heard[i] = false;    /* first: no COPY may start in the new epoch until heard */
            pthread_mutex_unlock(&l->base.mu);
            snprintf(l->unheard[i], sizeof l->unheard[i], "%s is now another table",
                     table_config(t)->table);
            table_gap(t, WANT_POSITION);
            changed = true;
            continue;
        }
        if (strcmp(fps[i], l->fp[i]) == 0)
            continue;
        /* The publication entry changed: rows may not have been streamed since. */
        struct table *t = l->base.tables[i];
        log_fields(l->base.lg, LOG_LVL_WARN, table_name(t), "degraded",
                   "%s: its publication entry changed (%s -> %s): degraded until a "
                   "COPY",
                   table_name(t), l->fp[i][0] ? l->fp[i] : "none", fps[i][0] ? fps[i] : "none");
        pthread_mutex_lock(&l->base.mu);
        l->heard[i] = false;
        pthread_mutex_unlock(&l->base.mu);
        snprintf(l->unheard[i], sizeof l->unheard[i], "its publication entry changed: "
                 "until the stream hears it again");
        table_gap(t, WANT_POSITION);
        changed = true;
    }
    /*
     * What each SELECT reads, now, after the proof's T: a column renamed,
     * retyped or dropped, or a child table, since the filter's load holds
     * the proof back (table_schema).
     */
    for (unsigned i = 0; i < n; i++) {
        struct table *t = l->base.tables[i];
        enum table_schema_verdict v = table_schema(t, shapes[i], l->heard[i] ? NULL : l->unheard[i]);
        holds[i] = v == TABLE_SCHEMA_SAME;
        if (v == TABLE_SCHEMA_CHANGED)
            log_fields(l->base.lg, LOG_LVL_WARN, table_name(t), "degraded",
                       "%s: %s.%s or the tables it is read from changed (a column renamed, "
                       "retyped or dropped, a child table or partition): degraded until a COPY",
                       table_name(t), table_config(t)->table, table_config(t)->column);
    }
    if (changed)
        return true;                /* logical_hear_tables again before any proof */
    if (prev->pending && prev->passed_before_next) {
        for (unsigned i = 0; i < prev->n; i++) {
            if (!l->heard[i] || !holds[i]
                || !table_advance(l->base.tables[i], prev->epoch[i], prev->sent))
                continue;
            pthread_mutex_lock(&l->base.mu);
            if (prev->wal > l->proved[i])
                l->proved[i] = prev->wal;
            snprintf(l->proved_fp[i], sizeof l->proved_fp[i], "%s", l->fp[i]);
            pthread_mutex_unlock(&l->base.mu);
        }
        prev->pending = false;
    }
    return true;
}

/*
 * A probe is about to leave: which answered proof its answer may confirm
 * (into prev, armed), from the last probe's (cur) and the one still
 * waiting for the stream (held).  A proof whose W the stream has not
 * passed yet is kept until it has, not dropped: under load (PostgreSQL
 * starved of CPU, a distant server) a probe's round trip and the
 * walsender's answer to the status sent after it can take longer than
 * probe_interval, and a proof that had to be passed before the very next
 * probe would then never hold: the horizon would stop, and the guard turn
 * to "maybe", while every row was being followed.  The newest proof the
 * stream has passed wins; otherwise the oldest waiting one is kept (it is
 * the one the stream passes first).  The rule is unchanged: H moves to a
 * proof's T only once a probe sent after the stream passed its W answers
 * with the tables' entries unchanged.
 */
void logical_arm(struct follower *f, struct proof *prev, struct proof *held, struct proof *cur,
                 uint64_t applied, int64_t now)
{
    prev->pending = false;
    if (applied >= cur->wal) {
        *prev = *cur;
        held->pending = false;      /* older than cur: cur's T covers it */
    } else if (held->pending && applied >= held->wal) {
        *prev = *held;
        *held = *cur;
    } else {
        if (!held->pending)
            *held = *cur;
        log_debug(f->lg, "follower (logical): the stream (%" PRIu64 ") has not passed W (%"
                  PRIu64 ") of the proof of %.3f s ago yet: it waits for the stream",
                  applied, held->wal, (double)(now - held->sent) / NS_PER_S);
        return;
    }
    prev->passed_before_next = true;
}
