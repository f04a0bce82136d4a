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
 * cells of one byte (32 per sketch entry, at least 2^17), each two 2-bit
 * counters of the hits of the IDs that share it, in this generation of
 * one window and in the one before, under the generation's tag.  An ID's
 * hits stay at the door (one byte loaded and stored: no locked
 * instruction, no lock, no bucket, no clock) until its
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
 *     the sketch, which costs what it cost without the door, plus the door;
 *   - two threads' hits of one cell at the same moment: one may write over
 *     the other (a plain store, not a compare-and-swap: hot.c), which
 *     costs that moment's hits of that cell's IDs, a candidate a hit or
 *     two later (as a busy bucket's dropped hit does, below).
 * A hit that goes on takes one bucket (a cache line) with a try-lock that
 * never waits: a hit that finds its bucket busy (another thread in the
 * same bucket at that very moment) is dropped, which only delays a
 * candidate.  No allocation after hot_new.  Pure: the caller gives the
 * clock.
 */
#ifndef BLOOMGUARD_HOT_H
#define BLOOMGUARD_HOT_H

#include <stdatomic.h>
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
 * The doorkeeper itself, for a caller that takes hot_door's step inline
 * (hot_door_hit: a "maybe" the door keeps then costs no call at all): hot.c
 * writes it (hot_new, the turns), any thread reads it.  cells: one byte
 * per ID hash (its top bits, as shift takes them), each a tag (the
 * generation its CUR counts, mod 16: bits 7..4), CUR (bits 3..2) and OLD
 * (bits 1..0): 2-bit counters of this generation's hits and the one
 * before's; CUR stops at pass (min_hits / 2, at most HOT_DOOR_PASS).  A
 * cell whose tag is the generation before has its CUR as OLD, any other
 * tag none: nothing is cleared at a turn.
 */
struct hot_door {
    _Atomic uint8_t *cells;
    uint32_t shift;                 /* 64 - log2(cells) */
    uint32_t pass;
    _Atomic uint32_t gen;           /* the generation in steps of 16 (bits 7..4: the tag); hot_count turns it */
};

/* s's door, NULL when it has none (min_hits 1: every hit goes on, carrying 0). */
const struct hot_door *hot_doorkeeper(const struct hot *s);

/* hot_door for a door of hot_doorkeeper's: -1, h's hit is kept; else the hits it carries on. */
static inline int hot_door_hit(const struct hot_door *d, uint64_t h)
{
    /*
     * The high bits of a multiply (each depends on most of h's), not the
     * bits the filter, the buckets or the set index by: the IDs that come
     * here are those whose filter bits were set.
     */
    _Atomic uint8_t *cell = &d->cells[(h * UINT64_C(0x9E3779B97F4A7C15)) >> d->shift];
    unsigned g = atomic_load_explicit(&((struct hot_door *)d)->gen, memory_order_relaxed) & 0xf0;
    unsigned u = atomic_load_explicit(cell, memory_order_relaxed), pass = d->pass;
    /*
     * u as this generation counts it: a cell of the generation before (its
     * tag one less, mod 16) has its CUR as OLD, an older one nothing (or
     * one 16 generations on, which reads stale counts as current: hits
     * early, the same bound).
     */
    if ((u & 0xf0) != g)
        u = g | (((u + 0x10) & 0xf0) == g ? u >> 2 & 3 : 0);
    unsigned c = u >> 2 & 3;
    /*
     * One hit of h's: kept at the door (-1) while its hits, this
     * generation's and the one before's, were fewer than pass.  Else it
     * goes on carrying pass, the hits the door kept, which the sketch
     * takes as h's if it does not count h, and CUR is raised to the pass
     * (unless it is there already: a cell is written only while its IDs
     * are new): an ID that keeps coming stays known, so the sketch, which
     * takes no carry for an ID it holds within its window, loses none of
     * its hits (a door forgets an ID only a window after its last hit,
     * when the sketch's window is over).
     *
     * Plain stores, not a compare-and-swap (a locked instruction, some 20
     * cycles, on every "maybe" of a present ID): a thread that loads and
     * stores this cell at the same moment as another may write over the
     * other's hit (or bring back a count of a moment before), which costs
     * that moment's hits of the IDs of one cell: a candidate a hit or two
     * later, never a wrong answer (the bucket's try-lock drops hits the
     * same way).
     */
    if (c + (u & 3) < pass) {
        atomic_store_explicit(cell, (uint8_t)(u + 4), memory_order_relaxed);
        return -1;
    }
    if (c < pass)
        atomic_store_explicit(cell, (uint8_t)(u + ((pass - c) << 2)), memory_order_relaxed);
    return (int)pass;
}

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
