/*
 * What the fast path's files share (http_fast.c: accepting, GETs, the
 * threads; http_fast_post.c: POST /ids, parked while the disk works, and
 * the answers handed back): a thread's state and the steps each calls of
 * the other.  Everything here runs on one fast thread, with its
 * connections, but where a comment says otherwise.
 */
#ifndef BLOOMGUARD_HTTP_FAST_INT_H
#define BLOOMGUARD_HTTP_FAST_INT_H

#include "http_int.h"
#include "live.h"

/* Room for an answer's head and body (bodies that do not fit go to MHD). */
#define FAST_OUT_MAX 65536
#define FAST_STATUS_MAX 256     /* the status line and headers before the body */
#define ACCEPT_BURST 64
#define ACCEPT_PAUSE_MS 100     /* after EMFILE: the listen socket stays readable */

struct fast_thread {
    struct http *h;
    struct http_fast *f;        /* its owner: what a parked POST's done reaches (not h) */
    pthread_t th;
    int ep;
    struct relay *relays;       /* its connections passed on to MHD through a relay */
    bool started;
    bool accept_paused;         /* EMFILE/ENFILE: the listen socket is out of ep for a while */
    uint64_t resume_at;
    struct wire_date date;
    /*
     * Held from a wake's first answer to the end of that wake (fast_settle):
     * the configuration in force and the app the handlers get, entered once
     * for all the requests of a wake rather than once per request (a read
     * section is two locked adds), and the answers counted meanwhile.
     */
    bool in_view;
    struct live_view view;
    struct app app;
    uint64_t answered;
    /*
     * When epoll_wait returned: the start of every answer's time in
     * request_duration_seconds, the bytes of each request having come by
     * then.  One clock read per wake and one per answer, not two per
     * answer around the handler alone (the handler's time left out the
     * reads, the parsing and the requests answered before it in the wake).
     */
    uint64_t wake_ns;
    /*
     * Parked POSTs (a durable insert's answer waiting for the disk): the
     * writer's done pushes each onto ready (lock-free, newest first) and
     * writes ready_fd, in ep, only when the list was empty: one wake a
     * group, not one a POST.  parked: how many of its connections wait
     * (this thread's); stop_at: when a stopping thread stops waiting.
     */
    int ready_fd;
    _Atomic(struct request *) ready;
    unsigned parked;
    bool stopping;
    uint64_t stop_at;
    char in[WIRE_HEAD_MAX];
    char path[WIRE_HEAD_MAX + 1];
    char out[FAST_OUT_MAX];
};

struct http_fast {
    int stop_fd;                /* an eventfd in every thread's epoll: readable = stop */
    /*
     * Parked POSTs whose done has not returned yet: the writer holds their
     * requests (and their thread's ready list), so none may be freed.
     */
    atomic_uint held;
    unsigned n;
    struct fast_thread *t;
};

/* Out of the epoll and the connection list, freed, closed (never a parked one: the writer holds it). */
void http_fast_close(struct fast_thread *ft, struct request *rq);
/* Send what the socket takes; the rest waits in rq->unsent for EPOLLOUT.  False: close it. */
bool http_fast_send(struct fast_thread *ft, struct request *rq, const char *p, size_t len);
/* Whether a taken head (head_len bytes at head) holds right (a route's admin value), as check_write decides. */
bool http_fast_right(const struct http *h, const struct app *a, unsigned right, const char *head,
                     size_t head_len);
/* The configuration and app the wake's answers read, entered once a wake (left at its end). */
struct app *http_fast_view(struct fast_thread *ft);
/*
 * A taken GET head's answer (head_len bytes at head, its target tlen
 * bytes): the status, the answer at *start, *len bytes; 0 for MHD.
 */
unsigned http_fast_prepare(struct fast_thread *ft, const char *head, size_t head_len,
                           const char *target, size_t tlen, char **start, size_t *len);
/* After an answer: the idle limit; or, with a head begun, the header limit. */
/* A taken head's target copied to ft->path, and its route for method (routes_find); NULL: none. */
const struct route *http_fast_route(struct fast_thread *ft, const char *target, size_t tlen,
                                    unsigned method, size_t *rest_off);
/* An answer counted (stats_request, stats_late) as http.c's queue() counts MHD's; t0: its start. */
void http_fast_count(struct fast_thread *ft, unsigned slot, unsigned status, uint64_t t0);
void http_fast_rearm(struct http *h, struct request *rq);
/* An owned connection: what came read, every whole request taken answered.  False: rq is gone. */
bool http_fast_serve_owned(struct fast_thread *ft, struct request *rq);

/*
 * The request at the start of b[0..n) (http_fast_post.c): a GET's or a
 * POST's answer ready at *start (*len bytes), its status returned, or the
 * POST parked (API_LATER), *used bytes taken; 0 for MHD, with *used 0
 * when the head is not whole yet.
 */
unsigned http_fast_take(struct fast_thread *ft, struct request *rq, const char *b, size_t n,
                        size_t *used, char **start, size_t *len);
/* A parked connection that woke its thread: out of the epoll until its answer. */
void http_fast_disarm(struct fast_thread *ft, struct request *rq);
/* The thread's ready eventfd fired: every parked POST done since, answered. */
void http_fast_drain(struct fast_thread *ft);

#endif
