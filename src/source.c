/*
 * Two threads keep every table's filter true to its table.  The follower
 * holds one LISTEN connection for all of them and adds every notified ID to
 * the guard of the table whose channel it came on; the rebuilder builds a
 * fresh filter with COPY whenever one is wanted and swaps it in, one table
 * at a time, so a restart never runs every COPY at once, and a table that
 * fails retries on its own backoff without holding up the others.
 * A rebuild's COPY starts only while the follower is listening, so a row
 * committed at any moment is either in the COPY's snapshot or notified to a
 * follower that adds it to both filters.
 *
 * The horizon.  PostgreSQL delivers to a listening session, before the
 * result of its next query, every notification of a transaction whose
 * commit was acknowledged before that query started.  So each time the
 * follower's probe (a tiny SELECT, every probe_interval) comes back and the
 * notifications that came with it are applied, every row committed before
 * the probe was sent is in the filter: the horizon H moves to the send time.
 * That holds only while the feed is whole: a new connection (notifications
 * were lost while away: every table) or a row whose ID did not fit in a
 * notification (its table) starts a new feed epoch, and that table's H
 * stays put until a rebuild whose COPY (or catch-up) started in that epoch
 * is live.  When now - H exceeds max_staleness the guard is degraded and
 * "absent" answers become "maybe".
 *
 * Resuming instead of copying.  Where sql/notify.sql's change feed serves a
 * table, every COPY records a position (docs/feed.md), and a reconnect, a
 * long ID or a start from a snapshot (persist.c, before the first load)
 * becomes a catch-up: the rows committed since the position, read into the
 * live filter under the same LISTEN-first rule as a COPY, so the horizon
 * moves the same way.  The rebuild thread also writes each table's snapshot
 * after each load, every [snapshot] interval and at stop, and prunes the
 * feed; it is the only thread that swaps filters, so the live filter it
 * streams to disk stays alive.
 */
#include "source.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "feed.h"
#include "loader.h"
#include "persist.h"

/* How often the rebuilder wakes to check timers and growth. */
#define TICK_MS 500
/* Smallest filter worth building: a fresh table still gets room to grow. */
#define MIN_CAPACITY 1024
/*
 * A probe unanswered this long means the connection is gone (a partition
 * that drops packets never closes it).  Degraded answers start long before;
 * this only decides when to give up on the connection, which costs a
 * rebuild, so it is generous: a short network hiccup heals by itself.
 */
#define PROBE_DEAD_NS (15 * NS_PER_S)
#define NS_PER_S INT64_C(1000000000)
/*
 * PostgreSQL refuses NOTIFY payloads of 8000 bytes or more, counted in the
 * server's encoding; in UTF-8 such an ID may take as little as half that (a
 * 4-byte GB18030 character is at least 2 bytes of UTF-8).  An ID shorter
 * than this in UTF-8 always fits in a notification.
 */
#define NOTIFY_MIN_LONG_UTF8 4000

/* One guarded table.  Fields after "under mu" are guarded by source.mu. */
struct table {
    struct source *s;
    unsigned idx;
    const struct filter_config *fc;
    struct guard *g;
    struct pending *pending;
    char del_channel[80];       /* <channel>_deleted */

    /* Monotonic ns: every row committed before it is in the live filter; 0 = none. */
    _Atomic int64_t horizon;

    /* under mu */
    uint64_t wanted;            /* newest requested rebuild id */
    uint64_t started;           /* id of the rebuild running or last started */
    char wanted_reason[32];
    bool ever_loaded;
    int64_t last_rebuild_end;   /* monotonic ns; 0: none yet */
    int64_t retry_at;           /* monotonic ns before which a failed load is not retried */
    unsigned backoff;           /* seconds, for the next failure */
    uint64_t feed_epoch;        /* bumped by each new LISTEN and each long ID */
    uint64_t covered_epoch;     /* the epoch the live filter's COPY (or catch-up) started in */
    /*
     * The change-feed position of the live filter (docs/feed.md): every row
     * committed by a transaction whose xid is below it is in the filter.
     * "" = none: the next load copies the table.  Written by the rebuild
     * thread under mu.
     */
    char feed_pos[FEED_POS_MAX];
    int64_t next_snapshot;      /* monotonic ns of the next periodic snapshot; 0: none due */
    int64_t degraded_ns;        /* time spent degraded, counted up to accounted */
    int64_t accounted;
    struct source_status status;    /* the table's part; the connection's is in source */
};

struct source {
    const struct config *cfg;
    const struct log *lg;
    struct source_hooks hooks;
    struct table *t;
    unsigned n;

    atomic_bool stop;
    pthread_t rebuilder, follower;
    bool rebuilder_started, follower_started;

    int64_t max_stale_ns;       /* 0: never degraded */

    pthread_mutex_t mu;
    pthread_cond_t cv;          /* rebuild wanted, stop, or follower state change */
    /* Everything below is guarded by mu. */
    enum source_state state;
    time_t state_since;
    bool listening;
    char conn_error[128];       /* the follower's last failure (public part) */
    char server_id[256];        /* the follower's server (see loader_server_id) */
    const char *token;          /* admin token for a bootstrap peer, NULL: none */
    int64_t next_prune;         /* rebuild thread only: monotonic ns of the next feed prune */
    unsigned rng;               /* jitter for backoffs */
    unsigned next_pick;         /* where the rebuilder's round robin resumes */
};

/*
 * The horizon's clock: CLOCK_BOOTTIME keeps counting while the machine is
 * suspended (CLOCK_MONOTONIC stops), so a sleep never makes an old horizon
 * look fresh.
 */
static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

int64_t source_horizon(struct source *s, unsigned t)
{
    return atomic_load_explicit(&s->t[t].horizon, memory_order_acquire);
}

bool source_stale(struct source *s, int64_t h)
{
    return s->max_stale_ns != 0 && now_ns() - h > s->max_stale_ns;
}

/* Degraded time in [accounted, now] under horizon h.  Caller holds mu. */
static void account_locked(struct table *t, int64_t h, int64_t now)
{
    int64_t max_stale = t->s->max_stale_ns;
    if (max_stale == 0 || h == 0)
        return;
    int64_t from = h + max_stale;
    if (from < t->accounted)
        from = t->accounted;
    if (now > from)
        t->degraded_ns += now - from;
    t->accounted = now;
}

