/*
 * The ID endpoints, the hot path: GET /exists/{id}, POST /exists, POST /ids
 * and /auth; and POST /absent, a service's reports of IDs it did not find.  Lookups build their small JSON answers by hand into one
 * buffer handed to MHD (no jansson on the hot path); request bodies are
 * read by ids_body.c.
 */
#include "ids.h"
#include "ids_int.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "idcodec.h"
#include "pgerror.h"
#include "spell.h"
#include "table.h"
#include "stats.h"
#include "uritmpl.h"

/*
 * No filter live yet for t.  "Still loading" only while no attempt has
 * failed: a wrong password or a missing table must not read as patience.
 * The error is the public part /readyz shows too (no host, role or path).
 */
static void not_ready_msg(struct table *t, char *msg, size_t cap)
{
    struct table_status st;
    table_status(t, &st);
    if (st.last_error[0] == '\0' || st.running) {
        snprintf(msg, cap, "the filter is still loading from PostgreSQL");
        return;
    }
    char code[64] = "";
    if (st.last_sqlstate[0] != '\0') {
        const char *hint = pgerror_hint(st.last_sqlstate);
        snprintf(code, sizeof code, " (SQLSTATE %s%s", st.last_sqlstate, hint ? ": " : ")");
        if (hint != NULL) {
            snprintf(msg, cap, "the filter is not loaded, its last attempt failed: %s%s%s); "
                     "retrying", st.last_error, code, hint);
            return;
        }
    }
    snprintf(msg, cap, "the filter is not loaded, its last attempt failed: %s%s; retrying",
             st.last_error, code);
}

static struct reply not_ready(struct table *t)
{
    char msg[1024];
    not_ready_msg(t, msg, sizeof msg);
    return api_error(MHD_HTTP_SERVICE_UNAVAILABLE, "not_ready", "%s", msg);
}


/* Counts one answer of GET or POST /exists, as both do. */
static void count_answer(struct stats *st, enum table_answer ans)
{
    if (ans == TABLE_DEGRADED)
        stats_add(st, ST_DEGRADED, 1);
    if (ans == TABLE_UNPROVABLE)
        stats_add(st, ST_UNPROVABLE, 1);
    stats_add(st, ans == TABLE_ABSENT ? ST_LOOKUP_MISS : ST_LOOKUP_HIT, 1);
}

/*
 * Whether raw ID bytes are their own decoding and their own JSON: visible
 * ASCII but '%' (an escape), '"' and '\\' (escaped in JSON).  Such an ID
 * (every ID of a numeric or UUID key) skips id_decode's percent and UTF-8
 * passes and json_escape_append's, to the same bytes (about 140 of the
 * fast path's 2,100 instructions a request, callgrind, 6-digit IDs).
 */
#define BITS(lo, hi) ((~UINT64_C(0) >> (63 - (hi))) & (~UINT64_C(0) << (lo)))
static bool id_plain(const char *s, size_t len)
{
    /* The bytes allowed, as bits: 0x21..0x3F and 0x40..0x7E, but the three. */
    static const uint64_t ok[2] = {
        BITS(0x21, 0x3F) & ~(UINT64_C(1) << '"') & ~(UINT64_C(1) << '%'),
        BITS(0, 0x7E - 0x40) & ~(UINT64_C(1) << ('\\' - 0x40)),
    };
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x80 || !((ok[c >> 6] >> (c & 63)) & 1))
            return false;
    }
    return true;
}
#undef BITS

/*
 * GET /exists/{id} up to its answer: the table the raw rest names
 * ("ID", or "NAME/ID"), the ID decoded into id (CONFIG_MAX_ID_BYTES + 1
 * bytes), looked up.  True with *ans anything but TABLE_NOT_READY; false
 * with the error reply in *err, or, err NULL, with no reply built.
 * With plain not NULL (the fast form), an id_plain ID is copied rather
 * than decoded, and *plain tells whether it was; libmicrohttpd's handler
 * passes NULL and always decodes, so tests/fastpath.test, which compares
 * the two byte for byte, holds the shortcut to id_decode's answer.
 * Counts nothing.
 */
