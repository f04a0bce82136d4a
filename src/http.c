/*
 * libmicrohttpd plumbing, and the edge against hostile clients.  The first
 * call for a request checks all that can be checked before a body is read
 * (framing headers, method and path bytes, route, write credential,
 * announced body size) and refuses there, so MHD never reads a refused
 * body (nor sends 100 Continue for it) and closes the connection; bodies
 * are gathered up to max_body_bytes; the final call hands the request to
 * its route's handler (api.c's table) and queues the response.
 * Connections are counted at accept (over the limit they are closed at
 * once, instead of waiting in the kernel's backlog), a sweeper thread
 * closes those that do not deliver their request headers in time, and
 * per-connection warnings are rate-limited.
 */
#include "http.h"
#include "api.h"
#include "config.h"
#include "idcodec.h"
#include "listen.h"
#include "live.h"
#include "log.h"
#include "stats.h"
#include "token.h"

#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define NS_PER_SEC UINT64_C(1000000000)

/*
 * MHD's per-connection memory: the request line and headers are read into
 * it and parsed in place (a Cookie header twice: MHD splits a copy).  What
 * the shipped proxy configurations forward to /auth is bounded by the
 * proxy: nginx with its default large_client_header_buffers (4 x 8 KiB)
 * sends an X-Original-URI of at most 8 KiB and otherwise only headers it
 * sets itself; 32 KiB holds that with room to spare (a single 32000-byte
 * header still fits).  Not more: MHD zeroes the whole pool after every
 * keep-alive request, which costs 0.13 us at 16 KiB, 0.38 at 32 and 0.69 at
 * 64 (50 connections, this machine) against about 8 us of work per lookup,
 * and 32 KiB is the largest pool MHD takes from malloc rather than mmap.
 * Bigger requests get MHD's own 431/414 and a close.
 */
#define CONNECTION_MEMORY (32 * 1024)

/* Per-connection warnings: at most WARN_BURST per WARN_WINDOW, then a count. */
#define WARN_BURST 10
#define WARN_WINDOW_S 10

/*
 * A chunked body (its length unknown up front) may run this far past
 * max_body_bytes and still get its 413; longer, it is cut off.
 */
#define CHUNKED_GRACE (64 * 1024)

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

    char timeout_reply[320];    /* the raw 408 the sweeper sends */
    size_t timeout_len;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * NS_PER_SEC + (uint64_t)ts.tv_nsec;
}

/* For deadlines: a few ms of resolution are plenty, and it costs next to nothing. */
static uint64_t coarse_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * NS_PER_SEC + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------ warnings -- */

/* Close the window if it is over; a summary line says what was held back. */
static void warn_roll_locked(struct http *h, uint64_t now)
{
    if (now < h->warn_window || now - h->warn_window < WARN_WINDOW_S * NS_PER_SEC)
        return;
    if (h->warn_suppressed > 0)
        log_warn(h->a->lg, "http: %lu more warnings in the last %u s not logged (at most %u per %u s)",
                 h->warn_suppressed, WARN_WINDOW_S, WARN_BURST, WARN_WINDOW_S);
    h->warn_window = now;
    h->warn_shown = 0;
    h->warn_suppressed = 0;
}

/*
 * A warning about one connection or request: clients decide how many there
 * are, so at most WARN_BURST reach the log per window.
 */
static void http_warn(struct http *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void http_warn(struct http *h, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t n = strlen(msg);
    while (n > 0 && msg[n - 1] == '\n')
        msg[--n] = '\0';
    pthread_mutex_lock(&h->warn_lock);
    warn_roll_locked(h, coarse_ns());
    if (h->warn_shown < WARN_BURST) {
        h->warn_shown++;
        log_warn(h->a->lg, "http: %s", msg);
    } else {
        h->warn_suppressed++;
    }
    pthread_mutex_unlock(&h->warn_lock);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    struct http *h = cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    http_warn(h, "%s", msg);
}

/* ------------------------------------------------------------- routing -- */

/*
 * How many bytes of s an error message quotes: at most max, and never half
 * of a UTF-8 character (the message says "..." after a cut).
 */
static int quote_len(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n <= max)
        return (int)n;
    n = max;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
        n--;
    return (int)n;
}

