/*
 * The replication stream's frames (src/fleet/fleetwire.c) and the ring
 * replicas resume from (src/fleet/fleetring.c), without a daemon: every
 * frame written reads back whole however the bytes are split, every damaged
 * stream is refused for the right reason, the sequence rule never applies a
 * key after a missing one, and the ring hands back exactly what was added
 * or says it no longer holds it.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "check_main.h"
#include "fleetjournal.h"
#include "fleetring.h"
#include "fleetwire.h"
#include "upstream.h"

/* ------------------------------------------------------------- helpers -- */

/* What a test stream decodes to: the frames, copied. */
struct seen {
    struct fleetwire_frame f[16];
    uint64_t hashes[16][64];
    uint32_t marks[16][64][2];
    unsigned n;
    unsigned stop_after;            /* 0: never stop */
};

static bool collect(void *arg, const struct fleetwire_frame *f)
{
    struct seen *s = arg;
    ck_assert_uint_lt(s->n, 16);
    s->f[s->n] = *f;
    if (f->type == FLEETWIRE_ADDS) {
        for (uint32_t i = 0; i < f->u.adds.count && i < 64; i++)
            s->hashes[s->n][i] = fleetwire_adds_hash(&f->u.adds, i);
        for (uint32_t j = 0; j < f->u.adds.posts && j < 64; j++)
            fleetwire_adds_mark(&f->u.adds, j, &s->marks[s->n][j][0], &s->marks[s->n][j][1]);
    }
    s->n++;
    return s->stop_after == 0 || s->n < s->stop_after;
}

/* A decoder feeding collect, what it has seen, and the reason it gave last. */
struct reader {
    struct fleetwire_dec d;
    struct seen s;
    char why[256];
};

/* The codec tests' reader: started by their checked fixture, freed by its teardown. */
static struct reader rd;

static void reader_setup(void)
{
    memset(&rd, 0, sizeof rd);
    ck_assert(fleetwire_dec_init(&rd.d));
}

static void reader_teardown(void)
{
    fleetwire_dec_free(&rd.d);
}

/* n bytes at buf fed to r's decoder; its status. */
static enum fleetwire_status feed(struct reader *r, const unsigned char *buf, size_t n)
{
    return fleetwire_feed(&r->d, buf, n, collect, &r->s, r->why, sizeof r->why);
}

static const uint64_t keys[5] = { 1, UINT64_MAX, 0x0123456789abcdefULL, 42, 7 };
static const uint32_t ttls[5] = { 0, 3600, 0, 0, 1 };

static void sample_hello(struct fleetwire_hello *h)
{
    memset(h, 0, sizeof *h);
    h->flags = FLEETWIRE_HELLO_RESUMED | FLEETWIRE_HELLO_REPLICA;
    h->history = 0xfeedface12345678ULL;
    h->epoch = 3;
    h->covered = 2;
    h->generation = 9;
    h->from = 100;
    h->last = 105;
    struct fleetwire_ident *id = &h->ident;
    id->relid = 16384;
    id->attnum = 1;
    id->typid = id->base_typid = 20;
    id->typmod = -1;
    id->dboid = 5;
    id->deterministic = true;
    id->kind = 0;
    id->fpp = 0.01;
    id->hash = FLEETWIRE_HASH;
    strcpy(id->name, "default");
    strcpy(id->table, "public.users");
    strcpy(id->column, "id");
    strcpy(id->sysid, "7300000000000000001");
    strcpy(id->spell, "int8");
    strcpy(id->type_name, "bigint");
}

/* A stream of every frame kind: its bytes into buf, its length returned. */
static size_t sample_stream(unsigned char *buf, size_t cap)
{
    struct fleetwire_hello h;
    sample_hello(&h);
    size_t n = fleetwire_put_preamble(buf, cap);
    n += fleetwire_put_hello(buf + n, cap - n, &h);
    n += fleetwire_put_adds(buf + n, cap - n, 101, keys, ttls, 5);
    n += fleetwire_put_pair(buf + n, cap - n, FLEETWIRE_EPOCH, 4, 2);
    n += fleetwire_put_pair(buf + n, cap - n, FLEETWIRE_GENERATION, 10, 4);
    n += fleetwire_put_pair(buf + n, cap - n, FLEETWIRE_HEARTBEAT, 105, 4);
    n += fleetwire_put_bye(buf + n, cap - n, FLEETWIRE_BYE_SHUTDOWN, "stopping");
    return n;
}

static void check_sample(const struct seen *s)
{
    struct fleetwire_hello want;
    sample_hello(&want);
    ck_assert_uint_eq(s->n, 6);
    const struct fleetwire_hello *h = &s->f[0].u.hello;
    ck_assert_int_eq(s->f[0].type, FLEETWIRE_HELLO);
    ck_assert_uint_eq(h->flags, want.flags);
    ck_assert(h->history == want.history && h->epoch == 3 && h->covered == 2);
    ck_assert(h->generation == 9 && h->from == 100 && h->last == 105);
    ck_assert_uint_eq(h->ident.relid, 16384);
    ck_assert_int_eq(h->ident.typmod, -1);
    ck_assert(h->ident.deterministic && h->ident.fpp == 0.01);
    ck_assert_str_eq(h->ident.table, "public.users");
    ck_assert_str_eq(h->ident.spell, "int8");
    ck_assert_str_eq(h->ident.type_name, "bigint");
    ck_assert_int_eq(s->f[1].type, FLEETWIRE_ADDS);
    ck_assert_uint_eq(s->f[1].u.adds.first, 101);
    ck_assert_uint_eq(s->f[1].u.adds.count, 5);
    ck_assert_uint_eq(s->f[1].u.adds.posts, 2);
    for (int i = 0; i < 5; i++)
        ck_assert(s->hashes[1][i] == keys[i]);
    ck_assert(s->marks[1][0][0] == 1 && s->marks[1][0][1] == 3600);
    ck_assert(s->marks[1][1][0] == 4 && s->marks[1][1][1] == 1);
    ck_assert(s->f[2].type == FLEETWIRE_EPOCH && s->f[2].u.epoch.epoch == 4);
    ck_assert(s->f[3].type == FLEETWIRE_GENERATION && s->f[3].u.generation.generation == 10);
    ck_assert(s->f[4].type == FLEETWIRE_HEARTBEAT && s->f[4].u.heartbeat.last == 105);
    ck_assert(s->f[5].type == FLEETWIRE_BYE && s->f[5].u.bye.code == FLEETWIRE_BYE_SHUTDOWN);
    ck_assert_str_eq(s->f[5].u.bye.reason, "stopping");
}

