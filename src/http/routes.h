/*
 * The route table (routes.c): one row per endpoint, what http.c matches
 * requests against and enforces (methods, admin right, body), and the
 * renderings of it that docs and log lines use instead of prose copies.
 */
#ifndef BLOOMGUARD_ROUTES_H
#define BLOOMGUARD_ROUTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "api.h"

/* Methods a route takes; others get 405 with an Allow header made from these. */
enum {
    ROUTE_GET = 1, ROUTE_HEAD = 2, ROUTE_POST = 4, ROUTE_OTHER = 8,
    ROUTE_READ = ROUTE_GET | ROUTE_HEAD,
    ROUTE_ANY = ROUTE_GET | ROUTE_HEAD | ROUTE_POST | ROUTE_OTHER
};

/* A route's admin value: the admin token or the replication token opens it. */
#define ROUTE_REPLICATION 2

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
    /*
     * The credential it needs: 0 none, 1 (true) the admin token,
     * ROUTE_REPLICATION the admin token or [server] replication_token_file's
     * (for replicas, which should hold no admin right).
     */
    unsigned char admin;
    bool body;                  /* reads a request body (JSON or text/plain, up to max_body_bytes) */
    bool raw_path;              /* the path bytes are not checked for UTF-8 (another service's URI) */
    api_handler *handler;
    /* Its fast form (api.h), for a GET http_fast.c answers itself; NULL: none. */
    api_fast_handler *fast;
    /* Its fast form for a request with a body (a POST), whole in one read; NULL: none. */
    api_fast_body_handler *fast_body;
};

/* The table, in the order /stats and /metrics list the routes. */
extern const struct route routes_table[];
extern const unsigned routes_count;

/*
 * The route taking path and method (an API_* bit): the first row in table
 * order (the hot routes come first) that takes both; else the first that
 * takes the path (the caller answers 405), else NULL.  *rest_off gets the
 * offset of the rest of the path, *allowed the methods of every row taking
 * the path (for the Allow header).
 */
const struct route *routes_find(const char *path, unsigned method, size_t *rest_off,
                                   unsigned *allowed);

/* A method's API_* bit (ROUTE_OTHER for any but GET, HEAD and POST). */
unsigned routes_method_bit(const char *method);

/* "GET, HEAD", "POST", ...: the Allow header of methods (at most 32 bytes). */
void routes_allow_header(unsigned methods, char *out, size_t cap);

/*
 * Request counters for every route, plus one slot, routes_count, for
 * requests no route took: named by routes_slot_name.  NULL on allocation failure.
 */
struct stats *routes_stats_new(void);
const char *routes_slot_name(unsigned slot);     /* a route's name, or "other" */

/*
 * The table for people: one line per route, "  PATH METHODS NAME prefix|
 * exact[, admin][, body]" (METHODS: "GET,HEAD", "POST", "any"), in table order (bloomguard -h; docs.test checks
 * the man page against it).
 */
void routes_list(FILE *out);

/*
 * The admin routes as prose, each by its first method: "POST /ids, POST
 * /reload and GET /snapshot" (for log lines).  Cut at a whole route when
 * cap is too small.
 */
void routes_admin_text(char *out, size_t cap);

#endif
