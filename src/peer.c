/*
 * A new sidecar loads its filters from a peer's GET /snapshot instead of
 * copying whole tables from PostgreSQL.  This is the smallest HTTP/1.1
 * client that does that safely: the peer may be slow, gone or not a
 * bloomguard at all, so every wait is bounded, the head is bounded, and the
 * body is handed unbuffered to snapshot_read_fd, which trusts nothing in it
 * and allocates nothing its length does not back.  See peer.h.
 */
#include "peer.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* Bytes of an error answer's body read to find its JSON error code. */
#define ERROR_BODY_MAX 4096

static enum snapshot_status fail(char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static enum snapshot_status fail(char *why, size_t whylen, const char *fmt, ...)
{
    if (why != NULL && whylen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, whylen, fmt, ap);
        va_end(ap);
    }
    return SNAPSHOT_IO;
}

/* base split into what getaddrinfo and the Host header need. */
struct target {
    char host[256];         /* without brackets, for getaddrinfo */
    char port[6];
    char authority[264];    /* host[:port] as given, for Host */
};

/* "http://host[:port]": false on anything else (a path, https, a bad port). */
static bool parse_base(const char *base, struct target *t)
{
    if (strncmp(base, "http://", 7) != 0)
        return false;
    const char *h = base + 7, *end = h + strlen(h), *colon;
    if (end > h && end[-1] == '/')
        end--;                  /* "http://host/" is still the root */
    size_t hl;
    if (*h == '[') {            /* [IPv6]: the port follows the bracket */
        const char *rb = memchr(h, ']', (size_t)(end - h));
        if (rb == NULL)
            return false;
        hl = (size_t)(rb - h - 1);
        if (hl == 0 || hl >= sizeof t->host)
            return false;
        memcpy(t->host, h + 1, hl);
        colon = rb + 1 < end ? rb + 1 : NULL;
        if (colon != NULL && *colon != ':')
            return false;
    } else {
        colon = memchr(h, ':', (size_t)(end - h));
        hl = (size_t)((colon != NULL ? colon : end) - h);
        if (hl == 0 || hl >= sizeof t->host)
            return false;
        memcpy(t->host, h, hl);
    }
    t->host[hl] = '\0';
    if (strpbrk(t->host, "/?#@ \t\r\n") != NULL)
        return false;
    if (colon == NULL) {
        strcpy(t->port, "80");
    } else {
        size_t pl = (size_t)(end - colon - 1);
        unsigned long p = 0;
        if (pl == 0 || pl > 5)
            return false;
        for (size_t i = 0; i < pl; i++) {
            if (!isdigit((unsigned char)colon[1 + i]))
                return false;
            p = p * 10 + (unsigned long)(colon[1 + i] - '0');
        }
        if (p == 0 || p > 65535)
            return false;
        snprintf(t->port, sizeof t->port, "%lu", p);
    }
    size_t al = (size_t)(end - h);
    if (al >= sizeof t->authority)
        return false;
    memcpy(t->authority, h, al);
    t->authority[al] = '\0';
    return true;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Connect to one address within timeout_ms: non-blocking, so that an
 * address that drops SYNs costs the timeout and not the kernel's minutes.
 * Returns a blocking socket whose reads and writes each wait at most
 * timeout_ms, or -1 with errno (ETIMEDOUT for the timeout).
 */
static int connect_one(const struct addrinfo *ai, int timeout_ms)
{
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                    ai->ai_protocol);
    if (fd < 0)
        return -1;
    int e = 0;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        if (errno != EINPROGRESS) {
            e = errno;
            goto fail;
        }
        int64_t deadline = now_ms() + timeout_ms;
        for (;;) {
            int64_t left = deadline - now_ms();
            struct pollfd p = { .fd = fd, .events = POLLOUT };
            int n = left > 0 ? poll(&p, 1, (int)left) : 0;
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0) {
                e = errno;
                goto fail;
            }
            if (n == 0) {
                e = ETIMEDOUT;
                goto fail;
            }
            break;
        }
        socklen_t el = sizeof e;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) != 0)
            e = errno;
        if (e != 0)
            goto fail;
    }
    struct timeval tv = { .tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000 };
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0
        || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0
        || setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0) {
        e = errno;
        goto fail;
    }
    return fd;
fail:
    close(fd);
    errno = e;
    return -1;
}

static const char *io_error(int e, char *buf, size_t len)
{
    if (e == EAGAIN || e == EWOULDBLOCK || e == ETIMEDOUT)
        return "timed out";
    return strerror_r(e, buf, len);
}

/* Every byte of buf, or false with errno (EPIPE: the peer hung up). */
static bool send_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t w = send(fd, buf, len, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        buf += w;
        len -= (size_t)w;
    }
    return true;
}