/* ------------------------------------------------------------ the codec -- */

/* The same frames whatever the split: whole, a byte at a time, in steps of 1..37 bytes. */
START_TEST(test_round_trip)
{
    static unsigned char buf[8192];
    size_t n = sample_stream(buf, sizeof buf);
    ck_assert_uint_gt(n, 200);
    for (size_t step = 0; step <= 37; step++) {
        if (step > 0) {         /* a new reader for each split */
            reader_teardown();
            reader_setup();
        }
        for (size_t at = 0; at < n;) {
            size_t k = step == 0 ? n : step;
            if (k > n - at)
                k = n - at;
            ck_assert_msg(feed(&rd, buf + at, k) == FLEETWIRE_OK, "step %zu at %zu: %s", step, at,
                          rd.why);
            at += k;
        }
        ck_assert_uint_eq(rd.d.bytes, n);
        ck_assert_uint_eq(rd.d.have, 0);
        check_sample(&rd.s);
    }
}
END_TEST

/* Each damage is refused for its own reason, and the decoder stays failed. */
static const struct {
    const char *what;
    long at;                /* the byte changed; -1: the first frame's check */
    unsigned char to;       /* its new value (xor for the check) */
    enum fleetwire_status want;
} damages[] = {
    { "garbage at the first byte", 0, 'X', FLEETWIRE_BAD_MAGIC },
    { "the version", 8, 2, FLEETWIRE_OTHER_VERSION },
    { "a reserved head byte", 12 + 1, 1, FLEETWIRE_BAD_FRAME },
    { "a payload byte", 12 + 8 + 20, 0xff, FLEETWIRE_BAD_SUM },
    { "the check", -1, 0x55, FLEETWIRE_BAD_SUM },
};

START_TEST(test_damage)
{
    static unsigned char buf[8192];
    size_t n = sample_stream(buf, sizeof buf);
    if (damages[_i].at >= 0) {
        buf[damages[_i].at] = damages[_i].to;
    } else {
        uint32_t plen;
        memcpy(&plen, buf + 12 + 4, 4);
        buf[12 + 8 + plen] ^= damages[_i].to;
    }
    enum fleetwire_status st = FLEETWIRE_OK;
    for (size_t at = 0; at < n && st == FLEETWIRE_OK; at++)
        st = feed(&rd, buf + at, 1);
    ck_assert_msg(st == damages[_i].want, "%s: %s (%s)", damages[_i].what,
                  fleetwire_strstatus(st), rd.why);
    ck_assert_uint_eq(rd.s.n, 0);
    ck_assert_int_eq(feed(&rd, buf, 1), st);
}
END_TEST

/* An oversized frame is refused from its head alone: nothing more is read or kept. */
START_TEST(test_oversized)
{
    unsigned char buf[64];
    size_t n = fleetwire_put_preamble(buf, sizeof buf);
    unsigned char head[8] = { FLEETWIRE_ADDS, 0, 0, 0, 0, 0, 0, 0 };
    uint32_t big = FLEETWIRE_MAX_PAYLOAD + 1;
    memcpy(head + 4, &big, 4);
    memcpy(buf + n, head, 8);
    ck_assert_int_eq(feed(&rd, buf, n + 8), FLEETWIRE_OVERSIZED);
    ck_assert_uint_eq(rd.d.bytes, n + 8);
}
END_TEST

/* Frames whose check is right but whose payload is not: each refused. */
struct bad_payload {
    const char *what;
    unsigned type;
    unsigned char payload[48];
    uint32_t len;
};

static const struct bad_payload bad_payloads[] = {
    { "ADDS of no key", FLEETWIRE_ADDS, { 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }, 16 },
    { "ADDS shorter than its keys", FLEETWIRE_ADDS, { 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0,
                                                      1, 2, 3, 4, 5, 6, 7, 8 }, 24 },
    { "ADDS with a byte left over", FLEETWIRE_ADDS, { 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,
                                                      1, 2, 3, 4, 5, 6, 7, 8, 9 }, 25 },
    { "ADDS with more marks than keys", FLEETWIRE_ADDS, { 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0,
                                                          1, 2, 3, 4, 5, 6, 7, 8 }, 24 },
    { "a mark past the keys", FLEETWIRE_ADDS, { 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0,
                                                1, 2, 3, 4, 5, 6, 7, 8, 1, 0, 0, 0, 5, 0, 0, 0 }, 32 },
    { "a mark of ttl 0", FLEETWIRE_ADDS, { 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0,
                                           1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 0, 0, 0, 0 }, 32 },
    { "HEARTBEAT of 15 bytes", FLEETWIRE_HEARTBEAT, { 0 }, 15 },
    { "EPOCH of 17 bytes", FLEETWIRE_EPOCH, { 0 }, 17 },
    { "BYE whose reason runs past it", FLEETWIRE_BYE, { 1, 0, 0, 0, 9, 0, 'a' }, 7 },
    { "BYE with a NUL in its reason", FLEETWIRE_BYE, { 1, 0, 0, 0, 2, 0, 'a', 0 }, 8 },
    { "HELLO of 20 bytes", FLEETWIRE_HELLO, { 0 }, 20 },
    { "POSITION of 24 bytes", FLEETWIRE_POSITION, { 1, 0, 0, 0, 0, 0, 0, 0, 1 }, 24 },
    { "POSITION of LSN 0", FLEETWIRE_POSITION, { 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,
                                                 0, 0, 0, 0, 0, 0, 0, 0, 1 }, 32 },
    { "POSITION with reserved bytes set", FLEETWIRE_POSITION,
      { 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1 }, 32 },
    /* Adaptive (issue 35): VERIFIED. */
    { "VERIFIED of no entry", FLEETWIRE_VERIFIED, { 0, 0, 0, 0 }, 4 },
    { "VERIFIED with an empty key", FLEETWIRE_VERIFIED, { 1, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0 }, 14 },
    { "VERIFIED whose key runs past it", FLEETWIRE_VERIFIED,
      { 1, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 5, 0, 'a' }, 15 },
    { "VERIFIED with a NUL in its key", FLEETWIRE_VERIFIED,
      { 1, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 2, 0, 'a', 0 }, 16 },
    { "VERIFIED with a byte left over", FLEETWIRE_VERIFIED,
      { 1, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 1, 0, 'a', 'b' }, 16 },
    { "VERIFIED of 2 entries with 1", FLEETWIRE_VERIFIED,
      { 2, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 1, 0, 'a' }, 15 },
};

