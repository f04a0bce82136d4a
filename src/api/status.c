/*
 * The daemon's status: one snapshot of its state (struct status), taken
 * for /stats, /readyz and /metrics, and the JSON documents of /stats and
 * /readyz, rendered section by section.  /healthz is here too: a constant.
 * The Prometheus text of /metrics is metrics.c's.
 */
#include "status.h"

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "pgerror.h"
#include "spell.h"
#include "table.h"

static const char *const degraded_names[DEGRADED_REASONS] = {
#define STATUS_DEGRADED_NAME(e, name) [DEGRADED_##e] = name,
    STATUS_DEGRADED_LIST(STATUS_DEGRADED_NAME)
#undef STATUS_DEGRADED_NAME
};

const char *status_degraded_name(enum status_degraded r)
{
    return (unsigned)r < DEGRADED_REASONS ? degraded_names[r] : NULL;
}

/* The first reason of STATUS_DEGRADED_LIST that holds for a degraded filter. */
static enum status_degraded degraded_why(const struct status_filter *f)
{
    if (!f->degraded)
        return DEGRADED_NO;
    if (f->table.saturated)
        return DEGRADED_SATURATED;
    if (strcmp(f->table.peer_check, "pending") == 0)
        return DEGRADED_PEER_UNCHECKED;
    if (f->table.held_for > 0)
        return DEGRADED_POST_LOG_CUT;
    if (strcmp(f->table.method, "none") == 0)
        return DEGRADED_NOT_FOLLOWED;
    return DEGRADED_STALE;
}

bool status_take(struct app *a, struct status *st, bool full)
{
    st->now = time(NULL);
    st->started = a->started;
    st->max_staleness = a->cfg->max_staleness;
    st->n = a->n_tables;
    st->ready = true;
    st->degraded = false;
    memset(&st->stats, 0, sizeof st->stats);
    for (unsigned i = 0; i < st->n; i++) {
        struct table *t = a->tables[i];
        struct status_filter *f = &st->filters[i];
        memset(f, 0, sizeof *f);
        f->name = table_name(t);
        f->target_fpp = table_sizing(t).false_positive_rate;
        if (a->source != NULL) {
            struct source_status ss;
            source_status(a->source, i, &ss);
            f->table = ss.table;
            f->conn = ss.conn;
        } else {
            table_status(t, &f->table);
        }
        if (full) {
            f->ready = table_filter_info(t, &f->info, f->layer, FILTER_MAX_LAYERS, &f->n_layers);
            if (!f->ready)
                f->info.kind = table_sizing(t).kind;    /* what its load will make */
            table_posts(t, &f->pending);
            f->posts_durable = table_durable(t);
            table_adaptive_info(t, &f->adaptive);
            f->published = publish_status(a->publishers ? a->publishers[i] : NULL, &f->pub);
        } else {
            f->ready = table_ready(t);
        }
        f->degraded = f->ready && f->table.degraded;
        f->why = degraded_why(f);
        f->followed = f->table.method[0] != '\0' && strcmp(f->table.method, "none") != 0;
        f->behind_keys = f->conn.mirror && f->conn.heard_seq > f->conn.mirror_seq
                         ? f->conn.heard_seq - f->conn.mirror_seq : 0;
        st->ready = st->ready && f->ready;
        st->degraded = st->degraded || f->degraded;
    }
    st->replica = false;
    for (unsigned i = 0; i < st->n; i++)
        st->replica = st->replica || strcmp(st->filters[i].table.method, "upstream") == 0;
    memset(&st->fleet, 0, sizeof st->fleet);
    if (full && a->fleet != NULL)
        fleethub_info(a->fleet, &st->fleet);
    if (!full) {
        stats_counters(a->stats, st->stats.counter);
        return true;
    }
    return stats_snapshot(a->stats, &st->stats);
}

void status_release(struct status *st)
{
    stats_snapshot_free(&st->stats);
}

/* ---------------------------------------------------------------- JSON -- */

/*
 * Helpers that build a document in place.  Each is a no-op on a NULL
 * object (jansson's set functions are); the first allocation that fails
 * marks the whole document failed, and the handler answers 500.
 */
struct doc {
    json_t *root;
    bool failed;
};

static void put(struct doc *d, json_t *o, const char *key, json_t *v)
{
    if (json_object_set_new(o, key, v) != 0)
        d->failed = true;
}

