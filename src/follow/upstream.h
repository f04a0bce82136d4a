/*
 * Method upstream's insides, shared by its three files: follow_upstream.c
 * (the follower: its threads, the horizon's round trips, which upstream is
 * followed, status), upstream_stream.c (a table's stream, applied in
 * order) and upstream_load.c (a table's load: the upstream's snapshot put
 * live).  Nothing else includes it; follow.h is the contract.
 *
 * Locks: a table's mu may be held while taking the follower's base.mu
 * (up_current, up_report), never the other way round; table.h's own lock
 * is taken under either.
 */
#ifndef BLOOMGUARD_UPSTREAM_H
#define BLOOMGUARD_UPSTREAM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "fleetjournal.h"
#include "fleetwire.h"
#include "follow.h"
#include "httpc.h"
#include "monoclock.h"

/* Horizon answers kept while the stream has not delivered their seq yet. */
#define UP_PROOFS 4
/*
 * Between two horizon questions: a quarter of max_staleness (1 s when it
 * is 0), within these bounds.  The proof is then at most that old, plus a
 * round trip, plus the upstream's own horizon age, when the next one comes:
 * well within max_staleness, without asking 4 times a second for a proof
 * that is needed every 2 s (each question is a request the upstream serves
 * beside its /exists, times every replica).
 */
#define UP_HORIZON_MIN_MS 50
/*
 * h-horizon's: the horizon in the stream.  A stream asked with ?horizon=1
 * brings the upstream's proof every beat in its own clock (fleetwire.h's
 * HORIZON), which an anchor places in ours (up_anchored): then the
 * horizon thread asks only to renew the anchor, every UP_ANCHOR_S, not
 * every up_horizon_ms (200 replicas asked their upstream 400 times a
 * second, each question a wake of its server thread).  The anchor spans
 * seconds, so the clocks it compares are the two hosts' oscillators
 * (CLOCK_MONOTONIC_RAW), never slewed: the horizon's own clock
 * (CLOCK_BOOTTIME) is, by chrony up to 83,333 ppm while it corrects an
 * offset, which over an anchor 10 s old would be 0.8 s of a proof.
 * UP_RATE_PPM bounds how much faster the upstream's oscillator may run
 * than ours (1000 ppm: crystals keep within 100); an anchor UP_ANCHOR_S
 * old costs a proof at most 10 ms of it.  Short intervals (a horizon's
 * age, measured on a slewed clock, carried to the other) are widened by
 * FLEETWIRE_SLEW_PCT (fleetwire.h: the upstream widens by the same), more
 * than any slew.
 */
#define UP_ANCHOR_S 10
#define UP_RATE_PPM 1000

struct up_table;

/* A moment on both of our clocks: the oscillator's and the horizon's. */
struct up_when {
    int64_t raw, boot;              /* monoclock_raw_ns, monoclock_boot_ns */
};
static inline struct up_when up_now(void)
{
    struct up_when w = { monoclock_raw_ns(), 0 };
    w.boot = monoclock_boot_ns();
    return w;
}

/*
 * An anchor: the upstream's oscillator (a process's, named by clock) read
 * remote at an event that happened at or after local on ours (a request
 * sent at local was answered with remote).
 */
struct up_anchor {
    uint64_t clock;                 /* 0: none */
    struct up_when local;
    int64_t remote;
};

/*
 * A lower bound, on our oscillator, of the moment the upstream's read
 * remote_t: local.raw + (remote_t - remote), the difference shrunk by
 * UP_RATE_PPM of itself (upstream_anchor.c argues it).
 */
int64_t up_anchored(const struct up_anchor *an, int64_t remote_t);

/*
 * The same moment on the horizon's clock, at now: now.boot less its age on
 * our oscillator widened by FLEETWIRE_SLEW_PCT.  -1 (nothing proved) when our two
 * clocks ran apart since the anchor by more than that: we were suspended
 * (the oscillator stopped, the boot clock did not), or slewed past it.
 */
int64_t up_placed(const struct up_anchor *an, int64_t remote_t, struct up_when now);

/*
 * A horizon answer (ans, asked at a, read at b) renews the anchor of its
 * clock; one that shows the rates broke UP_RATE_PPM is logged
 * (upstream_anchor.c).  Caller holds no lock.
 */
struct up_answer;
void up_reanchor(struct up_table *ut, const struct up_answer *ans, struct up_when a,
                 struct up_when b);

/*
 * Whether t's stream proves it often enough at now that the horizon
 * thread need not ask (upstream_anchor.c).  Caller holds no lock.
 */
bool up_stream_proves(struct up_table *ut, int64_t now);

/* What an upstream says of its table: its horizon answer, or a stream's HORIZON frame. */
struct up_answer {
    uint64_t history, epoch, covered, generation, seq;
    int64_t age_ns;                 /* -1: the upstream has no horizon */
    bool degraded, replica;
    uint64_t clock;                 /* its clock (0: not said) and its reading when it answered */
    int64_t now_ns;
};