/* A frame of type with payload p (len bytes) and a right check at buf; its length. */
static size_t sealed(unsigned char *buf, unsigned type, const unsigned char *p, uint32_t len)
{
    buf[0] = (unsigned char)type;
    buf[1] = buf[2] = buf[3] = 0;
    memcpy(buf + 4, &len, 4);           /* little-endian hosts only, as the daemon's */
    memcpy(buf + 8, p, len);
    uint32_t sum = XXH32(buf, 8 + len, 0);
    memcpy(buf + 8 + len, &sum, 4);
    return 8 + len + 4;
}

START_TEST(test_bad_payload)
{
    const struct bad_payload *b = &bad_payloads[_i];
    unsigned char buf[256];
    size_t n = fleetwire_put_preamble(buf, sizeof buf);
    n += sealed(buf + n, b->type, b->payload, b->len);
    enum fleetwire_status st = feed(&rd, buf, n);
    ck_assert_msg(st == FLEETWIRE_BAD_FRAME, "%s: %s (%s)", b->what, fleetwire_strstatus(st),
                  rd.why);
    ck_assert_uint_eq(rd.s.n, 0);
}
END_TEST

/* A frame of a type this build does not know is skipped; the ones around it arrive. */
START_TEST(test_unknown_type)
{
    unsigned char buf[256];
    size_t n = fleetwire_put_preamble(buf, sizeof buf);
    n += fleetwire_put_pair(buf + n, sizeof buf - n, FLEETWIRE_HEARTBEAT, 1, 1);
    unsigned char pair[16] = { 2 };
    n += sealed(buf + n, 77, pair, sizeof pair);
    n += fleetwire_put_pair(buf + n, sizeof buf - n, FLEETWIRE_HEARTBEAT, 3, 1);
    ck_assert_int_eq(feed(&rd, buf, n), FLEETWIRE_OK);
    ck_assert_uint_eq(rd.s.n, 2);
    ck_assert(rd.s.f[0].u.heartbeat.last == 1 && rd.s.f[1].u.heartbeat.last == 3);
    ck_assert_uint_eq(rd.d.frames, 3);
}
END_TEST

/* Adaptive (issue 35): a VERIFIED frame's entries, as written; a replica's track lets it through. */
struct vseen {
    unsigned frames;
    char keys[4][FLEETWIRE_VKEY_MAX + 1];
    uint64_t hashes[4];
    unsigned n;
};

static bool collect_verified(void *arg, const struct fleetwire_frame *f)
{
    struct vseen *v = arg;
    v->frames++;
    if (f->type != FLEETWIRE_VERIFIED)
        return true;
    size_t at = 0, klen;
    const char *key;
    uint64_t h;
    while (v->n < 4 && fleetwire_verified_next(&f->u.verified, &at, &h, &key, &klen)) {
        memcpy(v->keys[v->n], key, klen);
        v->keys[v->n][klen] = '\0';
        v->hashes[v->n++] = h;
    }
    return true;
}

START_TEST(test_verified)
{
    char longest[FLEETWIRE_VKEY_MAX + 1];
    memset(longest, 'k', FLEETWIRE_VKEY_MAX);
    longest[FLEETWIRE_VKEY_MAX] = '\0';
    const uint64_t hs[3] = { 7, UINT64_MAX, 0x0123456789abcdefULL };
    const char *ks[3] = { "nx17", "\xc3\xa9t\xc3\xa9", longest };
    const size_t ls[3] = { 4, 5, FLEETWIRE_VKEY_MAX };
    unsigned char buf[1024];
    size_t n = fleetwire_put_preamble(buf, sizeof buf);
    n += fleetwire_put_verified(buf + n, sizeof buf - n, hs, ks, ls, 3);
    n += fleetwire_put_pair(buf + n, sizeof buf - n, FLEETWIRE_HEARTBEAT, 1, 1);
    struct fleetwire_dec d;
    struct vseen v = { 0 };
    char why[256] = "";
    ck_assert(fleetwire_dec_init(&d));
    /* A byte at a time, as any split. */
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(fleetwire_feed(&d, buf + i, 1, collect_verified, &v, why, sizeof why),
                         FLEETWIRE_OK);
    ck_assert_uint_eq(v.frames, 2);
    ck_assert_uint_eq(v.n, 3);
    for (unsigned i = 0; i < 3; i++) {
        ck_assert(v.hashes[i] == hs[i]);
        ck_assert_str_eq(v.keys[i], ks[i]);
    }
    fleetwire_dec_free(&d);
    /* Bounds: no entry, an empty key, one too long, more than fit. */
    size_t zero = 0, over = FLEETWIRE_VKEY_MAX + 1;
    const char *k1[1] = { "a" };
    ck_assert_uint_eq(fleetwire_put_verified(buf, sizeof buf, hs, k1, ls, 0), 0);
    ck_assert_uint_eq(fleetwire_put_verified(buf, sizeof buf, hs, k1, &zero, 1), 0);
    ck_assert_uint_eq(fleetwire_put_verified(buf, sizeof buf, hs, ks + 2, &over, 1), 0);
    ck_assert_uint_eq(fleetwire_put_verified(buf, 40, hs, ks, ls, 3), 0);
    /* After a resumed HELLO a replica's track applies it, as any frame it reads. */
    struct fleetwire_track t;
    fleetwire_track_init(&t, 9, 5);
    struct fleetwire_frame hello = { .type = FLEETWIRE_HELLO };
    hello.u.hello = (struct fleetwire_hello){ .flags = FLEETWIRE_HELLO_RESUMED, .history = 9,
                                              .from = 5, .last = 5 };
    ck_assert_int_eq(fleetwire_track_frame(&t, &hello, why, sizeof why), FLEETWIRE_APPLY);
    struct fleetwire_frame vf = { .type = FLEETWIRE_VERIFIED };
    ck_assert_int_eq(fleetwire_track_frame(&t, &vf, why, sizeof why), FLEETWIRE_APPLY);
    ck_assert(t.next == 6);
}
END_TEST

