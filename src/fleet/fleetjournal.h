/*
 * A replica's journal of acknowledged POSTs, by key hash: the keys its
 * upstream acknowledged (marked POSTs in the stream, the journal of each
 * snapshot), each kept until its ttl runs out, so that a new filter (the
 * next snapshot, perhaps of another upstream that never saw those POSTs)
 * gets them again before it goes live.  The table's own journal (pending.h)
 * keeps IDs; a replica only ever sees hashes.  Pure: no I/O, no locks (the
 * caller's), no globals.
 */
#ifndef BLOOMGUARD_FLEETJOURNAL_H
#define BLOOMGUARD_FLEETJOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fleetjournal;

/* A journal of at most limit keys (0: none is kept).  NULL when out of memory. */
struct fleetjournal *fleetjournal_new(uint64_t limit);
void fleetjournal_free(struct fleetjournal *j);

/*
 * Keep h until now + ttl (seconds of any clock that only grows, e.g.
 * monoclock_boot_s), or longer if it is already kept longer.  False when the
 * journal is full of live keys (or out of memory): h is not kept.
 */
bool fleetjournal_add(struct fleetjournal *j, uint64_t h, uint64_t ttl, uint64_t now);

/* fn(arg, h) for each key still kept at now; the expired ones are dropped. */
void fleetjournal_each(struct fleetjournal *j, uint64_t now, void (*fn)(void *arg, uint64_t h),
                       void *arg);

/* Keys kept (expired ones included until the next fleetjournal_each), and those refused. */
uint64_t fleetjournal_count(const struct fleetjournal *j);
uint64_t fleetjournal_refused(const struct fleetjournal *j);

#endif