static bool exists_lookup(struct app *a, const char *raw, size_t rawlen, char *id, size_t *idlen,
                          enum table_answer *ans, struct reply *err, bool *plain)
{
    struct reply unused;
    int t = 0;
    const char *slash = memchr(raw, '/', rawlen);
    if (slash != NULL) {
        if ((t = api_table_named(a, raw, (size_t)(slash - raw), err ? err : &unused)) < 0) {
            if (err == NULL && unused.resp != NULL)
                MHD_destroy_response(unused.resp);  /* rare: a name that is no filter's */
            return false;
        }
        rawlen -= (size_t)(slash + 1 - raw);
        raw = slash + 1;
        /*
         * "/exists/NAME/a/b": a literal '/' ends the filter's name, so one in
         * the ID is a client that forgot to encode it (or a path built
         * wrong): an answer for "a/b" may not be the ID it meant.
         */
        if (memchr(raw, '/', rawlen) != NULL) {
            if (err != NULL)
                *err = api_error(MHD_HTTP_BAD_REQUEST, "bad_path", "an ID's '/' must be sent as "
                                 "%%2F (a literal '/' only ends the filter's name: /exists/NAME/ID)");
            return false;
        }
    }
    enum id_error e = ID_OK;
    bool is_plain = plain != NULL && rawlen > 0 && rawlen <= a->cfg->max_id_bytes
                    && rawlen <= CONFIG_MAX_ID_BYTES && id_plain(raw, rawlen);
    if (plain != NULL)
        *plain = is_plain;
    if (is_plain) {
        memcpy(id, raw, rawlen);        /* what id_decode would give */
        id[rawlen] = '\0';
        *idlen = rawlen;
    } else {
        e = id_decode(raw, rawlen, a->cfg->max_id_bytes, id, CONFIG_MAX_ID_BYTES + 1, idlen);
    }
    if (e != ID_OK) {
        if (err != NULL)
            *err = id_error_reply(e, "");
        return false;
    }
    *ans = table_lookup(a->tables[t], id, *idlen);
    if (*ans == TABLE_NOT_READY) {
        if (err != NULL)
            *err = not_ready(a->tables[t]);
        return false;
    }
    return true;
}

/* The lookup's counters, and the tail of its body {"id":"<escaped>","exists":...}. */
static const char *exists_counted(struct app *a, enum table_answer ans)
{
    count_answer(a->stats, ans);
    return ans == TABLE_DEGRADED ? "\",\"exists\":true,\"degraded\":true}"
         : ans == TABLE_UNPROVABLE ? "\",\"exists\":true,\"unprovable\":true}"
         : ans == TABLE_MAYBE ? "\",\"exists\":true}" : "\",\"exists\":false}";
}

#define EXISTS_HEAD "{\"id\":\""
#define EXISTS_TAIL_MAX 40      /* the longest tail exists_counted gives, and more */

struct reply ids_exists(struct app *a, const struct api_request *rq)
{
    char id[CONFIG_MAX_ID_BYTES + 1];   /* on the stack: nothing to free on errors */
    size_t idlen = 0;
    enum table_answer ans;
    struct reply err;
    if (!exists_lookup(a, rq->rest, rq->rest_len, id, &idlen, &ans, &err, NULL))
        return err;
    const char *tail = exists_counted(a, ans);
    /* One small block, handed to MHD. */
    size_t used;
    char *out = api_json_around(EXISTS_HEAD, id, idlen, tail, &used);
    if (out == NULL)
        return (struct reply){ 500, NULL, false };
    /* For HEAD, MHD sends the same headers (Content-Length too) and no body. */
    unsigned status = ans == TABLE_ABSENT ? MHD_HTTP_NOT_FOUND : MHD_HTTP_OK;
    return (struct reply){ status, api_json_response(out, used, MHD_RESPMEM_MUST_FREE), false };
}

