/*
 * Keeping every guarded table true to PostgreSQL: the tables themselves
 * (table.h), how each is followed after its load (follow.h: chosen here,
 * per table, from [sync] method and what the server offers) and the
 * rebuild scheduler (scheduler.h).  This is what main wires up and what the
 * status documents read; handlers talk to the tables directly.
 */
#ifndef BLOOMGUARD_SOURCE_H
#define BLOOMGUARD_SOURCE_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "follow.h"
#include "log.h"
#include "scheduler.h"
#include "table.h"

struct source;

/*
 * One table per filter of cfg (cfg, lg and token must outlive the source;
 * token is the admin token sent to a [snapshot] bootstrap_from peer, NULL =
 * none).  Nothing runs yet.  NULL on allocation failure.
 */
struct source *source_new(const struct config *cfg, const struct log *lg,
                          const struct scheduler_hooks *hooks, const char *token);
void source_free(struct source *s);

/* Table i (owned by the source; [0] is the default filter's). */
struct table *source_table(struct source *s, unsigned i);

/*
 * Start the scheduler, which puts snapshots in place, then chooses and
 * starts each table's follower once PostgreSQL answers, then loads.  False
 * if a thread could not start.
 */
bool source_start(struct source *s);

/* Stop the followers and the scheduler (which writes the snapshots) and wait for them. */
void source_stop(struct source *s);

/*
 * Ask for a load of table i (logged).  Returns the id of the load that
 * will satisfy it; *coalesced (may be NULL) as table_want.  Thread-safe.
 */
uint64_t source_request_rebuild(struct source *s, unsigned i, enum table_want why,
                                bool *coalesced);

/* Table i's figures and its follower's connection (zeros and "none" without one). */
struct source_status {
    struct table_status table;
    struct follow_status conn;
};
void source_status(struct source *s, unsigned i, struct source_status *out);

/* follow_mirror of table i's follower: false without one, or one that mirrors nothing. */
bool source_mirror(struct source *s, unsigned i, struct follow_mirror *out);

#endif
