/*
 * Unit tests of the peer bootstrap client (src/peer.c) against a tiny
 * server thread on 127.0.0.1:0 that accepts one connection, keeps the
 * request it read and answers canned bytes: a real snapshot, a refusal,
 * a truncated body, answers without a usable Content-Length, a closed port
 * and a peer that never answers.
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check_main.h"
#include "filter.h"
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
    char request[4096];         /* the request head it read */
};

static void *serve(void *arg)
{
    struct server *s = arg;
    int c = accept(s->lfd, NULL, NULL);
    if (c < 0)
        return NULL;
    size_t n = 0;
    while (n + 1 < sizeof s->request && (n < 4 || memcmp(s->request + n - 4, "\r\n\r\n", 4) != 0)) {
        ssize_t r = recv(c, s->request + n, 1, 0);
        if (r <= 0)
            break;
        n++;
    }
    s->request[n] = '\0';
    if (s->head != NULL) {
        (void)!send(c, s->head, strlen(s->head), MSG_NOSIGNAL);
        if (s->body_len > 0)
            (void)!send(c, s->body, s->body_len, MSG_NOSIGNAL);
    } else {
        /* Never answer: wait until the client gives up and closes (bounded). */
        struct pollfd p = { .fd = c, .events = POLLIN };
        (void)poll(&p, 1, 10000);
    }
    close(c);
    return NULL;
}

static int listen_any(unsigned short *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(fd, 4), 0);
    socklen_t al = sizeof a;
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &al), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

static void server_start(struct server *s, const char *head, const void *body, size_t body_len)
{
    memset(s, 0, sizeof *s);
    s->head = head;
    s->body = body;
    s->body_len = body_len;
    s->lfd = listen_any(&s->port);
    ck_assert_int_eq(pthread_create(&s->thread, NULL, serve, s), 0);
}

static void server_stop(struct server *s)
{
    pthread_join(s->thread, NULL);
    close(s->lfd);
}

/* ------------------------------------------------- a snapshot in memory -- */
struct membuf {
    unsigned char *p;
    size_t len, cap;
};

static bool mem_write(void *ctx, const void *buf, size_t len)
{
    struct membuf *m = ctx;
    if (m->len + len > m->cap) {
        size_t cap = (m->len + len) * 2;
        unsigned char *p = realloc(m->p, cap);
        if (p == NULL)
            return false;
        m->p = p;
        m->cap = cap;
    }
    memcpy(m->p + m->len, buf, len);
    m->len += len;
    return true;
}

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
    ck_assert_int_eq(snapshot_write_to(mem_write, &b, &m, f, NULL, 0), 0);
    filter_free(f);
    return b;
}

static char *base_of(const struct server *s)
{
    static char base[64];
    snprintf(base, sizeof base, "http://127.0.0.1:%u", s->port);
    return base;
}

/* ---------------------------------------------------------------- tests -- */

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
    enum snapshot_status st = peer_fetch_snapshot(base_of(&s), "users", "tok-0123456789abcdef",
                                                  &EXPECT, 2000, &snap, why, sizeof why);
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
    ck_assert_ptr_nonnull(strstr(s.request, "\r\nConnection: close\r\n"));
    free(b.p);
}
END_TEST

