/*
 * Method logical's replication stream: apply the changes, answer the
 * walsender, confirm the slot, and prove the tables fresh.
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
 */
#include "logical.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loader.h"

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
    pthread_mutex_lock(&l->base.mu);
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
            flush = l->applied;     /* a snapshot of another history (see logical_resume_point) */
    }
    pthread_mutex_unlock(&l->base.mu);
    pgoutput_status_encode(buf, sizeof buf, received, flush, flush,
                           pgoutput_time_from_unix_us(us), reply);
    if (PQputCopyData(repl, (const char *)buf, (int)sizeof buf) != 1 || PQflush(repl) < 0) {
        loader_set_error(err, errlen, "cannot send a status update", repl);
        return false;
    }
    return true;
}

/*
 * A change of table i's member m whose column moved, changed type or left
 * the stream's relation: the rows read from here on may not be the rows, or
 * the spelling, the filter holds (a rename, a drop, ALTER COLUMN TYPE).
 * The stream, behind the catalog, sees it at the first change after it;
 * the probe's shape check sees it in the catalog; either starts the gap.
 */
static void column_gap(struct logical *l, unsigned i, uint32_t relid,
                       enum pgoutput_track_result r)
{
    struct table *t = l->base.tables[i];
    const struct filter_config *fc = table_config(t);
    const struct pgoutput_rel *rel = pgoutput_rels_get(l->rels, relid);
    log_fields(l->base.lg, LOG_LVL_WARN, fc->name, "degraded",
               "%s: in the replication stream, %s.%s's column %s %s: degraded until a COPY",
               fc->name, rel ? rel->nspname : "?", rel ? rel->relname : "?", fc->column,
               r == PGOUTPUT_TRACK_MISSING ? "is gone (renamed or dropped)"
               : r == PGOUTPUT_TRACK_MOVED ? "moved to another position"
               : "has another type");
    table_gap(t, WANT_SCHEMA);
}

/* The tables a relation's changes go to: by oid (two filters may guard two columns of one). */
static void apply_tuple(struct logical *l, uint32_t relid, const struct pgoutput_tuple *tuple,
                        unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        struct logical_member *m = l->heard[i] ? logical_member(l, i, relid) : NULL;
        if (m == NULL)
            continue;
        enum pgoutput_track_result r = pgoutput_rels_track(l->rels, relid,
                                                           table_config(l->base.tables[i])->column,
                                                           &m->track);
        if (r == PGOUTPUT_TRACK_NO_REL)
            continue;
        if (r == PGOUTPUT_TRACK_MISSING || r == PGOUTPUT_TRACK_MOVED
            || r == PGOUTPUT_TRACK_RETYPED)
            column_gap(l, i, relid, r);
        struct pgoutput_col c;
        if (m->track.col < 0 || !pgoutput_tuple_get(tuple, (unsigned)m->track.col, &c))
            continue;
        /* 'n': NULL is no ID; 'u': an unchanged TOASTed value, so not a new ID. */
        if (c.kind != 't')
            continue;
        if (!l->xact_noted) {
            /* Before its first row reaches a filter: a COPY beginning now must see it. */
            pthread_mutex_lock(&l->base.mu);
            xidset_add(&l->unseen, l->xact);
            pthread_mutex_unlock(&l->base.mu);
            l->xact_noted = true;
        }
        if (table_add_row(l->base.tables[i], c.value, c.len))
            l->added[i]++;
    }
}

/* Whether relid's changes are rows of table i, as far as the stream hears it. */
static bool member_of(struct logical *l, unsigned i, uint32_t relid)
{
    return l->heard[i] && logical_member(l, i, relid) != NULL;
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
            l->deleted[i] += member_of(l, i, m.delete.relid);
        break;
    case PGOUTPUT_TRUNCATE:
        for (uint32_t k = 0; k < m.truncate.nrelids; k++)
            for (unsigned i = 0; i < n; i++)
                if (member_of(l, i, pgoutput_truncate_relid(&m, k)))
                    table_note_truncate(l->base.tables[i]);
        break;
    case PGOUTPUT_COMMIT: {
        flush_counts(l, n);
        pthread_mutex_lock(&l->base.mu);
        if (m.commit.end_lsn > l->applied)
            l->applied = m.commit.end_lsn;
        uint32_t tli = (uint32_t)strtoul(l->tli, NULL, 10);
        pthread_mutex_unlock(&l->base.mu);
        /*
         * Every row of this commit went to its tables before, none of the
         * next one's yet: an upstream's ring marks where the commit stands
         * (fleetring.h), so that its replicas may move to another upstream
         * of this cluster at a commit position.
         */
        for (unsigned i = 0; i < n && tli != 0; i++)
            if (l->heard[i])
                table_note_commit(l->base.tables[i], tli, m.commit.end_lsn);
        break;
    }
    case PGOUTPUT_BEGIN:
        l->xact = m.begin.xid;
        l->xact_noted = false;
        break;
    case PGOUTPUT_ORIGIN:
    case PGOUTPUT_TYPE:
    case PGOUTPUT_MESSAGE:
        break;
    }
    return true;
}

