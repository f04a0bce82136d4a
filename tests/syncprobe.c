/*
 * syncprobe: drives a running bloomguard and its PostgreSQL table to check
 * the promises of the change feed, with real HTTP and real SQL.
 *
 *   syncprobe latency -n N [-r RATE] URL...
 *                                   insert N rows with SQL (no POST) and time
 *                                   how long from each commit's
 *                                   acknowledgement until every URL answers
 *                                   200; with RATE, one insert every 1/RATE
 *                                   s (else each as soon as the previous one
 *                                   is seen).  An id some URL answers 200
 *                                   before its insert (a false positive, or
 *                                   a degraded daemon's "maybe") is left
 *                                   out of the figures and counted.
 *   syncprobe race -r R -s S URL    R rebuilds in a row while one client
 *                                   inserts through POST (half of them also
 *                                   with SQL) and another
 *                                   through SQL only, and a checker re-checks
 *                                   every acknowledged id: any 404 for an
 *                                   acknowledged id is a false negative
 *   syncprobe stale -m MAX -t SECS -f STOPFILE -u URL
 *                                   docs/contract.md's promise through faults the
 *                                   test makes meanwhile: insert a row with
 *                                   SQL every 20 ms (reconnecting whenever
 *                                   PostgreSQL is away) and ask GET /exists
 *                                   and /auth (template /user/get/{id}) about
 *                                   recent and older rows every 10 ms; a 404
 *                                   or deny for a row whose commit was
 *                                   acknowledged more than MAX seconds ago
 *                                   breaks the contract.  Runs until STOPFILE
 *                                   exists (or SECS pass); prints the longest
 *                                   false-negative window (acknowledged to
 *                                   last 404) and the answers it got.
 *
 * The table is users(id text primary key, name text) of the PG* database.
 * Exit status 0 when every promise held, 1 otherwise.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---- a minimal keep-alive HTTP/1.1 client for loopback --------------- */

struct conn {
    char host[64];
    int port;
    int fd;
    char buf[1 << 16];
    size_t have;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void msleep(unsigned ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

static bool parse_url(const char *url, struct conn *c)
{
    memset(c, 0, sizeof(*c));
    c->fd = -1;
    return sscanf(url, "http://%63[^:]:%d", c->host, &c->port) == 2;
}

static bool conn_open(struct conn *c)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)c->port) };
    if (inet_pton(AF_INET, c->host, &sa.sin_addr) != 1)
        return false;
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct timeval tv = { 10, 0 };
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(c->fd);
        c->fd = -1;
        return false;
    }
    c->have = 0;
    return true;
}

static void conn_close(struct conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
}

/*
 * One request; returns the status (0 on a transport error, after one retry
 * on a fresh connection) and copies up to bodycap-1 bytes of body.
 */
static int request(struct conn *c, const char *method, const char *path, const char *ctype,
                   const char *body, char *out, size_t outcap)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        if (c->fd < 0 && !conn_open(c))
            continue;
        char head[512];
        size_t blen = body ? strlen(body) : 0;
        int hl = snprintf(head, sizeof head,
                          "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n\r\n",
                          method, path, c->host, ctype ? ctype : "application/json", blen);
        if (send(c->fd, head, (size_t)hl, MSG_NOSIGNAL) != hl
            || (blen && send(c->fd, body, blen, MSG_NOSIGNAL) != (ssize_t)blen)) {
            conn_close(c);
            continue;
        }
        /* Read headers, then Content-Length bytes. */
        c->have = 0;
        char *end = NULL;
        while (end == NULL) {
            if (c->have == sizeof c->buf - 1)
                break;
            ssize_t n = recv(c->fd, c->buf + c->have, sizeof c->buf - 1 - c->have, 0);
            if (n <= 0)
                break;
            c->have += (size_t)n;
            c->buf[c->have] = '\0';
            end = strstr(c->buf, "\r\n\r\n");
        }
        if (end == NULL) {
            conn_close(c);
            continue;
        }
        int status = 0;
        sscanf(c->buf, "HTTP/1.1 %d", &status);
        size_t clen = 0;
        char *cl = strcasestr(c->buf, "\r\nContent-Length:");
        if (cl && cl < end)
            clen = strtoul(cl + 17, NULL, 10);
        size_t hdr = (size_t)(end + 4 - c->buf);
        char *bodybuf = malloc(clen + 1);
        size_t got = c->have - hdr;
        if (got > clen)
            got = clen;
        memcpy(bodybuf, c->buf + hdr, got);
        while (got < clen) {
            ssize_t n = recv(c->fd, bodybuf + got, clen - got, 0);
            if (n <= 0)
                break;
            got += (size_t)n;
        }
        bodybuf[got] = '\0';
        if (out && outcap) {
            snprintf(out, outcap, "%s", bodybuf);
        }
        free(bodybuf);
        if (got < clen) {
            conn_close(c);
            continue;
        }
        if (strcasestr(c->buf, "Connection: close"))
            conn_close(c);
        return status;
    }
    return 0;
}

