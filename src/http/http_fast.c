/*
 * The fast path: the hot GET (a route whose row has a fast form: GET
 * /exists/{id}) answered without libmicrohttpd, whose per-request work
 * (its connection's memory pool zeroed twice, a response allocated,
 * headed, locked and freed, the Date formatted) cost more than the lookup
 * and the system calls together.  Its threads accept every connection and
 * look at a connection's first request with MSG_PEEK: a head they take
 * (strict HTTP/1.1 GET, the whole of it in one read, no body, nothing MHD
 * would answer differently) is consumed and answered here, with the bytes
 * MHD would send; one they do not take goes to MHD (MHD_add_connection)
 * with the socket, still unread.  Past a first request taken, they read
 * the connection for good, one recv per request, and answer each taken
 * head; at the first one they do not take, MHD gets the rest through
 * http_relay.c.  So the edge's rules (framing, methods, limits, timeouts
 * of slow heads) remain MHD's and http_check.c's for anything unusual.
 *
 * POST /ids too (a row with a fast form for bodies): a strict head with
 * one Content-Length and the whole small body in the same read.  A
 * durable insert answers later: the connection is parked, simply not read
 * (the client waits for its answer; no epoll change unless it wakes the
 * thread meanwhile), and the POST log's writer hands the answer back
 * through the thread's lock-free ready list, writing its eventfd once per
 * group commit rather than once per POST (MHD's suspend and resume cost
 * two epoll_ctl, an eventfd write and an idle recv per POST).
 */
#include "http_fast_int.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "live.h"
#include "log.h"
#include "stats.h"

/* Markers in epoll_event.data.ptr besides connections and relays (aligned: untagged). */
static long listen_mark, stop_mark, ready_mark;

/* How long a stopping thread waits for its parked POSTs' answers (http_stop waits as long for MHD's). */
#define STOP_WAIT_MS 5000

/* ---------------------------------------------------------- connections -- */

/* Into the connection list (the sweeper's), as on_connection does for MHD's; counted by the caller. */
static struct request *conn_new(struct http *h, int fd)
{
    struct request *rq = calloc(1, sizeof *rq);
    if (rq == NULL)
        return NULL;
    rq->fd = fd;
    rq->h = h;
    rq->fast = true;
    atomic_init(&rq->idle, false);
    atomic_init(&rq->later_ready, false);
    atomic_init(&rq->deadline, h->header_ns ? (uint64_t)monoclock_coarse_ns() + h->header_ns : 0);
    http_conns_add(h, rq);
    return rq;
}

/* Out of the list and the count, and freed; the socket stays open (the caller's). */
static void conn_forget(struct http *h, struct request *rq)
{
    http_conns_remove(h, rq);
    atomic_fetch_sub(&h->live, 1);
    if (rq->parked_malloced)
        free((char *)rq->parked_body);
    free(rq->unsent);
    free(rq->pend);
    free(rq);
}

void http_fast_close(struct fast_thread *ft, struct request *rq)
{
    int fd = rq->fd;
    epoll_ctl(ft->ep, EPOLL_CTL_DEL, fd, NULL);
    conn_forget(ft->h, rq);     /* before close: the sweeper must never see a reused fd */
    close(fd);
}

/* To MHD, with the request it did not take still unread in the socket. */
static void conn_hand_off(struct fast_thread *ft, struct request *rq)
{
    struct http *h = ft->h;
    int fd = rq->fd;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    epoll_ctl(ft->ep, EPOLL_CTL_DEL, fd, NULL);
    conn_forget(h, rq);
    stats_add(h->a->stats, ST_FAST_HANDOFFS, 1);
    if (getpeername(fd, (struct sockaddr *)&ss, &sl) != 0) {
        close(fd);
        return;
    }
    /* MHD closes the socket itself when it cannot take it. */
    if (MHD_add_connection(h->d, fd, (struct sockaddr *)&ss, sl) != MHD_YES)
        http_warn(h, "could not hand a connection to libmicrohttpd: %s", strerror(errno));
}

