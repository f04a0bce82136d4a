/*
 * Endpoint handlers.  Lookups build their small JSON answers by hand into one
 * buffer handed to MHD (no jansson on the hot path); request bodies and the
 * larger documents (/stats) go through jansson.
 */
#include "api.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idcodec.h"
#include "uritmpl.h"

#define JSON_TYPE "application/json"

/* Responses that never change, queued again and again. */
struct api_static {
    struct MHD_Response *healthz;
    struct MHD_Response *ready;
    struct MHD_Response *auth_allow[4];    /* hit, bypass, not ready (fail open), degraded */
    struct MHD_Response *auth_deny[2];     /* miss, not ready (fail closed) */
};

static struct MHD_Response *json_response(char *body, size_t len, enum MHD_ResponseMemoryMode mode)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, mode);
    if (r != NULL)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, JSON_TYPE);
    return r;
}

static struct MHD_Response *empty_response(const char *verdict)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (r != NULL && verdict != NULL)
        MHD_add_response_header(r, "X-Bloomguard", verdict);
    return r;
}

static struct reply take_string(unsigned status, char *body)
{
    if (body == NULL)
        return (struct reply){ 500, NULL, false };
    return (struct reply){ status, json_response(body, strlen(body), MHD_RESPMEM_MUST_FREE), false };
}

bool api_init(struct app *a)
{
    static const char healthz[] = "{\"status\":\"ok\"}";
    struct api_static *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return false;
    a->prebuilt = p;
    p->healthz = json_response((char *)healthz, sizeof healthz - 1, MHD_RESPMEM_PERSISTENT);
    p->auth_allow[0] = empty_response("hit");
    p->auth_allow[1] = empty_response("bypass");
    p->auth_allow[2] = empty_response("not-ready");
    p->auth_allow[3] = empty_response("degraded");
    p->auth_deny[0] = empty_response("miss");
    p->auth_deny[1] = empty_response("not-ready");
    return p->healthz && p->auth_allow[0] && p->auth_allow[1] && p->auth_allow[2]
        && p->auth_allow[3] && p->auth_deny[0] && p->auth_deny[1];
}

void api_fini(struct app *a)
{
    struct api_static *p = a->prebuilt;
    if (p == NULL)
        return;
    struct MHD_Response *all[] = { p->healthz, p->ready, p->auth_allow[0], p->auth_allow[1],
                                   p->auth_allow[2], p->auth_allow[3], p->auth_deny[0],
                                   p->auth_deny[1] };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i] != NULL)
            MHD_destroy_response(all[i]);
    free(p);
    a->prebuilt = NULL;
}

static struct reply shared(unsigned status, struct MHD_Response *r)
{
    return (struct reply){ status, r, true };
}

/*
 * head, then s escaped for a JSON string, then tail, in one heap block for
 * MHD (6 bytes per byte of s is the worst case).  *len gets the length
 * (without the NUL that ends it).  NULL when memory runs out.
 */
static char *json_around(const char *head, const char *s, size_t n, const char *tail, size_t *len)
{
    size_t hl = strlen(head), tl = strlen(tail), cap = hl + 6 * n + tl + 1;
    char *out = malloc(cap);
    if (out == NULL)
        return NULL;
    size_t used = hl;
    memcpy(out, head, hl);
    json_escape_append(out, cap, &used, s, n);
    memcpy(out + used, tail, tl + 1);
    *len = used + tl;
    return out;
}

/*
 * Built by hand, not with jansson: messages quote what clients sent (a URL,
 * a method, jansson's own error text about a body), and jansson refuses
 * text that is not UTF-8, which would turn a 4xx into a 500.
 * json_escape_append writes U+FFFD for every ill-formed byte sequence
 * instead, so the answer is always valid JSON.
 */
struct reply api_error(unsigned status, const char *code, const char *fmt, ...)
{
    char msg[512], head[96];
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t len = w < 0 ? 0 : (size_t)w;
    if (len >= sizeof msg) {
        /* Cut before a whole character, not inside one, and say so. */
        len = sizeof msg - 4;
        while (len > 0 && ((unsigned char)msg[len] & 0xC0) == 0x80)
            len--;
        memcpy(msg + len, "...", 3);
        len += 3;
    }
    /* code is one of ours ([a-z_]+): it needs no escaping. */
    snprintf(head, sizeof head, "{\"error\":\"%s\",\"message\":\"", code);
    size_t used;
    return take_string(status, json_around(head, msg, len, "\"}", &used));
}

