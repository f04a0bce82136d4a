/*
 * The Redis anchor of bench/run: a Bloom filter kept in a Redis bitmap the
 * way blog-post Redis Bloom filters do it (k hash functions over one bitmap,
 * offsets by double hashing h1 + i*h2 mod m), driven over many connections
 * from one thread with hiredis' non-blocking calls and epoll, like wrk.
 *
 *   redis_bloom load  [opts]   build the bitmap of ids 1..N and SET it
 *   redis_bloom check [opts]   positives among ids lo..hi (k GETBITs each)
 *   redis_bloom bench [opts]   lookups/s for one access pattern
 *
 * Options: -H host -P port -K key -m bits -k probes -N ids
 *          -r lo:hi (ids to look up)  -M seq|pipe|bitfield|batch
 *          -c connections  -d seconds  -w warm-up seconds  -b ids per batch
 *          -s random seed
 * bench prints "redis_bloom: mode=... lookups_per_s=... client_cpu=...".
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <xxhash.h>

#define MAX_PROBES 64
#define MAX_KEY 64              /* keeps the hand-built commands below in their buffers */

enum mode { M_SEQ, M_PIPE, M_BITFIELD, M_BATCH };

struct opts {
    const char *host;
    int port;
    const char *key;
    uint64_t m;             /* bits in the bitmap */
    unsigned k;             /* probes per id */
    uint64_t n;             /* ids 1..n are present */
    uint64_t lo, hi;        /* ids looked up, uniform in [lo, hi] */
    enum mode mode;
    unsigned conns;
    double seconds, warmup;
    unsigned batch;
};

/* One connection's lookup in flight. */
struct conn {
    redisContext *c;
    uint64_t off[MAX_PROBES];
    unsigned next;          /* M_SEQ: next probe to send */
    uint64_t pending;       /* replies still owed for the current unit of work */
    bool want_out;          /* EPOLLOUT armed */
};

static uint64_t rng_state = UINT64_C(0x9e3779b97f4a7c15);

