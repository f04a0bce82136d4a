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
#include <sys/types.h>
#include <time.h>

#include "monoclock.h"
#include "routes.h"

/* Per-connection warnings: at most WARN_BURST per WARN_WINDOW, then a count. */
#define WARN_BURST 10
#define WARN_WINDOW_S 10

/* How often the sweeper looks for connections past their header deadline. */
#define SWEEP_EVERY_MS 250

/* How often the probe asks /healthz, and when it gives an unanswered one up. */
#define PROBE_EVERY_MS 250
#define PROBE_GIVE_UP_MS 5000

/* The listen backlog MHD is given: past it the kernel drops new connections. */
#define LISTEN_BACKLOG 1024

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
    bool probe;                     /* the daemon's own probe (http_probe.c): not a client's */
    /*
     * While http_fast.c serves the connection (MHD has not taken it): fast;
     * idle once it has answered (its deadline is then connection_timeout's,
     * and the sweeper closes it without a 408); an answer the socket did
     * not take at once.
     */
    bool fast;
    atomic_bool idle;
    char *unsent;
    size_t unsent_len, unsent_off;
    /*
     * Past its first request the fast path reads the connection's bytes for
     * good (owned); a head not complete in them waits in pend.
     */
    bool owned;
    char *pend;
    size_t pend_len;
    /*
     * A POST the fast path answers later (a durable insert): parked from
     * its read until its answer, the connection not read meanwhile (the
     * client waits for the answer); disarmed (out of the thread's epoll)
     * only if it wakes the thread meanwhile.  fast_later is the handler's
     * callback; its done, on the writer's thread, leaves the answer in
     * parked_* and pushes the request onto ft's ready list (ready_next).
     * All but those are ft's thread's alone.
     */
    struct fast_thread *ft;
    struct api_fast_later fast_later;
    bool parked, disarmed, parked_timed, parked_malloced;
    unsigned parked_slot, parked_status;
    uint64_t parked_t0;
    const char *parked_body;
    size_t parked_len;
    char parked_small[32];
    struct request *ready_next;
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
    /* The probe (http_probe.c). */
    pthread_t prober;
    bool prober_running;
    atomic_bool probe_stop;
    int family;                 /* of the listen socket: AF_INET, AF_INET6, AF_UNIX */
    /* The probe connection's local port (TCP), so the server side knows it; 0: none yet. */
    atomic_uint probe_port;
    /*
     * The probe has waited past HTTP_LATE_AFTER_MS (and none has been
     * answered in time since): answers queued now had waited as long.
     */
    atomic_bool late_now;
    bool late_said;             /* the probe thread's: the log says "late" once per spell */
    uint64_t late_since;        /* ... since when (monoclock_ns) */

    /* The fast path's threads (http_fast.c), which own the listen socket; NULL: MHD does. */
    struct http_fast *fast;
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

/* The probe thread (pthread_create's start routine): runs until h->probe_stop. */
void *http_probe_main(void *arg);

/* Whether the new connection c (its fd) is the probe's, from its peer. */
bool http_probe_is_peer(struct http *h, struct MHD_Connection *c, int fd);

/* Whether a TCP peer at sa is the probe's connection, by its port (none yet: false). */
bool http_probe_port_is(struct http *h, const struct sockaddr *sa);

/*
 * Everything decided from the request line and headers, in order: framing,
 * method, path bytes, route (404, 405), write credential, announced body
 * size.  A refusal goes to rq->early.  Returns true when it must be queued
 * at once, before the body: MHD then reads none of it (and sends no
 * 100 Continue) and closes the connection.  Without a body the answer waits
 * for the final call, which keeps the connection alive.
 */
/*
 * Whether a request whose Authorization header is auth (NULL: none) holds
 * right (a route's admin field): the one decision check_write refuses by
 * and the fast path takes the replication routes by.
 */
bool http_right_granted(const struct http *h, const struct app *a, unsigned right,
                        const char *auth);
bool http_first_checks(struct http *h, const struct app *a, struct request *rq,
                       struct MHD_Connection *c, const char *url, const char *method);

/* The refusal of a request its route does not take: 400 no_route (r NULL), or 405 with Allow. */
struct reply http_route_refusal(const struct route *r, unsigned allowed, const char *url,
                                const char *method);

/* Set h->writes from the admin token and the bound address (h->fd); warns when refused. */
void http_choose_write_policy(struct http *h);

/* The sweeper's list of connections, under conns_lock (http.c): in, and out again. */
void http_conns_add(struct http *h, struct request *rq);
void http_conns_remove(struct http *h, struct request *rq);

