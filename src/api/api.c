/*
 * What every handler shares: the reply helpers (JSON errors, JSON bodies,
 * the constant responses built once) and the lookup of the table a path
 * names.  The handlers are ids.c's, admin.c's and status.c's; the route
 * table that names them is routes.c's.
 */
#include "api.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "config.h"
#include "idcodec.h"
#include "source.h"
#include "table.h"

#define JSON_TYPE "application/json"

struct MHD_Response *api_json_response(char *body, size_t len, enum MHD_ResponseMemoryMode mode)
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
    return (struct reply){ status, api_json_response(body, strlen(body), MHD_RESPMEM_MUST_FREE), false };
}

bool api_init(struct app *a)
{
    static const char healthz[] = "{\"status\":\"ok\"}";
    struct api_static *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return false;
    a->prebuilt = p;
    p->healthz = api_json_response((char *)healthz, sizeof healthz - 1, MHD_RESPMEM_PERSISTENT);
    p->auth_allow[0] = empty_response("hit");
    p->auth_allow[1] = empty_response("bypass");
    p->auth_allow[2] = empty_response("not-ready");
    p->auth_allow[3] = empty_response("degraded");
    p->auth_deny[0] = empty_response("miss");
    p->auth_deny[1] = empty_response("not-ready");
    static const char inserted_one[] = "{\"inserted\":1}";
    p->inserted_one = api_json_response((char *)inserted_one, sizeof inserted_one - 1,
                                        MHD_RESPMEM_PERSISTENT);
    return p->healthz && p->auth_allow[0] && p->auth_allow[1] && p->auth_allow[2]
        && p->auth_allow[3] && p->auth_deny[0] && p->auth_deny[1] && p->inserted_one;
}

void api_fini(struct app *a)
{
    struct api_static *p = a->prebuilt;
    if (p == NULL)
        return;
    struct MHD_Response *all[] = { p->healthz, p->auth_allow[0], p->auth_allow[1],
                                   p->auth_allow[2], p->auth_allow[3], p->auth_deny[0],
                                   p->auth_deny[1], p->inserted_one };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i] != NULL)
            MHD_destroy_response(all[i]);
    free(p);
    a->prebuilt = NULL;
}

struct reply api_shared(unsigned status, struct MHD_Response *r)
{
    return (struct reply){ status, r, true };
}

/*
 * head, then s escaped for a JSON string, then tail, in one heap block for
 * MHD (6 bytes per byte of s is the worst case).  *len gets the length
 * (without the NUL that ends it).  NULL when memory runs out.
 */
char *api_json_around(const char *head, const char *s, size_t n, const char *tail, size_t *len)
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
/* msg cut as api_error cuts it: before a whole character, with "...", in at most cap - 1 bytes. */
static size_t error_cut(char *msg, size_t cap, size_t len)
{
    if (len >= cap) {
        /* Cut before a whole character, not inside one, and say so. */
        len = cap - 4;
        while (len > 0 && ((unsigned char)msg[len] & 0xC0) == 0x80)
            len--;
        memcpy(msg + len, "...", 3);
        len += 3;
    }
    return len;
}

struct reply api_error(unsigned status, const char *code, const char *fmt, ...)
{
    char msg[512], head[96];
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t len = error_cut(msg, sizeof msg, w < 0 ? 0 : (size_t)w);
    /* code is one of ours ([a-z_]+): it needs no escaping. */
    snprintf(head, sizeof head, "{\"error\":\"%s\",\"message\":\"", code);
    size_t used;
    return api_json_take(status, api_json_around(head, msg, len, "\"}", &used));
}

size_t api_error_json(char *out, size_t cap, const char *code, const char *m, size_t mlen)
{
    char msg[512];
    size_t len = mlen < sizeof msg ? mlen : sizeof msg - 1;
    memcpy(msg, m, len);
    msg[len] = '\0';
    len = error_cut(msg, sizeof msg, mlen);
    int w = snprintf(out, cap, "{\"error\":\"%s\",\"message\":\"", code);
    if (w < 0 || (size_t)w + 6 * len + 3 > cap)
        return 0;
    size_t used = (size_t)w;
    json_escape_append(out, cap, &used, msg, len);
    memcpy(out + used, "\"}", 3);
    return used + 2;
}

/*
 * The table a path names: "NAME" (exactly) among the configured filters.
 * -1 with a 400 unknown_filter reply when there is none of that name: a
 * 404 would read as "surely absent" to a client that only looks at the
 * status, and deny a real ID over a typo in a filter's name.
 */
int api_table_named(struct app *a, const char *name, size_t len, struct reply *err)
{
    for (unsigned i = 0; i < a->n_tables; i++) {
        const char *n = table_name(a->tables[i]);
        if (strlen(n) == len && memcmp(n, name, len) == 0)
            return (int)i;
    }
    int q = len > 64 ? 64 : (int)len;
    *err = api_error(MHD_HTTP_BAD_REQUEST, "unknown_filter", "no filter named \"%.*s%s\"", q, name,
                     len > 64 ? "..." : "");
    return -1;
}

/*
 * The table of a batch or reload path: the rest after "/exists", "/ids" or
 * "/reload" is "" (the default table) or "/NAME".
 */
int api_table_of_rest(struct app *a, const struct api_request *rq, struct reply *err)
{
    if (rq->rest_len == 0)
        return 0;
    return api_table_named(a, rq->rest + 1, rq->rest_len - 1, err);
}

bool api_replica(const struct app *a, unsigned t)
{
    return t < a->n_tables && table_config(a->tables[t])->method == SYNC_UPSTREAM;
}

struct reply api_read_only(struct app *a, unsigned t)
{
    struct source_status ss;
    memset(&ss, 0, sizeof ss);
    if (a->source != NULL)
        source_status(a->source, t, &ss);
    json_t *o = json_pack("{s:s, s:s, s:s, s:s}", "error", "read_only_replica", "message",
                          "this daemon is a replica of an upstream bloomguard ([sync] method = "
                          "upstream): write to the upstream, whose acknowledged IDs reach the "
                          "replicas", "upstream", ss.conn.upstream, "upstreams", a->cfg->upstream);
    char *body = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return api_json_take(MHD_HTTP_CONFLICT, body);
}
