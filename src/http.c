/*
 * libmicrohttpd plumbing.  The first call for a request only sets up state
 * (answering there would make MHD close keep-alive connections); bodies are
 * gathered up to max_body_bytes; the final call routes to a handler and
 * queues its response.
 */
#include "http.h"
#include "listen.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

struct http {
    struct MHD_Daemon *d;
    struct app *a;
    int fd;
    unsigned port;
    bool quiesced;          /* MHD handed the listen socket back to us */
};

/*
 * Per-connection state, reused by every request on a keep-alive connection
 * (allocated when the connection opens, freed when it closes), so the
 * request path itself allocates nothing for it.
 */
struct request {
    uint64_t t0;            /* monotonic ns at the first call; 0 = not timed */
    enum stat_endpoint route;   /* the endpoint is the route */
    struct reply early;     /* an answer decided before the body (status 0: none) */
    char *body;
    size_t len, cap;
    bool too_large;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static bool is_get(const char *m)
{
    return strcmp(m, MHD_HTTP_METHOD_GET) == 0 || strcmp(m, MHD_HTTP_METHOD_HEAD) == 0;
}

static struct reply method_not_allowed(const char *allow, const char *method)
{
    struct reply r = api_error(MHD_HTTP_METHOD_NOT_ALLOWED, "method_not_allowed",
                               "%s is not allowed here; use %s", method, allow);
    if (r.resp != NULL)
        MHD_add_response_header(r.resp, MHD_HTTP_HEADER_ALLOW, allow);
    return r;
}

/* Route by path and method; a wrong method gives an early 405. */
static enum stat_endpoint route_of(const char *url, const char *method, struct reply *early)
{
    static const struct {
        const char *path;
        enum stat_endpoint route;
        bool post;
    } exact[] = {
        { "/exists", EP_EXISTS_BATCH, true }, { "/ids", EP_IDS, true },
        { "/healthz", EP_HEALTHZ, false },    { "/readyz", EP_READYZ, false },
        { "/stats", EP_STATS, false },        { "/metrics", EP_METRICS, false },
        { "/reload", EP_RELOAD, true },
    };
    if (strncmp(url, "/exists/", 8) == 0) {
        if (!is_get(method))
            *early = method_not_allowed("GET, HEAD", method);
        return EP_EXISTS;
    }
    if (strcmp(url, "/auth") == 0 || strncmp(url, "/auth/", 6) == 0)
        return EP_AUTH;                  /* any method: proxies forward the original one */
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++) {
        if (strcmp(url, exact[i].path) != 0)
            continue;
        if (exact[i].post ? strcmp(method, MHD_HTTP_METHOD_POST) != 0 : !is_get(method))
            *early = method_not_allowed(exact[i].post ? "POST" : "GET, HEAD", method);
        return exact[i].route;
    }
    *early = api_error(MHD_HTTP_NOT_FOUND, "no_route", "no such endpoint: %s %s", method, url);
    return EP_OTHER;
}

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

/*
 * The original URI for /auth: X-Original-URI (nginx), X-Forwarded-Uri
 * (Traefik), or the path after /auth (Envoy's path_prefix), as
 * [auth] uri_source says.  An empty string when the chosen header is absent
 * (it matches no template).
 */
static const char *auth_uri(struct MHD_Connection *c, enum auth_uri_source src, const char *url,
                            size_t *len)
{
    const char *u = NULL;
    if (src == URI_SOURCE_AUTO || src == URI_SOURCE_X_ORIGINAL_URI)
        u = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Original-URI");
    if (u == NULL && (src == URI_SOURCE_AUTO || src == URI_SOURCE_X_FORWARDED_URI))
        u = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Forwarded-Uri");
    if (u == NULL && (src == URI_SOURCE_AUTO || src == URI_SOURCE_PATH))
        u = url + 5;                    /* "/auth/user/get/1" -> "/user/get/1" */
    if (u == NULL)
        u = "";
    *len = strlen(u);
    return u;
}

static struct reply dispatch(struct app *a, struct request *rq, struct MHD_Connection *c,
                             const char *url)
{
    switch (rq->route) {
    case EP_EXISTS:
        return api_exists(a, url + 8, strlen(url + 8));
    case EP_AUTH: {
        size_t len;
        const char *uri = auth_uri(c, a->cfg->uri_source, url, &len);
        return api_auth(a, uri, len);
    }
    case EP_HEALTHZ: return api_healthz(a);
    case EP_READYZ: return api_readyz(a);
    case EP_STATS: return api_stats(a);
    case EP_METRICS: return api_metrics(a);
    case EP_RELOAD: return api_reload(a);
    case EP_EXISTS_BATCH:
    case EP_IDS: {
        if (rq->too_large)
            return api_error(MHD_HTTP_CONTENT_TOO_LARGE, "body_too_large",
                             "request body is larger than max_body_bytes (%llu)",
                             (unsigned long long)a->cfg->max_body_bytes);
        enum body_type t = body_type_of(c);
        if (t == BODY_OTHER)
            return api_error(MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type",
                             "Content-Type must be application/json or text/plain");
        if (rq->len == 0)
            return api_error(MHD_HTTP_BAD_REQUEST, "empty_body", "the request body is empty");
        return rq->route == EP_IDS ? api_insert(a, t, rq->body, rq->len)
                                   : api_exists_batch(a, t, rq->body, rq->len);
    }
    case EP_OTHER:
    case EP_COUNT:
        break;
    }
    return api_error(MHD_HTTP_NOT_FOUND, "no_route", "no such endpoint");
}

