/*
 * The replication stream's frames (format in fleetwire.h): the writer the
 * upstream fills its replicas' streams with, the decoder a replica reads
 * them with, and the sequence rule it applies them by.
 */
#include "fleetwire.h"
#include "errfmt.h"

#include <endian.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

/* HELLO: bytes before its strings. */
#define HELLO_FIXED 96u

static void put16(unsigned char *p, uint16_t v) { v = htole16(v); memcpy(p, &v, 2); }
static void put32(unsigned char *p, uint32_t v) { v = htole32(v); memcpy(p, &v, 4); }
static void put64(unsigned char *p, uint64_t v) { v = htole64(v); memcpy(p, &v, 8); }
static uint16_t get16(const unsigned char *p) { uint16_t v; memcpy(&v, p, 2); return le16toh(v); }
static uint32_t get32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return le32toh(v); }
static uint64_t get64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return le64toh(v); }

uint64_t fleetwire_adds_hash(const struct fleetwire_adds *a, uint32_t i)
{
    return get64(a->hashes + (size_t)i * 8);
}

void fleetwire_adds_mark(const struct fleetwire_adds *a, uint32_t j, uint32_t *index,
                         uint32_t *ttl)
{
    *index = get32(a->marks + (size_t)j * FLEETWIRE_POST_LEN);
    *ttl = get32(a->marks + (size_t)j * FLEETWIRE_POST_LEN + 4);
}

/* ------------------------------------------------------------ writing -- */

size_t fleetwire_put_preamble(unsigned char *buf, size_t cap)
{
    if (cap < FLEETWIRE_PREAMBLE_LEN)
        return 0;
    memcpy(buf, FLEETWIRE_MAGIC, FLEETWIRE_MAGIC_LEN);
    put32(buf + FLEETWIRE_MAGIC_LEN, FLEETWIRE_VERSION);
    return FLEETWIRE_PREAMBLE_LEN;
}

/* Close a frame whose payload of len bytes is written after its head: the head and the check. */
static size_t seal(unsigned char *buf, enum fleetwire_type type, size_t len)
{
    buf[0] = (unsigned char)type;
    buf[1] = buf[2] = buf[3] = 0;
    put32(buf + 4, (uint32_t)len);
    size_t n = FLEETWIRE_HEAD_LEN + len;
    put32(buf + n, XXH32(buf, n, 0));
    return n + FLEETWIRE_SUM_LEN;
}

/* Whether a payload of len bytes fits in cap bytes as a frame. */
static bool fits(size_t cap, size_t len)
{
    return len <= FLEETWIRE_MAX_PAYLOAD && cap >= FLEETWIRE_HEAD_LEN + len + FLEETWIRE_SUM_LEN;
}

static size_t put_str(unsigned char *p, const char *s, size_t len)
{
    put16(p, (uint16_t)len);
    memcpy(p + 2, s, len);
    return 2 + len;
}

size_t fleetwire_put_hello(unsigned char *buf, size_t cap, const struct fleetwire_hello *h)
{
    const struct fleetwire_ident *id = &h->ident;
    const char *str[6] = { id->name, id->table, id->column, id->sysid, id->spell, id->type_name };
    const size_t max[6] = { sizeof id->name - 1, FLEETWIRE_MAX_STRING, FLEETWIRE_MAX_STRING,
                            sizeof id->sysid - 1, sizeof id->spell - 1, sizeof id->type_name - 1 };
    size_t slen[6], len = HELLO_FIXED;
    for (int i = 0; i < 6; i++) {
        slen[i] = strnlen(str[i], max[i] + 1);
        if (slen[i] > max[i])
            return 0;
        len += 2 + slen[i];
    }
    if (!fits(cap, len))
        return 0;
    unsigned char *p = buf + FLEETWIRE_HEAD_LEN;
    uint64_t fpp;
    memcpy(&fpp, &id->fpp, 8);
    put32(p, h->flags);
    put64(p + 4, h->history);
    put64(p + 12, h->epoch);
    put64(p + 20, h->covered);
    put64(p + 28, h->generation);
    put64(p + 36, h->from);
    put64(p + 44, h->last);
    put32(p + 52, id->relid);
    put32(p + 56, (uint32_t)id->attnum);
    put32(p + 60, id->typid);
    put32(p + 64, id->base_typid);
    put32(p + 68, (uint32_t)id->typmod);
    put32(p + 72, id->dboid);
    p[76] = id->deterministic ? 1 : 0;
    p[77] = id->kind;
    p[78] = p[79] = 0;
    put64(p + 80, fpp);
    put32(p + 88, id->hash);
    put32(p + 92, 0);
    size_t at = HELLO_FIXED;
    for (int i = 0; i < 6; i++)
        at += put_str(p + at, str[i], slen[i]);
    return seal(buf, FLEETWIRE_HELLO, len);
}

