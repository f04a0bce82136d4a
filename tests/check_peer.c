/*
 * Unit tests of the HTTP client (src/base/httpc.c, libcurl) and the peer
 * bootstrap's fetch on it (src/store/peer.c), against a tiny server thread on
 * 127.0.0.1:0 that accepts one connection, keeps the requests it read and
 * answers canned bytes: a real snapshot, a refusal, a truncated body,
 * answers without a usable Content-Length, a closed port, a peer that
 * never answers, one that trickles, plain http where TLS was asked, the
 * token kept from an address that is not loopback, a chunked stream, and
 * two requests on one kept-alive connection.  Not here: a name lookup
 * that hangs (libcurl's resolver thread is abandoned at the connect
 * timeout; a resolver that never answers would need a private
 * resolv.conf), and TLS itself (tests/peer.test runs real daemons with a
 * throwaway CA).
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check_main.h"
#include "filter.h"
#include "httpc.h"
#include "peer.h"
#include "snapshot.h"

/* One connection's worth of server: what to answer, what it was asked. */
struct server {
    int lfd;
    unsigned short port;
    pthread_t thread;
    const char *head;           /* sent first; NULL: send nothing, wait for the client to go */
    const unsigned char *body;
    size_t body_len;
    unsigned trickle_ms;        /* 0: the body at once; else a byte every trickle_ms */
    atomic_bool *stop;          /* set once stop_after bytes of the body are sent */
    size_t stop_after;
    double stopped_at;          /* now_s() when it set stop */
    size_t sent;                /* bytes of the body sent */
    char request[8192];         /* the (last) request head it read */
    unsigned requests;          /* answer this many requests on the one connection (0: 1) */
    unsigned accepted;          /* connections accepted */
    unsigned answered;          /* requests answered */
    bool eager;                 /* send head at once, without reading a request */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The body a byte at a time, until it is all sent or the client has gone. */
static void trickle(struct server *s, int c)
{
    while (s->sent < s->body_len) {
        if (s->stop != NULL && s->sent == s->stop_after) {
            s->stopped_at = now_s();
            atomic_store(s->stop, true);
        }
        struct pollfd p = { .fd = c, .events = POLLIN };
        if (poll(&p, 1, (int)s->trickle_ms) != 0)
            return;                     /* the client shut the connection down */
        if (send(c, s->body + s->sent, 1, MSG_NOSIGNAL) != 1)
            return;
        s->sent++;
    }
}

/* One request head into s->request; false when the client went first. */
static bool read_request(struct server *s, int c)
{
    size_t n = 0;
    while (n + 1 < sizeof s->request && (n < 4 || memcmp(s->request + n - 4, "\r\n\r\n", 4) != 0)) {
        ssize_t r = recv(c, s->request + n, 1, 0);
        if (r <= 0)
            break;
        n++;
    }
    s->request[n] = '\0';
    return n > 0;
}

static void *serve(void *arg)
{
    struct server *s = arg;
    int c = accept(s->lfd, NULL, NULL);
    if (c < 0)
        return NULL;
    s->accepted++;
    /* A second client connection would be counted (keep-alive's test). */
    struct pollfd lp = { .fd = s->lfd, .events = POLLIN };
    for (unsigned i = 0; i < (s->requests ? s->requests : 1); i++) {
        if (!s->eager && !read_request(s, c))
            break;
        if (s->head != NULL) {
            (void)!send(c, s->head, strlen(s->head), MSG_NOSIGNAL);
            if (s->trickle_ms > 0)
                trickle(s, c);
            else if (s->body_len > 0)
                (void)!send(c, s->body, s->body_len, MSG_NOSIGNAL);
            s->answered++;
        } else {
            /* Never answer: wait until the client gives up and closes (bounded). */
            struct pollfd p = { .fd = c, .events = POLLIN };
            (void)poll(&p, 1, 10000);
        }
    }
    if (poll(&lp, 1, 0) == 1) {
        int c2 = accept(s->lfd, NULL, NULL);
        if (c2 >= 0) {
            s->accepted++;
            close(c2);
        }
    }
    close(c);
    return NULL;
}

static int listen_on(unsigned short *port, uint32_t addr)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(addr) };
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(fd, 4), 0);
    socklen_t al = sizeof a;
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &al), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

