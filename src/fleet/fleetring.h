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

/* Figures, for /stats: keys kept now, the capacity, whether the buffer is made. */
struct fleetring_info {
    uint64_t last, oldest, held, capacity;
    bool enabled;
};
void fleetring_info(struct fleetring *r, struct fleetring_info *out);

#endif
