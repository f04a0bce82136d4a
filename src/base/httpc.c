/*
 * The HTTP client on libcurl (see httpc.h).  libcurl does the protocol:
 * URLs, the name lookup (its resolver thread, abandoned at the connect
 * timeout), proxies, TLS, framing and chunked bodies.  This file adds what
 * bloomguard needs around it: a multi-interface loop that looks at the stop
 * flag and the deadlines every HTTPC_POLL_MS, the rule that the token never
 * travels in clear, and reasons that name the bound that ended a request.
 */
#include "httpc.h"

#include "monoclock.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "0"
#endif

struct httpc {
    CURLM *multi;               /* holds the connection cache between requests */
    CURL *easy;
};

const char *httpc_strstatus(enum httpc_status st)
{
    static const char *const names[] = {
        "ok", "bad url", "refused", "connect", "tls", "timeout", "stopped", "status",
        "head refused", "body refused", "truncated", "protocol", "error",
    };
    return (unsigned)st < sizeof names / sizeof names[0] ? names[st] : "unknown";
}

struct httpc *httpc_new(void)
{
    struct httpc *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    c->multi = curl_multi_init();
    c->easy = curl_easy_init();
    if (c->multi == NULL || c->easy == NULL) {
        httpc_free(c);
        return NULL;
    }
    return c;
}

void httpc_free(struct httpc *c)
{
    if (c == NULL)
        return;
    if (c->easy != NULL)
        curl_easy_cleanup(c->easy);
    if (c->multi != NULL)
        curl_multi_cleanup(c->multi);
    free(c);
}

/* ---------------------------------------------------------------- URLs -- */

