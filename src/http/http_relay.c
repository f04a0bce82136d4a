/*
 * The fast path's way back to libmicrohttpd for a connection it has read
 * from: after its first request, http_fast.c reads a connection's bytes
 * for good (one recv per request, not a peek and a recv), so when a later
 * request is not one it answers (a POST after GETs on one keep-alive
 * connection), MHD cannot be given the socket with that request still
 * unread.  It gets one end of a socketpair instead, the bytes already read
 * first, and this relays both ways between the client and that end until
 * either side is done.  Rare (clients seldom mix), bounded (a buffer each
 * way, no reading while it is full), and the connection's limits stay
 * MHD's: its idle timeout and the sweeper act on MHD's end, and the close
 * travels through.
 */
#include "http_int.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define RELAY_BUF 16384

/* One direction: bytes read from `from`, not yet written to the other side. */
struct flow {
    char *buf;
    size_t len, off;
    bool eof;               /* `from` has closed its side: the other side is told once flushed */
    bool told;              /* shutdown(SHUT_WR) sent to the other side */
};

struct relay {
    int cfd, mfd;           /* the client's socket, our end of MHD's socketpair */
    struct flow up, down;   /* client to MHD, MHD to client */
    uint32_t cev, mev;      /* the epoll interests in force */
    struct relay *prev, *next;  /* the fast thread's relays, for its stop */
};

/* epoll data.ptr of a relay's sockets: its address, tagged (relays are malloc'd, 8-aligned). */
#define TAG_CLIENT ((uintptr_t)1)
#define TAG_MHD ((uintptr_t)2)

bool http_relay_tagged(const void *p)
{
    return ((uintptr_t)p & (TAG_CLIENT | TAG_MHD)) != 0;
}

static void relay_free(struct relay **list, struct relay *r)
{
    if (r->prev != NULL)
        r->prev->next = r->next;
    else
        *list = r->next;
    if (r->next != NULL)
        r->next->prev = r->prev;
    close(r->cfd);
    close(r->mfd);
    free(r->up.buf);
    free(r->down.buf);
    free(r);
}

/*
 * Move what can move in one direction: write what is buffered, read more
 * once it is all out, pass the end of the stream on.  False: an error,
 * close the relay.
 */
static bool pump(struct flow *f, int from, int to)
{
    for (;;) {
        if (!http_wire_send(to, f->buf, f->len, &f->off))
            return false;
        if (f->off < f->len)
            return true;
        f->len = f->off = 0;
        if (f->eof) {
            if (!f->told && shutdown(to, SHUT_WR) != 0 && errno != ENOTCONN)
                return false;
            f->told = true;
            return true;
        }
        ssize_t n = recv(from, f->buf, RELAY_BUF, 0);
        if (n > 0)
            f->len = (size_t)n;
        else if (n == 0)
            f->eof = true;
        else if (errno == EINTR)
            continue;
        else
            return errno == EAGAIN || errno == EWOULDBLOCK;
    }
}

/* Each socket's interest: readable while its flow's buffer is empty, writable while the other's is not. */
static bool rearm(int ep, struct relay *r)
{
    uint32_t cev = (r->up.len == 0 && !r->up.eof ? EPOLLIN : 0) | (r->down.len > 0 ? EPOLLOUT : 0);
    uint32_t mev = (r->down.len == 0 && !r->down.eof ? EPOLLIN : 0) | (r->up.len > 0 ? EPOLLOUT : 0);
    if (cev != r->cev) {
        struct epoll_event ev = { .events = cev, .data.ptr = (void *)((uintptr_t)r | TAG_CLIENT) };
        if (epoll_ctl(ep, EPOLL_CTL_MOD, r->cfd, &ev) != 0)
            return false;
        r->cev = cev;
    }
    if (mev != r->mev) {
        struct epoll_event ev = { .events = mev, .data.ptr = (void *)((uintptr_t)r | TAG_MHD) };
        if (epoll_ctl(ep, EPOLL_CTL_MOD, r->mfd, &ev) != 0)
            return false;
        r->mev = mev;
    }
    return true;
}

void http_relay_event(int ep, struct relay **list, void *tagged, uint32_t events)
{
    struct relay *r = (struct relay *)((uintptr_t)tagged & ~(TAG_CLIENT | TAG_MHD));
    bool ok = !(events & EPOLLERR) && pump(&r->up, r->cfd, r->mfd) && pump(&r->down, r->mfd, r->cfd);
    /*
     * MHD closed its end and the client has all it sent: the connection is
     * over (what the client might still send would reach no one).
     */
    if (!ok || r->down.told || !rearm(ep, r))
        relay_free(list, r);
}

bool http_relay_start(struct http *h, int ep, struct relay **list, int fd, const char *bytes,
                      size_t n)
{
    int sv[2];
    struct relay *r = calloc(1, sizeof *r);
    if (r == NULL || n > RELAY_BUF || (r->up.buf = malloc(RELAY_BUF)) == NULL
        || (r->down.buf = malloc(RELAY_BUF)) == NULL
        || socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) {
        if (r != NULL) {
            free(r->up.buf);
            free(r->down.buf);
        }
        free(r);
        close(fd);
        return false;
    }
    r->cfd = fd;
    r->mfd = sv[0];
    memcpy(r->up.buf, bytes, n);
    r->up.len = n;
    r->cev = r->mev = EPOLLIN;
    struct epoll_event cev = { .events = EPOLLIN, .data.ptr = (void *)((uintptr_t)r | TAG_CLIENT) };
    struct epoll_event mev = { .events = EPOLLIN, .data.ptr = (void *)((uintptr_t)r | TAG_MHD) };
    r->next = *list;
    if (*list != NULL)
        (*list)->prev = r;
    *list = r;
    if (epoll_ctl(ep, EPOLL_CTL_MOD, fd, &cev) != 0 || epoll_ctl(ep, EPOLL_CTL_ADD, sv[0], &mev) != 0) {
        close(sv[1]);
        relay_free(list, r);
        return false;
    }
    /*
     * MHD's end, named as what it is (a unix socket); MHD closes it when
     * it cannot take it, and the relay then sees the end of its stream.
     */
    struct sockaddr_un un = { .sun_family = AF_UNIX };
    if (MHD_add_connection(h->d, sv[1], (struct sockaddr *)&un, sizeof un.sun_family) != MHD_YES)
        http_warn(h, "could not hand a connection to libmicrohttpd: %s", strerror(errno));
    http_relay_event(ep, list, (void *)((uintptr_t)r | TAG_MHD), 0);
    return true;
}

void http_relay_close_all(struct relay **list)
{
    while (*list != NULL)
        relay_free(list, *list);
}
