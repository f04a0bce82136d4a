/*
 * What the ways of following share: choosing a table's method from what
 * the server offers, and the follower's common part (its thread, its
 * connection's state and status, the retry with jittered backoff, public
 * errors, naps that end on stop), so each method is only what it does
 * differently.
 */
#include "follow.h"

#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "feed.h"
#include "loader.h"
#include "pgerror.h"

static const char *const state_names[] = {
    [FOLLOW_CONNECTING] = "connecting",
    [FOLLOW_CONNECTED] = "connected",
    [FOLLOW_RECONNECTING] = "reconnecting",
    [FOLLOW_NONE] = "none",
};

const char *follow_state_name(enum follow_state s)
{
    bool known = (unsigned)s < sizeof state_names / sizeof *state_names && state_names[s];
    return known ? state_names[s] : "unknown";
}

/* The ops of each row of SYNC_METHOD_LIST (each says its row: ops->method). */
static const struct follow_ops *const methods[SYNC_METHODS] = {
    [SYNC_LOGICAL] = &follow_logical_ops,
    [SYNC_FEED] = &follow_feed_ops,
    [SYNC_NOTIFY] = &follow_notify_ops,
    [SYNC_UPSTREAM] = &follow_upstream_ops,
};

const struct follow_ops *follow_method_ops(enum sync_method m)
{
    return (unsigned)m < SYNC_METHODS ? methods[m] : NULL;
}

struct follower *follow_new(const struct follow_ops *ops, const struct config *cfg,
                            const struct log *lg, void (*wake)(void *arg), void *arg)
{
    assert(ops->size >= sizeof(struct follower));
    struct follower *f = calloc(1, ops->size);
    if (f == NULL)
        return NULL;
    f->ops = ops;
    f->cfg = cfg;
    f->lg = lg;
    atomic_init(&f->n, 0);
    f->wake = wake;
    f->wake_arg = arg;
    atomic_init(&f->stop, false);
    /* Each follower its own jitter, so that followers do not retry in step either. */
    f->rng = (unsigned)time(NULL) ^ (unsigned)getpid() ^ (unsigned)(uintptr_t)f;
    pthread_mutex_init(&f->mu, NULL);
    f->state = FOLLOW_CONNECTING;
    f->since = time(NULL);
    if (ops->init != NULL)
        ops->init(f);
    return f;
}

void follow_free(struct follower *f)
{
    if (f == NULL)
        return;
    if (f->ops->fini != NULL)
        f->ops->fini(f);
    pthread_mutex_destroy(&f->mu);
    free(f);
}

static void *thread_main(void *arg)
{
    struct follower *f = arg;
    /* Named, so that top -H and /proc/PID/task/TID/schedstat tell the proof's thread apart. */
    pthread_setname_np(pthread_self(), "bg-follow");
    f->ops->run(f);
    return NULL;
}

bool follow_start(struct follower *f)
{
    f->started = pthread_create(&f->thread, NULL, thread_main, f) == 0;
    return f->started;
}

void follow_stop(struct follower *f)
{
    atomic_store(&f->stop, true);
    if (f->ops->interrupt != NULL)
        f->ops->interrupt(f);
    if (f->started)
        pthread_join(f->thread, NULL);
    f->started = false;
}

void follow_position(struct follower *f, struct table *t, char *out, size_t cap)
{
    if (f->ops->position != NULL)
        f->ops->position(f, t, out, cap);
    else
        table_position(t, out, cap);
}

bool follow_unseen(struct follower *f, struct table *t, uint32_t **xids, size_t *n)
{
    *xids = NULL;
    *n = 0;
    return f == NULL || f->ops->unseen == NULL || f->ops->unseen(f, t, xids, n);
}

void follow_status(struct follower *f, struct follow_status *out)
{
    memset(out, 0, sizeof *out);
    out->slot_lag_bytes = -1;
    pthread_mutex_lock(&f->mu);
    out->state = f->state;
    out->since = f->since;
    out->listening = f->listening;
    follow_status_set_error(out, f->error);
    if (f->ops->status_locked != NULL)
        f->ops->status_locked(f, out);
    pthread_mutex_unlock(&f->mu);
}