#define QUOTE_URL 96        /* bytes of a path an error message quotes */

/* The refusal of a request its route does not take: 404, or 405 with Allow. */
static struct reply route_refusal(const struct route *r, unsigned allowed, const char *url,
                                  const char *method)
{
    if (r == NULL) {
        int q = quote_len(url, QUOTE_URL);
        return api_error(MHD_HTTP_NOT_FOUND, "no_route", "no such endpoint: %.32s %.*s%s", method,
                         q, url, url[q] ? "..." : "");
    }
    char allow[32];
    api_allow_header(allowed, allow, sizeof allow);
    struct reply rep = api_error(MHD_HTTP_METHOD_NOT_ALLOWED, "method_not_allowed",
                                 "%.32s is not allowed here; use %s", method, allow);
    if (rep.resp != NULL)
        MHD_add_response_header(rep.resp, MHD_HTTP_HEADER_ALLOW, allow);
    return rep;
}

/* ----------------------------------------------------- request checks -- */

/* What the headers say about the body's framing. */
struct framing {
    unsigned content_length;    /* Content-Length headers */
    unsigned transfer_encoding; /* Transfer-Encoding headers */
    bool chunked;               /* the (one) Transfer-Encoding is "chunked" */
    bool bad_name;              /* a header name holds a space or tab */
    const char *length;         /* the (first) Content-Length value */
};

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value)
{
    struct framing *f = cls;
    char k0 = (char)(key[0] | 0x20);    /* on every request: skip most names at once */
    (void)kind;
    if (k0 == 'c' && strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
        if (f->content_length++ == 0)
            f->length = value;
    } else if (k0 == 't' && strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
        f->transfer_encoding++;
        f->chunked = value != NULL && strcasecmp(value, "chunked") == 0;
    } else if (key[strcspn(key, " \t")] != '\0') {
        f->bad_name = true;
    }
    return MHD_YES;
}

/* True when s is all ASCII: the common path, and surely UTF-8. */
static bool is_ascii(const char *s)
{
    unsigned char any = 0;
    for (; *s != '\0'; s++)
        any |= (unsigned char)*s;
    return any < 0x80;
}

/* An HTTP token (RFC 9110 5.6.2): what a method must be. */
static bool is_token(const char *s)
{
    static const char extra[] = "!#$%&'*+-.^_`|~";
    if (*s == '\0')
        return false;
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
              || strchr(extra, c) != NULL))
            return false;
    }
    return true;
}

/*
 * An admin route (POST /ids, POST /reload, GET /snapshot): does the request
 * carry the admin right?  Whatever the method: a snapshot is a read, but of
 * the whole filter.
 */
static struct reply check_write(struct http *h, const struct app *a, struct MHD_Connection *c)
{
    switch (h->writes) {
    case WRITES_LOOPBACK:
        break;
    case WRITES_REFUSED:
        return api_error(MHD_HTTP_FORBIDDEN, "admin_token_required",
                         "admin requests are refused: the daemon listens beyond loopback and no "
                         "admin token is set ([server] admin_token_file)");
    case WRITES_TOKEN: {
        const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                       MHD_HTTP_HEADER_AUTHORIZATION);
        if (token_check_bearer(a->admin_token, auth))
            break;
        struct reply r = api_error(MHD_HTTP_UNAUTHORIZED, "unauthorized", "%s",
                                   auth == NULL ? "this endpoint needs Authorization: Bearer <admin token>"
                                                : "the Authorization header does not hold the admin token");
        if (r.resp != NULL)
            MHD_add_response_header(r.resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                                    "Bearer realm=\"bloomguard\"");
        return r;
    }
    }
    return (struct reply){ 0, NULL, false };
}