static bool host_is_loopback(const char *host)
{
    struct in_addr a4;
    struct in6_addr a6;
    char h[64];
    size_t n = strlen(host);
    if (strcasecmp(host, "localhost") == 0)
        return true;
    if (inet_pton(AF_INET, host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    /* libcurl gives an IPv6 host with its brackets. */
    if (n > 2 && n < sizeof h && host[0] == '[' && host[n - 1] == ']') {
        memcpy(h, host + 1, n - 2);
        h[n - 2] = '\0';
        return inet_pton(AF_INET6, h, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
    }
    return false;
}

bool httpc_url_check(const char *url, bool *tls, bool *loopback, char *why, size_t whylen)
{
    CURLU *u = curl_url();
    char *scheme = NULL, *host = NULL, *user = NULL;
    bool ok = false;
    if (u == NULL) {
        snprintf(why, whylen, "out of memory");
        return false;
    }
    if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK
        || curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK
        || curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || host[0] == '\0') {
        snprintf(why, whylen, "not a URL with a host");
        goto out;
    }
    if (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0) {
        snprintf(why, whylen, "not http:// or https://");
        goto out;
    }
    if (curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK) {
        snprintf(why, whylen, "user info in a URL would be sent in clear: give the token instead");
        goto out;
    }
    *tls = strcmp(scheme, "https") == 0;
    *loopback = host_is_loopback(host);
    ok = true;
out:
    curl_free(scheme);
    curl_free(host);
    curl_free(user);
    curl_url_cleanup(u);
    return ok;
}

bool httpc_addr_loopback(const char *ip)
{
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, ip, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    return inet_pton(AF_INET6, ip, &a6) == 1
           && (IN6_IS_ADDR_LOOPBACK(&a6) || (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127));
}

/* ------------------------------------------------------------ requests -- */

/* One request in flight: its bounds, what the callbacks saw, and why it ended. */
struct req {
    const struct httpc_opts *o;
    CURL *easy;
    const char *url, *what;
    httpc_head_fn head;
    httpc_body_fn body;
    void *arg;
    int64_t start, deadline, last_byte;     /* ms of CLOCK_MONOTONIC; deadline 0: none */
    bool connected;             /* the prereq callback ran: the stall bound applies */
    bool head_done, chunked;
    long status;                /* the final answer's, once head_done */
    bool has_length;
    uint64_t length, received;
    /* Set by a callback that ended the transfer: the status and reason it gives. */
    enum httpc_status ended;
    char ended_why[384];
    /* A refusal's body, to name its error. */
    char err_body[HTTPC_ERROR_BODY];
    size_t err_len;
};

static bool is_2xx(long s)
{
    return s >= 200 && s < 300;
}

/*
 * After connecting and before the request is sent: the one place that
 * knows the address the token would go to.
 */
static int on_prereq(void *clientp, char *primary_ip, char *local_ip, int primary_port,
                     int local_port)
{
    struct req *r = clientp;
    (void)local_ip, (void)primary_port, (void)local_port;
    r->connected = true;
    r->last_byte = monoclock_ns() / 1000000;
    char *scheme = NULL;
    curl_easy_getinfo(r->easy, CURLINFO_SCHEME, &scheme);
    bool tls = scheme != NULL && strcasecmp(scheme, "https") == 0;
    if (r->o->token == NULL || tls || httpc_addr_loopback(primary_ip))
        return CURL_PREREQFUNC_OK;
    r->ended = HTTPC_REFUSED;
    snprintf(r->ended_why, sizeof r->ended_why, "refusing to send the admin token in clear to %s "
             "(plain http to an address that is not loopback: use https)", primary_ip);
    return CURL_PREREQFUNC_ABORT;
}

/* The deadline once the body's length is known (httpc.h: head_ms + length / min_rate). */
static void set_body_deadline(struct req *r)
{
    const struct httpc_opts *o = r->o;
    if (o->min_rate == 0 || !r->has_length)
        return;
    /* In double: a hostile length must not overflow; ten years is "never" enough. */
    double ms = (double)o->head_ms + (double)r->length * 1000.0 / (double)o->min_rate + 1.0;
    r->deadline = r->start + (ms > 3.2e11 ? (int64_t)3.2e11 : (int64_t)ms);
}

/* Each header line; the blank line ends a head (1xx heads come and go before the answer's). */
static size_t on_header(char *buf, size_t size, size_t n, void *userdata)
{
    struct req *r = userdata;
    size_t len = size * n;
    r->last_byte = monoclock_ns() / 1000000;
    if (len >= 17 && strncasecmp(buf, "Transfer-Encoding", 17) == 0) {
        for (size_t i = 17; i + 7 <= len; i++)
            if (strncasecmp(buf + i, "chunked", 7) == 0)
                r->chunked = true;
        return len;
    }
    if (!(len == 2 && buf[0] == '\r' && buf[1] == '\n') && !(len == 1 && buf[0] == '\n'))
        return len;
    long status = 0;
    curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
    if (status < 200) {
        r->chunked = false;
        return len;
    }
    r->head_done = true;
    r->status = status;
    curl_off_t cl = -1;
    curl_easy_getinfo(r->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
    r->has_length = cl >= 0 && !r->chunked;
    r->length = cl >= 0 ? (uint64_t)cl : 0;
    /* A refusal's body is bounded too: it must not hold the caller longer than a body would. */
    set_body_deadline(r);
    if (!is_2xx(status))
        return len;
    if (r->head != NULL) {
        const struct httpc_head h = { .status = status, .has_length = r->has_length,
                                      .length = r->length, .chunked = r->chunked };
        char why[256] = "";
        if (!r->head(r->arg, &h, why, sizeof why)) {
            r->ended = HTTPC_HEAD;
            snprintf(r->ended_why, sizeof r->ended_why, "%s", why[0] ? why : "answer refused");
            return 0;               /* CURLE_WRITE_ERROR: the transfer ends */
        }
    }
    return len;
}

static void describe_refusal(const struct req *r, char *out, size_t len);

static size_t on_body(char *buf, size_t size, size_t n, void *userdata)
{
    struct req *r = userdata;
    size_t len = size * n;
    r->last_byte = monoclock_ns() / 1000000;
    r->received += len;
    if (!is_2xx(r->status)) {
        size_t room = sizeof r->err_body - r->err_len;
        size_t take = len < room ? len : room;
        memcpy(r->err_body + r->err_len, buf, take);
        r->err_len += take;
        if (take == len)
            return len;
        /* More than a refusal needs: its status says enough, the rest is not read. */
        char d[300];
        describe_refusal(r, d, sizeof d);
        r->ended = HTTPC_STATUS;
        snprintf(r->ended_why, sizeof r->ended_why, "answered %s", d);
        return 0;
    }
    if (r->body != NULL && len > 0 && !r->body(r->arg, buf, len)) {
        r->ended = HTTPC_BODY;
        snprintf(r->ended_why, sizeof r->ended_why, "the %s was refused after %llu bytes", r->what,
                 (unsigned long long)r->received);
        return 0;
    }
    return len;
}

/*
 * Whether the request must end now, and why: the stop flag, then the
 * deadlines, then a stall.  Asked every HTTPC_POLL_MS.
 */
static bool gave_up(struct req *r)
{
    const struct httpc_opts *o = r->o;
    int64_t now = monoclock_ns() / 1000000;
    double took = (double)(now - r->start) / 1000.0;
    if (o->stop != NULL && atomic_load(o->stop)) {
        r->ended = HTTPC_STOPPED;
        snprintf(r->ended_why, sizeof r->ended_why, "interrupted: stop requested");
        return true;
    }
    if (!r->head_done && o->head_ms > 0 && now >= r->start + o->head_ms) {
        r->ended = HTTPC_TIMEOUT;
        snprintf(r->ended_why, sizeof r->ended_why, "too slow: no answer within %.1f s (the "
                 "allowance for the name lookup, the connection and the answer's head)", took);
        return true;
    }
    if (r->head_done && r->deadline > 0 && now >= r->deadline) {
        r->ended = HTTPC_TIMEOUT;
        snprintf(r->ended_why, sizeof r->ended_why, "too slow: the %llu-byte %s was not in after "
                 "%.1f s (%.1f s to connect, then at least %.0f KiB/s)",
                 (unsigned long long)r->length, r->what, took, (double)o->head_ms / 1000.0,
                 (double)o->min_rate / 1024.0);
        return true;
    }
    int stall = o->stall_ms > 0 ? o->stall_ms : HTTPC_STALL_MS;
    if (r->connected && now - r->last_byte >= stall) {
        r->ended = HTTPC_TIMEOUT;
        snprintf(r->ended_why, sizeof r->ended_why, "timed out: nothing received for %.1f s",
                 (double)(now - r->last_byte) / 1000.0);
        return true;
    }
    return false;
}

/* A refusal: "401 unauthorized (message)" from bloomguard's JSON error, else the status. */
static void describe_refusal(const struct req *r, char *out, size_t len)
{
    snprintf(out, len, "%ld", r->status);
    json_t *j = json_loadb(r->err_body, r->err_len, 0, NULL);
    const char *code = json_string_value(json_object_get(j, "error"));
    const char *msg = json_string_value(json_object_get(j, "message"));
    if (code != NULL)
        snprintf(out, len, "%ld %.64s%s%.200s%s", r->status, code, msg ? " (" : "",
                 msg ? msg : "", msg ? ")" : "");
    json_decref(j);
}

/*
 * libcurl's results that say only what kind of failure it was: the status
 * and the reason, libcurl's text between before and after.
 */
static const struct {
    CURLcode rc;
    enum httpc_status status;
    const char *before, *after;
} curl_failures[] = {
    { CURLE_COULDNT_RESOLVE_HOST, HTTPC_CONNECT, "cannot resolve: ", "" },
    { CURLE_COULDNT_RESOLVE_PROXY, HTTPC_CONNECT, "cannot resolve: ", "" },
    { CURLE_COULDNT_CONNECT, HTTPC_CONNECT, "cannot connect: ", "" },
    { CURLE_OPERATION_TIMEDOUT, HTTPC_CONNECT, "cannot connect: timed out (", ")" },
    { CURLE_SSL_CONNECT_ERROR, HTTPC_TLS, "TLS: ", "" },
    { CURLE_PEER_FAILED_VERIFICATION, HTTPC_TLS, "TLS: ", "" },
    { CURLE_SSL_CACERT_BADFILE, HTTPC_TLS, "TLS: ", "" },
    { CURLE_SSL_CERTPROBLEM, HTTPC_TLS, "TLS: ", "" },
    { CURLE_SSL_CIPHER, HTTPC_TLS, "TLS: ", "" },
    { CURLE_SSL_ISSUER_ERROR, HTTPC_TLS, "TLS: ", "" },
    { CURLE_SSL_INVALIDCERTSTATUS, HTTPC_TLS, "TLS: ", "" },
    { CURLE_SSL_PINNEDPUBKEYNOTMATCH, HTTPC_TLS, "TLS: ", "" },
    { CURLE_USE_SSL_FAILED, HTTPC_TLS, "TLS: ", "" },
    { CURLE_WEIRD_SERVER_REPLY, HTTPC_PROTOCOL, "the answer is not HTTP we can read: ", "" },
    { CURLE_UNSUPPORTED_PROTOCOL, HTTPC_PROTOCOL, "the answer is not HTTP we can read: ", "" },
    { CURLE_BAD_CONTENT_ENCODING, HTTPC_PROTOCOL, "the answer is not HTTP we can read: ", "" },
    { CURLE_HTTP2, HTTPC_PROTOCOL, "the answer is not HTTP we can read: ", "" },
    { CURLE_HTTP3, HTTPC_PROTOCOL, "the answer is not HTTP we can read: ", "" },
};

/* libcurl's result as a status and reason, when no callback or bound ended the request. */
static enum httpc_status from_curl(CURLcode rc, const struct req *r, const char *errbuf,
                                   char *out, size_t len)
{
    const char *e = errbuf[0] ? errbuf : curl_easy_strerror(rc);
    for (size_t i = 0; i < sizeof curl_failures / sizeof curl_failures[0]; i++)
        if (curl_failures[i].rc == rc) {
            snprintf(out, len, "%s%s%s", curl_failures[i].before, e, curl_failures[i].after);
            return curl_failures[i].status;
        }
    switch (rc) {
    case CURLE_PARTIAL_FILE:
        snprintf(out, len, "the connection ended after %llu of the %llu bytes announced",
                 (unsigned long long)r->received, (unsigned long long)r->length);
        return HTTPC_TRUNCATED;
    case CURLE_GOT_NOTHING:
        snprintf(out, len, "the server closed the connection without an answer");
        return HTTPC_PROTOCOL;
    case CURLE_RECV_ERROR:
        /* A chunked body that ends badly, or a framing libcurl refuses. */
        snprintf(out, len, "reading the answer: %s", e);
        return r->head_done ? HTTPC_TRUNCATED : HTTPC_PROTOCOL;
    case CURLE_OUT_OF_MEMORY:
        snprintf(out, len, "out of memory");
        return HTTPC_ERROR;
    default:
        snprintf(out, len, "%s", e);
        return HTTPC_ERROR;
    }
}

/* Set the request's options; false (why) when libcurl refuses one. */
static bool configure(struct req *r, struct curl_slist **hdrs, char *errbuf, char *why,
                      size_t whylen)
{
    const struct httpc_opts *o = r->o;
    CURL *e = r->easy;
    char line[300];
    *hdrs = NULL;
    if (o->token != NULL) {
        if (strpbrk(o->token, "\r\n") != NULL) {
            snprintf(why, whylen, "%s: the token holds a line break", r->url);
            return false;
        }
        /* Tokens run to 4096 characters (token.h): sized to fit, wiped after. */
        size_t len = strlen(o->token) + 24;
        char *auth = malloc(len);
        if (auth == NULL)
            goto nomem;
        snprintf(auth, len, "Authorization: Bearer %s", o->token);
        *hdrs = curl_slist_append(*hdrs, auth);
        explicit_bzero(auth, len);
        free(auth);
        if (*hdrs == NULL)
            goto nomem;
    }
    if (o->accept != NULL) {
        snprintf(line, sizeof line, "Accept: %.200s", o->accept);
        struct curl_slist *h = curl_slist_append(*hdrs, line);
        if (h == NULL)
            goto nomem;
        *hdrs = h;
    }
    if (o->post != NULL) {
        struct curl_slist *h = curl_slist_append(*hdrs, "Content-Type: application/json");
        if (h == NULL)
            goto nomem;
        *hdrs = h;
    }
    long connect_ms = o->connect_ms > 0 ? o->connect_ms : HTTPC_CONNECT_MS;
    CURLcode rc = CURLE_OK;
#define SET(opt, val) do { if (rc == CURLE_OK) rc = curl_easy_setopt(e, opt, val); } while (0)
    SET(CURLOPT_URL, r->url);
    SET(CURLOPT_PROTOCOLS_STR, "http,https");
    SET(CURLOPT_FOLLOWLOCATION, 0L);
    SET(CURLOPT_NOSIGNAL, 1L);                  /* threads: no SIGALRM for the lookup */
    SET(CURLOPT_ERRORBUFFER, errbuf);
    SET(CURLOPT_USERAGENT, "bloomguard/" PACKAGE_VERSION);
    SET(CURLOPT_HTTPHEADER, *hdrs);
    SET(CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
    SET(CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
    SET(CURLOPT_SSL_VERIFYPEER, 1L);
    SET(CURLOPT_SSL_VERIFYHOST, 2L);
    if (o->ca_file != NULL && o->ca_file[0] != '\0')
        SET(CURLOPT_CAINFO, o->ca_file);
    SET(CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);  /* a proxy's CONNECT answer is not the head */
    SET(CURLOPT_TCP_KEEPALIVE, 1L);
    SET(CURLOPT_PREREQFUNCTION, on_prereq);
    SET(CURLOPT_PREREQDATA, r);
    SET(CURLOPT_HEADERFUNCTION, on_header);
    SET(CURLOPT_HEADERDATA, r);
    SET(CURLOPT_WRITEFUNCTION, on_body);
    SET(CURLOPT_WRITEDATA, r);
    SET(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    /* The handle is reused: a GET after a POST must be a GET again. */
    if (o->post != NULL) {
        SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)o->post_len);
        SET(CURLOPT_POSTFIELDS, o->post);
    } else {
        SET(CURLOPT_HTTPGET, 1L);
    }
#undef SET
    if (rc != CURLE_OK) {
        snprintf(why, whylen, "%s: %s", r->url, curl_easy_strerror(rc));
        return false;
    }
    return true;
nomem:
    snprintf(why, whylen, "%s: out of memory", r->url);
    return false;
}

enum httpc_status httpc_get(struct httpc *c, const char *url, const struct httpc_opts *o,
                            httpc_head_fn head, httpc_body_fn body, void *arg, char *why,
                            size_t whylen)
{
    static const struct httpc_opts defaults = { 0 };
    char errbuf[CURL_ERROR_SIZE] = "", reason[512] = "";
    bool tls, loop;
    if (o == NULL)
        o = &defaults;
    if (!httpc_url_check(url, &tls, &loop, reason, sizeof reason)) {
        /* Not echoed when it holds user info: that may be a password. */
        snprintf(why, whylen, "%.200s: %s", strchr(url, '@') ? "the URL" : url, reason);
        return HTTPC_BAD_URL;
    }
    curl_easy_reset(c->easy);
    struct req *r = calloc(1, sizeof *r);
    if (r == NULL) {
        snprintf(why, whylen, "%s: out of memory", url);
        return HTTPC_ERROR;
    }
    *r = (struct req){ .o = o, .easy = c->easy, .url = url, .what = o->what ? o->what : "body",
                       .head = head, .body = body, .arg = arg,
                       .start = monoclock_ns() / 1000000 };
    struct curl_slist *hdrs = NULL;
    enum httpc_status st = HTTPC_ERROR;
    bool added = false;
    if (!configure(r, &hdrs, errbuf, why, whylen))
        goto out;
    if (curl_multi_add_handle(c->multi, c->easy) != CURLM_OK) {
        snprintf(why, whylen, "%s: cannot start the request", url);
        goto out;
    }
    added = true;
    CURLcode rc = CURLE_OK;
    bool done = false, cut = false;
    while (!done) {
        int running = 0;
        CURLMcode mc = curl_multi_perform(c->multi, &running);
        if (mc != CURLM_OK) {
            snprintf(r->ended_why, sizeof r->ended_why, "%s", curl_multi_strerror(mc));
            r->ended = HTTPC_ERROR;
            cut = true;
            break;
        }
        int left;
        CURLMsg *m;
        while ((m = curl_multi_info_read(c->multi, &left)) != NULL)
            if (m->msg == CURLMSG_DONE && m->easy_handle == c->easy) {
                rc = m->data.result;
                done = true;
            }
        if (done)
            break;
        if (gave_up(r)) {
            cut = true;
            break;
        }
        /* Wakes on the sockets or after HTTPC_POLL_MS, whichever is first. */
        if (curl_multi_poll(c->multi, NULL, 0, HTTPC_POLL_MS, NULL) != CURLM_OK) {
            snprintf(r->ended_why, sizeof r->ended_why, "waiting for the server failed");
            r->ended = HTTPC_ERROR;
            cut = true;
            break;
        }
    }
    if (cut || r->ended != HTTPC_OK) {
        /* A callback or a bound ended it: that is the reason, not what libcurl saw after. */
        st = r->ended;
        snprintf(why, whylen, "%s: %s", url, r->ended_why);
    } else if (rc != CURLE_OK) {
        st = from_curl(rc, r, errbuf, reason, sizeof reason);
        snprintf(why, whylen, "%s: %s", url, reason);
    } else if (!r->head_done) {
        st = HTTPC_PROTOCOL;
        snprintf(why, whylen, "%s: no answer", url);
    } else if (!is_2xx(r->status)) {
        describe_refusal(r, reason, sizeof reason);
        st = HTTPC_STATUS;
        snprintf(why, whylen, "%s: answered %s", url, reason);
    } else {
        st = HTTPC_OK;
    }
out:
    if (added)
        curl_multi_remove_handle(c->multi, c->easy);
    /* The handle keeps pointers to these until its next reset. */
    curl_easy_setopt(c->easy, CURLOPT_HTTPHEADER, NULL);
    curl_easy_setopt(c->easy, CURLOPT_ERRORBUFFER, NULL);
    curl_slist_free_all(hdrs);
    free(r);
    return st;
}