/*
 * Move the horizon to when if the live filter covers the current feed
 * epoch.  Caller holds mu and has applied every notification that arrived
 * before the round trip that proved when.
 */
static void advance_locked(struct table *t, int64_t when)
{
    if (t->covered_epoch != t->feed_epoch)
        return;
    int64_t h = atomic_load(&t->horizon);
    if (when <= h)
        return;
    account_locked(t, h, now_ns());
    atomic_store_explicit(&t->horizon, when, memory_order_release);
}

/* A start of a new feed epoch: the horizon waits for a rebuild.  Caller holds mu. */
static void new_epoch_locked(struct table *t)
{
    t->feed_epoch++;
}

/* Backoff with +-25% jitter, so that a fleet does not reconnect in step. */
static unsigned jitter_ms(struct source *s, unsigned seconds)
{
    pthread_mutex_lock(&s->mu);
    unsigned r = (unsigned)rand_r(&s->rng);
    pthread_mutex_unlock(&s->mu);
    double f = 0.75 + 0.5 * (double)(r % 1000) / 1000.0;
    return (unsigned)((double)seconds * 1000.0 * f);
}

const char *source_state_name(enum source_state s)
{
    switch (s) {
    case SOURCE_CONNECTING: return "connecting";
    case SOURCE_CONNECTED: return "connected";
    case SOURCE_RECONNECTING: return "reconnecting";
    }
    return "unknown";
}

struct source *source_new(const struct config *cfg, const struct source_table *tables,
                          unsigned n, const struct log *lg,
                          const struct source_hooks *hooks, const char *token)
{
    if (n == 0 || n > CONFIG_MAX_FILTERS)
        return NULL;
    struct source *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->t = calloc(n, sizeof *s->t);
    if (s->t == NULL) {
        free(s);
        return NULL;
    }
    s->n = n;
    s->cfg = cfg;
    s->token = token;
    s->lg = lg;
    if (hooks)
        s->hooks = *hooks;
    atomic_init(&s->stop, false);
    pthread_mutex_init(&s->mu, NULL);
    /* Naps end on a monotonic deadline: a wall-clock step must not stretch them. */
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cv, &ca);
    pthread_condattr_destroy(&ca);
    s->state = SOURCE_CONNECTING;
    s->state_since = time(NULL);
    s->max_stale_ns = (int64_t)(cfg->max_staleness * (double)NS_PER_S);
    s->rng = (unsigned)now_ns() ^ (unsigned)getpid();
    for (unsigned i = 0; i < n; i++) {
        struct table *t = &s->t[i];
        t->s = s;
        t->idx = i;
        t->fc = tables[i].fc;
        t->g = tables[i].g;
        t->pending = tables[i].pending;
        snprintf(t->del_channel, sizeof t->del_channel, "%s_deleted", t->fc->channel);
        t->wanted = 1;                      /* the first load */
        snprintf(t->wanted_reason, sizeof t->wanted_reason, "start");
        t->status.requested_id = 1;
        t->backoff = 1;
        atomic_init(&t->horizon, 0);
        t->feed_epoch = 1;
        t->covered_epoch = 0;
    }
    return s;
}

unsigned source_tables(const struct source *s)
{
    return s->n;
}

void source_free(struct source *s)
{
    if (s == NULL)
        return;
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s->t);
    free(s);
}

/* Caller holds mu. */
static uint64_t request_locked(struct table *t, const char *reason, bool *coalesced)
{
    bool pending = t->wanted > t->started;
    if (!pending) {
        t->wanted = t->started + 1;
        snprintf(t->wanted_reason, sizeof t->wanted_reason, "%s", reason);
        t->status.requested_id = t->wanted;
        pthread_cond_broadcast(&t->s->cv);
    }
    if (coalesced)
        *coalesced = pending;
    return t->wanted;
}

uint64_t source_request_rebuild(struct source *s, unsigned i, const char *reason,
                                bool *coalesced)
{
    struct table *t = &s->t[i];
    pthread_mutex_lock(&s->mu);
    uint64_t id = request_locked(t, reason, coalesced);
    pthread_mutex_unlock(&s->mu);
    log_info(s->lg, "%s: rebuild %llu requested (%s)%s", t->fc->name, (unsigned long long)id,
             reason, coalesced && *coalesced ? ", coalesced with the pending one" : "");
    return id;
}

/* Seconds min_rebuild_interval still holds a wanted rebuild back.  Caller holds mu. */
static double hold_back_locked(const struct table *t, int64_t now)
{
    if (!t->ever_loaded || t->last_rebuild_end == 0)
        return 0;
    int64_t until = t->last_rebuild_end + (int64_t)t->s->cfg->min_rebuild_interval * NS_PER_S;
    return until > now ? (double)(until - now) / (double)NS_PER_S : 0;
}

void source_status(struct source *s, unsigned i, struct source_status *out)
{
    struct table *t = &s->t[i];
    int64_t now = now_ns();
    pthread_mutex_lock(&s->mu);
    int64_t h = atomic_load(&t->horizon);
    account_locked(t, h, now);
    *out = t->status;
    out->state = s->state;
    out->state_since = s->state_since;
    out->listening = s->listening;
    if (out->last_error[0] == '\0')
        snprintf(out->last_error, sizeof out->last_error, "%s", s->conn_error);
    snprintf(out->feed_position, sizeof out->feed_position, "%s", t->feed_pos);
    out->horizon_age = h ? (double)(now - h) / (double)NS_PER_S : -1;
    /* h == 0 after a load: a reconnect overtook the first load's epoch. */
    out->degraded = s->max_stale_ns > 0 && t->ever_loaded && now - h > s->max_stale_ns;
    out->degraded_seconds = (double)t->degraded_ns / (double)NS_PER_S;
    out->next_rebuild_in = t->wanted > t->started ? hold_back_locked(t, now) : 0;
    pthread_mutex_unlock(&s->mu);
}

/*
 * The public part of an error: the text before the first ": ", where
 * loader.c and this file put the detail from libpq (hosts, socket paths,
 * role names), which only the log shows.
 */
static void public_error(char *out, size_t outlen, const char *err)
{
    size_t n = strcspn(err, ":");
    snprintf(out, outlen, "%.*s", (int)n, err);
}