static int listen_any(unsigned short *port)
{
    return listen_on(port, INADDR_LOOPBACK);
}

/* Set what serve answers first (memset s), then start it. */
static void server_run(struct server *s)
{
    s->lfd = listen_any(&s->port);
    ck_assert_int_eq(pthread_create(&s->thread, NULL, serve, s), 0);
}

/* s answering head then body; started by server_run once the caller set the rest. */
static void server_init(struct server *s, const char *head, const void *body, size_t body_len)
{
    memset(s, 0, sizeof *s);
    s->head = head;
    s->body = body;
    s->body_len = body_len;
}

static void server_start(struct server *s, const char *head, const void *body, size_t body_len)
{
    server_init(s, head, body, body_len);
    server_run(s);
}

static void server_stop(struct server *s)
{
    pthread_join(s->thread, NULL);
    close(s->lfd);
}

/* ------------------------------------------------- a snapshot in memory -- */
struct membuf {
    char *p;
    size_t len;
};

/* snapshot_write_to's sink: the stream ctx (an open_memstream, here). */
static bool stream_write(void *ctx, const void *buf, size_t len)
{
    return fwrite(buf, 1, len, ctx) == len;
}

/* Each wait 2 s (300 ms for the silent peer); the whole fetch as by default. */
static const struct peer_limits QUICK = { .timeout_ms = 2000 };
static const struct peer_limits SHORT = { .timeout_ms = 300 };

static const struct snapshot_expect EXPECT = {
    .name = "users", .table = "public.users", .column = "id", .target_fpp = 0.01,
};

/* A snapshot of a filter holding key-0 .. key-99. */
static struct membuf make_snapshot(void)
{
    struct filter *f = filter_new(1000, 0.01, NULL);
    ck_assert_ptr_nonnull(f);
    char k[32];
    for (int i = 0; i < 100; i++)
        filter_add(f, k, (size_t)snprintf(k, sizeof k, "key-%d", i));
    struct snapshot_meta m = { .name = "users", .table = "public.users", .column = "id",
                               .created = 1700000000 };
    struct membuf b = { 0 };
    FILE *out = open_memstream(&b.p, &b.len);
    ck_assert_ptr_nonnull(out);
    ck_assert_int_eq(snapshot_write_to(stream_write, out, &m, f, NULL, NULL), 0);
    ck_assert_int_eq(fclose(out), 0);
    filter_free(f);
    return b;
}

