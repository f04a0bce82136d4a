/*
 * The POST journal: IDs POSTed to /ids that no COPY has shown in the table
 * yet.  A rebuild copies the table, so without this journal it would drop a
 * POSTed ID whose row is not committed yet (or never will be); the rebuild
 * replays the journal into the new filter instead.  An entry leaves only
 * when a COPY shows its ID in the table or when it expires (ttl): a
 * notification never removes one, since any database role may send one.
 * The journal is bounded in entries and in bytes; what does not fit is
 * refused as a whole, so the caller can refuse the POST instead of
 * acknowledging an ID it would forget.  Entries put back at a start
 * (pending_restore) are never refused, even past the bounds.
 */
#ifndef BLOOMGUARD_PENDING_H
#define BLOOMGUARD_PENDING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "filter.h"
#include "monoclock.h"

struct pending;

/*
 * A journal holding at most limit IDs and max_bytes bytes of IDs (0: always
 * empty), each kept ttl seconds unless a COPY shows it first.  NULL on no
 * memory.  pending_free(NULL) is a no-op.
 */
struct pending *pending_new(uint64_t limit, uint64_t max_bytes, uint64_t ttl);
void pending_free(struct pending *p);

/*
 * The journal's clock, for every now below: seconds of CLOCK_BOOTTIME
 * (monoclock_boot_s), which keeps counting while the machine sleeps (an
 * entry's ttl is real time).
 */

enum pending_result {
    PENDING_OK = 0,
    PENDING_FULL_COUNT,     /* more than limit entries */
    PENDING_FULL_BYTES,     /* more than max_bytes bytes */
    PENDING_NOMEM
};

/*
 * Remember n IDs (hashes[i] = filter_hash of ids[i]) at time now
 * (monoclock_boot_s).  All of them or, when
 * they would not fit (expired entries are dropped first to make room), none:
 * PENDING_FULL_*.  An ID already there gets a fresh expiry and takes no more
 * room (a batch of such IDs fits even in a journal over its limits).
 * PENDING_NOMEM may leave some of them remembered.  Thread-safe.
 */
enum pending_result pending_add_many(struct pending *p, size_t n, const char *const *ids,
                                     const size_t *lens, const uint64_t *hashes, uint64_t now);
/* One ID; the same rules. */
enum pending_result pending_add(struct pending *p, const char *id, size_t len, uint64_t h,
                                uint64_t now);

/*
 * A POST that must reach the disk before it is acknowledged, in two steps,
 * so that one refused never takes effect: not at the next rebuild, not in a
 * snapshot or a rewritten POST log, not after a restart.
 *
 * pending_reserve takes room for n IDs as pending_add_many would (all or
 * none, PENDING_FULL_*; PENDING_NOMEM gives back what it took), but puts
 * them in no journal: until pending_commit, an ID not already there is
 * held, neither exported (pending_export) nor replayed (pending_replay),
 * and an ID already there keeps its expiry.  Held entries are never
 * dropped meanwhile (pending_seen, expiry).  Then exactly one of:
 *   pending_commit  the IDs were acknowledged: in the journal, with a fresh
 *                   expiry (now + ttl);
 *   pending_cancel  they were refused: what only this reservation held
 *                   leaves; what was in the journal before stays as it was.
 * with the same n, ids, lens and hashes.  Thread-safe.
 */
enum pending_result pending_reserve(struct pending *p, size_t n, const char *const *ids,
                                    const size_t *lens, const uint64_t *hashes, uint64_t now);
void pending_commit(struct pending *p, size_t n, const char *const *ids, const size_t *lens,
                    const uint64_t *hashes, uint64_t now);
void pending_cancel(struct pending *p, size_t n, const char *const *ids, const size_t *lens,
                    const uint64_t *hashes);

/*
 * A COPY shows this ID in the table: forget it.  Cheap when the journal is
 * empty (one atomic load), so the loader may call it for every row.
 * Thread-safe.
 */
void pending_seen(struct pending *p, const char *id, size_t len, uint64_t h);

/*
 * Whether an entry with filter_hash h is kept (another ID of the same hash
 * counts too: the caller wants to know whether h may be a POSTed ID's).
 * Thread-safe.
 */
bool pending_holds(struct pending *p, uint64_t h);

/* Drop entries whose time is up at now.  Thread-safe. */
void pending_expire(struct pending *p, uint64_t now);

/* Add every remembered ID to f (not the held ones: pending_reserve).  Thread-safe. */
void pending_replay(struct pending *p, struct filter *f);

/*
 * Snapshots.  The journal's clock is monotonic and restarts with the
 * machine, so an entry travels as the seconds it has left (ttl_left), never
 * as its expiry time.
 *
 * pending_export calls each(ctx, id, len, ttl_left) for every entry not
 * expired at now (not a held one: pending_reserve), under the journal's
 * lock (POSTs wait meanwhile: keep each cheap, e.g. a memcpy; it must not
 * call back into this journal).  Before
 * the first entry it calls count(ctx, n, bytes) with exactly the number of
 * entries and bytes of IDs that will follow, so the caller can size its
 * buffer once.  Either callback returning false stops the export, which
 * then returns false.  Thread-safe.
 */
typedef bool (*pending_count_fn)(void *ctx, uint64_t n, uint64_t bytes);
typedef bool (*pending_each_fn)(void *ctx, const char *id, size_t len, uint64_t ttl_left);
bool pending_export(struct pending *p, uint64_t now, pending_count_fn count,
                    pending_each_fn each, void *ctx);

/*
 * Put back an exported (or logged, postlog.h) entry at time now: it expires
 * after min(ttl_left, this journal's ttl) seconds (the configured ttl may
 * have shrunk since), or later if the ID is already there with a later
 * expiry.  It was acknowledged once, so it is kept even when the limits,
 * which may have shrunk too, leave no room: the journal may then hold more
 * than limit entries or max_bytes bytes, and pending_add refuses every new
 * ID (PENDING_FULL_*) until expiries and COPYs have made room again.  Only
 * PENDING_NOMEM can lose it.  Thread-safe.
 */
enum pending_result pending_restore(struct pending *p, const char *id, size_t len, uint64_t h,
                                    uint64_t ttl_left, uint64_t now);

/* Figures for /stats and /metrics; each read atomically. */
struct pending_info {
    uint64_t count;         /* IDs remembered or held now (more than limit after a restore into smaller limits) */
    uint64_t bytes;         /* their bytes */
    uint64_t refused;       /* IDs refused because the journal was full */
    uint64_t expired;       /* entries dropped by ttl */
    uint64_t limit, max_bytes, ttl;
};
void pending_info(struct pending *p, struct pending_info *out);

#endif