/* The follower's connection state, shared by every table. */
static void set_state(struct source *s, enum source_state st, const char *err)
{
    pthread_mutex_lock(&s->mu);
    if (s->state != st) {
        s->state = st;
        s->state_since = time(NULL);
    }
    if (err)
        public_error(s->conn_error, sizeof s->conn_error, err);
    pthread_mutex_unlock(&s->mu);
}

/* Sleep up to ms, waking early on stop or a broadcast. */
static void nap(struct source *s, unsigned ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&s->mu);
    if (!atomic_load(&s->stop))
        pthread_cond_timedwait(&s->cv, &s->mu, &ts);
    pthread_mutex_unlock(&s->mu);
}

static unsigned next_backoff(const struct source *s, unsigned cur)
{
    unsigned cap = s->cfg->retry_max_seconds;
    return cur * 2 > cap ? cap : cur * 2;
}

/* ---- the follower ---------------------------------------------------- */

static bool listen_on(PGconn *conn, const char *channel, char *err, size_t errlen)
{
    char *q = PQescapeIdentifier(conn, channel, strlen(channel));
    char sql[160];
    if (q == NULL) {
        snprintf(err, errlen, "cannot quote channel name: %s", PQerrorMessage(conn));
        return false;
    }
    snprintf(sql, sizeof sql, "LISTEN %s", q);
    PQfreemem(q);
    PGresult *r = PQexec(conn, sql);
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok)
        snprintf(err, errlen, "%s failed: %s", sql, PQerrorMessage(conn));
    PQclear(r);
    return ok;
}

/* The table whose channel (or <channel>_deleted, *deleted) a notification came on. */
static struct table *table_of(struct source *s, const char *relname, bool *deleted)
{
    for (unsigned i = 0; i < s->n; i++) {
        if (strcmp(relname, s->t[i].fc->channel) == 0) {
            *deleted = false;
            return &s->t[i];
        }
        if (strcmp(relname, s->t[i].del_channel) == 0) {
            *deleted = true;
            return &s->t[i];
        }
    }
    return NULL;
}

/* What one batch of notifications did to one table. */
struct notified {
    uint64_t added, deleted, long_ids;
};

static void apply_notifies(struct source *s, PGconn *conn, struct notified *per)
{
    PGnotify *n;
    bool any = false;
    memset(per, 0, s->n * sizeof *per);
    while ((n = PQnotifies(conn)) != NULL) {
        bool deleted = false;
        struct table *t = table_of(s, n->relname, &deleted);
        if (t == NULL) {
            /* LISTEN only names our channels; nothing else can arrive. */
        } else if (deleted) {
            per[t->idx].deleted++;
            any = true;
        } else if (n->extra != NULL && n->extra[0] != '\0') {
            /*
             * Added to the filter only: the journal keeps POSTed IDs until
             * a COPY shows them, since any role may send a notification.
             */
            guard_add(t->g, n->extra, strlen(n->extra));
            per[t->idx].added++;
            any = true;
        } else {
            per[t->idx].long_ids++;     /* sql/notify.sql's marker for an ID too long to notify */
            any = true;
        }
        PQfreemem(n);
    }
    if (!any)
        return;
    /* Only an ID that a request may carry can be a false negative. */
    bool long_matters = s->cfg->max_id_bytes >= NOTIFY_MIN_LONG_UTF8;
    pthread_mutex_lock(&s->mu);
    for (unsigned i = 0; i < s->n; i++) {
        struct table *t = &s->t[i];
        struct notified *p = &per[i];
        if (p->added == 0 && p->deleted == 0 && p->long_ids == 0)
            continue;
        t->status.notifications += p->added;
        t->status.deletes += p->deleted;
        t->status.long_ids += p->long_ids;
        uint64_t limit = t->fc->rebuild_after_deletes;
        if (limit > 0 && p->deleted > 0 && t->status.deletes >= limit) {
            t->status.deletes = 0;
            request_locked(t, "deletes", NULL);
            log_info(s->lg, "%s: %llu deletes since the last rebuild: rebuilding", t->fc->name,
                     (unsigned long long)limit);
        }
        if (p->long_ids > 0 && long_matters) {
            new_epoch_locked(t);
            request_locked(t, "long id", NULL);
            log_warn(s->lg, "%s: a row's id was too long for a notification: degraded until a "
                     "rebuild copies it", t->fc->name);
        }
    }
    pthread_mutex_unlock(&s->mu);
}

/*
 * The probe proves freshness only on the session that LISTENs.  Through a
 * connection pooler (PgBouncer in transaction mode) the LISTEN and the
 * probes may run on different server sessions and notifications are
 * dropped, so the follower insists on a direct connection: the backend pid
 * the server reports must be the one libpq got at connect (a pooler sends
 * its own), and each probe checks that it still runs on that session and
 * that the session still listens on every table's channel.  Returns the
 * probe's SQL (free it) or NULL with the reason in err.
 */
