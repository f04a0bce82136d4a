/*
 * Which "maybe" answers are hot: a heavy-hitters sketch of fixed memory
 * (Space-Saving, Metwally et al. 2005, kept per bucket of three) over the
 * key hashes of the IDs a filter answered "maybe" for, that says when one
 * has been asked min_hits times within a window.  Such an ID is a
 * candidate: worth one primary-key lookup to learn whether it is a false
 * positive (table_adapt.c).  Then it is settled for a while: either the
 * verified-absent set answers it from now on, or PostgreSQL has the row and
 * asking again soon would only cost the database a lookup.
 *
 * Cost on the hot path: one bucket (a cache line), taken with a try-lock
 * that never waits: a hit that finds its bucket busy (another thread in
 * the same bucket at that very moment) is dropped, which only delays a
 * candidate.  No allocation after hot_new.  Pure: the caller gives the
 * clock.
 */
#ifndef BLOOMGUARD_HOT_H
#define BLOOMGUARD_HOT_H

#include <stdbool.h>
#include <stdint.h>

struct hot;

/* Hits an entry counts at most (a saturating 15-bit count). */
#define HOT_MAX_HITS 32767u
/* A settled entry is not nominated again for this many windows. */
#define HOT_HOLD_WINDOWS 30u
/* A nominated entry nobody settled counts again after this many windows. */
#define HOT_QUEUE_WINDOWS 3u

/*
 * A sketch of about `entries` entries (rounded up to buckets of three, a
 * power of two of them; at least 3), making an ID a candidate once it is
 * hit min_hits (1..HOT_MAX_HITS) times within window_ms.  NULL on no
 * memory or bad arguments.  hot_free(NULL) is a no-op.
 */
struct hot *hot_new(uint32_t entries, uint32_t min_hits, uint32_t window_ms);
void hot_free(struct hot *s);

/*
 * One "maybe" for the key hash h at now_ms (any millisecond clock; it may
 * wrap).  True exactly once per crossing of min_hits: the caller then
 * queues h (and the key) for a verification and settles it later.  Any
 * thread, lock-free.
 */
bool hot_hit(struct hot *s, uint64_t h, uint32_t now_ms);

/*
 * A report from outside (POST /absent): h becomes a candidate now unless
 * it is one already or was settled within the hold.  True: queue it.
 */
bool hot_nominate(struct hot *s, uint64_t h, uint32_t now_ms);

/*
 * What became of a candidate: settled (verified absent or present, or
 * not worth asking again for a while: not nominated for HOT_HOLD_WINDOWS
 * windows), or given back (not verified after all: the queue was full, the
 * database did not answer) to count again from zero.
 */
void hot_settle(struct hot *s, uint64_t h, bool settled, uint32_t now_ms);

/* Entries the sketch holds (buckets * 3). */
uint32_t hot_capacity(const struct hot *s);

#endif