/*
 * An answer heard from upstream url: its proof, when (a moment on our
 * clock at or before its horizon; -1: none), taken (now, or once the
 * stream delivers its seq), the snapshot asked for when it shows the
 * mirror lost, and the upstream's health reported (up_report).  Caller
 * holds no lock.
 */
void up_heard(struct up_table *ut, unsigned url, const struct up_answer *ans, int64_t when);

/* Between two questions to each upstream not followed (up_horizon_main), and their patience. */
#define UP_STANDBY_S 10
#define UP_STANDBY_MS 250
#define UP_HORIZON_MAX_MS 5000

/* A horizon answer waiting for the stream to deliver every key up to seq. */
struct up_proof {
    uint64_t seq;
    int64_t when;                   /* every row committed before it is in the filter then */
};

/* What a table's live filter mirrors of its upstream's; under up_table.mu. */
struct up_mirror {
    bool have;                      /* a snapshot of the upstream went live */
    uint64_t history, seq;          /* every key of history up to seq is in the live filter */
    uint64_t covered;               /* the upstream's epoch it covers (0: none) */
    uint64_t generation;            /* the upstream's live filter it is a snapshot of */
    uint64_t epoch;                 /* this table's epoch when it went live (table_advance's) */
    uint64_t version;               /* bumped at each install: a stream of an older one stops */
    /*
     * h-stream's commit positions (fleetwire.h): every row committed up to
     * commit_tli/commit_lsn in the upstream's database is in the live
     * filter (a POSITION of covered's epoch, at or below seq); 0: none
     * known.  Another upstream of the same cluster may go on from it.
     */
    uint32_t commit_tli;
    uint64_t commit_lsn;
};

enum up_health {
    UP_OK,                          /* it answered, fresh */
    UP_DEGRADED,                    /* it answered, but cannot prove freshness itself */
    UP_FAILED,                      /* unreachable, refusing, or breaking the protocol */
    UP_LAGGING,                     /* it answers, but its stream lags them for max_staleness */
    UP_BROKEN,                      /* its stream is unreadable or breaks the sequence rule */
    UP_MISMATCH                     /* it serves another table: try another at once */
};

struct upstream;

struct up_table {
    struct upstream *u;
    struct table *t;
    pthread_t stream_thread, horizon_thread;
    bool stream_started, horizon_started;   /* run's thread only */
    pthread_mutex_t mu;
    pthread_cond_t cv;              /* an install, a load's end, or stop */
    /* Under mu: */
    struct up_mirror m;
    struct up_proof proofs[UP_PROOFS];
    unsigned n_proofs;
    struct fleetjournal *posts;     /* acknowledged POSTs, by hash, until their ttl */
    bool pinned;                    /* ident is the identity followed */
    struct table_ident ident;
    bool lost;                      /* the mirror cannot resume: a snapshot is needed */
    bool paused;                    /* a load is fetching: the stream applies nothing meanwhile */
    char lost_why[160];
    /* What the upstream said last (its horizon answer or stream). */
    uint64_t heard_history, heard_seq, heard_epoch, heard_covered, heard_generation;
    bool heard_replica;             /* it follows an upstream itself */
    int64_t behind_since;           /* monoclock_boot_ns since the stream lags its answers; 0: it does not */
    enum up_health stream_health;   /* how its last stream ended (UP_OK once one delivers) */
    char stream_why[320];           /* and why */
    uint64_t frames, keys, resumes, snapshots, violations;
    /* h-horizon's: the anchor of its upstream's clock, and when a stream's HORIZON was last taken. */
    struct up_anchor anchor;
    int64_t stream_heard;           /* monoclock_boot_ns; 0: never */
    uint64_t stream_proofs, anchors, rate_breaks;
    /* Adaptive (issue 35): the horizon thread's own (up_forward): its token bucket. */
    int64_t forward_at;
    double forward_tokens;
};

struct upstream {
    struct follower base;
    char urls[CONFIG_MAX_UPSTREAMS][CONFIG_UPSTREAM_URL_MAX + 1];
    unsigned n_urls;
    char *token;                    /* [sync] upstream_token_file's; NULL: none */
    char token_err[256];            /* why it could not be read; "" = fine */
    struct up_table *tables[CONFIG_MAX_FILTERS];    /* as base.tables */
    /* Tables with their state and threads: run's thread appends, others read (acquire). */
    _Atomic unsigned running;
    /* Under base.mu: */
    unsigned cur;                   /* the upstream followed now */
    int64_t last_ok;                /* monoclock_boot_ns of its last answer (or when it was chosen) */
    bool mismatch;                  /* it served another table since its last good answer */
    int64_t degraded_since;         /* monoclock_boot_ns since it answers degraded; 0: it does not */
    int64_t next_probe;             /* when the others may be asked again */
    uint64_t switches;
    /*
     * The naps of the run and horizon threads (up_nap): a timed wait that
     * stop cuts short (up_interrupt), not follow_nap's 100 ms slices: an
     * idle replica's threads wake when they have something to do (a fleet
     * of sidecars shares its host's cores with the application).
     */
    pthread_mutex_t nap_mu;
    pthread_cond_t nap_cv;
};

