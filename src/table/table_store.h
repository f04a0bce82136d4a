/*
 * What persistence asks of the guarded table (a part of table.h, which
 * includes it; nothing else does): the POST journal streamed out to a
 * snapshot or a rewritten POST log and put back at start, a snapshot's
 * filter put live (a peer's on probation until checked), and the live
 * filter lent to the thread that writes it to disk.  The guard and the
 * journal stay the table's own: a caller gets their contents through
 * these, never the structures.  The rules are table.h's; the callers are
 * store/persist.c and follow/scheduler_store.c, scheduler_vet.c.
 */
#ifndef BLOOMGUARD_TABLE_STORE_H
#define BLOOMGUARD_TABLE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct filter;
struct table;
struct table_ident;

/*
 * The POST journal streamed out: count(ctx, n, bytes) once, with exactly
 * the number of entries and bytes of IDs that follow, then each(ctx, id,
 * len, ttl_left) for every acknowledged entry not expired now (an ID a
 * POST holds until it is acknowledged is not one: table.h, table_insert).
 * The journal's clock restarts with the machine, so an entry travels as
 * the seconds it has left (ttl_left >= 1), never as its expiry time.
 * Under the journal's lock: POSTs wait meanwhile, so keep each cheap (a
 * memcpy) and never call back into the table.  Either callback returning
 * false stops it, which then returns false.  Any thread.
 */
typedef bool (*table_posts_count_fn)(void *ctx, uint64_t n, uint64_t bytes);
typedef bool (*table_posts_each_fn)(void *ctx, const char *id, size_t len, uint64_t ttl_left);
bool table_posts_export(struct table *t, table_posts_count_fn count, table_posts_each_fn each,
                        void *ctx);

/*
 * At start, before any load or restore: one acknowledged POST put back
 * (from the POST log or a snapshot, as table_posts_export gave it), to
 * expire after min(ttl_left, [filter] pending_ttl) seconds, or later if
 * the ID is there already with a later expiry.  It was acknowledged once,
 * so it is kept even when the limits (which may have shrunk since) leave
 * no room: the journal may then hold more than they allow (table_posts
 * says so), and every new POST is refused until expiries and COPYs have
 * made room.  The next load or restore adds it to its filter.  False only
 * when out of memory: it is lost.  Thread-safe.
 */
bool table_posts_restore(struct table *t, const char *id, size_t len, uint64_t ttl_left);

/*
 * A snapshot put in place at start, before any load, on the thread that
 * commits t's filters (the scheduler's): f (taken, whatever happens; no
 * one else's) goes live with every entry of the journal added to it (the
 * POST log's, the snapshot's: table_posts_restore them first).  A
 * published table (table_set_publisher) first copies f into a filter its
 * publisher allocates (begin), which goes live through the live hook with
 * horizon 0, so that the published file holds the live filter; when that
 * copy cannot be made, f goes live unpublished and false is returned (the
 * next load publishes).  The table then has a position (pos, "" = none)
 * but covers no epoch yet (degraded until a catch-up or a COPY).  from:
 * "snapshot" or "peer"; items and seconds: the snapshot's, for /stats.
 * ident: what the snapshot says it was loaded from (checked against the
 * database before any catch-up trusts its position).  A peer's snapshot is
 * on probation besides (table_vet_begin, before this).
 */
bool table_restore(struct table *t, struct filter *f, const char *pos, const char *from,
                   uint64_t items, double seconds, const struct table_ident *ident);

/*
 * A filter from elsewhere (a peer's snapshot) is not believed until a
 * sample of the table's rows has been found in it (scheduler_vet.c,
 * spotcheck.h).  Until then (TABLE_VET_PENDING) catch-ups and probes
 * still prove a horizon, but it is held back, not published, and every
 * "absent" is answered degraded, whatever max_staleness says.  Refused
 * (TABLE_VET_REFUSED): the position is dropped and a COPY wanted, which
 * no catch-up may serve; the held horizon is forgotten; the filter still
 * answers degraded until the COPY's goes live (which ends the probation,
 * as any COPY does).
 */
enum table_vet { TABLE_VET_NONE = 0, TABLE_VET_PENDING, TABLE_VET_REFUSED };

/*
 * The probation's state; *proved (NULL: not asked) gets the horizon held
 * back so far (monoclock_boot_ns() units, 0 = none): a row committed before it
 * that the filter lacks is the snapshot's fault, not a change not yet read.
 */
enum table_vet table_vet(struct table *t, int64_t *proved);

/*
 * Put t on probation (TABLE_VET_PENDING) before a filter from elsewhere
 * can go live in its guard, so that not one of its "absent" answers is
 * believed (with max_staleness = 0 a horizon of 0 alone would not stop it).
 */
void table_vet_begin(struct table *t);

/*
 * The sample's verdict on a TABLE_VET_PENDING table (else a no-op): passed
 * (also: no filter from elsewhere went live after all), or refused.
 */
void table_vetted(struct table *t, bool passed);

/*
 * The live filter (NULL if none), for the thread that commits t's filters
 * only (the scheduler's: loads, restores and a replica's adopted
 * snapshots all commit there): valid until that thread's next commit,
 * which is the only thing that frees it.  Lets that thread stream it to a
 * snapshot (filter_bits_read) while lookups and inserts go on; any other
 * thread uses table_with_live (table_fleet.h).
 */
const struct filter *table_live_filter(struct table *t);

#endif