/*
 * One of the probe's sessions.  A probe left for being late keeps its
 * proof in mine (its answer fills W in, nothing arms it: a later probe has
 * gone since) and the armed proof it was sent to confirm (confirms: that
 * proof's T, -1 none), which its answer still may: it left after the
 * stream passed that W, whenever it answers.  Any other is not its to
 * confirm.
 */
struct probe_session {
    PGconn *conn;
    bool busy;                      /* a probe in flight */
    int64_t sent;
    int64_t confirms;
    struct proof mine;
};

/* The session a probe leaves on: the one the last probe used when free, else another free one. */
static int free_session(const struct probe_session *ps, int last)
{
    if (last >= 0 && !ps[last].busy)
        return last;
    for (int k = 0; k < LOGICAL_PROBES; k++)
        if (!ps[k].busy)
            return k;
    return -1;
}

/*
 * Stream until the connection fails or stop: apply changes, answer
 * keepalives, probe every probe_interval, update the slot every
 * STATUS_EVERY_NS.  Returns with the reason in err.
 */
void logical_stream(struct logical *l, PGconn *repl, PGconn *const probes[LOGICAL_PROBES],
                    char *err, size_t errlen)
{
    struct follower *f = &l->base;
    int64_t interval = (int64_t)(f->cfg->probe_interval * (double)NS_PER_S);
    /*
     * Late: past two intervals, or a quarter of max_staleness, so that the
     * probe sent on the other session still has most of it to answer in.
     */
    int64_t late = 2 * interval, quarter = (int64_t)(f->cfg->max_staleness / 4 * (double)NS_PER_S);
    if (quarter > late)
        late = quarter;
    int64_t next_probe = monoclock_boot_ns(), last_status = 0, last_flush = 0;
    uint64_t received = 0;
    struct probe_session ps[LOGICAL_PROBES];
    int at = -1, last = 0;          /* the session the current probe is in flight on, -1 none */
    struct proof prev = { 0 }, cur = { 0 }, held = { 0 };
    char arr[CONFIG_MAX_FILTERS * 12 + 4];

    for (int k = 0; k < LOGICAL_PROBES; k++)
        ps[k] = (struct probe_session){ .conn = probes[k], .confirms = -1 };
    while (!atomic_load(&f->stop)) {
        unsigned n = follow_count(f);
        int64_t now = monoclock_boot_ns();
        if (n > l->known) {
            /* Tables attached since: their oids and entries, before they count in a probe. */
            int k = at >= 0 ? -1 : free_session(ps, last);
            if (k < 0)
                goto wait;
            logical_read_relids(l, ps[k].conn, l->known, n);
            if (!logical_hear_tables(l, ps[k].conn, l->known, n, err, errlen))
                return;
            pthread_mutex_lock(&l->base.mu);
            l->known = n;
            pthread_mutex_unlock(&l->base.mu);
            follow_wake(f);
        }
        if (at >= 0 && now - ps[at].sent > late && free_session(ps, -1) >= 0) {
            /* Its backend may wait for a CPU long after others run: the next probe leaves now, elsewhere. */
            log_debug(f->lg, "follower (logical): a probe is unanswered after %.0f ms: "
                      "the next leaves on the probe's other connection",
                      (double)(now - ps[at].sent) / 1e6);
            ps[at].mine = cur;
            cur.pending = false;
            at = -1;
            next_probe = now;
        }
        int k = at < 0 && now >= next_probe ? free_session(ps, last) : -1;
        if (k >= 0) {
            PGconn *probe = ps[k].conn;
            bool again = false;
            for (unsigned i = 0; i < n; i++)
                again = again || !l->heard[i];
            if (again) {
                /* A table not heard (now): its oid and entry again, it may be back. */
                logical_read_relids(l, probe, 0, n);
                if (!logical_hear_tables(l, probe, 0, n, err, errlen))
                    return;
            }
            pthread_mutex_lock(&l->base.mu);
            uint64_t applied = l->applied;
            pthread_mutex_unlock(&l->base.mu);
            if (cur.pending)
                logical_arm(f, &prev, &held, &cur, applied, now);
            /* A proof the stream has not passed in two intervals: its W may wait for a flush. */
            bool flush = held.pending && applied < held.wal && now - held.sent > 2 * interval
                         && last_flush < held.sent;
            cur.pending = true;
            cur.passed_before_next = false;
            cur.n = n;
            for (unsigned i = 0; i < n; i++)
                cur.epoch[i] = table_epoch(f->tables[i]);
            logical_relid_array(l, n, arr, sizeof arr);
            char *names = malloc(NAMES_MAX), *cols = malloc(NAMES_MAX);
            if (names == NULL || cols == NULL || !logical_name_array(l, probe, n, names, NAMES_MAX)
                || !logical_column_array(l, n, cols, NAMES_MAX)) {
                free(names);
                free(cols);
                snprintf(err, errlen, "the tables' names do not fit in a probe");
                return;
            }
            const char *params[5] = { l->slot, f->cfg->publication, arr, names, cols };
            cur.sent = now;         /* before the query leaves: H may move only this far */
            int sent = PQsendQueryPrepared(probe, flush ? PROBE_FLUSH_NAME : PROBE_NAME, 5, params,
                                           NULL, NULL, 0);
            if (flush) {
                last_flush = now;
                log_debug(f->lg, "follower (logical): the stream has waited %.3f s for W: "
                          "this probe takes a transaction ID, its commit flushes the WAL past W",
                          (double)(now - held.sent) / NS_PER_S);
            }
            free(names);
            free(cols);
            if (!sent) {
                loader_set_error(err, errlen, "probe failed", probe);
                return;
            }
            ps[k].busy = true;
            ps[k].sent = now;
            ps[k].confirms = prev.pending && prev.passed_before_next ? prev.sent : -1;
            at = last = k;
            next_probe = now + interval;
        }
        /* Only the current probe's silence ends the connection: a left one's is why it was left. */
        if (at >= 0 && follow_probe_dead(ps[at].sent, now, f->cfg->silence_timeout, err, errlen))
            return;
        if (now - last_status >= STATUS_EVERY_NS) {
            if (!send_status(l, repl, received, false, err, errlen))
                return;
            last_status = now;
        }
    wait:;
        struct pollfd pfd[1 + LOGICAL_PROBES] = { { .fd = PQsocket(repl), .events = POLLIN } };
        for (k = 0; k < LOGICAL_PROBES; k++) {
            pfd[1 + k] = (struct pollfd){ .fd = PQsocket(ps[k].conn), .events = POLLIN };
            if (PQflush(ps[k].conn) == 1)
                pfd[1 + k].events |= POLLOUT;
        }
        int pr = poll(pfd, 1 + LOGICAL_PROBES, 100);
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
        bool read_any = false;
        while ((got = PQgetCopyData(repl, &buf, 1)) > 0) {
            read_any = true;
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
                pthread_mutex_lock(&l->base.mu);
                if (fr.wal_end > l->applied)
                    l->applied = fr.wal_end;
                pthread_mutex_unlock(&l->base.mu);
            }
            if (ok && fr.wal_end > received)
                received = fr.wal_end;
            PQfreemem(buf);
            if (!ok)
                return;
            if (fr.type == PGOUTPUT_KEEPALIVE && fr.reply_requested) {
                if (!send_status(l, repl, received, false, err, errlen))
                    return;
                last_status = monoclock_boot_ns();
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
        for (k = 0; k < LOGICAL_PROBES; k++) {
            if (!ps[k].busy || !(pfd[1 + k].revents || pr == 0))
                continue;
            if (!PQconsumeInput(ps[k].conn)) {
                loader_set_error(err, errlen, "connection lost", ps[k].conn);
                return;
            }
            if (PQisBusy(ps[k].conn))
                continue;
            PGresult *r = PQgetResult(ps[k].conn), *extra;
            int64_t rtt = monoclock_boot_ns() - ps[k].sent;
            bool ok;
            if (k == at) {
                if (rtt > interval)
                    log_debug(f->lg, "follower (logical): a probe answered after %.0f ms",
                              (double)rtt / 1e6);
                ok = logical_take_probe(l, r, &prev, &cur, err, errlen);
                at = -1;
            } else {
                /* A probe left for late: its checks count, and it confirms only what it left for. */
                struct proof none = { 0 };
                bool its = prev.pending && prev.sent == ps[k].confirms;
                log_debug(f->lg, "follower (logical): a probe left for late answered after %.0f ms",
                          (double)rtt / 1e6);
                ok = logical_take_probe(l, r, its ? &prev : &none, &ps[k].mine, err, errlen);
            }
            PQclear(r);
            while ((extra = PQgetResult(ps[k].conn)) != NULL)
                PQclear(extra);
            ps[k].busy = false;
            if (!ok)
                return;
            /* Ask the walsender where it is now: its answer may pass W at once. */
            if (!send_status(l, repl, received, true, err, errlen))
                return;
        }
        bool lost = PQstatus(repl) != CONNECTION_OK;
        for (k = 0; k < LOGICAL_PROBES && !lost; k++)
            if (PQstatus(ps[k].conn) != CONNECTION_OK) {
                loader_set_error(err, errlen, "connection lost", ps[k].conn);
                return;
            }
        if (lost) {
            loader_set_error(err, errlen, "connection lost", repl);
            return;
        }
        if (read_any && !atomic_load(&f->stop)) {
            struct timespec gap = { 0, READ_GAP_NS };
            while (clock_nanosleep(CLOCK_MONOTONIC, 0, &gap, &gap) == EINTR)
                ;
        }
    }
}