/*
 * The response head, read one byte at a time up to the blank line: a head
 * is small, and the body must start exactly at the socket's position for
 * snapshot_read_fd.  Returns its length (NUL-terminated in buf), 0 when the
 * peer closed first, -1 with errno on a read error, -2 when it exceeds cap.
 */
static ssize_t read_head(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    while (n + 1 < cap) {
        ssize_t r = recv(fd, buf + n, 1, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            return 0;
        n++;
        /* The end: CRLF CRLF, or bare LF LF from a lax server. */
        if (buf[n - 1] == '\n'
            && ((n >= 2 && buf[n - 2] == '\n') || (n >= 3 && buf[n - 2] == '\r' && buf[n - 3] == '\n'))) {
            buf[n] = '\0';
            return (ssize_t)n;
        }
    }
    return -2;
}

/* What the head says, header names compared without case. */
struct head {
    unsigned status;
    bool has_length, bad_length, transfer_encoding, chunked;
    uint64_t length;
};

/* A decimal Content-Length value, nothing else (no sign, no list). */
static bool parse_length(const char *v, size_t n, uint64_t *out)
{
    uint64_t x = 0;
    if (n == 0 || n > 19)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)v[i]))
            return false;
        x = x * 10 + (uint64_t)(v[i] - '0');
    }
    *out = x;
    return true;
}

