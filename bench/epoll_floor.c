/*
 * epoll_floor: the floor under GET /exists for bench/run's
 * exists_cpu_vs_epoll, a bare epoll loop that answers every request with
 * the bytes bloomguard sends for an absent ID, and does nothing else.  What
 * bloomguard spends per request above this (libmicrohttpd, the lookup, the
 * counters) is its own; what this spends (the system calls: epoll_wait,
 * recv, send; the loopback TCP below them) any HTTP server on this host
 * pays.
 *
 *   epoll_floor [-a ADDR] [-p PORT]
 *
 * One thread, level-triggered epoll, keep-alive HTTP/1.1, requests of at
 * most 8 KiB of head and no body; pipelined requests are answered in one
 * send.  The answer, to any request, is
 *
 *   HTTP/1.1 404 Not Found
 *   Date: <now, formatted once a second>
 *   Content-Type: application/json
 *   Content-Length: N
 *
 *   {"id":"<last path segment, as sent>","exists":false}
 *
 * which is bloomguard's answer to GET /exists/ID for an absent ID, byte for
 * byte, for the IDs the bench sends (digits: nothing to escape).  Prints
 * "epoll_floor: listening on http://ADDR:PORT" on stderr (port 0: a free
 * one) and runs until killed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HEAD_MAX 8192
#define OUT_MAX 65536
#define ID_MAX 1024

struct conn {
    int fd;
    size_t len;
    char in[HEAD_MAX];
};

static char date_line[64];
static time_t date_at = -1;

/* "Date: ...\r\n", formatted again only when the second changed. */
static const char *date_now(void)
{
    time_t t = time(NULL);
    if (t != date_at) {
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(date_line, sizeof date_line, "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
        date_at = t;
    }
    return date_line;
}

/* The answer to the request head h (n bytes, its blank line included) into out. */
static size_t answer(const char *h, size_t n, char *out, size_t cap)
{
    const char *sp = memchr(h, ' ', n);
    const char *p = sp != NULL ? sp + 1 : h;
    const char *end = memchr(p, ' ', (size_t)(h + n - p));
    if (end == NULL)
        end = p;
    const char *q = memchr(p, '?', (size_t)(end - p));
    if (q != NULL)
        end = q;
    const char *id = end;
    while (id > p && id[-1] != '/')
        id--;
    size_t idlen = (size_t)(end - id) < ID_MAX ? (size_t)(end - id) : ID_MAX;
    int body = (int)idlen + (int)(sizeof "{\"id\":\"\",\"exists\":false}" - 1);
    int w = snprintf(out, cap, "HTTP/1.1 404 Not Found\r\n%sContent-Type: application/json\r\n"
                     "Content-Length: %d\r\n\r\n{\"id\":\"%.*s\",\"exists\":false}",
                     date_now(), body, (int)idlen, id);
    return w > 0 && (size_t)w < cap ? (size_t)w : 0;
}

static void drop(int ep, struct conn *c)
{
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    free(c);
}

/* Read what is there, answer every complete head; false: close it. */
static bool serve(struct conn *c)
{
    static char out[OUT_MAX];
    ssize_t got = recv(c->fd, c->in + c->len, sizeof c->in - c->len, 0);
    if (got < 0)
        return errno == EAGAIN || errno == EINTR;
    if (got == 0)
        return false;
    c->len += (size_t)got;
    size_t used = 0, olen = 0;
    for (;;) {
        char *e = memmem(c->in + used, c->len - used, "\r\n\r\n", 4);
        if (e == NULL)
            break;
        size_t hn = (size_t)(e + 4 - (c->in + used));
        if (OUT_MAX - olen < HEAD_MAX)
            break;                      /* the rest after this send */
        size_t w = answer(c->in + used, hn, out + olen, OUT_MAX - olen);
        if (w == 0)
            return false;
        olen += w;
        used += hn;
    }
    if (used == 0 && c->len == sizeof c->in)
        return false;                   /* a head over HEAD_MAX */
    memmove(c->in, c->in + used, c->len - used);
    c->len -= used;
    for (size_t off = 0; off < olen;) {
        /* Blocking-free: the answers are small and the socket's buffer empty. */
        ssize_t s = send(c->fd, out + off, olen - off, MSG_NOSIGNAL);
        if (s < 0 && errno == EINTR)
            continue;
        if (s <= 0)
            return false;
        off += (size_t)s;
    }
    return true;
}

int main(int argc, char **argv)
{
    const char *addr = "127.0.0.1";
    int port = 0, opt;
    while ((opt = getopt(argc, argv, "a:p:")) != -1) {
        switch (opt) {
        case 'a': addr = optarg; break;
        case 'p': port = atoi(optarg); break;
        default:
            fprintf(stderr, "usage: epoll_floor [-a ADDR] [-p PORT]\n");
            return 2;
        }
    }
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    if (ls < 0 || inet_pton(AF_INET, addr, &sa.sin_addr) != 1
        || setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0
        || bind(ls, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(ls, 1024) != 0) {
        perror("epoll_floor: listen");
        return 1;
    }
    socklen_t sl = sizeof sa;
    getsockname(ls, (struct sockaddr *)&sa, &sl);
    fprintf(stderr, "epoll_floor: listening on http://%s:%u\n", addr, ntohs(sa.sin_port));
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event lev = { .events = EPOLLIN, .data.ptr = NULL };
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, ls, &lev) != 0) {
        perror("epoll_floor: epoll");
        return 1;
    }
    for (;;) {
        struct epoll_event evs[256];
        int n = epoll_wait(ep, evs, 256, -1);
        if (n < 0 && errno != EINTR) {
            perror("epoll_floor: epoll_wait");
            return 1;
        }
        for (int i = 0; i < n; i++) {
            struct conn *c = evs[i].data.ptr;
            if (c != NULL) {
                if (!serve(c))
                    drop(ep, c);
                continue;
            }
            int fd;
            while ((fd = accept4(ls, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                c = malloc(sizeof *c);
                struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
                if (c == NULL || (c->fd = fd, c->len = 0, epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev)) != 0) {
                    free(c);
                    close(fd);
                }
            }
        }
    }
}
