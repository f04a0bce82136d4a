/*
 * /metrics: the status snapshot (status.h) as Prometheus text, from a
 * table with one row per metric family, so that a figure is read in one
 * place and a metric name is written once; bloomguard -h and the man page
 * list the families from the same table.
 */
#include "metrics.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "stats.h"
#include "status.h"


enum mtype { MT_COUNTER, MT_GAUGE, MT_HISTOGRAM };

/* How a value is read from the snapshot and written. */
enum vkind {
    V_END,          /* no more samples */
    V_U64,          /* uint64_t */
    V_UINT,         /* unsigned */
    V_BOOL,         /* bool, as 0 or 1 */
    V_TIME,         /* time_t, Unix seconds */
    V_SEC,          /* double, 6 decimals */
    V_FPP,          /* double, 8 decimals */
    V_BITS,         /* double, a count of bits: written / 8, in bytes (base units) */
    V_ONE           /* the constant 1 (info metrics); no field */
};

/*
 * Where a sample's offset points: the snapshot, or a table's section of it
 * (such rows get one series per table, labelled filter="NAME").
 */
enum vbase { IN_STATUS, IN_FILTER };

struct sample {
    const char *labels;     /* what goes between the braces; NULL: no labels */
    enum vkind kind;
    size_t off;             /* of the value in its base */
};

struct metric {
    const char *name;       /* without the bloomguard_ prefix */
    enum mtype type;
    const char *help;
    enum vbase base;
    struct sample sample[6];    /* up to the first V_END */
    /* Families whose series come from a loop: writes them instead of sample[]. */
    void (*series)(FILE *o, const char *name, const struct status *st);
};

static void requests_series(FILE *o, const char *name, const struct status *st)
{
    for (unsigned e = 0; e < st->stats.slots; e++)
        for (unsigned k = 0; k < SS_COUNT; k++) {
            uint64_t n = st->stats.route[e].requests[k];
            if (n == 0)
                continue;
            unsigned code = stats_status_code(k);
            fprintf(o, "bloomguard_%s{endpoint=\"%s\",code=\"%s%.0u\"} %llu\n", name,
                    stats_slot_name(&st->stats, e), code ? "" : "other", code, (unsigned long long)n);
        }
}

static void duration_series(FILE *o, const char *name, const struct status *st)
{
    for (unsigned e = 0; e < st->stats.slots; e++) {
        const struct stats_route *r = &st->stats.route[e];
        uint64_t cum = 0;
        for (unsigned b = 0; b <= STATS_BUCKETS; b++)
            cum += r->latency_bucket[b];
        if (cum == 0)
            continue;
        const char *ep = stats_slot_name(&st->stats, e);
        cum = 0;
        for (unsigned b = 0; b < STATS_BUCKETS; b++) {
            cum += r->latency_bucket[b];
            fprintf(o, "bloomguard_%s_bucket{endpoint=\"%s\",le=\"%g\"} %llu\n", name, ep,
                    stats_bucket_bounds[b], (unsigned long long)cum);
        }
        cum += r->latency_bucket[STATS_BUCKETS];
        fprintf(o, "bloomguard_%s_bucket{endpoint=\"%s\",le=\"+Inf\"} %llu\n", name, ep,
                (unsigned long long)cum);
        fprintf(o, "bloomguard_%s_sum{endpoint=\"%s\"} %.9f\n", name, ep,
                (double)r->latency_sum_ns * 1e-9);
        fprintf(o, "bloomguard_%s_count{endpoint=\"%s\"} %llu\n", name, ep, (unsigned long long)cum);
    }
}

/* Per table: its follower's connection state, one series per state (1 for the current one). */
static void source_state_series(FILE *o, const char *name, const struct status *st)
{
    for (unsigned i = 0; i < st->n; i++)
        for (enum follow_state s = FOLLOW_CONNECTING; s <= FOLLOW_NONE; s++)
            fprintf(o, "bloomguard_%s{filter=\"%s\",state=\"%s\"} %d\n", name,
                    st->filters[i].name, follow_state_name(s), st->filters[i].conn.state == s ? 1 : 0);
}