bool follow_mirror(struct follower *f, struct table *t, struct follow_mirror *out)
{
    return f != NULL && f->ops->mirror != NULL && f->ops->mirror(f, t, out);
}

void follow_table_status(struct follower *f, struct table *t, struct follow_status *out)
{
    if (f->ops->table_status != NULL)
        f->ops->table_status(f, t, out);
}

void follow_attach(struct follower *f, struct table *t)
{
    unsigned n = atomic_load_explicit(&f->n, memory_order_relaxed);
    if (n >= CONFIG_MAX_FILTERS || follow_index(f, t) >= 0)
        return;
    f->tables[n] = t;
    /* The slot first, then the count that shows it. */
    atomic_store_explicit(&f->n, n + 1, memory_order_release);
}

unsigned follow_count(const struct follower *f)
{
    return atomic_load_explicit(&((struct follower *)f)->n, memory_order_acquire);
}

int follow_index(const struct follower *f, const struct table *t)
{
    unsigned n = follow_count(f);
    for (unsigned i = 0; i < n; i++)
        if (f->tables[i] == t)
            return (int)i;
    return -1;
}

/* ----------------------------------------------------- choosing methods -- */

/* pg_replication_slots is readable by every role.  $1: our own slot. */
#define SERVER_SQL \
    "SELECT current_setting('wal_level') = 'logical', " \
    "(SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user), " \
    "(SELECT count(*) FROM pg_replication_slots WHERE plugin = 'pgoutput' " \
    "   AND slot_name LIKE 'bloomguard%' AND slot_name <> $1), current_user"

/*
 * The publication must publish inserts and carry the column (a column list
 * without it would stream rows without their IDs), for the table and every
 * table under it; the trigger must be enabled and notify this filter's
 * channel, on the table and every table under it.  Then whether a watch
 * trigger of any kind is there, and whether the feed is installed but
 * closed to this role (pg_trigger and has_table_privilege need no grant,
 * so a role that cannot read the feed is still told what it lacks).  $1
 * the quoted table, $2 the column, $3 the publication, $4 the trigger's
 * call with the channel.
 */
#define TABLE_SQL \
    "SELECT " FOLLOW_ANY_LISTED_SQL("$1::regclass::oid", "$2", "$3") ", " \
    "       " FOLLOW_UNPUBLISHED_SQL("$1::regclass::oid", "$2", "$3") ", " \
    "       EXISTS (SELECT 1 FROM pg_trigger t JOIN pg_proc f ON f.oid = t.tgfoid " \
    "                WHERE t.tgrelid = $1::regclass AND t.tgname = 'bloomguard_notify' " \
    "                  AND t.tgenabled <> 'D' AND strpos(f.prosrc, $4) > 0), " \
    "       " FOLLOW_UNTRIGGERED_SQL("$1::regclass::oid", "$4") ", " \
    "       EXISTS (SELECT 1 FROM pg_trigger t WHERE t.tgrelid = $1::regclass " \
    "                  AND t.tgname = 'bloomguard_notify' AND t.tgenabled <> 'D'), " \
    "       coalesce(NOT has_table_privilege(to_regclass('bloomguard_feed_log'), 'SELECT'), false)"

/* The one row of fields columns sql returns (PQclear it), or NULL with err ("what: ..."). */
static PGresult *one_row(PGconn *conn, const char *sql, int nparams, const char *const *params,
                         int fields, const char *what, char *err, size_t errlen)
{
    PGresult *r = PQexecParams(conn, sql, nparams, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 && PQnfields(r) == fields)
        return r;
    loader_set_result_error(err, errlen, what, conn, r);
    PQclear(r);
    return NULL;
}

