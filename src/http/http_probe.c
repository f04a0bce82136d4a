/*
 * How late the server answers now, felt the way a proxy feels it: a thread
 * of the daemon's own asks GET /healthz at the listen address every
 * PROBE_EVERY_MS on a kept-alive connection and times the answer, which
 * waits behind every request the kernel and the server threads hold.  An
 * answer later than HTTP_LATE_AFTER_MS (the proxies' timeout, past which
 * they fail open) or none counts as late.  Each round also puts the open
 * connections and the listen socket's queue in the stats' gauges.  The
 * probe's connection is no client's: the server side knows it by its peer
 * and counts none of it.
 */
#include "http_int.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "http.h"
#include "log.h"
#include "monoclock.h"
#include "stats.h"

static const char probe_request[] = "GET /healthz HTTP/1.1\r\nHost: bloomguard\r\n\r\n";

bool http_probe_is_peer(struct http *h, struct MHD_Connection *c, int fd)
{
    if (h->family == AF_UNIX) {
        /* Only this process connects to its own socket from inside. */
        struct ucred cr;
        socklen_t len = sizeof cr;
        return fd >= 0 && getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0
               && cr.pid == getpid();
    }
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    return ci != NULL && ci->client_addr != NULL && http_probe_port_is(h, ci->client_addr);
}

bool http_probe_port_is(struct http *h, const struct sockaddr *sa)
{
    unsigned port = atomic_load(&h->probe_port);
    if (port == 0)
        return false;
    if (sa->sa_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)(const void *)sa)->sin_port) == port;
    if (sa->sa_family == AF_INET6)
        return ntohs(((const struct sockaddr_in6 *)(const void *)sa)->sin6_port) == port;
    return false;
}

/*
 * A connection to the listen address (a wildcard one as loopback), bound
 * first so that its port is known before the server accepts it.  -1 when
 * it cannot be made within the give-up time.
 */
static int probe_connect(struct http *h)
{
    struct sockaddr_storage ss, me;
    socklen_t len = sizeof ss;
    if (getsockname(h->fd, (struct sockaddr *)&ss, &len) != 0)
        return -1;
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    if (ss.ss_family == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        if (a->sin_addr.s_addr == htonl(INADDR_ANY))
            a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        struct sockaddr_in b = { .sin_family = AF_INET, .sin_addr = a->sin_addr };
        memcpy(&me, &b, sizeof b);
    } else if (ss.ss_family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        if (memcmp(&a->sin6_addr, &in6addr_any, sizeof in6addr_any) == 0)
            a->sin6_addr = in6addr_loopback;
        struct sockaddr_in6 b = { .sin6_family = AF_INET6, .sin6_addr = a->sin6_addr };
        memcpy(&me, &b, sizeof b);
    }
    if (ss.ss_family != AF_UNIX) {
        socklen_t ml = ss.ss_family == AF_INET ? sizeof(struct sockaddr_in)
                                               : sizeof(struct sockaddr_in6);
        if (bind(fd, (struct sockaddr *)&me, ml) != 0 || getsockname(fd, (struct sockaddr *)&me, &ml) != 0)
            goto fail;
        atomic_store(&h->probe_port, ntohs(ss.ss_family == AF_INET
                                           ? ((struct sockaddr_in *)&me)->sin_port
                                           : ((struct sockaddr_in6 *)&me)->sin6_port));
    }
    if (connect(fd, (struct sockaddr *)&ss, len) != 0 && errno != EINPROGRESS)
        goto fail;
    struct pollfd p = { fd, POLLOUT, 0 };
    int err = 0;
    socklen_t el = sizeof err;
    if (poll(&p, 1, PROBE_GIVE_UP_MS) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0
        || err != 0)
        goto fail;
    return fd;
fail:
    close(fd);
    return -1;
}

/* Whether buf (n bytes) holds a whole answer: its head and Content-Length bytes of body. */
static bool whole_answer(const char *buf, size_t n)
{
    const char *end = memmem(buf, n, "\r\n\r\n", 4);
    if (end == NULL)
        return false;
    const char *cl = memmem(buf, (size_t)(end - buf), "Content-Length:", 15);
    unsigned long body = 0;
    if (cl != NULL)
        body = strtoul(cl + 15, NULL, 10);
    return n >= (size_t)(end + 4 - buf) + body;
}

