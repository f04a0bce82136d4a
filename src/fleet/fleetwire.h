/*
 * The replication stream's wire format (GET /replicate/NAME): what an
 * upstream bloomguard sends the replicas that follow it, the encoder it
 * writes with, and the decoder and sequence tracker a replica reads with.
 * Pure: no I/O, no logging, no globals, no allocation but the decoder's
 * one buffer; the decoder trusts no length before checking it and takes
 * its input split anywhere (a byte at a time), so a hostile or broken
 * upstream can only make it say why it stopped (fuzz/fleetwire.c).
 *
 * All integers little-endian.  A stream is a preamble, then frames:
 *
 *   preamble  magic "BGREPL\r\n" (8), version (4): FLEETWIRE_VERSION
 *   frame     type (1), reserved (3, zero), payload length (4, at most
 *             FLEETWIRE_MAX_PAYLOAD), payload, check (4): XXH32 (seed 0)
 *             of the 8 head bytes and the payload
 *
 * A string in a payload is a length (2) and that many bytes, no NUL
 * inside.  Payloads, each exactly as long as its fields:
 *
 *   HELLO      flags (4: FLEETWIRE_HELLO_*), history (8), epoch (8),
 *              covered (8), generation (8), from (8), last (8), relid (4),
 *              attnum (4), typid (4), base_typid (4), typmod (4), dboid (4),
 *              deterministic (1), kind (1), reserved (2, zero), fpp (8,
 *              IEEE 754 binary64), hash (4: FLEETWIRE_HASH), then the
 *              strings name, table, column, sysid, spell, type_name
 *   ADDS       first (8), count (4, >= 1), posts (4, <= count), count
 *              hashes (8 each), then posts marks { index (4), ttl (4) },
 *              indexes strictly increasing and below count, ttl >= 1
 *   EPOCH      epoch (8), covered (8)
 *   GENERATION generation (8), covered (8)
 *   HEARTBEAT  last (8), epoch (8)
 *   BYE        code (4: FLEETWIRE_BYE_*), reason (a string)
 *   POSITION   seq (8), epoch (8), lsn (8), tli (4), reserved (4, zero):
 *              h-stream's commit positions, below
 *
 *   HORIZON    clock (8), now (8), horizon (8), history (8), seq (8),
 *              epoch (8), covered (8), generation (8), flags (4:
 *              FLEETWIRE_HORIZON_*), reserved (4, zero): h-horizon's, below
 *
 * Adaptive (issue 35; frame types 16..23 are its own):
 *   VERIFIED   count (4, >= 1), then count entries { hash (8), key (a
 *              string of 1..FLEETWIRE_VKEY_MAX bytes) }: keys of the
 *              upstream's verified-absent set (table_adapt.h), each sent
 *              after every key the stream had sent before it, and only if
 *              still in the set then (api/fleetstream.c argues why that is
 *              the order a replica may deny it in).
 *
 * What they mean.  history is random per table lifetime on the upstream
 * (a restart is another history); seq numbers the keys added to the
 * upstream's live filter, 1 first, each ADDS frame carrying the keys
 * first .. first + count - 1 (their filter_hash, FLEETWIRE_HASH) in
 * order, a POST's marked with the seconds its journal keeps it.  epoch
 * and covered are the upstream table's (table.h): its epoch now, and the
 * epoch its live filter's load started in; generation counts its live
 * filters.  HELLO says where the stream starts: from is the seq the
 * replica asked to resume after, last the newest seq now; with
 * FLEETWIRE_HELLO_RESUMED the next ADDS starts at from + 1, else a BYE
 * follows (the replica must fetch a snapshot).  EPOCH: the upstream's
 * table had a gap (a replica must gap too); GENERATION: a new load went
 * live; HEARTBEAT: nothing new, every beat (the stream's ?beat=, 1 s by
 * default; an idle stream costs its upstream a write per beat, so a
 * replica asks for what its silence_timeout needs); BYE: the stream ends,
 * and why.  Unknown frame types are skipped (a newer upstream may add
 * some); a key lost that way would show as a sequence gap.
 *
 * Commit positions (h-stream's part of the format: FLEETWIRE_POSITION,
 * FLEETWIRE_HELLO_AT_COMMIT, the stream's ?commit=).  Upstreams that
 * follow one PostgreSQL by logical see the same commits at the same WAL
 * positions, whatever their histories.  POSITION says: every key of every
 * commit of the upstream's database ending at or before lsn on timeline
 * tli is at or below seq in this stream (the upstream's table was loaded
 * and covered its epoch, epoch, all along since: fleetring.h's marks), and
 * is sent only once the stream has sent seq.  A replica that applied up to
 * seq in that epoch holds every row committed up to lsn; on another
 * upstream it asks ?commit=TLI:LSN beside ?from=, and an upstream of
 * another history that can prove it holds every key committed after lsn
 * (fleetstream.c) answers a HELLO with FLEETWIRE_HELLO_AT_COMMIT |
 * FLEETWIRE_HELLO_RESUMED: from is then a seq of its own history, where
 * the stream goes on.  Methods feed and notify have no such position:
 * their upstreams send none, and a replica of them fetches a snapshot.
 *
 * The horizon in the stream (h-horizon's: FLEETWIRE_HORIZON, the stream's
 * ?horizon=1).  A stream asked with it gets, every beat in place of a
 * HEARTBEAT, what GET /replicate/NAME/horizon answers, on the upstream's
 * oscillator (CLOCK_MONOTONIC_RAW, which NTP never slews; the horizon's
 * age, measured on its boot clock, widened by a tenth to carry it
 * there): clock names that clock (random per process: two
 * processes, or two hosts behind one address, never share one), now is
 * its reading when the frame was made, horizon the upstream's horizon
 * (every row committed before it is in its filter; 0: none), seq its
 * newest seq read after it, and the epoch, covered and generation the
 * answer gives.  Every frame of a stream is made after the replica sent
 * its request, which is how a replica places the upstream's clock in its
 * own timeline without comparing the two (follow_upstream.c).  Frames of
 * a stream come in beats aligned on the upstream's clock (now a multiple
 * of the beat), so that the upstream wakes every stream of one beat in
 * one round.
 */