/*
 * [server] tls_cert_file and tls_key_file into h->tls_cert and h->tls_key
 * (both or neither; http_tls.c), false with err; http_free_tls wipes the
 * key and frees both.
 */
struct config;
bool http_load_tls(struct http *h, const struct config *cfg, char *err, size_t errlen);
void http_free_tls(struct http *h);

/*
 * The fast path (http_fast.c): threads that accept on h->fd, answer the
 * GETs of routes with a fast form and hand every other request's
 * connection to h->d (started with MHD_USE_NO_LISTEN_SOCKET).  Start:
 * false with err (the caller then stops it); quiesce: stop accepting;
 * stop: join the threads and close the connections MHD never took.
 */
bool http_fast_start(struct http *h, unsigned threads, char *err, size_t errlen);
void http_fast_quiesce(struct http *h);
void http_fast_stop(struct http *h);

/*
 * What the fast path reads and writes (http_wire.c).  http_wire_head: the
 * head at the start of b[0..n), "GET <target> HTTP/1.1" and header lines,
 * each ending in CRLF, then an empty line: WIRE_TAKE, with its length and
 * its target, when the fast path may answer it (no body, nothing after
 * which MHD would answer otherwise, only the bytes it reads alike);
 * WIRE_MORE when b holds no whole head yet (n < WIRE_HEAD_MAX); else
 * WIRE_PASS.  http_wire_init first, once (thread-safe).
 * http_wire_answer_head: the head of an answer of status with blen bytes
 * of JSON, as MHD writes it (the Date from d, made again once a second),
 * written to end just before the body, in at most room bytes: its start,
 * or NULL.  Thread-safe for distinct d.
 */
#define WIRE_HEAD_MAX 8192
enum wire_head { WIRE_TAKE, WIRE_PASS, WIRE_MORE };
struct wire_date {
    time_t at;              /* the second text holds */
    size_t len;
    char text[48];          /* "Date: ...\r\n" */
    /*
     * An answer's head up to its Content-Length value, as made for one
     * status in the second `at`: 200 in slot 0, any other in slot 1 (the
     * fast route answers 200 or 404).  Made again when either changes.
     */
    struct {
        unsigned status;    /* 0: none yet */
        time_t at;
        size_t len;
        char text[160];
    } head[2];
};
void http_wire_init(void);
enum wire_head http_wire_head(const char *b, size_t n, size_t *head_len, const char **target,
                              size_t *target_len);
/*
 * The same for "POST <target> HTTP/1.1" whose head holds exactly one
 * Content-Length (at most 9 digits: *body_len) and no other header
 * http_wire_head refuses; the body, after head_len, is the caller's to
 * find whole or not.
 */
enum wire_head http_wire_post(const char *b, size_t n, size_t *head_len, const char **target,
                              size_t *target_len, size_t *body_len);
char *http_wire_answer_head(struct wire_date *d, char *end, size_t room, unsigned status,
                            size_t blen);
/*
 * In a head http_wire_head took (b, head_len bytes): the value of the
 * first header named name (case-insensitive), trimmed, NUL-terminated
 * into out (cap bytes): true; false when there is none, or it does not fit.
 */
bool http_wire_header(const char *b, size_t head_len, const char *name, char *out, size_t cap);

/*
 * Send buf[*off, len) to the non-blocking socket fd, never raising SIGPIPE,
 * advancing *off, until all is out or the socket is full (*off < len on
 * return: wait for EPOLLOUT).  False: the connection failed.  The fast
 * path's answers and the relay both write through it.
 */
bool http_wire_send(int fd, const char *buf, size_t len, size_t *off);
/*
 * recv(2) and epoll_wait(2) as libc's, errno and all, but not cancellation
 * points (http_wire.c says why): for the fast path's threads, which are
 * never cancelled.
 */
ssize_t http_wire_recv(int fd, void *buf, size_t len, int flags);
struct epoll_event;
int http_wire_epoll_wait(int ep, struct epoll_event *evs, int max, int timeout_ms);

/*
 * The relay (http_relay.c), on a fast thread's epoll ep: start hands MHD
 * one end of a socketpair, writes the n bytes already read from the client
 * fd into it, and from then on moves bytes both ways; it takes fd (closed
 * on failure, false).  A relay's sockets carry tagged epoll pointers
 * (http_relay_tagged), to be given to http_relay_event.  The thread's
 * relays are on *list, which close_all ends.
 */
struct relay;
bool http_relay_start(struct http *h, int ep, struct relay **list, int fd, const char *bytes,
                      size_t n);
bool http_relay_tagged(const void *p);
void http_relay_event(int ep, struct relay **list, void *tagged, uint32_t events);
void http_relay_close_all(struct relay **list);

#endif
