/*
 * Unit tests of the fast path's bytes (src/http/http_wire.c): the heads it
 * takes are exactly the plain HTTP/1.1 GETs without a body or a header
 * after which libmicrohttpd would answer otherwise; every other head, and
 * every byte outside the classes it reads, passes to libmicrohttpd; an
 * unfinished head waits for more up to its limit; and its answers' heads
 * are libmicrohttpd's, byte for byte.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "check_main.h"
#include "http_int.h"

static enum wire_head head(const char *s, size_t *len, char *target)
{
    const char *t = NULL;
    size_t tl = 0;
    http_wire_init();
    enum wire_head k = http_wire_head(s, strlen(s), len, &t, &tl);
    if (k == WIRE_TAKE) {
        memcpy(target, t, tl);
        target[tl] = '\0';
    }
    return k;
}

START_TEST(test_takes_plain_gets)
{
    size_t len;
    char t[256];
    const char *r = "GET /exists/42 HTTP/1.1\r\nHost: x\r\nUser-Agent: a b\r\n\r\nGET /next";
    ck_assert_int_eq(head(r, &len, t), WIRE_TAKE);
    ck_assert_str_eq(t, "/exists/42");
    ck_assert_uint_eq(len, strlen(r) - strlen("GET /next"));
    /* No header at all; keep-alive said aloud; the filter named; escapes left to idcodec. */
    ck_assert_int_eq(head("GET /exists/1 HTTP/1.1\r\n\r\n", &len, t), WIRE_TAKE);
    ck_assert_int_eq(head("GET /exists/1 HTTP/1.1\r\nconnection:  Keep-Alive \r\n\r\n", &len, t),
                     WIRE_TAKE);
    ck_assert_int_eq(head("GET /exists/users/a%2Fb HTTP/1.1\r\n\r\n", &len, t), WIRE_TAKE);
    ck_assert_str_eq(t, "/exists/users/a%2Fb");
    ck_assert_int_eq(head("GET /exists/x~!$&'()*+,;=:@-._ HTTP/1.1\r\n\r\n", &len, t), WIRE_TAKE);
}
END_TEST

/* Everything else is libmicrohttpd's: each of these would be answered by the fast path if it took it. */
START_TEST(test_passes_the_rest)
{
    static const char *const pass[] = {
        "POST /exists/1 HTTP/1.1\r\n\r\n",
        "HEAD /exists/1 HTTP/1.1\r\n\r\n",
        "get /exists/1 HTTP/1.1\r\n\r\n",
        "GET /exists/1 HTTP/1.0\r\n\r\n",
        "GET /exists/1 HTTP/1.1 \r\n\r\n",
        "GET  /exists/1 HTTP/1.1\r\n\r\n",
        "GET /exists/1?x=1 HTTP/1.1\r\n\r\n",
        "GET /exists/1#f HTTP/1.1\r\n\r\n",
        "GET http://h/exists/1 HTTP/1.1\r\n\r\n",
        "GET /exists/\"1 HTTP/1.1\r\n\r\n",
        "GET /exists/\xc3\xa9 HTTP/1.1\r\n\r\n",
        "GET /exists/1 HTTP/1.1\n\n",
        "GET /exists/1 HTTP/1.1\n",
        "GET /exists/1 HTTP/1.1\r\nHost: x\n\r\n",
        "GET /exists/1 HTTP/1.1\r\nHost: x\r\n\n",
        "GET /exists/1 HTTP/1.1\r\nHost: x\r\r\n\r\n",
        "GET /exists/1 HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
        "GET /exists/1 HTTP/1.1\r\ncontent-length: 5\r\n\r\nhello",
        "GET /exists/1 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
        "GET /exists/1 HTTP/1.1\r\nConnection: close\r\n\r\n",
        "GET /exists/1 HTTP/1.1\r\nConnection: keep-alive, Upgrade\r\n\r\n",
        "GET /exists/1 HTTP/1.1\r\nExpect: 100-continue\r\n\r\n",
        "GET /exists/1 HTTP/1.1\r\nUpgrade: websocket\r\n\r\n",
        "GET /exists/1 HTTP/1.1\r\nTE: trailers\r\n\r\n",
        "GET /exists/1 HTTP/1.1\r\nTrailer: x\r\n\r\n",
        "GET /exists/1 HTTP/1.1\r\nHost : x\r\n\r\n",
        "GET /exists/1 HTTP/1.1\r\n Host: x\r\n\r\n",
        "GET /exists/1 HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n",
        "GET /exists/1 HTTP/1.1\r\nX: a\x01" "b\r\n\r\n",
        "GET /exists/1 HTTP/1.1\r\nX: \xff\r\n\r\n",
        "GET /exists/1 HTTP/1.1\r\nX: a\rb\r\n\r\n",
        "GET /exists/1 HTTP/1.1\r\n: x\r\n\r\n",
        "GET /exists/1 HTTP/1.1\r\nX\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof pass / sizeof pass[0]; i++) {
        size_t len;
        char t[256];
        ck_assert_msg(head(pass[i], &len, t) == WIRE_PASS, "taken: %s", pass[i]);
    }
    /* A NUL in the target (strlen would stop there: give the length). */
    static const char nul[] = "GET /exists/a\0b HTTP/1.1\r\n\r\n";
    size_t len, tl;
    const char *t;
    ck_assert_int_eq(http_wire_head(nul, sizeof nul - 1, &len, &t, &tl), WIRE_PASS);
}
END_TEST