static struct reply not_ready(void)
{
    return api_error(MHD_HTTP_SERVICE_UNAVAILABLE, "not_ready",
                     "the filter is still loading from PostgreSQL");
}

static struct reply id_error_reply(enum id_error e, const char *where)
{
    unsigned status = e == ID_TOO_LONG ? MHD_HTTP_URI_TOO_LONG : MHD_HTTP_BAD_REQUEST;
    return api_error(status, id_error_code(e), "%s%s", id_strerror(e), where);
}

struct reply api_exists(struct app *a, const char *raw, size_t len)
{
    char id[CONFIG_MAX_ID_BYTES + 1];   /* on the stack: nothing to free on errors */
    size_t idlen = 0;
    enum id_error e = id_decode(raw, len, a->cfg->max_id_bytes, id, sizeof id, &idlen);
    if (e != ID_OK)
        return id_error_reply(e, "");
    int64_t horizon = source_horizon(a->source);       /* before the lookup: see source.h */
    enum guard_answer ans = guard_lookup(a->guard, id, idlen);
    if (ans == GUARD_NOT_READY)
        return not_ready();
    /* An "absent" the horizon cannot back is only a "maybe". */
    bool degraded = ans == GUARD_ABSENT && source_stale(a->source, horizon);
    if (degraded) {
        ans = GUARD_MAYBE;
        stats_add(a->stats, ST_DEGRADED, 1);
    }
    stats_add(a->stats, ans == GUARD_MAYBE ? ST_LOOKUP_HIT : ST_LOOKUP_MISS, 1);

    /* {"id":"<escaped>","exists":false}: one small block, handed to MHD. */
    const char *tail = degraded ? "\",\"exists\":true,\"degraded\":true}"
                     : ans == GUARD_MAYBE ? "\",\"exists\":true}" : "\",\"exists\":false}";
    size_t used;
    char *out = json_around("{\"id\":\"", id, idlen, tail, &used);
    if (out == NULL)
        return (struct reply){ 500, NULL, false };
    /* For HEAD, MHD sends the same headers (Content-Length too) and no body. */
    unsigned status = ans == GUARD_MAYBE ? MHD_HTTP_OK : MHD_HTTP_NOT_FOUND;
    return (struct reply){ status, json_response(out, used, MHD_RESPMEM_MUST_FREE), false };
}

/*
 * The IDs of a request body, validated.  JSON ids point into the parsed
 * document (kept in *doc); text ids point into the body.  On failure returns
 * an error reply with status != 0 and frees what it took.
 */
struct idlist {
    size_t n;
    const char **ids;
    size_t *lens;
    json_t *doc;
};

static void idlist_free(struct idlist *l)
{
    free(l->ids);
    free(l->lens);
    json_decref(l->doc);
    memset(l, 0, sizeof(*l));
}

static bool idlist_push(struct idlist *l, size_t *cap, const char *id, size_t len)
{
    if (l->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        const char **ni = realloc(l->ids, nc * sizeof(*ni));
        if (ni == NULL)
            return false;
        l->ids = ni;
        size_t *nl = realloc(l->lens, nc * sizeof(*nl));
        if (nl == NULL)
            return false;
        l->lens = nl;
        *cap = nc;
    }
    l->ids[l->n] = id;
    l->lens[l->n] = len;
    l->n++;
    return true;
}