/* Per table: why it is degraded, one series per reason (1 for the current one, all 0 when fresh). */
static void filter_degraded_series(FILE *o, const char *name, const struct status *st)
{
    for (unsigned i = 0; i < st->n; i++)
        for (enum status_degraded r = DEGRADED_NO + 1; r < DEGRADED_REASONS; r++)
            fprintf(o, "bloomguard_%s{filter=\"%s\",reason=\"%s\"} %d\n", name,
                    st->filters[i].name, status_degraded_name(r), st->filters[i].why == r ? 1 : 0);
}

/* Answers given while the server answered late, by endpoint (those that had some). */
static void late_series(FILE *o, const char *name, const struct status *st)
{
    for (unsigned e = 0; e < st->stats.slots; e++)
        if (st->stats.route[e].late > 0)
            fprintf(o, "bloomguard_%s{endpoint=\"%s\"} %llu\n", name, stats_slot_name(&st->stats, e),
                    (unsigned long long)st->stats.route[e].late);
}

/* A gauge of the server's load: nothing while it is not known (-1). */
static void gauge_series(FILE *o, const char *name, int64_t v, double scale)
{
    if (v < 0)
        return;
    if (scale == 1)
        fprintf(o, "bloomguard_%s %lld\n", name, (long long)v);
    else
        fprintf(o, "bloomguard_%s %.6f\n", name, (double)v * scale);
}
#define GAUGE_SERIES(fn, g, scale) \
    static void fn(FILE *o, const char *name, const struct status *st) \
    { gauge_series(o, name, st->stats.gauge[g], scale); }
GAUGE_SERIES(connections_series, SG_CONNECTIONS, 1)
GAUGE_SERIES(connections_max_series, SG_CONNECTIONS_MAX, 1)
GAUGE_SERIES(listen_queue_series, SG_LISTEN_QUEUE, 1)
GAUGE_SERIES(listen_queue_max_series, SG_LISTEN_QUEUE_MAX, 1)
GAUGE_SERIES(answer_delay_series, SG_ANSWER_DELAY_US, 1e-6)
#undef GAUGE_SERIES

/* Per table whose method is chosen: which one follows it. */
static void follow_method_series(FILE *o, const char *name, const struct status *st)
{
    for (unsigned i = 0; i < st->n; i++)
        if (st->filters[i].table.method[0] != '\0')
            fprintf(o, "bloomguard_%s{filter=\"%s\",method=\"%s\"} 1\n", name,
                    st->filters[i].name, st->filters[i].table.method);
}

/*
 * Per table followed through a replication slot whose lag is known: the
 * WAL the slot holds back (the server's current WAL position minus the
 * slot's confirmed_flush_lsn, as the follower's last probe read it).
 * Tables sharing a follower share its slot, and so the value.
 */
static void slot_lag_series(FILE *o, const char *name, const struct status *st)
{
    for (unsigned i = 0; i < st->n; i++) {
        const struct status_filter *f = &st->filters[i];
        if (strcmp(f->table.method, sync_method_name(SYNC_LOGICAL)) != 0 || f->conn.slot[0] == '\0'
            || f->conn.slot_lag_bytes < 0)
            continue;
        fprintf(o, "bloomguard_%s{filter=\"%s\",slot=\"%s\"} %lld\n", name, f->name,
                f->conn.slot, (long long)f->conn.slot_lag_bytes);
    }
}

#define S(field) offsetof(struct status, field)
#define F(field) offsetof(struct status_filter, field)
#define COUNTER(c) V_U64, S(stats.counter[c])

