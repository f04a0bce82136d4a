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
 * Cost on the hot path.  Every "maybe" of a present ID comes here, and
 * most are of IDs asked once in a while: the sketch's work (a try-lock, a
 * bucket, Space-Saving's replacement) is worth it only for IDs that come
 * back.  So a doorkeeper stands in front (as TinyLFU's does for a cache):
 * 2-bit counters (four words of fourteen per sketch entry, at least 2^14
 * words), each counting the hits of the IDs that share it in this
 * generation of one window and the one before.  An ID's hits stay at the
 * door (one word, compare-and-swapped; no lock, no bucket) until its
 * counter reaches door_pass (min_hits / 2, at most HOT_DOOR_PASS); the
 * next goes on to the sketch, carrying those door_pass hits if the sketch
 * does not hold the ID.  Why counts and not one bit (a door that hands an
 * ID on when it comes back, as before 2026-11-29): a present ID asked at
 * random comes back within two windows often enough (bench/run's request
 * pools ask each about 1.5 times a run, bench/lookup_ir's warm-up once),
 * and a bitmap fills at 10^5 distinct IDs a window, after which every
 * "maybe" paid for the door and the bucket.  Against sampling 1 in N: the
 * count stays exact, not a guess with min_hits scaled: an ID asked
 * min_hits times within a window is a candidate at its min_hits-th
 * "maybe" at the latest, however it spreads them (the door's counter
 * covers at least the last window), and the door has no cycle an
 * attacker's IDs could hide in (a counter is only raised, never replaced).
 * What it gives up:
 *   - door_pass hits early at most: the carried hits may be older than
 *     the window the sketch counts (two windows, or more while no hit
 *     went on: hot_door), or other IDs' (a counter others raised): a
 *     candidate costs one verification, never a wrong answer;
 *   - a flood of distinct "maybe" IDs (more than about the door's counters
 *     a window) raises most counters to door_pass: then most hits go on to
 *     the sketch, which costs what it cost without the door, plus the door.
 * A hit that goes on takes one bucket (a cache line) with a try-lock that
 * never waits: a hit that finds its bucket busy (another thread in the
 * same bucket at that very moment) is dropped, which only delays a
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
/* Hits the door keeps of an ID before it goes on to the sketch, at most (2-bit counters). */
#define HOT_DOOR_PASS 3u
/* A settled entry is not nominated again for this many windows. */
#define HOT_HOLD_WINDOWS 30u
/* A nominated entry nobody settled counts again after this many windows. */
#define HOT_QUEUE_WINDOWS 3u

/*
 * A sketch of about `entries` entries (rounded up to buckets of three, a
 * power of two of them; at least 3), making an ID a candidate once it is
 * hit min_hits (1..HOT_MAX_HITS) times within window_ms (with min_hits
 * 1 there is no door: the first "maybe" is a candidate; with 2 or 3 the
 * door keeps one hit).  NULL on no
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
 * hot_hit in two steps, so that a hit the door keeps costs no clock: the
 * door (lock-free): -1, h's hit is kept there (nothing more to do); else
 * the hits h carries to hot_count, which is hot_hit past the door (and
 * turns the door's generation when its window has passed).  The door
 * turns only when a call has the clock: while the door keeps every
 * "maybe", none does, and it remembers longer than two windows, which
 * can only make its hits older (door_pass early at most), never lose one;
 * a hit that goes on turns it.
 */
int hot_door(struct hot *s, uint64_t h);
bool hot_count(struct hot *s, uint64_t h, int carry, uint32_t now);

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
