/*
 * The HTTP API: the route table (one row per endpoint: path, methods, name,
 * handler) and the handlers of the ID endpoints.  http.c matches requests
 * against the table and enforces what a row says (methods, admin token,
 * body); status.c renders /stats, /readyz and /metrics.
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

/* Methods a route takes; others get 405 with an Allow header made from these. */
enum {
    API_GET = 1, API_HEAD = 2, API_POST = 4, API_OTHER = 8,
    API_READ = API_GET | API_HEAD,
    API_ANY = API_GET | API_HEAD | API_POST | API_OTHER
};

enum route_match {
    ROUTE_EXACT,    /* the path and nothing else */
    /*
     * The path and everything below it: "/auth" takes /auth and /auth/...
     * (not /authx); a path ending in '/' needs something after it
     * ("/exists/" takes /exists/..., not /exists).  rest is what follows.
     */
    ROUTE_PREFIX
};

struct route {
    const char *path;
    enum route_match match;
    unsigned methods;           /* API_* bits */
    const char *name;           /* in /stats requests_by_endpoint and the endpoint="" label */
    bool admin;                 /* needs the write credential (the admin token) */
    bool body;                  /* reads a request body (JSON or text/plain, up to max_body_bytes) */
    bool raw_path;              /* the path bytes are not checked for UTF-8 (another service's URI) */
    api_handler *handler;
};

/* The table, in the order /stats and /metrics list the routes. */
extern const struct route api_routes[];
extern const unsigned api_route_count;

/*
 * The route taking path and method (an API_* bit): the first row in table
 * order (the hot routes come first) that takes both; else the first that
 * takes the path (the caller answers 405), else NULL.  *rest_off gets the
 * offset of the rest of the path, *allowed the methods of every row taking
 * the path (for the Allow header).
 */
const struct route *api_route_find(const char *path, unsigned method, size_t *rest_off,
                                   unsigned *allowed);

/* A method's API_* bit (API_OTHER for any but GET, HEAD and POST). */
unsigned api_method_bit(const char *method);

/* "GET, HEAD", "POST", ...: the Allow header of methods (at most 32 bytes). */
void api_allow_header(unsigned methods, char *out, size_t cap);

/*
 * Request counters for every route, plus one slot, api_route_count, for
 * requests no route took: named by api_slot_name.  NULL on allocation failure.
 */
struct stats *api_stats_new(void);
const char *api_slot_name(unsigned slot);     /* a route's name, or "other" */

/* Build the constant responses once; false on allocation failure. */
bool api_init(struct app *a);
void api_fini(struct app *a);

/* A JSON error {"error":code,"message":...}; message is printf-style. */
struct reply api_error(unsigned status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A JSON document already rendered: body (malloc'd) is taken; NULL answers 500. */
struct reply api_json_take(unsigned status, char *body);

/*
 * The ID endpoints, exported for the fuzzers.  GET/HEAD /exists/{id}: rest
 * is the raw ID.  POST /exists and POST /ids: a body of ids, JSON
 * {"ids":[...]} (/ids also {"id":...}) or text/plain lines.  /auth: the
 * original URI from X-Original-URI, X-Forwarded-Uri or rest ([auth]
 * uri_source).
 */
struct reply api_exists(struct app *a, const struct api_request *rq);
struct reply api_exists_batch(struct app *a, const struct api_request *rq);
struct reply api_insert(struct app *a, const struct api_request *rq);
struct reply api_auth(struct app *a, const struct api_request *rq);

#endif