/*
 * Everything decided from the request line and headers, in order: framing,
 * method, path bytes, route (404, 405), write credential, announced body
 * size.  A refusal goes to rq->early.  Returns true when it must be queued
 * at once, before the body: MHD then reads none of it (and sends no
 * 100 Continue) and closes the connection.  Without a body the answer waits
 * for the final call, which keeps the connection alive.
 */
static bool first_checks(struct http *h, const struct app *a, struct request *rq,
                         struct MHD_Connection *c, const char *url, const char *method)
{
    const struct config *cfg = a->cfg;
    struct framing f = { 0, 0, false, false, NULL };
    MHD_get_connection_values(c, MHD_HEADER_KIND, count_framing, &f);
    rq->route = NULL;
    /* Two readers that pick different lengths are how requests get smuggled. */
    const char *framing = NULL;
    if (f.content_length > 1)
        framing = "more than one Content-Length header";
    else if (f.content_length > 0 && f.transfer_encoding > 0)
        framing = "both Content-Length and Transfer-Encoding";
    else if (f.transfer_encoding > 1 || (f.transfer_encoding == 1 && !f.chunked))
        framing = "the only Transfer-Encoding accepted is one \"chunked\"";
    else if (f.bad_name)
        framing = "a header name holds whitespace";
    if (framing != NULL) {
        rq->early = api_error(MHD_HTTP_BAD_REQUEST, "bad_framing", "%s", framing);
        if (rq->early.resp != NULL)
            MHD_add_response_header(rq->early.resp, MHD_HTTP_HEADER_CONNECTION, "close");
        return true;
    }
    uint64_t announced = f.length != NULL ? strtoull(f.length, NULL, 10) : 0;  /* MHD checked the digits */
    bool body = announced > 0 || f.chunked;

    size_t rest_off;
    unsigned allowed;
    const struct route *r = api_route_find(url, api_method_bit(method), &rest_off, &allowed);
    if (!is_token(method))
        rq->early = api_error(MHD_HTTP_BAD_REQUEST, "bad_method",
                              "the request method is not an HTTP token (RFC 9110)");
    /* Raw-path routes (/auth) are exempt: there the path may be the original URI. */
    else if ((r == NULL || !r->raw_path) && !is_ascii(url) && !id_utf8_valid(url, strlen(url)))
        rq->early = api_error(MHD_HTTP_BAD_REQUEST, "bad_utf8", "the request path is not valid UTF-8");
    if (rq->early.status != 0)
        return body;

    rq->route = r;
    rq->rest_off = rest_off;
    if (r == NULL || !(r->methods & api_method_bit(method)))
        rq->early = route_refusal(r, allowed, url, method);
    else if (r->admin)
        rq->early = check_write(h, a, c);
    if (rq->early.status == 0 && announced > cfg->max_body_bytes)
        rq->early = api_error(MHD_HTTP_CONTENT_TOO_LARGE, "body_too_large",
                              "request body is larger than max_body_bytes (%llu)",
                              (unsigned long long)cfg->max_body_bytes);
    return rq->early.status != 0 && body;
}

/* ------------------------------------------------------------ handlers -- */

static enum body_type body_type_of(struct MHD_Connection *c)
{
    const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (ct == NULL || *ct == '\0')
        return BODY_JSON;               /* bare `curl -d`-less clients: assume JSON */
    size_t n = strcspn(ct, "; \t");
    if (n == 16 && strncasecmp(ct, "application/json", 16) == 0)
        return BODY_JSON;
    if (n == 10 && strncasecmp(ct, "text/plain", 10) == 0)
        return BODY_TEXT;
    return BODY_OTHER;
}

