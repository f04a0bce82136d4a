/*
 * Two threads keep the filter true to the table.  The follower holds a
 * LISTEN connection and adds every notified ID to the guard; the rebuilder
 * builds a fresh filter with COPY whenever one is wanted and swaps it in.
 * A rebuild's COPY starts only while the follower is listening, so a row
 * committed at any moment is either in the COPY's snapshot or notified to a
 * follower that adds it to both filters.
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

#include "loader.h"

/* How often the rebuilder wakes to check timers and growth. */
#define TICK_MS 500
/* Smallest filter worth building: a fresh table still gets room to grow. */
#define MIN_CAPACITY 1024

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

    pthread_mutex_t mu;
    pthread_cond_t cv;          /* rebuild wanted, stop, or follower state change */
    /* Everything below is guarded by mu. */
    uint64_t wanted;            /* newest requested rebuild id */
    uint64_t started;           /* id of the rebuild running or last started */
    char wanted_reason[32];
    bool ever_loaded;
    time_t last_attempt_end;
    struct source_status status;
};

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
    pthread_cond_init(&s->cv, NULL);
    s->wanted = 1;                          /* the first load */
    snprintf(s->wanted_reason, sizeof s->wanted_reason, "start");
    s->status.state = SOURCE_CONNECTING;
    s->status.state_since = time(NULL);
    s->status.requested_id = 1;
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

void source_status(struct source *s, struct source_status *out)
{
    pthread_mutex_lock(&s->mu);
    *out = s->status;
    pthread_mutex_unlock(&s->mu);
}

static void set_state(struct source *s, enum source_state st, const char *err)
{
    pthread_mutex_lock(&s->mu);
    if (s->status.state != st) {
        s->status.state = st;
        s->status.state_since = time(NULL);
    }
    if (err)
        snprintf(s->status.last_error, sizeof s->status.last_error, "%s", err);
    pthread_mutex_unlock(&s->mu);
}

/* Sleep up to ms, waking early on stop or a broadcast. */
static void nap(struct source *s, unsigned ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
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
    uint64_t added = 0, deleted = 0;
    while ((n = PQnotifies(conn)) != NULL) {
        if (strcmp(n->relname, del_channel) == 0) {
            deleted++;
        } else if (n->extra != NULL && n->extra[0] != '\0') {
            size_t len = strlen(n->extra);
            uint64_t h = filter_hash(n->extra, len);
            guard_add_hash(s->g, h);
            pending_seen(s->pending, n->extra, len, h);   /* the table has it now */
            added++;
        }
        PQfreemem(n);
    }
    if (added == 0 && deleted == 0)
        return;
    if (added)
        stats_add(s->st, ST_NOTIFY_APPLIED, added);
    pthread_mutex_lock(&s->mu);
    s->status.notifications += added;
    s->status.deletes += deleted;
    uint64_t limit = s->cfg->rebuild_after_deletes;
    bool rebuild = limit > 0 && deleted > 0 && s->status.deletes >= limit;
    if (rebuild) {
        s->status.deletes = 0;
        request_locked(s, "deletes", NULL);
    }
    pthread_mutex_unlock(&s->mu);
    if (rebuild)
        log_info(s->lg, "%llu deletes since the last rebuild: rebuilding",
                 (unsigned long long)limit);
}