static struct reply parse_ids(struct app *a, enum body_type t, const char *body, size_t len,
                              bool allow_single, struct idlist *l)
{
    size_t cap = 0, max_batch = a->cfg->max_batch;
    memset(l, 0, sizeof(*l));

    if (t == BODY_TEXT) {
        size_t pos = 0;
        const char *id;
        size_t idlen;
        while (id_next_line(body, len, &pos, &id, &idlen)) {
            if (l->n >= max_batch)
                goto too_many;
            enum id_error e = id_check(id, idlen, a->cfg->max_id_bytes);
            if (e != ID_OK) {
                char where[48];
                snprintf(where, sizeof where, " (line %zu)", l->n + 1);
                idlist_free(l);
                return id_error_reply(e, where);
            }
            if (!idlist_push(l, &cap, id, idlen))
                goto oom;
        }
        return (struct reply){ 0, NULL, false };
    }

    json_error_t jerr;
    l->doc = json_loadb(body, len, JSON_ALLOW_NUL, &jerr);
    if (l->doc == NULL) {
        struct reply r = api_error(MHD_HTTP_BAD_REQUEST, "invalid_json", "invalid JSON at line %d column %d: %s",
                                   jerr.line, jerr.column, jerr.text);
        idlist_free(l);
        return r;
    }
    json_t *one = allow_single ? json_object_get(l->doc, "id") : NULL;
    json_t *arr = json_object_get(l->doc, "ids");
    const char *shape = allow_single ? "expected {\"id\":\"...\"} or {\"ids\":[\"...\", ...]}"
                                     : "expected {\"ids\":[\"...\", ...]}";
    if (!json_is_object(l->doc) || (one == NULL) == (arr == NULL) || (one && !json_is_string(one))
        || (arr && !json_is_array(arr)) || json_object_size(l->doc) != 1) {
        idlist_free(l);
        return api_error(MHD_HTTP_BAD_REQUEST, "bad_shape", "%s", shape);
    }
    if (one != NULL) {
        enum id_error e = id_check(json_string_value(one), json_string_length(one), a->cfg->max_id_bytes);
        if (e != ID_OK) {
            idlist_free(l);
            return id_error_reply(e, "");
        }
        if (!idlist_push(l, &cap, json_string_value(one), json_string_length(one)))
            goto oom;
        return (struct reply){ 0, NULL, false };
    }
    if (json_array_size(arr) > max_batch)
        goto too_many;
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) {
        if (!json_is_string(v)) {
            idlist_free(l);
            return api_error(MHD_HTTP_BAD_REQUEST, "bad_shape", "ids[%zu] is not a string; %s", i, shape);
        }
        enum id_error e = id_check(json_string_value(v), json_string_length(v), a->cfg->max_id_bytes);
        if (e != ID_OK) {
            char where[48];
            snprintf(where, sizeof where, " (ids[%zu])", i);
            idlist_free(l);
            return id_error_reply(e, where);
        }
        if (!idlist_push(l, &cap, json_string_value(v), json_string_length(v)))
            goto oom;
    }
    return (struct reply){ 0, NULL, false };   /* an empty list is a valid, empty batch */

too_many:
    idlist_free(l);
    return api_error(MHD_HTTP_CONTENT_TOO_LARGE, "batch_too_large",
                     "more than max_batch (%zu) ids in one request", max_batch);
oom:
    idlist_free(l);
    return (struct reply){ 500, NULL, false };
}

struct reply api_exists_batch(struct app *a, enum body_type t, const char *body, size_t len)
{
    struct idlist l;
    struct reply err = parse_ids(a, t, body, len, false, &l);
    if (err.status != 0)
        return err;
    bool *ans = malloc(l.n * sizeof(bool) + 1);
    char *out = malloc(l.n * 6 + 48);
    if (ans == NULL || out == NULL) {
        free(ans);
        free(out);
        idlist_free(&l);
        return (struct reply){ 500, NULL, false };
    }
    int64_t horizon = source_horizon(a->source);       /* before the lookups: see source.h */
    if (!guard_lookup_many(a->guard, l.n, l.ids, l.lens, ans)) {
        free(ans);
        free(out);
        idlist_free(&l);
        return not_ready();
    }
    size_t used = 0, hits = 0, absent = 0;
    for (size_t i = 0; i < l.n; i++)
        absent += !ans[i];
    bool degraded = absent > 0 && source_stale(a->source, horizon);
    if (degraded) {
        for (size_t i = 0; i < l.n; i++)
            ans[i] = true;
        stats_add(a->stats, ST_DEGRADED, absent);
    }
    memcpy(out, "{\"exists\":[", 11);
    used = 11;
    for (size_t i = 0; i < l.n; i++) {
        if (i)
            out[used++] = ',';
        const char *v = ans[i] ? "true" : "false";
        size_t vl = ans[i] ? 4 : 5;
        memcpy(out + used, v, vl);
        used += vl;
        hits += ans[i];
    }
    static const char deg[] = "],\"degraded\":true}";
    const char *end = degraded ? deg : "]}";
    size_t el = degraded ? sizeof deg - 1 : 2;
    memcpy(out + used, end, el);
    used += el;
    stats_add(a->stats, ST_LOOKUP_HIT, hits);
    stats_add(a->stats, ST_LOOKUP_MISS, l.n - hits);
    free(ans);
    idlist_free(&l);
    return (struct reply){ MHD_HTTP_OK, json_response(out, used, MHD_RESPMEM_MUST_FREE), false };
}