static int get_exists(struct conn *c, const char *id)
{
    char path[256];
    snprintf(path, sizeof path, "/exists/%s", id);   /* ids here are URL-safe */
    return request(c, "GET", path, NULL, NULL, NULL, 0);
}

static PGconn *pg(void)
{
    PGconn *p = PQconnectdb("");
    if (PQstatus(p) != CONNECTION_OK) {
        fprintf(stderr, "syncprobe: cannot connect to PostgreSQL: %s", PQerrorMessage(p));
        exit(2);
    }
    return p;
}

static bool sql_insert(PGconn *p, const char *id)
{
    const char *params[1] = { id };
    PGresult *r = PQexecParams(p, "INSERT INTO users (id, name) VALUES ($1, 'probe')", 1, NULL,
                               params, NULL, NULL, 0);
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok)
        fprintf(stderr, "syncprobe: insert %s: %s", id, PQerrorMessage(p));
    PQclear(r);
    return ok;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ---- latency ----------------------------------------------------------- */

/* Whether some URL already answers 200 for id (so its latency means nothing). */
static bool any_200(struct conn *cs, int nurls, const char *id)
{
    for (int u = 0; u < nurls; u++)
        if (get_exists(&cs[u], id) == 200)
            return true;
    return false;
}

static int cmd_latency(int n, double rate, int nurls, char **urls)
{
    PGconn *p = pg();
    struct conn *cs = calloc((size_t)nurls, sizeof(*cs));
    double *lat = calloc((size_t)n * (size_t)nurls, sizeof(double));
    int late = 0, k = 0, early = 0;
    double start = now_s();
    for (int u = 0; u < nurls; u++)
        if (!parse_url(urls[u], &cs[u])) {
            fprintf(stderr, "syncprobe: bad url %s\n", urls[u]);
            return 2;
        }
    char tag[32];
    snprintf(tag, sizeof tag, "lat%ld-%d", (long)time(NULL), getpid());
    for (int i = 0; i < n; i++) {
        char id[96];
        snprintf(id, sizeof id, "%s-%d", tag, i);
        if (rate > 0) {
            double wait = start + i / rate - now_s();
            if (wait > 0)
                msleep((unsigned)(wait * 1e3));
        }
        bool skip = any_200(cs, nurls, id);
        if (!sql_insert(p, id))
            return 2;
        double t0 = now_s();
        if (skip) {
            early++;
            continue;
        }
        for (int u = 0; u < nurls; u++) {
            int st;
            while ((st = get_exists(&cs[u], id)) != 200 && now_s() - t0 < 5.0)
                msleep(1);
            double dt = now_s() - t0;
            lat[k++] = dt;
            if (st != 200 || dt > 1.0) {
                late++;
                fprintf(stderr, "syncprobe: %s on %s: status %d after %.3f s\n", id, urls[u], st, dt);
            }
        }
    }
    if (k == 0) {
        fprintf(stderr, "syncprobe: every id answered 200 before its insert\n");
        return 2;
    }
    qsort(lat, (size_t)k, sizeof(double), cmp_double);
    printf("syncprobe latency: rows=%d daemons=%d p50=%.1fms p99=%.1fms max=%.1fms over_1s=%d "
           "early_200=%d\n",
           n, nurls, lat[k / 2] * 1e3, lat[(k * 99) / 100] * 1e3, lat[k - 1] * 1e3, late, early);
    PQfinish(p);
    free(lat);
    free(cs);
    return late == 0 ? 0 : 1;
}

/* ---- race -------------------------------------------------------------- */

#define MAX_IDS 200000

struct shared {
    const char *url;
    atomic_bool stop;
    pthread_mutex_t mu;
    char (*ids)[48];            /* acknowledged ids */
    double *acked_at;           /* when acknowledged */
    bool *via_post;             /* 200 promised at once (POSTed) */
    size_t n;
    atomic_ulong false_neg, checks, post_errors, sql_errors;
};