/* Every metric family, in the order of the exposition. */
static const struct metric metrics[] = {
    { "requests_total", MT_COUNTER, "HTTP requests answered, by endpoint and status code.",
      IN_STATUS, { { 0 } }, requests_series },
    { "request_duration_seconds", MT_HISTOGRAM,
      "Time from the first byte of a request to its response being queued.",
      IN_STATUS, { { 0 } }, duration_series },
    { "requests_late_total", MT_COUNTER,
      "Answers given while the daemon's own probe waited more than 1 s for its answer, by "
      "endpoint: each of them had waited about as long, past the 1 s the shipped proxy "
      "configurations give auth before they fail open.",
      IN_STATUS, { { 0 } }, late_series },
    { "connections", MT_GAUGE, "Open client connections.", IN_STATUS, { { 0 } }, connections_series },
    { "connections_max", MT_GAUGE,
      "Connections served at most (max_connections, or less if the open file limit is lower).",
      IN_STATUS, { { 0 } }, connections_max_series },
    { "connections_refused_total", MT_COUNTER,
      "New connections closed at once because max_connections were open (shed).", IN_STATUS,
      { { NULL, COUNTER(ST_CONN_REFUSED) } }, NULL },
    { "listen_queue", MT_GAUGE,
      "Connections the kernel accepted that wait for the daemon to take them (TCP listen only).",
      IN_STATUS, { { 0 } }, listen_queue_series },
    { "listen_queue_max", MT_GAUGE,
      "The listen backlog: past it the kernel drops new connections (TCP listen only).",
      IN_STATUS, { { 0 } }, listen_queue_max_series },
    { "answer_delay_seconds", MT_GAUGE,
      "How long the daemon's own probe (GET /healthz on its listen address, 4 times a second) "
      "waited for its last answer, or waits for the one due: the wait of any request now.",
      IN_STATUS, { { 0 } }, answer_delay_series },
    { "probe_late_total", MT_COUNTER,
      "Probes answered later than 1 s (the timeout the shipped proxy configurations give /auth, "
      "past which they fail open), or not at all.", IN_STATUS,
      { { NULL, COUNTER(ST_PROBE_LATE) } }, NULL },
    { "lookups_total", MT_COUNTER, "IDs looked up (single and batch), by result.", IN_STATUS,
      { { "result=\"hit\"", COUNTER(ST_LOOKUP_HIT) }, { "result=\"miss\"", COUNTER(ST_LOOKUP_MISS) } },
      NULL },
    { "unprovable_answers_total", MT_COUNTER,
      "Answers given as maybe because the ID's spelling cannot be proven absent for the column's type.",
      IN_STATUS, { { NULL, COUNTER(ST_UNPROVABLE) } }, NULL },
    { "inserts_total", MT_COUNTER, "IDs inserted through POST /ids.", IN_STATUS,
      { { NULL, COUNTER(ST_INSERTS) } }, NULL },
    { "auth_decisions_total", MT_COUNTER, "/auth answers, by decision.", IN_STATUS,
      { { "result=\"hit\"", COUNTER(ST_AUTH_HIT) },
        { "result=\"miss\"", COUNTER(ST_AUTH_MISS) },
        { "result=\"bypass\"", COUNTER(ST_AUTH_BYPASS) },
        { "result=\"not_ready\"", COUNTER(ST_AUTH_NOT_READY) },
        { "result=\"malformed\"", COUNTER(ST_AUTH_MALFORMED) },
        { "result=\"degraded\"", COUNTER(ST_AUTH_DEGRADED) } }, NULL },
    { "fast_path_answers_total", MT_COUNTER,
      "Requests the fast path answered itself, without libmicrohttpd.", IN_STATUS,
      { { NULL, COUNTER(ST_FAST_ANSWERS) } }, NULL },
    { "fast_path_handoffs_total", MT_COUNTER,
      "Connections the fast path passed to libmicrohttpd, by how: at their first request, "
      "unread, or later, relayed.", IN_STATUS,
      { { "how=\"unread\"", COUNTER(ST_FAST_HANDOFFS) },
        { "how=\"relayed\"", COUNTER(ST_FAST_RELAYS) } }, NULL },
    { "notifications_applied_total", MT_COUNTER, "IDs added from PostgreSQL NOTIFY.", IN_FILTER,
      { { NULL, V_U64, F(table.notifications) } }, NULL },
    { "pending_posts", MT_GAUGE,
      "POSTed ids kept across rebuilds until a COPY shows them in the table.", IN_FILTER,
      { { NULL, V_U64, F(pending.count) } }, NULL },
    { "pending_posts_bytes", MT_GAUGE, "Bytes of the POSTed ids in the journal.", IN_FILTER,
      { { NULL, V_U64, F(pending.bytes) } }, NULL },
    /* The limits beside the figures, so that an alert compares the two rather than copy the keys. */
    { "pending_posts_limit", MT_GAUGE,
      "POSTed ids the journal may hold ([sync] pending_limit): past it POST /ids is refused (507).",
      IN_FILTER, { { NULL, V_U64, F(pending.limit) } }, NULL },
    { "pending_posts_limit_bytes", MT_GAUGE,
      "Bytes of POSTed ids the journal may hold ([sync] pending_max_bytes): past it POST /ids is "
      "refused (507).", IN_FILTER, { { NULL, V_U64, F(pending.max_bytes) } }, NULL },
    { "pending_posts_refused_total", MT_COUNTER,
      "POSTed ids refused (507) because the journal was full.", IN_FILTER,
      { { NULL, V_U64, F(pending.refused) } }, NULL },
    { "pending_posts_expired_total", MT_COUNTER, "Journal entries dropped after pending_ttl.",
      IN_FILTER, { { NULL, V_U64, F(pending.expired) } }, NULL },
    { "degraded", MT_GAUGE,
      "1 while absent answers are given as maybe: the horizon is older than max_staleness.",
      IN_FILTER, { { NULL, V_BOOL, F(degraded) } }, NULL },
    { "filter_degraded", MT_GAUGE,
      "1 for the reason the filter is degraded now (saturated, peer_unchecked, post_log_cut, "
      "not_followed, stale), 0 for the others.",
      IN_STATUS, { { 0 } }, filter_degraded_series },
    { "degraded_seconds_total", MT_COUNTER, "Time spent degraded.", IN_FILTER,
      { { NULL, V_SEC, F(table.degraded_seconds) } }, NULL },
    { "degraded_answers_total", MT_COUNTER,
      "Answers that would have been 404 or deny, given as 200 or allow while degraded.",
      IN_STATUS, { { NULL, COUNTER(ST_DEGRADED) } }, NULL },
    { "horizon_age_seconds", MT_GAUGE,
      "Seconds since the horizon: every row committed before it is in the filter (-1: none yet).",
      IN_FILTER, { { NULL, V_SEC, F(table.horizon_age) } }, NULL },
    { "rebuilds_total", MT_COUNTER, "Filter loads and rebuilds, by result.", IN_FILTER,
      { { "result=\"ok\"", V_U64, F(table.rebuilds_ok) },
        { "result=\"failed\"", V_U64, F(table.rebuilds_failed) } }, NULL },
    { "rebuild_duration_seconds_total", MT_COUNTER, "Time spent copying IDs in successful rebuilds.",
      IN_FILTER, { { NULL, V_SEC, F(table.rebuild_seconds_sum) } }, NULL },
    { "last_rebuild_duration_seconds", MT_GAUGE, "Duration of the last successful rebuild.",
      IN_FILTER, { { NULL, V_SEC, F(table.last_seconds) } }, NULL },
    { "last_rebuild_rows", MT_GAUGE, "Rows loaded by the last successful rebuild.", IN_FILTER,
      { { NULL, V_U64, F(table.last_rows) } }, NULL },
    { "loads_total", MT_COUNTER,
      "Successful updates of the filter from PostgreSQL, by kind: a COPY of the table or a "
      "catch-up from the change feed.", IN_FILTER,
      { { "kind=\"copy\"", V_U64, F(table.copies) },
        { "kind=\"catchup\"", V_U64, F(table.catchups) } }, NULL },
    { "feed_rows_read_total", MT_COUNTER, "Rows the catch-ups read from the change feed.",
      IN_FILTER, { { NULL, V_U64, F(table.feed_rows_read) } }, NULL },
    { "feed_too_old_total", MT_COUNTER,
      "Catch-ups the change feed could not serve (position too old): the table was copied.",
      IN_FILTER, { { NULL, V_U64, F(table.too_old) } }, NULL },
    { "snapshot_writes_total", MT_COUNTER, "Snapshot files written, by result.", IN_FILTER,
      { { "result=\"ok\"", V_U64, F(table.snapshot_writes) },
        { "result=\"failed\"", V_U64, F(table.snapshot_failures) } }, NULL },
    { "snapshot_written_time_seconds", MT_GAUGE,
      "Unix time of the last snapshot written (0: none).", IN_FILTER,
      { { NULL, V_TIME, F(table.snapshot_written) } }, NULL },
    { "rebuild_running", MT_GAUGE, "1 while a rebuild runs.", IN_FILTER,
      { { NULL, V_BOOL, F(table.running) } }, NULL },
    { "ready", MT_GAUGE, "1 once a filter is loaded and served.", IN_FILTER,
      { { NULL, V_BOOL, F(ready) } }, NULL },
    { "adaptive_entries", MT_GAUGE,
      "IDs verified absent and denied now ([adaptive]): false positives fixed.", IN_FILTER,
      { { NULL, V_U64, F(adaptive.entries) } }, NULL },
    { "adaptive_denied_total", MT_COUNTER,
      "Answers the verified-absent set turned from maybe into absent (404 or deny).", IN_FILTER,
      { { NULL, V_U64, F(adaptive.denied) } }, NULL },
    { "adaptive_candidates_total", MT_COUNTER,
      "IDs queued for a lookup in PostgreSQL, by source: a hot maybe, or a POST /absent report.",
      IN_FILTER, { { "source=\"hot\"", V_U64, F(adaptive.candidates) },
                   { "source=\"report\"", V_U64, F(adaptive.reported) } }, NULL },
    { "adaptive_dropped_total", MT_COUNTER,
      "Candidates not queued because the verifier's queue was full.", IN_FILTER,
      { { NULL, V_U64, F(adaptive.dropped) } }, NULL },
    { "adaptive_verifications_total", MT_COUNTER,
      "Candidates looked up in PostgreSQL, by result; raced: absent, but an insert of the ID "
      "came after the lookup's ticket, so not believed.", IN_FILTER,
      { { "result=\"absent\"", V_U64, F(adaptive.verified_absent) },
        { "result=\"present\"", V_U64, F(adaptive.verified_present) },
        { "result=\"failed\"", V_U64, F(adaptive.verify_failed) },
        { "result=\"raced\"", V_U64, F(adaptive.raced) } }, NULL },
    { "adaptive_posted_total", MT_COUNTER,
      "Candidates not looked up because the POST journal may hold them.", IN_FILTER,
      { { NULL, V_U64, F(adaptive.posted) } }, NULL },
    { "adaptive_evictions_total", MT_COUNTER,
      "Verified-absent IDs evicted to make room (they answer maybe again).", IN_FILTER,
      { { NULL, V_U64, F(adaptive.evictions) } }, NULL },
    { "adaptive_invalidations_total", MT_COUNTER,
      "Verified-absent IDs an insert of theirs removed (followed, POSTed or copied).", IN_FILTER,
      { { NULL, V_U64, F(adaptive.invalidations) } }, NULL },
    { "adaptive_received_total", MT_COUNTER,
      "A replica's verified-absent IDs brought by its upstream's stream.", IN_FILTER,
      { { NULL, V_U64, F(adaptive.received) } }, NULL },
    { "adaptive_forwarded_total", MT_COUNTER,
      "A replica's hot maybe IDs passed up to its upstream (POST /absent).", IN_FILTER,
      { { NULL, V_U64, F(adaptive.forwarded) } }, NULL },
    { "filter_items", MT_GAUGE, "Distinct IDs added to the live filter (duplicates not counted).",
      IN_FILTER, { { NULL, V_U64, F(info.items) } }, NULL },
    { "filter_capacity", MT_GAUGE, "IDs the live filter was sized for.", IN_FILTER,
      { { NULL, V_U64, F(info.capacity) } }, NULL },
    /* Not "filter_bits": promtool rejects "bits" as a unit (bytes is the base unit). */
    { "filter_bit_array_size", MT_GAUGE, "Number of bits in the live filter's bit array.",
      IN_FILTER, { { NULL, V_U64, F(info.bits) } }, NULL },
    { "filter_memory_bytes", MT_GAUGE, "Memory held by the live filter.", IN_FILTER,
      { { NULL, V_U64, F(info.memory_bytes) } }, NULL },
    { "filter_fill_ratio", MT_GAUGE, "Share of the live filter's bits that are set.", IN_FILTER,
      { { NULL, V_SEC, F(info.fill_ratio) } }, NULL },
    { "filter_estimated_fpp", MT_GAUGE,
      "False-positive rate estimated from the fill ratio (of all layers together).", IN_FILTER, { { NULL, V_FPP, F(info.estimated_fpp) } }, NULL },
    { "filter_target_fpp", MT_GAUGE, "Configured false-positive rate.", IN_FILTER,
      { { NULL, V_FPP, F(target_fpp) } }, NULL },
    { "filter_layers", MT_GAUGE,
      "Layers of the live filter: 1, and one more each time it grew in memory.", IN_FILTER,
      { { NULL, V_UINT, F(info.layers) } }, NULL },
    { "filter_size_per_key_bytes", MT_GAUGE,
      "Bit array bytes per ID of the live filter, all layers counted (/stats bits_per_key / 8).",
      IN_FILTER, { { NULL, V_BITS, F(info.bits_per_key) } }, NULL },
    /* 0 where nothing is published: then the filter is in bigmap's private memory. */
    { "filter_published_resident_bytes", MT_GAUGE,
      "Bytes of the live filter's published file resident in the daemon's mapping.", IN_FILTER,
      { { NULL, V_U64, F(pub.resident_bytes) } }, NULL },
    { "filter_published_huge_bytes", MT_GAUGE,
      "Bytes of the live filter's published file mapped by huge pages (a tmpfs mounted "
      "huge=within_size).", IN_FILTER, { { NULL, V_U64, F(pub.huge_bytes) } }, NULL },
    { "source_state", MT_GAUGE,
      "State of the connection following the filter's table (1 for the current one).", IN_STATUS,
      { { 0 } }, source_state_series },
    { "source_state_since_seconds", MT_GAUGE, "Unix time the follower entered its state.",
      IN_FILTER, { { NULL, V_TIME, F(conn.since) } }, NULL },
    { "follow_method_info", MT_GAUGE,
      "Always 1: how the filter's table is followed (logical, feed, notify, upstream, none) is a "
      "label.",
      IN_STATUS, { { 0 } }, follow_method_series },
    { "slot_lag_bytes", MT_GAUGE,
      "WAL the replication slot holds back: the server's current WAL position minus the slot's "
      "confirmed_flush_lsn (method logical only).", IN_STATUS, { { 0 } }, slot_lag_series },
    { "replication_streams", MT_GAUGE,
      "Replicas streaming from this daemon now (GET /replicate, [fleet] max_replicas).", IN_STATUS,
      { { NULL, V_UINT, S(fleet.streams) } }, NULL },
    { "replica_behind_keys", MT_GAUGE,
      "A replica's filter: keys its upstream said it has that the stream has not delivered yet "
      "(0 for a table not followed from an upstream).", IN_FILTER,
      { { NULL, V_U64, F(behind_keys) } }, NULL },
    { "process_start_time_seconds", MT_GAUGE, "Unix time the process started.", IN_STATUS,
      { { NULL, V_TIME, S(started) } }, NULL },
    { "build_info", MT_GAUGE, "Always 1; the version is a label.", IN_STATUS,
      { { "version=\"" PACKAGE_VERSION "\"", V_ONE, 0 } }, NULL },
};