static char *direct_session(struct source *s, PGconn *conn, char *err, size_t errlen)
{
    PGresult *r = PQexec(conn, "SELECT pg_backend_pid()");
    bool ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
    long pid = ok ? strtol(PQgetvalue(r, 0, 0), NULL, 10) : 0;
    PQclear(r);
    if (!ok) {
        snprintf(err, errlen, "cannot read the backend pid: %s", PQerrorMessage(conn));
        return NULL;
    }
    if (pid != PQbackendPID(conn)) {
        snprintf(err, errlen, "the follower's connection goes through a connection pooler "
                 "(backend pid %ld, connection says %d): LISTEN needs a direct connection to "
                 "PostgreSQL", pid, PQbackendPID(conn));
        return NULL;
    }
    /* Channels are identifiers of at most 55 bytes: quoted, each fits in 64. */
    size_t cap = 160 + (size_t)s->n * 64;
    char *probe = malloc(cap);
    if (probe == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    size_t len = (size_t)snprintf(probe, cap, "SELECT pg_backend_pid() = %ld AND ARRAY[", pid);
    for (unsigned i = 0; i < s->n; i++) {
        const char *ch = s->t[i].fc->channel;
        char *lit = PQescapeLiteral(conn, ch, strlen(ch));
        if (lit == NULL) {
            snprintf(err, errlen, "cannot quote the channel: %s", PQerrorMessage(conn));
            free(probe);
            return NULL;
        }
        len += (size_t)snprintf(probe + len, cap - len, "%s%s", i ? ", " : "", lit);
        PQfreemem(lit);
    }
    snprintf(probe + len, cap - len, "]::text[] <@ ARRAY(SELECT pg_listening_channels())");
    return probe;
}

/*
 * Follow one connection until it fails or stop: apply notifications and
 * probe every probe_interval.  Returns with the reason in err.
 */
static void follow(struct source *s, PGconn *conn, const char *probe, struct notified *per,
                   char *err, size_t errlen)
{
    int64_t interval = (int64_t)(s->cfg->probe_interval * (double)NS_PER_S);
    int64_t sent = 0, next_probe = now_ns();
    bool in_flight = false;

    while (!atomic_load(&s->stop)) {
        int64_t now = now_ns();
        if (!in_flight && now >= next_probe) {
            sent = now;             /* before the query leaves: H may move only this far */
            if (!PQsendQuery(conn, probe)) {
                snprintf(err, errlen, "probe failed: %s", PQerrorMessage(conn));
                return;
            }
            in_flight = true;
            next_probe = sent + interval;
        }
        if (in_flight && now - sent > PROBE_DEAD_NS) {
            snprintf(err, errlen, "connection lost: no answer to a probe in %lld s",
                     (long long)(PROBE_DEAD_NS / NS_PER_S));
            return;
        }
        int64_t wait = in_flight ? 100 * 1000000 : next_probe - now;
        if (wait > TICK_MS * 1000000LL)
            wait = TICK_MS * 1000000LL;
        struct pollfd pfd = { .fd = PQsocket(conn), .events = POLLIN };
        if (PQflush(conn) == 1)
            pfd.events |= POLLOUT;
        int pr = poll(&pfd, 1, (int)(wait / 1000000) + 1);
        if (pr < 0 && errno != EINTR) {
            snprintf(err, errlen, "connection lost: poll: %s", strerror(errno));
            return;
        }
        if (pr > 0 && !PQconsumeInput(conn)) {
            snprintf(err, errlen, "connection lost: %s", PQerrorMessage(conn));
            return;
        }
        apply_notifies(s, conn, per);
        if (in_flight && !PQisBusy(conn)) {
            bool ok = true, same = true;
            PGresult *r;
            while ((r = PQgetResult(conn)) != NULL) {
                ok = ok && PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
                same = ok && strcmp(PQgetvalue(r, 0, 0), "t") == 0;
                PQclear(r);
            }
            if (!ok) {
                snprintf(err, errlen, "probe failed: %s", PQerrorMessage(conn));
                return;
            }
            if (!same) {
                snprintf(err, errlen, "the probe ran on a session that does not listen "
                         "(a connection pooler?)");
                return;
            }
            in_flight = false;
            /* Everything that came before the answer is applied: H may move to sent. */
            apply_notifies(s, conn, per);
            pthread_mutex_lock(&s->mu);
            for (unsigned i = 0; i < s->n; i++)
                advance_locked(&s->t[i], sent);
            pthread_mutex_unlock(&s->mu);
        }
        if (PQstatus(conn) != CONNECTION_OK) {
            snprintf(err, errlen, "connection lost: %s", PQerrorMessage(conn));
            return;
        }
    }
}

/* LISTEN on every table's two channels. */
static bool listen_all(struct source *s, PGconn *conn, char *err, size_t errlen)
{
    for (unsigned i = 0; i < s->n; i++)
        if (!listen_on(conn, s->t[i].fc->channel, err, errlen)
            || !listen_on(conn, s->t[i].del_channel, err, errlen))
            return false;
    return true;
}

static void *follower_main(void *arg)
{
    struct source *s = arg;
    char err[512], sid[256];
    unsigned backoff = 1;
    bool had_connection = false;
    struct notified *per = calloc(s->n, sizeof *per);

    if (per == NULL) {
        set_state(s, SOURCE_CONNECTING, "out of memory");
        log_error(s->lg, "follower: out of memory");
        return NULL;
    }
    while (!atomic_load(&s->stop)) {
        char *probe = NULL;
        PGconn *conn = loader_connect(s->cfg, err, sizeof err);
        if (conn == NULL || !listen_all(s, conn, err, sizeof err)
            || (probe = direct_session(s, conn, err, sizeof err)) == NULL
            || !loader_server_id(conn, sid, sizeof sid, err, sizeof err)) {
            PQfinish(conn);
            free(probe);
            set_state(s, had_connection ? SOURCE_RECONNECTING : SOURCE_CONNECTING, err);
            log_warn(s->lg, "follower: %s; retrying in %u s", err, backoff);
            nap(s, jitter_ms(s, backoff));
            backoff = next_backoff(s, backoff);
            continue;
        }
        backoff = 1;
        pthread_mutex_lock(&s->mu);
        s->listening = true;
        if (s->state != SOURCE_CONNECTED) {
            s->state = SOURCE_CONNECTED;
            s->state_since = time(NULL);
        }
        s->conn_error[0] = '\0';
        snprintf(s->server_id, sizeof s->server_id, "%s", sid);
        for (unsigned i = 0; i < s->n; i++) {
            /* Notifications sent while we were away are lost: only a new COPY covers them. */
            new_epoch_locked(&s->t[i]);
            if (had_connection)
                request_locked(&s->t[i], "reconnect", NULL);
        }
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        if (s->n == 1)
            log_info(s->lg, "follower: listening on channel \"%s\"", s->t[0].fc->channel);
        else
            log_info(s->lg, "follower: listening on the channels of %u tables", s->n);
        had_connection = true;

        follow(s, conn, probe, per, err, sizeof err);
        PQfinish(conn);
        free(probe);
        if (atomic_load(&s->stop))
            break;
        for (size_t i = strlen(err); i > 0 && err[i - 1] == '\n'; i--)
            err[i - 1] = '\0';
        pthread_mutex_lock(&s->mu);
        s->listening = false;
        s->server_id[0] = '\0';
        pthread_mutex_unlock(&s->mu);
        set_state(s, SOURCE_RECONNECTING, err);
        log_warn(s->lg, "follower: %s; reconnecting", err);
    }
    free(per);
    return NULL;
}

/* ---- the rebuilder --------------------------------------------------- */

struct progress_ctx {
    struct table *t;
    bool first;
};

static void on_progress(void *arg, uint64_t rows)
{
    struct progress_ctx *p = arg;
    struct source *s = p->t->s;
    pthread_mutex_lock(&s->mu);
    p->t->status.running_rows = rows;
    pthread_mutex_unlock(&s->mu);
    if (s->hooks.progress)
        s->hooks.progress(s->hooks.arg, p->t->idx, rows, p->first);
}

/* Items to size the next filter for: the table, or what we already hold. */
static uint64_t plan_items(struct table *t, uint64_t table_rows)
{
    const struct filter_config *fc = t->fc;
    if (fc->expected_items > 0)
        return fc->expected_items;
    uint64_t base = table_rows;
    struct filter_info fi;
    pthread_mutex_lock(&t->s->mu);
    if (t->status.last_rows > base)
        base = t->status.last_rows;
    pthread_mutex_unlock(&t->s->mu);
    /* Statistics may be stale; never size below what the live filter took in. */
    if (guard_info(t->g, &fi) && fi.items > base)
        base = fi.items;
    double want = ceil((double)base * fc->headroom);
    if (want < MIN_CAPACITY)
        want = MIN_CAPACITY;
    if (want > (double)FILTER_MAX_ITEMS)
        want = (double)FILTER_MAX_ITEMS;
    return (uint64_t)want;
}

/*
 * The COPY must read the server the follower listens to: with a multi-host
 * conninfo the two connections could land on different servers (one a
 * lagging standby), and LISTEN-before-COPY would prove nothing.  Checked in
 * the same locked section that reads the feed epoch, so a follower that
 * moves to another server afterwards starts a new epoch the COPY does not
 * cover.  Caller holds mu.
 */
static bool same_server_locked(struct source *s, const char *mine, char *err, size_t errlen)
{
    if (s->server_id[0] != '\0' && strcmp(mine, s->server_id) == 0)
        return true;
    snprintf(err, errlen, "the COPY connection reached another server than the follower: "
             "[%.150s] against [%.150s]; set a single host in conninfo",
             mine, s->server_id[0] ? s->server_id : "none");
    return false;
}

/*
 * Whether the change feed serves this table (then its position goes into
 * pos); says so in the log when that changes.  On the full load's
 * connection, before its COPY.
 */
static bool feed_check(struct table *t, PGconn *conn, char *pos)
{
    struct source *s = t->s;
    char why[512] = "";
    bool avail = false;
    if (!feed_available(conn, t->fc->table, t->fc->column, &avail, why, sizeof why))
        avail = false;
    else if (avail && !feed_position(conn, pos, why, sizeof why))
        avail = false;
    pthread_mutex_lock(&s->mu);
    bool was = t->status.feed_available, first = t->status.copies == 0;
    t->status.feed_available = avail;
    pthread_mutex_unlock(&s->mu);
    if (avail && (!was || first))
        log_info(s->lg, "%s: the change feed serves %s.%s: restarts and reconnects read only what "
                 "changed", t->fc->name, t->fc->table, t->fc->column);
    else if (!avail && (was || first))
        log_info(s->lg, "%s: no change feed (%s): restarts and reconnects copy the table",
                 t->fc->name, why);
    return avail;
}

/* Each ID the feed returns goes into the live filter (adding one twice is harmless). */
static bool on_feed_id(void *arg, const char *id, size_t len)
{
    struct table *t = arg;
    guard_add(t->g, id, len);
    return !atomic_load(&t->s->stop);
}

/*
 * Bring the live filter up to date from the change feed instead of copying
 * the table: every row committed since its position.  Like a COPY it runs
 * only while the follower listens (on the same server), so every row
 * committed after the read's snapshot is notified, and the horizon moves to
 * the read's start.  1: done; 0: failed (err); -1: the feed cannot resume
 * from the position (logged, counted, the position dropped): copy the
 * table instead.
 */
static int run_catchup(struct table *t, uint64_t *rows_out, double *secs_out, char *err,
                       size_t errlen)
{
    struct source *s = t->s;
    const struct filter_config *fc = t->fc;
    char since[FEED_POS_MAX], next[FEED_POS_MAX], server[256] = "";
    uint64_t rows = 0;
    bool too_old = false;
    int ret = 0;

    PGconn *conn = loader_connect(s->cfg, err, errlen);
    if (conn == NULL)
        return 0;
    if (s->cfg->sync_enabled && !loader_server_id(conn, server, sizeof server, err, errlen))
        goto out;
    pthread_mutex_lock(&s->mu);
    bool listening = !s->cfg->sync_enabled || s->listening;
    uint64_t epoch = t->feed_epoch;
    bool same = !s->cfg->sync_enabled || same_server_locked(s, server, err, errlen);
    snprintf(since, sizeof since, "%s", t->feed_pos);
    pthread_mutex_unlock(&s->mu);
    if (!listening) {
        snprintf(err, errlen, "the follower is not listening: no catch-up without LISTEN");
        goto out;
    }
    if (!same)
        goto out;
    int64_t start = now_ns();       /* before the read's snapshot: H may move this far */
    if (!feed_read(conn, fc->table, fc->column, since, on_feed_id, t, next, &rows, &too_old,
                   err, errlen))
        goto out;
    if (too_old) {
        log_warn(s->lg, "%s: the change feed cannot resume from the filter's position (%s): "
                 "copying the table", fc->name, err);
        pthread_mutex_lock(&s->mu);
        t->status.too_old++;
        t->feed_pos[0] = '\0';
        pthread_mutex_unlock(&s->mu);
        ret = -1;
        goto out;
    }
    pthread_mutex_lock(&s->mu);
    snprintf(t->feed_pos, sizeof t->feed_pos, "%s", next);
    t->covered_epoch = epoch;
    advance_locked(t, start);
    t->status.feed_available = true;
    t->status.catchups++;
    t->status.feed_rows_read += rows;
    t->status.last_feed_rows = rows;
    pthread_mutex_unlock(&s->mu);
    *rows_out = rows;
    *secs_out = (double)(now_ns() - start) / (double)NS_PER_S;
    ret = 1;
out:
    PQfinish(conn);
    return ret;
}

static bool run_load(struct table *t, uint64_t id, const char *reason, bool first,
                     uint64_t *rows_out, double *secs_out)
{
    struct source *s = t->s;
    const struct filter_config *fc = t->fc;
    char err[512];
    PGconn *conn = NULL;
    struct filter *f = NULL;
    uint64_t rows = 0;
    bool began = false, ok = false;

    conn = loader_connect(s->cfg, err, sizeof err);
    if (conn == NULL)
        goto out;
    if (!loader_estimate_rows(conn, fc, &rows, err, sizeof err))
        goto out;
    bool has_trigger = true;
    if (first && s->cfg->sync_enabled && loader_has_trigger(conn, fc, &has_trigger, err, sizeof err)
        && !has_trigger)
        log_warn(s->lg, "%s: table %s has no trigger: rows inserted from now on are only seen by "
                 "the next rebuild; install sql/notify.sql and run "
                 "SELECT bloomguard_watch('%s', '%s', '%s')", fc->name, fc->table, fc->table,
                 fc->column, fc->channel);
    char server[256] = "";
    if (s->cfg->sync_enabled && !loader_server_id(conn, server, sizeof server, err, sizeof err))
        goto out;
    /* Before the COPY's snapshot: a position taken earlier is only more cautious. */
    char pos[FEED_POS_MAX] = "";
    bool feed = s->cfg->feed_enabled && feed_check(t, conn, pos);
    uint64_t items = plan_items(t, rows);
    enum filter_error fe;
    f = filter_new_growing(items, fc->false_positive_rate, &(struct filter_growth){
        fc->growth, FILTER_DEFAULT_TIGHTENING, fc->max_layers }, &fe);
    if (f == NULL) {
        snprintf(err, sizeof err, "cannot create a filter for %llu items: %s",
                 (unsigned long long)items, filter_strerror(fe));
        goto out;
    }
    struct filter_info fi;
    filter_info(f, &fi);
    log_info(s->lg, "%s: rebuild %llu (%s): loading %s.%s, about %llu rows, filter for %llu "
             "items (%.1f KiB, k=%u)", fc->name, (unsigned long long)id, reason, fc->table,
             fc->column, (unsigned long long)rows, (unsigned long long)items,
             (double)fi.memory_bytes / 1024.0, fi.probes);
    /*
     * From here every insert also reaches f (through the backlog while the
     * copy is f's only writer); then the snapshot is taken.
     */
    guard_begin_bulk(t->g, f);
    began = true;
    /*
     * The COPY's snapshot holds every row committed before copy_start, and
     * the follower of copy_epoch hears of every later one, if that epoch
     * still holds when the copy has started.
     */
    pthread_mutex_lock(&s->mu);
    bool listening = !s->cfg->sync_enabled || s->listening;
    uint64_t copy_epoch = t->feed_epoch;
    bool same = !s->cfg->sync_enabled || same_server_locked(s, server, err, sizeof err);
    pthread_mutex_unlock(&s->mu);
    if (!listening) {
        snprintf(err, sizeof err, "the follower is not listening: no COPY without LISTEN");
        goto out;
    }
    if (!same)
        goto out;
    int64_t copy_start = now_ns();
    struct progress_ctx pc = { t, first };
    struct load_result res;
    if (!loader_copy(conn, fc, f, t->pending, &s->stop, on_progress, &pc, &res, err, sizeof err))
        goto out;
    if (!guard_end_bulk(t->g)) {
        snprintf(err, sizeof err, "out of memory for the inserts made during the load");
        goto out;
    }
    /* POSTed ids the table does not hold (yet) must survive the swap, until they expire. */
    pending_expire(t->pending, pending_clock());
    pending_replay(t->pending, f);
    guard_commit(t->g);
    began = false;
    f = NULL;
    pthread_mutex_lock(&s->mu);
    t->covered_epoch = copy_epoch;
    advance_locked(t, copy_start);
    snprintf(t->feed_pos, sizeof t->feed_pos, "%s", feed ? pos : "");
    t->status.copies++;
    pthread_mutex_unlock(&s->mu);
    *rows_out = res.rows;
    *secs_out = res.seconds;
    ok = true;
out:
    if (began)
        guard_abort(t->g);              /* frees f */
    else
        filter_free(f);
    PQfinish(conn);
    if (!ok) {
        pthread_mutex_lock(&s->mu);
        public_error(t->status.last_error, sizeof t->status.last_error, err);
        pthread_mutex_unlock(&s->mu);
        log_error(s->lg, "%s: rebuild %llu (%s) failed: %s", fc->name, (unsigned long long)id,
                  reason, err);
    }
    return ok;
}

/* Whether a timer or growth wants a rebuild of t now; caller holds mu. */
static void check_triggers_locked(struct table *t)
{
    time_t now = time(NULL);
    const struct filter_config *fc = t->fc;
    if (t->wanted > t->started || !t->ever_loaded)
        return;
    if (fc->rebuild_interval > 0 && t->status.last_finished > 0
        && now - t->status.last_finished >= (time_t)fc->rebuild_interval) {
        request_locked(t, "interval", NULL);
        return;
    }
    struct filter_info fi;
    if (fc->auto_grow && fc->expected_items == 0 && guard_info(t->g, &fi)
        && fi.estimated_fpp > fi.target_fpp) {
        request_locked(t, "growth", NULL);
    }
}

/*
 * Whether the wanted rebuild of t can be a catch-up from the change feed
 * rather than a COPY: after a start from a snapshot, a reconnect, or an ID
 * too long to notify (the feed keeps it whole).  Every other reason (api,
 * SIGHUP, interval, growth, deletes) wants a new filter from the table.
 * Caller holds mu.
 */
static bool catch_up_locked(const struct table *t)
{
    static const char *const reasons[] = { "start", "reconnect", "long id" };
    if (!t->s->cfg->feed_enabled || !t->ever_loaded || t->feed_pos[0] == '\0')
        return false;
    for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++)
        if (strcmp(t->wanted_reason, reasons[i]) == 0)
            return true;
    return false;
}

