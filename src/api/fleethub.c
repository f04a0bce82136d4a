/*
 * An upstream's side of a fleet (fleethub.h): the rings its tables' taps
 * fill, the pump (a base/worker.h thread) that resumes the streams with
 * something to send, what a replica that serves replicas tells them
 * (fleethub_proof, in fleethub_int.h), and the horizon answers (the streams themselves are
 * fleetstream.c's, the snapshots made for replicas fleetsnap.c's).
 *
 * A stream's life, with libmicrohttpd 0.9.75: the handler answers with a
 * callback response of unknown size (chunked); MHD calls stream_read
 * whenever the socket can take more, and stream_read writes whole frames
 * (up to STREAM_OUT bytes prepared at a time) or, with nothing to say,
 * marks the stream waiting and suspends its connection, under the hub's
 * lock, before returning 0 (MHD_suspend_connection may be called from the
 * content reader).  An add kicks the pump (one signal per pump round, and
 * only for a table someone streams), which takes the lock, clears
 * `waiting` on each stream that has something new (keys past its next
 * seq, an epoch or generation change, a heartbeat due, an entry of the
 * verified-absent set: tap_verified kicks too) and, outside the
 * lock, resumes their connections, then sleeps FLUSH_US (longer with many
 * streams): the keys added meanwhile go out together, so a busy table
 * costs a bounded number of resumes a second whatever its rate.  A stream
 * is only ever resumed by the pump after the reader suspended it, so the
 * reader's check and its suspend cannot be overtaken by an add.  A
 * suspended connection never times out and is not noticed closing, so a
 * waiting stream is woken for a heartbeat every beat its replica asked for
 * (?beat=, a quarter of its silence_timeout: 3.75 s by default); and MHD
 * must not stop with one suspended, so fleethub_stop ends them all first.
 *
 * What an idle stream costs: nothing while suspended; a frame per beat.
 * A replica's stream asks for HORIZON frames (?horizon=1, fleetwire.h):
 * its proof, every beat its replica asks (a quarter of its
 * max_staleness: 0.5 s by default), in place of heartbeats and of the
 * horizon questions (GET /replicate/NAME/horizon) it asked as often
 * before.  A question was a wake of the server thread per replica and
 * beat (200 replicas: 400 a second, 0.04 of a core idle, most of it the
 * kernel's); the frames are due on multiples of the beat, so one pump
 * round resumes every stream of one beat and MHD's thread writes them in
 * one wake (bench/fleet's upstream_idle_cpu_streams200).  A replica
 * still asks every UP_ANCHOR_S (10 s), to anchor the frames' clock
 * (follow/upstream_anchor.c).  Streams without ?horizon=1 (an older
 * replica) get a HEARTBEAT per beat after their last frame, the same
 * bytes for every caught-up stream of a table, encoded once per round
 * (hub_table.beat).
 */
#include "fleethub_int.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "fleetring.h"
#include "fleetsnap.h"
#include "fleetwire.h"
#include "log.h"
#include "monoclock.h"
#include "source.h"
#include "table.h"

#define PUMP_IDLE_MS 250
/*
 * After a round that resumed streams, the pump waits before the next: the
 * adds made meanwhile batch into one frame per stream.  1 ms, longer with
 * more streams (FLUSH_PER_STREAM_NS each, at most FLUSH_MAX_US): a round
 * resumes every waiting stream, so that a table written row by row costs
 * the upstream a bounded number of resumes a second however many replicas
 * stream it, whatever its rate: each resume is an eventfd write inside
 * libmicrohttpd, a wake of its thread, two epoll_ctl calls and a send,
 * about 10 us.  bench/fleet measured half a core for 200 streams of 500
 * rows/s at 1 ms, and the upstream's /exists CPU per request 2.85 times
 * its own without streams at 10 ms (upstream_exists_cpu_streams200_writes);
 * 200 streams now wait 20 ms, which halves their rounds.  The wait is
 * what a replica's freshness loses (bench/fleet's
 * freshness_upstream_streams200), so it is bounded by FLUSH_MAX_US and by
 * max_staleness / FLUSH_STALE_DIV, far under the quarter of it a replica
 * asks its proofs at: one replica waits 1 ms, as before.
 */