static void accept_some(struct fast_thread *ft)
{
    struct http *h = ft->h;
    for (int i = 0; i < ACCEPT_BURST; i++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int fd = accept4(h->fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* Level-triggered: the waiting connection would wake us at once, forever. */
                http_warn(h, "cannot accept a connection: %s", strerror(errno));
                epoll_ctl(ft->ep, EPOLL_CTL_DEL, h->fd, NULL);
                ft->accept_paused = true;
                ft->resume_at = (uint64_t)monoclock_coarse_ns() + (uint64_t)ACCEPT_PAUSE_MS * (uint64_t)(NS_PER_S / 1000);
            }
            return;
        }
        /*
         * Over the limit: closed at once, as on_accept does, but for the
         * daemon's own probe (http_probe.c).  Counted before the check, so
         * that threads accepting at once cannot both take the last place.
         */
        if (atomic_fetch_add(&h->live, 1) >= h->max_live
            && !http_probe_port_is(h, (struct sockaddr *)&ss)) {
            atomic_fetch_sub(&h->live, 1);
            atomic_fetch_add_explicit(&h->refused, 1, memory_order_relaxed);
            stats_add(h->a->stats, ST_CONN_REFUSED, 1);
            close(fd);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);    /* fails on unix sockets */
        struct request *rq = conn_new(h, fd);
        struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.ptr = rq };
        if (rq != NULL)
            rq->ft = ft;        /* where a parked POST's answer comes back */
        if (rq == NULL) {
            atomic_fetch_sub(&h->live, 1);
            close(fd);
        } else if (epoll_ctl(ft->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
            conn_forget(h, rq);
            close(fd);
        }
    }
}

/* ------------------------------------------------------------- answers -- */

/* Send what the socket takes; the rest waits in rq->unsent for EPOLLOUT.  False: close it. */
bool http_fast_send(struct fast_thread *ft, struct request *rq, const char *p, size_t len)
{
    size_t off = 0;
    if (!http_wire_send(rq->fd, p, len, &off))
        return false;
    if (off < len) {
        rq->unsent = malloc(len - off);
        if (rq->unsent == NULL)
            return false;
        memcpy(rq->unsent, p + off, len - off);
        rq->unsent_len = len - off;
        rq->unsent_off = 0;
        /* Writable only: a client that half-closed and reads nothing must not wake us in a loop. */
        struct epoll_event ev = { .events = EPOLLOUT, .data.ptr = rq };
        return epoll_ctl(ft->ep, EPOLL_CTL_MOD, rq->fd, &ev) == 0;
    }
    return true;
}

/* EPOLLOUT: the rest of an answer.  False: close it. */
static bool flush_unsent(struct fast_thread *ft, struct request *rq)
{
    if (!http_wire_send(rq->fd, rq->unsent, rq->unsent_len, &rq->unsent_off))
        return false;
    if (rq->unsent_off < rq->unsent_len)
        return true;
    free(rq->unsent);
    rq->unsent = NULL;
    rq->unsent_len = rq->unsent_off = 0;
    struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.ptr = rq };
    return epoll_ctl(ft->ep, EPOLL_CTL_MOD, rq->fd, &ev) == 0;
}

/*
 * Whether a taken head (head_len bytes at head) of a route that needs a
 * right (a route's admin value) has it (http_right_granted, check_write's
 * decision).  Anything else goes to MHD, which answers the refusal itself.
 */
bool http_fast_right(const struct http *h, const struct app *a, unsigned right,
                     const char *head, size_t head_len)
{
    char auth[512];
    bool has = http_wire_header(head, head_len, "Authorization", auth, sizeof auth);
    return http_right_granted(h, a, right, has ? auth : NULL);
}