START_TEST(test_waits_for_the_rest_of_a_head)
{
    size_t len;
    char t[256];
    ck_assert_int_eq(head("GET /exists/1 HTTP/1.1\r\nHost: x\r\n", &len, t), WIRE_MORE);
    ck_assert_int_eq(head("GET /exi", &len, t), WIRE_MORE);
    ck_assert_int_eq(head("", &len, t), WIRE_MORE);
    /* A CR last may be a CRLF's first half; a lone CR before the end is libmicrohttpd's at once. */
    ck_assert_int_eq(head("GET /exists/1 HTTP/1.1\r", &len, t), WIRE_MORE);
    ck_assert_int_eq(head("GET /exists/1 HTTP/1.1\r\nX: a\rb", &len, t), WIRE_PASS);
    /* Up to its limit: then libmicrohttpd says what it says (431). */
    static char big[WIRE_HEAD_MAX + 64];
    snprintf(big, sizeof big, "GET /exists/1 HTTP/1.1\r\nX: ");
    memset(big + strlen(big), 'a', sizeof big - strlen(big) - 1);
    ck_assert_int_eq(http_wire_head(big, WIRE_HEAD_MAX - 1, &len, &(const char *){ NULL },
                                    &(size_t){ 0 }), WIRE_MORE);
    ck_assert_int_eq(http_wire_head(big, WIRE_HEAD_MAX, &len, &(const char *){ NULL },
                                    &(size_t){ 0 }), WIRE_PASS);
}
END_TEST

/* libmicrohttpd 0.9.75's answer to GET /exists/300000 (absent), head and body, as it sends it. */
START_TEST(test_answer_head_is_mhds)
{
    struct wire_date d = { .at = (time_t)-1 };
    char buf[512];
    static const char body[] = "{\"id\":\"300000\",\"exists\":false}";
    char *end = buf + 256;
    memcpy(end, body, sizeof body);
    char *start = http_wire_answer_head(&d, end, 256, 404, sizeof body - 1);
    ck_assert_ptr_nonnull(start);
    char date[64];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    char want[512];
    snprintf(want, sizeof want, "HTTP/1.1 404 Not Found\r\nDate: %s\r\nContent-Type: "
             "application/json\r\nContent-Length: 30\r\n\r\n%s", date, body);
    /* The second may have turned between the two clocks: then once more. */
    if (strcmp(start, want) != 0) {
        start = http_wire_answer_head(&d, end, 256, 404, sizeof body - 1);
        now = time(NULL);
        gmtime_r(&now, &tm);
        strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
        snprintf(want, sizeof want, "HTTP/1.1 404 Not Found\r\nDate: %s\r\nContent-Type: "
                 "application/json\r\nContent-Length: 30\r\n\r\n%s", date, body);
    }
    ck_assert_str_eq(start, want);
    start = http_wire_answer_head(&d, end, 256, 200, 0);
    ck_assert_int_eq(strncmp(start, "HTTP/1.1 200 OK\r\nDate: ", 23), 0);
    ck_assert_int_eq(strncmp(end - 21, "Content-Length: 0\r\n\r\n", 21), 0);
    /* Room too small: nothing written before end. */
    ck_assert_ptr_null(http_wire_answer_head(&d, end, 64, 404, 30));
}
END_TEST

/*
 * The heads made once a second per status (slot 0 for 200, slot 1 for any
 * other): each answer still has its own status line and length, whatever
 * came before it.
 */
START_TEST(test_answer_head_per_status)
{
    struct wire_date d = { .at = (time_t)-1 };
    char buf[512];
    char *end = buf + 256;
    static const struct { unsigned status; const char *line; size_t blen; const char *len; } seq[] = {
        { 404, "HTTP/1.1 404 Not Found\r\n", 30, "Content-Length: 30\r\n\r\n" },
        { 200, "HTTP/1.1 200 OK\r\n", 7, "Content-Length: 7\r\n\r\n" },
        { 400, "HTTP/1.1 400 Bad Request\r\n", 1234, "Content-Length: 1234\r\n\r\n" },
        { 404, "HTTP/1.1 404 Not Found\r\n", 0, "Content-Length: 0\r\n\r\n" },
        { 200, "HTTP/1.1 200 OK\r\n", 29, "Content-Length: 29\r\n\r\n" },
        { 404, "HTTP/1.1 404 Not Found\r\n", 31, "Content-Length: 31\r\n\r\n" },
    };
    for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++) {
        char *start = http_wire_answer_head(&d, end, 256, seq[i].status, seq[i].blen);
        ck_assert_ptr_nonnull(start);
        ck_assert_int_eq(strncmp(start, seq[i].line, strlen(seq[i].line)), 0);
        size_t ll = strlen(seq[i].len);
        ck_assert_int_eq(strncmp(end - ll, seq[i].len, ll), 0);
        ck_assert_ptr_nonnull(strstr(start, "\r\nDate: "));
        ck_assert_ptr_nonnull(strstr(start, "GMT\r\nContent-Type: application/json\r\nContent-Length: "));
    }
}
END_TEST