#define FLUSH_US 1000
#define FLUSH_PER_STREAM_NS 100000
#define FLUSH_MAX_US 20000
#define FLUSH_STALE_DIV 40

/* The pump's wait after a round that resumed streams, in us (above). */
static useconds_t flush_us(const struct fleethub *h, size_t streams)
{
    uint64_t us = (uint64_t)streams * FLUSH_PER_STREAM_NS / 1000;
    double stale = h->cfg->max_staleness;
    uint64_t cap = FLUSH_MAX_US;
    if (stale > 0 && stale * 1e6 / FLUSH_STALE_DIV < (double)cap)
        cap = (uint64_t)(stale * 1e6 / FLUSH_STALE_DIV);
    if (us > cap)
        us = cap;
    return (useconds_t)(us < FLUSH_US ? FLUSH_US : us);
}

/* ------------------------------------------------------------- the taps -- */

void fleethub_kick(struct fleethub *h)
{
    if (!atomic_exchange(&h->kick, true))
        worker_wake(&h->w);
}

static void tap_added(void *ctx, const uint64_t *hashes, size_t n, uint32_t ttl,
                      const struct table_at *at)
{
    struct hub_table *ht = ctx;
    /* A replica's keys keep the seqs its upstream gave them (see hub_proof). */
    if (at != NULL)
        fleetring_append_at(ht->ring, at->history, at->first, hashes, n, ttl);
    else
        fleetring_append(ht->ring, hashes, n, ttl);
    if (atomic_load_explicit(&ht->streams, memory_order_relaxed) > 0)
        fleethub_kick(ht->h);
}

/*
 * A commit the follower applied (h-stream's commit positions): the ring
 * marks where it stands, if the table is loaded and covers its epoch (its
 * follower has missed nothing since its load began: every later commit's
 * keys reach the ring, fleetring.h's (b)).  The proof is read after the
 * commit was applied: a gap that began before it shows as another epoch or
 * as covered behind, and makes no mark.
 */
static void tap_committed(void *ctx, uint32_t tli, uint64_t lsn)
{
    struct hub_table *ht = ctx;
    struct table_proof p;
    table_proof(ht->t, &p);
    if (p.loaded && p.covered == p.epoch && p.epoch != 0)
        fleetring_mark(ht->ring, p.epoch, tli, lsn);
}

static void tap_changed(void *ctx)
{
    struct hub_table *ht = ctx;
    atomic_fetch_add(&ht->changes, 1);
    if (atomic_load_explicit(&ht->streams, memory_order_relaxed) > 0)
        fleethub_kick(ht->h);
}

/*
 * Adaptive (issue 35): an entry joined the table's verified-absent set
 * (its verifier's, or its upstream's stream's): the streams that wait send
 * it now (fleethub_due sees the log ahead of them), as an add would wake
 * them, instead of with the next key or heartbeat.  Entries entered within
 * one pump round go out together.
 */
static void tap_verified(void *ctx)
{
    struct hub_table *ht = ctx;
    if (atomic_load_explicit(&ht->streams, memory_order_relaxed) > 0)
        fleethub_kick(ht->h);
}

/* ------------------------------------------------------------ the pump -- */

void fleethub_proof(struct hub_table *ht, struct table_proof *p, uint64_t *history,
                      uint64_t *seq)
{
    struct fleethub *h = ht->h;
    struct follow_mirror m;
    table_proof(ht->t, p);
    if (h->mirrors != NULL && source_mirror(h->mirrors, (unsigned)(ht - h->tables), &m)) {
        p->epoch = m.epoch;
        p->covered = m.covered;
        p->generation = m.generation;
        fleetring_rebase(ht->ring, m.history, m.seq);
        *history = m.history;
        *seq = m.seq;
    } else {
        fleetring_where(ht->ring, history, seq);
    }
    atomic_store(&ht->epoch_now, p->epoch);
}