/* Sleep ms, or until stop; follow_ops.interrupt wakes them (upstream_anchor.c). */
void up_nap(struct upstream *u, unsigned ms);
void up_interrupt(struct follower *f);

/* The up_table of t (NULL if not attached yet). */
struct up_table *up_table_of(struct upstream *u, const struct table *t);

/* The upstream followed now. */
unsigned up_current(struct upstream *u);

/*
 * "<urls[url]>/replicate/<name><suffix>" into out (cap bytes); false when
 * it does not fit.
 */
bool up_url(const struct upstream *u, unsigned url, const char *name, const char *suffix,
            char *out, size_t cap);

/* Milliseconds between a table's horizon questions, by max_staleness (UP_HORIZON_MIN_MS). */
unsigned up_horizon_ms(const struct config *cfg);

/*
 * Milliseconds between the frames a stream asks its upstream for
 * (?beat=), HORIZON frames (?horizon=1): up_horizon_ms, the proof's
 * period, or a quarter of silence_timeout (the silence after which the
 * replica gives the stream up) if that is shorter, within
 * FLEETWIRE_BEAT_MIN_MS and FLEETWIRE_BEAT_MAX_MS.
 */
unsigned up_beat_ms(const struct config *cfg);

/* The request options every call shares: the token, the CA file, stop. */
struct httpc_opts up_opts(struct upstream *u, const char *what, int stall_ms);

/*
 * What the last exchange with upstream url showed (why: the detail, for
 * the log, which names the URL; /readyz shows the kind of failure, and
 * /stats's replication section which upstream): the connection's state
 * and error for /stats and /readyz, and what the horizon thread weighs to
 * follow another upstream (one that has not answered for max_staleness,
 * at least a second, or serves another table: the replica is degraded by
 * then, and a switch costs a snapshot, so a blip makes none).  Reports
 * about an upstream no longer followed are dropped.
 */
void up_report(struct upstream *u, unsigned url, enum up_health h, const char *why);

/*
 * Follow upstream to instead (why, for the log): the streams reconnect
 * there from the mirror's position (from=HISTORY:SEQ, and commit=TLI:LSN
 * when the mirror knows one).  It resumes them if it is of the same
 * history and its ring still holds the position (the same upstream by
 * another address), or, of another history (each upstream follows
 * PostgreSQL with a history of its own), if it can prove it holds every
 * key committed after the commit position (fleetstream.c); else its HELLO
 * says so, and each table fetches its snapshot.  Caller holds no lock.
 */
void up_switch(struct upstream *u, unsigned to, const char *why);

/*
 * The mirror cannot resume (another history, a gap upstream, fell out of
 * the ring): a new epoch for t, the horizon waits for a snapshot, which
 * the horizon thread asks for once the upstream can give one that covers
 * its epoch.  Caller holds ut->mu.
 */
void up_lost_locked(struct up_table *ut, const char *why);

/*
 * The horizon answers whose seq the stream has delivered: the table's
 * horizon moves to theirs.  Caller holds ut->mu (after applying keys).
 */
void up_proofs_locked(struct up_table *ut);

/*
 * Whether an upstream's identity (id, of filter name, table and column)
 * is what t follows: the configured table and column, and, once pinned,
 * the relation, column, type, database and cluster of the first snapshot.
 * False with why (whylen bytes) if not.  Caller holds ut->mu.
 */
bool up_same_ident_locked(struct up_table *ut, const struct table_ident *id, const char *name,
                          const char *table, const char *column, char *why, size_t whylen);

/* An upstream's HELLO identity as a table_ident. */
void up_ident_of(const struct fleetwire_ident *w, struct table_ident *out);

/* A table's stream (upstream_stream.c) and horizon (follow_upstream.c) threads. */
void *up_stream_main(void *arg);
void *up_horizon_main(void *arg);

/*
 * Adaptive (issue 35): t's hot candidates passed up to upstream url (POST
 * /absent/NAME), [adaptive] verify_rate a second at most (upstream_report.c).
 * The table's horizon thread, on its httpc c.
 */
void up_forward(struct up_table *ut, struct httpc *c, unsigned url);

/* follow_ops.load (upstream_load.c). */
bool up_load(struct follower *f, struct table *t, const struct table_job *job, uint64_t *rows,
             double *secs, char *err, size_t errlen);

#endif