#ifndef BLOOMGUARD_FLEETWIRE_H
#define BLOOMGUARD_FLEETWIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FLEETWIRE_MAGIC "BGREPL\r\n"
#define FLEETWIRE_MAGIC_LEN 8u
#define FLEETWIRE_VERSION 1u
#define FLEETWIRE_PREAMBLE_LEN 12u
#define FLEETWIRE_HEAD_LEN 8u
#define FLEETWIRE_SUM_LEN 4u
/* The largest payload a decoder takes: a longer frame is refused unread. */
#define FLEETWIRE_MAX_PAYLOAD 65536u
#define FLEETWIRE_MAX_FRAME (FLEETWIRE_HEAD_LEN + FLEETWIRE_MAX_PAYLOAD + FLEETWIRE_SUM_LEN)
/* ADDS: bytes before the hashes, and of a POST mark. */
#define FLEETWIRE_ADDS_FIXED 16u
#define FLEETWIRE_POST_LEN 8u
/* The key hash the stream carries: filter_hash (XXH3-64, seed 0) of the key. */
#define FLEETWIRE_HASH 1u
/* Bounds and default of a stream's heartbeat interval (GET /replicate/NAME?beat=MS). */
#define FLEETWIRE_BEAT_MIN_MS 250u
#define FLEETWIRE_BEAT_MAX_MS 10000u
#define FLEETWIRE_BEAT_DEFAULT_MS 1000u
/* An encoded EPOCH, GENERATION or HEARTBEAT frame's size. */
#define FLEETWIRE_PAIR_FRAME (FLEETWIRE_HEAD_LEN + 16u + FLEETWIRE_SUM_LEN)
/* String bounds: a reason, and each identity string. */
#define FLEETWIRE_MAX_REASON 512u
#define FLEETWIRE_MAX_STRING 1024u

enum fleetwire_type {
    FLEETWIRE_HELLO = 1,
    FLEETWIRE_ADDS = 2,
    FLEETWIRE_EPOCH = 3,
    FLEETWIRE_GENERATION = 4,
    FLEETWIRE_HEARTBEAT = 5,
    FLEETWIRE_BYE = 6,
    /* Adaptive (issue 35): 16..23. */
    FLEETWIRE_VERIFIED = 16,
    /* h-stream's commit positions: 24..31. */
    FLEETWIRE_POSITION = 24,
    /* h-horizon's horizon in the stream: 32..39. */
    FLEETWIRE_HORIZON = 32
};