/*
 * The next table whose rebuild may start now, round robin so that one
 * table's rebuilds cannot starve another's; NULL if none.  *wait_ms gets
 * how long until the earliest one held back may go.  Caller holds mu.
 */
static struct table *pick_locked(struct source *s, unsigned *wait_ms)
{
    int64_t now = now_ns();
    *wait_ms = TICK_MS;
    /* No COPY without LISTEN: rows committed meanwhile would be missed. */
    if (s->cfg->sync_enabled && !s->listening)
        return NULL;
    for (unsigned k = 0; k < s->n; k++) {
        struct table *t = &s->t[(s->next_pick + k) % s->n];
        check_triggers_locked(t);
        if (t->wanted <= t->started)
            continue;
        /*
         * Nothing (a /reload loop, forged delete notifications) may copy a
         * table back to back; a catch-up reads only what changed.
         */
        int64_t until = t->retry_at;
        double hold = catch_up_locked(t) ? 0 : hold_back_locked(t, now);
        if (hold > 0 && now + (int64_t)(hold * (double)NS_PER_S) > until)
            until = now + (int64_t)(hold * (double)NS_PER_S);
        if (until > now) {
            int64_t ms = (until - now) / 1000000 + 1;
            if (ms < *wait_ms)
                *wait_ms = (unsigned)ms;
            continue;
        }
        s->next_pick = (t->idx + 1) % s->n;
        return t;
    }
    return NULL;
}