/*
 * h-horizon's HORIZON: every field through, split anywhere; a horizon
 * after its own now, or a reserved byte set, is refused unread; a resumed
 * stream's track applies it as any frame it reads.
 */
START_TEST(test_horizon)
{
    const struct fleetwire_horizon hz = {
        .clock = 0xfeedface12345678ULL, .now = INT64_C(9000000000000), .horizon = INT64_C(8999800000000),
        .history = 9, .seq = 105, .epoch = 4, .covered = 4, .generation = 10,
        .flags = FLEETWIRE_HORIZON_REPLICA,
    };
    unsigned char buf[256];
    size_t n = fleetwire_put_preamble(buf, sizeof buf);
    size_t k = fleetwire_put_horizon(buf + n, sizeof buf - n, &hz);
    ck_assert_uint_eq(k, FLEETWIRE_HORIZON_FRAME);
    n += k;
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(feed(&rd, buf + i, 1), FLEETWIRE_OK);
    ck_assert_uint_eq(rd.s.n, 1);
    const struct fleetwire_horizon *got = &rd.s.f[0].u.horizon;
    ck_assert_int_eq(rd.s.f[0].type, FLEETWIRE_HORIZON);
    ck_assert(got->clock == hz.clock && got->now == hz.now && got->horizon == hz.horizon);
    ck_assert(got->history == 9 && got->seq == 105 && got->epoch == 4 && got->covered == 4);
    ck_assert(got->generation == 10 && got->flags == FLEETWIRE_HORIZON_REPLICA);
    ck_assert_uint_eq(fleetwire_put_horizon(buf, FLEETWIRE_HORIZON_FRAME - 1, &hz), 0);
    /* A horizon later than the clock's reading that carries it proves a future: refused. */
    struct fleetwire_horizon late = hz;
    late.horizon = hz.now + 1;
    struct reader r2;
    memset(&r2, 0, sizeof r2);
    ck_assert(fleetwire_dec_init(&r2.d));
    n = fleetwire_put_preamble(buf, sizeof buf);
    n += fleetwire_put_horizon(buf + n, sizeof buf - n, &late);
    ck_assert_int_eq(feed(&r2, buf, n), FLEETWIRE_BAD_FRAME);
    ck_assert_uint_eq(r2.s.n, 0);
    fleetwire_dec_free(&r2.d);
    struct fleetwire_track t;
    char why[256];
    fleetwire_track_init(&t, 9, 5);
    struct fleetwire_frame hello = { .type = FLEETWIRE_HELLO };
    hello.u.hello = (struct fleetwire_hello){ .flags = FLEETWIRE_HELLO_RESUMED, .history = 9,
                                              .from = 5, .last = 5 };
    ck_assert_int_eq(fleetwire_track_frame(&t, &hello, why, sizeof why), FLEETWIRE_APPLY);
    ck_assert_int_eq(fleetwire_track_frame(&t, &rd.s.f[0], why, sizeof why), FLEETWIRE_APPLY);
}
END_TEST

/* The callback may stop the decoder; it then stays stopped. */
START_TEST(test_stop)
{
    static unsigned char buf[8192];
    size_t n = sample_stream(buf, sizeof buf);
    rd.s.stop_after = 2;
    ck_assert_int_eq(feed(&rd, buf, n), FLEETWIRE_STOPPED);
    ck_assert_uint_eq(rd.s.n, 2);
    ck_assert_int_eq(feed(&rd, buf, 1), FLEETWIRE_STOPPED);
}
END_TEST

/* The encoder refuses what would not fit or breaks a bound. */
START_TEST(test_encoder_bounds)
{
    unsigned char buf[128];
    uint64_t h[2] = { 1, 2 };
    uint32_t t[2] = { 0, 0 };
    ck_assert_uint_eq(fleetwire_put_adds(buf, sizeof buf, 1, h, t, 0), 0);
    ck_assert_uint_eq(fleetwire_put_adds(buf, 8 + 16 + 16 + 3, 1, h, t, 2), 0);
    ck_assert_uint_eq(fleetwire_put_adds(buf, 8 + 16 + 16 + 4, 1, h, t, 2), 8 + 16 + 16 + 4);
    ck_assert_uint_eq(fleetwire_put_preamble(buf, 11), 0);
    ck_assert_uint_eq(fleetwire_put_pair(buf, sizeof buf, FLEETWIRE_ADDS, 1, 2), 0);
    struct fleetwire_hello hello;
    sample_hello(&hello);
    ck_assert_uint_eq(fleetwire_put_hello(buf, sizeof buf, &hello), 0);   /* too small */
    /* The room the writer gives an ADDS frame: that many POSTed keys fit, one more does not. */
    uint32_t room = fleetwire_adds_room(1000);
    ck_assert_uint_gt(room, 0);
    static uint64_t many[1000];
    static uint32_t marked[1000];
    for (int i = 0; i < 1000; i++)
        marked[i] = 5;
    static unsigned char big[1000];
    ck_assert_uint_gt(fleetwire_put_adds(big, sizeof big, 1, many, marked, room), 0);
    ck_assert_uint_eq(fleetwire_put_adds(big, sizeof big, 1, many, marked, room + 1), 0);
}
END_TEST