#undef COUNTER
#undef F
#undef S

static void write_value(FILE *o, enum vkind kind, const char *p)
{
    switch (kind) {
    case V_U64: {
        uint64_t v;
        memcpy(&v, p, sizeof v);
        fprintf(o, "%llu\n", (unsigned long long)v);
        break;
    }
    case V_UINT: {
        unsigned v;
        memcpy(&v, p, sizeof v);
        fprintf(o, "%u\n", v);
        break;
    }
    case V_BOOL: {
        bool v;
        memcpy(&v, p, sizeof v);
        fprintf(o, "%d\n", v ? 1 : 0);
        break;
    }
    case V_TIME: {
        time_t v;
        memcpy(&v, p, sizeof v);
        fprintf(o, "%lld\n", (long long)v);
        break;
    }
    case V_SEC:
    case V_FPP:
    case V_BITS: {
        double v;
        memcpy(&v, p, sizeof v);
        fprintf(o, kind == V_FPP ? "%.8f\n" : "%.6f\n", kind == V_BITS ? v / 8 : v);
        break;
    }
    case V_ONE:
    case V_END:
        fputs("1\n", o);
        break;
    }
}

static void write_family(FILE *o, const struct metric *m, const struct status *st)
{
    static const char *const type[] = { "counter", "gauge", "histogram" };
    fprintf(o, "# HELP bloomguard_%s %s\n# TYPE bloomguard_%s %s\n", m->name, m->help, m->name,
            type[m->type]);
    if (m->series != NULL) {
        m->series(o, m->name, st);
        return;
    }
    /* A table's figures: one series per table, labelled filter="NAME". */
    unsigned n = m->base == IN_FILTER ? st->n : 1;
    for (unsigned i = 0; i < n; i++) {
        const char *base = m->base == IN_FILTER ? (const char *)&st->filters[i] : (const char *)st;
        for (const struct sample *s = m->sample; s < m->sample + 6 && s->kind != V_END; s++) {
            if (m->base == IN_FILTER)
                fprintf(o, "bloomguard_%s{filter=\"%s\"%s%s} ", m->name, st->filters[i].name,
                        s->labels ? "," : "", s->labels ? s->labels : "");
            else if (s->labels != NULL)
                fprintf(o, "bloomguard_%s{%s} ", m->name, s->labels);
            else
                fprintf(o, "bloomguard_%s ", m->name);
            write_value(o, s->kind, base + s->off);
        }
    }
}