static void put_u64(struct doc *d, json_t *o, const char *key, uint64_t v)
{
    put(d, o, key, json_integer((json_int_t)v));
}

static void put_real(struct doc *d, json_t *o, const char *key, double v)
{
    put(d, o, key, json_real(v));
}

static void put_bool(struct doc *d, json_t *o, const char *key, bool v)
{
    put(d, o, key, json_boolean(v));
}

/* NULL puts a JSON null. */
static void put_str(struct doc *d, json_t *o, const char *key, const char *v)
{
    put(d, o, key, v != NULL ? json_string(v) : json_null());
}

static void put_time(struct doc *d, json_t *o, const char *key, time_t t)
{
    char buf[32];
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    put_str(d, o, key, buf);
}

/* A time, or null for 0 (not yet). */
static void put_when(struct doc *d, json_t *o, const char *key, time_t t)
{
    if (t)
        put_time(d, o, key, t);
    else
        put_str(d, o, key, NULL);
}

/* A new object under key; NULL if it could not be made (d is then failed). */
static json_t *put_object(struct doc *d, json_t *o, const char *key)
{
    json_t *c = json_object();
    put(d, o, key, c);
    return d->failed ? NULL : c;
}

/* The answer: the document as compact JSON, or 500 if any part failed. */
static struct reply doc_reply(struct doc *d, unsigned status)
{
    char *s = d->failed || d->root == NULL ? NULL : json_dumps(d->root, JSON_COMPACT);
    json_decref(d->root);
    return api_json_take(status, s);
}

/* One filter's figures, into o. */
static void filter_section(struct doc *d, json_t *o, const struct status_filter *f)
{
    put_bool(d, o, "ready", f->ready);
    put_str(d, o, "kind", filter_kind_name(f->info.kind));
    put_u64(d, o, "items", f->info.items);
    put_u64(d, o, "capacity", f->info.capacity);
    put_u64(d, o, "bits", f->info.bits);
    put_u64(d, o, "probes", f->info.probes);
    put_u64(d, o, "memory_bytes", f->info.memory_bytes);
    put_real(d, o, "fill_ratio", f->info.fill_ratio);
    put_real(d, o, "estimated_fpp", f->info.estimated_fpp);
    put_real(d, o, "target_fpp", f->target_fpp);
    put_u64(d, o, "layers", f->info.layers);
    put_bool(d, o, "saturated", f->info.saturated);
    put_real(d, o, "bits_per_key", f->info.bits_per_key);
    json_t *layers = json_array();
    for (unsigned i = 0; i < f->n_layers; i++) {
        json_t *l = json_object();
        put_u64(d, l, "items", f->layer[i].items);
        put_u64(d, l, "capacity", f->layer[i].capacity);
        put_real(d, l, "fill_ratio", f->layer[i].fill_ratio);
        put_real(d, l, "estimated_fpp", f->layer[i].estimated_fpp);
        if (json_array_append_new(layers, l) != 0)
            d->failed = true;
    }
    put(d, o, "layer", layers);
}

static void lookups_section(struct doc *d, json_t *o, const struct status *st)
{
    uint64_t hits = st->stats.counter[ST_LOOKUP_HIT], misses = st->stats.counter[ST_LOOKUP_MISS];
    put_u64(d, o, "total", hits + misses);
    put_u64(d, o, "hits", hits);
    put_u64(d, o, "misses", misses);
    put_u64(d, o, "unprovable", st->stats.counter[ST_UNPROVABLE]);
}

static void auth_section(struct doc *d, json_t *o, const struct status *st)
{
    const uint64_t *c = st->stats.counter;
    put_u64(d, o, "hits", c[ST_AUTH_HIT]);
    put_u64(d, o, "misses", c[ST_AUTH_MISS]);
    put_u64(d, o, "bypasses", c[ST_AUTH_BYPASS]);
    put_u64(d, o, "not_ready", c[ST_AUTH_NOT_READY]);
    put_u64(d, o, "malformed", c[ST_AUTH_MALFORMED]);
    put_u64(d, o, "degraded", c[ST_AUTH_DEGRADED]);
}

static void fast_path_section(struct doc *d, json_t *o, const struct status *st)
{
    const uint64_t *c = st->stats.counter;
    put_u64(d, o, "answers", c[ST_FAST_ANSWERS]);
    put_u64(d, o, "handoffs", c[ST_FAST_HANDOFFS]);
    put_u64(d, o, "relays", c[ST_FAST_RELAYS]);
}