static bool parse_head(char *buf, struct head *h)
{
    memset(h, 0, sizeof *h);
    char *line = buf, *eol = strchr(line, '\n');
    /* "HTTP/1.x SSS reason" */
    if (eol == NULL || strncmp(line, "HTTP/1.", 7) != 0 || !isdigit((unsigned char)line[7])
        || line[8] != ' ' || !isdigit((unsigned char)line[9]) || !isdigit((unsigned char)line[10])
        || !isdigit((unsigned char)line[11]) || (line[12] != ' ' && line[12] != '\r' && line[12] != '\n'))
        return false;
    h->status = (unsigned)((line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0'));
    for (line = eol + 1; *line != '\0' && *line != '\r' && *line != '\n'; line = eol + 1) {
        eol = strchr(line, '\n');
        if (eol == NULL)
            return false;
        char *colon = memchr(line, ':', (size_t)(eol - line));
        if (colon == NULL)
            return false;
        const char *v = colon + 1, *ve = eol;
        while (v < ve && (*v == ' ' || *v == '\t'))
            v++;
        while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
            ve--;
        size_t nl = (size_t)(colon - line), vl = (size_t)(ve - v);
        if (nl == 14 && strncasecmp(line, "Content-Length", 14) == 0) {
            uint64_t x = 0;
            /* Two that disagree: which one frames the body?  Neither. */
            if (!parse_length(v, vl, &x) || (h->has_length && x != h->length))
                h->bad_length = true;
            h->has_length = true;
            h->length = x;
        } else if (nl == 17 && strncasecmp(line, "Transfer-Encoding", 17) == 0) {
            h->transfer_encoding = true;
            for (const char *p = v; p + 7 <= ve; p++)
                if (strncasecmp(p, "chunked", 7) == 0)
                    h->chunked = true;
        }
    }
    return true;
}

/*
 * A refusal's JSON error code and message, if its body is bloomguard's
 * {"error":...,"message":...}: "401 unauthorized (...)".  Reads at most
 * ERROR_BODY_MAX bytes; any trouble leaves just the status.
 */
static void describe_refusal(int fd, const struct head *h, char *out, size_t len)
{
    snprintf(out, len, "%u", h->status);
    if (!h->has_length || h->bad_length || h->length == 0 || h->length > ERROR_BODY_MAX)
        return;
    char body[ERROR_BODY_MAX];
    size_t got = 0;
    while (got < h->length) {
        ssize_t r = recv(fd, body + got, (size_t)h->length - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return;
        got += (size_t)r;
    }
    json_t *j = json_loadb(body, got, 0, NULL);
    const char *code = json_string_value(json_object_get(j, "error"));
    const char *msg = json_string_value(json_object_get(j, "message"));
    if (code != NULL)
        snprintf(out, len, "%u %.64s%s%.200s%s", h->status, code, msg ? " (" : "", msg ? msg : "",
                 msg ? ")" : "");
    json_decref(j);
}

/* name percent-encoded for a path segment (filter names need none today). */
static void encode_segment(const char *name, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)name; *p != '\0' && n + 4 < cap; p++) {
        if (isalnum(*p) || *p == '-' || *p == '_' || *p == '.' || *p == '~') {
            out[n++] = (char)*p;
        } else {
            out[n++] = '%';
            out[n++] = hex[*p >> 4];
            out[n++] = hex[*p & 15];
        }
    }
    out[n] = '\0';
}

enum snapshot_status peer_fetch_snapshot(const char *base, const char *name, const char *token,
                                         const struct snapshot_expect *expect, int timeout_ms,
                                         struct snapshot *out, char *why, size_t whylen)
{
    memset(out, 0, sizeof *out);
    if (timeout_ms < 1)
        timeout_ms = 1;         /* 0 would make SO_RCVTIMEO wait forever */
    struct target t;
    char seg[3 * 255 + 1], url[1100], ebuf[128];
    if (!parse_base(base, &t))
        return fail(why, whylen, "peer \"%.255s\" is not http://host[:port]", base);
    if (strlen(name) > 255)
        return fail(why, whylen, "filter name too long for a peer request");
    if (token != NULL && strpbrk(token, "\r\n") != NULL)
        return fail(why, whylen, "the admin token holds a line break");
    encode_segment(name, seg, sizeof seg);
    snprintf(url, sizeof url, "http://%s/snapshot/%s", t.authority, seg);

    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *ais = NULL;
    int gai = getaddrinfo(t.host, t.port, &hints, &ais);
    if (gai != 0)
        return fail(why, whylen, "%s: cannot resolve %s: %s", url, t.host,
                    gai == EAI_SYSTEM ? io_error(errno, ebuf, sizeof ebuf) : gai_strerror(gai));
    int fd = -1, e = 0;
    for (const struct addrinfo *ai = ais; ai != NULL && fd < 0; ai = ai->ai_next)
        if ((fd = connect_one(ai, timeout_ms)) < 0)
            e = errno;
    freeaddrinfo(ais);
    if (fd < 0)
        return fail(why, whylen, "%s: cannot connect: %s", url, io_error(e, ebuf, sizeof ebuf));

    enum snapshot_status st = SNAPSHOT_IO;
    char *req = NULL, *headbuf = malloc(PEER_MAX_HEAD);
    int rl = asprintf(&req,
                      "GET /snapshot/%s HTTP/1.1\r\nHost: %s\r\nUser-Agent: bloomguard\r\n"
                      "Accept: application/octet-stream\r\n%s%s%sConnection: close\r\n\r\n",
                      seg, t.authority, token ? "Authorization: Bearer " : "", token ? token : "",
                      token ? "\r\n" : "");
    if (rl < 0)
        req = NULL;             /* asprintf leaves it undefined */
    if (req == NULL || headbuf == NULL) {
        st = fail(why, whylen, "%s: out of memory", url);
        goto done;
    }
    if (!send_all(fd, req, (size_t)rl)) {
        st = fail(why, whylen, "%s: cannot send the request: %s", url,
                  io_error(errno, ebuf, sizeof ebuf));
        goto done;
    }
    ssize_t hl = read_head(fd, headbuf, PEER_MAX_HEAD);
    struct head h;
    if (hl == -1) {
        st = fail(why, whylen, "%s: no answer: %s", url, io_error(errno, ebuf, sizeof ebuf));
    } else if (hl == 0) {
        st = fail(why, whylen, "%s: the peer closed the connection without an answer", url);
    } else if (hl == -2) {
        st = fail(why, whylen, "%s: the answer's head is over %d bytes", url, PEER_MAX_HEAD);
    } else if (!parse_head(headbuf, &h)) {
        st = fail(why, whylen, "%s: the answer is not HTTP/1.x", url);
    } else if (h.status != 200) {
        char d[300];
        describe_refusal(fd, &h, d, sizeof d);
        st = fail(why, whylen, "%s: the peer answered %s", url, d);
    } else if (h.transfer_encoding) {
        st = fail(why, whylen, "%s: the answer has Transfer-Encoding%s, not a Content-Length",
                  url, h.chunked ? " chunked" : "");
    } else if (!h.has_length || h.bad_length) {
        st = fail(why, whylen, "%s: the answer has %s Content-Length", url,
                  h.has_length ? "an unusable" : "no");
    } else {
        char inner[SNAPSHOT_WHY_LEN];
        inner[0] = '\0';
        errno = 0;
        st = snapshot_read_fd(fd, h.length, expect, out, inner, sizeof inner);
        e = errno;
        if (st == SNAPSHOT_IO && (e == EAGAIN || e == EWOULDBLOCK))
            fail(why, whylen, "%s: timed out reading the snapshot", url);
        else if (st != SNAPSHOT_OK && why != NULL && whylen > 0)
            snprintf(why, whylen, "%s: %s", url, inner);
    }
done:
    free(req);
    free(headbuf);
    close(fd);
    return st;
}