uint32_t fleetwire_adds_room(size_t cap)
{
    size_t over = FLEETWIRE_HEAD_LEN + FLEETWIRE_ADDS_FIXED + FLEETWIRE_SUM_LEN;
    if (cap > FLEETWIRE_MAX_FRAME)
        cap = FLEETWIRE_MAX_FRAME;
    return cap > over ? (uint32_t)((cap - over) / (8 + FLEETWIRE_POST_LEN)) : 0;
}

size_t fleetwire_put_adds(unsigned char *buf, size_t cap, uint64_t first, const uint64_t *hashes,
                          const uint32_t *ttls, uint32_t count)
{
    uint32_t posts = 0;
    for (uint32_t i = 0; i < count; i++)
        posts += ttls[i] != 0;
    size_t len = FLEETWIRE_ADDS_FIXED + (size_t)count * 8 + (size_t)posts * FLEETWIRE_POST_LEN;
    if (count == 0 || !fits(cap, len))
        return 0;
    unsigned char *p = buf + FLEETWIRE_HEAD_LEN;
    put64(p, first);
    put32(p + 8, count);
    put32(p + 12, posts);
    unsigned char *h = p + FLEETWIRE_ADDS_FIXED, *m = h + (size_t)count * 8;
    for (uint32_t i = 0; i < count; i++) {
        put64(h + (size_t)i * 8, hashes[i]);
        if (ttls[i] != 0) {
            put32(m, i);
            put32(m + 4, ttls[i]);
            m += FLEETWIRE_POST_LEN;
        }
    }
    return seal(buf, FLEETWIRE_ADDS, len);
}

size_t fleetwire_put_pair(unsigned char *buf, size_t cap, enum fleetwire_type type, uint64_t a,
                          uint64_t b)
{
    if (!fits(cap, 16) || (type != FLEETWIRE_EPOCH && type != FLEETWIRE_GENERATION
                           && type != FLEETWIRE_HEARTBEAT))
        return 0;
    put64(buf + FLEETWIRE_HEAD_LEN, a);
    put64(buf + FLEETWIRE_HEAD_LEN + 8, b);
    return seal(buf, type, 16);
}

size_t fleetwire_put_bye(unsigned char *buf, size_t cap, enum fleetwire_bye code,
                         const char *reason)
{
    size_t rl = strnlen(reason, FLEETWIRE_MAX_REASON + 1);
    if (rl > FLEETWIRE_MAX_REASON || !fits(cap, 6 + rl))
        return 0;
    put32(buf + FLEETWIRE_HEAD_LEN, (uint32_t)code);
    put_str(buf + FLEETWIRE_HEAD_LEN + 4, reason, rl);
    return seal(buf, FLEETWIRE_BYE, 6 + rl);
}

size_t fleetwire_put_position(unsigned char *buf, size_t cap, uint64_t seq, uint64_t epoch,
                              uint32_t tli, uint64_t lsn)
{
    if (!fits(cap, 32))
        return 0;
    unsigned char *p = buf + FLEETWIRE_HEAD_LEN;
    put64(p, seq);
    put64(p + 8, epoch);
    put64(p + 16, lsn);
    put32(p + 24, tli);
    put32(p + 28, 0);
    return seal(buf, FLEETWIRE_POSITION, 32);
}

/* ----------------------------------------------- h-horizon's HORIZON -- */

size_t fleetwire_put_horizon(unsigned char *buf, size_t cap, const struct fleetwire_horizon *h)
{
    if (!fits(cap, 72))
        return 0;
    unsigned char *p = buf + FLEETWIRE_HEAD_LEN;
    const uint64_t v[8] = { h->clock, (uint64_t)h->now, (uint64_t)h->horizon, h->history, h->seq,
                            h->epoch, h->covered, h->generation };
    for (unsigned i = 0; i < 8; i++)
        put64(p + 8 * i, v[i]);
    put32(p + 64, h->flags);
    put32(p + 68, 0);
    return seal(buf, FLEETWIRE_HORIZON, 72);
}