static void ack(struct shared *s, const char *id, bool post)
{
    pthread_mutex_lock(&s->mu);
    if (s->n < MAX_IDS) {
        snprintf(s->ids[s->n], sizeof s->ids[0], "%s", id);
        s->acked_at[s->n] = now_s();
        s->via_post[s->n] = post;
        s->n++;
    }
    pthread_mutex_unlock(&s->mu);
}

/*
 * POST /ids then commit the row, as an application that warms the guard
 * first; every other id is only POSTed, never written to the table, and must
 * survive every rebuild all the same.
 */
static void *post_writer(void *arg)
{
    struct shared *s = arg;
    struct conn c;
    parse_url(s->url, &c);
    PGconn *p = pg();
    char id[48], body[96];
    for (unsigned long i = 0; !atomic_load(&s->stop); i++) {
        snprintf(id, sizeof id, "race-post-%lu-%d", i, getpid());
        snprintf(body, sizeof body, "{\"id\":\"%s\"}", id);
        if (request(&c, "POST", "/ids", "application/json", body, NULL, 0) != 200) {
            atomic_fetch_add(&s->post_errors, 1);
            continue;
        }
        ack(s, id, true);
        if (i % 2 == 0 && !sql_insert(p, id))
            atomic_fetch_add(&s->sql_errors, 1);
    }
    PQfinish(p);
    conn_close(&c);
    return NULL;
}

/* Plain SQL inserts: visible through NOTIFY, no POST. */
static void *sql_writer(void *arg)
{
    struct shared *s = arg;
    PGconn *p = pg();
    char id[48];
    for (unsigned long i = 0; !atomic_load(&s->stop); i++) {
        snprintf(id, sizeof id, "race-sql-%lu-%d", i, getpid());
        if (sql_insert(p, id))
            ack(s, id, false);
        else
            atomic_fetch_add(&s->sql_errors, 1);
    }
    PQfinish(p);
    return NULL;
}

/*
 * Check every acknowledged id with batched POST /exists.  POSTed ids must be
 * present from the moment they were acknowledged; SQL ids get one second for
 * the notification to arrive, and after that must never be absent again.
 */
static unsigned long check_all(struct shared *s, struct conn *c, bool final, bool verbose)
{
    size_t n;
    pthread_mutex_lock(&s->mu);
    n = s->n;
    pthread_mutex_unlock(&s->mu);
    unsigned long bad = 0;
    size_t bodycap = 16 + n * 52, outcap = 32 + n * 6;
    char *body = malloc(bodycap), *out = malloc(outcap);
    for (size_t start = 0; start < n; start += 10000) {
        size_t end = start + 10000 < n ? start + 10000 : n, used = 0;
        double when = now_s();
        used += (size_t)sprintf(body + used, "{\"ids\":[");
        for (size_t i = start; i < end; i++)
            used += (size_t)sprintf(body + used, "%s\"%s\"", i > start ? "," : "", s->ids[i]);
        sprintf(body + used, "]}");
        int st = request(c, "POST", "/exists", "application/json", body, out, outcap);
        if (st != 200) {
            fprintf(stderr, "syncprobe: POST /exists answered %d\n", st);
            bad++;
            continue;
        }
        const char *q = strchr(out, '[');
        for (size_t i = start; i < end && q; i++) {
            q++;
            bool present = strncmp(q, "true", 4) == 0;
            atomic_fetch_add(&s->checks, 1);
            bool due = final || s->via_post[i] || when - s->acked_at[i] > 1.0;
            if (!present && due) {
                bad++;
                if (verbose && bad <= 20)
                    fprintf(stderr, "syncprobe: FALSE NEGATIVE %s (%s, acknowledged %.3f s before)\n",
                            s->ids[i], s->via_post[i] ? "POST" : "SQL", when - s->acked_at[i]);
            }
            q = strchr(q, ',');
        }
    }
    free(body);
    free(out);
    return bad;
}

static void *checker(void *arg)
{
    struct shared *s = arg;
    struct conn c;
    parse_url(s->url, &c);
    while (!atomic_load(&s->stop)) {
        atomic_fetch_add(&s->false_neg, check_all(s, &c, false, true));
        msleep(20);
    }
    conn_close(&c);
    return NULL;
}

