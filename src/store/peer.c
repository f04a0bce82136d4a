/*
 * A new sidecar loads its filters from a peer's GET /snapshot instead of
 * copying whole tables from PostgreSQL.  This is the smallest HTTP/1.1
 * client that does that safely: the peer may be slow, gone or not a
 * bloomguard at all, so every wait is bounded, so is the whole fetch (by
 * the size it announces), a stop ends it at once, the head is bounded, and
 * the body is handed unbuffered to snapshot_read_fd, which trusts nothing
 * in it and allocates nothing its length does not back.  See peer.h.
 */
#include "peer.h"

#include "decimal.h"
#include "monoclock.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
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
        uint64_t p = 0;
        if (decimal_parse_u64n(colon + 1, (size_t)(end - colon - 1), &p) != DECIMAL_OK || p == 0
            || p > 65535)
            return false;
        snprintf(t->port, sizeof t->port, "%u", (unsigned)p);
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

/* A CLOCK_MONOTONIC millisecond as pthread_cond_timedwait's absolute time. */
static struct timespec mono_ts(int64_t ms)
{
    return (struct timespec){ .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };
}

/* One fetch's bounds, in force. */
struct fetch {
    const char *url;
    atomic_bool *stop;
    int timeout_ms, setup_ms;
    uint64_t min_rate;
    int64_t start, deadline;    /* now_ms() times */
    bool has_length;            /* the deadline counts the body too */
    uint64_t length;
};

static bool stopping(const struct fetch *fx)
{
    return fx->stop != NULL && atomic_load(fx->stop);
}

/* The deadline once the head says how long the body is (see peer.h). */
static int64_t body_deadline(const struct fetch *fx, uint64_t length)
{
    /* In double: a hostile length must not overflow; ten years is "never" enough. */
    double ms = (double)fx->setup_ms + (double)length * 1000.0 / (double)fx->min_rate + 1.0;
    return ms > 3.2e11 ? fx->start + (int64_t)3.2e11 : fx->start + (int64_t)ms;
}

/*
 * Whether the fetch must end now, and why: the stop flag or the deadline.
 * Asked after every failed or cut-short wait, so that the reason given is
 * the bound that ended it, not the error it left behind.
 */
static bool gave_up(const struct fetch *fx, char *why, size_t whylen)
{
    if (stopping(fx)) {
        snapshot_why(why, whylen, SNAPSHOT_IO, "%s: interrupted: stop requested", fx->url);
        return true;
    }
    int64_t now = now_ms();
    if (now < fx->deadline)
        return false;
    double took = (double)(now - fx->start) / 1000.0;
    if (!fx->has_length)
        snapshot_why(why, whylen, SNAPSHOT_IO, "%s: too slow: no answer within %.1f s (the allowance for the name "
             "lookup, the connection and the answer's head)", fx->url, took);
    else
        snapshot_why(why, whylen, SNAPSHOT_IO, "%s: too slow: the %llu-byte snapshot was not in after %.1f s "
             "(%.1f s to connect, then at least %.0f KiB/s)", fx->url,
             (unsigned long long)fx->length, took, (double)fx->setup_ms / 1000.0,
             (double)fx->min_rate / 1024.0);
    return true;
}

/* -------------------------------------------------------- the lookup -- */

/*
 * A name lookup on its own thread, shared with the fetch that waits for it:
 * whichever lets go last frees it, so a fetch that gives up leaves the
 * thread to finish its getaddrinfo and clean up alone.
 */
struct lookup {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned refs;              /* under mu */
    bool done;                  /* under mu; then gai, err and ais are set */
    peer_resolve_fn resolve;
    char host[256], port[6];
    int gai, err;
    struct addrinfo *ais;       /* taken by the fetch (set NULL), or freed by the last one */
};

static void lookup_unref(struct lookup *l)
{
    pthread_mutex_lock(&l->mu);
    bool last = --l->refs == 0;
    pthread_mutex_unlock(&l->mu);
    if (!last)
        return;
    if (l->ais != NULL)
        freeaddrinfo(l->ais);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    free(l);
}