/* The view of the configuration the wake's answers read (fast_settle leaves it). */
struct app *http_fast_view(struct fast_thread *ft)
{
    if (!ft->in_view) {
        ft->view = live_enter(ft->h->a->live);
        ft->app = *ft->h->a;
        ft->app.cfg = ft->view.cfg;
        ft->app.admin_token = ft->view.admin_token;
        ft->in_view = true;
    }
    return &ft->app;
}

/*
 * The answer to a taken head (head_len bytes at head) for target, if its
 * route has a fast form that gives one: its status, with the head and body
 * ready at *start (*len bytes); 0 when MHD must answer it.  Counted here,
 * as queue() counts.  Of the routes that need a right, only the
 * replication right's are taken (the replicas' horizon questions), once
 * the head shows it.
 */
unsigned http_fast_prepare(struct fast_thread *ft, const char *head, size_t head_len,
                           const char *target, size_t tlen, char **start, size_t *len)
{
    struct http *h = ft->h;
    size_t rest_off;
    const struct route *r = http_fast_route(ft, target, tlen, ROUTE_GET, &rest_off);
    if (r == NULL || !(r->methods & ROUTE_GET) || r->fast == NULL || r->body
        || (r->admin && r->admin != ROUTE_REPLICATION))
        return 0;
    struct app *a = http_fast_view(ft);
    if (r->admin && !http_fast_right(h, a, r->admin, head, head_len))
        return 0;
    bool timed = a->cfg->metrics_enabled;
    size_t blen = 0;
    unsigned status = r->fast(a, ft->path + rest_off, tlen - rest_off, ft->out + FAST_STATUS_MAX,
                              sizeof ft->out - FAST_STATUS_MAX, &blen);
    if (status == 0
        || (*start = http_wire_answer_head(&ft->date, ft->out + FAST_STATUS_MAX, FAST_STATUS_MAX,
                                           status, blen)) == NULL)
        return 0;           /* an error, not ready...: MHD's handler answers it */
    ft->answered++;
    *len = (size_t)(ft->out + FAST_STATUS_MAX - *start) + blen;
    if (timed)
        http_fast_count(ft, (unsigned)(r - routes_table), status, ft->wake_ns);
    return status;
}

/* The end of a wake: the view left (a reload waits for no more), the answers counted. */
static void fast_settle(struct fast_thread *ft)
{
    if (ft->in_view) {
        live_exit(ft->view);
        ft->in_view = false;
    }
    if (ft->answered > 0) {
        stats_add(ft->h->a->stats, ST_FAST_ANSWERS, ft->answered);
        ft->answered = 0;
    }
}

/* After an answer: the idle limit, closed quietly; or, with a head begun, the header limit. */
void http_fast_rearm(struct http *h, struct request *rq)
{
    /*
     * Release stores (plain moves on x86; seq_cst ones are locked
     * exchanges, two a request): the sweeper that reads the new deadline
     * sees idle as set before it, and nothing here reads after them.
     */
    bool begun = rq->pend_len > 0;
    atomic_store_explicit(&rq->idle, !begun, memory_order_release);
    uint64_t ns = begun ? h->header_ns : h->idle_ns;
    atomic_store_explicit(&rq->deadline, ns ? (uint64_t)monoclock_coarse_ns() + ns : 0,
                          memory_order_release);
}

/* The connection's first request, peeked at: answered, or the socket to MHD.  False: rq is gone. */
static bool serve_first(struct fast_thread *ft, struct request *rq)
{
    ssize_t got = http_wire_recv(rq->fd, ft->in, sizeof ft->in, MSG_PEEK);
    if (got <= 0) {
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return true;
        http_fast_close(ft, rq);
        return false;
    }
    size_t len, used;
    char *start;
    unsigned st = http_fast_take(ft, rq, ft->in, (size_t)got, &used, &start, &len);
    if (st == 0) {
        conn_hand_off(ft, rq);
        return false;
    }
    /* Taken: the request leaves the socket (it is all there: the peek saw it). */
    rq->owned = true;
    if (http_wire_recv(rq->fd, ft->in, used, 0) != (ssize_t)used) {
        if (!rq->parked) {
            http_fast_close(ft, rq);
            return false;
        }
        /* Its answer finds the connection broken and closes it (the writer holds rq). */
        http_fast_disarm(ft, rq);
        return true;
    }
    if (st == API_LATER)
        return true;
    if (!http_fast_send(ft, rq, start, len)) {
        http_fast_close(ft, rq);
        return false;
    }
    http_fast_rearm(ft->h, rq);
    return true;
}

