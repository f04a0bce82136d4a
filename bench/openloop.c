/*
 * openloop: an open-loop HTTP load generator for bench/attack.  Requests are
 * due at fixed times (a constant rate per step of a schedule), whether or not
 * earlier ones have been answered, and each latency is taken from the time
 * the request was due, not from when a free connection let it go: a server
 * that stalls is charged for every request that waited behind the stall (no
 * coordinated omission, as wrk2 does it; wrk2 is not in Debian).
 *
 *   openloop -p PORT -r RATE:SECONDS[,RATE:SECONDS...] [-a ADDR] [-P PREFIX]
 *            [-l LO] [-u HI] [-i IDFILE] [-c CONNS] [-t TIMEOUT_MS] [-s SEED] [-o FILE]
 *
 * GET PREFIX<id> with ids uniform in [LO, HI] (or, with -i, the ids of
 * IDFILE, one a line, round robin: an attacker repeating the few ids it
 * found answer "maybe") over CONNS keep-alive HTTP/1.1
 * connections (one request in flight on each; a due request waits for the
 * first free one; none is sent 100 ms after the schedule's end, and the
 * answers outstanding are awaited up to the timeout).  A rate of 0 is a
 * pause.  Prints one summary line;
 * with -o, one line per request: "<due ms since start> <latency us> <status>",
 * status 0 for a timeout, a closed connection or a request never sent.  Its
 * start_epoch is the start as a CLOCK_REALTIME epoch, so that
 * other samples can be put on the same time axis.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define MAX_STEPS 64
#define MAX_CONNS 4096
#define MAX_REQUESTS 50000000ULL
#define RBUF 16384

enum cstate { C_DOWN, C_CONNECTING, C_IDLE, C_BUSY };

struct conn {
    int fd;
    enum cstate state;
    uint64_t req;           /* the request in flight (C_CONNECTING, C_BUSY) */
    int64_t sent_ns;        /* when it went out, for the timeout */
    char wbuf[512];
    size_t wlen, woff;
    char rbuf[RBUF];
    size_t rlen;
};

struct step {
    double rate;
    double seconds;
    uint64_t first, count;  /* request indexes of this step */
    int64_t start_ns;       /* offset from the run's start */
};

static struct step steps[MAX_STEPS];
static int nsteps;
static uint64_t planned;
static int64_t *lat_ns;     /* per request: latency, or -1 not answered */
static uint16_t *status;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The time request i is due, relative to the start. */
static int64_t due_ns(uint64_t i)
{
    int k = 0;
    while (k + 1 < nsteps && i >= steps[k + 1].first)
        k++;
    return steps[k].start_ns + (int64_t)((double)(i - steps[k].first) * 1e9 / steps[k].rate);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static uint64_t rng_state;
/* -i: the ids to repeat, round robin; NULL: random ids in [LO, HI]. */
static char **fixed_ids;
static size_t n_fixed;

/* The ids of path, one a line (false: unreadable or none). */
static bool read_ids(const char *path)
{
    FILE *f = fopen(path, "r");
    char line[256];
    size_t cap = 0;
    while (f != NULL && fgets(line, sizeof line, f) != NULL) {
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] == '\0')
            continue;
        if (n_fixed == cap) {
            cap = cap ? 2 * cap : 64;
            char **n = realloc(fixed_ids, cap * sizeof *n);
            if (n == NULL)
                break;
            fixed_ids = n;
        }
        if ((fixed_ids[n_fixed] = strdup(line)) != NULL)
            n_fixed++;
    }
    if (f != NULL)
        fclose(f);
    return n_fixed > 0;
}
static uint64_t rng(void)
{
    /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ULL;
}

static bool parse_schedule(char *arg)
{
    int64_t t = 0;
    for (char *tok = strtok(arg, ","); tok != NULL; tok = strtok(NULL, ",")) {
        char *colon = strchr(tok, ':'), *end;
        if (colon == NULL || nsteps == MAX_STEPS)
            return false;
        double r = strtod(tok, &end), s = strtod(colon + 1, &end);
        if (r < 0 || s <= 0 || *end != '\0')
            return false;
        steps[nsteps] = (struct step){ .rate = r, .seconds = s, .first = planned,
                                       .count = (uint64_t)(r * s), .start_ns = t };
        planned += steps[nsteps].count;
        t += (int64_t)(s * 1e9);
        nsteps++;
    }
    /* Steps without requests still move the clock: make due_ns skip them. */
    return nsteps > 0 && planned <= MAX_REQUESTS;
}

