/*
 * The route table and the endpoint handlers, side by side: adding an
 * endpoint is one row in api_routes[] and one handler (see docs/HACKING.md).
 * Lookups build their small JSON answers by hand into one buffer handed to
 * MHD (no jansson on the hot path); request bodies go through jansson.  The
 * status documents (/stats, /readyz, /metrics) are status.c's.
 */
#include "api.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "idcodec.h"
#include "pending.h"
#include "persist.h"
#include "source.h"
#include "spell.h"
#include "table.h"
#include "stats.h"
#include "status.h"
#include "uritmpl.h"

#define JSON_TYPE "application/json"

/* Responses that never change, queued again and again. */
struct api_static {
    struct MHD_Response *healthz;
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

struct reply api_json_take(unsigned status, char *body)
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
    struct MHD_Response *all[] = { p->healthz, p->auth_allow[0], p->auth_allow[1],
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
    return api_json_take(status, json_around(head, msg, len, "\"}", &used));
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

/*
 * The table a path names: "NAME" (exactly) among the configured filters.
 * -1 with a 404 unknown_filter reply when there is none of that name.
 */
static int table_named(struct app *a, const char *name, size_t len, struct reply *err)
{
    for (unsigned i = 0; i < a->n_tables; i++) {
        const char *n = table_name(a->tables[i]);
        if (strlen(n) == len && memcmp(n, name, len) == 0)
            return (int)i;
    }
    int q = len > 64 ? 64 : (int)len;
    *err = api_error(MHD_HTTP_NOT_FOUND, "unknown_filter", "no filter named \"%.*s%s\"", q, name,
                     len > 64 ? "..." : "");
    return -1;
}

/*
 * The table of a batch or reload path: the rest after "/exists", "/ids" or
 * "/reload" is "" (the default table) or "/NAME".
 */
static int table_of_rest(struct app *a, const struct api_request *rq, struct reply *err)
{
    if (rq->rest_len == 0)
        return 0;
    return table_named(a, rq->rest + 1, rq->rest_len - 1, err);
}

struct reply api_exists(struct app *a, const struct api_request *rq)
{
    char id[CONFIG_MAX_ID_BYTES + 1];   /* on the stack: nothing to free on errors */
    size_t idlen = 0;
    /* "/exists/ID" asks the default table, "/exists/NAME/ID" table NAME (a '/' in an ID is %2F). */
    const char *raw = rq->rest;
    size_t rawlen = rq->rest_len;
    int t = 0;
    const char *slash = memchr(raw, '/', rawlen);
    if (slash != NULL) {
        struct reply err;
        if ((t = table_named(a, raw, (size_t)(slash - raw), &err)) < 0)
            return err;
        rawlen -= (size_t)(slash + 1 - raw);
        raw = slash + 1;
    }
    enum id_error e = id_decode(raw, rawlen, a->cfg->max_id_bytes, id, sizeof id, &idlen);
    if (e != ID_OK)
        return id_error_reply(e, "");
    enum table_answer ans = table_lookup(a->tables[t], id, idlen);
    if (ans == TABLE_NOT_READY)
        return not_ready();
    if (ans == TABLE_DEGRADED)
        stats_add(a->stats, ST_DEGRADED, 1);
    if (ans == TABLE_UNPROVABLE)
        stats_add(a->stats, ST_UNPROVABLE, 1);
    stats_add(a->stats, ans == TABLE_ABSENT ? ST_LOOKUP_MISS : ST_LOOKUP_HIT, 1);

