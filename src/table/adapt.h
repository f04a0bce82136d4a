/*
 * One table's adaptive part (issue 35): the hot-"maybe" sketch (hot.h),
 * the verified-absent set (vset.h), the count of adds by hash bucket that
 * lets a verification prove nothing overtook it, and the queue of
 * candidates the verifier takes.  Internal to the table module:
 * table_adapt.h says what it promises and argues why it holds.  Pure: no
 * libpq, no logging; a coarse clock for the sketch's windows.
 */
#ifndef BLOOMGUARD_ADAPT_H
#define BLOOMGUARD_ADAPT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "answer.h"
#include "hot.h"
#include "vset.h"

struct adapt;

/* Hash buckets the adds are counted in: a verification is overtaken by an add to its bucket. */
#define ADAPT_ADD_BUCKETS 4096u
/* Candidates waiting for the verifier, at most; more are given back to the sketch. */
#define ADAPT_QUEUE 1024u
/* Entries entered lately that a replica's stream may still send (adapt_log_read). */
#define ADAPT_LOG 1024u

/*
 * The adaptive part for max_entries verified-absent IDs, candidates after
 * min_hits "maybe" answers within window_ms.  Its set lives in memory of
 * its own until adapt_move_set.  NULL on no memory or bad arguments.
 */
struct adapt *adapt_new(uint32_t max_entries, uint32_t min_hits, uint32_t window_ms);
void adapt_free(struct adapt *a);

/*
 * The set's bytes (vset_bytes), and moving it (empty) into mem, e.g. a
 * published file's mapping, or with mem NULL back into memory of its own,
 * while no other thread uses a (false: mem too small or misaligned, or no
 * memory; the set stays where it was).  mem must outlive its use.
 */
size_t adapt_set_bytes(const struct adapt *a);
bool adapt_move_set(struct adapt *a, void *mem, size_t bytes);

/*
 * wake(arg) is called (under no lock) when a candidate joins an empty
 * queue, so that the verifier need not poll; NULL: nobody.  Set it before
 * other threads use a.
 */
void adapt_set_wake(struct adapt *a, void (*wake)(void *arg), void *arg);

/*
 * entered(arg) after an entry joins the set and its log (adapt_log_read),
 * under no lock of a, on the thread that entered it (the verifier's, or a
 * replica's stream from its upstream): an upstream's hub, whose streams
 * send it at once (table_adapt.h, "On a replica").  NULL: nobody.  Set it
 * before other threads use a.
 */
void adapt_set_entered(struct adapt *a, void (*entered)(void *arg), void *arg);

/*
 * Whether entries joined the log after cursor (adapt_log_read's), lock-free:
 * a stream with nothing else to send need not take the writer's lock.
 */
bool adapt_log_ahead(const struct adapt *a, uint64_t cursor);

/*
 * The set, for answer_lookup's deny step (lock-free readers; an empty
 * set's answer is vset_has's first test).  It moves only with
 * adapt_move_set: a caller may keep the pointer until then, so that a
 * lookup costs no call to learn it (table.c keeps it).
 */
const struct vset *adapt_set(const struct adapt *a);

/*
 * The set's tag filter, for a lookup's first test without a call: one bit
 * per slice of key hashes (their top ADAPT_TAG_LOG2 bits), set before an
 * entry of such a hash is staged and cleared only with the whole set
 * (adapt_reset), so that a clear bit proves the set holds no entry of h
 * (a lookup passes answer_lookup no set then: the set's own lookup, some
 * 150 instructions a miss, is for hashes whose bit is set).  A set bit
 * proves nothing (other hashes', or entries gone since).  A bit read
 * clear while its entry is being entered is a reader that missed an
 * entry, which vset.h allows: "maybe", never a wrong 404.  The filter is
 * a's for its life: a caller may keep the pointer.
 */
#define ADAPT_TAG_LOG2 20u
const _Atomic uint64_t *adapt_tags(const struct adapt *a);

static inline bool adapt_tag_may(const _Atomic uint64_t *tags, uint64_t h)
{
    uint64_t i = h >> (64 - ADAPT_TAG_LOG2);
    return atomic_load_explicit(&((_Atomic uint64_t *)tags)[i >> 6], memory_order_relaxed) >> (i & 63) & 1;
}

/*
 * After answer_lookup, for the table's own counting: q's answer was a
 * deny by the set (counted, striped per thread), or a "maybe" of the
 * filter's that the set did not deny, which the sketch counts (a hot one
 * is queued) in two steps: its door, hot_door_hit on adapt_door(a) (NULL:
 * none, carry 0), which the caller takes inline, so that a "maybe" the
 * door keeps (most are) costs no call; then, for one it hands on (carry
 * >= 0), adapt_maybe.  Lock-free but for a try-lock that gives up rather
 * than wait.  The door is a's for its life: a caller may keep it.
 */
void adapt_denied(struct adapt *a);
const struct hot_door *adapt_door(const struct adapt *a);
void adapt_maybe(struct adapt *a, const struct answer_query *q, int carry);

