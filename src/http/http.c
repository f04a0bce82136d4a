/*
 * The HTTP server: libmicrohttpd started and stopped, and each request
 * through its life: counted at accept (over the limit closed at once,
 * instead of waiting in the kernel's backlog), checked before its body
 * (http_check.c), its body gathered up to max_body_bytes, handed to its
 * route's handler (routes.c's table), suspended while a reply comes later,
 * and its response queued and counted.  Slow connections are
 * http_sweep.c's.
 */
#include "http.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "http_int.h"
#include "listen.h"
#include "live.h"
#include "log.h"
#include "monoclock.h"
#include "stats.h"

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

/*
 * A chunked body (its length unknown up front) may run this far past
 * max_body_bytes and still get its 413; longer, it is cut off.
 */
#define CHUNKED_GRACE (64 * 1024)

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
        return http_route_refusal(NULL, 0, url, method);
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
    if (rq->probe)
        return ret;                     /* the daemon's own: no client's request */
    uint64_t dt = rq->t0 ? (uint64_t)monoclock_ns() - rq->t0 : 0;
    unsigned slot = rq->route != NULL ? (unsigned)(rq->route - routes_table) : routes_count;
    if (h->a->cfg->metrics_enabled) {
        stats_request(h->a->stats, slot, r.status, dt ? dt : 1);
        /* Queued ahead of a probe that has waited past the proxies' timeout: as late. */
        if (atomic_load_explicit(&h->late_now, memory_order_relaxed))
            stats_late(h->a->stats, slot);
    }
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
            rq->t0 = (uint64_t)monoclock_ns();
        *req_cls = rq;
        if (http_first_checks(h, a, rq, c, url, method)) {
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
        atomic_store(&rq->deadline, next_deadline(h, (uint64_t)monoclock_coarse_ns()));
    *req_cls = NULL;
}

/* Into the sweeper's list of connections (MHD's and the fast path's alike). */
void http_conns_add(struct http *h, struct request *rq)
{
    pthread_mutex_lock(&h->conns_lock);
    rq->next = h->conns;
    if (h->conns != NULL)
        h->conns->prev = rq;
    h->conns = rq;
    pthread_mutex_unlock(&h->conns_lock);
}

/* Out of it again. */
void http_conns_remove(struct http *h, struct request *rq)
{
    pthread_mutex_lock(&h->conns_lock);
    if (rq->prev != NULL)
        rq->prev->next = rq->next;
    else
        h->conns = rq->next;
    if (rq->next != NULL)
        rq->next->prev = rq->prev;
    pthread_mutex_unlock(&h->conns_lock);
}

/* --------------------------------------------------------- connections -- */

