/*
 * The tables, their followers and the scheduler, put together: each table's
 * method is chosen once PostgreSQL answers (follow_choose), the tables that
 * share a method share one follower, and the scheduler runs their loads.
 */
#include "source.h"

#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loader.h"
#include "verifier.h"

struct source {
    const struct config *cfg;
    const struct log *lg;
    struct table **tables;
    unsigned n;
    struct scheduler *sched;
    struct verifier *verifier;      /* [adaptive] enabled: looks hot "maybe" IDs up */
    /* Set once by choose(), on the scheduler's thread, before any load. */
    struct follower *followers[SYNC_METHODS];  /* by enum sync_method; [SYNC_NONE] unused */
    pthread_mutex_t mu;             /* guards followers[] for readers on other threads */
    time_t started;                 /* source_new: what a table with no method yet is "since" */
};

struct source *source_new(const struct config *cfg, const struct log *lg,
                          const struct scheduler_hooks *hooks, const char *token)
{
    unsigned n = cfg->n_filters;
    if (n == 0 || n > CONFIG_MAX_FILTERS)
        return NULL;
    struct source *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->cfg = cfg;
    s->lg = lg;
    s->n = n;
    s->started = time(NULL);
    pthread_mutex_init(&s->mu, NULL);
    s->tables = calloc(n, sizeof *s->tables);
    if (s->tables == NULL)
        goto fail;
    for (unsigned i = 0; i < n; i++)
        if ((s->tables[i] = table_new(cfg, &cfg->filters[i])) == NULL)
            goto fail;
    s->sched = scheduler_new(cfg, s->tables, n, lg, hooks, token);
    if (s->sched == NULL)
        goto fail;
    /* The verifier asks PostgreSQL, which a daemon whose filters all follow an upstream has none of. */
    bool any_db = false;
    for (unsigned i = 0; i < n; i++)
        any_db = any_db || cfg->filters[i].method != SYNC_UPSTREAM;
    if (cfg->adaptive_enabled && any_db
        && (s->verifier = verifier_new(cfg, lg, s->tables, n, s->sched)) == NULL)
        goto fail;
    /* A want wakes the scheduler. */
    for (unsigned i = 0; i < n; i++)
        table_set_wake(s->tables[i], scheduler_wake, s->sched);
    return s;
fail:
    source_free(s);
    return NULL;
}

