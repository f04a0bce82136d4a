/*
 * The daemon's shared state: what main builds and every handler may use.
 * Its own header so that the modules that only pass it along (http.c) or
 * read a part of it (status.c) need not see the handlers' declarations.
 */
#ifndef BLOOMGUARD_APP_H
#define BLOOMGUARD_APP_H

#include <time.h>

struct api_static;
struct config;
struct fleethub;
struct live;
struct log;
struct publish;
struct source;
struct table;
struct stats;

/*
 * Owned by main, shared by all threads; the pointers are set before
 * http_start and never change while requests are served.  Each pointee
 * states its own thread-safety.  http.c hands each request callback a copy
 * whose cfg and admin_token are the generation of live in force (see
 * live.h), so handlers read a->cfg.  In the shared struct, cfg is the
 * configuration at start: right for keys that need a restart, stale for
 * the others after a SIGHUP.
 */
struct app {
    const struct config *cfg;
    struct live *live;          /* the configuration in force (SIGHUP replaces it) */
    const struct log *lg;
    struct table **tables;      /* the guarded tables (table.h); [0] is the default */
    unsigned n_tables;
    struct stats *stats;        /* sized by routes_stats_new: one slot per route */
    struct source *source;
    time_t started;             /* wall clock at start, for uptime */
    struct api_static *prebuilt; /* constant responses, built by api_init */
    const char *admin_token;    /* what the admin routes need (http.c checks); NULL: none */
    /* [server] replication_token_file's: opens the replication routes only; NULL: none */
    const char *replication_token;
    struct fleethub *fleet;     /* the tables' replication rings and streams (fleethub.h) */
    struct publish **publishers; /* per table, its published file's writer; NULL (or [t]): none */
};

#endif
