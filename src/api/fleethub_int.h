/*
 * The insides of an upstream's hub (fleethub.h), shared by fleethub.c (the
 * rings, the taps, the pump, the answers) and fleetstream.c (the streams).
 * Nothing else includes it.
 */
#ifndef BLOOMGUARD_FLEETHUB_INT_H
#define BLOOMGUARD_FLEETHUB_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "fleethub.h"
#include "fleetwire.h"
#include "worker.h"

struct table_proof;

/* Frames a stream prepares at a time; an ADDS frame of it holds 250 keys. */
#define STREAM_OUT 4096
/* What MHD is told to ask a stream for at once. */
#define STREAM_BLOCK (32 * 1024)
#define NS_PER_MS INT64_C(1000000)

struct hub_table {
    struct fleethub *h;
    struct table *t;
    struct fleetring *ring;
    _Atomic unsigned streams;       /* streaming now */
    _Atomic uint64_t changes;       /* epoch or generation moves (the tap's changed) */
    struct fleetsnap *snap;         /* its snapshots for replicas */
    _Atomic uint64_t epoch_now;     /* the epoch hub_proof said last (the pump's heartbeats') */
    /* Under h->w.mu: the heartbeat frame of (beat_last, beat_epoch), encoded by the pump. */
    unsigned char beat[FLEETWIRE_PAIR_FRAME];
    size_t beat_len;                /* 0: none yet */
    uint64_t beat_last, beat_epoch, beat_round;
};

struct stream {
    struct hub_table *ht;
    struct MHD_Connection *conn;
    struct stream *prev, *next;     /* in h->streams, under h->w.mu */
    bool waiting;                   /* under h->w.mu: suspended by stream_read */
    /* The MHD thread's only (stream_read). */
    bool opened, resumed, done;
    uint64_t from_history, from_seq;
    bool has_from;
    uint32_t from_tli;              /* and its commit position (from_lsn 0: none) */
    uint64_t from_lsn;
    bool at_commit;                 /* resumed at it, in this ring's history */
    uint64_t pos_lsn;               /* the newest POSITION sent (its hi), 0: none */
    uint32_t pos_tli;
    uint64_t history;               /* of the ring's seqs it sends */
    uint64_t next_seq, epoch, generation, changes;
    int64_t beat_ns;                /* a heartbeat after this long without a frame */
    int64_t last_sent;
    /*
     * h-horizon's: asked ?horizon=1: a HORIZON frame every beat, in place
     * of heartbeats, due when the clock crosses a multiple of beat_ns (so
     * that every stream of one beat is due at once: one pump round).
     */
    bool horizon;
    int64_t beat_slot;              /* now / beat_ns when the last one was made */
    /* Adaptive (issue 35): the table's verified log read up to here (table_verified_log). */
    uint64_t vcursor;
    size_t len, off;
    unsigned char out[STREAM_OUT];
};

struct fleethub {
    const struct config *cfg;
    const struct log *lg;
    bool replica;
    struct source *mirrors;         /* a replica's: its tables' mirrors (source_mirror) */
    unsigned n;
    struct hub_table *tables;
    /*
     * The pump (base/worker.h): its mu guards the streams below, its cv
     * carries a kick, a stream gone, or stop.
     */
    struct worker w;
    struct stream *streams;         /* under w.mu */
    unsigned nstreams;              /* under w.mu */
    atomic_bool closing;            /* streams say BYE; no new ones */
    atomic_bool kick;               /* a wake of the pump is under way (one per round) */
    atomic_ulong streams_total, refused, cut_behind, snapshots;
    uint64_t clock;                 /* this process's clock, named in horizons (random) */
    int64_t beat_min_ns;            /* under w.mu: the shortest beat of a horizon stream (0: none) */
    atomic_ulong horizon_frames;    /* HORIZON frames sent */
};

/* Wake the pump (one signal per round). */
void fleethub_kick(struct fleethub *h);

/*
 * Whether a stream without ?horizon=1 owes its heartbeat at now: a beat
 * since its last frame, less an eighth (the pump's rounds come on its
 * own schedule, which the horizon streams' beats set: one a hair early
 * must not put the heartbeat off by a whole round).
 */
static inline bool fleethub_beat_due(const struct stream *s, int64_t now)
{
    return now - s->last_sent >= s->beat_ns - s->beat_ns / 8;
}

/* Whether stream s has something to send at now (h->w.mu held). */
bool fleethub_due(const struct stream *s, int64_t now);

/*
 * What ht's replicas are told of it: the table's proof, then the history
 * and newest seq of the keys they stream (read after it: every key the
 * filter took before the horizon is at or below seq).  An upstream's own:
 * its ring's.  A replica's (h->mirrors): its upstream's, as its mirror
 * holds them: the history and seq of the keys it applied, which its ring
 * keeps under the same seqs (the tap's fleetring_append_at; the ring is
 * moved to that history here too, holding nothing of it until keys come),
 * and its upstream's epoch, covered and generation, covered 0 while its
 * own table has had a gap since (its filter may miss keys: no answer of
 * it may prove anything).  Then every upstream and replica of one history
 * speaks of the same keys by the same seqs and epochs, and a replica may
 * resume on any of them at its position: the epoch of the history's first
 * upstream still says whether the keys since a position are all it took
 * (a gap there is a new epoch all down the tree).  Never under h->w.mu (the
 * mirror's lock is held by the table's tap, which takes h->w.mu to kick).
 */
void fleethub_proof(struct hub_table *ht, struct table_proof *p, uint64_t *history,
                    uint64_t *seq);

/*
 * What ht's replicas may take as proof now (h-horizon's): its horizon in
 * this process's clock, then the history and seq read after it
 * (fleethub_proof), whether it is degraded; the HORIZON frame's fields
 * and the horizon answer's.  Never under h->w.mu.
 */
void fleethub_horizon_of(struct hub_table *ht, struct fleetwire_horizon *out);

#endif