static bool is_true(const PGresult *r, int field)
{
    return !PQgetisnull(r, 0, field) && strcmp(PQgetvalue(r, 0, field), "t") == 0;
}

bool follow_probe_server(PGconn *conn, const struct config *cfg, const char *own_slot,
                         struct follow_offer *out, char *err, size_t errlen)
{
    (void)cfg;
    memset(out, 0, sizeof *out);
    const char *params[1] = { own_slot ? own_slot : "" };
    PGresult *r = one_row(conn, SERVER_SQL, 1, params, 4, "cannot read what the server offers",
                          err, errlen);
    if (r == NULL)
        return false;
    out->wal_logical = is_true(r, 0);
    out->may_replicate = is_true(r, 1);
    out->other_slots = (unsigned)strtoul(PQgetvalue(r, 0, 2), NULL, 10);
    snprintf(out->role, sizeof out->role, "%s", PQgetvalue(r, 0, 3));
    PQclear(r);
    return true;
}

bool follow_probe_table(PGconn *conn, const struct config *cfg, const struct filter_config *fc,
                        struct follow_table_offer *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    char *qtbl = NULL, *qcol = NULL;
    if (!loader_quote_table(conn, fc->table, fc->column, &qtbl, &qcol, err, errlen))
        return false;
    char chan[96];
    snprintf(chan, sizeof chan, "pg_notify('%s'", fc->channel);     /* channels are [A-Za-z0-9_] */
    const char *params[4] = { qtbl, fc->column, cfg->publication, chan };
    PGresult *r = one_row(conn, TABLE_SQL, 4, params, 6, "cannot read how the table is watched",
                          err, errlen);
    bool ok = r != NULL;
    if (ok) {
        snprintf(out->unpublished, sizeof out->unpublished, "%s", PQgetvalue(r, 0, 1));
        snprintf(out->untriggered, sizeof out->untriggered, "%s", PQgetvalue(r, 0, 3));
        out->published = is_true(r, 0) && PQgetisnull(r, 0, 1);
        out->notify_trigger = is_true(r, 2) && PQgetisnull(r, 0, 3);
        out->watched = is_true(r, 4);
        out->feed_denied = is_true(r, 5);
        PQclear(r);
        char why[256] = "";
        ok = feed_available(conn, fc->table, fc->column, &out->feed, why, sizeof why);
        if (!ok)
            snprintf(err, errlen, "%s", why);
    }
    free(qtbl);
    free(qcol);
    return ok;
}