/* To MHD through a relay, with the n bytes read from it and not answered. */
static void relay_rest(struct fast_thread *ft, struct request *rq, const char *bytes, size_t n)
{
    int fd = rq->fd;
    conn_forget(ft->h, rq);     /* MHD counts it from now on */
    stats_add(ft->h->a->stats, ST_FAST_RELAYS, 1);
    http_relay_start(ft->h, ft->ep, &ft->relays, fd, bytes, n);
}

/* An owned connection: read what came, answer every whole head taken.  False: rq is gone. */
bool http_fast_serve_owned(struct fast_thread *ft, struct request *rq)
{
    size_t have = rq->pend_len;
    if (have > 0) {
        memcpy(ft->in, rq->pend, have);
        free(rq->pend);
        rq->pend = NULL;
        rq->pend_len = 0;
    }
    /* No room (a full buffer of heads kept): no read, which would read as the end. */
    ssize_t got = have < sizeof ft->in ? http_wire_recv(rq->fd, ft->in + have, sizeof ft->in - have, 0)
                                       : (errno = EAGAIN, -1);
    bool eof = got == 0;
    if (got < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            http_fast_close(ft, rq);
            return false;
        }
        got = 0;
    }
    size_t total = have + (size_t)got, pos = 0;
    while (pos < total && rq->unsent == NULL && !rq->parked) {
        size_t used, len;
        char *start;
        unsigned st = http_fast_take(ft, rq, ft->in + pos, total - pos, &used, &start, &len);
        if (st == 0 && used == 0)
            break;              /* the rest of a head to come */
        if (st == 0) {
            relay_rest(ft, rq, ft->in + pos, total - pos);
            return false;
        }
        pos += used;
        if (st != API_LATER && !http_fast_send(ft, rq, start, len)) {
            http_fast_close(ft, rq);
            return false;
        }
    }
    if (pos < total) {
        /* The rest of a head, or heads behind an answer the socket has not taken yet. */
        if ((rq->pend = malloc(total - pos)) == NULL) {
            if (rq->parked) {
                /* Not freed under the writer: its answer finds the socket shut and closes it. */
                shutdown(rq->fd, SHUT_RDWR);
                http_fast_disarm(ft, rq);
                return true;
            }
            http_fast_close(ft, rq);
            return false;
        }
        memcpy(rq->pend, ft->in + pos, total - pos);
        rq->pend_len = total - pos;
    }
    if (rq->parked)
        return true;            /* an end comes again once it is answered (its socket is read again) */
    if (eof) {
        http_fast_close(ft, rq);     /* what came before the end is answered; a part of a head is not */
        return false;
    }
    if (pos > 0 || (have == 0 && rq->pend_len > 0))
        http_fast_rearm(ft->h, rq);
    return true;
}

static void serve(struct fast_thread *ft, struct request *rq, uint32_t events)
{
    if (rq->parked) {
        http_fast_disarm(ft, rq);         /* never closed while parked: the writer holds rq */
        return;
    }
    if ((events & EPOLLERR) || atomic_load(&rq->deadline) == DEADLINE_HIT) {
        http_fast_close(ft, rq);
        return;
    }
    if (rq->unsent != NULL) {
        if (!flush_unsent(ft, rq)) {
            http_fast_close(ft, rq);
            return;
        }
        if (rq->unsent != NULL)
            return;
    }
    if (!rq->owned && !serve_first(ft, rq))
        return;
    /*
     * Owned: heads that wait behind an answer, and what came meanwhile.
     * One read per wake: a read that filled the buffer is followed by
     * another wake (level-triggered), so a pipelining client gets no more
     * than its share.
     */
    if (rq->owned && rq->unsent == NULL && !rq->parked)
        http_fast_serve_owned(ft, rq);
}