struct reply api_insert(struct app *a, enum body_type t, const char *body, size_t len)
{
    struct idlist l;
    struct reply err = parse_ids(a, t, body, len, true, &l);
    if (err.status != 0)
        return err;
    if (!guard_writable(a->guard)) {
        idlist_free(&l);
        return not_ready();
    }
    uint64_t *hs = malloc((l.n ? l.n : 1) * sizeof(*hs));
    if (hs == NULL) {
        idlist_free(&l);
        return (struct reply){ 500, NULL, false };
    }
    for (size_t i = 0; i < l.n; i++)
        hs[i] = filter_hash(l.ids[i], l.lens[i]);
    /*
     * Journal first, all or nothing: a rebuild that replays the journal
     * before the adds below is sure to see them land in its new filter,
     * and an ID the journal cannot keep is refused, never acknowledged.
     */
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    enum pending_result pr = pending_add_many(a->pending, l.n, l.ids, l.lens, hs,
                                              (uint64_t)now.tv_sec);
    size_t n = 0;
    if (pr == PENDING_OK)
        for (size_t i = 0; i < l.n; i++)
            n += guard_add_hash(a->guard, hs[i]);
    free(hs);
    size_t want = l.n;
    idlist_free(&l);
    if (pr == PENDING_FULL_COUNT || pr == PENDING_FULL_BYTES) {
        stats_add(a->stats, ST_INSERTS_REFUSED, want);
        struct pending_info pi;
        pending_info(a->pending, &pi);
        return pr == PENDING_FULL_COUNT
            ? api_error(MHD_HTTP_INSUFFICIENT_STORAGE, "journal_full",
                        "the POST journal holds pending_limit (%llu) ids: none of these %zu was added",
                        (unsigned long long)pi.limit, want)
            : api_error(MHD_HTTP_INSUFFICIENT_STORAGE, "journal_full",
                        "the POST journal holds pending_max_bytes (%llu) bytes of ids: none of "
                        "these %zu was added", (unsigned long long)pi.max_bytes, want);
    }
    if (pr != PENDING_OK)
        return (struct reply){ 500, NULL, false };
    if (n < want)
        return not_ready();
    stats_add(a->stats, ST_INSERTS, n);
    char out[64];
    snprintf(out, sizeof out, "{\"inserted\":%zu}", n);
    return take_string(MHD_HTTP_OK, strdup(out));
}

struct reply api_auth(struct app *a, const char *uri, size_t len)
{
    const struct config *cfg = a->cfg;
    struct api_static *p = a->prebuilt;
    for (unsigned i = 0; i < cfg->n_uri_templates; i++) {
        const char *raw;
        size_t rawlen;
        if (!uritmpl_match(cfg->uri_templates[i], uri, len, &raw, &rawlen))
            continue;
        char id[CONFIG_MAX_ID_BYTES + 1];
        size_t idlen;
        enum id_error e = id_decode(raw, rawlen, cfg->max_id_bytes, id, sizeof id, &idlen);
        if (e != ID_OK) {
            /*
             * Over-long, or not what idcodec decodes: the service behind may
             * still read it as an ID of its own (a stray '%' taken
             * literally), so this is no proof of absence.
             */
            stats_add(a->stats, ST_AUTH_MALFORMED, 1);
            return shared(cfg->allow_status, p->auth_allow[1]);
        }
        int64_t horizon = source_horizon(a->source);   /* before the lookup: see source.h */
        enum guard_answer ans = guard_lookup(a->guard, id, idlen);
        if (ans == GUARD_NOT_READY) {
            stats_add(a->stats, ST_AUTH_NOT_READY, 1);
            if (cfg->fail_open)
                return shared(cfg->allow_status, p->auth_allow[2]);
            return shared(MHD_HTTP_SERVICE_UNAVAILABLE, p->auth_deny[1]);
        }
        if (ans == GUARD_MAYBE) {
            stats_add(a->stats, ST_AUTH_HIT, 1);
            return shared(cfg->allow_status, p->auth_allow[0]);
        }
        if (source_stale(a->source, horizon)) {
            stats_add(a->stats, ST_DEGRADED, 1);
            return shared(cfg->allow_status, p->auth_allow[3]);
        }
        stats_add(a->stats, ST_AUTH_MISS, 1);
        return shared(cfg->deny_status, p->auth_deny[0]);
    }
    stats_add(a->stats, ST_AUTH_BYPASS, 1);
    return shared(cfg->allow_status, p->auth_allow[1]);
}