/* A plain 200 head announcing a body of len bytes, into head (cap bytes). */
static void ok_head(char *head, size_t cap, size_t len)
{
    snprintf(head, cap, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n", len);
}

/*
 * s serving snapshot b behind a plain 200 head that announces all of it,
 * then hanging up after send bytes of it (b.len: the whole).  head, the
 * caller's buffer of cap bytes, must live until server_stop.
 */
static void serve_snapshot(struct server *s, char *head, size_t cap, const struct membuf *b, size_t send)
{
    ok_head(head, cap, b->len);
    server_start(s, head, b->p, send);
}

static char *base_of(const struct server *s)
{
    static char base[64];
    snprintf(base, sizeof base, "http://127.0.0.1:%u", s->port);
    return base;
}

/* ---------------------------------------------------------------- tests -- */

/* The users snapshot fetched from base with lim and token; NULL lim: QUICK. */
static enum snapshot_status fetch(const char *base, const char *token,
                                  const struct peer_limits *lim, struct snapshot *snap, char *why)
{
    return peer_fetch_snapshot(base, "users", token, NULL, &EXPECT, lim ? lim : &QUICK, snap, why,
                               SNAPSHOT_WHY_LEN);
}

/*
 * fetch with a token from s, addressed as "<origin>:<its port>" (origin: a
 * scheme and a host, e.g. "http://[::1]"), then s stopped: s.request holds
 * what it was sent.
 */
static enum snapshot_status fetch_via(struct server *s, const char *origin, struct snapshot *snap,
                                      char *why)
{
    char base[96];
    snprintf(base, sizeof base, "%s:%u", origin, s->port);
    enum snapshot_status st = fetch(base, "tok-0123456789abcdef", NULL, snap, why);
    server_stop(s);
    return st;
}

START_TEST(test_ok)
{
    struct membuf b = make_snapshot();
    char head[256];
    snprintf(head, sizeof head,
             "HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\n"
             "CONTENT-LENGTH: %zu\r\nX-Bloomguard-Snapshot-Created: 1700000000\r\n\r\n", b.len);
    struct server s;
    server_start(&s, head, b.p, b.len);
    struct snapshot snap;
    char why[SNAPSHOT_WHY_LEN] = "";
    /* A trailing slash is still the root. */
    char base[80];
    snprintf(base, sizeof base, "%s/", base_of(&s));
    enum snapshot_status st = fetch(base, "tok-0123456789abcdef", NULL, &snap, why);
    server_stop(&s);
    ck_assert_msg(st == SNAPSHOT_OK, "status %s: %s", snapshot_strstatus(st), why);
    ck_assert_ptr_nonnull(snap.filter);
    char k[32];
    for (int i = 0; i < 100; i++)
        ck_assert(filter_contains(snap.filter, k, (size_t)snprintf(k, sizeof k, "key-%d", i)));
    ck_assert_str_eq(snap.name, "users");
    ck_assert_uint_eq(snap.created, 1700000000);
    snapshot_release(&snap);

    /* What the server was asked. */
    ck_assert_msg(strncmp(s.request, "GET /snapshot/users HTTP/1.1\r\n", 30) == 0, "request: %s",
                  s.request);
    ck_assert_ptr_nonnull(strstr(s.request, "\r\nAuthorization: Bearer tok-0123456789abcdef\r\n"));
    char host[64];
    snprintf(host, sizeof host, "\r\nHost: 127.0.0.1:%u\r\n", s.port);
    ck_assert_ptr_nonnull(strstr(s.request, host));
    ck_assert_ptr_nonnull(strstr(s.request, "\r\nUser-Agent: bloomguard/"));
    ck_assert_ptr_nonnull(strstr(s.request, "\r\nAccept: application/octet-stream\r\n"));
    free(b.p);
}
END_TEST

START_TEST(test_no_token_no_header)
{
    struct server s;
    server_start(&s, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n", NULL, 0);
    struct snapshot snap;
    char why[SNAPSHOT_WHY_LEN] = "";
    enum snapshot_status st = peer_fetch_snapshot(base_of(&s), "orders", NULL, NULL, NULL, &QUICK,
                                                  &snap, why, sizeof why);
    server_stop(&s);
    ck_assert_int_eq(st, SNAPSHOT_IO);
    ck_assert_msg(strstr(why, "answered 503") != NULL, "why: %s", why);
    ck_assert(strncmp(s.request, "GET /snapshot/orders HTTP/1.1\r\n", 31) == 0);
    ck_assert_ptr_null(strstr(s.request, "Authorization"));
    ck_assert_ptr_null(snap.filter);
    snapshot_release(&snap);
}
END_TEST

START_TEST(test_unauthorized)
{
    static const char body[] =
        "{\"error\":\"unauthorized\",\"message\":\"the Authorization header does not hold the admin token\"}";
    char head[256];
    snprintf(head, sizeof head,
             "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\n"
             "WWW-Authenticate: Bearer realm=\"bloomguard\"\r\nContent-Length: %zu\r\n\r\n",
             sizeof body - 1);
    struct server s;
    server_start(&s, head, body, sizeof body - 1);
    struct snapshot snap;
    char why[SNAPSHOT_WHY_LEN] = "";
    enum snapshot_status st = fetch(base_of(&s), "wrong-token-wrong", NULL, &snap, why);
    server_stop(&s);
    ck_assert_int_eq(st, SNAPSHOT_IO);
    ck_assert_msg(strstr(why, "answered 401 unauthorized (the Authorization header") != NULL,
                  "why: %s", why);
    ck_assert_msg(strstr(why, "/snapshot/users") != NULL, "why: %s", why);
    ck_assert_msg(strstr(why, "wrong-token") == NULL, "the token leaked: %s", why);
}
END_TEST

START_TEST(test_truncated)
{
    struct membuf b = make_snapshot();
    char head[128];
    struct server s;
    serve_snapshot(&s, head, sizeof head, &b, b.len - 100);      /* the peer hangs up early */
    struct snapshot snap;
    char why[SNAPSHOT_WHY_LEN] = "";
    enum snapshot_status st = fetch(base_of(&s), NULL, NULL, &snap, why);
    server_stop(&s);
    ck_assert_msg(st == SNAPSHOT_TRUNCATED, "status %s: %s", snapshot_strstatus(st), why);
    ck_assert_ptr_null(snap.filter);
    free(b.p);
}
END_TEST

/* A snapshot of another filter: the reader's verdict, not the transfer's. */
START_TEST(test_other_name)
{
    struct membuf b = make_snapshot();
    char head[128];
    struct server s;
    serve_snapshot(&s, head, sizeof head, &b, b.len);
    static const struct snapshot_expect other = { .name = "orders" };
    struct snapshot snap;
    char why[SNAPSHOT_WHY_LEN] = "";
    enum snapshot_status st = peer_fetch_snapshot(base_of(&s), "orders", NULL, NULL, &other,
                                                  &QUICK, &snap, why, sizeof why);
    server_stop(&s);
    ck_assert_msg(st == SNAPSHOT_OTHER_NAME, "status %s: %s", snapshot_strstatus(st), why);
    ck_assert_ptr_null(snap.filter);
    free(b.p);
}
END_TEST

/* Bodies a snapshot cannot be framed by: refused. */
static const char *const unframed[] = {
    "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\nBGSNAP\r\n",
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n8\r\nBGSNAP\r\n\r\n0\r\n\r\n",
    "HTTP/1.1 200 OK\r\nContent-Length: -8\r\n\r\nBGSNAP\r\n",
    "SSH-2.0-OpenSSH_9.2\r\n\r\n",
};
static const char *const unframed_why[] = {
    "no Content-Length", "chunked", "", "",
};

START_TEST(test_unframed)
{
    struct server s;
    server_start(&s, unframed[_i], NULL, 0);
    struct snapshot snap;
    char why[SNAPSHOT_WHY_LEN] = "";
    enum snapshot_status st = fetch(base_of(&s), NULL, NULL, &snap, why);
    server_stop(&s);
    ck_assert_msg(st == SNAPSHOT_IO, "status %s: %s", snapshot_strstatus(st), why);
    ck_assert_msg(strstr(why, unframed_why[_i]) != NULL, "why: %s", why);
    ck_assert_ptr_null(snap.filter);
}
END_TEST

START_TEST(test_refused)
{
    unsigned short port;
    int fd = listen_any(&port);
    close(fd);                          /* nothing listens there now */
    char base[64], why[SNAPSHOT_WHY_LEN] = "";
    snprintf(base, sizeof base, "http://127.0.0.1:%u", port);
    struct snapshot snap;
    enum snapshot_status st = fetch(base, NULL, NULL, &snap, why);
    ck_assert_int_eq(st, SNAPSHOT_IO);
    ck_assert_msg(strstr(why, "cannot connect") != NULL, "why: %s", why);
}
END_TEST

/*
 * A fetch from base that must fail with SNAPSHOT_IO, nothing kept, a reason
 * holding says (left in why[SNAPSHOT_WHY_LEN]), after lo to hi seconds; srv,
 * when not NULL, is stopped once it returns.
 */
static void fetch_fails(const char *base, struct server *srv, const struct peer_limits *lim,
                        const char *says, double lo, double hi, char *why)
{
    struct snapshot snap;
    double t0 = now_s();
    enum snapshot_status st = fetch(base, NULL, lim, &snap, why);
    double took = now_s() - t0;
    if (srv != NULL)
        server_stop(srv);
    ck_assert_msg(st == SNAPSHOT_IO, "status %s: %s", snapshot_strstatus(st), why);
    ck_assert_ptr_null(snap.filter);
    ck_assert_msg(strstr(why, says) != NULL, "why: %s (wanted \"%s\")", why, says);
    ck_assert_msg(took >= lo && took < hi, "took %.3f s, not %.3f to %.3f s (why: %s)", took, lo, hi, why);
}

START_TEST(test_silent_peer)
{
    struct server s;
    server_start(&s, NULL, NULL, 0);
    char why[SNAPSHOT_WHY_LEN] = "";
    fetch_fails(base_of(&s), &s, &SHORT, "timed out", 0.25, 2.0, why);   /* a 300 ms timeout */
}
END_TEST

START_TEST(test_bad_base)
{
    static const char *const bad[] = {
        "ftp://peer:8080", "http://", "peer:8080", "http://user:secret@127.0.0.1:1",
        "http://[::1",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct snapshot snap;
        char why[SNAPSHOT_WHY_LEN] = "";
        ck_assert_int_eq(fetch(bad[i], NULL, &SHORT, &snap, why), SNAPSHOT_IO);
        ck_assert_msg(strstr(why, "secret") == NULL, "%s: %s", bad[i], why);
        ck_assert_msg(strstr(why, "not ") != NULL || strstr(why, "user info") != NULL, "%s: %s",
                      bad[i], why);
    }
}
END_TEST

/* What httpc_url_check says of each URL: tls, loopback (-1: refused). */
static const struct { const char *url; int tls, loopback; } urls[] = {
    { "https://peer.example:8443", 1, 0 }, { "http://127.0.0.1:8080", 0, 1 },
    { "http://127.9.9.9", 0, 1 }, { "http://[::1]:80/", 0, 1 }, { "http://localhost:1", 0, 1 },
    { "http://LOCALHOST:1", 0, 1 }, { "http://128.0.0.1:1", 0, 0 }, { "http://[::2]:1", 0, 0 },
    { "http://localhost.example:1", 0, 0 }, { "https://u:p@h", -1, -1 }, { "gopher://h", -1, -1 },
};

START_TEST(test_url_check)
{
    bool tls = false, loop = false;
    char why[256] = "";
    bool ok = httpc_url_check(urls[_i].url, &tls, &loop, why, sizeof why);
    ck_assert_msg(ok == (urls[_i].tls >= 0), "%s: %s", urls[_i].url, why);
    if (ok)
        ck_assert_msg(tls == (urls[_i].tls == 1) && loop == (urls[_i].loopback == 1),
                      "%s: tls %d loopback %d", urls[_i].url, tls, loop);
}
END_TEST

/* [::1] with a port: the Host header keeps the brackets. */
START_TEST(test_ipv6)
{
    int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        if (fd >= 0)
            close(fd);
        return;                         /* no IPv6 loopback here: nothing to test */
    }
    ck_assert_int_eq(listen(fd, 1), 0);
    socklen_t al = sizeof a;
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &al), 0);
    struct server s;
    memset(&s, 0, sizeof s);
    s.lfd = fd;
    s.port = ntohs(a.sin6_port);
    s.head = "HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\n{}";
    ck_assert_int_eq(pthread_create(&s.thread, NULL, serve, &s), 0);
    char host[64], why[SNAPSHOT_WHY_LEN] = "";
    struct snapshot snap;
    /* A token, sent: [::1] is loopback. */
    enum snapshot_status st = fetch_via(&s, "http://[::1]", &snap, why);
    ck_assert_int_eq(st, SNAPSHOT_IO);
    ck_assert_msg(strstr(why, "answered 404") != NULL, "why: %s", why);
    snprintf(host, sizeof host, "\r\nHost: [::1]:%u\r\n", s.port);
    ck_assert_msg(strstr(s.request, host) != NULL, "request: %s", s.request);
    ck_assert_ptr_nonnull(strstr(s.request, "Authorization: Bearer"));
}
END_TEST