void metrics_list(FILE *out)
{
    static const char *const type[] = { "counter", "gauge", "histogram" };
    for (size_t i = 0; i < sizeof metrics / sizeof metrics[0]; i++)
        fprintf(out, "  bloomguard_%s %s\n      %s\n", metrics[i].name, type[metrics[i].type],
                metrics[i].help);
}

struct reply metrics_serve(struct app *a, const struct api_request *rq)
{
    (void)rq;
    /* With [metrics] enabled = no the counters are not kept: do not serve zeros. */
    if (!a->cfg->metrics_enabled)
        return api_error(MHD_HTTP_BAD_REQUEST, "no_route",
                         "metrics are disabled ([metrics] enabled = no)");
    struct status st;
    char *text = NULL;
    size_t len = 0;
    FILE *o = NULL;
    if (status_take(a, &st, true))
        o = open_memstream(&text, &len);
    if (o == NULL) {
        status_release(&st);
        return (struct reply){ 500, NULL, false };
    }
    for (size_t i = 0; i < sizeof metrics / sizeof metrics[0]; i++)
        write_family(o, &metrics[i], &st);
    status_release(&st);
    if (fclose(o) != 0) {
        free(text);
        return (struct reply){ 500, NULL, false };
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (r != NULL)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8");
    return (struct reply){ MHD_HTTP_OK, r, false };
}
