/*
 * tcprelay: a TCP-to-unix-socket relay that can freeze like a silent network
 * partition, for the tests: packets stop, nothing is closed, no RST.
 *
 *   tcprelay PORTFILE UNIX-SOCKET [PORT]
 *   tcprelay PORTFILE tcp:TARGET-PORT [PORT]     (to 127.0.0.1:TARGET-PORT)
 *
 * Listens on 127.0.0.1 (PORT, or a free port; written to PORTFILE once
 * listening: a relay started again on the port of one that exited stands
 * where it stood, for a client that reconnects to the same address) and
 * relays each connection to UNIX-SOCKET (e.g. PostgreSQL's
 * /dir/.s.PGSQL.5432).  SIGUSR1 freezes: no byte moves in either direction
 * and new connections are neither accepted nor refused (they wait in the
 * backlog), exactly what a client sees when a firewall starts dropping
 * packets.  SIGUSR2 thaws: what was queued flows again.  SIGHUP closes the
 * listening socket: new connections are refused while those open go on.
 * SIGTERM exits.
 *
 * One connection's answers held, the others flowing (the verifier's
 * lookup answered by the server but not yet read: tests/adaptive.test):
 * with TCPRELAY_TAG set, a connection whose client sends those bytes in
 * its first 8 KiB (libpq's startup packet names application_name) is
 * tagged; SIGWINCH arms the hold: the next bytes a tagged client sends
 * that contain TCPRELAY_HOLD_AFTER are relayed, and from then on nothing
 * the server sends on that connection moves until SIGUSR2.  PORTFILE.held
 * is created when the hold begins.
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_PAIRS 64

static volatile sig_atomic_t frozen, done, refuse, armed, thawed;

static void on_signal(int sig)
{
    if (sig == SIGUSR1)
        frozen = 1;
    else if (sig == SIGUSR2)
        frozen = 0, armed = 0, thawed = 1;
    else if (sig == SIGHUP)
        refuse = 1;
    else if (sig == SIGWINCH)
        armed = 1;
    else
        done = 1;
}

struct pair {
    int a, b;           /* client side, server side; -1: unused */
    size_t seen;        /* client bytes looked at for the tag */
    bool tagged, held;
};

/*
 * The target: a unix socket's path, or "tcp:PORT" for 127.0.0.1:PORT (a
 * daemon on a TCP port: tests/fleet.test puts a relay between a replica
 * and its upstream).
 */
static int connect_unix(const char *path)
{
    if (strncmp(path, "tcp:", 4) == 0) {
        struct sockaddr_in in = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                                  .sin_port = htons((uint16_t)atoi(path + 4)) };
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd >= 0 && connect(fd, (struct sockaddr *)&in, sizeof in) != 0) {
            close(fd);
            fd = -1;
        }
        return fd;
    }
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    if (strlen(path) >= sizeof sa.sun_path)
        return -1;
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static const char *tag, *hold_after, *held_file;

/* Move what is readable from one side to the other; false when either side ended. */
static bool pump(int from, int to, struct pair *p)
{
    char buf[65536];
    ssize_t n = read(from, buf, sizeof buf);
    if (n <= 0)
        return false;
    if (p != NULL && tag != NULL && !p->tagged && p->seen < 8192) {
        p->tagged = memmem(buf, (size_t)n, tag, strlen(tag)) != NULL;
        p->seen += (size_t)n;
    }
    if (p != NULL && p->tagged && armed && hold_after != NULL
        && memmem(buf, (size_t)n, hold_after, strlen(hold_after)) != NULL) {
        p->held = true;
        armed = 0;
        FILE *f = fopen(held_file, "w");
        if (f != NULL)
            fclose(f);
    }
    for (ssize_t off = 0; off < n;) {
        ssize_t w = write(to, buf + off, (size_t)(n - off));
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return false;
        }
        off += w;
    }
    return true;
}