void source_free(struct source *s)
{
    if (s == NULL)
        return;
    for (unsigned m = 0; m < sizeof s->followers / sizeof s->followers[0]; m++)
        follow_free(s->followers[m]);
    verifier_free(s->verifier);
    scheduler_free(s->sched);
    for (unsigned i = 0; s->tables && i < s->n; i++)
        table_free(s->tables[i]);
    free(s->tables);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

struct table *source_table(struct source *s, unsigned i)
{
    return s->tables[i];
}

/* A follower of method m, made and started on first use; NULL (err) if it cannot. */
static struct follower *follower_for(struct source *s, enum sync_method m, char *err,
                                     size_t errlen)
{
    assert(m > SYNC_NONE && (unsigned)m < SYNC_METHODS);
    if (s->followers[m] != NULL)
        return s->followers[m];
    struct follower *f = follow_new(follow_method_ops(m), s->cfg, s->lg, scheduler_wake, s->sched);
    if (f == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (!follow_start(f)) {
        snprintf(err, errlen, "cannot start the %s follower's thread", sync_method_name(f->ops->method));
        follow_free(f);
        return NULL;
    }
    pthread_mutex_lock(&s->mu);
    s->followers[m] = f;
    pthread_mutex_unlock(&s->mu);
    return f;
}

/* Table i is followed by method m (why says why): its follower, made on first use. */
static bool attach(struct source *s, unsigned i, enum sync_method m, const char *why, char *err,
                   size_t errlen)
{
    struct table *t = s->tables[i];
    struct follower *f = follower_for(s, m, err, errlen);
    if (f == NULL)
        return false;
    if (table_loaded(t))
        table_gap(t, WANT_RECONNECT);
    follow_attach(f, t);
    scheduler_set_follower(s->sched, i, f);
    log_fields(s->lg, LOG_LVL_INFO, table_name(t), "followed", "%s: followed by %s",
               table_name(t), why);
    return true;
}

/*
 * The scheduler's prepare step: ask the server what it offers, choose the
 * method of each table that has no follower yet, and give it to that
 * method's follower (made on first use).  A table nothing can follow is
 * still loaded, but stays degraded (its horizon never moves past its load):
 * the log says what to install, and it is looked at again until something
 * can.  A table that was loaded without a follower has missed rows since:
 * the follower starts with a gap.
 */
static int choose(void *arg, char *err, size_t errlen)
{
    struct source *s = arg;
    const struct config *cfg = s->cfg;

    if (!cfg->sync_enabled) {
        for (unsigned i = 0; i < s->n; i++)
            table_set_method(s->tables[i], "none", "[sync] enabled = no: only loads update "
                             "the filter (set max_staleness = 0 for a static table)");
        log_info(s->lg, "[sync] enabled = no: the tables are not followed, only loaded");
        return 1;
    }
    /* A replica's tables ask their upstream, never PostgreSQL (which need not exist). */
    bool ask_server = false;
    for (unsigned i = 0; i < s->n; i++) {
        if (scheduler_follower(s->sched, i) != NULL)
            continue;
        if (table_config(s->tables[i])->method != SYNC_UPSTREAM) {
            ask_server = true;
            continue;
        }
        char why[320];
        follow_choose(cfg, table_config(s->tables[i]), NULL, NULL, why, sizeof why);
        table_set_method(s->tables[i], sync_method_name(SYNC_UPSTREAM), why);
        if (!attach(s, i, SYNC_UPSTREAM, why, err, errlen))
            return -1;
    }
    if (!ask_server)
        return 1;
    PGconn *conn = loader_connect(cfg, err, errlen);
    if (conn == NULL)
        return -1;
    struct follow_offer srv;
    if (!follow_probe_server(conn, cfg, NULL, &srv, err, errlen)) {
        PQfinish(conn);
        return -1;
    }
    int complete = 1;
    for (unsigned i = 0; i < s->n; i++) {
        struct table *t = s->tables[i];
        if (scheduler_follower(s->sched, i) != NULL)
            continue;
        const struct filter_config *fc = table_config(t);
        struct follow_table_offer tbl;
        char perr[256], why[FOLLOW_WHY_MAX];
        enum sync_method m = SYNC_NONE;
        if (!follow_probe_table(conn, cfg, fc, &tbl, perr, sizeof perr))
            snprintf(why, sizeof why, "%s", perr);
        else
            m = follow_choose(cfg, fc, &srv, &tbl, why, sizeof why);
        bool changed = table_set_method(t, sync_method_name(m), why);
        if (m == SYNC_NONE) {
            complete = 0;
            if (changed)
                log_fields(s->lg, LOG_LVL_WARN, fc->name, "not_followed", "%s: %s", fc->name, why);
            continue;
        }
        if (!attach(s, i, m, why, err, errlen)) {
            PQfinish(conn);
            return -1;
        }
    }
    PQfinish(conn);
    return complete;
}

bool source_start(struct source *s)
{
    return scheduler_start(s->sched, choose, s)
           && (s->verifier == NULL || verifier_start(s->verifier));
}

void source_stop(struct source *s)
{
    /* Followers first: their rows need nothing more of the scheduler, whose stop writes snapshots. */
    pthread_mutex_lock(&s->mu);
    struct follower *f[SYNC_METHODS];
    memcpy(f, s->followers, sizeof f);
    pthread_mutex_unlock(&s->mu);
    /* The verifier first: it asks the scheduler for followers. */
    verifier_stop(s->verifier);
    scheduler_stop(s->sched);
    for (unsigned m = 0; m < SYNC_METHODS; m++)
        if (f[m] != NULL)
            follow_stop(f[m]);
}

uint64_t source_request_rebuild(struct source *s, unsigned i, enum table_want why,
                                bool *coalesced)
{
    bool c = false;
    uint64_t id = table_want(s->tables[i], why, &c);
    log_fields(s->lg, LOG_LVL_INFO, table_name(s->tables[i]), "rebuild_requested",
               "%s: rebuild %llu requested (%s)%s", table_name(s->tables[i]),
               (unsigned long long)id, table_want_name(why),
               c ? ", coalesced with the pending one" : "");
    if (coalesced)
        *coalesced = c;
    return id;
}

bool source_mirror(struct source *s, unsigned i, struct follow_mirror *out)
{
    struct follower *f = scheduler_follower(s->sched, i);
    return f != NULL && follow_mirror(f, s->tables[i], out);
}

void source_status(struct source *s, unsigned i, struct source_status *out)
{
    memset(out, 0, sizeof *out);
    table_status(s->tables[i], &out->table);
    struct follower *f = scheduler_follower(s->sched, i);
    if (f != NULL) {
        follow_status(f, &out->conn);
        follow_table_status(f, s->tables[i], &out->conn);
        /* Where the live filter is exact now, as a snapshot would record it. */
        follow_position(f, s->tables[i], out->table.position, sizeof out->table.position);
    } else {
        /* Not chosen yet: connecting since the start; chosen "none": since it was. */
        bool none = out->table.method_since != 0;
        out->conn.state = none ? FOLLOW_NONE : FOLLOW_CONNECTING;
        out->conn.since = none ? out->table.method_since : s->started;
        out->conn.slot_lag_bytes = -1;
    }
}