/* ------------------------------------------------------- the sequence -- */

static struct fleetwire_frame hello_frame(uint64_t history, uint64_t from, bool resumed)
{
    struct fleetwire_frame f = { .type = FLEETWIRE_HELLO };
    sample_hello(&f.u.hello);
    f.u.hello.history = history;
    f.u.hello.from = from;
    f.u.hello.last = from + 10;
    f.u.hello.flags = resumed ? FLEETWIRE_HELLO_RESUMED : 0;
    return f;
}

static struct fleetwire_frame adds_frame(uint64_t first, uint32_t count)
{
    struct fleetwire_frame f = { .type = FLEETWIRE_ADDS };
    f.u.adds.first = first;
    f.u.adds.count = count;
    return f;
}

/* One frame told to a tracker: its kind ('H'ello, 'A'dds, heart'B'eat, b'Y'e), what it says. */
struct track_step {
    char kind;
    uint64_t a;             /* H: history; A: first; B: last; Y: the BYE code */
    uint64_t b;             /* H: from; A: count; B: epoch */
    bool resumed;           /* H: the RESUMED flag */
    enum fleetwire_verdict want;
    uint64_t next;          /* the tracker's next seq after it; 0: not checked */
};

/* A tracker started at (history, from), then told the steps in order. */
static const struct track_case {
    const char *what;
    uint64_t history, from;
    struct track_step steps[8];
} track_cases[] = {
    { "ADDS before any HELLO", 7, 100, {
        { 'A', 101, 1, false, FLEETWIRE_VIOLATION, 0 } } },
    /* Resumed where asked: keys in order apply, the position moves; a skipped seq, a
     * repeated one, an old heartbeat, a second HELLO: violations, the position unmoved. */
    { "resumed where asked", 7, 100, {
        { 'H', 7, 100, true, FLEETWIRE_APPLY, 0 },
        { 'A', 101, 5, false, FLEETWIRE_APPLY, 106 },
        { 'A', 106, 1, false, FLEETWIRE_APPLY, 107 },
        { 'A', 109, 1, false, FLEETWIRE_VIOLATION, 107 },
        { 'A', 106, 1, false, FLEETWIRE_VIOLATION, 107 },
        { 'B', 105, 1, false, FLEETWIRE_VIOLATION, 0 },
        { 'B', 106, 1, false, FLEETWIRE_APPLY, 0 },
        { 'H', 7, 106, true, FLEETWIRE_VIOLATION, 0 } } },
    /* Another history, a refusal: a snapshot, and nothing after a refusal applies. */
    { "another history", 7, 100, {
        { 'H', 8, 100, true, FLEETWIRE_SNAPSHOT, 0 } } },
    { "not resumed", 7, 100, {
        { 'H', 7, 100, false, FLEETWIRE_SNAPSHOT, 0 },
        { 'A', 101, 1, false, FLEETWIRE_VIOLATION, 0 } } },
    { "a HELLO that resumes somewhere else than asked", 7, 100, {
        { 'H', 7, 90, true, FLEETWIRE_VIOLATION, 0 } } },
    /* BYE: the end of a stream, or a refusal. */
    { "BYE", 7, 100, {
        { 'H', 7, 100, true, FLEETWIRE_APPLY, 0 },
        { 'Y', FLEETWIRE_BYE_SHUTDOWN, 0, false, FLEETWIRE_APPLY, 0 },
        { 'Y', FLEETWIRE_BYE_BEHIND, 0, false, FLEETWIRE_SNAPSHOT, 0 } } },
    { "no position yet: nothing resumes", 0, 0, {
        { 'H', 0, 0, true, FLEETWIRE_SNAPSHOT, 0 } } },
};

static struct fleetwire_frame step_frame(const struct track_step *st)
{
    switch (st->kind) {
    case 'H':
        return hello_frame(st->a, st->b, st->resumed);
    case 'A':
        return adds_frame(st->a, (uint32_t)st->b);
    case 'B':
        return (struct fleetwire_frame){ .type = FLEETWIRE_HEARTBEAT,
                                         .u.heartbeat = { st->a, st->b } };
    default:
        ck_assert_int_eq(st->kind, 'Y');
        return (struct fleetwire_frame){ .type = FLEETWIRE_BYE,
                                         .u.bye = { (uint32_t)st->a, "x" } };
    }
}

START_TEST(test_track)
{
    const struct track_case *c = &track_cases[_i];
    struct fleetwire_track t;
    char why[256];
    fleetwire_track_init(&t, c->history, c->from);
    for (int k = 0; k < 8 && c->steps[k].kind; k++) {
        const struct track_step *st = &c->steps[k];
        struct fleetwire_frame f = step_frame(st);
        enum fleetwire_verdict v = fleetwire_track_frame(&t, &f, why, sizeof why);
        ck_assert_msg(v == st->want, "%s, step %d ('%c' %llu %llu): verdict %d, want %d", c->what,
                      k, st->kind, (unsigned long long)st->a, (unsigned long long)st->b, (int)v,
                      (int)st->want);
        if (st->next)
            ck_assert_msg(t.next == st->next, "%s, step %d: next %llu, want %llu", c->what, k,
                          (unsigned long long)t.next, (unsigned long long)st->next);
    }
}
END_TEST

/*
 * h-stream's commit positions: a POSITION round-trips; a HELLO resuming at
 * a commit moves the track to its history only if the stream asked so; a
 * POSITION past what was sent is a violation.
 */
