/*
 * IDs POSTed to /ids that the table has not shown us yet.  A rebuild copies
 * the table, so without this list it would drop a POSTed ID whose row is not
 * committed yet (or never will be); the rebuild replays the list into the new
 * filter instead, and an ID leaves the list once a COPY or a NOTIFY shows it
 * in the table.
 */
#ifndef BLOOMGUARD_PENDING_H
#define BLOOMGUARD_PENDING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "filter.h"

struct pending;

/* A set holding at most limit IDs (0: always empty).  NULL on no memory. */
struct pending *pending_new(uint64_t limit);
void pending_free(struct pending *p);

/*
 * Remember an ID (h = filter_hash of it).  False when the set is full or out
 * of memory: the ID is then only in the live filter.  Thread-safe.
 */
bool pending_add(struct pending *p, const char *id, size_t len, uint64_t h);

/*
 * The table holds this ID: forget it.  Cheap when the set is empty (one
 * atomic load), so the loader may call it for every row.  Thread-safe.
 */
void pending_seen(struct pending *p, const char *id, size_t len, uint64_t h);

/* Add every remembered ID to f.  Thread-safe. */
void pending_replay(struct pending *p, struct filter *f);

/* IDs remembered now, and IDs refused because the set was full. */
uint64_t pending_count(struct pending *p);
uint64_t pending_dropped(struct pending *p);

#endif