/* A HORIZON's payload; false if it breaks its layout (a horizon after its now, a negative clock). */
static bool parse_horizon(const unsigned char *p, size_t len, struct fleetwire_horizon *h)
{
    if (len != 72 || get32(p + 68) != 0)
        return false;
    h->clock = get64(p);
    h->now = (int64_t)get64(p + 8);
    h->horizon = (int64_t)get64(p + 16);
    h->history = get64(p + 24);
    h->seq = get64(p + 32);
    h->epoch = get64(p + 40);
    h->covered = get64(p + 48);
    h->generation = get64(p + 56);
    h->flags = get32(p + 64);
    return h->now > 0 && h->horizon >= 0 && h->horizon <= h->now;
}

/* --------------------------------------- adaptive (issue 35): VERIFIED -- */

size_t fleetwire_put_verified(unsigned char *buf, size_t cap, const uint64_t *hashes,
                              const char *const *keys, const size_t *klens, uint32_t n)
{
    size_t len = 4;
    for (uint32_t i = 0; i < n; i++) {
        if (klens[i] == 0 || klens[i] > FLEETWIRE_VKEY_MAX)
            return 0;
        len += 8 + 2 + klens[i];
    }
    if (n == 0 || !fits(cap, len))
        return 0;
    unsigned char *p = buf + FLEETWIRE_HEAD_LEN;
    put32(p, n);
    p += 4;
    for (uint32_t i = 0; i < n; i++) {
        put64(p, hashes[i]);
        p += 8 + put_str(p + 8, keys[i], klens[i]);
    }
    return seal(buf, FLEETWIRE_VERIFIED, len);
}

bool fleetwire_verified_next(const struct fleetwire_verified *v, size_t *at, uint64_t *hash,
                             const char **key, size_t *klen)
{
    /* parse_verified checked the layout: each entry is whole. */
    if (*at + 10 > v->len)
        return false;
    *hash = get64(v->entries + *at);
    *klen = get16(v->entries + *at + 8);
    *key = (const char *)v->entries + *at + 10;
    *at += 10 + *klen;
    return true;
}

static bool parse_verified(const unsigned char *p, size_t len, struct fleetwire_verified *v)
{
    if (len < 4)
        return false;
    v->count = get32(p);
    v->entries = p + 4;
    v->len = len - 4;
    size_t at = 0;
    for (uint32_t i = 0; i < v->count; i++) {
        if (at + 10 > v->len)
            return false;
        size_t kl = get16(v->entries + at + 8);
        if (kl == 0 || kl > FLEETWIRE_VKEY_MAX || at + 10 + kl > v->len
            || memchr(v->entries + at + 10, '\0', kl) != NULL)
            return false;
        at += 10 + kl;
    }
    return v->count >= 1 && at == v->len;
}

/* ------------------------------------------------------------ reading -- */

const char *fleetwire_strstatus(enum fleetwire_status st)
{
    switch (st) {
    case FLEETWIRE_OK: return "ok";
    case FLEETWIRE_BAD_MAGIC: return "not a replication stream";
    case FLEETWIRE_OTHER_VERSION: return "other stream version";
    case FLEETWIRE_OVERSIZED: return "oversized frame";
    case FLEETWIRE_BAD_SUM: return "bad check";
    case FLEETWIRE_BAD_FRAME: return "bad frame";
    case FLEETWIRE_STOPPED: return "stopped";
    case FLEETWIRE_NOMEM: return "out of memory";
    }
    return "unknown stream status";
}

static enum fleetwire_status fail(struct fleetwire_dec *d, enum fleetwire_status st, char *why,
                                  size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static enum fleetwire_status fail(struct fleetwire_dec *d, enum fleetwire_status st, char *why,
                                  size_t whylen, const char *fmt, ...)
{
    if (why != NULL && whylen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, whylen, fmt, ap);
        va_end(ap);
    }
    d->failed = st;
    return st;
}

bool fleetwire_dec_init(struct fleetwire_dec *d)
{
    memset(d, 0, sizeof *d);
    d->buf = malloc(FLEETWIRE_MAX_FRAME);
    d->failed = d->buf ? FLEETWIRE_OK : FLEETWIRE_NOMEM;
    return d->buf != NULL;
}

void fleetwire_dec_free(struct fleetwire_dec *d)
{
    free(d->buf);
    d->buf = NULL;
}