START_TEST(test_track_commit)
{
    unsigned char buf[256];
    struct seen seen = { 0 };
    struct fleetwire_dec d;
    char why[256];
    size_t n = fleetwire_put_preamble(buf, sizeof buf);
    n += fleetwire_put_position(buf + n, sizeof buf - n, 120, 3, 1, 0x16B3D28ULL);
    ck_assert_uint_eq(n, FLEETWIRE_PREAMBLE_LEN + FLEETWIRE_POSITION_FRAME);
    ck_assert(fleetwire_dec_init(&d));
    ck_assert_int_eq(fleetwire_feed(&d, buf, n, collect, &seen, why, sizeof why), FLEETWIRE_OK);
    fleetwire_dec_free(&d);
    ck_assert_uint_eq(seen.n, 1);
    ck_assert_int_eq(seen.f[0].type, FLEETWIRE_POSITION);
    ck_assert(seen.f[0].u.position.seq == 120 && seen.f[0].u.position.epoch == 3);
    ck_assert(seen.f[0].u.position.tli == 1 && seen.f[0].u.position.lsn == 0x16B3D28ULL);

    struct fleetwire_track t;
    struct fleetwire_frame f;
    /* Not asked by commit: a HELLO at a commit is a violation. */
    fleetwire_track_init(&t, 7, 100);
    f = hello_frame(9, 40, true);
    f.u.hello.flags |= FLEETWIRE_HELLO_AT_COMMIT;
    ck_assert_int_eq(fleetwire_track_frame(&t, &f, why, sizeof why), FLEETWIRE_VIOLATION);
    /* Asked: the track goes on in the upstream's history from its from. */
    fleetwire_track_init(&t, 7, 100);
    fleetwire_track_by_commit(&t);
    ck_assert_int_eq(fleetwire_track_frame(&t, &f, why, sizeof why), FLEETWIRE_APPLY);
    ck_assert(t.at_commit && t.resumed && t.history == 9 && t.next == 41);
    f = adds_frame(41, 4);
    ck_assert_int_eq(fleetwire_track_frame(&t, &f, why, sizeof why), FLEETWIRE_APPLY);
    f = (struct fleetwire_frame){ .type = FLEETWIRE_POSITION, .u.position = { 44, 3, 99, 1 } };
    ck_assert_int_eq(fleetwire_track_frame(&t, &f, why, sizeof why), FLEETWIRE_APPLY);
    f.u.position.seq = 45;
    ck_assert_int_eq(fleetwire_track_frame(&t, &f, why, sizeof why), FLEETWIRE_VIOLATION);
    /* Asked by commit, but refused: a snapshot as before. */
    fleetwire_track_init(&t, 7, 100);
    fleetwire_track_by_commit(&t);
    f = hello_frame(9, 0, false);
    ck_assert_int_eq(fleetwire_track_frame(&t, &f, why, sizeof why), FLEETWIRE_SNAPSHOT);
    /* A HELLO at a commit that does not say it resumed breaks the layout. */
    fleetwire_track_init(&t, 7, 100);
    fleetwire_track_by_commit(&t);
    f = hello_frame(9, 40, false);
    f.u.hello.flags |= FLEETWIRE_HELLO_AT_COMMIT;
    ck_assert_int_eq(fleetwire_track_frame(&t, &f, why, sizeof why), FLEETWIRE_VIOLATION);
}
END_TEST

/* ------------------------------------------------------------ the ring -- */

/*
 * Commit marks (fleetring.h): where a replica at a commit position goes on,
 * and when no mark proves it.
 */