struct reply api_healthz(struct app *a)
{
    return shared(MHD_HTTP_OK, a->prebuilt->healthz);
}

static void iso8601(time_t t, char *out, size_t cap)
{
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static json_t *source_json(struct app *a, const struct source_status *ss)
{
    char since[32];
    iso8601(ss->state_since, since, sizeof since);
    json_t *o = json_pack("{s:s, s:s, s:b}", "state", source_state_name(ss->state),
                          "since", since, "listening", ss->listening);
    if (o && ss->last_error[0])
        json_object_set_new(o, "last_error", json_string(ss->last_error));
    (void)a;
    return o;
}

/* The horizon: how far back every committed row is known to be in the filter. */
static json_t *horizon_json(struct app *a, const struct source_status *ss, uint64_t answers)
{
    json_t *o = json_pack("{s:b, s:f, s:f, s:I}", "degraded", ss->degraded,
                          "max_staleness_seconds", a->cfg->max_staleness,
                          "degraded_seconds_total", ss->degraded_seconds,
                          "degraded_answers", (json_int_t)answers);
    if (o)
        json_object_set_new(o, "age_seconds",
                            ss->horizon_age >= 0 ? json_real(ss->horizon_age) : json_null());
    return o;
}

struct reply api_readyz(struct app *a)
{
    struct source_status ss;
    source_status(a->source, &ss);
    bool ready = guard_ready(a->guard);
    struct stats_snapshot snap;
    stats_snapshot(a->stats, &snap);
    json_t *o = json_pack("{s:s, s:b, s:o, s:o}", "status", ready ? "ready" : "loading",
                          "degraded", ready && ss.degraded, "source", source_json(a, &ss),
                          "horizon", horizon_json(a, &ss, snap.counter[ST_DEGRADED]));
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return take_string(ready ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, s);
}

struct reply api_stats(struct app *a)
{
    struct stats_snapshot snap;
    struct source_status ss;
    struct filter_info fi;
    struct pending_info pi;
    stats_snapshot(a->stats, &snap);
    source_status(a->source, &ss);
    pending_info(a->pending, &pi);
    bool ready = guard_info(a->guard, &fi);
    if (!ready)
        memset(&fi, 0, sizeof fi);

    uint64_t by_class[6] = { 0 };
    json_t *by_endpoint = json_object();
    for (unsigned e = 0; e < EP_COUNT; e++) {
        json_t *codes = json_object();
        for (unsigned k = 0; k < SS_COUNT; k++) {
            uint64_t n = snap.requests[e][k];
            if (n == 0)
                continue;
            unsigned code = stats_status_code(k);
            char key[16];
            snprintf(key, sizeof key, "%u", code ? code : 999);
            json_object_set_new(codes, code ? key : "other", json_integer((json_int_t)n));
            by_class[code ? code / 100 : 5] += n;
        }
        json_object_set_new(by_endpoint, stats_endpoint_name(e), codes);
    }
    uint64_t hits = snap.counter[ST_LOOKUP_HIT], misses = snap.counter[ST_LOOKUP_MISS];
    char finished[32] = "";
    if (ss.last_finished)
        iso8601(ss.last_finished, finished, sizeof finished);

    json_t *rebuild = json_pack("{s:b, s:I, s:I, s:I, s:I}",
                                "running", ss.running,
                                "requested_id", (json_int_t)ss.requested_id,
                                "completed_id", (json_int_t)ss.completed_id,
                                "ok", (json_int_t)ss.rebuilds_ok,
                                "failed", (json_int_t)ss.rebuilds_failed);
    if (rebuild && ss.next_rebuild_in > 0)
        json_object_set_new(rebuild, "starts_in_seconds", json_real(ss.next_rebuild_in));
    if (rebuild && ss.running) {
        char since[32];
        iso8601(ss.running_since, since, sizeof since);
        json_object_set_new(rebuild, "id", json_integer((json_int_t)ss.running_id));
        json_object_set_new(rebuild, "reason", json_string(ss.running_reason));
        json_object_set_new(rebuild, "rows_copied", json_integer((json_int_t)ss.running_rows));
        json_object_set_new(rebuild, "started_at", json_string(since));
    }
    json_t *o = json_pack(
        "{s:b, s:I, s:I, s:I, s:i, s:I, s:f, s:f, s:f,"
        " s:{s:I, s:I, s:I}, s:I, s:{s:I, s:I, s:I, s:I, s:I},"
        " s:{s:I, s:I, s:I, s:I}, s:o,"
        " s:{s:I, s:f, s:s?, s:s}, s:o, s:o, s:o, s:I, s:I, s:{s:I, s:I, s:I, s:I, s:I, s:I},"
        " s:I, s:s}",
        "ready", ready,
        "items", (json_int_t)fi.items,
        "capacity", (json_int_t)fi.capacity,
        "bits", (json_int_t)fi.bits,
        "probes", (int)fi.probes,
        "memory_bytes", (json_int_t)fi.memory_bytes,
        "fill_ratio", fi.fill_ratio,
        "estimated_fpp", fi.estimated_fpp,
        "target_fpp", a->cfg->filters[0].false_positive_rate,
        "lookups", "total", (json_int_t)(hits + misses), "hits", (json_int_t)hits,
                   "misses", (json_int_t)misses,
        "inserts", (json_int_t)snap.counter[ST_INSERTS],
        "auth", "hits", (json_int_t)snap.counter[ST_AUTH_HIT],
                "misses", (json_int_t)snap.counter[ST_AUTH_MISS],
                "bypasses", (json_int_t)snap.counter[ST_AUTH_BYPASS],
                "not_ready", (json_int_t)snap.counter[ST_AUTH_NOT_READY],
                "malformed", (json_int_t)snap.counter[ST_AUTH_MALFORMED],
        "requests", "2xx", (json_int_t)by_class[2], "4xx", (json_int_t)by_class[4],
                    "5xx", (json_int_t)by_class[5], "total",
                    (json_int_t)(by_class[1] + by_class[2] + by_class[3] + by_class[4] + by_class[5]),
        "requests_by_endpoint", by_endpoint,
        "last_load", "rows", (json_int_t)ss.last_rows, "seconds", ss.last_seconds,
                     "finished_at", ss.last_finished ? finished : NULL,
                     "reason", ss.last_reason,
        "rebuild", rebuild,
        "source", source_json(a, &ss),
        "horizon", horizon_json(a, &ss, snap.counter[ST_DEGRADED]),
        "notifications", (json_int_t)ss.notifications,
        "long_ids", (json_int_t)ss.long_ids,
        "pending_posts", "count", (json_int_t)pi.count, "bytes", (json_int_t)pi.bytes,
                         "refused", (json_int_t)pi.refused, "expired", (json_int_t)pi.expired,
                         "limit", (json_int_t)pi.limit, "max_bytes", (json_int_t)pi.max_bytes,
        "uptime_seconds", (json_int_t)(time(NULL) - a->started),
        "version", PACKAGE_VERSION);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return take_string(MHD_HTTP_OK, s);
}

struct reply api_reload(struct app *a)
{
    bool coalesced = false;
    uint64_t id = source_request_rebuild(a->source, "api", &coalesced);
    struct source_status ss;
    source_status(a->source, &ss);
    /* Coalesced into the next rebuild min_rebuild_interval allows: never one COPY per request. */
    json_t *o = json_pack("{s:s, s:I, s:b, s:f}", "status", "accepted", "rebuild_id", (json_int_t)id,
                          "coalesced", coalesced, "starts_in_seconds", ss.next_rebuild_in);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return take_string(MHD_HTTP_ACCEPTED, s);
}