/* "requests" (by status class) and "requests_by_endpoint" (by route, then code). */
static void requests_sections(struct doc *d, json_t *o, const struct status *st)
{
    uint64_t by_class[6] = { 0 };
    json_t *routes = json_object();
    for (unsigned e = 0; e < st->stats.slots; e++) {
        json_t *codes = json_object();
        for (unsigned k = 0; k < SS_COUNT; k++) {
            uint64_t n = st->stats.route[e].requests[k];
            if (n == 0)
                continue;
            unsigned code = stats_status_code(k);
            char key[16];
            snprintf(key, sizeof key, "%u", code);
            put_u64(d, codes, code ? key : "other", n);
            by_class[code ? code / 100 : 5] += n;
        }
        put(d, routes, stats_slot_name(&st->stats, e), codes);
    }
    json_t *classes = put_object(d, o, "requests");
    put_u64(d, classes, "2xx", by_class[2]);
    put_u64(d, classes, "4xx", by_class[4]);
    put_u64(d, classes, "5xx", by_class[5]);
    put_u64(d, classes, "total", by_class[1] + by_class[2] + by_class[3] + by_class[4] + by_class[5]);
    put(d, o, "requests_by_endpoint", routes);
}

/* What the guarded column is, by its load: its type and how an ID is spelled for it. */
static void column_section(struct doc *d, json_t *o, const struct table_status *ss)
{
    const struct table_ident *id = &ss->ident;
    put_str(d, o, "type", id->type_name[0] ? id->type_name : NULL);
    put_str(d, o, "spelling", id->relid ? spell_type_name(id->spell) : NULL);
    put_u64(d, o, "relid", id->relid);
    put_u64(d, o, "attnum", id->attnum > 0 ? (uint64_t)id->attnum : 0);
    put_u64(d, o, "not_a_value", ss->not_a_value);
}

static void last_load_section(struct doc *d, json_t *o, const struct table_status *ss)
{
    put_u64(d, o, "rows", ss->last_rows);
    put_real(d, o, "seconds", ss->last_seconds);
    put_when(d, o, "finished_at", ss->last_finished);
    put_str(d, o, "reason", ss->last_reason);
    put_str(d, o, "kind", ss->last_kind[0] ? ss->last_kind : NULL);
}

/* The change feed: how the filter catches up instead of copying the table. */
static void feed_section(struct doc *d, json_t *o, const struct table_status *ss)
{
    put_bool(d, o, "available", ss->feed_available);
    put_str(d, o, "position", ss->position[0] ? ss->position : NULL);
    put_u64(d, o, "copies", ss->copies);
    put_u64(d, o, "catchups", ss->catchups);
    put_u64(d, o, "rows_read", ss->feed_rows_read);
    put_u64(d, o, "last_rows_read", ss->last_feed_rows);
    put_u64(d, o, "too_old", ss->too_old);
}

static void snapshot_section(struct doc *d, json_t *o, const struct table_status *ss)
{
    put_str(d, o, "restored_from", ss->restored_from[0] ? ss->restored_from : NULL);
    put_str(d, o, "peer_check", ss->peer_check[0] ? ss->peer_check : NULL);
    put_u64(d, o, "writes", ss->snapshot_writes);
    put_u64(d, o, "write_failures", ss->snapshot_failures);
    put_when(d, o, "written_at", ss->snapshot_written);
}

static void rebuild_section(struct doc *d, json_t *o, const struct table_status *ss)
{
    put_bool(d, o, "running", ss->running);
    put_u64(d, o, "requested_id", ss->requested_id);
    put_u64(d, o, "completed_id", ss->completed_id);
    put_u64(d, o, "ok", ss->rebuilds_ok);
    put_u64(d, o, "failed", ss->rebuilds_failed);
    if (ss->next_rebuild_in > 0)
        put_real(d, o, "starts_in_seconds", ss->next_rebuild_in);
    if (ss->running) {
        put_u64(d, o, "id", ss->running_id);
        put_str(d, o, "reason", ss->running_reason);
        put_u64(d, o, "rows_copied", ss->running_rows);
        put_time(d, o, "started_at", ss->running_since);
    }
}