enum sync_method follow_choose(const struct config *cfg, const struct filter_config *fc,
                                 const struct follow_offer *srv,
                                 const struct follow_table_offer *tbl, char *why, size_t whylen)
{
    enum sync_method want = fc->method;
    const char *watch = "SELECT bloomguard_watch";
    switch (want) {
    case SYNC_LOGICAL:
        if (!srv->wal_logical)
            snprintf(why, whylen, "method logical: the server's wal_level is not logical "
                     "(set wal_level = logical and restart it)");
        else if (!srv->may_replicate)
            snprintf(why, whylen, "method logical: this role may not replicate "
                     "(ALTER ROLE ... REPLICATION)");
        else if (!tbl->published)
            snprintf(why, whylen, "method logical: %s.%s is not in publication %s "
                     "(%s('%s', '%s', method => 'logical'))", fc->table, fc->column,
                     cfg->publication, watch, fc->table, fc->column);
        else {
            snprintf(why, whylen, "method logical, as configured");
            return SYNC_LOGICAL;
        }
        return SYNC_NONE;
    case SYNC_FEED:
        if (!tbl->feed && tbl->feed_denied) {
            snprintf(why, whylen, "method feed: role %s may not read the change feed "
                     "(SELECT bloomguard_feed_grant('%s') as the feed's owner)", srv->role,
                     srv->role);
            return SYNC_NONE;
        }
        if (!tbl->feed) {
            snprintf(why, whylen, "method feed: the change feed does not serve %s.%s "
                     "(%s('%s', '%s', method => 'feed'))", fc->table, fc->column, watch,
                     fc->table, fc->column);
            return SYNC_NONE;
        }
        snprintf(why, whylen, "method feed, as configured");
        return SYNC_FEED;
    case SYNC_NOTIFY:
        if (!tbl->notify_trigger) {
            snprintf(why, whylen, "method notify: no bloomguard_notify trigger on %s notifies "
                     "channel %s (%s('%s', '%s', '%s', method => 'notify'))", fc->table,
                     fc->channel, watch, fc->table, fc->column, fc->channel);
            return SYNC_NONE;
        }
        snprintf(why, whylen, "method notify, as configured");
        return SYNC_NOTIFY;
    case SYNC_UPSTREAM:
        /* source.c attaches these without asking PostgreSQL anything. */
        snprintf(why, whylen, "method upstream, as configured (%s)", cfg->upstream);
        return SYNC_UPSTREAM;
    case SYNC_AUTO:
    case SYNC_METHODS:
        break;
    }
    /* auto: the cheapest for the application's writers that the server offers. */
    bool logical = srv->wal_logical && srv->may_replicate && tbl->published;
    bool crowded = srv->other_slots >= cfg->logical_max_daemons;
    if (logical && !(crowded && tbl->feed)) {
        if (crowded)
            snprintf(why, whylen, "auto: logical (publication %s); %u other daemons already "
                     "decode this server's WAL, past logical_max_daemons (%u): install the feed "
                     "for a fleet (%s('%s', '%s', method => 'feed'))", cfg->publication,
                     srv->other_slots, cfg->logical_max_daemons, watch, fc->table, fc->column);
        else
            snprintf(why, whylen, "auto: logical (publication %s, no trigger on the table)",
                     cfg->publication);
        return SYNC_LOGICAL;
    }
    if (tbl->feed) {
        if (logical)
            snprintf(why, whylen, "auto: feed: %u other daemons already decode this server's "
                     "WAL (logical_max_daemons = %u)", srv->other_slots, cfg->logical_max_daemons);
        else
            snprintf(why, whylen, "auto: feed (%s)", !srv->wal_logical ? "wal_level is not logical"
                     : !srv->may_replicate ? "this role may not replicate"
                     : "the table is not in the publication");
        return SYNC_FEED;
    }
    if (tbl->notify_trigger) {
        snprintf(why, whylen, "auto: notify (the table's trigger notifies channel %s)",
                 fc->channel);
        return SYNC_NOTIFY;
    }
    /* Published, so bloomguard_watch ran: name what the server or the role lacks, not the watch. */
    if (tbl->published)
        snprintf(why, whylen, "nothing follows %s.%s: in publication %s, but %s; until then "
                 "absent IDs answer \"maybe\"", fc->table, fc->column, cfg->publication,
                 !srv->wal_logical ? "wal_level is not logical (set it and restart the server)"
                 : "this role may not replicate (ALTER ROLE ... REPLICATION)");
    /* Watched by a trigger, or maybe by the feed: the role's missing right first. */
    else if (tbl->feed_denied && tbl->watched)
        snprintf(why, whylen, "nothing follows %s.%s: it is watched, but role %s may not read "
                 "the change feed: SELECT bloomguard_feed_grant('%s') as the feed's owner; "
                 "until then absent IDs answer \"maybe\"", fc->table, fc->column, srv->role,
                 srv->role);
    else if (tbl->feed_denied)
        snprintf(why, whylen, "nothing follows %s.%s: %s('%s', '%s') as the table's owner, and "
                 "SELECT bloomguard_feed_grant('%s') (role %s may not read the change feed); "
                 "until then absent IDs answer \"maybe\"", fc->table, fc->column, watch,
                 fc->table, fc->column, srv->role, srv->role);
    else
        snprintf(why, whylen, "nothing follows %s.%s: %s('%s', '%s') (it picks logical where "
                 "wal_level = logical, else the feed); until then absent IDs answer \"maybe\"",
                 fc->table, fc->column, watch, fc->table, fc->column);
    return SYNC_NONE;
}