/*
 * Every key the table's filters take for a row or a POST (hash h), before
 * the add returns to its caller: the add count of h's bucket goes up, then
 * every entry of h is killed.  Any thread.
 */
void adapt_added(struct adapt *a, uint64_t h);

/*
 * A COPY's rows (hashes hs[0, n)), already read, as adapt_added for each
 * but counted without a locked instruction per key: the count goes up in
 * the loads' own buckets, which one load at a time writes (a mutex of a's
 * makes it so), one sequentially consistent fence for the batch, then the
 * kills (none when the set is empty).  Safe for any thread; meant for a
 * load's one thread, before the rows' horizon can move.
 */
void adapt_added_bulk(struct adapt *a, const uint64_t *hs, size_t n);

/* One candidate as the verifier takes it. */
struct adapt_candidate {
    uint64_t hash;
    uint64_t ticket;        /* the add counts of its bucket when taken (both kinds, summed):
                               before its query */
    uint64_t generation;    /* adapt_reset's count when queued */
    size_t klen;
    char key[VSET_KEY_MAX];
};

/*
 * Up to max candidates into out, each with its ticket read now (seq_cst),
 * skipping those the journal may hold (held(arg, hash): a POSTed ID is
 * never verified: the table may not have its row yet); returns how many.
 */
size_t adapt_take(struct adapt *a, struct adapt_candidate *out, size_t max,
                  bool (*held)(void *arg, uint64_t h), void *arg);

/* The verifier's verdict on a candidate, and what became of it. */
enum adapt_verdict { ADAPT_ABSENT, ADAPT_PRESENT, ADAPT_FAILED };
enum adapt_outcome {
    ADAPT_ENTERED,          /* absent, and now denied */
    ADAPT_RACED,            /* absent by the query, but an add of its hash (or a reset) came
                               after its ticket: not believed */
    ADAPT_SETTLED,          /* present (or too long to keep): not asked again for a while */
    ADAPT_GIVEN_BACK        /* failed: counts again */
};
enum adapt_outcome adapt_verified(struct adapt *a, const struct adapt_candidate *c,
                                  enum adapt_verdict v);

/*
 * A replica's entry from its upstream's stream (table_adapt.h, "On a
 * replica"): the ticket taken now, not entered if the journal may hold h
 * (GIVEN_BACK), else entered as a verification's absent verdict is
 * (ENTERED or RACED).  The sketch settles h.
 */
enum adapt_outcome adapt_enter(struct adapt *a, uint64_t h, const char *key, size_t klen,
                               bool (*held)(void *arg, uint64_t h), void *arg);

/* A candidate a replica passed on to its upstream: settled here, counted. */
void adapt_forwarded(struct adapt *a, uint64_t h);

/*
 * The entries entered (by a verification or adapt_enter) since *cursor
 * (0: the oldest the log keeps), up to max into out (hash, key, klen),
 * skipping those the set no longer holds when read; *cursor moves past
 * what was read.  Any thread; takes the writer's lock.
 */
size_t adapt_log_read(struct adapt *a, uint64_t *cursor, struct adapt_candidate *out, size_t max);

/*
 * A report of a key (hash h) the set denies already: a replica asks for it
 * because it does not hold the entry (it came after the newest ADAPT_LOG
 * entries a new stream sends, or its set lost it).  Unless the log still
 * holds it (every stream sends it then, a new one too), it is logged
 * again, so that the streams send it again (the entered wake too).  True
 * when logged.  Any thread; takes the writer's lock.
 */
bool adapt_resend(struct adapt *a, uint64_t h, const char *key, size_t klen);

/* A report (POST /absent): the key (hash h) becomes a candidate unless queued or settled. */
bool adapt_report(struct adapt *a, uint64_t h, const char *key, size_t klen);

/*
 * Forget every entry and fail every verification in flight (their tickets'
 * generation is over): the keys' spelling changed.  Counts nothing as an
 * invalidation.
 */
void adapt_reset(struct adapt *a);

/*
 * Kill the entries keep() refuses (e.g. keys a new filter answers absent
 * for: the set need not deny them).  The writer's lock is taken.
 */
unsigned adapt_prune(struct adapt *a, bool (*keep)(void *arg, const char *key, size_t len),
                     void *arg);

struct adapt_info {
    uint64_t entries, max_entries;
    uint64_t queued;                /* candidates waiting now */
    uint64_t candidates;            /* hot "maybe" IDs queued */
    uint64_t reported;              /* IDs queued by a report */
    uint64_t dropped;               /* candidates given back: the queue was full or busy */
    uint64_t verified_absent, verified_present, verify_failed;
    uint64_t raced;                 /* verified absent, but overtaken: not believed */
    uint64_t posted;                /* candidates skipped: the POST journal may hold them */
    uint64_t evictions, invalidations, denied;
    uint64_t received;              /* entries from an upstream's stream (a replica's) */
    uint64_t forwarded;             /* candidates passed on to the upstream (a replica's) */
};
void adapt_info(struct adapt *a, struct adapt_info *out);

#endif