unsigned ids_exists_fast(struct app *a, const char *rest, size_t rest_len, char *out, size_t cap,
                         size_t *len)
{
    char id[CONFIG_MAX_ID_BYTES + 1];
    size_t idlen = 0;
    enum table_answer ans;
    bool plain;
    if (!exists_lookup(a, rest, rest_len, id, &idlen, &ans, NULL, &plain)
        || cap < sizeof EXISTS_HEAD + 6 * idlen + EXISTS_TAIL_MAX)
        return 0;
    const char *tail = exists_counted(a, ans);
    size_t used = sizeof EXISTS_HEAD - 1, tl = strlen(tail);
    memcpy(out, EXISTS_HEAD, used);
    if (plain) {
        memcpy(out + used, id, idlen);  /* json_escape_append's bytes, without its pass */
        used += idlen;
    } else {
        json_escape_append(out, cap, &used, id, idlen);
    }
    memcpy(out + used, tail, tl);
    *len = used + tl;
    return ans == TABLE_ABSENT ? MHD_HTTP_NOT_FOUND : MHD_HTTP_OK;
}

/* What a batch endpoint does with the valid IDs l for table t; batch_serve frees l after. */
typedef struct reply batch_fn(struct app *a, const struct api_request *rq, struct table *t,
                              const struct idlist *l);

/*
 * A batch request: its table and its IDs, each refused with its own reply,
 * then fn's answer.  The IDs are taken and freed here, once for every path.
 */
static struct reply batch_serve(struct app *a, const struct api_request *rq, bool allow_single,
                                batch_fn *fn)
{
    struct reply err;
    int t = api_table_of_rest(a, rq, &err);
    if (t < 0)
        return err;
    struct idlist l;
    err = parse_ids(a, rq->body_type, rq->body, rq->body_len, allow_single, &l);
    if (err.status != 0)
        return err;
    struct reply r = fn(a, rq, a->tables[t], &l);
    idlist_free(&l);
    return r;
}

static struct reply exists_batch(struct app *a, const struct api_request *rq, struct table *t,
                                 const struct idlist *l)
{
    (void)rq;
    enum table_answer *ans = malloc(l->n * sizeof *ans + 1);
    /* true/false with commas, and the two tags: */
    char *out = malloc(l->n * 6 + 64);
    if (ans == NULL || out == NULL) {
        free(ans);
        free(out);
        return (struct reply){ 500, NULL, false };
    }
    if (!table_lookup_many(t, l->n, l->ids, l->lens, ans)) {
        free(ans);
        free(out);
        return not_ready(t);
    }
    bool degraded = false, unprovable = false;
    size_t used = 11;
    memcpy(out, "{\"exists\":[", 11);
    for (size_t i = 0; i < l->n; i++) {
        count_answer(a->stats, ans[i]);
        degraded |= ans[i] == TABLE_DEGRADED;
        unprovable |= ans[i] == TABLE_UNPROVABLE;
        if (i)
            out[used++] = ',';
        bool maybe = ans[i] != TABLE_ABSENT;
        memcpy(out + used, maybe ? "true" : "false", maybe ? 4 : 5);
        used += maybe ? 4 : 5;
    }
    /* As GET /exists tags a single answer: any such answer in the batch tags it. */
    used += (size_t)sprintf(out + used, "]%s%s}", degraded ? ",\"degraded\":true" : "",
                            unprovable ? ",\"unprovable\":true" : "");
    free(ans);
    return (struct reply){ MHD_HTTP_OK, api_json_response(out, used, MHD_RESPMEM_MUST_FREE), false };
}

struct reply ids_exists_batch(struct app *a, const struct api_request *rq)
{
    return batch_serve(a, rq, false, exists_batch);
}

