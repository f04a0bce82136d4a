/*
 * Two threads keep the filter true to the table.  The follower holds a
 * LISTEN connection and adds every notified ID to the guard; the rebuilder
 * builds a fresh filter with COPY whenever one is wanted and swaps it in.
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
 * were lost while away) or a row whose ID did not fit in a notification
 * starts a new feed epoch, and H stays put until a rebuild whose COPY
 * started in that epoch is live.  When now - H exceeds max_staleness the
 * guard is degraded and "absent" answers become "maybe".
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

#include "loader.h"

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

struct source {
    const struct config *cfg;
    struct guard *g;
    struct pending *pending;
    struct stats *st;
    const struct log *lg;
    struct source_hooks hooks;

    atomic_bool stop;
    pthread_t rebuilder, follower;
    bool rebuilder_started, follower_started;

    /* Monotonic ns: every row committed before it is in the live filter; 0 = none. */
    _Atomic int64_t horizon;
    int64_t max_stale_ns;       /* 0: never degraded */

    pthread_mutex_t mu;
    pthread_cond_t cv;          /* rebuild wanted, stop, or follower state change */
    /* Everything below is guarded by mu. */
    uint64_t wanted;            /* newest requested rebuild id */
    uint64_t started;           /* id of the rebuild running or last started */
    char wanted_reason[32];
    bool ever_loaded;
    int64_t last_rebuild_end;   /* monotonic ns; 0: none yet */
    uint64_t feed_epoch;        /* bumped by each new LISTEN and each long ID */
    uint64_t covered_epoch;     /* the epoch the live filter's COPY started in */
    char server_id[256];        /* the follower's server (see loader_server_id) */
    int64_t degraded_ns;        /* time spent degraded, counted up to accounted */
    int64_t accounted;
    unsigned rng;               /* jitter for backoffs */
    struct source_status status;
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

int64_t source_horizon(struct source *s)
{
    return atomic_load_explicit(&s->horizon, memory_order_acquire);
}

bool source_stale(struct source *s, int64_t h)
{
    return s->max_stale_ns != 0 && now_ns() - h > s->max_stale_ns;
}

/* Degraded time in [accounted, now] under horizon h.  Caller holds mu. */
static void account_locked(struct source *s, int64_t h, int64_t now)
{
    if (s->max_stale_ns == 0 || h == 0)
        return;
    int64_t from = h + s->max_stale_ns;
    if (from < s->accounted)
        from = s->accounted;
    if (now > from)
        s->degraded_ns += now - from;
    s->accounted = now;
}

/*
 * Move the horizon to t if the live filter covers the current feed epoch.
 * Caller holds mu and has applied every notification that arrived before
 * the round trip that proved t.
 */
static void advance_locked(struct source *s, int64_t t)
{
    if (s->covered_epoch != s->feed_epoch)
        return;
    int64_t h = atomic_load(&s->horizon);
    if (t <= h)
        return;
    account_locked(s, h, now_ns());
    atomic_store_explicit(&s->horizon, t, memory_order_release);
}