/* A string at *at of a payload of len bytes into out (cap bytes, NUL included); false if bad. */
static bool get_str(const unsigned char *p, size_t len, size_t *at, char *out, size_t cap)
{
    if (len - *at < 2)
        return false;
    size_t n = get16(p + *at);
    if (n >= cap || len - *at - 2 < n || memchr(p + *at + 2, '\0', n) != NULL)
        return false;
    memcpy(out, p + *at + 2, n);
    out[n] = '\0';
    *at += 2 + n;
    return true;
}

static bool parse_hello(const unsigned char *p, size_t len, struct fleetwire_hello *h)
{
    if (len < HELLO_FIXED || p[78] != 0 || p[79] != 0 || get32(p + 92) != 0)
        return false;
    struct fleetwire_ident *id = &h->ident;
    uint64_t fpp = get64(p + 80);
    h->flags = get32(p);
    h->history = get64(p + 4);
    h->epoch = get64(p + 12);
    h->covered = get64(p + 20);
    h->generation = get64(p + 28);
    h->from = get64(p + 36);
    h->last = get64(p + 44);
    id->relid = get32(p + 52);
    id->attnum = (int32_t)get32(p + 56);
    id->typid = get32(p + 60);
    id->base_typid = get32(p + 64);
    id->typmod = (int32_t)get32(p + 68);
    id->dboid = get32(p + 72);
    if (p[76] > 1)
        return false;
    id->deterministic = p[76] == 1;
    id->kind = p[77];
    memcpy(&id->fpp, &fpp, 8);
    id->hash = get32(p + 88);
    size_t at = HELLO_FIXED;
    return get_str(p, len, &at, id->name, sizeof id->name)
        && get_str(p, len, &at, id->table, sizeof id->table)
        && get_str(p, len, &at, id->column, sizeof id->column)
        && get_str(p, len, &at, id->sysid, sizeof id->sysid)
        && get_str(p, len, &at, id->spell, sizeof id->spell)
        && get_str(p, len, &at, id->type_name, sizeof id->type_name) && at == len;
}

static bool parse_adds(const unsigned char *p, size_t len, struct fleetwire_adds *a)
{
    if (len < FLEETWIRE_ADDS_FIXED)
        return false;
    a->first = get64(p);
    a->count = get32(p + 8);
    a->posts = get32(p + 12);
    /* count and posts are at most 2^32 each: the sum cannot overflow 64 bits. */
    if (a->count == 0 || a->posts > a->count
        || (uint64_t)len != FLEETWIRE_ADDS_FIXED + (uint64_t)a->count * 8
                            + (uint64_t)a->posts * FLEETWIRE_POST_LEN)
        return false;
    a->hashes = p + FLEETWIRE_ADDS_FIXED;
    a->marks = a->hashes + (size_t)a->count * 8;
    uint32_t prev = 0;
    for (uint32_t j = 0; j < a->posts; j++) {
        uint32_t index, ttl;
        fleetwire_adds_mark(a, j, &index, &ttl);
        if (index >= a->count || (j > 0 && index <= prev) || ttl == 0)
            return false;
        prev = index;
    }
    return true;
}

/* The payload of a whole, checked frame of a known type into f; false if it breaks its layout. */
static bool parse(enum fleetwire_type type, const unsigned char *p, size_t len,
                  struct fleetwire_frame *f)
{
    f->type = type;
    switch (type) {
    case FLEETWIRE_HELLO:
        return parse_hello(p, len, &f->u.hello);
    case FLEETWIRE_ADDS:
        return parse_adds(p, len, &f->u.adds);
    case FLEETWIRE_EPOCH:
    case FLEETWIRE_GENERATION:
    case FLEETWIRE_HEARTBEAT:
        if (len != 16)
            return false;
        /* The three are two u64s each, in the same places. */
        f->u.epoch.epoch = get64(p);
        f->u.epoch.covered = get64(p + 8);
        return true;
    case FLEETWIRE_VERIFIED:
        return parse_verified(p, len, &f->u.verified);
    case FLEETWIRE_BYE: {
        size_t at = 4;
        if (len < 4)
            return false;
        f->u.bye.code = get32(p);
        return get_str(p, len, &at, f->u.bye.reason, sizeof f->u.bye.reason) && at == len;
    }
    case FLEETWIRE_POSITION:
        if (len != 32 || get32(p + 28) != 0)
            return false;
        f->u.position.seq = get64(p);
        f->u.position.epoch = get64(p + 8);
        f->u.position.lsn = get64(p + 16);
        f->u.position.tli = get32(p + 24);
        return f->u.position.lsn != 0;
    case FLEETWIRE_HORIZON:
        return parse_horizon(p, len, &f->u.horizon);
    }
    return false;
}