/* ------------------------------------------------------------- threads -- */

static void *fast_main(void *arg)
{
    struct fast_thread *ft = arg;
    struct http *h = ft->h;
    pthread_setname_np(pthread_self(), "bg-http");
    for (;;) {
        /* Stopping: on until the parked POSTs have their answers, or STOP_WAIT_MS. */
        if (ft->stopping && (ft->parked == 0 || (uint64_t)monoclock_coarse_ns() >= ft->stop_at))
            return NULL;
        struct epoll_event evs[64];
        int n = http_wire_epoll_wait(ft->ep, evs, 64,
                                     ft->accept_paused || ft->stopping ? ACCEPT_PAUSE_MS : -1);
        if (n < 0 && errno != EINTR) {
            log_error(h->a->lg, "http: the fast path's epoll_wait failed: %s", strerror(errno));
            return NULL;
        }
        if (n > 0)
            ft->wake_ns = (uint64_t)monoclock_ns();
        bool ready = false;
        for (int i = 0; i < n; i++) {
            void *p = evs[i].data.ptr;
            if (p == &stop_mark) {
                /* Out of this epoll: the eventfd stays readable for the other threads. */
                epoll_ctl(ft->ep, EPOLL_CTL_DEL, h->fast->stop_fd, NULL);
                ft->stopping = true;
                ft->stop_at = (uint64_t)monoclock_coarse_ns()
                              + (uint64_t)STOP_WAIT_MS * (uint64_t)(NS_PER_S / 1000);
            } else if (p == &ready_mark) {
                ready = true;
            } else if (p == &listen_mark) {
                accept_some(ft);
            } else if (http_relay_tagged(p)) {
                http_relay_event(ft->ep, &ft->relays, p, evs[i].events);
            } else {
                serve(ft, p, evs[i].events);
            }
        }
        /* After the wake's events: an answer may close a connection they name. */
        if (ready)
            http_fast_drain(ft);
        fast_settle(ft);
        if (ft->accept_paused && (uint64_t)monoclock_coarse_ns() >= ft->resume_at) {
            struct epoll_event lev = { .events = EPOLLIN | EPOLLEXCLUSIVE, .data.ptr = &listen_mark };
            ft->accept_paused = epoll_ctl(ft->ep, EPOLL_CTL_ADD, h->fd, &lev) != 0 && errno != EEXIST;
        }
    }
}