static void snap_proof(void *ctx, struct table_proof *p, uint64_t *history, uint64_t *seq)
{
    fleethub_proof(ctx, p, history, seq);
}

bool fleethub_due(const struct stream *s, int64_t now)
{
    struct hub_table *ht = s->ht;
    return atomic_load(&ht->h->closing) || fleetring_last(ht->ring) >= s->next_seq
           || atomic_load(&ht->changes) != s->changes
           || (s->horizon ? now / s->beat_ns != s->beat_slot : fleethub_beat_due(s, now))
           || table_verified_ahead(ht->t, s->vcursor);
}

/*
 * How long the pump may sleep at now (h->w.mu held): PUMP_IDLE_MS, or until
 * the clock crosses the next multiple of the shortest horizon beat, when
 * every horizon stream of that beat is due at once (their frames are
 * aligned on it, so that one round wakes them all: fleetwire.h).
 */
static int64_t pump_nap_ns(const struct fleethub *h, int64_t now)
{
    int64_t nap = PUMP_IDLE_MS * NS_PER_MS, b = h->beat_min_ns;
    if (b > 0) {
        int64_t next = (now / b + 1) * b - now;
        if (next < nap)
            nap = next;
    }
    return nap;
}

/*
 * Table ht's heartbeat frame of its newest seq and epoch (h->w.mu held):
 * every caught-up stream of the table the pump wakes sends these bytes (a
 * stream behind them has keys to send instead, and encodes its own).
 */
static void beat_refresh_locked(struct hub_table *ht)
{
    uint64_t last = fleetring_last(ht->ring), epoch = atomic_load(&ht->epoch_now);
    ht->beat_len = fleetwire_put_pair(ht->beat, sizeof ht->beat, FLEETWIRE_HEARTBEAT, last,
                                      epoch);
    ht->beat_last = last;
    ht->beat_epoch = epoch;
}

static void *pump_main(void *arg)
{
    struct fleethub *h = arg;
    size_t cap = 0;
    struct MHD_Connection **wake = NULL;
    uint64_t round = 0;
    while (!worker_stopping(&h->w)) {
        pthread_mutex_lock(&h->w.mu);
        int64_t nap = pump_nap_ns(h, monoclock_boot_ns());
        pthread_mutex_unlock(&h->w.mu);
        /*
         * A kick since the last round cuts it short (worker_wake).  Whole
         * ms, rounded up after 100 us more: a wake just before the
         * multiple would find nothing due yet.
         */
        worker_nap(&h->w, (unsigned)((nap + 100000 + NS_PER_MS - 1) / NS_PER_MS));
        atomic_store(&h->kick, false);
        pthread_mutex_lock(&h->w.mu);
        if (h->nstreams > cap) {
            size_t nc = h->nstreams * 2;
            struct MHD_Connection **nw = realloc(wake, nc * sizeof *nw);
            if (nw != NULL) {
                wake = nw;
                cap = nc;
            }
        }
        int64_t now = monoclock_boot_ns();
        size_t n = 0, streams = h->nstreams;
        round++;
        for (struct stream *s = h->streams; s != NULL && n < cap; s = s->next)
            if (s->waiting && fleethub_due(s, now)) {
                s->waiting = false;
                wake[n++] = s->conn;
                /* Once per table and round, for every stream it wakes. */
                if (s->ht->beat_round != round) {
                    s->ht->beat_round = round;
                    beat_refresh_locked(s->ht);
                }
            }
        pthread_mutex_unlock(&h->w.mu);
        /* Outside the lock: MHD takes its own, and these stay suspended until now. */
        for (size_t i = 0; i < n; i++)
            MHD_resume_connection(wake[i]);
        if (n > 0)
            usleep(flush_us(h, streams));
    }
    free(wake);
    return NULL;
}