/* The final call: the request as its handler sees it, body checked first. */
static struct reply dispatch(struct app *a, struct request *rq, struct MHD_Connection *c,
                             const char *url, const char *method)
{
    const struct route *r = rq->route;
    if (r == NULL)                      /* refused by first_checks: not reached */
        return route_refusal(NULL, 0, url, method);
    rq->conn = c;
    struct api_request v = {
        .method = method, .path = url, .rest = url + rq->rest_off,
        .rest_len = strlen(url + rq->rest_off), .body_type = BODY_NONE, .conn = c,
        .later = &rq->later,
    };
    if (r->body) {
        if (rq->too_large)
            return api_error(MHD_HTTP_CONTENT_TOO_LARGE, "body_too_large",
                             "request body is larger than max_body_bytes (%llu)",
                             (unsigned long long)a->cfg->max_body_bytes);
        v.body_type = body_type_of(c);
        if (v.body_type == BODY_OTHER)
            return api_error(MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type",
                             "Content-Type must be application/json or text/plain");
        if (rq->len == 0)
            return api_error(MHD_HTTP_BAD_REQUEST, "empty_body", "the request body is empty");
        v.body = rq->body;
        v.body_len = rq->len;
    }
    return r->handler(a, &v);
}

static bool append_body(struct request *rq, const char *data, size_t n)
{
    if (rq->len + n > rq->cap) {
        size_t nc = rq->cap ? rq->cap : 4096;
        while (nc < rq->len + n)
            nc *= 2;
        char *nb = realloc(rq->body, nc);
        if (nb == NULL)
            return false;
        rq->body = nb;
        rq->cap = nc;
    }
    memcpy(rq->body + rq->len, data, n);
    rq->len += n;
    return true;
}

static enum MHD_Result queue(struct http *h, struct request *rq, struct MHD_Connection *c,
                             struct reply r)
{
    if (r.resp == NULL) {
        static const char oom[] = "{\"error\":\"internal\",\"message\":\"out of memory\"}";
        r.status = MHD_HTTP_INTERNAL_SERVER_ERROR;
        r.resp = MHD_create_response_from_buffer(sizeof oom - 1, (void *)oom, MHD_RESPMEM_PERSISTENT);
        r.shared = false;
        if (r.resp == NULL)
            return MHD_NO;
    }
    enum MHD_Result ret = MHD_queue_response(c, r.status, r.resp);
    if (!r.shared)
        MHD_destroy_response(r.resp);
    uint64_t dt = rq->t0 ? now_ns() - rq->t0 : 0;
    if (h->a->cfg->metrics_enabled)
        stats_request(h->a->stats, rq->route != NULL ? (unsigned)(rq->route - api_routes)
                                                     : api_route_count,
                      r.status, dt ? dt : 1);
    return ret;
}

/* api_later: suspend the request (from its handler). */
static void later_begin(void *ctx)
{
    struct request *rq = ctx;
    rq->later_wait = true;
    atomic_store(&rq->later_ready, false);
    atomic_fetch_add(&rq->h->suspended, 1);
    MHD_suspend_connection(rq->conn);
}

/* api_later: the reply, from any thread; MHD then calls the handler again to queue it. */
static void later_done(void *ctx, struct reply r)
{
    struct request *rq = ctx;
    rq->later_reply = r;
    atomic_store(&rq->later_ready, true);
    MHD_resume_connection(rq->conn);
}

