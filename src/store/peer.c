/*
 * A new sidecar loads its filters from a peer's GET /snapshot instead of
 * copying whole tables from PostgreSQL.  httpc.c does the HTTP and the TLS;
 * this file bridges its pushed body to the snapshot reader, which pulls
 * from a descriptor: a socket pair, the reader on a thread of its own, so
 * that the body is never buffered whole and snapshot_read_fd, which trusts
 * nothing in it and allocates nothing its length does not back, stays the
 * one reader of files and peers alike.  See peer.h.
 */
#include "peer.h"

#include "httpc.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The reader's side: started by the head callback once the length is known. */
struct bridge {
    int fd[2];                  /* [0] the reader's end, [1] the body's */
    const struct snapshot_expect *expect;
    uint64_t length;
    bool started;
    pthread_t thread;
    enum snapshot_status st;    /* the reader's verdict, once joined */
    struct snapshot snap;
    char why[SNAPSHOT_WHY_LEN];
};

static void *reader_main(void *arg)
{
    struct bridge *b = arg;
    b->why[0] = '\0';
    b->st = snapshot_read_fd(b->fd[0], b->length, b->expect, &b->snap, b->why, sizeof b->why);
    /* Done, whatever the verdict: the body's writes now fail, and the transfer ends. */
    shutdown(b->fd[0], SHUT_RDWR);
    return NULL;
}

static bool on_head(void *arg, const struct httpc_head *h, char *why, size_t whylen)
{
    struct bridge *b = arg;
    if (h->chunked || !h->has_length) {
        snprintf(why, whylen, "the answer has %s, not a Content-Length",
                 h->chunked ? "Transfer-Encoding chunked" : "no Content-Length");
        return false;
    }
    b->length = h->length;
    if (pthread_create(&b->thread, NULL, reader_main, b) != 0) {
        snprintf(why, whylen, "cannot start the snapshot reader's thread");
        return false;
    }
    b->started = true;
    return true;
}

/* Every byte to the reader; false once it has stopped reading. */
static bool on_body(void *arg, const void *buf, size_t len)
{
    struct bridge *b = arg;
    const char *p = buf;
    while (len > 0) {
        ssize_t w = send(b->fd[1], p, len, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        len -= (size_t)w;
    }
    return true;
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
                                         const char *ca_file,
                                         const struct snapshot_expect *expect,
                                         const struct peer_limits *lim, struct snapshot *out,
                                         char *why, size_t whylen)
{
    static const struct peer_limits defaults = { 0 };
    char seg[3 * 255 + 1], url[1400], hwhy[SNAPSHOT_WHY_LEN];
    memset(out, 0, sizeof *out);
    if (lim == NULL)
        lim = &defaults;
    size_t bl = strlen(base);
    if (strlen(name) > 255 || bl > 512)
        return snapshot_why(why, whylen, SNAPSHOT_IO, "peer URL or filter name too long");
    /* "http://host/" is still the root: the path is ours to add. */
    while (bl > 0 && base[bl - 1] == '/')
        bl--;
    encode_segment(name, seg, sizeof seg);
    snprintf(url, sizeof url, "%.*s/snapshot/%s", (int)bl, base, seg);

    struct bridge *b = calloc(1, sizeof *b);
    struct httpc *c = httpc_new();
    if (b == NULL || c == NULL) {
        free(b);
        httpc_free(c);
        return snapshot_why(why, whylen, SNAPSHOT_NOMEM, "%s: out of memory", url);
    }
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, b->fd) != 0) {
        int e = errno;
        free(b);
        httpc_free(c);
        return snapshot_why(why, whylen, SNAPSHOT_IO, "%s: socketpair: %s", url, strerror(e));
    }
    b->expect = expect;
    const struct httpc_opts o = {
        .ca_file = ca_file, .token = token, .accept = "application/octet-stream",
        .what = "snapshot",
        .connect_ms = lim->timeout_ms > 0 ? lim->timeout_ms : PEER_TIMEOUT_MS,
        .stall_ms = lim->timeout_ms > 0 ? lim->timeout_ms : PEER_TIMEOUT_MS,
        .head_ms = lim->setup_ms > 0 ? lim->setup_ms : PEER_SETUP_MS,
        .min_rate = lim->min_rate > 0 ? lim->min_rate : PEER_MIN_RATE,
        .stop = lim->stop,
    };
    hwhy[0] = '\0';
    enum httpc_status hs = httpc_get(c, url, &o, on_head, on_body, b, hwhy, sizeof hwhy);
    httpc_free(c);
    /* The body is over (whole or not): a reader still waiting sees its end. */
    shutdown(b->fd[1], SHUT_RDWR);
    enum snapshot_status st = SNAPSHOT_IO;
    if (b->started) {
        pthread_join(b->thread, NULL);
        st = b->st;
    }
    /*
     * Whose reason: the reader's when it finished with a verdict of the
     * bytes themselves (then the transfer was ended for it, or was whole),
     * or when the peer hung up inside the body (truncated); else the
     * transfer's, which names the bound or the failure that ended it.
     */
    bool reader_says = b->started
                       && (hs == HTTPC_OK || hs == HTTPC_BODY
                           || (hs == HTTPC_TRUNCATED && st == SNAPSHOT_TRUNCATED))
                       && st != SNAPSHOT_IO;
    if (reader_says && st == SNAPSHOT_OK && hs == HTTPC_OK) {
        *out = b->snap;
    } else {
        snapshot_release(&b->snap);
        if (reader_says)
            snapshot_why(why, whylen, st, "%s: %s", url, b->why);
        else
            st = snapshot_why(why, whylen, SNAPSHOT_IO, "%s", hwhy);
        if (st == SNAPSHOT_OK)      /* not reached: a whole snapshot and a failed transfer */
            st = SNAPSHOT_IO;
    }
    close(b->fd[0]);
    close(b->fd[1]);
    free(b);
    return st;
}