bool http_fast_start(struct http *h, unsigned threads, char *err, size_t errlen)
{
    http_wire_init();
    struct http_fast *f = calloc(1, sizeof *f);
    if (f == NULL || (f->t = calloc(threads, sizeof *f->t)) == NULL) {
        free(f);
        snprintf(err, errlen, "out of memory");
        return false;
    }
    h->fast = f;
    f->n = threads;
    atomic_init(&f->held, 0);
    for (unsigned i = 0; i < threads; i++) {
        f->t[i].ep = -1;
        f->t[i].ready_fd = -1;
        atomic_init(&f->t[i].ready, NULL);
    }
    f->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    /* Every thread accepts until EAGAIN (MHD made it non-blocking when it owned it). */
    int fl = fcntl(h->fd, F_GETFL);
    if (f->stop_fd < 0 || fl < 0 || fcntl(h->fd, F_SETFL, fl | O_NONBLOCK) != 0) {
        snprintf(err, errlen, "cannot start the fast path: %s", strerror(errno));
        return false;
    }
    for (unsigned i = 0; i < threads; i++) {
        struct fast_thread *ft = &f->t[i];
        ft->h = h;
        ft->f = f;
        ft->date.at = (time_t)-1;
        struct epoll_event sev = { .events = EPOLLIN, .data.ptr = &stop_mark };
        struct epoll_event lev = { .events = EPOLLIN | EPOLLEXCLUSIVE, .data.ptr = &listen_mark };
        struct epoll_event rev = { .events = EPOLLIN, .data.ptr = &ready_mark };
        if ((ft->ep = epoll_create1(EPOLL_CLOEXEC)) < 0
            || (ft->ready_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0
            || epoll_ctl(ft->ep, EPOLL_CTL_ADD, ft->ready_fd, &rev) != 0
            || epoll_ctl(ft->ep, EPOLL_CTL_ADD, f->stop_fd, &sev) != 0
            || epoll_ctl(ft->ep, EPOLL_CTL_ADD, h->fd, &lev) != 0) {
            snprintf(err, errlen, "cannot start the fast path: epoll: %s", strerror(errno));
            return false;
        }
        int e = pthread_create(&ft->th, NULL, fast_main, ft);
        if (e != 0) {
            snprintf(err, errlen, "cannot start the fast path's threads: %s", strerror(e));
            return false;
        }
        ft->started = true;
    }
    return true;
}

void http_fast_quiesce(struct http *h)
{
    struct http_fast *f = h->fast;
    for (unsigned i = 0; f != NULL && i < f->n; i++)
        if (f->t[i].started)
            epoll_ctl(f->t[i].ep, EPOLL_CTL_DEL, h->fd, NULL);
}

void http_fast_stop(struct http *h)
{
    struct http_fast *f = h->fast;
    if (f == NULL)
        return;
    if (f->stop_fd >= 0) {
        uint64_t one = 1;
        ssize_t w = write(f->stop_fd, &one, sizeof one);
        (void)w;
    }
    for (unsigned i = 0; i < f->n; i++) {
        if (f->t[i].started)
            pthread_join(f->t[i].th, NULL);
        http_relay_close_all(&f->t[i].relays);
        if (f->t[i].ep >= 0)
            close(f->t[i].ep);
    }
    /*
     * The threads waited for their parked POSTs' answers; one the writer
     * still holds after that (a disk stuck past STOP_WAIT_MS) keeps its
     * request, its thread's state and f: left, not freed under the writer.
     */
    /*
     * A done that has pushed its answer (sent by a thread now gone) may not
     * have let go of f yet: a moment for it, so that an answered POST is
     * not told as unanswered and f not left behind.
     */
    for (int i = 0; i < 100 && atomic_load_explicit(&f->held, memory_order_acquire) > 0; i++)
        usleep(10000);
    bool held = atomic_load_explicit(&f->held, memory_order_acquire) > 0;
    if (held)
        log_warn(h->a->lg, "http: %u POSTs still wait for the POST log at stop: their "
                 "connections are closed unanswered", atomic_load(&f->held));
    /* Its connections that MHD never took: closed here, MHD's by MHD_stop_daemon. */
    for (;;) {
        pthread_mutex_lock(&h->conns_lock);
        struct request *rq = h->conns;
        while (rq != NULL && !rq->fast)
            rq = rq->next;
        pthread_mutex_unlock(&h->conns_lock);
        if (rq == NULL)
            break;
        int fd = rq->fd;
        if (held && rq->parked) {
            /* Out of the list, open no more, and kept: its done may still come. */
            http_conns_remove(h, rq);
            rq->fast = false;
            atomic_fetch_sub(&h->live, 1);
            shutdown(fd, SHUT_RDWR);
            continue;           /* its fd stays open: rq's done must not meet a reused fd */
        }
        conn_forget(h, rq);
        close(fd);
    }
    if (f->stop_fd >= 0)
        close(f->stop_fd);
    h->fast = NULL;
    if (held)
        return;                 /* f stays: a done still to come reaches it (not h) */
    for (unsigned i = 0; i < f->n; i++)
        if (f->t[i].ready_fd >= 0)
            close(f->t[i].ready_fd);
    free(f->t);
    free(f);
}