static bool append_body(struct request *rq, const char *data, size_t n, uint64_t max)
{
    if (rq->too_large || rq->len + n > max) {
        rq->too_large = true;           /* keep reading, drop the bytes */
        return true;
    }
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
        stats_request(h->a->stats, rq->route, r.status, dt ? dt : 1);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **req_cls)
{
    struct http *h = cls;
    struct app *a = h->a;
    struct request *rq = *req_cls;
    (void)version;

    if (rq == NULL) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        rq = ci ? ci->socket_context : NULL;
        if (rq == NULL)
            return MHD_NO;
        rq->len = 0;
        rq->too_large = false;
        rq->early.status = 0;
        rq->t0 = 0;
        if (a->cfg->metrics_enabled)
            rq->t0 = now_ns();
        rq->route = route_of(url, method, &rq->early);
        if (rq->early.status == 0 && (rq->route == EP_IDS || rq->route == EP_EXISTS_BATCH)) {
            /* Refuse an announced oversized body before reading it. */
            const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                         MHD_HTTP_HEADER_CONTENT_LENGTH);
            if (cl != NULL && strtoull(cl, NULL, 10) > a->cfg->max_body_bytes)
                rq->too_large = true;
        }
        *req_cls = rq;
        return MHD_YES;
    }
    if (*upload_data_size != 0) {
        if (rq->early.status == 0 && rq->route != EP_AUTH
            && !append_body(rq, upload_data, *upload_data_size, a->cfg->max_body_bytes))
            return MHD_NO;
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (rq->early.status != 0) {
        struct reply r = rq->early;
        rq->early.status = 0;
        return queue(h, rq, c, r);
    }
    return queue(h, rq, c, dispatch(a, rq, c, url));
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct request *rq = *req_cls;
    (void)cls;
    (void)c;
    (void)toe;
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
    *req_cls = NULL;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    (void)cls;
    (void)c;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        *socket_context = calloc(1, sizeof(struct request));   /* NULL: requests get MHD_NO */
    } else if (*socket_context != NULL) {
        struct request *rq = *socket_context;
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

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    struct http *h = cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n > 0 && msg[n - 1] == '\n')
        msg[--n] = '\0';
    log_warn(h->a->lg, "http: %s", msg);
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
    int family = AF_INET;
    h->fd = listen_tcp(cfg->listen_host, cfg->listen_port, &family, &h->port, err, errlen);
    if (h->fd < 0) {
        free(h);
        return NULL;
    }
    unsigned threads = cfg->threads;
    if (threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (unsigned)n : 1;
    }
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ITC | MHD_USE_ERROR_LOG;
    if (family == AF_INET6)
        flags |= MHD_USE_IPv6;
    /* One thread: no pool (MHD warns that a pool of 1 is ignored). */
    struct MHD_OptionItem pool[] = {
        { threads > 1 ? MHD_OPTION_THREAD_POOL_SIZE : MHD_OPTION_END, threads, NULL },
        { MHD_OPTION_END, 0, NULL }
    };
    h->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, h,
                            MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h,   /* must come first */
                            MHD_OPTION_LISTEN_SOCKET, h->fd,
                            MHD_OPTION_ARRAY, pool,
                            MHD_OPTION_CONNECTION_LIMIT, cfg->max_connections,
                            MHD_OPTION_CONNECTION_TIMEOUT, cfg->connection_timeout,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
                            MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
                            /* MHD clears this pool for every request: keep it small. */
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)16384,
                            MHD_OPTION_UNESCAPE_CALLBACK, no_unescape, h,
                            MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024,
                            MHD_OPTION_END);
    if (h->d == NULL) {
        snprintf(err, errlen, "cannot start the HTTP server on %s:%u", cfg->listen_host, h->port);
        close(h->fd);
        free(h);
        return NULL;
    }
    return h;
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
    MHD_stop_daemon(h->d);
    if (h->quiesced)
        close(h->fd);               /* otherwise MHD closed it */
    free(h);
}