/* Whether snapshots are on ([snapshot] path). */
static bool snapshots_on(const struct source *s)
{
    char path[PERSIST_PATH_MAX];
    return persist_file(s->cfg, s->t[0].fc, path, sizeof path);
}

/* The horizon as wall-clock milliseconds, for a snapshot's header; 0: none. */
static uint64_t horizon_wall_ms(const struct table *t)
{
    int64_t h = atomic_load(&t->horizon);
    if (h == 0)
        return 0;
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    int64_t ms = (int64_t)wall.tv_sec * 1000 + wall.tv_nsec / 1000000 - (now_ns() - h) / 1000000;
    return ms > 0 ? (uint64_t)ms : 0;
}

/* Write t's snapshot, if snapshots are on and t has a filter.  Rebuild thread. */
static void save_table(struct table *t)
{
    struct source *s = t->s;
    char pos[FEED_POS_MAX];
    if (!snapshots_on(s))
        return;
    pthread_mutex_lock(&s->mu);
    snprintf(pos, sizeof pos, "%s", t->feed_pos);
    bool loaded = t->ever_loaded;
    unsigned every = s->cfg->snapshot_interval;
    t->next_snapshot = every ? now_ns() + (int64_t)every * NS_PER_S : 0;
    pthread_mutex_unlock(&s->mu);
    if (!loaded)
        return;
    /* The position first: every change after it is in the filter or read again on resume. */
    int e = persist_save(s->cfg, t->fc, t->g, t->pending, pos, horizon_wall_ms(t), s->lg);
    pthread_mutex_lock(&s->mu);
    if (e == 0) {
        t->status.snapshot_writes++;
        t->status.snapshot_written = time(NULL);
    } else {
        t->status.snapshot_failures++;
    }
    pthread_mutex_unlock(&s->mu);
}