/* The gauges of this round: connections, the listen queue (TCP only). */
static void sample_load(struct http *h)
{
    struct stats *s = h->a->stats;
    stats_gauge_set(s, SG_CONNECTIONS, atomic_load(&h->live));
    stats_gauge_set(s, SG_CONNECTIONS_MAX, h->max_live);
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    /* A listening TCP socket reports its accept queue and backlog in these two fields. */
    if (h->family != AF_UNIX && getsockopt(h->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0) {
        stats_gauge_set(s, SG_LISTEN_QUEUE, ti.tcpi_unacked);
        stats_gauge_set(s, SG_LISTEN_QUEUE_MAX, ti.tcpi_sacked);
    }
}

/*
 * The server answers late, or in time again: the flag queue() reads, and
 * the log, once per spell (and a spell that starts within WARN_WINDOW_S of
 * the last one said is not said again).  The probe thread's only.
 */
static void set_late(struct http *h, bool late)
{
    if (late == atomic_load_explicit(&h->late_now, memory_order_relaxed))
        return;
    atomic_store_explicit(&h->late_now, late, memory_order_relaxed);
    uint64_t now = (uint64_t)monoclock_ns();
    if (late && (h->late_since == 0 || now - h->late_since >= WARN_WINDOW_S * (uint64_t)NS_PER_S)) {
        log_warn(h->a->lg, "http: answering late: a request waits more than %u ms for its answer, "
                 "the time the shipped proxy configurations give /auth before they fail open "
                 "(bloomguard_requests_late_total counts the answers given meanwhile)",
                 HTTP_LATE_AFTER_MS);
        h->late_said = true;
        h->late_since = now;
    } else if (!late && h->late_said) {
        log_info(h->a->lg, "http: answering in time again, %.1f s after answering late began",
                 (double)(now - h->late_since) / 1e9);
        h->late_said = false;
    }
}

/*
 * One probe on *fd (made first if -1): send, then wait for the whole
 * answer in short slices, publishing the wait so far, so a server that is
 * stuck shows a growing delay.  Closes *fd on any failure.
 */
static void probe_once(struct http *h, int *fd)
{
    struct stats *s = h->a->stats;
    const uint64_t late_ns = (uint64_t)HTTP_LATE_AFTER_MS * 1000000;
    uint64_t t0 = (uint64_t)monoclock_ns();
    bool late = false;
    if (*fd < 0)
        *fd = probe_connect(h);
    if (*fd >= 0 && send(*fd, probe_request, sizeof probe_request - 1, MSG_NOSIGNAL)
                    != (ssize_t)(sizeof probe_request - 1)) {
        close(*fd);
        *fd = -1;
    }
    char buf[1024];
    size_t n = 0;
    bool done = false;
    while (!done && !atomic_load(&h->probe_stop)) {
        uint64_t waited = (uint64_t)monoclock_ns() - t0;
        stats_gauge_set(s, SG_ANSWER_DELAY_US, (int64_t)(waited / 1000));
        if (!late && waited >= late_ns) {
            late = true;
            stats_add(s, ST_PROBE_LATE, 1);
            set_late(h, true);
        }
        if (*fd < 0 || waited >= (uint64_t)PROBE_GIVE_UP_MS * 1000000)
            break;
        struct pollfd p = { *fd, POLLIN, 0 };
        if (poll(&p, 1, 100) != 1)
            continue;
        ssize_t r = recv(*fd, buf + n, sizeof buf - 1 - n, 0);
        if (r <= 0)
            break;
        n += (size_t)r;
        done = whole_answer(buf, n) || n >= sizeof buf - 1;
    }
    if (done) {
        uint64_t waited = (uint64_t)monoclock_ns() - t0;
        stats_gauge_set(s, SG_ANSWER_DELAY_US, (int64_t)(waited / 1000));
        /* Answered late between two slices: late all the same. */
        if (!late && waited >= late_ns)
            stats_add(s, ST_PROBE_LATE, 1);
        set_late(h, waited >= late_ns);
        return;
    }
    /* No answer at all (refused, closed, given up): late too, unless we are stopping. */
    if (!atomic_load(&h->probe_stop)) {
        if (!late)
            stats_add(s, ST_PROBE_LATE, 1);
        set_late(h, true);
    }
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

void *http_probe_main(void *arg)
{
    struct http *h = arg;
    int fd = -1;
    while (!atomic_load(&h->probe_stop)) {
        sample_load(h);
        probe_once(h, &fd);
        for (unsigned slept = 0; slept < PROBE_EVERY_MS && !atomic_load(&h->probe_stop); slept += 50)
            usleep(50 * 1000);
    }
    if (fd >= 0)
        close(fd);
    return NULL;
}