int main(int argc, char **argv)
{
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: tcprelay PORTFILE UNIX-SOCKET [PORT]\n");
        return 2;
    }
    struct sigaction sa = { .sa_handler = on_signal };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGWINCH, &sa, NULL);
    tag = getenv("TCPRELAY_TAG");
    hold_after = getenv("TCPRELAY_HOLD_AFTER");
    static char held_path[4096];
    snprintf(held_path, sizeof held_path, "%s.held", argv[1]);
    held_file = held_path;
    signal(SIGPIPE, SIG_IGN);

    int ls = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in in = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                              .sin_port = htons(argc == 4 ? (uint16_t)atoi(argv[3]) : 0) };
    socklen_t len = sizeof in;
    if (bind(ls, (struct sockaddr *)&in, sizeof in) != 0 || listen(ls, 64) != 0
        || getsockname(ls, (struct sockaddr *)&in, &len) != 0) {
        perror("tcprelay: listen");
        return 1;
    }
    FILE *pf = fopen(argv[1], "w");
    if (pf == NULL || fprintf(pf, "%u\n", ntohs(in.sin_port)) < 0 || fclose(pf) != 0) {
        perror("tcprelay: port file");
        return 1;
    }

    struct pair pairs[MAX_PAIRS];
    for (int i = 0; i < MAX_PAIRS; i++)
        pairs[i] = (struct pair){ .a = -1, .b = -1 };
    while (!done) {
        if (thawed) {
            thawed = 0;
            for (int i = 0; i < MAX_PAIRS; i++)
                pairs[i].held = false;
        }
        struct pollfd pfd[1 + 2 * MAX_PAIRS];
        int n = 0;
        if (refuse && ls >= 0) {
            close(ls);
            ls = -1;
        }
        /* pfd[0] is the listening socket (fd -1, ignored by poll, once closed). */
        if (!frozen)
            pfd[n++] = (struct pollfd){ .fd = ls, .events = POLLIN };
        for (int i = 0; i < MAX_PAIRS && !frozen; i++)
            if (pairs[i].a >= 0) {
                pfd[n++] = (struct pollfd){ .fd = pairs[i].a, .events = POLLIN };
                /* A held connection's server side is not read: its bytes wait in the socket. */
                pfd[n++] = (struct pollfd){ .fd = pairs[i].held ? -1 : pairs[i].b, .events = POLLIN };
            }
        /* Frozen: wait for a signal and touch nothing. */
        int pr = poll(pfd, (nfds_t)n, 200);
        if (pr <= 0 || frozen)
            continue;
        int k = 1;
        if (ls >= 0 && (pfd[0].revents & POLLIN)) {
            int c = accept(ls, NULL, NULL);
            int s = c >= 0 ? connect_unix(argv[2]) : -1;
            int slot = -1;
            for (int i = 0; i < MAX_PAIRS && slot < 0; i++)
                if (pairs[i].a < 0)
                    slot = i;
            if (c >= 0 && s >= 0 && slot >= 0) {
                pairs[slot] = (struct pair){ .a = c, .b = s };
            } else {
                if (c >= 0)
                    close(c);
                if (s >= 0)
                    close(s);
            }
        }
        for (; k < n; k += 2) {
            int i;
            for (i = 0; i < MAX_PAIRS && pairs[i].a != pfd[k].fd; i++)
                ;
            if (i == MAX_PAIRS)
                continue;
            bool ok = true;
            if (pfd[k].revents & (POLLIN | POLLHUP | POLLERR))
                ok = pump(pairs[i].a, pairs[i].b, &pairs[i]);
            if (ok && (pfd[k + 1].revents & (POLLIN | POLLHUP | POLLERR)))
                ok = pump(pairs[i].b, pairs[i].a, NULL);
            if (!ok) {
                close(pairs[i].a);
                close(pairs[i].b);
                pairs[i] = (struct pair){ .a = -1, .b = -1 };
            }
        }
    }
    return 0;
}