    /* {"id":"<escaped>","exists":false}: one small block, handed to MHD. */
    const char *tail = ans == TABLE_DEGRADED ? "\",\"exists\":true,\"degraded\":true}"
                     : ans == TABLE_UNPROVABLE ? "\",\"exists\":true,\"unprovable\":true}"
                     : ans == TABLE_MAYBE ? "\",\"exists\":true}" : "\",\"exists\":false}";
    size_t used;
    char *out = json_around("{\"id\":\"", id, idlen, tail, &used);
    if (out == NULL)
        return (struct reply){ 500, NULL, false };
    /* For HEAD, MHD sends the same headers (Content-Length too) and no body. */
    unsigned status = ans == TABLE_ABSENT ? MHD_HTTP_NOT_FOUND : MHD_HTTP_OK;
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

struct reply api_exists_batch(struct app *a, const struct api_request *rq)
{
    struct idlist l;
    struct reply err;
    int t = table_of_rest(a, rq, &err);
    if (t < 0)
        return err;
    err = parse_ids(a, rq->body_type, rq->body, rq->body_len, false, &l);
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
    bool degraded = false;
    size_t absent = 0;
    if (!table_lookup_many(a->tables[t], l.n, l.ids, l.lens, ans, &degraded, &absent)) {
        free(ans);
        free(out);
        idlist_free(&l);
        return not_ready();
    }
    size_t used = 0, hits = 0;
    if (degraded)
        stats_add(a->stats, ST_DEGRADED, absent);
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

/*
 * The answer to POST /ids for table t, from table_insert's result.  Reads
 * only what outlives the request (stats, the table), so that it can run on
 * the thread that finished a later insert.
 */
static struct reply insert_reply(struct stats *stats, struct table *t,
                                 enum table_insert_result r, size_t n, size_t want, int e)
{
    struct pending_info pi;
    switch (r) {
    case TABLE_INSERTED:
        break;
    case TABLE_INSERT_NOT_READY:
        return not_ready();
    case TABLE_INSERT_NOT_A_VALUE: {
        struct table_ident id;
        table_ident(t, &id);
        return api_error(MHD_HTTP_BAD_REQUEST, "not_a_value",
                         "id number %d of the request is no value of the column's type (%s): it "
                         "can never be a row; none of these %zu was added", e + 1,
                         id.type_name[0] ? id.type_name : spell_type_name(table_spell(t)), want);
    }
    case TABLE_INSERT_NOT_DURABLE: {
        bool full = e == ENOSPC || e == EDQUOT;
        char why[128];
        return api_error(full ? MHD_HTTP_INSUFFICIENT_STORAGE : MHD_HTTP_INTERNAL_SERVER_ERROR,
                         full ? "post_log_full" : "post_log_failed",
                         "the POST log cannot keep these %zu ids on disk (%s): none was "
                         "acknowledged", want, strerror_r(e, why, sizeof why));
    }
    case TABLE_INSERT_FULL_COUNT:
        stats_add(stats, ST_INSERTS_REFUSED, want);
        pending_info(table_pending(t), &pi);
        return api_error(MHD_HTTP_INSUFFICIENT_STORAGE, "journal_full",
                         "the POST journal holds pending_limit (%llu) ids: none of these %zu was "
                         "added", (unsigned long long)pi.limit, want);
    case TABLE_INSERT_FULL_BYTES:
        stats_add(stats, ST_INSERTS_REFUSED, want);
        pending_info(table_pending(t), &pi);
        return api_error(MHD_HTTP_INSUFFICIENT_STORAGE, "journal_full",
                         "the POST journal holds pending_max_bytes (%llu) bytes of ids: none of "
                         "these %zu was added", (unsigned long long)pi.max_bytes, want);
    case TABLE_INSERT_NOMEM:
    case TABLE_INSERT_LATER:
        return (struct reply){ 500, NULL, false };
    }
    stats_add(stats, ST_INSERTS, n);
    char out[64];
    snprintf(out, sizeof out, "{\"inserted\":%zu}", n);
    return api_json_take(MHD_HTTP_OK, strdup(out));
}

/* A POST waiting for the disk, its request suspended. */
struct insert_later {
    struct stats *stats;
    struct table *t;
    size_t want;
    struct api_later later;
};

static void insert_done(void *arg, enum table_insert_result r, size_t n, int e)
{
    struct insert_later *il = arg;
    struct api_later later = il->later;
    struct reply rp = insert_reply(il->stats, il->t, r, n, il->want, e);
    free(il);
    later.done(later.ctx, rp);
}

struct reply api_insert(struct app *a, const struct api_request *rq)
{
    struct idlist l;
    struct reply err;
    int ti = table_of_rest(a, rq, &err);
    if (ti < 0)
        return err;
    struct table *t = a->tables[ti];
    err = parse_ids(a, rq->body_type, rq->body, rq->body_len, true, &l);
    if (err.status != 0)
        return err;
    size_t n = 0, want = l.n;
    int e = 0;
    enum table_insert_result r;
    /*
     * Where the POST must reach the disk first, the request waits suspended
     * rather than holding its thread: one fdatasync then commits the POSTs
     * of many connections of one thread.
     */
    struct insert_later *il = rq->later && table_durable(t) ? malloc(sizeof *il) : NULL;
    if (il != NULL) {
        *il = (struct insert_later){ a->stats, t, want, *rq->later };
        il->later.begin(il->later.ctx);
        r = table_insert_later(t, l.n, l.ids, l.lens, &n, &e, insert_done, il);
        idlist_free(&l);
        if (r != TABLE_INSERT_LATER)
            insert_done(il, r, n, e);
        return (struct reply){ API_LATER, NULL, false };
    }
    r = table_insert(t, l.n, l.ids, l.lens, &n, &e);
    idlist_free(&l);
    return insert_reply(a->stats, t, r, n, want, e);
}

/* The decision for one original URI (raw). */
static struct reply auth_decide(struct app *a, const char *uri, size_t len)
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
        unsigned t = cfg->uri_template_filter[i];
        switch (table_lookup(a->tables[t], id, idlen)) {
        case TABLE_NOT_READY:
            stats_add(a->stats, ST_AUTH_NOT_READY, 1);
            if (cfg->fail_open)
                return shared(cfg->allow_status, p->auth_allow[2]);
            return shared(MHD_HTTP_SERVICE_UNAVAILABLE, p->auth_deny[1]);
        case TABLE_MAYBE:
            stats_add(a->stats, ST_AUTH_HIT, 1);
            return shared(cfg->allow_status, p->auth_allow[0]);
        case TABLE_DEGRADED:
            stats_add(a->stats, ST_DEGRADED, 1);
            return shared(cfg->allow_status, p->auth_allow[3]);
        case TABLE_UNPROVABLE:
            /* The service may read this spelling as a row's: no proof of absence. */
            stats_add(a->stats, ST_UNPROVABLE, 1);
            return shared(cfg->allow_status, p->auth_allow[1]);
        case TABLE_ABSENT:
            break;
        }
        stats_add(a->stats, ST_AUTH_MISS, 1);
        return shared(cfg->deny_status, p->auth_deny[0]);
    }
    stats_add(a->stats, ST_AUTH_BYPASS, 1);
    return shared(cfg->allow_status, p->auth_allow[1]);
}

static const char *header(const struct api_request *rq, const char *name)
{
    return rq->conn != NULL ? MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, name) : NULL;
}

/*
 * The original URI: X-Original-URI (nginx), X-Forwarded-Uri (Traefik), or
 * the path after /auth (Envoy's path_prefix), as [auth] uri_source says.
 * An empty string when the chosen header is absent (it matches no template).
 */
struct reply api_auth(struct app *a, const struct api_request *rq)
{
    enum auth_uri_source src = a->cfg->uri_source;
    const char *u = NULL;
    size_t len;
    if (src == URI_SOURCE_AUTO || src == URI_SOURCE_X_ORIGINAL_URI)
        u = header(rq, "X-Original-URI");
    if (u == NULL && (src == URI_SOURCE_AUTO || src == URI_SOURCE_X_FORWARDED_URI))
        u = header(rq, "X-Forwarded-Uri");
    if (u != NULL)
        len = strlen(u);
    else if (src == URI_SOURCE_AUTO || src == URI_SOURCE_PATH)
        u = rq->rest, len = rq->rest_len;       /* "/auth/user/get/1" -> "/user/get/1" */
    else
        u = "", len = 0;
    return auth_decide(a, u, len);
}

static struct reply healthz(struct app *a, const struct api_request *rq)
{
    (void)rq;
    return shared(MHD_HTTP_OK, a->prebuilt->healthz);
}

/* POST /reload rebuilds every table; POST /reload/NAME that one. */
static struct reply reload(struct app *a, const struct api_request *rq)
{
    struct reply err;
    int t = table_of_rest(a, rq, &err);
    if (t < 0)
        return err;
    unsigned from = rq->rest_len ? (unsigned)t : 0, to = rq->rest_len ? (unsigned)t + 1 : a->n_tables;
    bool coalesced = false;
    uint64_t id = 0;
    double starts_in = 0;
    json_t *filters = json_object();
    for (unsigned i = from; i < to; i++) {
        bool c = false;
        uint64_t one = source_request_rebuild(a->source, i, WANT_API, &c);
        struct table_status ts;
        table_status(a->tables[i], &ts);
        if (i == from) {
            id = one;
            coalesced = c;
            starts_in = ts.next_rebuild_in;
        }
        json_object_set_new(filters, table_name(a->tables[i]),
                            json_pack("{s:I, s:b, s:f}", "rebuild_id", (json_int_t)one,
                                      "coalesced", c, "starts_in_seconds", ts.next_rebuild_in));
    }
    /*
     * Coalesced into the next rebuild min_rebuild_interval allows: never one
     * COPY per request.  The top-level figures are the first table's.
     */
    json_t *o = json_pack("{s:s, s:I, s:b, s:f, s:o}", "status", "accepted", "rebuild_id",
                          (json_int_t)id, "coalesced", coalesced, "starts_in_seconds", starts_in,
                          "filters", filters);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return api_json_take(MHD_HTTP_ACCEPTED, s);
}

/*
 * GET /snapshot streams the default filter's snapshot file, GET
 * /snapshot/NAME that filter's: what a new peer bootstraps from
 * ([snapshot] bootstrap_from).  The file, not a fresh snapshot: the daemon
 * replaces it whole with rename, so the descriptor opened here reads one
 * consistent snapshot however long the transfer takes, and a peer costs
 * neither a copy of the filter nor the rebuild thread's time.  Admin only:
 * the filter tells which IDs are absent, as much as the table itself.
 */
static struct reply snapshot(struct app *a, const struct api_request *rq)
{
    struct reply err;
    int t = table_of_rest(a, rq, &err);
    if (t < 0)
        return err;
    const char *name = table_name(a->tables[t]);
    char path[PERSIST_PATH_MAX];
    if (!persist_file(a->cfg, table_config(a->tables[t]), path, sizeof path))
        return api_error(MHD_HTTP_NOT_FOUND, "snapshots_off", "snapshots are off: set [snapshot] path");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)
        return api_error(MHD_HTTP_SERVICE_UNAVAILABLE, "no_snapshot",
                         "no snapshot written yet for filter %s", name);
    struct stat st;
    char ebuf[128];
    const char *why = NULL;
    if (fd < 0 || fstat(fd, &st) != 0)
        why = strerror_r(errno, ebuf, sizeof ebuf);     /* GNU: thread-safe, returns the text */
    else if (!S_ISREG(st.st_mode))
        why = "not a regular file";
    if (why != NULL) {
        if (fd >= 0)
            close(fd);
        /* The path stays in the daemon's configuration: clients learn only why. */
        return api_error(MHD_HTTP_INTERNAL_SERVER_ERROR, "snapshot_unreadable",
                         "the snapshot of filter %s cannot be read: %s", name, why);
    }
    /* MHD owns fd from here, and closes it when the response is destroyed. */
    struct MHD_Response *r = MHD_create_response_from_fd64((uint64_t)st.st_size, fd);
    if (r == NULL) {
        close(fd);
        return (struct reply){ 500, NULL, false };
    }
    char created[24];
    snprintf(created, sizeof created, "%" PRId64, (int64_t)st.st_mtime);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
    MHD_add_response_header(r, "X-Bloomguard-Snapshot-Created", created);
    return (struct reply){ MHD_HTTP_OK, r, false };
}