/* Over the limit: closed at once, not left in the backlog until some close. */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
    struct http *h = cls;
    (void)addrlen;
    if (atomic_load_explicit(&h->live, memory_order_relaxed) < h->max_live)
        return MHD_YES;
    /* The probe is no client: it must see how late the server answers, not be shed. */
    unsigned port = atomic_load_explicit(&h->probe_port, memory_order_relaxed);
    if (port != 0 && addr != NULL
        && ((addr->sa_family == AF_INET
             && ntohs(((const struct sockaddr_in *)(const void *)addr)->sin_port) == port)
            || (addr->sa_family == AF_INET6
                && ntohs(((const struct sockaddr_in6 *)(const void *)addr)->sin6_port) == port)))
        return MHD_YES;
    atomic_fetch_add_explicit(&h->refused, 1, memory_order_relaxed);
    stats_add(h->a->stats, ST_CONN_REFUSED, 1);
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
        rq->probe = http_probe_is_peer(h, c, rq->fd);
        rq->later = (struct api_later){ later_begin, later_done, rq };
        atomic_init(&rq->later_ready, false);
        atomic_init(&rq->idle, false);
        atomic_init(&rq->deadline,
                    h->header_ns && rq->fd >= 0 ? (uint64_t)monoclock_coarse_ns() + h->header_ns
                                                : 0);
        http_conns_add(h, rq);
        if (!rq->probe)
            atomic_fetch_add(&h->live, 1);
    } else if (*socket_context != NULL) {
        struct request *rq = *socket_context;
        /* MHD closes the socket after this returns: the sweeper never sees a stale fd. */
        http_conns_remove(h, rq);
        if (!rq->probe)
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
    monoclock_cond_init(&h->stop_cond);
    atomic_init(&h->live, 0);
    atomic_init(&h->refused, 0);
    atomic_init(&h->suspended, 0);
    h->warn_window = (uint64_t)monoclock_coarse_ns();
    h->header_ns = (uint64_t)cfg->header_timeout * (uint64_t)NS_PER_S;
    h->idle_ns = (uint64_t)cfg->connection_timeout * (uint64_t)NS_PER_S;
    static const char timeout_body[] =
        "{\"error\":\"request_timeout\",\"message\":\"the request headers did not arrive in time "
        "(header_timeout)\"}";
    h->timeout_len = (size_t)snprintf(h->timeout_reply, sizeof h->timeout_reply,
                                      "HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\n"
                                      "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                                      sizeof timeout_body - 1, timeout_body);

    if (!http_load_tls(h, cfg, err, errlen))
        goto fail;
    int family = AF_INET;
    h->fd = listen_open(cfg->listen_host, cfg->listen_port, cfg->listen_mode, cfg->listen_group,
                        &family, &h->port, err, errlen);
    if (h->fd < 0)
        goto fail;
    h->family = family;
    http_choose_write_policy(h);
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
    if (h->tls_cert != NULL)
        flags |= MHD_USE_TLS;
    /* The fast path takes the listen socket and hands MHD what it does not answer (not TLS). */
    bool fast = cfg->fast_path && h->tls_cert == NULL;
    if (fast)
        flags |= MHD_USE_NO_LISTEN_SOCKET;
    /* One thread: no pool (MHD warns that a pool of 1 is ignored). */
    struct MHD_OptionItem pool[] = {
        { threads > 1 ? MHD_OPTION_THREAD_POOL_SIZE : MHD_OPTION_END, threads, NULL },
        { MHD_OPTION_END, 0, NULL }
    };
    /* An array each: an array ends at its first MHD_OPTION_END. */
    struct MHD_OptionItem lsock[] = {
        { fast ? MHD_OPTION_END : MHD_OPTION_LISTEN_SOCKET, h->fd, NULL },
        { MHD_OPTION_END, 0, NULL }
    };
    struct MHD_OptionItem tls[] = {
        { h->tls_cert != NULL ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, h->tls_cert },
        { MHD_OPTION_HTTPS_MEM_KEY, 0, h->tls_key },
        /* GnuTLS's defaults, less what is older than TLS 1.2. */
        { MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)"NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2" },
        { MHD_OPTION_END, 0, NULL }
    };
    h->d = MHD_start_daemon(flags, 0, on_accept, h, on_request, h,
                            MHD_OPTION_EXTERNAL_LOGGER, http_mhd_log, h,   /* must come first */
                            MHD_OPTION_ARRAY, pool,
                            MHD_OPTION_ARRAY, lsock,
                            MHD_OPTION_ARRAY, tls,
                            MHD_OPTION_CONNECTION_LIMIT, h->max_live + spare,
                            MHD_OPTION_CONNECTION_TIMEOUT, cfg->connection_timeout,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
                            MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONNECTION_MEMORY,
                            MHD_OPTION_UNESCAPE_CALLBACK, no_unescape, h,
                            MHD_OPTION_LISTEN_BACKLOG_SIZE, LISTEN_BACKLOG,
                            MHD_OPTION_END);
    if (h->d == NULL) {
        snprintf(err, errlen, "cannot start the HTTP server on %s:%u%s", cfg->listen_host, h->port,
                 h->tls_cert != NULL ? " (is tls_key_file the key of tls_cert_file, both PEM?)"
                                     : "");
        close(h->fd);
        goto fail;
    }
    if (pthread_create(&h->sweeper, NULL, http_sweeper_main, h) != 0) {
        snprintf(err, errlen, "cannot start the connection sweeper thread");
        MHD_stop_daemon(h->d);
        goto fail;
    }
    h->sweeper_running = true;
    if (fast && !http_fast_start(h, threads, err, errlen)) {
        http_stop(h);
        return NULL;
    }
    atomic_init(&h->probe_stop, false);
    atomic_init(&h->probe_port, 0);
    atomic_init(&h->late_now, false);
    /* Without it the daemon serves as well; only the overrun figures would be missing. */
    h->prober_running = pthread_create(&h->prober, NULL, http_probe_main, h) == 0;
    if (!h->prober_running)
        log_warn(a->lg, "cannot start the probe thread: bloomguard_answer_delay_seconds stays unknown");
    return h;

fail:
    http_free_tls(h);
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

/* The probe first: a server that stops accepting must not read as one that answers late. */
static void stop_probe(struct http *h)
{
    if (!h->prober_running)
        return;
    atomic_store(&h->probe_stop, true);
    pthread_join(h->prober, NULL);
    h->prober_running = false;
}

void http_quiesce(struct http *h)
{
    if (h == NULL)
        return;
    stop_probe(h);
    if (h->fast != NULL)
        http_fast_quiesce(h);       /* the socket stays ours: http_stop closes it */
    else if (h->d != NULL && !h->quiesced)
        h->quiesced = MHD_quiesce_daemon(h->d) != MHD_INVALID_SOCKET;
}

void http_stop(struct http *h)
{
    if (h == NULL)
        return;
    stop_probe(h);
    if (h->sweeper_running) {
        pthread_mutex_lock(&h->stop_lock);
        h->stopping = true;
        pthread_cond_signal(&h->stop_cond);
        pthread_mutex_unlock(&h->stop_lock);
        pthread_join(h->sweeper, NULL);
    }
    bool fast = h->fast != NULL;
    http_fast_stop(h);
    /*
     * MHD must not stop with a request suspended: the replies still coming
     * (a POST waiting for the disk) come within one fdatasync, or the log's
     * failure; wait for them, a few seconds at most.
     */
    for (int i = 0; i < 500 && atomic_load(&h->suspended) > 0; i++)
        usleep(10000);
    MHD_stop_daemon(h->d);
    if (h->quiesced || fast)
        close(h->fd);               /* otherwise MHD closed it */
    pthread_cond_destroy(&h->stop_cond);
    pthread_mutex_destroy(&h->stop_lock);
    pthread_mutex_destroy(&h->warn_lock);
    pthread_mutex_destroy(&h->conns_lock);
    http_free_tls(h);
    free(h);
}