static enum MHD_Result handle_request(struct http *h, struct app *a, struct MHD_Connection *c,
                                      const char *url, const char *method,
                                      const char *upload_data, size_t *upload_data_size,
                                      void **req_cls)
{
    struct request *rq = *req_cls;

    if (rq == NULL) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        rq = ci ? ci->socket_context : NULL;
        if (rq == NULL)
            return MHD_NO;
        /* Headers are complete: stop the clock, unless it already ran out. */
        if (atomic_exchange(&rq->deadline, 0) == DEADLINE_HIT)
            return MHD_NO;
        rq->len = 0;
        rq->seen = 0;
        rq->too_large = false;
        rq->early.status = 0;
        rq->t0 = 0;
        if (a->cfg->metrics_enabled)
            rq->t0 = now_ns();
        *req_cls = rq;
        if (first_checks(h, a, rq, c, url, method)) {
            struct reply r = rq->early;
            rq->early.status = 0;
            return queue(h, rq, c, r);      /* MHD reads no body after this and closes */
        }
        return MHD_YES;
    }
    if (*upload_data_size != 0) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        rq->seen += n;
        if (rq->seen > a->cfg->max_body_bytes) {
            /*
             * Only a chunked body gets here (an announced length over the
             * limit was refused up front).  MHD 0.9.75 cannot answer in the
             * middle of a body: a small overshoot is read to the end and
             * answered 413; past that, reading stops and the connection is
             * closed without an answer.
             */
            if (rq->seen - a->cfg->max_body_bytes > CHUNKED_GRACE) {
                http_warn(h, "closed a connection: its chunked body went %u bytes past "
                          "max_body_bytes (%llu)", CHUNKED_GRACE,
                          (unsigned long long)a->cfg->max_body_bytes);
                return MHD_NO;
            }
            rq->too_large = true;
            return MHD_YES;
        }
        if (rq->early.status == 0 && rq->route != NULL && rq->route->body
            && !append_body(rq, upload_data, n))
            return MHD_NO;
        return MHD_YES;
    }
    if (rq->later_wait) {
        if (!atomic_load(&rq->later_ready))
            return MHD_YES;             /* not ours to answer yet */
        rq->later_wait = false;
        atomic_fetch_sub(&h->suspended, 1);
        return queue(h, rq, c, rq->later_reply);
    }
    if (rq->early.status != 0) {
        struct reply r = rq->early;
        rq->early.status = 0;
        return queue(h, rq, c, r);
    }
    struct reply r = dispatch(a, rq, c, url, method);
    if (r.status == API_LATER)
        return MHD_YES;                 /* suspended: the reply comes through later_done */
    return queue(h, rq, c, r);
}

/*
 * Each callback reads one configuration generation from start to end, even
 * if a SIGHUP publishes another meanwhile: the handlers get a copy of the
 * shared app whose cfg and admin_token are that generation's.
 */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **req_cls)
{
    struct http *h = cls;
    struct live_view v = live_enter(h->a->live);
    struct app a = *h->a;
    (void)version;

    a.cfg = v.cfg;
    a.admin_token = v.admin_token;
    enum MHD_Result r = handle_request(h, &a, c, url, method, upload_data, upload_data_size,
                                       req_cls);
    live_exit(v);
    return r;
}

/* The headers of the next request on a kept-alive connection are due by then. */
static uint64_t next_deadline(const struct http *h, uint64_t now)
{
    if (h->header_ns == 0 || h->idle_ns == 0)
        return 0;
    return now + h->idle_ns + h->header_ns;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct http *h = cls;
    struct request *rq = *req_cls;
    (void)c;
    if (rq == NULL)
        return;
    if (rq->early.status != 0 && rq->early.resp != NULL && !rq->early.shared)
        MHD_destroy_response(rq->early.resp);   /* never queued */
    rq->early.status = 0;
    rq->len = 0;
    if (rq->cap > 65536) {
        free(rq->body);                 /* do not keep a huge body buffer around */
        rq->body = NULL;
        rq->cap = 0;
    }
    if (toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
        atomic_store(&rq->deadline, next_deadline(h, coarse_ns()));
    *req_cls = NULL;
}

/* --------------------------------------------------------- connections -- */

/* Over the limit: closed at once, not left in the backlog until some close. */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
    struct http *h = cls;
    (void)addr;
    (void)addrlen;
    if (atomic_load_explicit(&h->live, memory_order_relaxed) < h->max_live)
        return MHD_YES;
    atomic_fetch_add_explicit(&h->refused, 1, memory_order_relaxed);
    return MHD_NO;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    struct http *h = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        struct request *rq = calloc(1, sizeof(struct request));
        *socket_context = rq;           /* NULL: requests get MHD_NO */
        if (rq == NULL)
            return;
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        rq->fd = ci != NULL ? ci->connect_fd : -1;
        rq->h = h;
        rq->later = (struct api_later){ later_begin, later_done, rq };
        atomic_init(&rq->later_ready, false);
        atomic_init(&rq->deadline, h->header_ns && rq->fd >= 0 ? coarse_ns() + h->header_ns : 0);
        pthread_mutex_lock(&h->conns_lock);
        rq->next = h->conns;
        if (h->conns != NULL)
            h->conns->prev = rq;
        h->conns = rq;
        pthread_mutex_unlock(&h->conns_lock);
        atomic_fetch_add(&h->live, 1);
    } else if (*socket_context != NULL) {
        struct request *rq = *socket_context;
        /* MHD closes the socket after this returns: the sweeper never sees a stale fd. */
        pthread_mutex_lock(&h->conns_lock);
        if (rq->prev != NULL)
            rq->prev->next = rq->next;
        else
            h->conns = rq->next;
        if (rq->next != NULL)
            rq->next->prev = rq->prev;
        pthread_mutex_unlock(&h->conns_lock);
        atomic_fetch_sub(&h->live, 1);
        free(rq->body);
        free(rq);
        *socket_context = NULL;
    }
}