static bool known(unsigned type)
{
    return (type >= FLEETWIRE_HELLO && type <= FLEETWIRE_BYE) || type == FLEETWIRE_VERIFIED
           || type == FLEETWIRE_POSITION || type == FLEETWIRE_HORIZON;
}

enum fleetwire_status fleetwire_feed(struct fleetwire_dec *d, const void *in, size_t len,
                                     fleetwire_frame_fn fn, void *arg, char *why, size_t whylen)
{
    const unsigned char *src = in;
    if (d->failed != FLEETWIRE_OK)
        return fail(d, d->failed, why, whylen, "the stream failed before (%s)",
                    fleetwire_strstatus(d->failed));
    while (len > 0) {
        size_t want = !d->preamble ? FLEETWIRE_PREAMBLE_LEN : FLEETWIRE_HEAD_LEN;
        if (d->preamble && d->have >= FLEETWIRE_HEAD_LEN)
            want = FLEETWIRE_HEAD_LEN + (size_t)get32(d->buf + 4) + FLEETWIRE_SUM_LEN;
        size_t n = want - d->have < len ? want - d->have : len;
        memcpy(d->buf + d->have, src, n);
        d->have += n;
        d->bytes += n;
        src += n;
        len -= n;
        if (!d->preamble) {
            /* The magic as far as it came: garbage is refused at its first byte. */
            size_t m = d->have < FLEETWIRE_MAGIC_LEN ? d->have : FLEETWIRE_MAGIC_LEN;
            if (memcmp(d->buf, FLEETWIRE_MAGIC, m) != 0)
                return fail(d, FLEETWIRE_BAD_MAGIC, why, whylen,
                            "not a bloomguard replication stream (bad magic)");
            if (d->have < FLEETWIRE_PREAMBLE_LEN)
                continue;
            uint32_t v = get32(d->buf + FLEETWIRE_MAGIC_LEN);
            if (v != FLEETWIRE_VERSION)
                return fail(d, FLEETWIRE_OTHER_VERSION, why, whylen,
                            "stream version %u, this build reads %u", v, FLEETWIRE_VERSION);
            d->preamble = true;
            d->have = 0;
            continue;
        }
        if (d->have == FLEETWIRE_HEAD_LEN) {
            uint32_t plen = get32(d->buf + 4);
            if (plen > FLEETWIRE_MAX_PAYLOAD)
                return fail(d, FLEETWIRE_OVERSIZED, why, whylen,
                            "a frame of %u payload bytes (at most %u)", plen,
                            FLEETWIRE_MAX_PAYLOAD);
            if (d->buf[1] != 0 || d->buf[2] != 0 || d->buf[3] != 0)
                return fail(d, FLEETWIRE_BAD_FRAME, why, whylen, "reserved head bytes are set");
            continue;               /* the payload's length is known now */
        }
        if (d->have < want)
            continue;
        /* A whole frame: check it, then hand it over. */
        size_t plen = want - FLEETWIRE_HEAD_LEN - FLEETWIRE_SUM_LEN;
        if (XXH32(d->buf, FLEETWIRE_HEAD_LEN + plen, 0) != get32(d->buf + FLEETWIRE_HEAD_LEN + plen))
            return fail(d, FLEETWIRE_BAD_SUM, why, whylen, "frame %llu: the check does not match",
                        (unsigned long long)d->frames + 1);
        unsigned type = d->buf[0];
        d->have = 0;
        d->frames++;
        if (!known(type))
            continue;
        struct fleetwire_frame *f = malloc(sizeof *f);
        if (f == NULL)
            return fail(d, FLEETWIRE_NOMEM, why, whylen, "out of memory");
        bool ok = parse((enum fleetwire_type)type, d->buf + FLEETWIRE_HEAD_LEN, plen, f);
        bool go = ok && fn(arg, f);
        free(f);
        if (!ok)
            return fail(d, FLEETWIRE_BAD_FRAME, why, whylen,
                        "frame %llu (type %u): its payload breaks the layout",
                        (unsigned long long)d->frames, type);
        if (!go)
            return fail(d, FLEETWIRE_STOPPED, why, whylen, "stopped after frame %llu",
                        (unsigned long long)d->frames);
    }
    return FLEETWIRE_OK;
}

