/*
 * How a publisher (publish.h) plugs into the guarded table: the hooks
 * through which the table's live filter is also published to other
 * processes.  A part of table.h, which includes it; nothing else does.
 */
#ifndef BLOOMGUARD_TABLE_PUBLISH_H
#define BLOOMGUARD_TABLE_PUBLISH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "filter.h"
#include "spell.h"

struct table;

/*
 * Where the table's live filter is also published to other processes
 * (publish.h).  Each hook may be NULL; set it before other threads use the
 * table.
 *   begin     a load is about to make its filter (or a restore its copy
 *             of a snapshot's: table_restore): fill *out with the
 *             allocator of its layers (filter.h) and return true, or
 *             false for the default (that filter is then not published);
 *   live      next is complete (the load's journal replayed into it) and
 *             goes live right after this returns; called under the
 *             table's lock with the current horizon (0 for a restored
 *             snapshot's), so no horizon hook runs meanwhile;
 *   horizon   the horizon moved to h; called under the table's lock;
 *   unsure    the table began (true) or stopped (false) degrading every
 *             absent answer whatever its horizon (table_unsure: the live
 *             filter can no longer keep its rate, or a peer's filter is on
 *             probation); called under the table's lock, at once, so that
 *             readers degrade with the daemon and not at the next horizon.
 *             live and horizon read table_unsure themselves (a hold of a
 *             cut POST log ends by the clock, not by an event);
 *   verified  memory (bytes, 64-byte aligned) readers share, for the
 *             verified-absent set (vset.h), or NULL: its own; called
 *             once, by table_set_publisher, with [adaptive] enabled.
 * spell is the spelling of next's keys (spell.h).
 */
struct table_publisher {
    void *ctx;
    bool (*begin)(void *ctx, struct filter_alloc *out);
    void (*live)(void *ctx, const struct filter *next, enum spell_type spell, int64_t horizon);
    void (*horizon)(void *ctx, int64_t h);
    void (*unsure)(void *ctx, bool unsure);
    void *(*verified)(void *ctx, size_t bytes);
};
void table_set_publisher(struct table *t, const struct table_publisher *p);

#endif