/* A name, not an address: localhost, which libcurl resolves itself. */
START_TEST(test_by_name)
{
    struct membuf b = make_snapshot();
    char head[128], why[SNAPSHOT_WHY_LEN] = "";
    struct server s;
    serve_snapshot(&s, head, sizeof head, &b, b.len);
    struct snapshot snap;
    enum snapshot_status st = fetch_via(&s, "http://localhost", &snap, why);
    ck_assert_msg(st == SNAPSHOT_OK, "status %s: %s", snapshot_strstatus(st), why);
    ck_assert_ptr_nonnull(strstr(s.request, "\r\nHost: localhost:"));
    snapshot_release(&snap);
    free(b.p);
}
END_TEST

/*
 * The token over plain http goes only where the connection really is
 * loopback: decided on the address connected to (libcurl's primary IP),
 * so a name or a proxy elsewhere is caught too.  The refusal itself needs
 * a second host to show (an address that is not this host's loopback):
 * the rule's predicate is tested here, on what libcurl would report.
 */
static const struct { const char *ip; bool loopback; } addrs[] = {
    { "127.0.0.1", true }, { "127.255.0.9", true }, { "::1", true }, { "::ffff:127.0.0.1", true },
    { "0.0.0.0", false }, { "10.1.2.3", false }, { "192.0.2.7", false }, { "128.0.0.1", false },
    { "::", false }, { "::2", false }, { "::ffff:10.0.0.1", false }, { "2001:db8::1", false },
    { "localhost", false }, { "", false },
};