/* A start of a new feed epoch: the horizon waits for a rebuild.  Caller holds mu. */
static void new_epoch_locked(struct source *s)
{
    s->feed_epoch++;
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

struct source *source_new(const struct config *cfg, struct guard *g, struct pending *pending,
                          struct stats *st, const struct log *lg,
                          const struct source_hooks *hooks)
{
    struct source *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->cfg = cfg;
    s->g = g;
    s->pending = pending;
    s->st = st;
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
    s->wanted = 1;                          /* the first load */
    snprintf(s->wanted_reason, sizeof s->wanted_reason, "start");
    s->status.state = SOURCE_CONNECTING;
    s->status.state_since = time(NULL);
    s->status.requested_id = 1;
    atomic_init(&s->horizon, 0);
    s->max_stale_ns = (int64_t)(cfg->max_staleness * (double)NS_PER_S);
    s->feed_epoch = 1;
    s->covered_epoch = 0;
    s->rng = (unsigned)now_ns() ^ (unsigned)getpid();
    return s;
}

void source_free(struct source *s)
{
    if (s == NULL)
        return;
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

/* Caller holds mu. */
static uint64_t request_locked(struct source *s, const char *reason, bool *coalesced)
{
    bool pending = s->wanted > s->started;
    if (!pending) {
        s->wanted = s->started + 1;
        snprintf(s->wanted_reason, sizeof s->wanted_reason, "%s", reason);
        s->status.requested_id = s->wanted;
        pthread_cond_broadcast(&s->cv);
    }
    if (coalesced)
        *coalesced = pending;
    return s->wanted;
}

uint64_t source_request_rebuild(struct source *s, const char *reason, bool *coalesced)
{
    pthread_mutex_lock(&s->mu);
    uint64_t id = request_locked(s, reason, coalesced);
    pthread_mutex_unlock(&s->mu);
    log_info(s->lg, "rebuild %llu requested (%s)%s", (unsigned long long)id, reason,
             coalesced && *coalesced ? ", coalesced with the pending one" : "");
    return id;
}

/* Seconds min_rebuild_interval still holds a wanted rebuild back.  Caller holds mu. */
static double hold_back_locked(const struct source *s, int64_t now)
{
    if (!s->ever_loaded || s->last_rebuild_end == 0)
        return 0;
    int64_t until = s->last_rebuild_end + (int64_t)s->cfg->min_rebuild_interval * NS_PER_S;
    return until > now ? (double)(until - now) / (double)NS_PER_S : 0;
}

void source_status(struct source *s, struct source_status *out)
{
    int64_t now = now_ns();
    pthread_mutex_lock(&s->mu);
    int64_t h = atomic_load(&s->horizon);
    account_locked(s, h, now);
    *out = s->status;
    out->horizon_age = h ? (double)(now - h) / (double)NS_PER_S : -1;
    /* h == 0 after a load: a reconnect overtook the first load's epoch. */
    out->degraded = s->max_stale_ns > 0 && s->ever_loaded && now - h > s->max_stale_ns;
    out->degraded_seconds = (double)s->degraded_ns / (double)NS_PER_S;
    out->next_rebuild_in = s->wanted > s->started ? hold_back_locked(s, now) : 0;
    pthread_mutex_unlock(&s->mu);
}

/*
 * The public part of an error: the text before the first ": ", where
 * loader.c and this file put the detail from libpq (hosts, socket paths,
 * role names), which only the log shows.
 */
static void set_public_error_locked(struct source *s, const char *err)
{
    size_t n = strcspn(err, ":");
    snprintf(s->status.last_error, sizeof s->status.last_error, "%.*s", (int)n, err);
}

static void set_state(struct source *s, enum source_state st, const char *err)
{
    pthread_mutex_lock(&s->mu);
    if (s->status.state != st) {
        s->status.state = st;
        s->status.state_since = time(NULL);
    }
    if (err)
        set_public_error_locked(s, err);
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

static void apply_notifies(struct source *s, PGconn *conn, const char *del_channel)
{
    PGnotify *n;
    uint64_t added = 0, deleted = 0, long_ids = 0;
    while ((n = PQnotifies(conn)) != NULL) {
        if (strcmp(n->relname, del_channel) == 0) {
            deleted++;
        } else if (n->extra != NULL && n->extra[0] != '\0') {
            /*
             * Added to the filter only: the journal keeps POSTed IDs until
             * a COPY shows them, since any role may send a notification.
             */
            guard_add(s->g, n->extra, strlen(n->extra));
            added++;
        } else {
            long_ids++;         /* sql/notify.sql's marker for an ID too long to notify */
        }
        PQfreemem(n);
    }
    if (added == 0 && deleted == 0 && long_ids == 0)
        return;
    if (added)
        stats_add(s->st, ST_NOTIFY_APPLIED, added);
    /* Only an ID that a request may carry can be a false negative. */
    bool lookup_long = long_ids > 0 && s->cfg->max_id_bytes >= NOTIFY_MIN_LONG_UTF8;
    pthread_mutex_lock(&s->mu);
    s->status.notifications += added;
    s->status.deletes += deleted;
    s->status.long_ids += long_ids;
    uint64_t limit = s->cfg->filters[0].rebuild_after_deletes;
    bool rebuild = limit > 0 && deleted > 0 && s->status.deletes >= limit;
    if (rebuild) {
        s->status.deletes = 0;
        request_locked(s, "deletes", NULL);
    }
    if (lookup_long) {
        new_epoch_locked(s);
        request_locked(s, "long id", NULL);
    }
    pthread_mutex_unlock(&s->mu);
    if (rebuild)
        log_info(s->lg, "%llu deletes since the last rebuild: rebuilding",
                 (unsigned long long)limit);
    if (lookup_long)
        log_warn(s->lg, "a row's id was too long for a notification: degraded until a rebuild "
                 "copies it");
}

/*
 * The probe proves freshness only on the session that LISTENs.  Through a
 * connection pooler (PgBouncer in transaction mode) the LISTEN and the
 * probes may run on different server sessions and notifications are
 * dropped, so the follower insists on a direct connection: the backend pid
 * the server reports must be the one libpq got at connect (a pooler sends
 * its own), and each probe checks that it still runs on that session and
 * that the session still listens.  Writes the probe's SQL into probe.
 */
static bool direct_session(PGconn *conn, const char *channel, char *probe, size_t probelen,
                           char *err, size_t errlen)
{
    PGresult *r = PQexec(conn, "SELECT pg_backend_pid()");
    bool ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
    long pid = ok ? strtol(PQgetvalue(r, 0, 0), NULL, 10) : 0;
    PQclear(r);
    if (!ok) {
        snprintf(err, errlen, "cannot read the backend pid: %s", PQerrorMessage(conn));
        return false;
    }
    if (pid != PQbackendPID(conn)) {
        snprintf(err, errlen, "the follower's connection goes through a connection pooler "
                 "(backend pid %ld, connection says %d): LISTEN needs a direct connection to "
                 "PostgreSQL", pid, PQbackendPID(conn));
        return false;
    }
    char *lit = PQescapeLiteral(conn, channel, strlen(channel));
    if (lit == NULL) {
        snprintf(err, errlen, "cannot quote the channel: %s", PQerrorMessage(conn));
        return false;
    }
    snprintf(probe, probelen, "SELECT pg_backend_pid() = %ld AND %s = ANY (ARRAY(SELECT "
             "pg_listening_channels()))", pid, lit);
    PQfreemem(lit);
    return true;
}

/*
 * Follow one connection until it fails or stop: apply notifications and
 * probe every probe_interval.  Returns with the reason in err.
 */
static void follow(struct source *s, PGconn *conn, const char *del_channel, const char *probe,
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
        apply_notifies(s, conn, del_channel);
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
            apply_notifies(s, conn, del_channel);
            pthread_mutex_lock(&s->mu);
            advance_locked(s, sent);
            pthread_mutex_unlock(&s->mu);
        }
        if (PQstatus(conn) != CONNECTION_OK) {
            snprintf(err, errlen, "connection lost: %s", PQerrorMessage(conn));
            return;
        }
    }
}

static void *follower_main(void *arg)
{
    struct source *s = arg;
    char err[512], del_channel[80], sid[256], probe[256];
    unsigned backoff = 1;
    bool had_connection = false;

    snprintf(del_channel, sizeof del_channel, "%s_deleted", s->cfg->filters[0].channel);
    while (!atomic_load(&s->stop)) {
        PGconn *conn = loader_connect(s->cfg, err, sizeof err);
        if (conn == NULL || !listen_on(conn, s->cfg->filters[0].channel, err, sizeof err)
            || !listen_on(conn, del_channel, err, sizeof err)
            || !direct_session(conn, s->cfg->filters[0].channel, probe, sizeof probe, err, sizeof err)
            || !loader_server_id(conn, sid, sizeof sid, err, sizeof err)) {
            PQfinish(conn);
            set_state(s, had_connection ? SOURCE_RECONNECTING : SOURCE_CONNECTING, err);
            log_warn(s->lg, "follower: %s; retrying in %u s", err, backoff);
            nap(s, jitter_ms(s, backoff));
            backoff = next_backoff(s, backoff);
            continue;
        }
        backoff = 1;
        pthread_mutex_lock(&s->mu);
        s->status.listening = true;
        if (s->status.state != SOURCE_CONNECTED) {
            s->status.state = SOURCE_CONNECTED;
            s->status.state_since = time(NULL);
        }
        snprintf(s->server_id, sizeof s->server_id, "%s", sid);
        /* Notifications sent while we were away are lost: only a new COPY covers them. */
        new_epoch_locked(s);
        if (had_connection)
            request_locked(s, "reconnect", NULL);
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        log_info(s->lg, "follower: listening on channel \"%s\"", s->cfg->filters[0].channel);
        had_connection = true;

        follow(s, conn, del_channel, probe, err, sizeof err);
        PQfinish(conn);
        if (atomic_load(&s->stop))
            break;
        for (size_t i = strlen(err); i > 0 && err[i - 1] == '\n'; i--)
            err[i - 1] = '\0';
        pthread_mutex_lock(&s->mu);
        s->status.listening = false;
        s->server_id[0] = '\0';
        pthread_mutex_unlock(&s->mu);
        set_state(s, SOURCE_RECONNECTING, err);
        log_warn(s->lg, "follower: %s; reconnecting", err);
    }
    return NULL;
}

/* ---- the rebuilder --------------------------------------------------- */

struct progress_ctx {
    struct source *s;
    bool first;
};

static void on_progress(void *arg, uint64_t rows)
{
    struct progress_ctx *p = arg;
    pthread_mutex_lock(&p->s->mu);
    p->s->status.running_rows = rows;
    pthread_mutex_unlock(&p->s->mu);
    if (p->s->hooks.progress)
        p->s->hooks.progress(p->s->hooks.arg, rows, p->first);
}

/* Items to size the next filter for: the table, or what we already hold. */
static uint64_t plan_items(struct source *s, uint64_t table_rows)
{
    const struct config *cfg = s->cfg;
    if (cfg->filters[0].expected_items > 0)
        return cfg->filters[0].expected_items;
    uint64_t base = table_rows;
    struct filter_info fi;
    pthread_mutex_lock(&s->mu);
    if (s->status.last_rows > base)
        base = s->status.last_rows;
    pthread_mutex_unlock(&s->mu);
    /* Statistics may be stale; never size below what the live filter took in. */
    if (guard_info(s->g, &fi) && fi.items > base)
        base = fi.items;
    double want = ceil((double)base * cfg->filters[0].headroom);
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

static bool run_load(struct source *s, uint64_t id, const char *reason, bool first,
                     uint64_t *rows_out, double *secs_out)
{
    char err[512];
    PGconn *conn = NULL;
    struct filter *f = NULL;
    uint64_t rows = 0;
    bool began = false, ok = false;

    conn = loader_connect(s->cfg, err, sizeof err);
    if (conn == NULL)
        goto out;
    if (!loader_estimate_rows(conn, s->cfg, &rows, err, sizeof err))
        goto out;
    bool has_trigger = true;
    if (first && s->cfg->sync_enabled && loader_has_trigger(conn, s->cfg, &has_trigger, err, sizeof err)
        && !has_trigger)
        log_warn(s->lg, "table %s has no trigger: rows inserted from now on are only seen by "
                 "the next rebuild; install sql/notify.sql and run "
                 "SELECT bloomguard_watch('%s', '%s')", s->cfg->filters[0].table, s->cfg->filters[0].table, s->cfg->filters[0].column);
    char server[256] = "";
    if (s->cfg->sync_enabled && !loader_server_id(conn, server, sizeof server, err, sizeof err))
        goto out;
    uint64_t items = plan_items(s, rows);
    enum filter_error fe;
    f = filter_new(items, s->cfg->filters[0].false_positive_rate, &fe);
    if (f == NULL) {
        snprintf(err, sizeof err, "cannot create a filter for %llu items: %s",
                 (unsigned long long)items, filter_strerror(fe));
        goto out;
    }
    struct filter_info fi;
    filter_info(f, &fi);
    log_info(s->lg, "rebuild %llu (%s): loading %s.%s, about %llu rows, filter for %llu items "
             "(%.1f KiB, k=%u)", (unsigned long long)id, reason, s->cfg->filters[0].table, s->cfg->filters[0].column,
             (unsigned long long)rows, (unsigned long long)items,
             (double)fi.memory_bytes / 1024.0, fi.probes);
    /*
     * From here every insert also reaches f (through the backlog while the
     * copy is f's only writer); then the snapshot is taken.
     */
    guard_begin_bulk(s->g, f);
    began = true;
    /*
     * The COPY's snapshot holds every row committed before copy_start, and
     * the follower of copy_epoch hears of every later one, if that epoch
     * still holds when the copy has started.
     */
    pthread_mutex_lock(&s->mu);
    bool listening = !s->cfg->sync_enabled || s->status.listening;
    uint64_t copy_epoch = s->feed_epoch;
    bool same = !s->cfg->sync_enabled || same_server_locked(s, server, err, sizeof err);
    pthread_mutex_unlock(&s->mu);
    if (!listening) {
        snprintf(err, sizeof err, "the follower is not listening: no COPY without LISTEN");
        goto out;
    }
    if (!same)
        goto out;
    int64_t copy_start = now_ns();
    struct progress_ctx pc = { s, first };
    struct load_result res;
    if (!loader_copy(conn, s->cfg, f, s->pending, &s->stop, on_progress, &pc, &res, err, sizeof err))
        goto out;
    if (!guard_end_bulk(s->g)) {
        snprintf(err, sizeof err, "out of memory for the inserts made during the load");
        goto out;
    }
    /* POSTed ids the table does not hold (yet) must survive the swap, until they expire. */
    pending_expire(s->pending, (uint64_t)(now_ns() / NS_PER_S));
    pending_replay(s->pending, f);
    guard_commit(s->g);
    began = false;
    f = NULL;
    pthread_mutex_lock(&s->mu);
    s->covered_epoch = copy_epoch;
    advance_locked(s, copy_start);
    pthread_mutex_unlock(&s->mu);
    *rows_out = res.rows;
    *secs_out = res.seconds;
    ok = true;
out:
    if (began)
        guard_abort(s->g);              /* frees f */
    else
        filter_free(f);
    PQfinish(conn);
    if (!ok) {
        pthread_mutex_lock(&s->mu);
        set_public_error_locked(s, err);
        pthread_mutex_unlock(&s->mu);
        log_error(s->lg, "rebuild %llu (%s) failed: %s", (unsigned long long)id, reason, err);
    }
    return ok;
}

/* Whether a timer or growth wants a rebuild now; caller holds mu. */
static void check_triggers_locked(struct source *s)
{
    time_t now = time(NULL);
    const struct config *cfg = s->cfg;
    if (s->wanted > s->started || !s->ever_loaded)
        return;
    if (cfg->filters[0].rebuild_interval > 0 && s->status.last_finished > 0
        && now - s->status.last_finished >= (time_t)cfg->filters[0].rebuild_interval) {
        request_locked(s, "interval", NULL);
        return;
    }
    struct filter_info fi;
    if (cfg->filters[0].auto_grow && cfg->filters[0].expected_items == 0 && guard_info(s->g, &fi)
        && fi.estimated_fpp > fi.target_fpp) {
        request_locked(s, "growth", NULL);
    }
}

static void *rebuilder_main(void *arg)
{
    struct source *s = arg;
    unsigned backoff = 1;

    while (!atomic_load(&s->stop)) {
        pthread_mutex_lock(&s->mu);
        check_triggers_locked(s);
        bool due = s->wanted > s->started;
        bool listening = !s->cfg->sync_enabled || s->status.listening;
        pthread_mutex_unlock(&s->mu);
        if (!due) {
            nap(s, TICK_MS);
            continue;
        }
        if (!listening) {
            /* No COPY without LISTEN: rows committed meanwhile would be missed. */
            nap(s, TICK_MS);
            continue;
        }
        /* Nothing (a /reload loop, forged delete notifications) may copy the table back to back. */
        pthread_mutex_lock(&s->mu);
        double hold = hold_back_locked(s, now_ns());
        pthread_mutex_unlock(&s->mu);
        if (hold > 0) {
            nap(s, hold * 1000 < TICK_MS ? (unsigned)(hold * 1000) + 1 : TICK_MS);
            continue;
        }

        pthread_mutex_lock(&s->mu);
        uint64_t id = s->started = s->wanted;
        bool first = !s->ever_loaded;
        char reason[32];
        snprintf(reason, sizeof reason, "%s", s->wanted_reason);
        s->status.running = true;
        s->status.running_id = id;
        s->status.running_rows = 0;
        s->status.running_since = time(NULL);
        snprintf(s->status.running_reason, sizeof s->status.running_reason, "%s", reason);
        pthread_mutex_unlock(&s->mu);

        uint64_t rows = 0;
        double secs = 0;
        bool ok = run_load(s, id, reason, first, &rows, &secs);

        pthread_mutex_lock(&s->mu);
        s->status.running = false;
        s->last_rebuild_end = now_ns();
        if (ok) {
            s->ever_loaded = true;
            s->status.completed_id = id;
            s->status.rebuilds_ok++;
            s->status.rebuild_seconds_sum += secs;
            s->status.last_rows = rows;
            s->status.last_seconds = secs;
            s->status.last_finished = time(NULL);
            s->status.last_error[0] = '\0';
            s->status.deletes = 0;
            snprintf(s->status.last_reason, sizeof s->status.last_reason, "%s", reason);
            if (!s->cfg->sync_enabled && s->status.state != SOURCE_CONNECTED) {
                s->status.state = SOURCE_CONNECTED;
                s->status.state_since = time(NULL);
            }
        } else {
            s->status.rebuilds_failed++;
            /* The request is still wanted: make it pending again. */
            s->started = id - 1;
            if (!s->cfg->sync_enabled) {
                enum source_state st = s->ever_loaded ? SOURCE_RECONNECTING : SOURCE_CONNECTING;
                if (s->status.state != st) {
                    s->status.state = st;
                    s->status.state_since = time(NULL);
                }
            }
        }
        pthread_mutex_unlock(&s->mu);

        if (s->hooks.done)
            s->hooks.done(s->hooks.arg, id, ok, ok && first, rows, secs);
        if (ok) {
            log_info(s->lg, "rebuild %llu (%s) done: %llu rows in %.3f s", (unsigned long long)id,
                     reason, (unsigned long long)rows, secs);
            backoff = 1;
        } else if (!atomic_load(&s->stop)) {
            log_info(s->lg, "retrying the load in about %u s", backoff);
            nap(s, jitter_ms(s, backoff));
            backoff = next_backoff(s, backoff);
        }
    }
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
