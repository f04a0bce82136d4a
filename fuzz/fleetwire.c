/*
 * Fuzz a replica's reading of the replication stream (src/fleet/fleetwire.c)
 * with what a broken or hostile upstream may send: garbage, truncated or
 * trickled bytes, oversized frames, skipped or repeated positions, another
 * table's HELLO.  The decoder must never crash, leak or read out of bounds;
 * the frames it hands over must be exactly the bytes they came from (each
 * re-encodes to them), and the same however the input is split; and the
 * sequence rule (fleetwire_track_frame) must never let a key be applied
 * after a missing one: the keys applied are exactly last + 1, last + 2, ...
 * with no gap and no repeat, and nothing is applied after a refusal or a
 * violation.
 *
 * Input: byte 0 the mode (bit 0: recompute every whole frame's check in
 * place first, so that the fuzzer explores what lies behind an XXH32; bit
 * 1: also feed it a byte at a time), byte 1 the chunk size of the split
 * feed (0: whole), bytes 2..9 the replica's position (last seq, LE) in
 * history FUZZ_HISTORY, the rest the stream.
 */
#include <endian.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "fleetwire.h"
#include "fuzz.h"

#define FUZZ_HISTORY UINT64_C(0xfeedface12345678)

struct run {
    const struct fleetwire_dec *d;
    const uint8_t *in;              /* the stream: the frame ends at d->bytes */
    struct fleetwire_track track;
    bool done;                      /* a refusal or a violation: nothing applies after */
    uint64_t applied;               /* the last seq applied */
    uint64_t frames;
    uint64_t sum;                   /* a digest of the frames, to compare splits */
    unsigned char re[FLEETWIRE_MAX_FRAME];
};

/* The frame f re-encoded into r->re: its length (0 for a kind never re-encoded). */
static size_t reencode(struct run *r, const struct fleetwire_frame *f)
{
    static uint32_t ttls[FLEETWIRE_MAX_PAYLOAD / 8];
    static uint64_t hashes[FLEETWIRE_MAX_PAYLOAD / 8];
    switch (f->type) {
    case FLEETWIRE_HELLO:
        return fleetwire_put_hello(r->re, sizeof r->re, &f->u.hello);
    case FLEETWIRE_ADDS: {
        const struct fleetwire_adds *a = &f->u.adds;
        FUZZ_CHECK(a->count >= 1 && a->count <= FLEETWIRE_MAX_PAYLOAD / 8 && a->posts <= a->count);
        for (uint32_t i = 0; i < a->count; i++) {
            hashes[i] = fleetwire_adds_hash(a, i);
            ttls[i] = 0;
        }
        for (uint32_t j = 0; j < a->posts; j++) {
            uint32_t index, ttl;
            fleetwire_adds_mark(a, j, &index, &ttl);
            FUZZ_CHECK(index < a->count && ttl > 0 && ttls[index] == 0);
            ttls[index] = ttl;
        }
        return fleetwire_put_adds(r->re, sizeof r->re, a->first, hashes, ttls, a->count);
    }
    case FLEETWIRE_EPOCH:
    case FLEETWIRE_GENERATION:
    case FLEETWIRE_HEARTBEAT:
        return fleetwire_put_pair(r->re, sizeof r->re, f->type, f->u.epoch.epoch,
                                  f->u.epoch.covered);
    case FLEETWIRE_BYE:
        return fleetwire_put_bye(r->re, sizeof r->re, (enum fleetwire_bye)f->u.bye.code,
                                 f->u.bye.reason);
    case FLEETWIRE_POSITION:
        return fleetwire_put_position(r->re, sizeof r->re, f->u.position.seq,
                                      f->u.position.epoch, f->u.position.tli, f->u.position.lsn);
    case FLEETWIRE_HORIZON:
        return fleetwire_put_horizon(r->re, sizeof r->re, &f->u.horizon);
    case FLEETWIRE_VERIFIED: {
        /* Adaptive (issue 35): each entry is whole (1..FLEETWIRE_VKEY_MAX bytes of key). */
        static const char *keys[FLEETWIRE_MAX_PAYLOAD / 11];
        static size_t klens[FLEETWIRE_MAX_PAYLOAD / 11];
        size_t at = 0, n = 0;
        while (n < FLEETWIRE_MAX_PAYLOAD / 11
               && fleetwire_verified_next(&f->u.verified, &at, &hashes[n], &keys[n], &klens[n])) {
            FUZZ_CHECK(klens[n] >= 1 && klens[n] <= FLEETWIRE_VKEY_MAX);
            n++;
        }
        FUZZ_CHECK(n == f->u.verified.count && at == f->u.verified.len);
        return fleetwire_put_verified(r->re, sizeof r->re, hashes, keys, klens, (uint32_t)n);
    }
    }
    return 0;
}