START_TEST(test_token_rule)
{
    ck_assert_msg(httpc_addr_loopback(addrs[_i].ip) == addrs[_i].loopback, "%s", addrs[_i].ip);
}
END_TEST

/* The URL names 0.0.0.0, but the connection is to this host: the check looks at the latter. */
START_TEST(test_token_by_connection)
{
    struct server s;
    server_start(&s, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", NULL, 0);
    char why[SNAPSHOT_WHY_LEN] = "";
    struct snapshot snap;
    enum snapshot_status st = fetch_via(&s, "http://0.0.0.0", &snap, why);
    ck_assert_msg(st == SNAPSHOT_IO, "status %s: %s", snapshot_strstatus(st), why);
    ck_assert_msg(strstr(why, "answered 404") != NULL, "why: %s", why);
    ck_assert_ptr_nonnull(strstr(s.request, "Authorization: Bearer tok-"));
}
END_TEST

/* https:// to a server that speaks plain http: a TLS failure, no token sent. */
START_TEST(test_tls_to_plain)
{
    struct server s;
    server_init(&s, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", NULL, 0);
    s.eager = true;
    server_run(&s);
    char why[SNAPSHOT_WHY_LEN] = "";
    struct snapshot snap;
    enum snapshot_status st = fetch_via(&s, "https://127.0.0.1", &snap, why);
    ck_assert_int_eq(st, SNAPSHOT_IO);
    ck_assert_msg(strstr(why, "TLS") != NULL, "why: %s", why);
    ck_assert_msg(strstr(s.request, "tok-") == NULL, "the token went in clear: %s", s.request);
}
END_TEST

/*
 * A refusal announcing a megabyte of body, of which 8 KiB come before the
 * server hangs up: its status is the answer, read from the first
 * HTTPC_ERROR_BODY bytes; the rest is not waited for.
 */
START_TEST(test_long_refusal)
{
    static char body[8192];
    memset(body, 'x', sizeof body);
    struct server s;
    server_start(&s, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 1000000\r\n\r\n", body,
                 sizeof body);
    struct snapshot snap;
    char why[SNAPSHOT_WHY_LEN] = "";
    enum snapshot_status st = fetch(base_of(&s), NULL, NULL, &snap, why);
    server_stop(&s);
    ck_assert_int_eq(st, SNAPSHOT_IO);
    ck_assert_msg(strstr(why, "answered 503") != NULL, "why: %s", why);
}
END_TEST

/* The longest token token.h accepts (4096 characters) is sent whole. */
START_TEST(test_long_token)
{
    static char token[4097];
    memset(token, 'k', 4096);
    struct server s;
    server_start(&s, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", NULL, 0);
    struct snapshot snap;
    char why[SNAPSHOT_WHY_LEN] = "";
    enum snapshot_status st = fetch(base_of(&s), token, NULL, &snap, why);
    server_stop(&s);
    ck_assert_msg(st == SNAPSHOT_IO && strstr(why, "answered 404") != NULL, "why: %s", why);
    char *h = strstr(s.request, "Authorization: Bearer ");
    ck_assert_ptr_nonnull(h);
    h += strlen("Authorization: Bearer ");
    ck_assert_msg(strspn(h, "k") == 4096, "sent %zu characters of the token", strspn(h, "k"));
}
END_TEST

/* ---------------------------------------------------- httpc on its own -- */

struct collect {
    char buf[256];
    size_t len;
    unsigned heads;
    bool chunked;
};

static bool collect_head(void *arg, const struct httpc_head *h, char *why, size_t whylen)
{
    struct collect *c = arg;
    (void)why, (void)whylen;
    c->heads++;
    c->chunked = h->chunked;
    return true;
}

static bool collect_body(void *arg, const void *buf, size_t len)
{
    struct collect *c = arg;
    if (c->len + len > sizeof c->buf)
        return false;
    memcpy(c->buf + c->len, buf, len);
    c->len += len;
    return true;
}

/* A chunked stream, as the upstream follower will read one: delivered decoded. */
START_TEST(test_chunked_stream)
{
    struct server s;
    server_start(&s, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "5\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\n\r\n", NULL, 0);
    struct httpc *c = httpc_new();
    ck_assert_ptr_nonnull(c);
    char url[80], why[512] = "";
    snprintf(url, sizeof url, "%s/stream", base_of(&s));
    struct collect got = { .len = 0 };
    const struct httpc_opts o = { .stall_ms = 2000 };
    enum httpc_status st = httpc_get(c, url, &o, collect_head, collect_body, &got, why, sizeof why);
    httpc_free(c);
    server_stop(&s);
    ck_assert_msg(st == HTTPC_OK, "%s: %s", httpc_strstatus(st), why);
    ck_assert(got.chunked);
    ck_assert_uint_eq(got.heads, 1);
    ck_assert_uint_eq(got.len, 11);
    ck_assert(memcmp(got.buf, "hello world", 11) == 0);
}
END_TEST

/* Two requests on one client: one connection, kept alive between them. */
START_TEST(test_keep_alive)
{
    struct server s;
    server_init(&s, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", NULL, 0);
    s.requests = 2;
    server_run(&s);
    struct httpc *c = httpc_new();
    ck_assert_ptr_nonnull(c);
    char url[80], why[512] = "";
    snprintf(url, sizeof url, "%s/a", base_of(&s));
    for (int i = 0; i < 2; i++) {
        struct collect got = { .len = 0 };
        enum httpc_status st = httpc_get(c, url, NULL, NULL, collect_body, &got, why, sizeof why);
        ck_assert_msg(st == HTTPC_OK, "request %d: %s: %s", i, httpc_strstatus(st), why);
        ck_assert_uint_eq(got.len, 2);
    }
    httpc_free(c);
    server_stop(&s);
    ck_assert_uint_eq(s.answered, 2);
    ck_assert_uint_eq(s.accepted, 1);
}
END_TEST

/* ------------------------------------------------------------- bounds -- */

/*
 * A peer that sends a byte every 200 ms, each well within the 2 s wait:
 * only the whole fetch's deadline ends it, 0.3 s + len bytes at 1000 B/s
 * (about 1.5 s), where the body alone would take minutes.
 */
START_TEST(test_trickle_deadline)
{
    struct membuf b = make_snapshot();
    char head[128], why[SNAPSHOT_WHY_LEN] = "";
    ok_head(head, sizeof head, b.len);
    struct server s;
    server_init(&s, head, b.p, b.len);
    s.trickle_ms = 200;
    server_run(&s);
    const struct peer_limits lim = { .timeout_ms = 2000, .setup_ms = 300, .min_rate = 1000 };
    double deadline = 0.3 + (double)b.len / 1000.0;
    /* The deadline counts the body: not given up at the 0.3 s allowance, nor long after. */
    fetch_fails(base_of(&s), &s, &lim, "too slow", deadline - 0.05, deadline + 1.5, why);
    char bytes[64];
    snprintf(bytes, sizeof bytes, "the %zu-byte snapshot", b.len);
    ck_assert_msg(strstr(why, bytes) != NULL, "why: %s", why);
    ck_assert_uint_lt(s.sent, b.len);
    free(b.p);
}
END_TEST

/* A head that never ends: the allowance for the head alone ends it. */
START_TEST(test_trickle_head)
{
    static const char body[] = "X-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    struct server s;
    server_init(&s, "HTTP/1.1 200 OK\r\n", body, sizeof body - 1);
    s.trickle_ms = 50;
    server_run(&s);
    const struct peer_limits lim = { .timeout_ms = 2000, .setup_ms = 600 };
    char why[SNAPSHOT_WHY_LEN] = "";
    fetch_fails(base_of(&s), &s, &lim, "too slow: no answer within", 0.55, 2.0, why);
}
END_TEST

/*
 * The stop flag, set by the server itself once it has sent part of the
 * body: the fetch returns within about HTTPC_POLL_MS, though nothing else
 * would end it for minutes.
 */
START_TEST(test_stop_mid_transfer)
{
    struct membuf b = make_snapshot();
    char head[128], why[SNAPSHOT_WHY_LEN] = "";
    ok_head(head, sizeof head, b.len);
    atomic_bool stop;
    atomic_init(&stop, false);
    struct server s;
    server_init(&s, head, b.p, b.len);
    s.trickle_ms = 100;
    s.stop = &stop;
    s.stop_after = 5;
    server_run(&s);
    const struct peer_limits lim = { .timeout_ms = 60000, .setup_ms = 60000, .min_rate = 1,
                                     .stop = &stop };
    struct snapshot snap;
    enum snapshot_status st = fetch(base_of(&s), NULL, &lim, &snap, why);
    double after = now_s() - s.stopped_at;
    server_stop(&s);
    ck_assert_msg(st == SNAPSHOT_IO, "status %s: %s", snapshot_strstatus(st), why);
    ck_assert_msg(strstr(why, "interrupted") != NULL, "why: %s", why);
    ck_assert_ptr_null(snap.filter);
    ck_assert_msg(s.stopped_at > 0 && after < 0.5, "returned %.3f s after the stop", after);
    free(b.p);
    snapshot_release(&snap);
}
END_TEST

/* A thread that sets *stop after 300 ms, for waits no server step can time. */
struct stopper {
    pthread_t th;
    atomic_bool stop;
    double at;
};

static void *stopper_main(void *arg)
{
    struct stopper *k = arg;
    usleep(300000);
    k->at = now_s();
    atomic_store(&k->stop, true);
    return NULL;
}

static void stopper_start(struct stopper *k)
{
    atomic_init(&k->stop, false);
    k->at = 0;
    ck_assert_int_eq(pthread_create(&k->th, NULL, stopper_main, k), 0);
}

/* Stopped while the peer says nothing at all (the head's wait). */
START_TEST(test_stop_silent)
{
    struct server s;
    server_start(&s, NULL, NULL, 0);
    struct stopper k;
    stopper_start(&k);
    const struct peer_limits lim = { .timeout_ms = 60000, .setup_ms = 60000, .stop = &k.stop };
    struct snapshot snap;
    char why[SNAPSHOT_WHY_LEN] = "";
    enum snapshot_status st = fetch(base_of(&s), NULL, &lim, &snap, why);
    pthread_join(k.th, NULL);
    double after = now_s() - k.at;
    server_stop(&s);
    ck_assert_int_eq(st, SNAPSHOT_IO);
    ck_assert_msg(strstr(why, "interrupted") != NULL, "why: %s", why);
    ck_assert_msg(after < 0.5, "returned %.3f s after the stop", after);
}
END_TEST

CHECK_SUITE("peer",
    CHECK_CASE("fetch"),
    CHECK_TEST(test_ok),
    CHECK_TEST(test_no_token_no_header),
    CHECK_TEST(test_unauthorized),
    CHECK_TEST(test_truncated),
    CHECK_TEST(test_other_name),
    CHECK_EACH(test_unframed, unframed),
    CHECK_TEST(test_refused),
    CHECK_TEST(test_silent_peer),
    CHECK_TEST(test_bad_base),
    CHECK_EACH(test_url_check, urls),
    CHECK_TEST(test_ipv6),
    CHECK_TEST(test_by_name),
    CHECK_EACH(test_token_rule, addrs),
    CHECK_TEST(test_token_by_connection),
    CHECK_TEST(test_tls_to_plain),
    CHECK_TEST(test_long_token),
    CHECK_TEST(test_long_refusal),
    CHECK_TEST(test_chunked_stream),
    CHECK_TEST(test_keep_alive),
    CHECK_CASE("bounds", .timeout = 20),
    CHECK_TEST(test_trickle_deadline),
    CHECK_TEST(test_trickle_head),
    CHECK_TEST(test_stop_mid_transfer),
    CHECK_TEST(test_stop_silent),
)