/* -------------------------------------------------------- the sequence -- */

void fleetwire_track_init(struct fleetwire_track *t, uint64_t history, uint64_t last)
{
    *t = (struct fleetwire_track){ .history = history, .next = last + 1 };
}

void fleetwire_track_by_commit(struct fleetwire_track *t)
{
    t->by_commit = true;
}

/* The verdict v, its why written (errfmt.h). */
#define verdict(v, why, whylen, ...) \
    __extension__({ errfmt((why), (whylen), __VA_ARGS__); (enum fleetwire_verdict)(v); })

enum fleetwire_verdict fleetwire_track_frame(struct fleetwire_track *t,
                                             const struct fleetwire_frame *f, char *why,
                                             size_t whylen)
{
    if (f->type == FLEETWIRE_HELLO) {
        const struct fleetwire_hello *h = &f->u.hello;
        if (t->hello)
            return verdict(FLEETWIRE_VIOLATION, why, whylen, "a second HELLO");
        t->hello = true;
        if (h->flags & FLEETWIRE_HELLO_AT_COMMIT) {
            /* Resumed in the upstream's own history at a commit position (fleetwire.h). */
            if (!t->by_commit || !(h->flags & FLEETWIRE_HELLO_RESUMED) || h->history == 0
                || h->last < h->from || h->from == UINT64_MAX)
                return verdict(FLEETWIRE_VIOLATION, why, whylen,
                               "a HELLO resuming at a commit position %s",
                               t->by_commit ? "that breaks its layout" : "never asked for");
            t->history = h->history;
            t->next = h->from + 1;
            t->resumed = t->at_commit = true;
            return FLEETWIRE_APPLY;
        }
        if (!(h->flags & FLEETWIRE_HELLO_RESUMED) || h->history != t->history || t->history == 0)
            return verdict(FLEETWIRE_SNAPSHOT, why, whylen, "the upstream %s",
                           h->history != t->history ? "is of another history"
                                                    : "no longer holds the position");
        if (h->from + 1 != t->next || h->last < h->from)
            return verdict(FLEETWIRE_VIOLATION, why, whylen,
                           "HELLO resumes after %llu (newest %llu), asked after %llu",
                           (unsigned long long)h->from, (unsigned long long)h->last,
                           (unsigned long long)(t->next - 1));
        t->resumed = true;
        return FLEETWIRE_APPLY;
    }
    if (!t->hello)
        return verdict(FLEETWIRE_VIOLATION, why, whylen, "frame type %u before the HELLO",
                       (unsigned)f->type);
    if (f->type == FLEETWIRE_BYE)
        return t->resumed && f->u.bye.code != FLEETWIRE_BYE_SNAPSHOT
                   && f->u.bye.code != FLEETWIRE_BYE_BEHIND
               ? FLEETWIRE_APPLY
               : verdict(FLEETWIRE_SNAPSHOT, why, whylen, "the upstream ended the stream: %s",
                         f->u.bye.reason);
    if (!t->resumed)
        return verdict(FLEETWIRE_VIOLATION, why, whylen, "frame type %u after a refusal",
                       (unsigned)f->type);
    if (f->type == FLEETWIRE_ADDS) {
        const struct fleetwire_adds *a = &f->u.adds;
        if (a->first != t->next)
            return verdict(FLEETWIRE_VIOLATION, why, whylen, "keys from %llu, expected %llu",
                           (unsigned long long)a->first, (unsigned long long)t->next);
        if (a->first + a->count < a->first)
            return verdict(FLEETWIRE_VIOLATION, why, whylen, "seq %llu + %u overflows",
                           (unsigned long long)a->first, a->count);
        t->next = a->first + a->count;
        return FLEETWIRE_APPLY;
    }
    if (f->type == FLEETWIRE_POSITION && f->u.position.seq >= t->next)
        return verdict(FLEETWIRE_VIOLATION, why, whylen, "a position at %llu past %llu sent",
                       (unsigned long long)f->u.position.seq,
                       (unsigned long long)(t->next - 1));
    if (f->type == FLEETWIRE_HEARTBEAT && f->u.heartbeat.last + 1 < t->next)
        return verdict(FLEETWIRE_VIOLATION, why, whylen, "a heartbeat at %llu behind %llu sent",
                       (unsigned long long)f->u.heartbeat.last,
                       (unsigned long long)(t->next - 1));
    return FLEETWIRE_APPLY;
}
