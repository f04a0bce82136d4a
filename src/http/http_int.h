/*
 * What the http*.c files share and no one else sees: the server's state
 * (struct http), a connection's (struct request), and the functions one
 * of them gives the others.  http.c runs requests through their life,
 * http_check.c decides what can be decided before a body, http_sweep.c
 * closes slow connections and rate-limits warnings.
 */
#ifndef BLOOMGUARD_HTTP_INT_H
#define BLOOMGUARD_HTTP_INT_H

#include <microhttpd.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "monoclock.h"
#include "routes.h"

/* Per-connection warnings: at most WARN_BURST per WARN_WINDOW, then a count. */
#define WARN_BURST 10
#define WARN_WINDOW_S 10

/* How often the sweeper looks for connections past their header deadline. */
#define SWEEP_EVERY_MS 250

/* deadline value of a connection the sweeper has timed out. */
#define DEADLINE_HIT UINT64_MAX

/* Who may POST /ids and /reload. */
enum write_policy {
    WRITES_TOKEN,       /* those with the admin token */
    WRITES_LOOPBACK,    /* anyone: no token, but only local clients can connect */
    WRITES_REFUSED      /* nobody: no token and the port is reachable from elsewhere */
};

/*
 * Per-connection state, reused by every request on a keep-alive connection
 * (allocated when the connection opens, freed when it closes), so the
 * request path itself allocates nothing for it.
 */
struct request {
    uint64_t t0;            /* monotonic ns at the first call; 0 = not timed */
    const struct route *route;  /* NULL: none (404, or refused before routing) */
    size_t rest_off;        /* where the rest of the path starts, for prefix routes */
    struct reply early;     /* an answer decided before the body (status 0: none) */
    char *body;
    size_t len, cap;
    uint64_t seen;          /* body bytes received, kept or not */
    bool too_large;         /* a chunked body passed max_body_bytes */
    /* The connection, for the sweeper. */
    struct request *prev, *next;    /* in http.conns, under conns_lock */
    int fd;
    /*
     * Monotonic ns by which the next request's headers must be complete;
     * 0 while a request is being handled (or with no header_timeout);
     * DEADLINE_HIT once the sweeper closed the connection.
     */
    _Atomic uint64_t deadline;
    /*
     * A reply that comes later (api.h, api_later): the request is suspended
     * from later_begin until later_done, on another thread, hands over
     * later_reply and resumes it.
     */
    struct http *h;
    struct MHD_Connection *conn;
    struct api_later later;
    bool later_wait;                /* suspended, waiting (this connection's thread only) */
    atomic_bool later_ready;
    struct reply later_reply;
};

struct http {
    struct MHD_Daemon *d;
    struct app *a;
    int fd;
    unsigned port;
    bool quiesced;          /* MHD handed the listen socket back to us */
    enum write_policy writes;
    unsigned max_live;      /* max_connections, or less if the fd limit is lower */
    uint64_t header_ns, idle_ns;    /* header_timeout, connection_timeout */
    atomic_uint live;       /* open client connections */
    atomic_uint suspended;  /* requests waiting for a reply that comes later */
    atomic_ulong refused;   /* closed at accept since the last sweep */

    pthread_mutex_t conns_lock;
    struct request *conns;  /* every open connection with state */

    pthread_t sweeper;
    bool sweeper_running;
    pthread_mutex_t stop_lock;
    pthread_cond_t stop_cond;
    bool stopping;

    pthread_mutex_t warn_lock;
    uint64_t warn_window;   /* start of the current window, monotonic ns */
    unsigned warn_shown;
    unsigned long warn_suppressed;

    /* What the sweeper did since it last said so (its thread only). */
    unsigned long report_timed_out, report_refused;
    uint64_t report_last;

    char timeout_reply[320];    /* the raw 408 the sweeper sends (not over TLS) */
    size_t timeout_len;

    /* [server] tls_cert_file and tls_key_file's PEM, kept for MHD's life; NULL: plain http. */
    char *tls_cert, *tls_key;
};

/*
 * A warning about one connection or request: clients decide how many there
 * are, so at most WARN_BURST reach the log per window.  Thread-safe.
 */
void http_warn(struct http *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* libmicrohttpd's error log (MHD_OPTION_EXTERNAL_LOGGER), through http_warn. */
void http_mhd_log(void *cls, const char *fmt, va_list ap);

/* The sweeper thread (pthread_create's start routine): runs until h->stopping. */
void *http_sweeper_main(void *arg);

/*
 * Everything decided from the request line and headers, in order: framing,
 * method, path bytes, route (404, 405), write credential, announced body
 * size.  A refusal goes to rq->early.  Returns true when it must be queued
 * at once, before the body: MHD then reads none of it (and sends no
 * 100 Continue) and closes the connection.  Without a body the answer waits
 * for the final call, which keeps the connection alive.
 */
bool http_first_checks(struct http *h, const struct app *a, struct request *rq,
                       struct MHD_Connection *c, const char *url, const char *method);

/* The refusal of a request its route does not take: 404 (r NULL), or 405 with Allow. */
struct reply http_route_refusal(const struct route *r, unsigned allowed, const char *url,
                                const char *method);

/* Set h->writes from the admin token and the bound address (h->fd); warns when refused. */
void http_choose_write_policy(struct http *h);

#endif
