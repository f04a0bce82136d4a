/*
 * GET /metrics: the counters, the filter's figures and the source state in
 * Prometheus text exposition format 0.0.4.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"

static void head(FILE *o, const char *name, const char *type, const char *help)
{
    fprintf(o, "# HELP bloomguard_%s %s\n# TYPE bloomguard_%s %s\n", name, help, name, type);
}

struct reply api_metrics(struct app *a)
{
    struct stats_snapshot snap;
    struct source_status ss;
    struct filter_info fi;
    char *text = NULL;
    size_t len = 0;
    /* With [metrics] enabled = no the counters are not kept: do not serve zeros. */
    if (!a->cfg->metrics_enabled)
        return api_error(MHD_HTTP_NOT_FOUND, "no_route",
                         "metrics are disabled ([metrics] enabled = no)");
    FILE *o = open_memstream(&text, &len);
    if (o == NULL)
        return (struct reply){ 500, NULL, false };

    stats_snapshot(a->stats, &snap);
    source_status(a->source, &ss);
    bool ready = guard_info(a->guard, &fi);
    if (!ready)
        memset(&fi, 0, sizeof fi);

    head(o, "requests_total", "counter", "HTTP requests answered, by endpoint and status code.");
    for (unsigned e = 0; e < EP_COUNT; e++)
        for (unsigned k = 0; k < SS_COUNT; k++)
            if (snap.requests[e][k] != 0) {
                unsigned code = stats_status_code(k);
                fprintf(o, "bloomguard_requests_total{endpoint=\"%s\",code=\"%s%.0u\"} %llu\n",
                        stats_endpoint_name(e), code ? "" : "other", code,
                        (unsigned long long)snap.requests[e][k]);
            }

    head(o, "request_duration_seconds", "histogram",
         "Time from the first byte of a request to its response being queued.");
    for (unsigned e = 0; e < EP_COUNT; e++) {
        uint64_t cum = 0;
        for (unsigned b = 0; b <= STATS_BUCKETS; b++)
            cum += snap.latency_bucket[e][b];
        if (cum == 0)
            continue;
        const char *ep = stats_endpoint_name(e);
        cum = 0;
        for (unsigned b = 0; b < STATS_BUCKETS; b++) {
            cum += snap.latency_bucket[e][b];
            fprintf(o, "bloomguard_request_duration_seconds_bucket{endpoint=\"%s\",le=\"%g\"} %llu\n",
                    ep, stats_bucket_bounds[b], (unsigned long long)cum);
        }
        cum += snap.latency_bucket[e][STATS_BUCKETS];
        fprintf(o, "bloomguard_request_duration_seconds_bucket{endpoint=\"%s\",le=\"+Inf\"} %llu\n",
                ep, (unsigned long long)cum);
        fprintf(o, "bloomguard_request_duration_seconds_sum{endpoint=\"%s\"} %.9f\n", ep,
                (double)snap.latency_sum_ns[e] * 1e-9);
        fprintf(o, "bloomguard_request_duration_seconds_count{endpoint=\"%s\"} %llu\n", ep,
                (unsigned long long)cum);
    }

    head(o, "lookups_total", "counter", "IDs looked up (single and batch), by result.");
    fprintf(o, "bloomguard_lookups_total{result=\"hit\"} %llu\n",
            (unsigned long long)snap.counter[ST_LOOKUP_HIT]);
    fprintf(o, "bloomguard_lookups_total{result=\"miss\"} %llu\n",
            (unsigned long long)snap.counter[ST_LOOKUP_MISS]);
    head(o, "inserts_total", "counter", "IDs inserted through POST /ids.");
    fprintf(o, "bloomguard_inserts_total %llu\n", (unsigned long long)snap.counter[ST_INSERTS]);
    head(o, "auth_decisions_total", "counter", "/auth answers, by decision.");
    fprintf(o, "bloomguard_auth_decisions_total{result=\"hit\"} %llu\n",
            (unsigned long long)snap.counter[ST_AUTH_HIT]);
    fprintf(o, "bloomguard_auth_decisions_total{result=\"miss\"} %llu\n",
            (unsigned long long)snap.counter[ST_AUTH_MISS]);
    fprintf(o, "bloomguard_auth_decisions_total{result=\"bypass\"} %llu\n",
            (unsigned long long)snap.counter[ST_AUTH_BYPASS]);
    fprintf(o, "bloomguard_auth_decisions_total{result=\"not_ready\"} %llu\n",
            (unsigned long long)snap.counter[ST_AUTH_NOT_READY]);
    fprintf(o, "bloomguard_auth_decisions_total{result=\"malformed\"} %llu\n",
            (unsigned long long)snap.counter[ST_AUTH_MALFORMED]);
    fprintf(o, "bloomguard_auth_decisions_total{result=\"degraded\"} %llu\n",
            (unsigned long long)snap.counter[ST_DEGRADED]);
    head(o, "notifications_applied_total", "counter", "IDs added from PostgreSQL NOTIFY.");
    fprintf(o, "bloomguard_notifications_applied_total %llu\n",
            (unsigned long long)snap.counter[ST_NOTIFY_APPLIED]);

    struct pending_info pi;
    pending_info(a->pending, &pi);
    head(o, "pending_posts", "gauge", "POSTed ids kept across rebuilds until a COPY shows them in the table.");
    fprintf(o, "bloomguard_pending_posts %llu\n", (unsigned long long)pi.count);
    head(o, "pending_posts_bytes", "gauge", "Bytes of the POSTed ids in the journal.");
    fprintf(o, "bloomguard_pending_posts_bytes %llu\n", (unsigned long long)pi.bytes);
    head(o, "pending_posts_refused_total", "counter",
         "POSTed ids refused (507) because the journal was full.");
    fprintf(o, "bloomguard_pending_posts_refused_total %llu\n", (unsigned long long)pi.refused);
    head(o, "pending_posts_expired_total", "counter", "Journal entries dropped after pending_ttl.");
    fprintf(o, "bloomguard_pending_posts_expired_total %llu\n", (unsigned long long)pi.expired);

    head(o, "degraded", "gauge",
         "1 while absent answers are given as maybe: the horizon is older than max_staleness.");
    fprintf(o, "bloomguard_degraded %d\n", ready && ss.degraded ? 1 : 0);
    head(o, "degraded_seconds_total", "counter", "Time spent degraded.");
    fprintf(o, "bloomguard_degraded_seconds_total %.6f\n", ss.degraded_seconds);
    head(o, "degraded_answers_total", "counter",
         "Answers that would have been 404 or deny, given as 200 or allow while degraded.");
    fprintf(o, "bloomguard_degraded_answers_total %llu\n",
            (unsigned long long)snap.counter[ST_DEGRADED]);
    head(o, "horizon_age_seconds", "gauge",
         "Seconds since the horizon: every row committed before it is in the filter (-1: none yet).");
    fprintf(o, "bloomguard_horizon_age_seconds %.6f\n", ss.horizon_age);

    head(o, "rebuilds_total", "counter", "Filter loads and rebuilds, by result.");
    fprintf(o, "bloomguard_rebuilds_total{result=\"ok\"} %llu\n", (unsigned long long)ss.rebuilds_ok);
    fprintf(o, "bloomguard_rebuilds_total{result=\"failed\"} %llu\n",
            (unsigned long long)ss.rebuilds_failed);
    head(o, "rebuild_duration_seconds_total", "counter", "Time spent copying IDs in successful rebuilds.");
    fprintf(o, "bloomguard_rebuild_duration_seconds_total %.6f\n", ss.rebuild_seconds_sum);
    head(o, "last_rebuild_duration_seconds", "gauge", "Duration of the last successful rebuild.");
    fprintf(o, "bloomguard_last_rebuild_duration_seconds %.6f\n", ss.last_seconds);
    head(o, "last_rebuild_rows", "gauge", "Rows loaded by the last successful rebuild.");
    fprintf(o, "bloomguard_last_rebuild_rows %llu\n", (unsigned long long)ss.last_rows);
    head(o, "rebuild_running", "gauge", "1 while a rebuild runs.");
    fprintf(o, "bloomguard_rebuild_running %d\n", ss.running ? 1 : 0);

    head(o, "ready", "gauge", "1 once a filter is loaded and served.");
    fprintf(o, "bloomguard_ready %d\n", ready ? 1 : 0);
    head(o, "filter_items", "gauge", "Distinct IDs added to the live filter (duplicates not counted).");
    fprintf(o, "bloomguard_filter_items %llu\n", (unsigned long long)fi.items);
    head(o, "filter_capacity", "gauge", "IDs the live filter was sized for.");
    fprintf(o, "bloomguard_filter_capacity %llu\n", (unsigned long long)fi.capacity);
    /* Not "filter_bits": promtool rejects "bits" as a unit (bytes is the base unit). */
    head(o, "filter_bit_array_size", "gauge", "Number of bits in the live filter's bit array.");
    fprintf(o, "bloomguard_filter_bit_array_size %llu\n", (unsigned long long)fi.bits);
    head(o, "filter_memory_bytes", "gauge", "Memory held by the live filter.");
    fprintf(o, "bloomguard_filter_memory_bytes %llu\n", (unsigned long long)fi.memory_bytes);
    head(o, "filter_fill_ratio", "gauge", "Share of the live filter's bits that are set.");
    fprintf(o, "bloomguard_filter_fill_ratio %.6f\n", fi.fill_ratio);
    head(o, "filter_estimated_fpp", "gauge", "False-positive rate estimated from the fill ratio.");
    fprintf(o, "bloomguard_filter_estimated_fpp %.8f\n", fi.estimated_fpp);
    head(o, "filter_target_fpp", "gauge", "Configured false-positive rate.");
    fprintf(o, "bloomguard_filter_target_fpp %.8f\n", a->cfg->filters[0].false_positive_rate);

    head(o, "source_state", "gauge", "PostgreSQL source state (1 for the current one).");
    for (enum source_state st = SOURCE_CONNECTING; st <= SOURCE_RECONNECTING; st++)
        fprintf(o, "bloomguard_source_state{state=\"%s\"} %d\n", source_state_name(st),
                ss.state == st ? 1 : 0);
    head(o, "source_state_since_seconds", "gauge", "Unix time the source entered its state.");
    fprintf(o, "bloomguard_source_state_since_seconds %lld\n", (long long)ss.state_since);
    head(o, "process_start_time_seconds", "gauge", "Unix time the process started.");
    fprintf(o, "bloomguard_process_start_time_seconds %lld\n", (long long)a->started);
    head(o, "build_info", "gauge", "Always 1; the version is a label.");
    fprintf(o, "bloomguard_build_info{version=\"%s\"} 1\n", PACKAGE_VERSION);

    if (fclose(o) != 0) {
        free(text);
        return (struct reply){ 500, NULL, false };
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (r != NULL)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8");
    return (struct reply){ MHD_HTTP_OK, r, false };
}
