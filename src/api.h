/*
 * The HTTP API: one function per endpoint, each turning a parsed request into
 * a status and an MHD response.  Routing, bodies and limits live in http.c.
 */
#ifndef BLOOMGUARD_API_H
#define BLOOMGUARD_API_H

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "config.h"
#include "guard.h"
#include "live.h"
#include "log.h"
#include "pending.h"
#include "source.h"
#include "stats.h"

/*
 * Everything a handler may use; owned by main, shared by all threads.
 * http.c hands each request callback a copy whose cfg and admin_token are
 * the generation of live in force (see live.h), so handlers read a->cfg as
 * before.  In the shared struct, cfg is the configuration at start: right
 * for keys that need a restart, stale for the others after a SIGHUP.
 */
struct app {
    const struct config *cfg;
    struct live *live;          /* the configuration in force (SIGHUP replaces it) */
    const struct log *lg;
    struct guard *guard;
    struct pending *pending;    /* POSTed ids kept across rebuilds */
    struct stats *stats;
    struct source *source;
    time_t started;             /* wall clock at start, for uptime */
    double started_mono;        /* monotonic seconds at start */
    struct api_static *prebuilt; /* constant responses, built by api_init */
    const char *admin_token;    /* what POST /ids and /reload need (http.c checks); NULL: none */
};

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

/* Build the constant responses once; false on allocation failure. */
bool api_init(struct app *a);
void api_fini(struct app *a);

/* A JSON error {"error":code,"message":...}; message is printf-style. */
struct reply api_error(unsigned status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* GET/HEAD /exists/{raw}: raw is the still percent-encoded rest of the path. */
struct reply api_exists(struct app *a, const char *raw, size_t len);
/* POST /exists: body of ids, JSON {"ids":[...]} or text/plain lines. */
struct reply api_exists_batch(struct app *a, enum body_type t, const char *body, size_t len);
/* POST /ids: {"id":...}, {"ids":[...]} or text/plain lines. */
struct reply api_insert(struct app *a, enum body_type t, const char *body, size_t len);
/* /auth: uri is the original request URI (raw) from a header or the path. */
struct reply api_auth(struct app *a, const char *uri, size_t len);
struct reply api_healthz(struct app *a);
struct reply api_readyz(struct app *a);
struct reply api_stats(struct app *a);
struct reply api_metrics(struct app *a);
struct reply api_reload(struct app *a);

#endif