START_TEST(test_ring_marks)
{
    struct fleetring *r = fleetring_new(8, 5);
    uint64_t h[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, after = 0, seq, lsn;
    uint32_t tli;
    /* No buffer yet: no marks. */
    fleetring_mark(r, 2, 1, 100);
    ck_assert(!fleetring_at_commit(r, 2, 1, 100, &after));
    ck_assert(fleetring_enable(r));
    fleetring_append(r, h, 2, 0);               /* commit 100: seqs 1, 2 */
    fleetring_mark(r, 2, 1, 100);
    fleetring_mark(r, 2, 1, 150);               /* a commit with no key: the same mark */
    fleetring_append(r, h + 2, 3, 0);           /* commit 200: seqs 3..5 */
    fleetring_mark(r, 2, 1, 200);
    fleetring_mark(r, 2, 1, 180);               /* replayed: nothing */
    /* At 100..199: after seq 2 (every key of a later commit is past it). */
    ck_assert(fleetring_at_commit(r, 2, 1, 100, &after) && after == 2);
    ck_assert(fleetring_at_commit(r, 2, 1, 170, &after) && after == 2);
    ck_assert(fleetring_at_commit(r, 2, 1, 200, &after) && after == 5);
    ck_assert(fleetring_at_commit(r, 2, 1, 999, &after) && after == 5);
    /* Older than any mark, another timeline or epoch: nothing proves it. */
    ck_assert(!fleetring_at_commit(r, 2, 1, 99, &after));
    ck_assert(!fleetring_at_commit(r, 2, 2, 200, &after));
    ck_assert(!fleetring_at_commit(r, 3, 1, 200, &after));
    /* What a stream that sent up to seq 4 may say: the mark at 2, its hi. */
    ck_assert(fleetring_position(r, 5, 2, 4, &seq, &tli, &lsn));
    ck_assert(seq == 2 && tli == 1 && lsn == 150);
    ck_assert(fleetring_position(r, 5, 2, 5, &seq, &tli, &lsn) && seq == 5 && lsn == 200);
    ck_assert(!fleetring_position(r, 5, 2, 1, &seq, &tli, &lsn));
    ck_assert(!fleetring_position(r, 6, 2, 5, &seq, &tli, &lsn));
    ck_assert(!fleetring_position(r, 5, 3, 5, &seq, &tli, &lsn));
    /* The keys after seq 2 overwritten: no longer. */
    fleetring_append(r, h, 6, 0);               /* seqs 6..11: the ring keeps 4..11 */
    ck_assert(!fleetring_at_commit(r, 2, 1, 170, &after));
    ck_assert(fleetring_at_commit(r, 2, 1, 250, &after) && after == 5);
    /* A new epoch (a gap): the marks before it go. */
    fleetring_mark(r, 3, 1, 300);
    ck_assert(!fleetring_at_commit(r, 2, 1, 250, &after));
    ck_assert(fleetring_at_commit(r, 3, 1, 300, &after) && after == 11);
    struct fleetring_info fi;
    fleetring_info(r, &fi);
    ck_assert(fi.marks == 1 && fi.mark_lsn == 300);
    fleetring_free(r);
}
END_TEST

START_TEST(test_ring)
{
    struct fleetring *r = fleetring_new(4, fleetring_new_history());
    ck_assert_ptr_nonnull(r);
    ck_assert_uint_ne(fleetring_history(r), 0);
    uint64_t h[8] = { 11, 12, 13, 14, 15, 16, 17, 18 }, out[8];
    uint32_t t[8];
    /* Before the buffer: counted only, nothing to resume from but the newest. */
    ck_assert_uint_eq(fleetring_append(r, h, 2, 0), 2);
    ck_assert(fleetring_holds(r, 2));
    ck_assert(!fleetring_holds(r, 1));
    ck_assert(!fleetring_holds(r, 3));
    ck_assert_int_eq(fleetring_read(r, 1, out, t, 8), -1);
    ck_assert_int_eq(fleetring_read(r, 3, out, t, 8), 0);
    ck_assert(fleetring_enable(r));
    ck_assert_uint_eq(fleetring_append(r, h + 2, 3, 3600), 5);
    ck_assert_int_eq(fleetring_read(r, 3, out, t, 8), 3);
    ck_assert(out[0] == 13 && out[2] == 15 && t[1] == 3600);
    ck_assert_int_eq(fleetring_read(r, 4, out, t, 1), 1);
    ck_assert(out[0] == 14);
    /* Past the capacity: the oldest go, and reading them says so. */
    ck_assert_uint_eq(fleetring_append(r, h + 5, 3, 0), 8);
    ck_assert_int_eq(fleetring_read(r, 4, out, t, 8), -1);
    ck_assert_int_eq(fleetring_read(r, 5, out, t, 8), 4);
    ck_assert(out[0] == 15 && out[3] == 18 && t[0] == 3600 && t[1] == 0);
    ck_assert(fleetring_holds(r, 4) && !fleetring_holds(r, 3));
    struct fleetring_info fi;
    fleetring_info(r, &fi);
    ck_assert(fi.last == 8 && fi.oldest == 5 && fi.held == 4 && fi.enabled);
    fleetring_free(r);
    ck_assert_ptr_null(fleetring_new(0, 1));
}
END_TEST

/* A replica's ring keeps its upstream's seqs, and never a seq it did not take. */
START_TEST(test_ring_mirror)
{
    struct fleetring *r = fleetring_new(8, 7);
    uint64_t h[4] = { 21, 22, 23, 24 }, out[8], hist, last;
    uint32_t t[8];
    ck_assert(fleetring_enable(r));
    /* Moved to the upstream's history at its snapshot's seq: nothing held before it. */
    fleetring_rebase(r, 99, 100);
    fleetring_where(r, &hist, &last);
    ck_assert(hist == 99 && last == 100);
    ck_assert(fleetring_holds_in(r, 99, 100) && !fleetring_holds_in(r, 99, 99));
    ck_assert(!fleetring_holds_in(r, 7, 100));
    /* The next keys of that history, under the upstream's seqs. */
    ck_assert_uint_eq(fleetring_append_at(r, 99, 101, h, 2, 0), 102);
    ck_assert_int_eq(fleetring_read_in(r, 99, 101, out, t, 8), 2);
    ck_assert(out[0] == 21 && out[1] == 22);
    ck_assert_int_eq(fleetring_read_in(r, 7, 101, out, t, 8), -2);
    /* Rebase to the same history: a no-op. */
    fleetring_rebase(r, 99, 50);
    ck_assert_uint_eq(fleetring_last(r), 102);
    /* A jump (a snapshot in between): held from the jump on only. */
    ck_assert_uint_eq(fleetring_append_at(r, 99, 110, h + 2, 1, 0), 110);
    ck_assert(!fleetring_holds_in(r, 99, 102) && fleetring_holds_in(r, 99, 109));
    ck_assert_int_eq(fleetring_read_in(r, 99, 101, out, t, 8), -1);
    ck_assert_int_eq(fleetring_read_in(r, 99, 110, out, t, 8), 1);
    ck_assert(out[0] == 23);
    /* Another history: the ring starts again there; a stream of the old one is told. */
    ck_assert_uint_eq(fleetring_append_at(r, 5, 3, h + 3, 1, 0), 3);
    ck_assert_uint_eq(fleetring_history(r), 5);
    ck_assert_int_eq(fleetring_read_in(r, 99, 111, out, t, 8), -2);
    ck_assert(fleetring_holds_in(r, 5, 2) && !fleetring_holds_in(r, 5, 1));
    fleetring_free(r);
}
END_TEST

/* Writers on two threads, a reader following: every seq once, in order, none lost. */
struct race {
    struct fleetring *r;
    uint64_t base;
};

static void *writer(void *arg)
{
    struct race *w = arg;
    for (uint64_t i = 0; i < 20000; i++) {
        uint64_t h = w->base + i;
        fleetring_append(w->r, &h, 1, 0);
    }
    return NULL;
}

START_TEST(test_ring_threads)
{
    struct fleetring *r = fleetring_new(1u << 20, 9);
    ck_assert(fleetring_enable(r));
    struct race a = { r, 1000000 }, b = { r, 2000000 };
    pthread_t ta, tb;
    ck_assert_int_eq(pthread_create(&ta, NULL, writer, &a), 0);
    ck_assert_int_eq(pthread_create(&tb, NULL, writer, &b), 0);
    uint64_t next = 1, seen_a = 0, seen_b = 0;
    static uint64_t out[4096];
    static uint32_t t[4096];
    while (next <= 40000) {
        long n = fleetring_read(r, next, out, t, 4096);
        ck_assert_int_ge(n, 0);
        for (long i = 0; i < n; i++) {
            /* Each writer's keys arrive in the order it added them. */
            if (out[i] < 2000000)
                ck_assert(out[i] == 1000000 + seen_a++);
            else
                ck_assert(out[i] == 2000000 + seen_b++);
        }
        next += (uint64_t)n;
    }
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    ck_assert(seen_a == 20000 && seen_b == 20000);
    ck_assert_uint_eq(fleetring_last(r), 40000);
    fleetring_free(r);
}
END_TEST

/* --------------------------------------------------------- the journal -- */

static void count_key(void *arg, uint64_t h)
{
    uint64_t *c = arg;
    c[0]++;
    c[1] ^= h;
}

/* Keys kept until their ttl, a longer ttl winning; at most limit; the expired make room. */
START_TEST(test_journal)
{
    struct fleetjournal *j = fleetjournal_new(1000);
    ck_assert_ptr_nonnull(j);
    for (uint64_t i = 1; i <= 1000; i++)
        ck_assert(fleetjournal_add(j, i * 7919, i <= 500 ? 10 : 100, 1000));
    ck_assert(!fleetjournal_add(j, 1, 10, 1000));          /* full */
    ck_assert(fleetjournal_add(j, 7919, 100, 1000));       /* kept already: longer now */
    ck_assert_uint_eq(fleetjournal_count(j), 1000);
    ck_assert_uint_eq(fleetjournal_refused(j), 1);
    uint64_t c[2] = { 0, 0 };
    fleetjournal_each(j, 1005, count_key, c);
    ck_assert_uint_eq(c[0], 1000);
    c[0] = c[1] = 0;
    fleetjournal_each(j, 1010, count_key, c);              /* the first 500 expired, but 7919 */
    ck_assert_uint_eq(c[0], 501);
    ck_assert_uint_eq(fleetjournal_count(j), 501);
    ck_assert(fleetjournal_add(j, 1, 10, 1010));            /* room again */
    fleetjournal_free(j);
    struct fleetjournal *none = fleetjournal_new(0);
    ck_assert(!fleetjournal_add(none, 5, 10, 0));
    fleetjournal_free(none);
}
END_TEST

/*
 * An anchor places an upstream's horizon on our horizon's clock: its age
 * on our oscillator, widened by FLEETWIRE_SLEW_PCT, never less than the truth;
 * nothing when our two clocks ran apart since the anchor (a suspend: the
 * oscillator stopped while the boot clock ran on).
 */
START_TEST(test_anchor_placed)
{
    const int64_t S = INT64_C(1000000000), MS = INT64_C(1000000);
    const struct up_anchor an = { 1, { 1000 * S, 5000 * S }, 7000 * S };
    /* H 5 s after the anchor's reading, read 6 s after the anchor: 1 s old, less the 1000 ppm. */
    struct up_when now = { an.local.raw + 6 * S, an.local.boot + 6 * S };
    int64_t age = 6 * S - (5 * S - 5 * MS);
    ck_assert_int_eq(up_anchored(&an, an.remote + 5 * S), an.local.raw + 5 * S - 5 * MS);
    ck_assert_int_eq(up_placed(&an, an.remote + 5 * S, now), now.boot - age - age / 10);
    /* Our boot clock slewed 8% fast meanwhile: still placed, from the oscillator's age. */
    now.boot = an.local.boot + 6 * S + 480 * MS;
    ck_assert_int_eq(up_placed(&an, an.remote + 5 * S, now), now.boot - age - age / 10);
    /* Suspended 3 s since the anchor: the oscillator stood still, nothing is placed. */
    now.boot = an.local.boot + 9 * S;
    ck_assert_int_eq(up_placed(&an, an.remote + 5 * S, now), -1);
    /* An H before the anchor's reading: the difference shrinks that way too. */
    now.boot = an.local.boot + 6 * S;
    ck_assert_int_eq(up_anchored(&an, an.remote - S), an.local.raw - S - MS);
    age = 6 * S + S + MS;
    ck_assert_int_eq(up_placed(&an, an.remote - S, now), now.boot - age - age / 10);
    /* A frame read before the anchored moment (clocks' jitter): no older than now. */
    now = (struct up_when){ an.local.raw + S, an.local.boot + S };
    ck_assert_int_eq(up_placed(&an, an.remote + 5 * S, now), now.boot);
    /* The one widening both sides apply (fleetwire.h): a tenth, rounded down, never overflowing. */
    ck_assert_int_eq(FLEETWIRE_SLEW_PCT, 10);
    ck_assert_int_eq(fleetwire_slew_widened(1234), 1234 + 123);
    ck_assert_int_eq(fleetwire_slew_widened(0), 0);
    ck_assert_int_eq(fleetwire_slew_widened(INT64_MAX / 2), INT64_MAX / 2 + INT64_MAX / 20);
}
END_TEST

CHECK_SUITE("fleet",
    CHECK_CASE("wire", .timeout = 30, .setup = reader_setup, .teardown = reader_teardown),
    CHECK_TEST(test_round_trip),
    CHECK_EACH(test_damage, damages),
    CHECK_TEST(test_oversized),
    CHECK_EACH(test_bad_payload, bad_payloads),
    CHECK_TEST(test_unknown_type),
    CHECK_TEST(test_verified),
    CHECK_TEST(test_horizon),
    CHECK_TEST(test_anchor_placed),
    CHECK_TEST(test_stop),
    CHECK_CASE("encoder", .timeout = 30),
    CHECK_TEST(test_encoder_bounds),
    CHECK_EACH(test_track, track_cases),
    CHECK_TEST(test_track_commit),
    CHECK_CASE("ring", .timeout = 60),
    CHECK_TEST(test_ring),
    CHECK_TEST(test_ring_marks),
    CHECK_TEST(test_ring_mirror),
    CHECK_TEST(test_ring_threads),
    CHECK_TEST(test_journal),
)