/* The connection of the table's follower, and its last error (the table's load first). */
static void source_section(struct doc *d, json_t *o, const struct status_filter *f)
{
    const struct follow_status *c = &f->conn;
    bool own = f->table.last_error[0] != '\0';
    const char *err = own ? f->table.last_error : c->last_error;
    const char *code = own ? f->table.last_sqlstate : c->sqlstate;
    put_str(d, o, "state", follow_state_name(c->state));
    put_time(d, o, "since", c->since);
    put_bool(d, o, "listening", c->listening);
    if (c->upstream[0])
        put_str(d, o, "upstream", c->upstream);
    if (err[0])
        put_str(d, o, "last_error", err);
    if (err[0] && code[0]) {
        put_str(d, o, "sqlstate", code);
        put_str(d, o, "hint", pgerror_hint(code));
    }
    if (c->slot[0]) {
        put_str(d, o, "slot", c->slot);
        put_bool(d, o, "slot_temporary", c->slot_temporary);
        if (c->slot_lag_bytes >= 0)
            put_u64(d, o, "slot_lag_bytes", (uint64_t)c->slot_lag_bytes);
        if (c->wal_status[0])
            put_str(d, o, "wal_status", c->wal_status);
    }
}

/* The horizon: how far back every committed row is known to be in the filter. */
static void horizon_section(struct doc *d, json_t *o, const struct status *st,
                            const struct status_filter *f)
{
    const struct table_status *ss = &f->table;
    put_bool(d, o, "degraded", ss->degraded);
    if (ss->degraded)
        put_str(d, o, "reason", ss->saturated
                ? "the filter is saturated: past [filter] max_layers it cannot keep "
                  "false_positive_rate; a rebuild from the table will"
                : strcmp(ss->peer_check, "pending") == 0
                ? "the filter is a peer's snapshot on probation: its absent answers are maybe "
                  "until a sample of the table's rows has been found in it"
                : ss->schema_why[0] ? ss->schema_why
                : ss->held_for > 0
                ? "POSTs acknowledged before this start may be lost (the POST log was cut or "
                  "damaged while stopped): absent ids are maybe until they would have expired"
                : strcmp(ss->method, "none") == 0
                ? "nothing follows the table (method_reason says why): no row committed since "
                  "its load is known to be in the filter"
                : "no proof that every row committed more than max_staleness ago is in the filter");
    put_real(d, o, "max_staleness_seconds", st->max_staleness);
    put_real(d, o, "degraded_seconds_total", ss->degraded_seconds);
    put_u64(d, o, "degraded_answers", st->stats.counter[ST_DEGRADED]);
    put(d, o, "age_seconds", ss->horizon_age >= 0 ? json_real(ss->horizon_age) : json_null());
}

/* A replica's table: what of its upstream's filter it mirrors, and where it waits. */
static void replication_section(struct doc *d, json_t *o, const struct status_filter *f)
{
    const struct follow_status *c = &f->conn;
    char hist[24];
    snprintf(hist, sizeof hist, "%016llx", (unsigned long long)c->mirror_history);
    put_str(d, o, "upstream", c->upstream[0] ? c->upstream : NULL);
    put_bool(d, o, "upstream_is_replica", c->upstream_replica);
    put_str(d, o, "history", c->mirror ? hist : NULL);
    put_u64(d, o, "seq", c->mirror_seq);
    put_u64(d, o, "upstream_seq", c->heard_seq);
    put_u64(d, o, "behind_keys", c->heard_seq > c->mirror_seq ? c->heard_seq - c->mirror_seq : 0);
    put_u64(d, o, "keys", c->mirror_keys);
    put_u64(d, o, "snapshots", c->mirror_snapshots);
    put_u64(d, o, "resumes", c->mirror_resumes);
    put_str(d, o, "commit_position", c->mirror_commit[0] ? c->mirror_commit : NULL);
    put_u64(d, o, "violations", c->mirror_violations);
    put_u64(d, o, "switches", c->upstream_switches);
    put_str(d, o, "waiting_for_snapshot", c->mirror_lost[0] ? c->mirror_lost : NULL);
}

/* The daemon's place in a fleet: upstream (it serves replicas) or replica, and its streams. */
static void fleet_section(struct doc *d, json_t *o, const struct status *st)
{
    char role[320];
    const struct status_filter *def = &st->filters[0];
    snprintf(role, sizeof role, "%s%s", st->replica ? "replica of " : "upstream",
             !st->replica ? "" : def->conn.upstream[0] ? def->conn.upstream : "(none yet)");
    put_str(d, o, "role", role);
    put_u64(d, o, "replicas_streaming", st->fleet.streams);
    put_u64(d, o, "streams_total", st->fleet.streams_total);
    put_u64(d, o, "streams_refused", st->fleet.refused);
    put_u64(d, o, "streams_cut_behind", st->fleet.cut_behind);
    put_u64(d, o, "snapshots_made", st->fleet.snapshots);
    put_u64(d, o, "horizon_frames", st->fleet.horizon_frames);
    put_u64(d, o, "ring_items", st->fleet.ring_capacity);
}