/*
 * The refusal of POST /ids for table t, from table_insert's result r (not
 * TABLE_INSERTED): its status, with its code and message (msg, cap bytes);
 * 500 with *code NULL when memory ran out.  Reads only what outlives the
 * request (the table), so that it can run on the thread that finished a
 * later insert.
 */
static unsigned insert_refusal(struct table *t, enum table_insert_result r, size_t want, int e,
                               const char **code, char *msg, size_t cap)
{
    struct table_posts pi;
    *code = NULL;
    switch (r) {
    case TABLE_INSERT_NOT_READY:
        *code = "not_ready";
        not_ready_msg(t, msg, cap);
        return MHD_HTTP_SERVICE_UNAVAILABLE;
    case TABLE_INSERT_NOT_A_VALUE: {
        struct table_ident id;
        table_ident(t, &id);
        *code = "not_a_value";
        snprintf(msg, cap, "id number %d of the request is no value of the column's type (%s): it "
                 "can never be a row; none of these %zu was added", e + 1,
                 id.type_name[0] ? id.type_name : spell_type_name(table_spell(t)), want);
        return MHD_HTTP_BAD_REQUEST;
    }
    case TABLE_INSERT_NOT_DURABLE: {
        bool full = e == ENOSPC || e == EDQUOT;
        char why[128];
        *code = full ? "post_log_full" : "post_log_failed";
        snprintf(msg, cap, "the POST log cannot keep these %zu ids on disk (%s): none was "
                 "acknowledged", want, strerror_r(e, why, sizeof why));
        return full ? MHD_HTTP_INSUFFICIENT_STORAGE : MHD_HTTP_INTERNAL_SERVER_ERROR;
    }
    case TABLE_INSERT_FULL_COUNT:
        table_posts(t, &pi);
        *code = "journal_full";
        snprintf(msg, cap, "the POST journal holds pending_limit (%llu) ids: none of these %zu was "
                 "added", (unsigned long long)pi.limit, want);
        return MHD_HTTP_INSUFFICIENT_STORAGE;
    case TABLE_INSERT_FULL_BYTES:
        table_posts(t, &pi);
        *code = "journal_full";
        snprintf(msg, cap, "the POST journal holds pending_max_bytes (%llu) bytes of ids: none of "
                 "these %zu was added", (unsigned long long)pi.max_bytes, want);
        return MHD_HTTP_INSUFFICIENT_STORAGE;
    case TABLE_INSERTED:
    case TABLE_INSERT_NOMEM:
    case TABLE_INSERT_LATER:
        break;
    }
    return MHD_HTTP_INTERNAL_SERVER_ERROR;
}

/* The answer to POST /ids for table t, from table_insert's result (see insert_refusal). */
static struct reply insert_reply(struct stats *stats, const struct api_static *p, struct table *t,
                                 enum table_insert_result r, size_t n, size_t want, int e)
{
    if (r != TABLE_INSERTED) {
        char msg[1024];
        const char *code;
        unsigned status = insert_refusal(t, r, want, e, &code, msg, sizeof msg);
        if (code == NULL)
            return (struct reply){ 500, NULL, false };
        return api_error(status, code, "%s", msg);
    }
    stats_add(stats, ST_INSERTS, n);
    if (n == 1 && p != NULL)
        return api_shared(MHD_HTTP_OK, p->inserted_one);
    char out[64];
    snprintf(out, sizeof out, "{\"inserted\":%zu}", n);
    return api_json_take(MHD_HTTP_OK, strdup(out));
}

/* A POST waiting for the disk, its request suspended. */
struct insert_later {
    struct stats *stats;
    const struct api_static *prebuilt;
    struct table *t;
    size_t want;
    struct api_later later;
};

static void insert_done(void *arg, enum table_insert_result r, size_t n, int e)
{
    struct insert_later *il = arg;
    struct api_later later = il->later;
    struct reply rp = insert_reply(il->stats, il->prebuilt, il->t, r, n, il->want, e);
    free(il);
    later.done(later.ctx, rp);
}