/* Keep the raw path: ids are decoded strictly by idcodec, not by MHD. */
static size_t no_unescape(void *cls, struct MHD_Connection *c, char *s)
{
    (void)cls;
    (void)c;
    return strlen(s);
}

/*
 * Close the connections whose request headers are overdue.  MHD's own
 * timeout only measures silence, so a client sending a byte now and then
 * would hold its connection forever.  shutdown() (not close: the socket
 * stays MHD's) makes MHD see the end of the stream and clean up; the
 * deadline is claimed first so that MHD, if the headers complete at that
 * moment, drops the request instead of answering over our 408.
 */
static void sweep(struct http *h)
{
    uint64_t now = coarse_ns();
    unsigned timed_out = 0, batch;
    /*
     * In batches, letting go of the lock in between: opening and closing
     * connections need it, and a well-behaved client must not wait while
     * thousands of slow ones are shut down.
     */
    do {
        batch = 0;
        pthread_mutex_lock(&h->conns_lock);
        for (struct request *rq = h->conns; rq != NULL && batch < 64; rq = rq->next) {
            uint64_t d = atomic_load_explicit(&rq->deadline, memory_order_relaxed);
            if (d == 0 || d == DEADLINE_HIT || d > now)
                continue;
            if (!atomic_compare_exchange_strong(&rq->deadline, &d, DEADLINE_HIT))
                continue;
            ssize_t w = send(rq->fd, h->timeout_reply, h->timeout_len, MSG_DONTWAIT | MSG_NOSIGNAL);
            (void)w;
            shutdown(rq->fd, SHUT_RDWR);
            batch++;
        }
        pthread_mutex_unlock(&h->conns_lock);
        timed_out += batch;
    } while (batch == 64);
    h->report_timed_out += timed_out;
    h->report_refused += atomic_exchange(&h->refused, 0);
    /* One line per window at most, whatever the clients do; the first one at once. */
    if ((h->report_timed_out > 0 || h->report_refused > 0)
        && (h->report_last == 0 || now - h->report_last >= WARN_WINDOW_S * NS_PER_SEC)) {
        if (h->report_timed_out > 0)
            log_warn(h->a->lg, "http: closed %lu connection%s that sent no complete request "
                     "headers within header_timeout (%u s)", h->report_timed_out,
                     h->report_timed_out == 1 ? "" : "s", h->a->cfg->header_timeout);
        if (h->report_refused > 0)
            log_warn(h->a->lg, "http: closed %lu new connection%s at once: max_connections (%u) "
                     "were open", h->report_refused, h->report_refused == 1 ? "" : "s", h->max_live);
        h->report_timed_out = h->report_refused = 0;
        h->report_last = now;
    }
    pthread_mutex_lock(&h->warn_lock);
    warn_roll_locked(h, coarse_ns());
    pthread_mutex_unlock(&h->warn_lock);
}