static void pending_section(struct doc *d, json_t *o, const struct table_posts *pi, bool durable)
{
    put_u64(d, o, "count", pi->count);
    put_u64(d, o, "bytes", pi->bytes);
    put_u64(d, o, "refused", pi->refused);
    put_u64(d, o, "expired", pi->expired);
    put_u64(d, o, "limit", pi->limit);
    put_u64(d, o, "max_bytes", pi->max_bytes);
    put_bool(d, o, "durable", durable);
}

/* Verified-absent IDs ([adaptive]): what the set holds and how it was learned. */
static void adaptive_section(struct doc *d, json_t *o, const struct table_adaptive *a)
{
    put_bool(d, o, "enabled", a->enabled);
    put_u64(d, o, "entries", a->entries);
    put_u64(d, o, "max_entries", a->max_entries);
    put_u64(d, o, "denied", a->denied);
    put_u64(d, o, "candidates", a->candidates);
    put_u64(d, o, "reported", a->reported);
    put_u64(d, o, "queued", a->queued);
    put_u64(d, o, "dropped", a->dropped);
    json_t *v = put_object(d, o, "verifications");
    put_u64(d, v, "absent", a->verified_absent);
    put_u64(d, v, "present", a->verified_present);
    put_u64(d, v, "failed", a->verify_failed);
    put_u64(d, v, "raced", a->raced);
    put_u64(d, o, "posted", a->posted);
    put_u64(d, o, "evictions", a->evictions);
    put_u64(d, o, "invalidations", a->invalidations);
    /* A replica's (issue 35): entries its upstream's stream brought, candidates it passed up. */
    put_u64(d, o, "received", a->received);
    put_u64(d, o, "forwarded", a->forwarded);
}

/*
 * A table's own sections after its filter's figures: how it is followed,
 * its loads, its follower's connection, its horizon, its journal, its
 * change feed and snapshots.  At the top level of /stats for the default
 * table (so a one-table daemon's /stats reads as it always did), and under
 * "filters"."NAME" for each table (table_sections).
 */
static void load_sections(struct doc *d, json_t *o, const struct status *st,
                          const struct status_filter *f)
{
    put_str(d, o, "method", f->table.method[0] ? f->table.method : NULL);
    put_str(d, o, "method_reason", f->table.method_why[0] ? f->table.method_why : NULL);
    column_section(d, put_object(d, o, "column"), &f->table);
    last_load_section(d, put_object(d, o, "last_load"), &f->table);
    rebuild_section(d, put_object(d, o, "rebuild"), &f->table);
    source_section(d, put_object(d, o, "source"), f);
    horizon_section(d, put_object(d, o, "horizon"), st, f);
    put_u64(d, o, "notifications", f->table.notifications);
    put_u64(d, o, "long_ids", f->table.long_ids);
    pending_section(d, put_object(d, o, "pending_posts"), &f->pending, f->posts_durable);
    feed_section(d, put_object(d, o, "feed"), &f->table);
    snapshot_section(d, put_object(d, o, "snapshot"), &f->table);
    if (strcmp(f->table.method, "upstream") == 0)
        replication_section(d, put_object(d, o, "replication"), f);
    adaptive_section(d, put_object(d, o, "adaptive"), &f->adaptive);
    put(d, o, "published", status_published_json(f));
}

static void table_sections(struct doc *d, json_t *o, const struct status *st,
                           const struct status_filter *f)
{
    filter_section(d, o, f);
    load_sections(d, o, st, f);
}