START_TEST(test_no_token_no_header)
{
    struct server s;
    server_start(&s, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n", NULL, 0);
    struct snapshot snap;
    char why[SNAPSHOT_WHY_LEN] = "";
    enum snapshot_status st = peer_fetch_snapshot(base_of(&s), "orders", NULL, NULL, 2000, &snap,
                                                  why, sizeof why);
    server_stop(&s);
    ck_assert_int_eq(st, SNAPSHOT_IO);
    ck_assert_msg(strstr(why, "503") != NULL, "why: %s", why);
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
    enum snapshot_status st = peer_fetch_snapshot(base_of(&s), "users", "wrong-token-wrong", &EXPECT,
                                                  2000, &snap, why, sizeof why);
    server_stop(&s);
    ck_assert_int_eq(st, SNAPSHOT_IO);
    ck_assert_msg(strstr(why, "401 unauthorized") != NULL, "why: %s", why);
    ck_assert_msg(strstr(why, "/snapshot/users") != NULL, "why: %s", why);
    ck_assert_msg(strstr(why, "wrong-token") == NULL, "the token leaked: %s", why);
}
END_TEST

START_TEST(test_truncated)
{
    struct membuf b = make_snapshot();
    char head[128];
    snprintf(head, sizeof head, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n", b.len);
    struct server s;
    server_start(&s, head, b.p, b.len - 100);      /* the peer hangs up early */
    struct snapshot snap;
    char why[SNAPSHOT_WHY_LEN] = "";
    enum snapshot_status st = peer_fetch_snapshot(base_of(&s), "users", NULL, &EXPECT, 2000, &snap,
                                                  why, sizeof why);
    server_stop(&s);
    ck_assert_msg(st == SNAPSHOT_TRUNCATED, "status %s: %s", snapshot_strstatus(st), why);
    ck_assert_ptr_null(snap.filter);
    free(b.p);
}
END_TEST

/* Bodies a snapshot cannot be framed by: refused before a byte of it is read. */
static const char *const unframed[] = {
    "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n\r\nBGSNAP\r\n",
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n8\r\nBGSNAP\r\n\r\n0\r\n\r\n",
    "HTTP/1.1 200 OK\r\nContent-Length: 12x\r\n\r\nBGSNAP\r\n",
    "HTTP/1.1 200 OK\r\nContent-Length: 8\r\nContent-Length: 9\r\n\r\nBGSNAP\r\n",
    "HTTP/1.1 200 OK\r\nContent-Length: -8\r\n\r\nBGSNAP\r\n",
    "SSH-2.0-OpenSSH_9.2\r\n\r\n",
};
static const char *const unframed_why[] = {
    "no Content-Length", "chunked", "unusable Content-Length", "unusable Content-Length",
    "unusable Content-Length", "not HTTP",
};

START_TEST(test_unframed)
{
    struct server s;
    server_start(&s, unframed[_i], NULL, 0);
    struct snapshot snap;
    char why[SNAPSHOT_WHY_LEN] = "";
    enum snapshot_status st = peer_fetch_snapshot(base_of(&s), "users", NULL, &EXPECT, 2000, &snap,
                                                  why, sizeof why);
    server_stop(&s);
    ck_assert_msg(st == SNAPSHOT_IO, "status %s: %s", snapshot_strstatus(st), why);
    ck_assert_msg(strstr(why, unframed_why[_i]) != NULL, "why: %s", why);
}
END_TEST

START_TEST(test_head_too_large)
{
    size_t n = PEER_MAX_HEAD + 100;
    char *head = malloc(n + 1);
    ck_assert_ptr_nonnull(head);
    strcpy(head, "HTTP/1.1 200 OK\r\nX-Pad: ");
    size_t used = strlen(head);
    memset(head + used, 'a', n - used);
    head[n] = '\0';
    struct server s;
    server_start(&s, head, NULL, 0);
    struct snapshot snap;
    char why[SNAPSHOT_WHY_LEN] = "";
    enum snapshot_status st = peer_fetch_snapshot(base_of(&s), "users", NULL, &EXPECT, 2000, &snap,
                                                  why, sizeof why);
    server_stop(&s);
    free(head);
    ck_assert_int_eq(st, SNAPSHOT_IO);
    ck_assert_msg(strstr(why, "head is over") != NULL, "why: %s", why);
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
    enum snapshot_status st = peer_fetch_snapshot(base, "users", NULL, &EXPECT, 2000, &snap, why,
                                                  sizeof why);
    ck_assert_int_eq(st, SNAPSHOT_IO);
    ck_assert_msg(strstr(why, "cannot connect") != NULL, "why: %s", why);
}
END_TEST

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

START_TEST(test_silent_peer)
{
    struct server s;
    server_start(&s, NULL, NULL, 0);
    struct snapshot snap;
    char why[SNAPSHOT_WHY_LEN] = "";
    double t0 = now_s();
    enum snapshot_status st = peer_fetch_snapshot(base_of(&s), "users", NULL, &EXPECT, 300, &snap,
                                                  why, sizeof why);
    double took = now_s() - t0;
    server_stop(&s);
    ck_assert_int_eq(st, SNAPSHOT_IO);
    ck_assert_msg(strstr(why, "timed out") != NULL, "why: %s", why);
    ck_assert_msg(took >= 0.25 && took < 2.0, "took %.3f s for a 300 ms timeout", took);
}
END_TEST

START_TEST(test_bad_base)
{
    static const char *const bad[] = {
        "https://peer:8080", "http://", "http://peer:0", "http://peer:65536", "http://peer:80/x",
        "http://[::1", "http://[::1]x", "peer:8080", "http://peer:8o",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct snapshot snap;
        char why[SNAPSHOT_WHY_LEN] = "";
        ck_assert_int_eq(peer_fetch_snapshot(bad[i], "users", NULL, &EXPECT, 300, &snap, why,
                                             sizeof why), SNAPSHOT_IO);
        ck_assert_msg(strstr(why, "is not http://host[:port]") != NULL, "%s: %s", bad[i], why);
    }
    /*
     * Not tested here: a name that does not resolve ("cannot resolve ..."),
     * which asks the system's resolver, whose wait on a host without DNS
     * could outlast the test's timeout.
     */
}
END_TEST

/* [::1] with a port: the brackets go, the Host header keeps them. */
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
    char base[64], host[64], why[SNAPSHOT_WHY_LEN] = "";
    snprintf(base, sizeof base, "http://[::1]:%u", s.port);
    struct snapshot snap;
    enum snapshot_status st = peer_fetch_snapshot(base, "users", NULL, &EXPECT, 2000, &snap, why,
                                                  sizeof why);
    server_stop(&s);
    ck_assert_int_eq(st, SNAPSHOT_IO);
    ck_assert_msg(strstr(why, "answered 404") != NULL, "why: %s", why);
    snprintf(host, sizeof host, "\r\nHost: [::1]:%u\r\n", s.port);
    ck_assert_msg(strstr(s.request, host) != NULL, "request: %s", s.request);
}
END_TEST

Suite *check_suite(void)
{
    Suite *s = suite_create("peer");
    TCase *tc = tcase_create("fetch");
    tcase_add_test(tc, test_ok);
    tcase_add_test(tc, test_no_token_no_header);
    tcase_add_test(tc, test_unauthorized);
    tcase_add_test(tc, test_truncated);
    tcase_add_loop_test(tc, test_unframed, 0, (int)(sizeof unframed / sizeof unframed[0]));
    tcase_add_test(tc, test_head_too_large);
    tcase_add_test(tc, test_refused);
    tcase_add_test(tc, test_silent_peer);
    tcase_add_test(tc, test_bad_base);
    tcase_add_test(tc, test_ipv6);
    suite_add_tcase(s, tc);
    return s;
}