static void *sweeper_main(void *arg)
{
    struct http *h = arg;
    pthread_mutex_lock(&h->stop_lock);
    while (!h->stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += SWEEP_EVERY_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&h->stop_cond, &h->stop_lock, &ts);
        if (h->stopping)
            break;
        pthread_mutex_unlock(&h->stop_lock);
        sweep(h);
        pthread_mutex_lock(&h->stop_lock);
    }
    pthread_mutex_unlock(&h->stop_lock);
    return NULL;
}

/* ---------------------------------------------------------------- start -- */

/* Is the bound address one only this machine can reach? */
static bool bound_to_loopback(int fd)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
        return false;
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)&ss;
        return (ntohl(s4->sin_addr.s_addr) >> 24) == 127;
    }
    if (ss.ss_family == AF_INET6) {
        const struct in6_addr *a6 = &((const struct sockaddr_in6 *)&ss)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(a6) || (IN6_IS_ADDR_V4MAPPED(a6) && a6->s6_addr[12] == 127);
    }
    return false;
}

static void choose_write_policy(struct http *h)
{
    const struct config *cfg = h->a->cfg;
    if (h->a->admin_token != NULL) {
        h->writes = WRITES_TOKEN;
    } else if (bound_to_loopback(h->fd)) {
        h->writes = WRITES_LOOPBACK;
    } else {
        h->writes = WRITES_REFUSED;
        log_warn(h->a->lg, "no admin token and %s is not a loopback address: POST /ids, "
                 "POST /reload and GET /snapshot are refused (403 admin_token_required) so that "
                 "no one who can reach the port can write or copy a filter; set [server] "
                 "admin_token_file to allow them",
                 cfg->listen_host);
    }
}

/*
 * Every connection is a descriptor.  Raise the soft limit towards the hard
 * one if max_connections needs it; if it still does not fit, serve fewer
 * connections rather than let accept() fail (MHD would then stop accepting
 * altogether until a connection closes).
 */
static unsigned fit_fd_limit(const struct log *lg, unsigned want, unsigned spare)
{
    /* The listen socket, epoll and signalling fds, PostgreSQL, stdio... */
    rlim_t reserve = 64 + (rlim_t)spare;
    rlim_t need = (rlim_t)want + reserve;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return want;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
        struct rlimit up = rl;
        up.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need ? need : rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &up) == 0)
            rl = up;
    }
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need)
        return want;
    unsigned fit = rl.rlim_cur > reserve + 1 ? (unsigned)(rl.rlim_cur - reserve) : 1;
    log_warn(lg, "max_connections is %u but the open file limit is %llu: serving at most %u "
             "connections (raise LimitNOFILE or ulimit -n)", want,
             (unsigned long long)rl.rlim_cur, fit);
    return fit;
}