/* The /stats document; the key order is the documented one. */
static void stats_doc(struct doc *d, const struct status *st)
{
    const struct status_filter *def = &st->filters[0];
    json_t *o = d->root = json_object();
    if (o == NULL) {
        d->failed = true;
        return;
    }
    filter_section(d, o, def);
    lookups_section(d, put_object(d, o, "lookups"), st);
    put_u64(d, o, "inserts", st->stats.counter[ST_INSERTS]);
    auth_section(d, put_object(d, o, "auth"), st);
    fast_path_section(d, put_object(d, o, "fast_path"), st);
    requests_sections(d, o, st);
    load_sections(d, o, st, def);
    json_t *all = put_object(d, o, "filters");
    for (unsigned i = 0; i < st->n; i++)
        table_sections(d, put_object(d, all, st->filters[i].name), st, &st->filters[i]);
    fleet_section(d, put_object(d, o, "fleet"), st);
    put_u64(d, o, "uptime_seconds", (uint64_t)(st->now - st->started));
    put_str(d, o, "version", PACKAGE_VERSION);
}

/*
 * A table not ready whose last attempt (to connect, to choose its method,
 * to load) failed and that is not loading again now: "failing", not
 * "loading", so that a wrong password does not read as patience.
 */
static bool failing(const struct status_filter *f)
{
    return !f->ready && f->table.last_error[0] != '\0' && !f->table.running;
}

/* Ready when every table is; "not_ready" names those that are not. */
static void readyz_doc(struct doc *d, const struct status *st)
{
    json_t *o = d->root = json_object();
    if (o == NULL) {
        d->failed = true;
        return;
    }
    bool fails = false;
    for (unsigned i = 0; i < st->n; i++)
        fails = fails || failing(&st->filters[i]);
    put_str(d, o, "status", st->ready ? "ready" : fails ? "failing" : "loading");
    put_bool(d, o, "degraded", st->degraded);
    /* The first degraded filter's reason: a probe reads one field, null when none is. */
    const char *why = NULL;
    for (unsigned i = 0; i < st->n && why == NULL; i++)
        why = status_degraded_name(st->filters[i].why);
    put_str(d, o, "degraded_reason", why);
    if (!st->ready) {
        json_t *names = json_array();
        for (unsigned i = 0; i < st->n; i++)
            if (!st->filters[i].ready && json_array_append_new(names, json_string(st->filters[i].name)))
                d->failed = true;
        put(d, o, "not_ready", names);
    }
    /* Tables with a method chosen, and it is none: served, but nothing keeps them fresh. */
    json_t *unfollowed = json_array();
    for (unsigned i = 0; i < st->n; i++)
        if (st->filters[i].table.method_since != 0 && !st->filters[i].followed
            && json_array_append_new(unfollowed, json_string(st->filters[i].name)))
            d->failed = true;
    if (json_array_size(unfollowed) > 0)
        put(d, o, "not_followed", unfollowed);
    else
        json_decref(unfollowed);
    put_str(d, o, "method", st->filters[0].table.method[0] ? st->filters[0].table.method : NULL);
    put_str(d, o, "method_reason",
            st->filters[0].table.method_why[0] ? st->filters[0].table.method_why : NULL);
    source_section(d, put_object(d, o, "source"), &st->filters[0]);
    horizon_section(d, put_object(d, o, "horizon"), st, &st->filters[0]);
    if (st->n > 1) {
        json_t *all = put_object(d, o, "filters");
        for (unsigned i = 0; i < st->n; i++) {
            const struct status_filter *sf = &st->filters[i];
            json_t *f = put_object(d, all, sf->name);
            put_bool(d, f, "ready", sf->ready);
            put_bool(d, f, "degraded", sf->degraded);
            put_str(d, f, "degraded_reason", status_degraded_name(sf->why));
            put_str(d, f, "method", sf->table.method[0] ? sf->table.method : NULL);
            put_str(d, f, "method_reason", sf->table.method_why[0] ? sf->table.method_why : NULL);
        }
    }
}

struct reply status_stats(struct app *a, const struct api_request *rq)
{
    struct status st;
    struct doc d = { NULL, false };
    (void)rq;
    if (status_take(a, &st, true))
        stats_doc(&d, &st);
    else
        d.failed = true;
    status_release(&st);
    return doc_reply(&d, MHD_HTTP_OK);
}

struct reply status_readyz(struct app *a, const struct api_request *rq)
{
    struct status st;
    struct doc d = { NULL, false };
    (void)rq;
    status_take(a, &st, false);
    readyz_doc(&d, &st);
    status_release(&st);
    return doc_reply(&d, st.ready ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE);
}
struct reply status_healthz(struct app *a, const struct api_request *rq)
{
    (void)rq;
    return api_shared(MHD_HTTP_OK, a->prebuilt->healthz);
}