static bool on_frame(void *arg, const struct fleetwire_frame *f)
{
    struct run *r = arg;
    size_t n = reencode(r, f);
    /* Nothing lost, nothing skipped: the frame is the very bytes it came from. */
    FUZZ_CHECK(n > 0 && n <= r->d->bytes - FLEETWIRE_PREAMBLE_LEN);
    FUZZ_CHECK(memcmp(r->re, r->in + r->d->bytes - n, n) == 0);
    r->sum = XXH64(r->re, n, r->sum);
    r->frames++;
    if (r->done)
        return true;
    uint64_t next = r->track.next;
    char why[256];
    enum fleetwire_verdict v = fleetwire_track_frame(&r->track, f, why, sizeof why);
    if (v != FLEETWIRE_APPLY) {
        FUZZ_CHECK(r->track.next == next);
        r->done = true;
        return true;
    }
    if (f->type == FLEETWIRE_ADDS) {
        /* Applied only right after the last key applied, in the history asked for. */
        FUZZ_CHECK(r->track.resumed && f->u.adds.first == r->applied + 1);
        r->applied = f->u.adds.first + f->u.adds.count - 1;
        FUZZ_CHECK(r->track.next == r->applied + 1);
    } else {
        FUZZ_CHECK(r->track.next == next);
    }
    return true;
}

/* Recompute the check of every whole frame of the stream in place. */
static void reseal(uint8_t *s, size_t n)
{
    size_t at = FLEETWIRE_PREAMBLE_LEN;
    while (at + FLEETWIRE_HEAD_LEN <= n) {
        uint32_t plen;
        memcpy(&plen, s + at + 4, 4);
        plen = le32toh(plen);
        if (plen > FLEETWIRE_MAX_PAYLOAD || n - at - FLEETWIRE_HEAD_LEN < (size_t)plen + 4)
            return;
        uint32_t sum = htole32(XXH32(s + at, FLEETWIRE_HEAD_LEN + plen, 0));
        memcpy(s + at + FLEETWIRE_HEAD_LEN + plen, &sum, 4);
        at += FLEETWIRE_HEAD_LEN + plen + 4;
    }
}

/* Decode s in chunks of step bytes (0: whole) into *r; the final status. */
static enum fleetwire_status run(struct run *r, const uint8_t *s, size_t n, size_t step,
                                 uint64_t last)
{
    struct fleetwire_dec d;
    char why[256];
    FUZZ_CHECK(fleetwire_dec_init(&d));
    memset(r, 0, offsetof(struct run, re));
    r->d = &d;
    r->in = s;
    r->applied = last;
    fleetwire_track_init(&r->track, FUZZ_HISTORY, last);
    enum fleetwire_status st = FLEETWIRE_OK;
    for (size_t at = 0; at < n && st == FLEETWIRE_OK;) {
        size_t k = step == 0 || step > n - at ? n - at : step;
        st = fleetwire_feed(&d, s + at, k, on_frame, r, why, sizeof why);
        at += k;
    }
    FUZZ_CHECK(st != FLEETWIRE_OK || d.bytes == n);
    fleetwire_dec_free(&d);
    return st;
}

FUZZ_TARGET(fleetwire)
{
    if (size < 10)
        return 0;
    uint8_t mode = data[0], step = data[1];
    uint64_t last;
    memcpy(&last, data + 2, 8);
    last = le64toh(last) % (UINT64_MAX / 2);
    size_t n = size - 10;
    uint8_t *s = malloc(n ? n : 1);
    FUZZ_CHECK(s != NULL);
    memcpy(s, data + 10, n);
    if (mode & 1)
        reseal(s, n);
    static struct run whole, split;
    enum fleetwire_status a = run(&whole, s, n, 0, last);
    enum fleetwire_status b = run(&split, s, n, (mode & 2) ? 1 : step, last);
    /* The same frames and the same end however the bytes arrive. */
    FUZZ_CHECK(a == b && whole.frames == split.frames && whole.sum == split.sum);
    FUZZ_CHECK(whole.applied == split.applied);
    free(s);
    return 0;
}