static uint64_t rng(void)
{
    /* splitmix64: fast, and plenty for picking ids. */
    uint64_t z = (rng_state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static uint64_t pick(const struct opts *o)
{
    return o->lo + rng() % (o->hi - o->lo + 1);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6
         + (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

/* The k offsets of an id: two 64-bit halves of XXH3-128, h1 + i*h2 mod m. */
static void offsets(const struct opts *o, uint64_t id, uint64_t *off)
{
    char s[24];
    int len = snprintf(s, sizeof s, "%" PRIu64, id);
    XXH128_hash_t h = XXH3_128bits(s, (size_t)len);
    uint64_t h1 = h.low64, h2 = h.high64 | 1;
    for (unsigned i = 0; i < o->k; i++)
        off[i] = (h1 + i * h2) % o->m;
}

static size_t put_u64(char *p, uint64_t v)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        p[i] = tmp[n - 1 - i];
    return n;
}

/* Appends one RESP bulk string ("$len\r\n" s "\r\n") at buf + n; returns the new length. */
static size_t put_bulk(char *buf, size_t n, const char *s, size_t len)
{
    char num[24];
    size_t nl = put_u64(num, len);
    buf[n++] = '$';
    memcpy(buf + n, num, nl);
    n += nl;
    memcpy(buf + n, "\r\n", 2);
    memcpy(buf + n + 2, s, len);
    memcpy(buf + n + 2 + len, "\r\n", 2);
    return n + 2 + len + 2;
}

/* RESP for GETBIT key off, written by hand: formatting is client CPU. */
static void append_getbit(redisContext *c, const char *key, uint64_t off)
{
    char buf[64 + MAX_KEY + 24], num[24];
    size_t n = (size_t)snprintf(buf, sizeof buf, "*3\r\n");
    n = put_bulk(buf, n, "GETBIT", 6);
    n = put_bulk(buf, n, key, strlen(key));
    n = put_bulk(buf, n, num, put_u64(num, off));
    redisAppendFormattedCommand(c, buf, n);
}

/* BITFIELD_RO key GET u1 off... : all k probes in one command. */
static void append_bitfield(redisContext *c, const char *key, const uint64_t *off, unsigned k)
{
    char buf[64 + MAX_KEY + 48 * MAX_PROBES], num[24];
    size_t n = (size_t)snprintf(buf, sizeof buf, "*%u\r\n", 2 + 3 * k);
    n = put_bulk(buf, n, "BITFIELD_RO", 11);
    n = put_bulk(buf, n, key, strlen(key));
    for (unsigned i = 0; i < k; i++) {
        n = put_bulk(buf, n, "GET", 3);
        n = put_bulk(buf, n, "u1", 2);
        n = put_bulk(buf, n, num, put_u64(num, off[i]));
    }
    redisAppendFormattedCommand(c, buf, n);
}

static void die(const char *what, const redisContext *c)
{
    fprintf(stderr, "redis_bloom: %s%s%s\n", what, c ? ": " : "", c ? c->errstr : "");
    exit(1);
}

static redisContext *connect_blocking(const struct opts *o)
{
    redisContext *c = redisConnect(o->host, o->port);
    if (c == NULL || c->err)
        die("cannot connect", c);
    return c;
}

/* load: the bitmap SETBIT would build, computed here and sent with one SET. */
static int cmd_load(const struct opts *o)
{
    size_t bytes = (size_t)((o->m + 7) / 8);
    unsigned char *bm = calloc(bytes, 1);
    if (bm == NULL)
        die("out of memory", NULL);
    uint64_t off[MAX_PROBES];
    for (uint64_t id = 1; id <= o->n; id++) {
        offsets(o, id, off);
        for (unsigned i = 0; i < o->k; i++)
            bm[off[i] >> 3] |= (unsigned char)(0x80u >> (off[i] & 7));   /* GETBIT order */
    }
    redisContext *c = connect_blocking(o);
    redisReply *r = redisCommand(c, "SET %s %b", o->key, bm, bytes);
    if (r == NULL || r->type == REDIS_REPLY_ERROR)
        die(r ? r->str : "SET failed", c);
    freeReplyObject(r);
    r = redisCommand(c, "STRLEN %s", o->key);
    if (r == NULL || r->type != REDIS_REPLY_INTEGER || (size_t)r->integer != bytes)
        die("STRLEN does not match", c);
    freeReplyObject(r);
    printf("redis_bloom: loaded ids=%" PRIu64 " bits=%" PRIu64 " k=%u bytes=%zu\n",
           o->n, o->m, o->k, bytes);
    redisFree(c);
    free(bm);
    return 0;
}

/* check: positives among ids lo..hi, pipelined in chunks, through GETBIT. */
static int cmd_check(const struct opts *o)
{
    redisContext *c = connect_blocking(o);
    uint64_t pos = 0, total = 0, off[MAX_PROBES];
    const uint64_t chunk = 1000;
    for (uint64_t a = o->lo; a <= o->hi; a += chunk) {
        uint64_t b = a + chunk - 1 > o->hi ? o->hi : a + chunk - 1;
        for (uint64_t id = a; id <= b; id++) {
            offsets(o, id, off);
            for (unsigned i = 0; i < o->k; i++)
                append_getbit(c, o->key, off[i]);
        }
        for (uint64_t id = a; id <= b; id++) {
            bool all = true;
            for (unsigned i = 0; i < o->k; i++) {
                redisReply *r;
                if (redisGetReply(c, (void **)&r) != REDIS_OK || r->type != REDIS_REPLY_INTEGER)
                    die("bad GETBIT reply", c);
                all &= r->integer == 1;
                freeReplyObject(r);
            }
            pos += all;
            total++;
        }
    }
    printf("redis_bloom: checked=%" PRIu64 " positive=%" PRIu64 " rate=%.6f\n",
           total, pos, (double)pos / (double)total);
    redisFree(c);
    return 0;
}

static void flush(int ep, struct conn *cn)
{
    int done = 0;
    if (redisBufferWrite(cn->c, &done) != REDIS_OK)
        die("write", cn->c);
    if (done != cn->want_out)
        return;
    /* Arm EPOLLOUT only while output is left over. */
    cn->want_out = !done;
    struct epoll_event ev = { .events = EPOLLIN | (done ? 0 : EPOLLOUT), .data.ptr = cn };
    epoll_ctl(ep, EPOLL_CTL_MOD, cn->c->fd, &ev);
}

/* Queue the next unit of work: one lookup, or a batch of lookups. */
static void start(const struct opts *o, struct conn *cn)
{
    switch (o->mode) {
    case M_SEQ:
        offsets(o, pick(o), cn->off);
        append_getbit(cn->c, o->key, cn->off[0]);
        cn->next = 1;
        cn->pending = 1;
        break;
    case M_PIPE:
        offsets(o, pick(o), cn->off);
        for (unsigned i = 0; i < o->k; i++)
            append_getbit(cn->c, o->key, cn->off[i]);
        cn->pending = o->k;
        break;
    case M_BITFIELD:
        offsets(o, pick(o), cn->off);
        append_bitfield(cn->c, o->key, cn->off, o->k);
        cn->pending = 1;
        break;
    case M_BATCH:
        for (unsigned j = 0; j < o->batch; j++) {
            offsets(o, pick(o), cn->off);
            for (unsigned i = 0; i < o->k; i++)
                append_getbit(cn->c, o->key, cn->off[i]);
        }
        cn->pending = (uint64_t)o->batch * o->k;
        break;
    }
}

static int cmd_bench(const struct opts *o)
{
    int ep = epoll_create1(0);
    struct conn *cs = calloc(o->conns, sizeof(*cs));
    if (ep < 0 || cs == NULL)
        die("setup failed", NULL);
    for (unsigned i = 0; i < o->conns; i++) {
        cs[i].c = redisConnectNonBlock(o->host, o->port);
        if (cs[i].c == NULL || cs[i].c->err)
            die("cannot connect", cs[i].c);
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &cs[i] };
        if (epoll_ctl(ep, EPOLL_CTL_ADD, cs[i].c->fd, &ev) != 0)
            die("epoll_ctl", NULL);
    }
    unsigned per_unit = o->mode == M_BATCH ? o->batch : 1;
    uint64_t done_units = 0, base_units = 0;
    double t0 = now_s(), t_meas = t0 + o->warmup, t_end = t_meas + o->seconds, cpu0 = 0;
    bool measuring = o->warmup <= 0;
    if (measuring)
        cpu0 = cpu_s();
    for (unsigned i = 0; i < o->conns; i++) {
        start(o, &cs[i]);
        flush(ep, &cs[i]);
    }
    struct epoll_event evs[256];
    uint64_t bad = 0;
    for (;;) {
        double t = now_s();
        if (!measuring && t >= t_meas) {
            measuring = true;
            base_units = done_units;
            cpu0 = cpu_s();
        }
        if (t >= t_end)
            break;
        int n = epoll_wait(ep, evs, 256, 100);
        if (n < 0 && errno != EINTR)
            die("epoll_wait", NULL);
        for (int e = 0; e < n; e++) {
            struct conn *cn = evs[e].data.ptr;
            if (evs[e].events & EPOLLOUT)
                flush(ep, cn);
            if (!(evs[e].events & (EPOLLIN | EPOLLERR | EPOLLHUP)))
                continue;
            if (redisBufferRead(cn->c) != REDIS_OK)
                die("read", cn->c);
            bool queued = false;
            for (;;) {
                redisReply *r = NULL;
                if (redisGetReply(cn->c, (void **)&r) != REDIS_OK)
                    die("reply", cn->c);
                if (r == NULL)
                    break;
                bad += r->type != (o->mode == M_BITFIELD ? REDIS_REPLY_ARRAY : REDIS_REPLY_INTEGER);
                freeReplyObject(r);
                if (--cn->pending > 0)
                    continue;
                if (o->mode == M_SEQ && cn->next < o->k) {
                    /* The next probe goes out only once this one is answered. */
                    append_getbit(cn->c, o->key, cn->off[cn->next++]);
                    cn->pending = 1;
                } else {
                    done_units++;
                    start(o, cn);
                }
                queued = true;
            }
            if (queued)
                flush(ep, cn);
        }
    }
    double cpu = cpu_s() - cpu0;
    uint64_t lookups = (done_units - base_units) * per_unit;
    static const char *names[] = { "seq", "pipe", "bitfield", "batch" };
    printf("redis_bloom: mode=%s conns=%u k=%u batch=%u seconds=%.2f lookups=%" PRIu64
           " lookups_per_s=%.0f client_cpu=%.2f bad_replies=%" PRIu64 "\n",
           names[o->mode], o->conns, o->k, per_unit, o->seconds, lookups,
           (double)lookups / o->seconds, cpu / o->seconds, bad);
    for (unsigned i = 0; i < o->conns; i++)
        redisFree(cs[i].c);
    free(cs);
    close(ep);
    return bad ? 1 : 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: redis_bloom load|check|bench -H host -P port -K key -m bits -k probes"
                    " [-N ids] [-r lo:hi] [-M seq|pipe|bitfield|batch] [-c conns] [-d secs]"
                    " [-w secs] [-b batch] [-s seed]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    struct opts o = { .host = "127.0.0.1", .port = 6379, .key = "bloom", .conns = 50,
                      .seconds = 10, .warmup = 1, .batch = 1000, .mode = M_PIPE };
    if (argc < 2)
        usage();
    const char *cmd = argv[1];
    int ch;
    optind = 2;
    while ((ch = getopt(argc, argv, "H:P:K:m:k:N:r:M:c:d:w:b:s:")) != -1) {
        switch (ch) {
        case 'H': o.host = optarg; break;
        case 'P': o.port = atoi(optarg); break;
        case 'K': o.key = optarg; break;
        case 'm': o.m = strtoull(optarg, NULL, 10); break;
        case 'k': o.k = (unsigned)atoi(optarg); break;
        case 'N': o.n = strtoull(optarg, NULL, 10); break;
        case 'r':
            if (sscanf(optarg, "%" SCNu64 ":%" SCNu64, &o.lo, &o.hi) != 2 || o.lo > o.hi)
                usage();
            break;
        case 'M':
            if (strcmp(optarg, "seq") == 0) o.mode = M_SEQ;
            else if (strcmp(optarg, "pipe") == 0) o.mode = M_PIPE;
            else if (strcmp(optarg, "bitfield") == 0) o.mode = M_BITFIELD;
            else if (strcmp(optarg, "batch") == 0) o.mode = M_BATCH;
            else usage();
            break;
        case 'c': o.conns = (unsigned)atoi(optarg); break;
        case 'd': o.seconds = atof(optarg); break;
        case 'w': o.warmup = atof(optarg); break;
        case 'b': o.batch = (unsigned)atoi(optarg); break;
        case 's': rng_state = strtoull(optarg, NULL, 10); break;
        default: usage();
        }
    }
    if (o.m == 0 || o.k == 0 || o.k > MAX_PROBES || o.conns == 0 || o.seconds <= 0 || o.batch == 0
        || strlen(o.key) > MAX_KEY)
        usage();
    if (strcmp(cmd, "load") == 0)
        return o.n ? cmd_load(&o) : (usage(), 2);
    if (o.hi == 0)
        usage();
    if (strcmp(cmd, "check") == 0)
        return cmd_check(&o);
    if (strcmp(cmd, "bench") == 0)
        return cmd_bench(&o);
    usage();
    return 2;
}