/* ---------------------------------------------------------- the routes -- */

/*
 * Every endpoint, one row each.  The order is the order of /stats
 * requests_by_endpoint and of the endpoint="" series of /metrics, and the
 * order of matching: the hot routes (/exists/{id}, /auth) come first.
 * Names are what /stats and /metrics show: never rename one.
 */
const struct route api_routes[] = {
    /* path         match          methods   name            admin  body   raw_path  handler */
    { "/exists/",   ROUTE_PREFIX,  API_READ, "exists",       false, false, false, api_exists },
    /* POST /exists and POST /exists/{filter}: the table is in the path, as for GET. */
    { "/exists",    ROUTE_PREFIX,  API_POST, "exists_batch", false, true,  false, api_exists_batch },
    { "/ids",       ROUTE_PREFIX,  API_POST, "ids",          true,  true,  false, api_insert },
    /* Any method: proxies forward the original one.  The path may be the original URI. */
    { "/auth",      ROUTE_PREFIX,  API_ANY,  "auth",         false, false, true,  api_auth },
    { "/healthz",   ROUTE_EXACT,   API_READ, "healthz",      false, false, false, healthz },
    { "/readyz",    ROUTE_EXACT,   API_READ, "readyz",       false, false, false, status_readyz },
    { "/stats",     ROUTE_EXACT,   API_READ, "stats",        false, false, false, status_stats },
    { "/metrics",   ROUTE_EXACT,   API_READ, "metrics",      false, false, false, status_metrics },
    { "/reload",    ROUTE_PREFIX,  API_POST, "reload",       true,  false, false, reload },
    /* Admin although a read: the whole filter, for peers (and backups). */
    { "/snapshot",  ROUTE_PREFIX,  API_READ, "snapshot",     true,  false, false, snapshot },
};
const unsigned api_route_count = sizeof api_routes / sizeof api_routes[0];