/* ---------------------------------------------------------- the horizon -- */

void fleethub_horizon_of(struct hub_table *ht, struct fleetwire_horizon *out)
{
    struct table_proof p;
    uint64_t history, seq;
    /* The horizon first, then the seq: every key that proves it is at or below the seq. */
    fleethub_proof(ht, &p, &history, &seq);
    int64_t now = monoclock_boot_ns(), age = p.horizon > 0 ? now - p.horizon : -1;
    double stale = ht->h->cfg->max_staleness;
    bool degraded = !p.loaded || p.saturated || age < 0
                    || (stale > 0 && (double)age > stale * 1e9);
    /*
     * On the oscillator, which replicas anchor (upstream_anchor.c): the
     * horizon's age, measured on the boot clock NTP slews, widened by
     * more than any slew (an older horizon only proves less).
     */
    int64_t raw = monoclock_raw_ns(), hraw = age < 0 ? 0 : raw - fleetwire_slew_widened(age);
    *out = (struct fleetwire_horizon){
        .clock = ht->h->clock, .now = raw, .horizon = age < 0 ? 0 : (hraw > 0 ? hraw : 1),
        .history = history, .seq = seq, .epoch = p.epoch, .covered = p.covered,
        .generation = p.generation,
        .flags = (degraded ? FLEETWIRE_HORIZON_DEGRADED : 0u)
                 | (ht->h->replica ? FLEETWIRE_HORIZON_REPLICA : 0u),
    };
}