/* At start: each table's snapshot (file or peer) goes live before any load. */
static void restore_all(struct source *s)
{
    for (unsigned i = 0; i < s->n && !atomic_load(&s->stop); i++) {
        struct table *t = &s->t[i];
        struct persist_restored r;
        if (!persist_restore(s->cfg, t->fc, s->token, t->g, t->pending, s->lg, &r))
            continue;
        const char *from = r.from == PERSIST_PEER ? "peer" : "file";
        pthread_mutex_lock(&s->mu);
        /* The horizon stays 0 (degraded) until the first catch-up or COPY. */
        t->ever_loaded = true;
        snprintf(t->feed_pos, sizeof t->feed_pos, "%s", s->cfg->feed_enabled ? r.position : "");
        t->status.attempted = true;
        t->status.last_rows = r.items;
        t->status.last_seconds = r.seconds;
        t->status.last_finished = time(NULL);
        snprintf(t->status.last_reason, sizeof t->status.last_reason, "start");
        snprintf(t->status.last_kind, sizeof t->status.last_kind, "%s",
                 r.from == PERSIST_PEER ? "peer" : "snapshot");
        snprintf(t->status.restored_from, sizeof t->status.restored_from, "%s", from);
        pthread_mutex_unlock(&s->mu);
        if (s->hooks.done)
            s->hooks.done(s->hooks.arg, t->idx, 0, true, true, r.items, r.seconds);
    }
}

/*
 * A table whose periodic snapshot is due, NULL if none; *wait_ms shrinks to
 * the next one due.  Caller holds mu.
 */
static struct table *snapshot_due_locked(struct source *s, unsigned *wait_ms)
{
    int64_t now = now_ns();
    for (unsigned i = 0; i < s->n; i++) {
        struct table *t = &s->t[i];
        if (t->next_snapshot == 0 || !t->ever_loaded)
            continue;
        if (t->next_snapshot <= now)
            return t;
        int64_t ms = (t->next_snapshot - now) / 1000000 + 1;
        if (ms < *wait_ms)
            *wait_ms = (unsigned)ms;
    }
    return NULL;
}

/*
 * The periodic snapshot: first move the position up with a catch-up, so a
 * restart reads only what changed since this snapshot; a catch-up that
 * fails leaves the older position, still exact.
 */
static void periodic_snapshot(struct table *t)
{
    struct source *s = t->s;
    char err[512];
    uint64_t rows = 0;
    double secs = 0;
    pthread_mutex_lock(&s->mu);
    bool feed = s->cfg->feed_enabled && t->feed_pos[0] != '\0';
    pthread_mutex_unlock(&s->mu);
    int r = feed ? run_catchup(t, &rows, &secs, err, sizeof err) : 1;
    if (r == 0)
        log_warn(s->lg, "%s: catch-up before the snapshot failed: %s", t->fc->name, err);
    if (r == -1) {
        pthread_mutex_lock(&s->mu);
        request_locked(t, "feed", NULL);
        pthread_mutex_unlock(&s->mu);
    }
    save_table(t);
}

