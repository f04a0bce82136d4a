/*
 * An upstream's side of a fleet: each table's replication ring (fed by the
 * table's tap: every key its live filter takes), the replicas' streams of
 * it (GET /replicate/NAME, replicate.c), and the one thread that wakes
 * the streams that wait.  A stream is a libmicrohttpd callback response on
 * a suspended connection, never a thread: hundreds cost the server only
 * their sockets and a small buffer each, and a stream whose replica falls
 * out of the ring is ended, so nothing grows per replica.
 */
#ifndef BLOOMGUARD_FLEETHUB_H
#define BLOOMGUARD_FLEETHUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api.h"

struct fleethub;

struct source;

/*
 * A hub for the n tables of a (cfg, lg, tables outlive it): a ring per
 * table ([fleet] ring_items; made when a replica first asks), hooked to
 * each table's tap.  mirrors: this daemon's source when it follows an
 * upstream itself (its HELLO says so; it outlives the hub), else NULL.
 * Such a replica serves its replicas in its upstream's terms
 * (source_mirror): its ring keeps the upstream's history and seqs, its
 * answers the upstream's epochs, so that a replica of several such
 * replicas of one upstream moves between them at its position.  NULL when
 * out of memory.  Nothing runs until fleethub_start.
 */
struct fleethub *fleethub_new(const struct config *cfg, struct table *const *tables, unsigned n,
                              struct source *mirrors, const struct log *lg);
/* Start the thread that wakes waiting streams; false if it could not. */
bool fleethub_start(struct fleethub *h);
/*
 * Before the HTTP server stops: every stream says BYE (shutdown) and ends;
 * waits until they have (2 s at most), since libmicrohttpd must not stop
 * with a connection suspended.  Then the thread stops.
 */
void fleethub_stop(struct fleethub *h);
/* After the HTTP server stopped.  NULL: no-op. */
void fleethub_free(struct fleethub *h);

/*
 * Where a replica stands in an upstream's ring: every key of history up to
 * seq; and, when it knows one (h-stream's commit positions, fleetwire.h),
 * every row committed up to tli/lsn in the upstream's database (lsn 0:
 * none).
 */
struct fleethub_where {
    uint64_t history, seq;
    uint32_t tli;
    uint64_t lsn;
};

/*
 * GET /replicate/NAME's answer for table i: the stream of its keys from
 * where the replica stands (NULL: nowhere yet), with a heartbeat every
 * beat_ms while idle (replicate.c checks it against FLEETWIRE_BEAT_MIN_MS
 * .. FLEETWIRE_BEAT_MAX_MS), on conn (suspended while it waits); with
 * horizon (?horizon=1), a HORIZON frame every beat instead, whatever else
 * is sent (fleetwire.h).  503
 * too_many_replicas past [fleet] max_replicas.
 */
struct reply fleethub_stream(struct fleethub *h, unsigned i, const struct fleethub_where *from,
                             unsigned beat_ms, bool horizon, struct MHD_Connection *conn);
/* GET /replicate/NAME/horizon's JSON for table i. */
struct reply fleethub_horizon(struct fleethub *h, unsigned i);
/*
 * The same JSON into out (cap bytes, NUL included): its length, 0 if it
 * does not fit (FLEETHUB_HORIZON_MAX always does).  For the fast path
 * (replicate.c's replicate_get_fast).  Any thread.
 */
#define FLEETHUB_HORIZON_MAX 384
size_t fleethub_horizon_text(struct fleethub *h, unsigned i, char *out, size_t cap);
/*
 * GET /replicate/NAME/snapshot's for table i: a snapshot made for the
 * request (or shared with the requests that arrived before it was made),
 * with where it is exact in its metadata.
 */
struct reply fleethub_snapshot(struct fleethub *h, unsigned i);

/* For /stats: the role and what the hub serves. */
struct fleethub_info {
    unsigned streams;               /* replicas streaming now */
    uint64_t streams_total, refused, cut_behind, snapshots;
    uint64_t horizon_frames;        /* HORIZON frames sent (the replicas' proofs) */
    uint64_t ring_last[64], ring_oldest[64], ring_capacity;     /* by table (CONFIG_MAX_FILTERS) */
    bool ring_enabled[64];
};
void fleethub_info(struct fleethub *h, struct fleethub_info *out);

#endif
