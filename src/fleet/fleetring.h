/*
 * The replication ring of one table on an upstream: every key added to
 * the table's live filter, as its filter_hash, numbered by a sequence that
 * only grows (1 first), the newest `capacity` of them kept so that a
 * replica can resume its stream from where it stood.  A POSTed key keeps
 * the seconds its journal holds it (its ttl; 0 for a row), so that a
 * replica keeps it as long.  The buffer is made on first use
 * (fleetring_enable): a daemon no replica follows pays one counter per
 * add.  Pure but for its mutex: no I/O, no logging, no globals.
 */
#ifndef BLOOMGUARD_FLEETRING_H
#define BLOOMGUARD_FLEETRING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fleetring;

/*
 * A ring that will keep capacity keys (1 or more), of history (random per
 * table lifetime: fleetring_new_history).  NULL when out of memory.
 * fleetring_free(NULL) is a no-op.
 */
struct fleetring *fleetring_new(uint64_t capacity, uint64_t history);
void fleetring_free(struct fleetring *r);

/* A fresh history id: random, never 0. */
uint64_t fleetring_new_history(void);

/* The history the ring's seqs are of now.  Thread-safe. */
uint64_t fleetring_history(struct fleetring *r);

/* The history and the newest seq, read at once.  Thread-safe. */
void fleetring_where(struct fleetring *r, uint64_t *history, uint64_t *last);

/*
 * Make the buffer if it is not there yet: from now on the ring keeps the
 * keys added after the newest seq so far.  False when out of memory (the
 * ring then keeps counting only, and every resume fails).  Thread-safe.
 */
bool fleetring_enable(struct fleetring *r);

/*
 * n keys added to the live filter, each with ttl (0: rows): they get the
 * next n seqs.  Call it after the filter holds them (a snapshot that takes
 * seq S before reading the filter's bits then holds every key <= S).
 * Thread-safe; returns the seq of the last one.
 */
uint64_t fleetring_append(struct fleetring *r, const uint64_t *hashes, size_t n, uint32_t ttl);

/*
 * A replica's ring, which keeps the seqs of the history it mirrors (a
 * replica serving replicas of its own: fleethub.c): n keys of history,
 * with seqs first .. first + n - 1, as its upstream numbered them.  When
 * they are not the next keys of the ring's history (another history, or a
 * jump: a snapshot in between), the ring starts again at first, holding
 * nothing before it: it never holds a seq whose key it did not take.
 * Thread-safe; returns the seq of the last one.
 */
uint64_t fleetring_append_at(struct fleetring *r, uint64_t history, uint64_t first,
                             const uint64_t *hashes, size_t n, uint32_t ttl);

/*
 * If the ring is of another history than history: start it again there,
 * at seq (holding nothing, the next key seq + 1).  Thread-safe.
 */
void fleetring_rebase(struct fleetring *r, uint64_t history, uint64_t seq);

/* The newest seq (0: none yet).  Thread-safe. */
uint64_t fleetring_last(struct fleetring *r);

/*
 * Whether a stream may resume after seq after: every key after it is
 * still held (after + 1 >= the oldest kept) and after is no newer than the
 * newest.  Thread-safe.
 */
bool fleetring_holds(struct fleetring *r, uint64_t after);
/* The same, and the ring is of history. */
bool fleetring_holds_in(struct fleetring *r, uint64_t history, uint64_t after);

/*
 * Up to max keys from seq from on into hashes and ttls: returns how many
 * (0: nothing newer yet), or -1 when the ring no longer holds from (it was
 * overwritten, or never kept).  Thread-safe.
 */
long fleetring_read(struct fleetring *r, uint64_t from, uint64_t *hashes, uint32_t *ttls,
                    size_t max);
/* The same from history's seq from: -2 when the ring is of another history now. */
long fleetring_read_in(struct fleetring *r, uint64_t history, uint64_t from, uint64_t *hashes,
                       uint32_t *ttls, size_t max);

/*
 * Commit marks (h-stream's commit positions, fleetwire.h): where in the
 * seqs the commits of the upstream's database stand, so that a replica
 * may move between upstreams of other histories at a commit position.
 *
 * A mark (seq S, epoch E, timeline tli, LSNs lo .. hi) is made by
 * fleetring_mark, which the follower calls on the thread that applies
 * commits, right after it applied a commit ending at lsn (each of its keys
 * appended before, each key of the next commit appended after: the
 * follower applies one commit at a time), while its table was loaded and
 * covered epoch E.  For every X in lo .. hi:
 *   (a) every key of every commit ending at or before X has a seq <= S;
 *   (b) every key of every commit ending after X that the follower
 *       applied since has a seq > S.
 * A commit that added no key leaves S where it was: the mark's hi moves
 * (both still hold).  Keys POSTed meanwhile take seqs too; they are no
 * commit's, and fleetstream.c answers for them apart.  Marks of another
 * epoch or timeline than the newest are dropped; a commit at or below the
 * newest hi (a stream replayed after a reconnect) makes none.
 */
void fleetring_mark(struct fleetring *r, uint64_t epoch, uint32_t tli, uint64_t lsn);

/*
 * The newest mark whose seq is at or below upto, of epoch, and in the
 * ring's history: *seq, *tli and its hi as *lsn.  False if none.
 * Thread-safe.
 */
bool fleetring_position(struct fleetring *r, uint64_t history, uint64_t epoch, uint64_t upto,
                        uint64_t *seq, uint32_t *tli, uint64_t *lsn);

/*
 * Where a stream may go on for a replica that holds every key of the
 * commits up to tli/lsn: the seq S of the newest mark of epoch and tli
 * whose lo is at or below lsn ((b): every key of a commit after lsn is
 * past S), if the ring still holds every key after S.  False if no mark
 * proves it (none that old, another epoch or timeline, or its keys
 * overwritten).  Thread-safe.
 */
bool fleetring_at_commit(struct fleetring *r, uint64_t epoch, uint32_t tli, uint64_t lsn,
                         uint64_t *after);

/* Figures, for /stats: keys kept now, the capacity, whether the buffer is made. */
struct fleetring_info {
    uint64_t last, oldest, held, capacity;
    bool enabled;
    uint64_t marks, mark_lsn;       /* commit marks kept, the newest's hi (0: none) */
};
void fleetring_info(struct fleetring *r, struct fleetring_info *out);

#endif