size_t fleethub_horizon_text(struct fleethub *h, unsigned i, char *out, size_t cap)
{
    struct hub_table *ht = &h->tables[i];
    struct fleetwire_horizon hz;
    /*
     * Asked, it may be followed soon (a replica's standby upstream asks it
     * now and then, up_horizon_main): the ring keeps keys from now on, so
     * that a replica can resume on it at its position.
     */
    fleetring_enable(ht->ring);
    fleethub_horizon_of(ht, &hz);
    /* clock and now_ns: a replica anchors its streams' HORIZON frames on them (fleetwire.h). */
    char age_text[24];
    snprintf(age_text, sizeof age_text, hz.horizon == 0 ? "null" : "%" PRId64, hz.now - hz.horizon);
    int n = snprintf(out, cap, "{\"history\":\"%016" PRIx64 "\",\"epoch\":%" PRIu64 ",\"covered\":%"
                     PRIu64 ",\"generation\":%" PRIu64 ",\"seq\":%" PRIu64 ",\"age_ns\":%s,"
                     "\"degraded\":%s,\"replica\":%s,\"clock\":\"%016" PRIx64 "\",\"now_ns\":%"
                     PRId64 "}", hz.history, hz.epoch, hz.covered, hz.generation, hz.seq, age_text,
                     (hz.flags & FLEETWIRE_HORIZON_DEGRADED) ? "true" : "false",
                     h->replica ? "true" : "false", hz.clock, hz.now);
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

/*
 * The same answer whether libmicrohttpd or the fast path (replicate.c's
 * replicate_get_fast) gives it, so no Cache-Control: a request with
 * Authorization is not stored by a shared cache anyway (RFC 9111 3.5).
 */
struct reply fleethub_horizon(struct fleethub *h, unsigned i)
{
    char text[FLEETHUB_HORIZON_MAX];
    size_t n = fleethub_horizon_text(h, i, text, sizeof text);
    return api_json_take(MHD_HTTP_OK, n > 0 ? strdup(text) : NULL);
}

/* ---------------------------------------------------------- snapshots -- */

struct reply fleethub_snapshot(struct fleethub *h, unsigned i)
{
    bool made = false;
    struct reply r = fleetsnap_serve(h->tables[i].snap, &made);
    if (made)
        atomic_fetch_add(&h->snapshots, 1);
    return r;
}

/* ------------------------------------------------------------ the hub -- */

struct fleethub *fleethub_new(const struct config *cfg, struct table *const *tables, unsigned n,
                              struct source *mirrors, const struct log *lg)
{
    struct fleethub *h = calloc(1, sizeof *h);
    if (h == NULL)
        return NULL;
    h->cfg = cfg;
    h->lg = lg;
    h->replica = mirrors != NULL;
    h->mirrors = mirrors;
    h->clock = fleetring_new_history();     /* random, never 0 */
    worker_init(&h->w);
    h->tables = calloc(n, sizeof *h->tables);
    if (h->tables == NULL) {
        fleethub_free(h);
        return NULL;
    }
    for (unsigned i = 0; i < n; i++) {
        struct hub_table *ht = &h->tables[i];
        ht->h = h;
        ht->t = tables[i];
        h->n = i + 1;
        if ((ht->ring = fleetring_new(cfg->fleet_ring_items, fleetring_new_history())) == NULL
            || (ht->snap = fleetsnap_new(ht->t, ht->ring, h->replica, snap_proof, ht)) == NULL) {
            fleethub_free(h);
            return NULL;
        }
        table_set_tap(ht->t, &(struct table_tap){ ht, tap_added, tap_changed, tap_committed });
        table_set_verified_wake(ht->t, tap_verified, ht);
    }
    return h;
}

bool fleethub_start(struct fleethub *h)
{
    return worker_start(&h->w, pump_main, h);
}

void fleethub_stop(struct fleethub *h)
{
    if (h == NULL)
        return;
    atomic_store(&h->closing, true);
    fleethub_kick(h);
    /* Each stream says BYE and ends; MHD must not stop with one suspended. */
    pthread_mutex_lock(&h->w.mu);
    for (int i = 0; i < 200 && h->nstreams > 0; i++) {
        struct timespec ts = monoclock_after_ms(10);
        pthread_cond_broadcast(&h->w.cv);
        pthread_cond_timedwait(&h->w.cv, &h->w.mu, &ts);
    }
    unsigned left = h->nstreams;
    pthread_mutex_unlock(&h->w.mu);
    if (left > 0)
        log_warn(h->lg, "%u replication stream(s) did not end in 2 s", left);
    worker_stop(&h->w);
}

void fleethub_free(struct fleethub *h)
{
    if (h == NULL)
        return;
    for (unsigned i = 0; i < h->n; i++) {
        /* Nothing adds any more (the followers and the server stopped): unhook all the same. */
        table_set_tap(h->tables[i].t, &(struct table_tap){ NULL, NULL, NULL, NULL });
        table_set_verified_wake(h->tables[i].t, NULL, NULL);
        fleetsnap_free(h->tables[i].snap);
        fleetring_free(h->tables[i].ring);
    }
    free(h->tables);
    worker_destroy(&h->w);
    free(h);
}

void fleethub_info(struct fleethub *h, struct fleethub_info *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&h->w.mu);
    out->streams = h->nstreams;
    pthread_mutex_unlock(&h->w.mu);
    out->streams_total = atomic_load(&h->streams_total);
    out->refused = atomic_load(&h->refused);
    out->cut_behind = atomic_load(&h->cut_behind);
    out->snapshots = atomic_load(&h->snapshots);
    out->horizon_frames = atomic_load(&h->horizon_frames);
    out->ring_capacity = h->cfg->fleet_ring_items;
    for (unsigned i = 0; i < h->n && i < 64; i++) {
        struct fleetring_info ri;
        fleetring_info(h->tables[i].ring, &ri);
        out->ring_last[i] = ri.last;
        out->ring_oldest[i] = ri.oldest;
        out->ring_enabled[i] = ri.enabled;
    }
}