static void *lookup_main(void *arg)
{
    struct lookup *l = arg;
    const struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
    struct addrinfo *ais = NULL;
    errno = 0;
    int gai = l->resolve(l->host, l->port, &hints, &ais);
    int e = errno;
    pthread_mutex_lock(&l->mu);
    l->gai = gai;
    l->err = e;
    l->ais = gai == 0 ? ais : NULL;
    l->done = true;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    lookup_unref(l);
    return NULL;
}

static enum snapshot_status lookup_fail(const struct fetch *fx, const struct target *t, int gai,
                                        int e, char *why, size_t whylen)
{
    char ebuf[128];
    return snapshot_why(why, whylen, SNAPSHOT_IO, "%s: cannot resolve %s: %s", fx->url, t->host,
                gai == EAI_SYSTEM ? strerror_r(e, ebuf, sizeof ebuf) : gai_strerror(gai));
}

/*
 * t's addresses into *ais (freeaddrinfo), within the fetch's bounds.  An
 * address literal needs no resolver and no thread.
 */
static enum snapshot_status resolve(struct fetch *fx, const struct target *t,
                                    peer_resolve_fn fn, struct addrinfo **ais, char *why,
                                    size_t whylen)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_NUMERICHOST };
    *ais = NULL;
    int gai = getaddrinfo(t->host, t->port, &hints, ais);
    if (gai == 0)
        return SNAPSHOT_OK;
    if (gai != EAI_NONAME)
        return lookup_fail(fx, t, gai, errno, why, whylen);

    struct lookup *l = calloc(1, sizeof *l);
    if (l == NULL)
        return snapshot_why(why, whylen, SNAPSHOT_IO, "%s: out of memory", fx->url);
    pthread_mutex_init(&l->mu, NULL);
    monoclock_cond_init(&l->cv);
    l->refs = 2;
    l->resolve = fn != NULL ? fn : getaddrinfo;
    snprintf(l->host, sizeof l->host, "%s", t->host);
    snprintf(l->port, sizeof l->port, "%s", t->port);
    pthread_attr_t attr;
    pthread_t th;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int e = pthread_create(&th, &attr, lookup_main, l);
    pthread_attr_destroy(&attr);
    if (e != 0) {
        l->refs = 1;
        lookup_unref(l);
        char ebuf[128];
        return snapshot_why(why, whylen, SNAPSHOT_IO, "%s: cannot start the name lookup's thread: %s", fx->url,
                    strerror_r(e, ebuf, sizeof ebuf));
    }
    enum snapshot_status st = SNAPSHOT_IO;
    pthread_mutex_lock(&l->mu);
    while (!l->done && !gave_up(fx, why, whylen)) {
        int64_t wake = now_ms() + PEER_POLL_MS;
        struct timespec ts = mono_ts(wake < fx->deadline ? wake : fx->deadline);
        pthread_cond_timedwait(&l->cv, &l->mu, &ts);
    }
    if (l->done) {
        if (l->gai == 0) {
            *ais = l->ais;
            l->ais = NULL;
            st = SNAPSHOT_OK;
        } else {
            st = lookup_fail(fx, t, l->gai, l->err, why, whylen);
        }
    }
    pthread_mutex_unlock(&l->mu);
    lookup_unref(l);
    return st;
}

/* ---------------------------------------------------- the connection -- */

/*
 * Connect to one address within the per-wait timeout and the fetch's
 * bounds: non-blocking, so that an address that drops SYNs costs the
 * timeout and not the kernel's minutes, and a stop is seen within
 * PEER_POLL_MS.  Returns a blocking socket whose reads and writes each
 * wait at most timeout_ms, or -1 with errno (ETIMEDOUT for the timeout,
 * ECANCELED when the fetch's stop or deadline came first).
 */
static int connect_one(const struct addrinfo *ai, const struct fetch *fx)
{
    int timeout_ms = fx->timeout_ms;
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
            if (stopping(fx) || now_ms() >= fx->deadline) {
                e = ECANCELED;
                goto fail;
            }
            int64_t left = deadline - now_ms();
            struct pollfd p = { .fd = fd, .events = POLLOUT };
            int n = left > 0 ? poll(&p, 1, left < PEER_POLL_MS ? (int)left : PEER_POLL_MS) : 0;
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0) {
                e = errno;
                goto fail;
            }
            if (n == 0 && left <= PEER_POLL_MS) {
                e = ETIMEDOUT;
                goto fail;
            }
            if (n > 0)
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

