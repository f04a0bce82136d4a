/*
 * POST /ids on the fast path (http_fast.c reads and writes the bytes): a
 * whole small request taken (http_wire_post) and answered through its
 * row's body form, at once for a filter in memory; for a durable one the
 * connection is parked, not read, until the POST log's writer has the IDs
 * on disk and hands the answer back: it pushes the request onto its
 * thread's lock-free ready list and writes the thread's eventfd only when
 * the list was empty, so a group commit wakes the thread once.
 */
#include "http_fast_int.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "live.h"
#include "stats.h"

/* A taken head's target copied to ft->path (the handlers read it there), and its route (routes_find). */
const struct route *http_fast_route(struct fast_thread *ft, const char *target, size_t tlen,
                                    unsigned method, size_t *rest_off)
{
    unsigned allowed;
    memcpy(ft->path, target, tlen);
    ft->path[tlen] = '\0';
    return routes_find(ft->path, method, rest_off, &allowed);
}

/* An answer counted as queue() counts MHD's: by route and status, its time from t0, late or not. */
void http_fast_count(struct fast_thread *ft, unsigned slot, unsigned status, uint64_t t0)
{
    struct http *h = ft->h;
    uint64_t dt = (uint64_t)monoclock_ns() - t0;
    stats_request(h->a->stats, slot, status, dt ? dt : 1);
    /* Answered ahead of a probe that has waited past the proxies' timeout: as late. */
    if (atomic_load_explicit(&h->late_now, memory_order_relaxed))
        stats_late(h->a->stats, slot);
}

/*
 * api_fast_later's done, on the thread that finished the insert (the POST
 * log's writer): the answer kept in rq, rq pushed onto its thread's ready
 * list, and the thread woken if the list was empty.  Neither rq nor its
 * thread is touched after the push but through ft, which lives while
 * held > 0.
 */
static void parked_done(struct api_fast_later *l, unsigned status, const char *body, size_t len)
{
    static const char oom[] = "{\"error\":\"internal\",\"message\":\"out of memory\"}";
    struct request *rq = l->ctx;
    struct fast_thread *ft = rq->ft;
    struct http_fast *f = ft->f;
    char *copy = len > sizeof rq->parked_small ? malloc(len) : rq->parked_small;
    if (copy == NULL) {
        status = MHD_HTTP_INTERNAL_SERVER_ERROR;
        body = oom;
        len = sizeof oom - 1;
    } else {
        memcpy(copy, body, len);
        body = copy;
    }
    rq->parked_malloced = copy != NULL && copy != rq->parked_small;
    rq->parked_status = status;
    rq->parked_body = body;
    rq->parked_len = len;
    struct request *old = atomic_load_explicit(&ft->ready, memory_order_relaxed);
    do
        rq->ready_next = old;
    while (!atomic_compare_exchange_weak_explicit(&ft->ready, &old, rq, memory_order_release,
                                                  memory_order_relaxed));
    if (old == NULL) {
        uint64_t one = 1;
        ssize_t w = write(ft->ready_fd, &one, sizeof one);
        (void)w;                /* only fails when the counter is full: then it is readable */
    }
    atomic_fetch_sub_explicit(&f->held, 1, memory_order_release);
}

/*
 * A POST whose route has a fast form for bodies (POST /ids): its head
 * (head_len bytes at head) and its whole body (blen bytes at body).
 * Returns as prepare does, or API_LATER when the answer comes later: rq is
 * then parked.  Every refusal of the head (the right, the media type, the
 * size) is MHD's: 0.
 */
static unsigned prepare_post(struct fast_thread *ft, struct request *rq, const char *head,
                             size_t head_len, const char *target, size_t tlen, const char *body,
                             size_t blen, char **start, size_t *len)
{
    struct http *h = ft->h;
    size_t rest_off;
    const struct route *r = http_fast_route(ft, target, tlen, ROUTE_POST, &rest_off);
    if (r == NULL || !(r->methods & ROUTE_POST) || r->fast_body == NULL || blen == 0)
        return 0;
    struct app *a = http_fast_view(ft);
    if (blen > a->cfg->max_body_bytes || (r->admin && !http_fast_right(h, a, r->admin, head, head_len)))
        return 0;
    /* As http.c's body_type_of (ct holds any value a head holds). */
    char ct[WIRE_HEAD_MAX];
    enum body_type bt = BODY_JSON;
    if (http_wire_header(head, head_len, "Content-Type", ct, sizeof ct) && ct[0] != '\0') {
        size_t n = strcspn(ct, "; \t");
        if (n == 10 && strncasecmp(ct, "text/plain", 10) == 0)
            bt = BODY_TEXT;
        else if (!(n == 16 && strncasecmp(ct, "application/json", 16) == 0))
            return 0;           /* "; charset=utf-8" too: MHD's 415, as any other type */
    }
    bool timed = a->cfg->metrics_enabled;
    unsigned slot = (unsigned)(r - routes_table);
    rq->fast_later = (struct api_fast_later){ parked_done, rq, { NULL, NULL }, 0 };
    atomic_fetch_add_explicit(&h->fast->held, 1, memory_order_relaxed);
    size_t olen = 0;
    unsigned status = r->fast_body(a, ft->path + rest_off, tlen - rest_off, bt, body, blen,
                                   ft->out + FAST_STATUS_MAX, sizeof ft->out - FAST_STATUS_MAX,
                                   &olen, &rq->fast_later);
    if (status == API_LATER) {
        /* Not read again until the answer: the client waits for it. */
        rq->parked = true;
        rq->parked_timed = timed;
        rq->parked_slot = slot;
        rq->parked_t0 = ft->wake_ns;
        ft->parked++;
        atomic_store_explicit(&rq->idle, false, memory_order_release);
        atomic_store_explicit(&rq->deadline, 0, memory_order_release);
        return API_LATER;
    }
    atomic_fetch_sub_explicit(&h->fast->held, 1, memory_order_relaxed);
    if (status == 0
        || (*start = http_wire_answer_head(&ft->date, ft->out + FAST_STATUS_MAX, FAST_STATUS_MAX,
                                           status, olen)) == NULL)
        return 0;
    ft->answered++;
    *len = (size_t)(ft->out + FAST_STATUS_MAX - *start) + olen;
    if (timed)
        http_fast_count(ft, slot, status, ft->wake_ns);
    return status;
}