/* A taken head's header value (the fast path's replication right): the first, trimmed. */
START_TEST(test_header_value)
{
    const char *r = "GET /replicate/default/horizon HTTP/1.1\r\nHost: x\r\n"
                    "authorization: \tBearer abc \r\nAuthorization: Bearer second\r\n\r\n";
    size_t len;
    char t[256], v[64];
    ck_assert_int_eq(head(r, &len, t), WIRE_TAKE);
    ck_assert(http_wire_header(r, len, "Authorization", v, sizeof v));
    ck_assert_str_eq(v, "Bearer abc");
    ck_assert(!http_wire_header(r, len, "Cookie", v, sizeof v));
    ck_assert(!http_wire_header(r, len, "Authorization", v, 10));     /* does not fit */
    /* A name that only begins like it, and the request line, are not it. */
    const char *q = "GET /Authorization: x HTTP/1.1\r\nAuthorizations: no\r\n\r\n";
    ck_assert(!http_wire_header(q, strlen(q), "Authorization", v, sizeof v));
    /* Nothing past the head's end. */
    const char *e = "GET / HTTP/1.1\r\n\r\nAuthorization: late\r\n";
    ck_assert(!http_wire_header(e, strlen("GET / HTTP/1.1\r\n\r\n"), "Authorization", v,
                                sizeof v));
}
END_TEST

/*
 * POSTs (http_wire_post): one Content-Length of digits, its value the body's
 * length; anything that frames the body otherwise, or that MHD answers
 * otherwise, passes.
 */
START_TEST(test_posts)
{
    const char *t = NULL;
    size_t len, tl, bl;
    http_wire_init();
    const char *r = "POST /ids HTTP/1.1\r\nContent-Type: application/json\r\n"
                    "content-length: 12\r\n\r\n{\"id\":\"p-1\"}";
    ck_assert_int_eq(http_wire_post(r, strlen(r), &len, &t, &tl, &bl), WIRE_TAKE);
    ck_assert_uint_eq(len, strlen(r) - 12);
    ck_assert_uint_eq(bl, 12);
    ck_assert_uint_eq(tl, 4);
    ck_assert(strncmp(t, "/ids", 4) == 0);
    /* The head alone is enough: the body is the caller's to find. */
    ck_assert_int_eq(http_wire_post(r, len, &len, &t, &tl, &bl), WIRE_TAKE);
    ck_assert_int_eq(http_wire_post(r, 20, &len, &t, &tl, &bl), WIRE_MORE);
    static const char *const pass[] = {
        "POST /ids HTTP/1.1\r\n\r\n",                                      /* no length */
        "POST /ids HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
        "POST /ids HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
        "POST /ids HTTP/1.1\r\nContent-Length: 1\r\nExpect: 100-continue\r\n\r\n",
        "POST /ids HTTP/1.1\r\nContent-Length: +1\r\n\r\n",
        "POST /ids HTTP/1.1\r\nContent-Length: 1 2\r\n\r\n",
        "POST /ids HTTP/1.1\r\nContent-Length: 1234567890\r\n\r\n",     /* past 9 digits */
        "POST /ids HTTP/1.1\r\nContent-Length: 1\r\nConnection: close\r\n\r\n",
        "POST /ids HTTP/1.0\r\nContent-Length: 1\r\n\r\n",
        "GET /ids HTTP/1.1\r\nContent-Length: 1\r\n\r\n",
        "PUT /ids HTTP/1.1\r\nContent-Length: 1\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof pass / sizeof pass[0]; i++)
        ck_assert_msg(http_wire_post(pass[i], strlen(pass[i]), &len, &t, &tl, &bl) == WIRE_PASS,
                      "took %s", pass[i]);
    /* And a GET's reader takes no POST, nor a GET with a length. */
    ck_assert_int_eq(http_wire_head(r, strlen(r), &len, &t, &tl), WIRE_PASS);
}
END_TEST

CHECK_SUITE("wire",
    CHECK_CASE("core"),
    CHECK_TEST(test_takes_plain_gets),
    CHECK_TEST(test_passes_the_rest),
    CHECK_TEST(test_waits_for_the_rest_of_a_head),
    CHECK_TEST(test_answer_head_is_mhds),
    CHECK_TEST(test_answer_head_per_status),
    CHECK_TEST(test_header_value),
    CHECK_TEST(test_posts),
)