/* Every prune_interval, forget the feed's log older than the retention (docs/feed.md). */
static void maybe_prune(struct source *s, unsigned *wait_ms)
{
    const struct config *c = s->cfg;
    int64_t now = now_ns();
    if (!c->feed_enabled || c->feed_prune_interval == 0)
        return;
    if (now < s->next_prune) {
        int64_t ms = (s->next_prune - now) / 1000000 + 1;
        if (ms < *wait_ms)
            *wait_ms = (unsigned)ms;
        return;
    }
    s->next_prune = now + (int64_t)jitter_ms(s, c->feed_prune_interval) * 1000000;
    pthread_mutex_lock(&s->mu);
    bool any = false;
    for (unsigned i = 0; i < s->n; i++)
        any = any || s->t[i].status.feed_available;
    pthread_mutex_unlock(&s->mu);
    if (!any)
        return;
    char err[512];
    uint64_t deleted = 0;
    PGconn *conn = loader_connect(c, err, sizeof err);
    if (conn != NULL && feed_prune(conn, (double)c->feed_retention, &deleted, err, sizeof err))
        log_debug(s->lg, "change feed: pruned %llu log rows older than %u s",
                  (unsigned long long)deleted, c->feed_retention);
    else
        log_warn(s->lg, "change feed: prune failed: %s", err);
    PQfinish(conn);
}

/*
 * One wanted rebuild of t: a catch-up from the feed when it can serve, else
 * a COPY.  *kind says which ran.
 */
static bool run_job(struct table *t, uint64_t id, const char *reason, bool first, bool catchup,
                    uint64_t *rows, double *secs, const char **kind)
{
    struct source *s = t->s;
    char err[512];
    if (catchup) {
        *kind = "catchup";
        int r = run_catchup(t, rows, secs, err, sizeof err);
        if (r == 1)
            return true;
        if (r == 0) {
            pthread_mutex_lock(&s->mu);
            public_error(t->status.last_error, sizeof t->status.last_error, err);
            pthread_mutex_unlock(&s->mu);
            log_error(s->lg, "%s: catch-up %llu (%s) failed: %s", t->fc->name,
                      (unsigned long long)id, reason, err);
            return false;
        }
    }
    *kind = "copy";
    return run_load(t, id, reason, first, rows, secs);
}

static void *rebuilder_main(void *arg)
{
    struct source *s = arg;

    restore_all(s);
    while (!atomic_load(&s->stop)) {
        unsigned wait_ms;
        pthread_mutex_lock(&s->mu);
        struct table *t = pick_locked(s, &wait_ms);
        if (t == NULL) {
            struct table *due = snapshot_due_locked(s, &wait_ms);
            pthread_mutex_unlock(&s->mu);
            if (due != NULL) {
                periodic_snapshot(due);
                continue;
            }
            maybe_prune(s, &wait_ms);
            nap(s, wait_ms);
            continue;
        }
        uint64_t id = t->started = t->wanted;
        bool first = !t->ever_loaded;
        bool catchup = catch_up_locked(t);
        char reason[32];
        snprintf(reason, sizeof reason, "%s", t->wanted_reason);
        t->status.running = true;
        t->status.running_id = id;
        t->status.running_rows = 0;
        t->status.running_since = time(NULL);
        snprintf(t->status.running_reason, sizeof t->status.running_reason, "%s", reason);
        pthread_mutex_unlock(&s->mu);

        uint64_t rows = 0;
        double secs = 0;
        const char *kind = "copy";
        bool ok = run_job(t, id, reason, first, catchup, &rows, &secs, &kind);

        /* backoff and retry_at are only ever written by this thread. */
        unsigned backoff = t->backoff;
        unsigned retry_ms = ok ? 0 : jitter_ms(s, backoff);
        pthread_mutex_lock(&s->mu);
        t->status.running = false;
        t->status.attempted = true;
        t->last_rebuild_end = now_ns();
        if (ok) {
            t->ever_loaded = true;
            t->backoff = 1;
            t->retry_at = 0;
            t->status.completed_id = id;
            t->status.rebuilds_ok++;
            t->status.rebuild_seconds_sum += secs;
            t->status.last_rows = rows;
            t->status.last_seconds = secs;
            t->status.last_finished = time(NULL);
            t->status.last_error[0] = '\0';
            t->status.deletes = 0;
            snprintf(t->status.last_reason, sizeof t->status.last_reason, "%s", reason);
            snprintf(t->status.last_kind, sizeof t->status.last_kind, "%s", kind);
            if (!s->cfg->sync_enabled && s->state != SOURCE_CONNECTED) {
                s->state = SOURCE_CONNECTED;
                s->state_since = time(NULL);
            }
        } else {
            t->status.rebuilds_failed++;
            /* The request is still wanted: make it pending again, after a backoff of its own. */
            t->started = id - 1;
            t->retry_at = now_ns() + (int64_t)retry_ms * 1000000;
            t->backoff = next_backoff(s, t->backoff);
            if (!s->cfg->sync_enabled) {
                bool any = false;
                for (unsigned i = 0; i < s->n; i++)
                    any = any || s->t[i].ever_loaded;
                enum source_state st = any ? SOURCE_RECONNECTING : SOURCE_CONNECTING;
                if (s->state != st) {
                    s->state = st;
                    s->state_since = time(NULL);
                }
            }
        }
        pthread_mutex_unlock(&s->mu);

        if (s->hooks.done)
            s->hooks.done(s->hooks.arg, t->idx, id, ok, ok && first, rows, secs);
        if (ok)
            log_info(s->lg, "%s: %s %llu (%s) done: %llu rows in %.3f s", t->fc->name,
                     strcmp(kind, "copy") == 0 ? "rebuild" : "catch-up", (unsigned long long)id,
                     reason, (unsigned long long)rows, secs);
        else if (!atomic_load(&s->stop))
            log_info(s->lg, "%s: retrying the load in about %u s", t->fc->name, backoff);
        if (ok)
            save_table(t);
    }
    /* A clean stop leaves each table's newest state on disk for the next start. */
    for (unsigned i = 0; i < s->n; i++)
        save_table(&s->t[i]);
    return NULL;
}

bool source_start(struct source *s)
{
    if (pthread_create(&s->rebuilder, NULL, rebuilder_main, s) != 0)
        return false;
    s->rebuilder_started = true;
    if (s->cfg->sync_enabled) {
        if (pthread_create(&s->follower, NULL, follower_main, s) != 0)
            return false;
        s->follower_started = true;
    }
    return true;
}

void source_stop(struct source *s)
{
    atomic_store(&s->stop, true);
    pthread_mutex_lock(&s->mu);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (s->rebuilder_started)
        pthread_join(s->rebuilder, NULL);
    if (s->follower_started)
        pthread_join(s->follower, NULL);
    s->rebuilder_started = s->follower_started = false;
}