/*
 * The watchdog of a connection: a thread that looks at the stop flag and
 * the deadline every PEER_POLL_MS and, when either has come, shuts the
 * socket down, which ends any read or write blocked on it (a read then
 * sees the end of the input).  The reads themselves stay plain blocking
 * reads, snapshot_read_fd's among them, which knows nothing of deadlines.
 */
struct watch {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int fd;
    const struct fetch *fx;     /* its deadline and length change under mu */
    bool done;                  /* under mu: the fetch is over, the socket about to close */
    bool fired;                 /* under mu: the socket was shut down */
};

static void *watch_main(void *arg)
{
    struct watch *w = arg;
    pthread_mutex_lock(&w->mu);
    while (!w->done) {
        int64_t now = now_ms();
        if (stopping(w->fx) || now >= w->fx->deadline) {
            /* Under mu, and done is set under mu before the close: never another file's fd. */
            shutdown(w->fd, SHUT_RDWR);
            w->fired = true;
            break;
        }
        int64_t wake = now + PEER_POLL_MS;
        struct timespec ts = mono_ts(wake < w->fx->deadline ? wake : w->fx->deadline);
        pthread_cond_timedwait(&w->cv, &w->mu, &ts);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

static int watch_start(struct watch *w, int fd, const struct fetch *fx)
{
    memset(w, 0, sizeof *w);
    w->fd = fd;
    w->fx = fx;
    pthread_mutex_init(&w->mu, NULL);
    monoclock_cond_init(&w->cv);
    int e = pthread_create(&w->thread, NULL, watch_main, w);
    if (e != 0) {
        pthread_mutex_destroy(&w->mu);
        pthread_cond_destroy(&w->cv);
    }
    return e;
}

/* Before the socket closes.  Returns whether the watchdog shut it down. */
static bool watch_end(struct watch *w)
{
    pthread_mutex_lock(&w->mu);
    w->done = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    return w->fired;
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
            if (decimal_parse_u64n(v, vl, &x) != DECIMAL_OK || (h->has_length && x != h->length))
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
                                         const struct snapshot_expect *expect,
                                         const struct peer_limits *lim, struct snapshot *out,
                                         char *why, size_t whylen)
{
    static const struct peer_limits defaults = { 0 };
    memset(out, 0, sizeof *out);
    if (lim == NULL)
        lim = &defaults;
    struct target t;
    char seg[3 * 255 + 1], url[1100], ebuf[128];
    if (!parse_base(base, &t))
        return snapshot_why(why, whylen, SNAPSHOT_IO, "peer \"%.255s\" is not http://host[:port]", base);
    if (strlen(name) > 255)
        return snapshot_why(why, whylen, SNAPSHOT_IO, "filter name too long for a peer request");
    if (token != NULL && strpbrk(token, "\r\n") != NULL)
        return snapshot_why(why, whylen, SNAPSHOT_IO, "the admin token holds a line break");
    encode_segment(name, seg, sizeof seg);
    snprintf(url, sizeof url, "http://%s/snapshot/%s", t.authority, seg);

    struct fetch fx = {
        .url = url, .stop = lim->stop,
        /* At least 1: 0 would make SO_RCVTIMEO wait forever. */
        .timeout_ms = lim->timeout_ms > 0 ? lim->timeout_ms : PEER_TIMEOUT_MS,
        .setup_ms = lim->setup_ms > 0 ? lim->setup_ms : PEER_SETUP_MS,
        .min_rate = lim->min_rate > 0 ? lim->min_rate : PEER_MIN_RATE,
        .start = now_ms(),
    };
    fx.deadline = fx.start + fx.setup_ms;

    struct addrinfo *ais = NULL;
    enum snapshot_status st = resolve(&fx, &t, lim->resolve, &ais, why, whylen);
    if (st != SNAPSHOT_OK)
        return st;
    int fd = -1, e = 0;
    for (const struct addrinfo *ai = ais; ai != NULL && fd < 0; ai = ai->ai_next)
        if ((fd = connect_one(ai, &fx)) < 0 && (e = errno) == ECANCELED)
            break;
    freeaddrinfo(ais);
    if (fd < 0) {
        if (!gave_up(&fx, why, whylen))
            snapshot_why(why, whylen, SNAPSHOT_IO, "%s: cannot connect: %s", url, io_error(e, ebuf, sizeof ebuf));
        return SNAPSHOT_IO;
    }

    struct watch w;
    e = watch_start(&w, fd, &fx);
    if (e != 0) {
        close(fd);
        return snapshot_why(why, whylen, SNAPSHOT_IO, "%s: cannot start the connection's watchdog: %s", url,
                    strerror_r(e, ebuf, sizeof ebuf));
    }
    st = SNAPSHOT_IO;
    char *req = NULL, *headbuf = malloc(PEER_MAX_HEAD);
    int rl = asprintf(&req,
                      "GET /snapshot/%s HTTP/1.1\r\nHost: %s\r\nUser-Agent: bloomguard\r\n"
                      "Accept: application/octet-stream\r\n%s%s%sConnection: close\r\n\r\n",
                      seg, t.authority, token ? "Authorization: Bearer " : "", token ? token : "",
                      token ? "\r\n" : "");
    if (rl < 0)
        req = NULL;             /* asprintf leaves it undefined */
    if (req == NULL || headbuf == NULL) {
        st = snapshot_why(why, whylen, SNAPSHOT_IO, "%s: out of memory", url);
        goto done;
    }
    if (!send_all(fd, req, (size_t)rl)) {
        st = snapshot_why(why, whylen, SNAPSHOT_IO, "%s: cannot send the request: %s", url,
                  io_error(errno, ebuf, sizeof ebuf));
        goto done;
    }
    ssize_t hl = read_head(fd, headbuf, PEER_MAX_HEAD);
    struct head h;
    if (hl == -1) {
        st = snapshot_why(why, whylen, SNAPSHOT_IO, "%s: no answer: %s", url, io_error(errno, ebuf, sizeof ebuf));
    } else if (hl == 0) {
        st = snapshot_why(why, whylen, SNAPSHOT_IO, "%s: the peer closed the connection without an answer", url);
    } else if (hl == -2) {
        st = snapshot_why(why, whylen, SNAPSHOT_IO, "%s: the answer's head is over %d bytes", url, PEER_MAX_HEAD);
    } else if (!parse_head(headbuf, &h)) {
        st = snapshot_why(why, whylen, SNAPSHOT_IO, "%s: the answer is not HTTP/1.x", url);
    } else if (h.status != 200) {
        char d[300];
        describe_refusal(fd, &h, d, sizeof d);
        st = snapshot_why(why, whylen, SNAPSHOT_IO, "%s: the peer answered %s", url, d);
    } else if (h.transfer_encoding) {
        st = snapshot_why(why, whylen, SNAPSHOT_IO, "%s: the answer has Transfer-Encoding%s, not a Content-Length",
                  url, h.chunked ? " chunked" : "");
    } else if (!h.has_length || h.bad_length) {
        st = snapshot_why(why, whylen, SNAPSHOT_IO, "%s: the answer has %s Content-Length", url,
                  h.has_length ? "an unusable" : "no");
    } else {
        /* Now the body's size is known, so is the whole fetch's deadline. */
        pthread_mutex_lock(&w.mu);
        fx.has_length = true;
        fx.length = h.length;
        fx.deadline = body_deadline(&fx, h.length);
        pthread_mutex_unlock(&w.mu);
        char inner[SNAPSHOT_WHY_LEN];
        inner[0] = '\0';
        errno = 0;
        st = snapshot_read_fd(fd, h.length, expect, out, inner, sizeof inner);
        e = errno;
        if (st == SNAPSHOT_IO && (e == EAGAIN || e == EWOULDBLOCK))
            snapshot_why(why, whylen, SNAPSHOT_IO, "%s: timed out reading the snapshot", url);
        else if (st != SNAPSHOT_OK && why != NULL && whylen > 0)
            snprintf(why, whylen, "%s: %s", url, inner);
    }
done:
    /* Cut short by the watchdog: what the reads saw (an early end) is not the reason. */
    if (watch_end(&w) && st != SNAPSHOT_OK) {
        snapshot_release(out);
        memset(out, 0, sizeof *out);
        st = SNAPSHOT_IO;
        if (!gave_up(&fx, why, whylen))
            snapshot_why(why, whylen, SNAPSHOT_IO, "%s: cut short", url);    /* not reached: it fired for a reason */
    }
    free(req);
    free(headbuf);
    close(fd);
    return st;
}