static uint64_t json_u64(const char *body, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(body, pat);
    return p ? strtoull(p + strlen(pat), NULL, 10) : 0;
}

static int cmd_race(int rebuilds, int min_seconds, const char *url)
{
    struct shared s = { .url = url };
    pthread_mutex_init(&s.mu, NULL);
    s.ids = calloc(MAX_IDS, sizeof(*s.ids));
    s.acked_at = calloc(MAX_IDS, sizeof(double));
    s.via_post = calloc(MAX_IDS, sizeof(bool));
    struct conn c;
    if (!parse_url(url, &c)) {
        fprintf(stderr, "syncprobe: bad url %s\n", url);
        return 2;
    }
    pthread_t tw1, tw2, tc;
    pthread_create(&tw1, NULL, post_writer, &s);
    pthread_create(&tw2, NULL, sql_writer, &s);
    pthread_create(&tc, NULL, checker, &s);

    double t0 = now_s();
    int done = 0;
    char out[8192];
    for (int r = 0; r < rebuilds; r++) {
        if (request(&c, "POST", "/reload", "application/json", "", out, sizeof out) != 202) {
            fprintf(stderr, "syncprobe: POST /reload failed: %s\n", out);
            break;
        }
        uint64_t id = json_u64(out, "rebuild_id");
        double tr = now_s();
        while (now_s() - tr < 30.0) {
            request(&c, "GET", "/stats", NULL, NULL, out, sizeof out);
            if (json_u64(out, "completed_id") >= id)
                break;
            msleep(5);
        }
        if (json_u64(out, "completed_id") < id) {
            fprintf(stderr, "syncprobe: rebuild %llu did not complete\n", (unsigned long long)id);
            break;
        }
        done++;
    }
    while (now_s() - t0 < min_seconds)
        msleep(50);
    atomic_store(&s.stop, true);
    pthread_join(tw1, NULL);
    pthread_join(tw2, NULL);
    pthread_join(tc, NULL);
    msleep(1100);                       /* the last SQL rows' notifications */
    unsigned long final_bad = check_all(&s, &c, true, true);
    unsigned long fn = atomic_load(&s.false_neg) + final_bad;
    size_t posted = 0;
    for (size_t i = 0; i < s.n; i++)
        posted += s.via_post[i];
    printf("syncprobe race: rebuilds=%d/%d acknowledged=%zu (post=%zu sql=%zu) checks=%lu "
           "false_negatives=%lu post_errors=%lu sql_errors=%lu seconds=%.1f\n",
           done, rebuilds, s.n, posted, s.n - posted, atomic_load(&s.checks), fn,
           atomic_load(&s.post_errors), atomic_load(&s.sql_errors), now_s() - t0);
    conn_close(&c);
    bool ok = done == rebuilds && fn == 0 && s.n > 0 && atomic_load(&s.post_errors) == 0
              && atomic_load(&s.sql_errors) == 0;
    free(s.ids);
    free(s.acked_at);
    free(s.via_post);
    return ok ? 0 : 1;
}

/* ---- stale ------------------------------------------------------------- */

#define STALE_MAX 200000

struct stale {
    double max_staleness;
    atomic_bool stop;
    atomic_int n;                   /* rows acknowledged: st-0 .. st-(n-1) */
    double acked_at[STALE_MAX];
    atomic_ulong insert_errors;
};

static void *stale_inserter(void *arg)
{
    struct stale *st = arg;
    PGconn *p = NULL;
    while (!atomic_load(&st->stop)) {
        int i = atomic_load(&st->n);
        if (i >= STALE_MAX)
            break;
        if (p == NULL || PQstatus(p) != CONNECTION_OK) {
            PQfinish(p);
            p = PQconnectdb("connect_timeout=2");
            if (PQstatus(p) != CONNECTION_OK) {
                atomic_fetch_add(&st->insert_errors, 1);
                msleep(50);
                continue;
            }
        }
        char id[32];
        snprintf(id, sizeof id, "st-%d", i);
        const char *params[1] = { id };
        PGresult *r = PQexecParams(p, "INSERT INTO users (id, name) VALUES ($1, 'stale')", 1,
                                   NULL, params, NULL, NULL, 0);
        bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
        PQclear(r);
        if (ok) {
            st->acked_at[i] = now_s();          /* the commit is acknowledged now */
            atomic_store(&st->n, i + 1);
        } else {
            atomic_fetch_add(&st->insert_errors, 1);
            PQfinish(p);                        /* the id may still have committed: skip it */
            p = NULL;
            st->acked_at[i] = -1;               /* before n: a reader of n sees it skipped */
            atomic_store(&st->n, i + 1);
        }
        msleep(20);
    }
    PQfinish(p);
    return NULL;
}