static struct reply insert_batch(struct app *a, const struct api_request *rq, struct table *t,
                                 const struct idlist *l)
{
    size_t n = 0, want = l->n;
    int e = 0;
    enum table_insert_result r;
    /*
     * Where the POST must reach the disk first, the request waits suspended
     * rather than holding its thread: one fdatasync then commits the POSTs
     * of many connections of one thread.
     */
    struct insert_later *il = rq->later && table_durable(t) ? malloc(sizeof *il) : NULL;
    if (il != NULL) {
        *il = (struct insert_later){ a->stats, a->prebuilt, t, want, *rq->later };
        il->later.begin(il->later.ctx);
        r = table_insert_later(t, l->n, l->ids, l->lens, &n, &e, insert_done, il);
        if (r != TABLE_INSERT_LATER)
            insert_done(il, r, n, e);
        return (struct reply){ API_LATER, NULL, false };
    }
    r = table_insert(t, l->n, l->ids, l->lens, &n, &e);
    return insert_reply(a->stats, a->prebuilt, t, r, n, want, e);
}

struct reply ids_insert(struct app *a, const struct api_request *rq)
{
    struct reply err;
    int t = api_table_of_rest(a, rq, &err);
    if (t < 0)
        return err;
    /* A replica's keys come from its upstream only: Redis's READONLY, naming where to write. */
    if (api_replica(a, (unsigned)t))
        return api_read_only(a, (unsigned)t);
    return batch_serve(a, rq, true, insert_batch);
}

/*
 * table_insert's result as POST /ids's answer, in JSON text (out, cap
 * bytes, at least API_ERROR_JSON_MAX): the status, the bytes insert_reply
 * would send, counted as it counts.
 */
static unsigned insert_text(struct stats *stats, struct table *t, enum table_insert_result r,
                            size_t n, size_t want, int e, char *out, size_t cap, size_t *len)
{
    if (r == TABLE_INSERTED) {
        stats_add(stats, ST_INSERTS, n);
        int w = snprintf(out, cap, "{\"inserted\":%zu}", n);
        *len = w > 0 ? (size_t)w : 0;
        return MHD_HTTP_OK;
    }
    char msg[1024];
    const char *code;
    unsigned status = insert_refusal(t, r, want, e, &code, msg, sizeof msg);
    *len = code != NULL ? api_error_json(out, cap, code, msg, strlen(msg)) : 0;
    if (*len == 0) {
        /* What http.c's queue answers to a reply it has no response for. */
        static const char oom[] = "{\"error\":\"internal\",\"message\":\"out of memory\"}";
        memcpy(out, oom, sizeof oom);
        *len = sizeof oom - 1;
        status = MHD_HTTP_INTERNAL_SERVER_ERROR;
    }
    return status;
}

/* A fast POST's later insert done (the POST log's writer thread): its answer to the server. */
static void insert_fast_done(void *arg, enum table_insert_result r, size_t n, int e)
{
    struct api_fast_later *l = arg;
    char out[API_ERROR_JSON_MAX];
    size_t len;
    unsigned status = insert_text(l->hold[1], l->hold[0], r, n, l->held, e, out, sizeof out, &len);
    l->done(l, status, out, len);
}