/* Adaptive (issue 35): a VERIFIED entry's key is at most this long (vset.h's VSET_KEY_MAX). */
#define FLEETWIRE_VKEY_MAX 120u

/* HELLO flags. */
#define FLEETWIRE_HELLO_REPLICA 1u      /* the upstream follows an upstream itself */
#define FLEETWIRE_HELLO_RESUMED 2u      /* ADDS follow from from + 1 */
#define FLEETWIRE_HELLO_AT_COMMIT 4u    /* resumed in its own history at the commit asked for */

/* BYE codes. */
enum fleetwire_bye {
    FLEETWIRE_BYE_OTHER = 0,
    FLEETWIRE_BYE_SNAPSHOT = 1,         /* the ring does not hold from (or another history) */
    FLEETWIRE_BYE_BEHIND = 2,           /* the replica fell out of the ring while streaming */
    FLEETWIRE_BYE_SHUTDOWN = 3          /* the upstream is stopping */
};

/*
 * What the upstream's filter is of: the table_ident of its load (table.h)
 * and the filter's name, table, column, kind and rate.  Strings are
 * NUL-terminated here and no longer than their arrays.
 */
struct fleetwire_ident {
    uint32_t relid, typid, base_typid, dboid;
    int32_t attnum, typmod;
    bool deterministic;
    uint8_t kind;                   /* enum filter_kind */
    double fpp;                     /* the filter's target false-positive rate */
    uint32_t hash;                  /* FLEETWIRE_HASH */
    char name[64];
    char table[FLEETWIRE_MAX_STRING + 1];
    char column[FLEETWIRE_MAX_STRING + 1];
    char sysid[24];
    char spell[32];                 /* spell_type_name */
    char type_name[64];
};

struct fleetwire_hello {
    uint32_t flags;
    uint64_t history, epoch, covered, generation, from, last;
    struct fleetwire_ident ident;
};

/* An ADDS frame as decoded: the hashes and marks stay in the decoder's buffer. */
struct fleetwire_adds {
    uint64_t first;
    uint32_t count, posts;
    const unsigned char *hashes;    /* count x 8 bytes: fleetwire_adds_hash */
    const unsigned char *marks;     /* posts x 8 bytes: fleetwire_adds_mark */
};

/* Adaptive (issue 35): a VERIFIED frame as decoded: its entries stay in the decoder's buffer. */
struct fleetwire_verified {
    uint32_t count;
    const unsigned char *entries;   /* len bytes: read with fleetwire_verified_next */
    size_t len;
};

/* A HORIZON frame (h-horizon's; below). */
struct fleetwire_horizon {
    uint64_t clock;                 /* the upstream process's clock: random per process */
    int64_t now;                    /* its oscillator when it made the frame (ns) */
    int64_t horizon;                /* its horizon in that clock, <= now; 0: none yet */
    uint64_t history, seq;          /* the newest seq, read after the horizon */
    uint64_t epoch, covered, generation;
    uint32_t flags;                 /* FLEETWIRE_HORIZON_* */
};
#define FLEETWIRE_HORIZON_DEGRADED 1u   /* it cannot prove its own freshness (stale, loading) */
#define FLEETWIRE_HORIZON_REPLICA 2u    /* it follows an upstream itself */
/* An encoded HORIZON frame's size. */
#define FLEETWIRE_HORIZON_FRAME (FLEETWIRE_HEAD_LEN + 72u + FLEETWIRE_SUM_LEN)
/*
 * How much a short interval measured on a clock NTP slews (a horizon's
 * age on the boot clock) is widened when it is carried to a clock it never
 * slews (the oscillator), or the other way: more than any slew (chrony's
 * at most 83,333 ppm).  Both sides of a stream apply it: the upstream to
 * the horizon a HORIZON frame or a horizon answer carries (fleethub.c),
 * the replica to an age it places on its own clock (upstream_anchor.c).
 * An older horizon only proves less, so widening is always safe.
 */
#define FLEETWIRE_SLEW_PCT 10
/* d (ns, >= 0) widened by FLEETWIRE_SLEW_PCT, rounded down; no overflow for any d. */
static inline int64_t fleetwire_slew_widened(int64_t d)
{
    return d + d / 100 * FLEETWIRE_SLEW_PCT + d % 100 * FLEETWIRE_SLEW_PCT / 100;
}