static int cmd_stale(double max_staleness, double seconds, const char *stopfile, const char *url)
{
    static struct stale st;
    struct conn c;
    if (!parse_url(url, &c)) {
        fprintf(stderr, "syncprobe: bad URL %s\n", url);
        return 2;
    }
    st.max_staleness = max_staleness;
    pthread_t t;
    pthread_create(&t, NULL, stale_inserter, &st);
    unsigned long checks = 0, ok200 = 0, absent = 0, violations = 0, errors = 0;
    unsigned long degraded = 0;
    double worst = 0, t0 = now_s(), worst_violation = 0;
    unsigned seed = 1;
    char body[256];
    while (now_s() - t0 < seconds && access(stopfile, F_OK) != 0) {
        int n = atomic_load(&st.n);
        /* The newest rows, where a false negative would show first, and a random older one. */
        for (int k = 0; k < 6 && n > 0; k++) {
            int i = k < 5 ? n - 1 - k : (int)(rand_r(&seed) % (unsigned)n);
            if (i < 0 || st.acked_at[i] < 0)
                continue;
            char path[64];
            for (int ep = 0; ep < 2; ep++) {
                snprintf(path, sizeof path, ep ? "/auth/user/get/st-%d" : "/exists/st-%d", i);
                int status = request(&c, "GET", path, NULL, NULL, body, sizeof body);
                double now = now_s();
                checks++;
                if (status == 200 || status == 204) {
                    ok200++;
                    degraded += strstr(body, "\"degraded\":true") != NULL;
                } else if (status == 404 || status == 403) {
                    absent++;
                    double w = now - st.acked_at[i];
                    if (w > worst)
                        worst = w;
                    if (w > max_staleness) {
                        violations++;
                        if (w > worst_violation)
                            worst_violation = w;
                        fprintf(stderr, "syncprobe: %s answered %d %.3f s after its commit\n",
                                path, status, w);
                    }
                } else {
                    errors++;
                    fprintf(stderr, "syncprobe: %s answered %d\n", path, status);
                }
            }
        }
        msleep(10);
    }
    atomic_store(&st.stop, true);
    pthread_join(t, NULL);
    printf("syncprobe stale: rows=%d checks=%lu maybe=%lu (degraded %lu) absent=%lu "
           "longest_false_negative_window=%.3fs max_staleness=%.3fs violations=%lu errors=%lu "
           "insert_errors=%lu seconds=%.1f\n",
           atomic_load(&st.n), checks, ok200, degraded, absent, worst, max_staleness, violations,
           errors, (unsigned long)atomic_load(&st.insert_errors), now_s() - t0);
    return violations == 0 && errors == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc == 10 && strcmp(argv[1], "stale") == 0 && strcmp(argv[2], "-m") == 0
        && strcmp(argv[4], "-t") == 0 && strcmp(argv[6], "-f") == 0 && strcmp(argv[8], "-u") == 0)
        return cmd_stale(atof(argv[3]), atof(argv[5]), argv[7], argv[9]);
    if (argc >= 6 && strcmp(argv[1], "latency") == 0 && strcmp(argv[2], "-n") == 0
        && strcmp(argv[4], "-r") == 0)
        return cmd_latency(atoi(argv[3]), atof(argv[5]), argc - 6, argv + 6);
    if (argc >= 4 && strcmp(argv[1], "latency") == 0 && strcmp(argv[2], "-n") == 0)
        return cmd_latency(atoi(argv[3]), 0, argc - 4, argv + 4);
    if (argc == 7 && strcmp(argv[1], "race") == 0 && strcmp(argv[2], "-r") == 0
        && strcmp(argv[4], "-s") == 0)
        return cmd_race(atoi(argv[3]), atoi(argv[5]), argv[6]);
    fprintf(stderr, "usage: syncprobe latency -n N [-r RATE] URL...\n"
                    "       syncprobe race -r REBUILDS -s MIN_SECONDS URL\n"
                    "       syncprobe stale -m MAX_STALENESS -t SECONDS -f STOPFILE -u URL\n");
    return 2;
}
