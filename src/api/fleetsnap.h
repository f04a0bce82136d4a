/*
 * The snapshots an upstream makes for its replicas (fleetsnap.c): one
 * table's, made for a request or shared with those that came before it was
 * made, with where it is exact in its metadata (fleet_history, fleet_seq,
 * fleet_epoch, fleet_covered, fleet_generation, fleet_horizon_age_ns,
 * fleet_replica, beside the identity persist.h writes).
 */
#ifndef BLOOMGUARD_FLEETSNAP_H
#define BLOOMGUARD_FLEETSNAP_H

#include <stdbool.h>

#include "api.h"

struct fleetring;
struct fleetsnap;
struct table_proof;

/*
 * Where a snapshot of the table is exact, in the terms its replicas follow
 * it in: the table's proof, then the history and newest seq (read after
 * it).  fleethub.c's hub_proof.
 */
typedef void fleetsnap_proof_fn(void *ctx, struct table_proof *p, uint64_t *history,
                                uint64_t *seq);

/*
 * For table t and its ring (both outlive it); replica: this daemon follows
 * an upstream; proof(ctx) says where a snapshot is exact.
 */
struct fleetsnap *fleetsnap_new(struct table *t, struct fleetring *ring, bool replica,
                                fleetsnap_proof_fn *proof, void *ctx);
void fleetsnap_free(struct fleetsnap *fs);

/*
 * The answer to one GET /replicate/NAME/snapshot: 200 with the snapshot
 * (its proof read first, then the ring's newest seq, then the filter's
 * bits: every row older than its horizon and every key up to its seq is
 * in it), 503 not_ready before any load.  *made: a new one was made for
 * it.  Any thread.
 */
struct reply fleetsnap_serve(struct fleetsnap *fs, bool *made);

#endif