/* ------------------------------------------------------ shared helpers -- */

void follow_public_error(char *out, size_t outlen, const char *err)
{
    size_t n = strcspn(err, ":");
    char code[PGERROR_SQLSTATE_LEN];
    snprintf(out, outlen, "%.*s", (int)n, err);
    if (pgerror_find(err, code))
        pgerror_tag(out, outlen, code);
}

void follow_status_set_error(struct follow_status *out, const char *pub)
{
    snprintf(out->last_error, sizeof out->last_error, "%s", pub);
    pgerror_take(out->last_error, out->sqlstate);
}

void follow_set_state_locked(struct follower *f, enum follow_state st, const char *err)
{
    if (f->state != st) {
        f->state = st;
        f->since = time(NULL);
    }
    f->listening = st == FOLLOW_CONNECTED;
    if (err)
        follow_public_error(f->error, sizeof f->error, err);
    else
        f->error[0] = '\0';
}

void follow_set_state(struct follower *f, enum follow_state st, const char *err)
{
    pthread_mutex_lock(&f->mu);
    follow_set_state_locked(f, st, err);
    pthread_mutex_unlock(&f->mu);
}

bool follow_same_server_locked(struct follower *f, const char *mine, char *err, size_t errlen)
{
    if (strcmp(mine, f->server_id) == 0)
        return true;
    snprintf(err, errlen, "the COPY connection reached another server than the follower: "
             "[%.150s] against [%.150s]; set a single host in conninfo", mine,
             f->server_id[0] ? f->server_id : "none");
    return false;
}

void follow_wake(struct follower *f)
{
    if (f->wake)
        f->wake(f->wake_arg);
}

/* libpq's messages end in a newline; the log's lines do not. */
static void chomp(char *err)
{
    for (size_t i = strlen(err); i > 0 && err[i - 1] == '\n'; i--)
        err[i - 1] = '\0';
}

void follow_retry(struct follower *f, char *err, bool had, unsigned *backoff)
{
    chomp(err);
    follow_set_state(f, had ? FOLLOW_RECONNECTING : FOLLOW_CONNECTING, err);
    log_fields(f->lg, LOG_LVL_WARN, NULL, "follower_retry", "follower (%s): %s; retrying in %u s",
               sync_method_name(f->ops->method), err, *backoff);
    follow_nap(&f->stop, follow_jitter_ms(&f->rng, *backoff));
    unsigned max = f->cfg->retry_max_seconds;
    *backoff = *backoff * 2 > max ? max : *backoff * 2;
}

void follow_lost(struct follower *f, char *err)
{
    chomp(err);
    pthread_mutex_lock(&f->mu);
    f->server_id[0] = '\0';
    follow_set_state_locked(f, FOLLOW_RECONNECTING, err);
    pthread_mutex_unlock(&f->mu);
    log_fields(f->lg, LOG_LVL_WARN, NULL, "follower_reconnect", "follower (%s): %s; reconnecting",
               sync_method_name(f->ops->method), err);
}

bool follow_probe_dead(int64_t sent, int64_t now, unsigned timeout_s, char *err, size_t errlen)
{
    if (now - sent <= (int64_t)timeout_s * 1000000000)
        return false;
    snprintf(err, errlen, "connection lost: no answer to a probe in %u s", timeout_s);
    return true;
}

unsigned follow_jitter_ms(unsigned *rng, unsigned seconds)
{
    unsigned r = (unsigned)rand_r(rng);
    double f = 0.75 + 0.5 * (double)(r % 1000) / 1000.0;
    return (unsigned)((double)seconds * 1000.0 * f);
}

void follow_nap(atomic_bool *stop, unsigned ms)
{
    while (ms > 0 && !atomic_load(stop)) {
        unsigned step = ms < 100 ? ms : 100;
        usleep(step * 1000u);
        ms -= step;
    }
}
