/*
 * What the ways of following share: choosing a table's method from what
 * the server offers, the follower's common part, and small helpers
 * (public errors, jittered backoff, naps that end on stop).
 */
#include "follow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "feed.h"
#include "loader.h"
#include "pgerror.h"

const char *follow_state_name(enum follow_state s)
{
    switch (s) {
    case FOLLOW_CONNECTING: return "connecting";
    case FOLLOW_CONNECTED: return "connected";
    case FOLLOW_RECONNECTING: return "reconnecting";
    }
    return "unknown";
}

const char *follow_method_name(enum follow_method m)
{
    switch (m) {
    case FOLLOW_NONE: return "none";
    case FOLLOW_LOGICAL: return "logical";
    case FOLLOW_FEED: return "feed";
    case FOLLOW_NOTIFY: return "notify";
    }
    return "none";
}

const struct follow_ops *follow_method_ops(enum follow_method m)
{
    switch (m) {
    case FOLLOW_LOGICAL: return &follow_logical_ops;
    case FOLLOW_FEED: return &follow_feed_ops;
    case FOLLOW_NOTIFY: return &follow_notify_ops;
    case FOLLOW_NONE: break;
    }
    return NULL;
}

struct follower *follow_new(const struct follow_ops *ops, const struct config *cfg,
                            const struct log *lg, void (*wake)(void *arg), void *arg)
{
    struct follower *f = ops->create();
    if (f == NULL)
        return NULL;
    f->ops = ops;
    f->cfg = cfg;
    f->lg = lg;
    atomic_init(&f->n, 0);
    f->wake = wake;
    f->wake_arg = arg;
    atomic_init(&f->stop, false);
    return f;
}