struct fleetwire_frame {
    enum fleetwire_type type;
    union {
        struct fleetwire_hello hello;
        struct fleetwire_adds adds;
        struct fleetwire_verified verified;
        struct { uint64_t epoch, covered; } epoch;
        struct { uint64_t generation, covered; } generation;
        struct { uint64_t last, epoch; } heartbeat;
        struct { uint32_t code; char reason[FLEETWIRE_MAX_REASON + 1]; } bye;
        struct { uint64_t seq, epoch, lsn; uint32_t tli; } position;
        struct fleetwire_horizon horizon;
    } u;
};

/* The i-th hash of an ADDS frame (i < count). */
uint64_t fleetwire_adds_hash(const struct fleetwire_adds *a, uint32_t i);
/* The j-th POST mark (j < posts): the index of its hash and its ttl in seconds. */
void fleetwire_adds_mark(const struct fleetwire_adds *a, uint32_t j, uint32_t *index,
                         uint32_t *ttl);

/*
 * Adaptive (issue 35): the entry of v at *at (0 first), moving *at past
 * it; false after the last.  key points into the frame (klen bytes).
 */
bool fleetwire_verified_next(const struct fleetwire_verified *v, size_t *at, uint64_t *hash,
                             const char **key, size_t *klen);

/* ------------------------------------------------------------ writing -- */

/*
 * Each writes one whole piece into buf (cap bytes) and returns its length,
 * or 0 when it does not fit (or breaks a bound: a string too long, an
 * ADDS of no key or of more than fit a payload).  Thread-safe.
 */
size_t fleetwire_put_preamble(unsigned char *buf, size_t cap);
size_t fleetwire_put_hello(unsigned char *buf, size_t cap, const struct fleetwire_hello *h);
/*
 * hashes[0 .. count) are the keys first ..; ttls[i] is 0 for a row, else
 * the seconds a POSTed key is kept (a mark is written for it).
 */
size_t fleetwire_put_adds(unsigned char *buf, size_t cap, uint64_t first, const uint64_t *hashes,
                          const uint32_t *ttls, uint32_t count);
/* The most keys an ADDS frame of cap bytes can hold, all of them POSTs (0: none). */
uint32_t fleetwire_adds_room(size_t cap);
size_t fleetwire_put_pair(unsigned char *buf, size_t cap, enum fleetwire_type type, uint64_t a,
                          uint64_t b);  /* EPOCH, GENERATION, HEARTBEAT */
size_t fleetwire_put_bye(unsigned char *buf, size_t cap, enum fleetwire_bye code,
                         const char *reason);
/* A POSITION: every key of the commits up to tli/lsn is at or below seq (of epoch). */
size_t fleetwire_put_position(unsigned char *buf, size_t cap, uint64_t seq, uint64_t epoch,
                              uint32_t tli, uint64_t lsn);
/* An encoded POSITION frame's size. */
#define FLEETWIRE_POSITION_FRAME (FLEETWIRE_HEAD_LEN + 32u + FLEETWIRE_SUM_LEN)
/* A HORIZON (h-horizon's): what the upstream can prove now, in its own clock. */
size_t fleetwire_put_horizon(unsigned char *buf, size_t cap, const struct fleetwire_horizon *h);
/*
 * Adaptive (issue 35): a VERIFIED frame of n entries (hashes[i], keys[i]
 * of klens[i] bytes, 1..FLEETWIRE_VKEY_MAX); 0 when it does not fit.
 */
size_t fleetwire_put_verified(unsigned char *buf, size_t cap, const uint64_t *hashes,
                              const char *const *keys, const size_t *klens, uint32_t n);

/* ------------------------------------------------------------ reading -- */

enum fleetwire_status {
    FLEETWIRE_OK = 0,
    FLEETWIRE_BAD_MAGIC,            /* not a replication stream */
    FLEETWIRE_OTHER_VERSION,        /* a version this build does not read */
    FLEETWIRE_OVERSIZED,            /* a frame longer than FLEETWIRE_MAX_PAYLOAD */
    FLEETWIRE_BAD_SUM,              /* a frame's check does not match */
    FLEETWIRE_BAD_FRAME,            /* a known frame whose payload breaks its layout */
    FLEETWIRE_STOPPED,              /* the callback ended it */
    FLEETWIRE_NOMEM
};
/* A short name for a status ("bad check", "oversized frame", ...): static. */
const char *fleetwire_strstatus(enum fleetwire_status st);