static void *follower_main(void *arg)
{
    struct source *s = arg;
    char err[512], del_channel[80];
    unsigned backoff = 1;
    bool had_connection = false;

    snprintf(del_channel, sizeof del_channel, "%s_deleted", s->cfg->channel);
    while (!atomic_load(&s->stop)) {
        PGconn *conn = loader_connect(s->cfg, err, sizeof err);
        if (conn == NULL || !listen_on(conn, s->cfg->channel, err, sizeof err)
            || !listen_on(conn, del_channel, err, sizeof err)) {
            PQfinish(conn);
            set_state(s, had_connection ? SOURCE_RECONNECTING : SOURCE_CONNECTING, err);
            log_warn(s->lg, "follower: %s; retrying in %u s", err, backoff);
            nap(s, backoff * 1000);
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
        /* Notifications sent while we were away are lost: reload everything. */
        if (had_connection)
            request_locked(s, "reconnect", NULL);
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        log_info(s->lg, "follower: listening on channel \"%s\"", s->cfg->channel);
        had_connection = true;

        while (!atomic_load(&s->stop)) {
            struct pollfd pfd = { .fd = PQsocket(conn), .events = POLLIN };
            int pr = poll(&pfd, 1, TICK_MS);
            if (pr < 0 && errno != EINTR)
                break;
            if (pr > 0 && !PQconsumeInput(conn))
                break;
            apply_notifies(s, conn, del_channel);
            if (PQstatus(conn) != CONNECTION_OK)
                break;
        }
        if (atomic_load(&s->stop)) {
            PQfinish(conn);
            break;
        }
        snprintf(err, sizeof err, "connection lost: %s", PQerrorMessage(conn));
        for (size_t i = strlen(err); i > 0 && err[i - 1] == '\n'; i--)
            err[i - 1] = '\0';
        PQfinish(conn);
        pthread_mutex_lock(&s->mu);
        s->status.listening = false;
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
    if (cfg->expected_items > 0)
        return cfg->expected_items;
    uint64_t base = table_rows;
    struct filter_info fi;
    pthread_mutex_lock(&s->mu);
    if (s->status.last_rows > base)
        base = s->status.last_rows;
    pthread_mutex_unlock(&s->mu);
    /* Statistics may be stale; never size below what the live filter took in. */
    if (guard_info(s->g, &fi) && fi.items > base)
        base = fi.items;
    double want = ceil((double)base * cfg->headroom);
    if (want < MIN_CAPACITY)
        want = MIN_CAPACITY;
    if (want > (double)FILTER_MAX_ITEMS)
        want = (double)FILTER_MAX_ITEMS;
    return (uint64_t)want;
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
                 "SELECT bloomguard_watch('%s', '%s')", s->cfg->table, s->cfg->table, s->cfg->column);
    uint64_t items = plan_items(s, rows);
    enum filter_error fe;
    f = filter_new(items, s->cfg->false_positive_rate, &fe);
    if (f == NULL) {
        snprintf(err, sizeof err, "cannot create a filter for %llu items: %s",
                 (unsigned long long)items, filter_strerror(fe));
        goto out;
    }
    struct filter_info fi;
    filter_info(f, &fi);
    log_info(s->lg, "rebuild %llu (%s): loading %s.%s, about %llu rows, filter for %llu items "
             "(%.1f KiB, k=%u)", (unsigned long long)id, reason, s->cfg->table, s->cfg->column,
             (unsigned long long)rows, (unsigned long long)items,
             (double)fi.memory_bytes / 1024.0, fi.probes);
    /*
     * From here every insert also reaches f (through the backlog while the
     * copy is f's only writer); then the snapshot is taken.
     */
    guard_begin_bulk(s->g, f);
    began = true;
    struct progress_ctx pc = { s, first };
    struct load_result res;
    if (!loader_copy(conn, s->cfg, f, s->pending, &s->stop, on_progress, &pc, &res, err, sizeof err))
        goto out;
    if (!guard_end_bulk(s->g)) {
        snprintf(err, sizeof err, "out of memory for the inserts made during the load");
        goto out;
    }
    /* POSTed ids the table does not hold (yet) must survive the swap. */
    pending_replay(s->pending, f);
    guard_commit(s->g);
    began = false;
    f = NULL;
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
        snprintf(s->status.last_error, sizeof s->status.last_error, "%s", err);
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
    if (cfg->rebuild_interval > 0 && s->status.last_finished > 0
        && now - s->status.last_finished >= (time_t)cfg->rebuild_interval) {
        request_locked(s, "interval", NULL);
        return;
    }
    struct filter_info fi;
    if (cfg->auto_grow && cfg->expected_items == 0 && guard_info(s->g, &fi)
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
            s->hooks.done(s->hooks.arg, ok, ok && first, rows, secs);
        if (ok) {
            log_info(s->lg, "rebuild %llu (%s) done: %llu rows in %.3f s", (unsigned long long)id,
                     reason, (unsigned long long)rows, secs);
            backoff = 1;
        } else if (!atomic_load(&s->stop)) {
            log_info(s->lg, "retrying the load in %u s", backoff);
            nap(s, backoff * 1000);
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
