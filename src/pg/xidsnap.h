/*
 * Transactions a change stream applied before new snapshots may see them.
 * PostgreSQL flushes a commit record (and a walsender may stream it) before
 * the transaction leaves the proc array: for a moment on a busy server, for
 * as long as a synchronous standby does not answer.  A COPY whose snapshot
 * still counts such a transaction in progress misses its rows; if the
 * stream had put them in the filter the COPY replaces, they are lost.  So
 * method logical keeps the set of transactions it applied rows of, drops
 * those a later snapshot shows finished, and a COPY takes a snapshot that
 * sees every one still in the set.  Snapshots are pg_current_snapshot()'s
 * text, "xmin:xmax:xip,...", of 64-bit xids; the stream's xids are 32-bit
 * and compared modulo 2^32, as PostgreSQL compares them.
 */
#ifndef BLOOMGUARD_XIDSNAP_H
#define BLOOMGUARD_XIDSNAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Members at most: past it the set is "overflowed" until it is cleared. */
#define XIDSNAP_MAX 1048576u

/* Zero-initialize (or xidset_init); not thread-safe: the caller locks. */
struct xidset {
    uint32_t *v;
    size_t n, cap;
    bool overflowed;                /* a member could not be kept: nothing is proven */
    uint32_t lost_last;             /* the newest member not kept */
};

void xidset_init(struct xidset *s);
void xidset_free(struct xidset *s);
/*
 * Adds xid (false: out of room or memory, and the set is overflowed until
 * a snapshot's xmin passes every member it could not keep).
 */
bool xidset_add(struct xidset *s, uint32_t xid);
/*
 * Drops every member the snapshot shows finished (below its xmax and not
 * in progress), and the overflow once its xmin is past the members lost.
 * False when snapshot is not pg_current_snapshot()'s text: nothing changes.
 */
bool xidset_prune(struct xidset *s, const char *snapshot);

/*
 * Whether the snapshot sees every one of xids[0, n) as finished.  False
 * when one is in progress in it (*first, if not NULL, gets it) or when
 * snapshot is not pg_current_snapshot()'s text (*first = 0).
 */
bool xidsnap_sees_all(const char *snapshot, const uint32_t *xids, size_t n, uint32_t *first);

#endif
