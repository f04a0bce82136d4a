/*
 * The edge against hostile clients: what is decided from the request line
 * and headers alone, before MHD reads a byte of a body (framing that could
 * smuggle a request, method and path bytes, the route, the admin right,
 * the announced size), and who holds the admin right at all (the write
 * policy, chosen once at start from the token and the bound address).
 */
#include "http_int.h"

#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "config.h"
#include "idcodec.h"
#include "log.h"
#include "token.h"


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

/*
 * The refusal of a request its route does not take: 400 (no such endpoint:
 * not 404, which only ever means "surely absent", so that a mistyped
 * /exist/ID is not taken for an absent ID), or 405 with Allow.
 */
struct reply http_route_refusal(const struct route *r, unsigned allowed, const char *url,
                                  const char *method)
{
    if (r == NULL) {
        int q = quote_len(url, QUOTE_URL);
        return api_error(MHD_HTTP_BAD_REQUEST, "no_route", "no such endpoint: %.32s %.*s%s", method,
                         q, url, url[q] ? "..." : "");
    }
    char allow[32];
    routes_allow_header(allowed, allow, sizeof allow);
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
 * An admin route (routes_table[] marks them): does the request
 * carry the admin right?  Whatever the method: a snapshot is a read, but of
 * the whole filter.
 */
bool http_right_granted(const struct http *h, const struct app *a, unsigned right,
                        const char *auth)
{
    /* A replica's token opens the replication routes, and nothing else. */
    if (right == ROUTE_REPLICATION && a->replication_token != NULL
        && token_check_bearer(a->replication_token, auth))
        return true;
    switch (h->writes) {
    case WRITES_LOOPBACK:
        return true;
    case WRITES_REFUSED:
        return false;
    case WRITES_TOKEN:
        return token_check_bearer(a->admin_token, auth);
    }
    return false;
}

static struct reply check_write(struct http *h, const struct app *a, struct MHD_Connection *c,
                                unsigned right)
{
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                   MHD_HTTP_HEADER_AUTHORIZATION);
    if (http_right_granted(h, a, right, auth))
        return (struct reply){ 0, NULL, false };
    switch (h->writes) {
    case WRITES_LOOPBACK:
        break;
    case WRITES_REFUSED:
        return api_error(MHD_HTTP_FORBIDDEN, "admin_token_required",
                         "admin requests are refused: the daemon listens beyond loopback and no "
                         "admin token is set ([server] admin_token_file)");
    case WRITES_TOKEN: {
        const char *what = right == ROUTE_REPLICATION && a->replication_token
                           ? "admin or replication token" : "admin token";
        struct reply r = auth == NULL
            ? api_error(MHD_HTTP_UNAUTHORIZED, "unauthorized",
                        "this endpoint needs Authorization: Bearer <%s>", what)
            : api_error(MHD_HTTP_UNAUTHORIZED, "unauthorized",
                        "the Authorization header does not hold the %s", what);
        if (r.resp != NULL)
            MHD_add_response_header(r.resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                                    "Bearer realm=\"bloomguard\"");
        return r;
    }
    }
    return (struct reply){ 0, NULL, false };
}

/* The order matters: each refusal names the first thing wrong. */
bool http_first_checks(struct http *h, const struct app *a, struct request *rq,
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
    const struct route *r = routes_find(url, routes_method_bit(method), &rest_off, &allowed);
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
    if (r == NULL || !(r->methods & routes_method_bit(method)))
        rq->early = http_route_refusal(r, allowed, url, method);
    else if (r->admin)
        rq->early = check_write(h, a, c, r->admin);
    if (rq->early.status == 0 && announced > cfg->max_body_bytes)
        rq->early = api_error(MHD_HTTP_CONTENT_TOO_LARGE, "body_too_large",
                              "request body is larger than max_body_bytes (%llu)",
                              (unsigned long long)cfg->max_body_bytes);
    return rq->early.status != 0 && body;
}

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

void http_choose_write_policy(struct http *h)
{
    const struct config *cfg = h->a->cfg;
    if (h->a->admin_token != NULL) {
        h->writes = WRITES_TOKEN;
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        bool tcp = getsockname(h->fd, (struct sockaddr *)&ss, &sl) == 0
                   && (ss.ss_family == AF_INET || ss.ss_family == AF_INET6);
        if (tcp && h->tls_cert == NULL && !bound_to_loopback(h->fd))
            log_warn(h->a->lg, "%s is not a loopback address and the server speaks plain http: "
                     "the admin token (and a peer's snapshot) travel in clear; set [server] "
                     "tls_cert_file and tls_key_file", cfg->listen_host);
    } else if (bound_to_loopback(h->fd)) {
        h->writes = WRITES_LOOPBACK;
    } else {
        h->writes = WRITES_REFUSED;
        char admin_routes[160];
        routes_admin_text(admin_routes, sizeof admin_routes);
        log_warn(h->a->lg, "no admin token and %s is not a loopback address: %s are refused "
                 "(403 admin_token_required) so that no one who can reach the port can write or "
                 "copy a filter; set [server] admin_token_file to allow them",
                 cfg->listen_host, admin_routes);
    }
}
