/*
 * The contract between http.c and the endpoint handlers (struct reply,
 * struct api_request, answering later) and the helpers every handler
 * shares.  The bottom of the HTTP layers: handlers (ids.h, admin.h,
 * status.h, metrics.h) include it, routes.h names them, http.c includes
 * routes.h; api.h includes none of them.
 */
#ifndef BLOOMGUARD_API_H
#define BLOOMGUARD_API_H

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>

#include "app.h"

/*
 * What a handler answers: a status and a response.  The caller destroys resp
 * after queueing it unless shared is set (a constant response built once).
 * resp NULL means out of memory: the caller answers 500 itself.
 */
struct reply {
    unsigned status;
    struct MHD_Response *resp;
    bool shared;
};

enum body_type { BODY_NONE, BODY_JSON, BODY_TEXT, BODY_OTHER };

/*
 * One request as a handler sees it, borrowed for the call.  Paths are raw:
 * still percent-encoded (ids are decoded strictly by idcodec, not by MHD).
 */
/*
 * Answering later, for a handler that waits on another thread (a POST
 * waiting for the disk): begin(ctx) suspends the request (once, from the
 * handler, which then returns API_LATER); done(ctx, reply), from any
 * thread, exactly once after begin, hands over the reply and wakes the
 * request, which http.c then queues.  The request's body and path are not
 * valid after the handler returns.
 */
struct api_later {
    void (*begin)(void *ctx);
    void (*done)(void *ctx, struct reply r);
    void *ctx;
};
/* The status of a handler's reply that comes later (api_later). */
#define API_LATER 1u

struct api_request {
    const char *method;
    const char *path;
    const char *rest;           /* the path after a prefix route's path; "" for exact routes */
    size_t rest_len;
    enum body_type body_type;   /* body routes: JSON or TEXT (http.c refused the others) */
    const char *body;           /* body routes: never empty */
    size_t body_len;
    struct MHD_Connection *conn;    /* for request headers; NULL in fuzzers (no headers) */
    const struct api_later *later;  /* NULL where replies cannot come later (fuzzers) */
};

typedef struct reply api_handler(struct app *a, const struct api_request *rq);

/*
 * A route's fast form, for the requests http_fast.c answers without
 * libmicrohttpd (a GET with no body): the answer the handler would give
 * to rest (as api_request's), its status returned and its JSON body
 * written to out (at most cap bytes, *len of them), counted as the handler
 * counts it; or 0, nothing written or counted, when this request needs the
 * handler itself (an error, a reply not in the fast form's reach).
 * Thread-safe as the handler is.
 */
typedef unsigned api_fast_handler(struct app *a, const char *rest, size_t rest_len, char *out,
                                  size_t cap, size_t *len);

/*
 * A POST's fast form (http_fast.c: a body of body_len bytes of type bt,
 * whole, already read) may answer later, as api_later lets a handler:
 * then it returns API_LATER and calls done(l, status, body, len) exactly
 * once, from any thread, the JSON body copied before done returns.  hold
 * is the handler's own, from its call to done (what the callback needs);
 * ctx is the server's.
 */
struct api_fast_later {
    void (*done)(struct api_fast_later *l, unsigned status, const char *body, size_t len);
    void *ctx;
    void *hold[2];
    size_t held;
};

/*
 * As api_fast_handler, for a route with a body: the answer written to out,
 * its status returned; API_LATER (later not NULL) when it comes through
 * later; or 0, with nothing done, written or counted, when the request
 * needs the handler itself (every refusal: the handler's reply is the one
 * clients get, byte for byte).  Thread-safe as the handler is.
 */
typedef unsigned api_fast_body_handler(struct app *a, const char *rest, size_t rest_len,
                                       enum body_type bt, const char *body, size_t body_len,
                                       char *out, size_t cap, size_t *len,
                                       struct api_fast_later *later);

/*
 * The JSON body api_error gives for code and message msg (already
 * formatted, msg_len bytes), written to out (cap bytes; at least
 * API_ERROR_JSON_MAX holds any): its length, or 0 when it does not fit.
 */
#define API_ERROR_JSON_MAX (96 + 6 * 512 + 4)
size_t api_error_json(char *out, size_t cap, const char *code, const char *msg, size_t msg_len);

/* Responses that never change, queued again and again (a->prebuilt). */
struct api_static {
    struct MHD_Response *healthz;
    struct MHD_Response *auth_allow[4];    /* hit, bypass, not ready (fail open), degraded */
    struct MHD_Response *auth_deny[2];     /* miss, not ready (fail closed) */
    struct MHD_Response *inserted_one;     /* POST /ids of one ID: {"inserted":1} */
};

/* Build the constant responses once; false on allocation failure. */
bool api_init(struct app *a);
void api_fini(struct app *a);

/* A JSON error {"error":code,"message":...}; message is printf-style. */
struct reply api_error(unsigned status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A JSON document already rendered: body (malloc'd) is taken; NULL answers 500. */
struct reply api_json_take(unsigned status, char *body);

/* A reply with a constant response (api_static): the caller does not destroy it. */
struct reply api_shared(unsigned status, struct MHD_Response *r);

/* A response of len bytes of JSON from body, with its Content-Type; NULL when out of memory. */
struct MHD_Response *api_json_response(char *body, size_t len, enum MHD_ResponseMemoryMode mode);

/*
 * head, then s escaped for a JSON string, then tail, in one malloc'd block
 * (the caller frees it, or hands it to MHD).  *len gets the length (without
 * the NUL that ends it).  NULL when memory runs out.
 */
char *api_json_around(const char *head, const char *s, size_t n, const char *tail, size_t *len);

/*
 * The table a path names: "NAME" (exactly, len bytes) among the configured
 * filters; -1 with a 404 unknown_filter reply in *err when there is none.
 * api_table_of_rest: the table of a batch, reload or snapshot path, whose
 * rest is "" (the default table, 0) or "/NAME".
 */
int api_table_named(struct app *a, const char *name, size_t len, struct reply *err);

/*
 * Whether table t follows an upstream bloomguard ([sync] method =
 * upstream): its data is read-only here.  api_read_only: the 409 a write
 * to it gets, {"error":"read_only_replica", "message", "upstream": the
 * upstream it follows now, "upstreams": all of them}, as Redis answers
 * READONLY: write to the upstream.
 */
bool api_replica(const struct app *a, unsigned t);
struct reply api_read_only(struct app *a, unsigned t);
int api_table_of_rest(struct app *a, const struct api_request *rq, struct reply *err);

#endif