/*
 * Does path take route r?  One pass over the route's path, stopping at the
 * first difference: most rows are ruled out by their second byte.
 */
static bool route_takes(const struct route *r, const char *path, size_t *rest_off)
{
    size_t i = 0;
    while (r->path[i] != '\0' && r->path[i] == path[i])
        i++;
    if (r->path[i] != '\0')
        return false;
    if (r->match == ROUTE_EXACT) {
        *rest_off = i;
        return path[i] == '\0';
    }
    /* "/auth" takes "/auth" and "/auth/...", "/exists/" anything after it. */
    if (r->path[i - 1] != '/' && path[i] != '\0' && path[i] != '/')
        return false;
    *rest_off = i;
    return true;
}

const struct route *api_route_find(const char *path, unsigned method, size_t *rest_off,
                                   unsigned *allowed)
{
    const struct route *first = NULL;
    size_t first_off = 0, off;
    *allowed = 0;
    for (unsigned i = 0; i < api_route_count; i++) {
        if (!route_takes(&api_routes[i], path, &off))
            continue;
        *allowed |= api_routes[i].methods;
        if (api_routes[i].methods & method) {
            *rest_off = off;
            return &api_routes[i];
        }
        if (first == NULL) {
            first = &api_routes[i];
            first_off = off;
        }
    }
    *rest_off = first_off;
    return first;
}

unsigned api_method_bit(const char *method)
{
    if (strcmp(method, MHD_HTTP_METHOD_GET) == 0)
        return API_GET;
    if (strcmp(method, MHD_HTTP_METHOD_HEAD) == 0)
        return API_HEAD;
    if (strcmp(method, MHD_HTTP_METHOD_POST) == 0)
        return API_POST;
    return API_OTHER;
}

void api_allow_header(unsigned methods, char *out, size_t cap)
{
    static const struct { unsigned bit; const char *name; } m[] = {
        { API_GET, "GET" }, { API_HEAD, "HEAD" }, { API_POST, "POST" },
    };
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (methods & m[i].bit) {
            int w = snprintf(out + used, cap - used, "%s%s", used ? ", " : "", m[i].name);
            if (w < 0 || (size_t)w >= cap - used) {
                out[used] = '\0';       /* whole names only */
                return;
            }
            used += (size_t)w;
        }
}

struct stats *api_stats_new(void)
{
    return stats_new(api_route_count + 1);
}

const char *api_slot_name(unsigned slot)
{
    return slot < api_route_count ? api_routes[slot].name : "other";
}