static int64_t schedule_end_ns(void)
{
    return steps[nsteps - 1].start_ns + (int64_t)(steps[nsteps - 1].seconds * 1e9);
}

static struct sockaddr_in addr;
static int epfd;

static void conn_close(struct conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->state = C_DOWN;
    c->rlen = 0;
}

static bool conn_open(struct conn *c)
{
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        return false;
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT, .data.ptr = c };
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
        conn_close(c);
        return false;
    }
    if (connect(c->fd, (struct sockaddr *)&addr, sizeof addr) != 0 && errno != EINPROGRESS) {
        conn_close(c);
        return false;
    }
    c->state = C_CONNECTING;
    return true;
}

static void want_out(struct conn *c, bool on)
{
    struct epoll_event ev = { .events = EPOLLIN | (on ? EPOLLOUT : 0), .data.ptr = c };
    epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

static uint64_t answered, failed;

static void finish(struct conn *c, unsigned code, int64_t t)
{
    lat_ns[c->req] = t - due_ns(c->req);
    status[c->req] = (uint16_t)code;
    if (code == 0)
        failed++;
    else
        answered++;
}

/* Write what is left of c's request; false when the connection failed. */
static bool flush(struct conn *c)
{
    while (c->woff < c->wlen) {
        ssize_t n = write(c->fd, c->wbuf + c->woff, c->wlen - c->woff);
        if (n < 0 && errno == EAGAIN) {
            want_out(c, true);
            return true;
        }
        if (n <= 0)
            return false;
        c->woff += (size_t)n;
    }
    want_out(c, false);
    return true;
}

/* Parse a complete response at the start of rbuf: its length, status and
 * whether the server will close; 0 when more bytes are needed, -1 when it
 * is not something this client reads (chunked, no length). */
static long parse_response(struct conn *c, unsigned *code, bool *close_after)
{
    char *end = memmem(c->rbuf, c->rlen, "\r\n\r\n", 4);
    if (end == NULL)
        return c->rlen == RBUF ? -1 : 0;
    size_t head = (size_t)(end - c->rbuf) + 4;
    if (c->rlen < 12 || memcmp(c->rbuf, "HTTP/1.", 7) != 0)
        return -1;
    *code = (unsigned)atoi(c->rbuf + 9);
    long body = -1;
    *close_after = false;
    for (char *l = memchr(c->rbuf, '\n', head); l != NULL && l + 1 < end; l = memchr(l + 1, '\n', (size_t)(end - l))) {
        l++;
        if (strncasecmp(l, "Content-Length:", 15) == 0)
            body = atol(l + 15);
        else if (strncasecmp(l, "Connection:", 11) == 0 && strncasecmp(l + 11 + strspn(l + 11, " "), "close", 5) == 0)
            *close_after = true;
    }
    if (body < 0)
        return -1;
    if (c->rlen < head + (size_t)body)
        return 0;
    return (long)(head + (size_t)body);
}

int main(int argc, char **argv)
{
    const char *ip = "127.0.0.1", *prefix = "/", *out = NULL;
    unsigned long long lo = 1, hi = 1000000;
    int port = 0, nconns = 16, opt;
    long timeout_ms = 10000;
    char *schedule = NULL;
    rng_state = 0x9e3779b97f4a7c15ULL ^ (uint64_t)getpid();

    while ((opt = getopt(argc, argv, "a:p:P:l:u:i:r:c:t:s:o:")) != -1) {
        switch (opt) {
        case 'a': ip = optarg; break;
        case 'p': port = atoi(optarg); break;
        case 'P': prefix = optarg; break;
        case 'l': lo = strtoull(optarg, NULL, 10); break;
        case 'u': hi = strtoull(optarg, NULL, 10); break;
        case 'i':
            if (!read_ids(optarg)) {
                fprintf(stderr, "openloop: -i %s: no ids\n", optarg);
                return 2;
            }
            break;
        case 'r': schedule = optarg; break;
        case 'c': nconns = atoi(optarg); break;
        case 't': timeout_ms = atol(optarg); break;
        case 's': rng_state = strtoull(optarg, NULL, 10) * 0x9e3779b97f4a7c15ULL | 1; break;
        case 'o': out = optarg; break;
        default:
            fprintf(stderr, "usage: openloop -p PORT -r RATE:SECONDS[,...] [-a ADDR] [-P PREFIX] "
                            "[-l LO] [-u HI] [-i IDFILE] [-c CONNS] [-t TIMEOUT_MS] [-s SEED] "
                            "[-o FILE]\n");
            return 2;
        }
    }
    if (port <= 0 || port > 65535 || schedule == NULL || !parse_schedule(schedule) || lo > hi ||
        nconns < 1 || nconns > MAX_CONNS || timeout_ms < 1 || strlen(prefix) > 200) {
        fprintf(stderr, "openloop: bad arguments (-p, -r RATE:SECONDS,..., -c 1..%d, at most %llu requests)\n",
                MAX_CONNS, MAX_REQUESTS);
        return 2;
    }
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, ip, &addr.sin_addr) != 1) {
        fprintf(stderr, "openloop: -a wants an IPv4 address\n");
        return 2;
    }
    lat_ns = malloc((planned + 1) * sizeof *lat_ns);
    status = calloc(planned + 1, sizeof *status);
    struct conn *conns = calloc((size_t)nconns, sizeof *conns);
    epfd = epoll_create1(EPOLL_CLOEXEC);
    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (lat_ns == NULL || status == NULL || conns == NULL || epfd < 0 || tfd < 0) {
        perror("openloop");
        return 1;
    }
    for (uint64_t i = 0; i < planned; i++)
        lat_ns[i] = -1;
    struct epoll_event tev = { .events = EPOLLIN, .data.ptr = NULL };
    epoll_ctl(epfd, EPOLL_CTL_ADD, tfd, &tev);

    /* Open every connection before the clock starts. */
    for (int i = 0; i < nconns; i++) {
        conns[i].fd = -1;
        if (!conn_open(&conns[i])) {
            perror("openloop: connect");
            return 1;
        }
    }
    int ready = 0;
    for (int tries = 0; ready < nconns && tries < 1000; tries++) {
        struct epoll_event evs[256];
        int n = epoll_wait(epfd, evs, 256, 10);
        for (int i = 0; i < n; i++) {
            struct conn *c = evs[i].data.ptr;
            if (c == NULL || c->state != C_CONNECTING)
                continue;
            int err = 0;
            socklen_t len = sizeof err;
            getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
            if (err != 0) {
                fprintf(stderr, "openloop: connect: %s\n", strerror(err));
                return 1;
            }
            c->state = C_IDLE;
            want_out(c, false);
            ready++;
        }
    }
    if (ready < nconns) {
        fprintf(stderr, "openloop: only %d of %d connections opened in 10 s\n", ready, nconns);
        return 1;
    }

    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    int64_t t0 = now_ns();
    int64_t end = schedule_end_ns(), deadline = end + timeout_ms * 1000000LL;
    uint64_t due = 0, next = 0, unsent = 0, bad = 0;

    for (;;) {
        int64_t t = now_ns() - t0;
        while (due < planned && due_ns(due) <= t)
            due++;
        /* Hand due requests to free connections, oldest first; none from
         * 100 ms after the schedule's end (those left count as never sent). */
        for (int i = 0; i < nconns && next < due && t <= end + 100000000; i++) {
            struct conn *c = &conns[i];
            if (c->state != C_IDLE && c->state != C_DOWN)
                continue;
            c->req = next++;
            if (fixed_ids != NULL)
                c->wlen = (size_t)snprintf(c->wbuf, sizeof c->wbuf,
                                           "GET %s%s HTTP/1.1\r\nHost: %s\r\n\r\n", prefix,
                                           fixed_ids[c->req % n_fixed], ip);
            else
                c->wlen = (size_t)snprintf(c->wbuf, sizeof c->wbuf,
                                           "GET %s%llu HTTP/1.1\r\nHost: %s\r\n\r\n", prefix,
                                           lo + rng() % (hi - lo + 1), ip);
            c->woff = 0;
            c->sent_ns = t;
            if (c->state == C_DOWN) {
                if (!conn_open(c)) {
                    finish(c, 0, t);
                    continue;
                }
            } else {
                c->state = C_BUSY;
                if (!flush(c)) {
                    finish(c, 0, t);
                    conn_close(c);
                }
            }
        }
        /* Timeouts. */
        bool busy = false;
        for (int i = 0; i < nconns; i++) {
            struct conn *c = &conns[i];
            if (c->state == C_BUSY || c->state == C_CONNECTING) {
                if (t - c->sent_ns > timeout_ms * 1000000LL) {
                    finish(c, 0, t);
                    conn_close(c);
                } else {
                    busy = true;
                }
            }
        }
        if (((next == planned || t > end + 100000000) && !busy) || t > deadline)
            break;

        /* Sleep until the next request is due, or something happens. */
        if (due < planned && next == due) {
            int64_t at = t0 + due_ns(due);
            struct itimerspec its = { .it_value = { at / 1000000000, at % 1000000000 } };
            timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
        }
        struct epoll_event evs[256];
        int n = epoll_wait(epfd, evs, 256, 100);
        t = now_ns() - t0;
        for (int i = 0; i < n; i++) {
            struct conn *c = evs[i].data.ptr;
            if (c == NULL) {
                uint64_t x;
                while (read(tfd, &x, sizeof x) > 0) {}
                continue;
            }
            if (c->state == C_CONNECTING) {
                int err = 0;
                socklen_t len = sizeof err;
                getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
                if (err != 0 || (evs[i].events & (EPOLLERR | EPOLLHUP))) {
                    finish(c, 0, t);
                    conn_close(c);
                    continue;
                }
                c->state = C_BUSY;
                if (!flush(c)) {
                    finish(c, 0, t);
                    conn_close(c);
                }
                continue;
            }
            if (c->state == C_BUSY && (evs[i].events & EPOLLOUT) && c->woff < c->wlen && !flush(c)) {
                finish(c, 0, t);
                conn_close(c);
                continue;
            }
            if (!(evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
                continue;
            ssize_t r = read(c->fd, c->rbuf + c->rlen, RBUF - c->rlen);
            if (r < 0 && errno == EAGAIN)
                continue;
            if (r <= 0 || c->state != C_BUSY) {
                /* Closed (or bytes nobody asked for): the request in flight fails. */
                if (c->state == C_BUSY)
                    finish(c, 0, t);
                conn_close(c);
                continue;
            }
            c->rlen += (size_t)r;
            unsigned code;
            bool close_after;
            long len = parse_response(c, &code, &close_after);
            if (len == 0)
                continue;
            if (len < 0) {
                bad++;
                finish(c, 0, t);
                conn_close(c);
                continue;
            }
            finish(c, code, t);
            memmove(c->rbuf, c->rbuf + len, c->rlen - (size_t)len);
            c->rlen -= (size_t)len;
            c->state = C_IDLE;
            if (close_after)
                conn_close(c);
        }
    }
    /* Past the deadline: what is still in flight has timed out. */
    for (int i = 0; i < nconns; i++) {
        if (conns[i].state == C_BUSY || conns[i].state == C_CONNECTING)
            finish(&conns[i], 0, now_ns() - t0);
        conn_close(&conns[i]);
    }
    unsent = planned - next;

    /* Summary over everything answered. */
    uint64_t n2 = 0, codes[6] = { 0 };
    int64_t *sorted = malloc((answered + 1) * sizeof *sorted);
    for (uint64_t i = 0; i < planned && sorted != NULL; i++) {
        if (status[i] != 0) {
            sorted[n2++] = lat_ns[i];
            codes[status[i] / 100 < 6 ? status[i] / 100 : 0]++;
        }
    }
    if (sorted != NULL)
        qsort(sorted, n2, sizeof *sorted, cmp_i64);
#define PCT(p) (n2 ? sorted[(uint64_t)((double)(n2 - 1) * (p))] / 1000.0 : 0.0)
    printf("openloop: start_epoch=%lld.%09ld planned=%llu answered=%llu failed=%llu unsent=%llu "
           "unparsed=%llu 2xx=%llu 3xx=%llu 4xx=%llu 5xx=%llu rate=%.1f p50_us=%.1f p99_us=%.1f "
           "p999_us=%.1f max_us=%.1f\n",
           (long long)wall.tv_sec, wall.tv_nsec, (unsigned long long)planned,
           (unsigned long long)answered, (unsigned long long)failed, (unsigned long long)unsent,
           (unsigned long long)bad, (unsigned long long)codes[2], (unsigned long long)codes[3],
           (unsigned long long)codes[4], (unsigned long long)codes[5],
           (double)answered / ((double)end / 1e9), PCT(0.5), PCT(0.99), PCT(0.999),
           n2 ? sorted[n2 - 1] / 1000.0 : 0.0);
    if (out != NULL) {
        FILE *f = fopen(out, "w");
        if (f == NULL) {
            perror(out);
            return 1;
        }
        for (uint64_t i = 0; i < planned; i++)
            fprintf(f, "%.3f %.1f %u\n", (double)due_ns(i) / 1e6,
                    lat_ns[i] >= 0 ? (double)lat_ns[i] / 1e3 : -1.0, status[i]);
        if (fclose(f) != 0) {
            perror(out);
            return 1;
        }
    }
    free(sorted);
    free(lat_ns);
    free(status);
    free(conns);
    return failed + unsent + bad > 0 ? 3 : 0;
}