/*
 * The request at the start of b[0..n): answered (its answer ready at
 * *start, *len bytes), or parked (API_LATER), *used bytes taken from b; or
 * WIRE_MORE's and WIRE_PASS's 0 for MHD, with *used 0 (a head not whole
 * yet) or not (anything else).  A POST must come whole, body and all:
 * one cut in two reads is MHD's, as a big one is.
 */
unsigned http_fast_take(struct fast_thread *ft, struct request *rq, const char *b, size_t n,
                        size_t *used, char **start, size_t *len)
{
    size_t head_len, tlen, blen;
    const char *target;
    *used = 0;
    if (b[0] == 'P') {
        enum wire_head k = http_wire_post(b, n, &head_len, &target, &tlen, &blen);
        if (k == WIRE_MORE)
            return 0;
        *used = 1;
        if (k == WIRE_PASS || blen > n - head_len)
            return 0;
        *used = head_len + blen;
        return prepare_post(ft, rq, b, head_len, target, tlen, b + head_len, blen, start, len);
    }
    enum wire_head k = http_wire_head(b, n, &head_len, &target, &tlen);
    if (k == WIRE_MORE)
        return 0;
    *used = 1;
    if (k == WIRE_PASS)
        return 0;
    *used = head_len;
    return http_fast_prepare(ft, b, head_len, target, tlen, start, len);
}

/*
 * A parked connection that wakes its thread (bytes behind the POST, the
 * client's end, an error): out of the epoll until its answer.  EPOLL_CTL_DEL
 * rather than MOD to no events: epoll reports EPOLLERR and EPOLLHUP
 * whatever the mask, and a reset client would wake the thread in a loop.
 */
void http_fast_disarm(struct fast_thread *ft, struct request *rq)
{
    if (!rq->disarmed && epoll_ctl(ft->ep, EPOLL_CTL_DEL, rq->fd, NULL) == 0)
        rq->disarmed = true;
}

/*
 * A parked POST's answer (its done has pushed it): sent, the connection
 * armed again, and what came behind the POST served.
 */
static void answer_parked(struct fast_thread *ft, struct request *rq)
{
    struct http *h = ft->h;
    rq->parked = false;
    ft->parked--;
    size_t blen = rq->parked_len;
    memcpy(ft->out + FAST_STATUS_MAX, rq->parked_body, blen);
    if (rq->parked_malloced)
        free((char *)rq->parked_body);
    rq->parked_malloced = false;
    rq->parked_body = NULL;
    char *start = http_wire_answer_head(&ft->date, ft->out + FAST_STATUS_MAX, FAST_STATUS_MAX,
                                        rq->parked_status, blen);
    if (start == NULL) {
        http_fast_close(ft, rq);
        return;
    }
    ft->answered++;
    if (rq->parked_timed)
        http_fast_count(ft, rq->parked_slot, rq->parked_status, rq->parked_t0);
    if (rq->disarmed) {
        struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.ptr = rq };
        rq->disarmed = false;
        if (epoll_ctl(ft->ep, EPOLL_CTL_ADD, rq->fd, &ev) != 0) {
            http_fast_close(ft, rq);
            return;
        }
    }
    size_t len = (size_t)(ft->out + FAST_STATUS_MAX - start) + blen;
    if (!http_fast_send(ft, rq, start, len)) {
        http_fast_close(ft, rq);
        return;
    }
    http_fast_rearm(h, rq);
    /* Requests that came behind it, already read: the socket's own wake the epoll. */
    if (rq->unsent == NULL && rq->pend_len > 0)
        http_fast_serve_owned(ft, rq);
}

/* ready_fd: every parked POST answered since the last wake, in the order they were done. */
void http_fast_drain(struct fast_thread *ft)
{
    uint64_t v;
    /* The count first, then the list: a push after the read wakes the thread again. */
    ssize_t r = read(ft->ready_fd, &v, sizeof v);
    (void)r;
    struct request *rq = atomic_exchange_explicit(&ft->ready, NULL, memory_order_acquire), *fifo = NULL;
    while (rq != NULL) {
        struct request *next = rq->ready_next;
        rq->ready_next = fifo;
        fifo = rq;
        rq = next;
    }
    while (fifo != NULL) {
        struct request *next = fifo->ready_next;
        answer_parked(ft, fifo);
        fifo = next;
    }
}