unsigned ids_insert_fast(struct app *a, const char *rest, size_t rest_len, enum body_type bt,
                         const char *body, size_t body_len, char *out, size_t cap, size_t *len,
                         struct api_fast_later *later)
{
    /* Refusals before the insert are the handler's (return 0): its reply, byte for byte. */
    struct reply err = { 0, NULL, false };
    int t = rest_len == 0 ? 0 : api_table_named(a, rest + 1, rest_len - 1, &err);
    struct idlist l;
    if (t < 0 || api_replica(a, (unsigned)t) || cap < API_ERROR_JSON_MAX
        || (err = parse_ids(a, bt, body, body_len, true, &l)).status != 0) {
        if (err.resp != NULL && !err.shared)
            MHD_destroy_response(err.resp);
        return 0;
    }
    struct table *tb = a->tables[t];
    size_t n = 0, want = l.n;
    int e = 0;
    enum table_insert_result r;
    if (later != NULL && table_durable(tb)) {
        /* As insert_batch: the answer waits for the disk, the connection parked meanwhile. */
        later->hold[0] = tb;
        later->hold[1] = a->stats;
        later->held = want;
        r = table_insert_later(tb, l.n, l.ids, l.lens, &n, &e, insert_fast_done, later);
    } else {
        r = table_insert(tb, l.n, l.ids, l.lens, &n, &e);
    }
    idlist_free(&l);        /* the IDs were copied */
    if (r == TABLE_INSERT_LATER)
        return API_LATER;
    return insert_text(a->stats, tb, r, n, want, e, out, cap, len);
}

/*
 * POST /absent: IDs a service looked up and did not find.  Each becomes a
 * candidate the verifier looks up (never believed by itself:
 * table_adapt.h); the answer counts what became of them.
 */
static struct reply absent_batch(struct app *a, const struct api_request *rq, struct table *t,
                                 const struct idlist *l)
{
    (void)a;
    (void)rq;
    if (!table_adaptive(t))
        return api_error(MHD_HTTP_BAD_REQUEST, "adaptive_off",
                         "[adaptive] enabled = no: reports of absent ids are not taken");
    size_t n[TABLE_REPORT_NOT_READY + 1] = { 0 };
    for (size_t i = 0; i < l->n; i++) {
        enum table_report r = table_report(t, l->ids[i], l->lens[i]);
        if (r == TABLE_REPORT_NOT_READY)
            return not_ready(t);
        n[r]++;
    }
    char out[160];
    snprintf(out, sizeof out, "{\"queued\":%zu,\"absent\":%zu,\"unprovable\":%zu,\"held\":%zu}",
             n[TABLE_REPORT_QUEUED], n[TABLE_REPORT_ABSENT], n[TABLE_REPORT_UNPROVABLE],
             n[TABLE_REPORT_HELD]);
    return api_json_take(MHD_HTTP_ACCEPTED, strdup(out));
}

struct reply ids_absent(struct app *a, const struct api_request *rq)
{
    return batch_serve(a, rq, true, absent_batch);
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
            return api_shared(cfg->allow_status, p->auth_allow[1]);
        }
        unsigned t = cfg->uri_template_filter[i];
        switch (table_lookup(a->tables[t], id, idlen)) {
        case TABLE_NOT_READY:
            stats_add(a->stats, ST_AUTH_NOT_READY, 1);
            if (cfg->fail_open)
                return api_shared(cfg->allow_status, p->auth_allow[2]);
            return api_shared(MHD_HTTP_SERVICE_UNAVAILABLE, p->auth_deny[1]);
        case TABLE_MAYBE:
            stats_add(a->stats, ST_AUTH_HIT, 1);
            return api_shared(cfg->allow_status, p->auth_allow[0]);
        case TABLE_DEGRADED:
            stats_add(a->stats, ST_DEGRADED, 1);
            stats_add(a->stats, ST_AUTH_DEGRADED, 1);
            return api_shared(cfg->allow_status, p->auth_allow[3]);
        case TABLE_UNPROVABLE:
            /* The service may read this spelling as a row's: no proof of absence. */
            stats_add(a->stats, ST_UNPROVABLE, 1);
            return api_shared(cfg->allow_status, p->auth_allow[1]);
        case TABLE_ABSENT:
            break;
        }
        stats_add(a->stats, ST_AUTH_MISS, 1);
        return api_shared(cfg->deny_status, p->auth_deny[0]);
    }
    stats_add(a->stats, ST_AUTH_BYPASS, 1);
    return api_shared(cfg->allow_status, p->auth_allow[1]);
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
struct reply ids_auth(struct app *a, const struct api_request *rq)
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