void follow_free(struct follower *f)
{
    if (f != NULL)
        f->ops->free(f);
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

static bool one_row(PGconn *conn, PGresult *r, int fields, const char *what, char *err,
                    size_t errlen)
{
    bool ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 && PQnfields(r) == fields;
    if (!ok)
        loader_set_result_error(err, errlen, what, conn, r);
    return ok;
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
    /* pg_replication_slots is readable by every role. */
    PGresult *r = PQexecParams(conn,
        "SELECT current_setting('wal_level') = 'logical', "
        "(SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user), "
        "(SELECT count(*) FROM pg_replication_slots WHERE plugin = 'pgoutput' "
        "   AND slot_name LIKE 'bloomguard%' AND slot_name <> $1)",
        1, NULL, params, NULL, NULL, 0);
    bool ok = one_row(conn, r, 3, "cannot read what the server offers", err, errlen);
    if (ok) {
        out->wal_logical = is_true(r, 0);
        out->may_replicate = is_true(r, 1);
        out->other_slots = (unsigned)strtoul(PQgetvalue(r, 0, 2), NULL, 10);
    }
    PQclear(r);
    return ok;
}

bool follow_probe_table(PGconn *conn, const struct config *cfg, const struct filter_config *fc,
                        struct follow_table_offer *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    char *qtbl = NULL, *qcol = NULL;
    if (!loader_quote_table(conn, fc->table, fc->column, &qtbl, &qcol, err, errlen))
        return false;
    /*
     * The publication must publish inserts and carry the column (a column
     * list without it would stream rows without their IDs); the trigger
     * must be enabled and notify this filter's channel.
     */
    char chan[96];
    snprintf(chan, sizeof chan, "pg_notify('%s'", fc->channel);     /* channels are [A-Za-z0-9_] */
    const char *params[4] = { qtbl, fc->column, cfg->publication, chan };
    PGresult *r = PQexecParams(conn,
        "SELECT EXISTS (SELECT 1 FROM pg_publication_tables pt JOIN pg_publication p "
        "                 ON p.pubname = pt.pubname "
        "                WHERE pt.pubname = $3 AND p.pubinsert "
        "                  AND format('%I.%I', pt.schemaname, pt.tablename)::regclass = $1::regclass "
        "                  AND $2 = ANY (pt.attnames)), "
        "       EXISTS (SELECT 1 FROM pg_trigger t JOIN pg_proc f ON f.oid = t.tgfoid "
        "                WHERE t.tgrelid = $1::regclass AND t.tgname = 'bloomguard_notify' "
        "                  AND t.tgenabled <> 'D' AND strpos(f.prosrc, $4) > 0)",
        4, NULL, params, NULL, NULL, 0);
    bool ok = one_row(conn, r, 2, "cannot read how the table is watched", err, errlen);
    if (ok) {
        out->published = is_true(r, 0);
        out->notify_trigger = is_true(r, 1);
    }
    PQclear(r);
    if (ok) {
        char why[256] = "";
        ok = feed_available(conn, fc->table, fc->column, &out->feed, why, sizeof why);
        if (!ok)
            snprintf(err, errlen, "%s", why);
    }
    free(qtbl);
    free(qcol);
    return ok;
}

enum follow_method follow_choose(const struct config *cfg, const struct filter_config *fc,
                                 const struct follow_offer *srv,
                                 const struct follow_table_offer *tbl, char *why, size_t whylen)
{
    enum follow_method want = (enum follow_method)fc->method;
    const char *watch = "SELECT bloomguard_watch";
    switch (want) {
    case FOLLOW_LOGICAL:
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
            return FOLLOW_LOGICAL;
        }
        return FOLLOW_NONE;
    case FOLLOW_FEED:
        if (!tbl->feed) {
            snprintf(why, whylen, "method feed: the change feed does not serve %s.%s "
                     "(%s('%s', '%s', method => 'feed'))", fc->table, fc->column, watch,
                     fc->table, fc->column);
            return FOLLOW_NONE;
        }
        snprintf(why, whylen, "method feed, as configured");
        return FOLLOW_FEED;
    case FOLLOW_NOTIFY:
        if (!tbl->notify_trigger) {
            snprintf(why, whylen, "method notify: no bloomguard_notify trigger on %s notifies "
                     "channel %s (%s('%s', '%s', '%s', method => 'notify'))", fc->table,
                     fc->channel, watch, fc->table, fc->column, fc->channel);
            return FOLLOW_NONE;
        }
        snprintf(why, whylen, "method notify, as configured");
        return FOLLOW_NOTIFY;
    case FOLLOW_NONE:
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
        return FOLLOW_LOGICAL;
    }
    if (tbl->feed) {
        if (logical)
            snprintf(why, whylen, "auto: feed: %u other daemons already decode this server's "
                     "WAL (logical_max_daemons = %u)", srv->other_slots, cfg->logical_max_daemons);
        else
            snprintf(why, whylen, "auto: feed (%s)", !srv->wal_logical ? "wal_level is not logical"
                     : !srv->may_replicate ? "this role may not replicate"
                     : "the table is not in the publication");
        return FOLLOW_FEED;
    }
    if (tbl->notify_trigger) {
        snprintf(why, whylen, "auto: notify (the table's trigger notifies channel %s)",
                 fc->channel);
        return FOLLOW_NOTIFY;
    }
    /* Published, so bloomguard_watch ran: name what the server or the role lacks, not the watch. */
    if (tbl->published)
        snprintf(why, whylen, "nothing follows %s.%s: in publication %s, but %s; until then "
                 "absent IDs answer \"maybe\"", fc->table, fc->column, cfg->publication,
                 !srv->wal_logical ? "wal_level is not logical (set it and restart the server)"
                 : "this role may not replicate (ALTER ROLE ... REPLICATION)");
    else
        snprintf(why, whylen, "nothing follows %s.%s: %s('%s', '%s') (it picks logical where "
                 "wal_level = logical, else the feed); until then absent IDs answer \"maybe\"",
                 fc->table, fc->column, watch, fc->table, fc->column);
    return FOLLOW_NONE;
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
