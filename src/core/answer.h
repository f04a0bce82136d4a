/*
 * How an ID is answered, in one place for the daemon (table.c, and the
 * degraded time table_follow.c counts) and for the readers of its
 * published filters (reader.c, libbloomguard, the nginx module), so that a
 * reader out of process answers exactly as the daemon would: the staleness
 * rule, and the one lookup sequence (the ID's key for the column's
 * spelling, the filter's bits, then whether an "absent" may be told as
 * absent).  Pure, and total: a horizon read from a shared file may be
 * anything, so no value of any argument overflows or is undefined
 * behaviour.  The caller reads its horizon and holds its filter; nothing
 * here locks, allocates (but for a key too long for the stack) or logs.
 */
#ifndef BLOOMGUARD_ANSWER_H
#define BLOOMGUARD_ANSWER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "filter.h"
#include "spell.h"
#include "vset.h"

/*
 * A horizon more than this past now is another clock's (another boot,
 * another time namespace, a forged file): it proves nothing.
 */
#define ANSWER_FUTURE_SLACK_NS INT64_C(1000000000)

/*
 * Whether an "absent" of a filter whose horizon is h (ns of CLOCK_BOOTTIME,
 * table.h) must be answered "maybe" (degraded) at now.  It must when
 *   - unsure: the filter cannot vouch for any absence, whatever its horizon
 *     (it is saturated, filter.h; or acknowledged POSTs may be missing from
 *     it, table_hold_absent);
 *   - or max_stale_ns is not 0 (0: never by age), and
 *       - max_stale_ns < 0: no bound can be read from it;
 *       - h <= 0: no horizon yet (a restored snapshot before its catch-up);
 *       - h > now + ANSWER_FUTURE_SLACK_NS: another clock's horizon;
 *       - now - h > max_stale_ns (computed without overflow).
 */
bool answer_degraded(int64_t now, int64_t h, int64_t max_stale_ns, bool unsure);

/*
 * How many nanoseconds of [from, to] answer_degraded(t, h, max_stale_ns,
 * false) holds for (h fixed): the degraded time to count for a stretch
 * under one horizon.  0 when to <= from; saturates at INT64_MAX.
 */
int64_t answer_degraded_ns(int64_t from, int64_t to, int64_t h, int64_t max_stale_ns);

/* now - h, saturated to the int64 range: a horizon's age for figures. */
int64_t answer_age(int64_t now, int64_t h);

/* What a lookup answers (table.h's enum table_answer has the same values). */
enum answer {
    ANSWER_NOT_READY = -1,  /* no filter: nothing can be said */
    ANSWER_ABSENT = 0,      /* surely absent */
    ANSWER_MAYBE = 1,       /* maybe present */
    ANSWER_DEGRADED = 2,    /* absent by the filter, but the horizon cannot back it: "maybe" */
    ANSWER_UNPROVABLE = 3   /* this spelling cannot be proven absent (spell.h): "maybe" */
};

/* Keys up to this long are made on the stack (in struct answer_query). */
#define ANSWER_KEY_STACK 256

/*
 * One ID on its way through the sequence: its key and that key's hash,
 * and what the sequence found.  On the caller's stack; answer_query_begin
 * fills it, answer_query_end frees what it took.
 */
struct answer_query {
    enum spell_verdict verdict;     /* spell_key's, for the spelling asked */
    const char *key;                /* valid with SPELL_KEY, until answer_query_end */
    size_t klen;
    uint64_t hash;                  /* filter_hash of the key (SPELL_KEY only) */
    bool filter_maybe;              /* the filter's bits answered "maybe" */
    bool denied;                    /* ... and the verified-absent set denied the key */
    char *heap;                     /* a key too long for buf */
    char buf[ANSWER_KEY_STACK];
};

/*
 * The key of id for spelling sp into q (a key that cannot be made, for want
 * of memory, is SPELL_MAYBE: never a wrong key).  Pair with
 * answer_query_end.
 */
void answer_query_begin(struct answer_query *q, enum spell_type sp, const void *id, size_t len);
void answer_query_end(struct answer_query *q);

/*
 * Whether an "absent" must be told as "maybe" now (answer_degraded, and
 * whatever else the caller knows: a peer's filter on probation, a horizon
 * from another clock).  The sequence asks at most once per lookup, and
 * only when the answer would be absent: a batch may remember its first
 * reply.
 */
typedef bool answer_stale_fn(void *ctx);

/*
 * The one lookup sequence, for q (answer_query_begin) against filter f
 * (NULL: none yet: ANSWER_NOT_READY) and the verified-absent set denied
 * (NULL: none), the caller having read the horizon its stale() judges
 * before it loaded f and denied (the order table.h and publish.h argue):
 *   1. a spelling whose value cannot be known is ANSWER_UNPROVABLE;
 *   2. a value the column's type refuses can never be a row: absent;
 *   3. the filter's bits: absent, or "maybe" (q->filter_maybe);
 *   4. a "maybe" whose key the set holds is absent (q->denied: a false
 *      positive found and verified, table_adapt.h); any other
 *      is ANSWER_MAYBE;
 *   5. an absent answer is ANSWER_DEGRADED when stale(ctx), else
 *      ANSWER_ABSENT: a denied key no less than the filter's own.
 * f and denied must stay valid for the call (the caller's read section).
 */
enum answer answer_lookup(struct answer_query *q, const struct filter *f,
                          const struct vset *denied, answer_stale_fn *stale, void *ctx);

#endif