/*
 * A decoder: bytes in, checked frames out.  Once it has returned anything
 * but FLEETWIRE_OK it stays failed (the stream is unusable from there).
 */
struct fleetwire_dec {
    unsigned char *buf;             /* FLEETWIRE_MAX_FRAME bytes */
    size_t have;                    /* bytes of the preamble or frame under way */
    bool preamble;                  /* the preamble was read */
    enum fleetwire_status failed;
    uint64_t frames, bytes;         /* read so far */
};

/* False when out of memory.  fleetwire_dec_free frees the buffer (a zeroed decoder too). */
bool fleetwire_dec_init(struct fleetwire_dec *d);
void fleetwire_dec_free(struct fleetwire_dec *d);

/*
 * Each frame as it is whole: false from the callback stops the decoder
 * (FLEETWIRE_STOPPED).  The frame, and what it points to, is valid during
 * the call only.
 */
typedef bool (*fleetwire_frame_fn)(void *arg, const struct fleetwire_frame *f);

/*
 * Feed len bytes of the stream: every frame they complete goes to fn, in
 * order.  FLEETWIRE_OK when every byte was taken (a partial frame waits
 * for more); else the first problem (why, whylen bytes, says more), and
 * the decoder stays failed.
 */
enum fleetwire_status fleetwire_feed(struct fleetwire_dec *d, const void *in, size_t len,
                                     fleetwire_frame_fn fn, void *arg, char *why, size_t whylen);

/* -------------------------------------------------------- the sequence -- */

/*
 * What a replica makes of the frames of one stream, in order: the rule that
 * a key is applied only if every key before it in the same history was.
 * It knows the replica's position when the stream was asked for (history,
 * the last seq applied) and follows it frame by frame.
 */
struct fleetwire_track {
    uint64_t history;               /* of the position */
    uint64_t next;                  /* the seq the next ADDS must start at */
    bool hello;                     /* the HELLO was seen */
    bool resumed;                   /* it said the stream resumes at next */
    bool by_commit;                 /* asked with ?commit=: a HELLO_AT_COMMIT may come */
    bool at_commit;                 /* it came: history and next are the upstream's own */
};

enum fleetwire_verdict {
    FLEETWIRE_APPLY,                /* an ADDS to apply (next moved past it), or a frame to note */
    FLEETWIRE_SNAPSHOT,             /* the position cannot be resumed: fetch a snapshot */
    FLEETWIRE_VIOLATION             /* the upstream broke the protocol: drop the stream */
};

/* Start tracking a stream asked for from history:last (history 0: none yet). */
void fleetwire_track_init(struct fleetwire_track *t, uint64_t history, uint64_t last);
/* The stream was asked with a commit position too (?commit=): see fleetwire_track_frame. */
void fleetwire_track_by_commit(struct fleetwire_track *t);

/*
 * The verdict on the next frame f.  APPLY for a HELLO of the same history
 * that resumed at next, an ADDS that starts exactly at next (next then
 * moves past it), and EPOCH, GENERATION, HEARTBEAT or BYE after the
 * HELLO (the caller acts on them); SNAPSHOT for a HELLO that did not
 * resume or is of another history, and for a BYE before or after a
 * refusal; VIOLATION (why says what) for a frame before the HELLO, a
 * second HELLO, a HELLO resuming somewhere else, an ADDS that skips or
 * repeats a seq, or a HEARTBEAT whose last is behind next - 1.  A HELLO
 * with FLEETWIRE_HELLO_AT_COMMIT (and RESUMED) to a stream asked by commit
 * is APPLY: the track moves to its history, next to its from + 1 (the
 * caller moves its mirror there); to one asked without, a VIOLATION.  A
 * POSITION whose seq is past what the stream sent is a VIOLATION.
 */
enum fleetwire_verdict fleetwire_track_frame(struct fleetwire_track *t,
                                             const struct fleetwire_frame *f, char *why,
                                             size_t whylen);

#endif