struct http *http_start(struct app *a, char *err, size_t errlen)
{
    const struct config *cfg = a->cfg;
    struct http *h = calloc(1, sizeof(*h));
    if (h == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    h->a = a;
    pthread_mutex_init(&h->conns_lock, NULL);
    pthread_mutex_init(&h->warn_lock, NULL);
    pthread_mutex_init(&h->stop_lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&h->stop_cond, &ca);
    pthread_condattr_destroy(&ca);
    atomic_init(&h->live, 0);
    atomic_init(&h->refused, 0);
    atomic_init(&h->suspended, 0);
    h->warn_window = coarse_ns();
    h->header_ns = (uint64_t)cfg->header_timeout * NS_PER_SEC;
    h->idle_ns = (uint64_t)cfg->connection_timeout * NS_PER_SEC;
    static const char timeout_body[] =
        "{\"error\":\"request_timeout\",\"message\":\"the request headers did not arrive in time "
        "(header_timeout)\"}";
    h->timeout_len = (size_t)snprintf(h->timeout_reply, sizeof h->timeout_reply,
                                      "HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\n"
                                      "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                                      sizeof timeout_body - 1, timeout_body);

    int family = AF_INET;
    h->fd = listen_open(cfg->listen_host, cfg->listen_port, &family, &h->port, err, errlen);
    if (h->fd < 0)
        goto fail;
    choose_write_policy(h);
    unsigned threads = cfg->threads;
    if (threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (unsigned)n : 1;
    }
    /*
     * MHD splits its connection limit evenly between its threads and stops
     * accepting (connections then wait in the backlog) once every thread is
     * at its share.  Our own count refuses at max_connections; MHD's limit
     * sits above it by more than the uneven split, so MHD never gets there.
     */
    unsigned spare = 2 * threads + 8;
    h->max_live = fit_fd_limit(a->lg, cfg->max_connections, spare);
    /* Suspend/resume: POSTs wait for the disk without holding a thread (api_later). */
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ITC | MHD_USE_ERROR_LOG
                     | MHD_ALLOW_SUSPEND_RESUME;
    if (family == AF_INET6)
        flags |= MHD_USE_IPv6;
    /* One thread: no pool (MHD warns that a pool of 1 is ignored). */
    struct MHD_OptionItem pool[] = {
        { threads > 1 ? MHD_OPTION_THREAD_POOL_SIZE : MHD_OPTION_END, threads, NULL },
        { MHD_OPTION_END, 0, NULL }
    };
    h->d = MHD_start_daemon(flags, 0, on_accept, h, on_request, h,
                            MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h,   /* must come first */
                            MHD_OPTION_LISTEN_SOCKET, h->fd,
                            MHD_OPTION_ARRAY, pool,
                            MHD_OPTION_CONNECTION_LIMIT, h->max_live + spare,
                            MHD_OPTION_CONNECTION_TIMEOUT, cfg->connection_timeout,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
                            MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONNECTION_MEMORY,
                            MHD_OPTION_UNESCAPE_CALLBACK, no_unescape, h,
                            MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024,
                            MHD_OPTION_END);
    if (h->d == NULL) {
        snprintf(err, errlen, "cannot start the HTTP server on %s:%u", cfg->listen_host, h->port);
        close(h->fd);
        goto fail;
    }
    if (pthread_create(&h->sweeper, NULL, sweeper_main, h) != 0) {
        snprintf(err, errlen, "cannot start the connection sweeper thread");
        MHD_stop_daemon(h->d);
        goto fail;
    }
    h->sweeper_running = true;
    return h;

fail:
    pthread_cond_destroy(&h->stop_cond);
    pthread_mutex_destroy(&h->stop_lock);
    pthread_mutex_destroy(&h->warn_lock);
    pthread_mutex_destroy(&h->conns_lock);
    free(h);
    return NULL;
}

unsigned http_port(const struct http *h)
{
    return h->port;
}

void http_quiesce(struct http *h)
{
    if (h != NULL && h->d != NULL && !h->quiesced)
        h->quiesced = MHD_quiesce_daemon(h->d) != MHD_INVALID_SOCKET;
}

void http_stop(struct http *h)
{
    if (h == NULL)
        return;
    if (h->sweeper_running) {
        pthread_mutex_lock(&h->stop_lock);
        h->stopping = true;
        pthread_cond_signal(&h->stop_cond);
        pthread_mutex_unlock(&h->stop_lock);
        pthread_join(h->sweeper, NULL);
    }
    /*
     * MHD must not stop with a request suspended: the replies still coming
     * (a POST waiting for the disk) come within one fdatasync, or the log's
     * failure; wait for them, a few seconds at most.
     */
    for (int i = 0; i < 500 && atomic_load(&h->suspended) > 0; i++)
        usleep(10000);
    MHD_stop_daemon(h->d);
    if (h->quiesced)
        close(h->fd);               /* otherwise MHD closed it */
    pthread_cond_destroy(&h->stop_cond);
    pthread_mutex_destroy(&h->stop_lock);
    pthread_mutex_destroy(&h->warn_lock);
    pthread_mutex_destroy(&h->conns_lock);
    free(h);
}
