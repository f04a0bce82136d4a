/*
 * The route table, one row per endpoint, and its matcher: adding an
 * endpoint is one row here and one handler (see docs/HACKING.md).  Lists
 * of routes elsewhere (bloomguard -h, log lines) are rendered from it.
 */
#include "routes.h"

#include <stdio.h>
#include <string.h>

#include "admin.h"
#include "ids.h"
#include "metrics.h"
#include "replicate.h"
#include "stats.h"
#include "status.h"


/*
 * Every endpoint, one row each.  The order is the order of /stats
 * requests_by_endpoint and of the endpoint="" series of /metrics, and the
 * order of matching: the hot routes (/exists/{id}, /auth) come first.
 * Names are what /stats and /metrics show: never rename one.
 */
const struct route routes_table[] = {
    /* path         match          methods     name            admin  body   raw_path  handler, fast forms (GET, body) */
    { "/exists/",   ROUTE_PREFIX,  ROUTE_READ, "exists",       false, false, false, ids_exists, ids_exists_fast, NULL },
    /* POST /exists and POST /exists/{filter}: the table is in the path, as for GET. */
    { "/exists",    ROUTE_PREFIX,  ROUTE_POST, "exists_batch", false, true,  false, ids_exists_batch, NULL, NULL },
    { "/ids",       ROUTE_PREFIX,  ROUTE_POST, "ids",          true,  true,  false, ids_insert, NULL, ids_insert_fast },
    /* Any method: proxies forward the original one.  The path may be the original URI. */
    { "/auth",      ROUTE_PREFIX,  ROUTE_ANY,  "auth",         false, false, true,  ids_auth, NULL, NULL },
    { "/healthz",   ROUTE_EXACT,   ROUTE_READ, "healthz",      false, false, false, status_healthz, NULL, NULL },
    { "/readyz",    ROUTE_EXACT,   ROUTE_READ, "readyz",       false, false, false, status_readyz, NULL, NULL },
    { "/stats",     ROUTE_EXACT,   ROUTE_READ, "stats",        false, false, false, status_stats, NULL, NULL },
    { "/metrics",   ROUTE_EXACT,   ROUTE_READ, "metrics",      false, false, false, metrics_serve, NULL, NULL },
    { "/reload",    ROUTE_PREFIX,  ROUTE_POST, "reload",       true,  false, false, admin_reload, NULL, NULL },
    /* Admin although a read: the whole filter, for peers (and backups). */
    { "/snapshot",  ROUTE_PREFIX,  ROUTE_READ, "snapshot",     ROUTE_REPLICATION, false, false, admin_snapshot, NULL, NULL },
    /* Replicas: the stream, the horizon's round trips, a fresh snapshot (replicate.h). */
    { "/replicate", ROUTE_PREFIX,  ROUTE_GET,  "replicate",    ROUTE_REPLICATION, false, false, replicate_get, replicate_get_fast, NULL },
    /*
     * A service's reports of ids it did not find: candidates to verify,
     * never believed alone; replicas pass theirs up with the replication token.
     */
    { "/absent",    ROUTE_PREFIX,  ROUTE_POST, "absent",       ROUTE_REPLICATION, true,  false, ids_absent, NULL, NULL },
};
const unsigned routes_count = sizeof routes_table / sizeof routes_table[0];

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

const struct route *routes_find(const char *path, unsigned method, size_t *rest_off,
                                   unsigned *allowed)
{
    const struct route *first = NULL;
    size_t first_off = 0, off;
    *allowed = 0;
    for (unsigned i = 0; i < routes_count; i++) {
        if (!route_takes(&routes_table[i], path, &off))
            continue;
        *allowed |= routes_table[i].methods;
        if (routes_table[i].methods & method) {
            *rest_off = off;
            return &routes_table[i];
        }
        if (first == NULL) {
            first = &routes_table[i];
            first_off = off;
        }
    }
    *rest_off = first_off;
    return first;
}

unsigned routes_method_bit(const char *method)
{
    if (strcmp(method, MHD_HTTP_METHOD_GET) == 0)
        return ROUTE_GET;
    if (strcmp(method, MHD_HTTP_METHOD_HEAD) == 0)
        return ROUTE_HEAD;
    if (strcmp(method, MHD_HTTP_METHOD_POST) == 0)
        return ROUTE_POST;
    return ROUTE_OTHER;
}

void routes_allow_header(unsigned methods, char *out, size_t cap)
{
    static const struct { unsigned bit; const char *name; } m[] = {
        { ROUTE_GET, "GET" }, { ROUTE_HEAD, "HEAD" }, { ROUTE_POST, "POST" },
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

struct stats *routes_stats_new(void)
{
    return stats_new(routes_count + 1, routes_slot_name);
}

const char *routes_slot_name(unsigned slot)
{
    return slot < routes_count ? routes_table[slot].name : "other";
}

/* "GET /snapshot": a route by its first method, as prose names it. */
static void route_label(const struct route *r, char *out, size_t cap)
{
    char m[32];
    routes_allow_header(r->methods & -r->methods, m, sizeof m);
    snprintf(out, cap, "%s %s", m, r->path);
}

void routes_list(FILE *out)
{
    for (unsigned i = 0; i < routes_count; i++) {
        const struct route *r = &routes_table[i];
        char m[32];
        routes_allow_header(r->methods, m, sizeof m);
        for (char *p = m; (p = strstr(p, ", ")) != NULL;)
            memmove(p + 1, p + 2, strlen(p + 2) + 1);       /* "GET,HEAD": one word */
        fprintf(out, "  %-10s %-9s %-13s %s%s%s\n", r->path, r->methods == ROUTE_ANY ? "any" : m,
                r->name,
                r->match == ROUTE_PREFIX ? "prefix" : "exact", r->admin ? ", admin" : "",
                r->body ? ", body" : "");
    }
}

void routes_admin_text(char *out, size_t cap)
{
    unsigned n = 0, total = 0;
    for (unsigned i = 0; i < routes_count; i++)
        total += routes_table[i].admin != 0;
    size_t used = 0;
    out[0] = '\0';
    for (unsigned i = 0; i < routes_count && used < cap; i++) {
        const struct route *r = &routes_table[i];
        if (!r->admin)
            continue;
        char label[64];
        route_label(r, label, sizeof label);
        int w = snprintf(out + used, cap - used, "%s%s", n == 0 ? "" : n + 1 == total ? " and " : ", ",
                         label);
        if (w < 0 || (size_t)w >= cap - used)
            break;
        used += (size_t)w;
        n++;
    }
}
