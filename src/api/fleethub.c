/*
 * An upstream's side of a fleet (fleethub.h): the rings its tables' taps
 * fill, the streams of them on suspended connections, the pump that
 * resumes the streams with something to send, and the horizon answers (the
 * snapshots made for replicas are fleetsnap.c's).
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
 * seq, an epoch or generation change, a heartbeat due) and, outside the
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
 * What an idle stream costs: nothing while suspended; a heartbeat frame per
 * beat, the same bytes for every caught-up stream of a table, so the pump
 * encodes it once per round for all of them (hub_table.beat) in the pass
 * that resumes them.  The replicas' horizon questions (GET
 * /replicate/NAME/horizon) are requests like /exists, one per replica and
 * table every quarter of its max_staleness (follow_upstream.c): with 200
 * replicas, bench/fleet's upstream_exists_cpu_streams200 weighs them.
 */
#include "fleethub.h"

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
#include "table.h"

/* Frames a stream prepares at a time; an ADDS frame of it holds 250 keys. */
#define STREAM_OUT 4096
/* What MHD is told to ask a stream for at once. */
#define STREAM_BLOCK (32 * 1024)
#define NS_PER_MS INT64_C(1000000)
#define PUMP_IDLE_MS 250
/*
 * After a round that resumed streams, the pump waits before the next: the
 * adds made meanwhile batch into one frame per stream.  1 ms, longer with
 * more streams (FLUSH_PER_STREAM_NS each, at most FLUSH_MAX_US): a round
 * resumes every waiting stream, a few microseconds each, so that a table
 * written row by row costs the upstream a bounded number of resumes a
 * second however many replicas stream it: each resume is a wake of MHD's
 * thread, two epoll_ctl calls and a write, about 10 us; bench/fleet
 * measured half a core for 200 streams of 500 rows/s at 1 ms.  200 streams
 * wait 10 ms: the freshness of their replicas is that much later.
 */
#define FLUSH_US 1000
#define FLUSH_PER_STREAM_NS 50000
#define FLUSH_MAX_US 10000

struct hub_table {
    struct fleethub *h;
    struct table *t;
    struct fleetring *ring;
    _Atomic unsigned streams;       /* streaming now */
    _Atomic uint64_t changes;       /* epoch or generation moves (the tap's changed) */
    struct fleetsnap *snap;         /* its snapshots for replicas */
    /* Under h->mu: the heartbeat frame of (beat_last, beat_epoch), encoded by the pump. */
    unsigned char beat[FLEETWIRE_PAIR_FRAME];
    size_t beat_len;                /* 0: none yet */
    uint64_t beat_last, beat_epoch, beat_round;
};

struct stream {
    struct hub_table *ht;
    struct MHD_Connection *conn;
    struct stream *prev, *next;     /* in h->streams, under h->mu */
    bool waiting;                   /* under h->mu: suspended by stream_read */
    /* The MHD thread's only (stream_read). */
    bool opened, resumed, done;
    uint64_t from_history, from_seq;
    bool has_from;
    uint64_t next_seq, epoch, generation, changes;
    int64_t beat_ns;                /* a heartbeat after this long without a frame */
    int64_t last_sent;
    size_t len, off;
    unsigned char out[STREAM_OUT];
};

struct fleethub {
    const struct config *cfg;
    const struct log *lg;
    bool replica;
    unsigned n;
    struct hub_table *tables;
    pthread_mutex_t mu;
    pthread_cond_t cv;              /* a kick, a stream gone, or stop */
    struct stream *streams;         /* under mu */
    unsigned nstreams;              /* under mu */
    atomic_bool closing;            /* streams say BYE; no new ones */
    atomic_bool kick, stop;
    pthread_t pump;
    bool started;
    atomic_ulong streams_total, refused, cut_behind, snapshots;
};

/* ------------------------------------------------------------- the taps -- */

static void kick(struct fleethub *h)
{
    if (!atomic_exchange(&h->kick, true)) {
        pthread_mutex_lock(&h->mu);
        pthread_cond_signal(&h->cv);
        pthread_mutex_unlock(&h->mu);
    }
}

static void tap_added(void *ctx, const uint64_t *hashes, size_t n, uint32_t ttl)
{
    struct hub_table *ht = ctx;
    fleetring_append(ht->ring, hashes, n, ttl);
    if (atomic_load_explicit(&ht->streams, memory_order_relaxed) > 0)
        kick(ht->h);
}

static void tap_changed(void *ctx)
{
    struct hub_table *ht = ctx;
    atomic_fetch_add(&ht->changes, 1);
    if (atomic_load_explicit(&ht->streams, memory_order_relaxed) > 0)
        kick(ht->h);
}

/* ------------------------------------------------------------ the pump -- */

/* Whether stream s has something to send at now (h->mu held). */
static bool due(const struct stream *s, int64_t now)
{
    struct hub_table *ht = s->ht;
    return atomic_load(&ht->h->closing) || fleetring_last(ht->ring) >= s->next_seq
           || atomic_load(&ht->changes) != s->changes || now - s->last_sent >= s->beat_ns;
}

/*
 * Table ht's heartbeat frame of its newest seq and epoch (h->mu held):
 * every caught-up stream of the table the pump wakes sends these bytes (a
 * stream behind them has keys to send instead, and encodes its own).
 */
static void beat_refresh_locked(struct hub_table *ht)
{
    struct table_proof p;
    uint64_t last = fleetring_last(ht->ring);
    table_proof(ht->t, &p);
    ht->beat_len = fleetwire_put_pair(ht->beat, sizeof ht->beat, FLEETWIRE_HEARTBEAT, last,
                                      p.epoch);
    ht->beat_last = last;
    ht->beat_epoch = p.epoch;
}

static void *pump_main(void *arg)
{
    struct fleethub *h = arg;
    size_t cap = 0;
    struct MHD_Connection **wake = NULL;
    uint64_t round = 0;
    while (!atomic_load(&h->stop)) {
        pthread_mutex_lock(&h->mu);
        if (!atomic_load(&h->kick) && !atomic_load(&h->stop)) {
            struct timespec ts = monoclock_after_ms(PUMP_IDLE_MS);
            pthread_cond_timedwait(&h->cv, &h->mu, &ts);
        }
        atomic_store(&h->kick, false);
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
            if (s->waiting && due(s, now)) {
                s->waiting = false;
                wake[n++] = s->conn;
                /* Once per table and round, for every stream it wakes. */
                if (s->ht->beat_round != round) {
                    s->ht->beat_round = round;
                    beat_refresh_locked(s->ht);
                }
            }
        pthread_mutex_unlock(&h->mu);
        /* Outside the lock: MHD takes its own, and these stay suspended until now. */
        for (size_t i = 0; i < n; i++)
            MHD_resume_connection(wake[i]);
        if (n > 0) {
            uint64_t us = (uint64_t)streams * FLUSH_PER_STREAM_NS / 1000;
            usleep((useconds_t)(us < FLUSH_US ? FLUSH_US : us > FLUSH_MAX_US ? FLUSH_MAX_US : us));
        }
    }
    free(wake);
    return NULL;
}

/* ---------------------------------------------------------- the streams -- */

static void hello_of(struct hub_table *ht, struct fleetwire_hello *hello)
{
    const struct filter_config *fc = table_config(ht->t);
    struct table_ident id;
    struct table_sizing sz = table_sizing(ht->t);
    struct fleetwire_ident *w = &hello->ident;
    table_ident(ht->t, &id);
    *w = (struct fleetwire_ident){
        .relid = id.relid, .typid = id.typid, .base_typid = id.base_typid, .dboid = id.dboid,
        .attnum = id.attnum, .typmod = id.typmod, .deterministic = id.deterministic,
        .kind = (uint8_t)sz.kind, .fpp = sz.false_positive_rate, .hash = FLEETWIRE_HASH,
    };
    snprintf(w->name, sizeof w->name, "%s", fc->name);
    snprintf(w->table, sizeof w->table, "%s", fc->table);
    snprintf(w->column, sizeof w->column, "%s", fc->column);
    snprintf(w->sysid, sizeof w->sysid, "%s", id.sysid);
    snprintf(w->spell, sizeof w->spell, "%s", spell_type_name(id.spell));
    snprintf(w->type_name, sizeof w->type_name, "%s", id.type_name);
}

/* The preamble and HELLO, and a BYE when the stream cannot resume where asked. */
static void open_stream(struct stream *s)
{
    struct hub_table *ht = s->ht;
    struct fleetwire_hello hello;
    struct table_proof p;
    memset(&hello, 0, sizeof hello);
    s->changes = atomic_load(&ht->changes);
    table_proof(ht->t, &p);
    uint64_t last = fleetring_last(ht->ring);
    s->resumed = s->has_from && s->from_history == fleetring_history(ht->ring)
                 && fleetring_holds(ht->ring, s->from_seq);
    s->next_seq = s->resumed ? s->from_seq + 1 : last + 1;
    s->epoch = p.epoch;
    s->generation = p.generation;
    hello_of(ht, &hello);
    hello.flags = (ht->h->replica ? FLEETWIRE_HELLO_REPLICA : 0)
                  | (s->resumed ? FLEETWIRE_HELLO_RESUMED : 0);
    hello.history = fleetring_history(ht->ring);
    hello.epoch = p.epoch;
    hello.covered = p.covered;
    hello.generation = p.generation;
    hello.from = s->resumed ? s->from_seq : 0;
    hello.last = last;
    s->len = fleetwire_put_preamble(s->out, sizeof s->out);
    s->len += fleetwire_put_hello(s->out + s->len, sizeof s->out - s->len, &hello);
    if (!s->resumed) {
        s->len += fleetwire_put_bye(s->out + s->len, sizeof s->out - s->len,
                                    FLEETWIRE_BYE_SNAPSHOT, !s->has_from ? "no position given"
                                    : s->from_history != hello.history ? "another history"
                                    : "the ring no longer holds the position");
        s->done = true;
    }
    s->opened = true;
}

/* The next frames into s->out; false when there is nothing to say now. */
static bool produce(struct stream *s)
{
    struct hub_table *ht = s->ht;
    s->off = s->len = 0;
    if (s->done)
        return false;
    if (!s->opened) {
        open_stream(s);
        return true;
    }
    if (atomic_load(&ht->h->closing)) {
        s->len = fleetwire_put_bye(s->out, sizeof s->out, FLEETWIRE_BYE_SHUTDOWN, "stopping");
        s->done = true;
        return true;
    }
    uint64_t changes = atomic_load(&ht->changes);
    if (changes != s->changes) {
        struct table_proof p;
        s->changes = changes;
        table_proof(ht->t, &p);
        if (p.epoch != s->epoch)
            s->len += fleetwire_put_pair(s->out + s->len, sizeof s->out - s->len,
                                         FLEETWIRE_EPOCH, p.epoch, p.covered);
        if (p.generation != s->generation)
            s->len += fleetwire_put_pair(s->out + s->len, sizeof s->out - s->len,
                                         FLEETWIRE_GENERATION, p.generation, p.covered);
        s->epoch = p.epoch;
        s->generation = p.generation;
        if (s->len > 0)
            return true;
    }
    uint64_t hashes[STREAM_OUT / 16];
    uint32_t ttls[STREAM_OUT / 16];
    uint32_t room = fleetwire_adds_room(sizeof s->out);
    long k = fleetring_read(ht->ring, s->next_seq, hashes, ttls, room);
    if (k < 0) {
        /* It fell out of the ring: cut off, it fetches a snapshot (nothing grows per replica). */
        s->len = fleetwire_put_bye(s->out, sizeof s->out, FLEETWIRE_BYE_BEHIND,
                                   "fell behind the ring ([fleet] ring_items)");
        s->done = true;
        atomic_fetch_add(&ht->h->cut_behind, 1);
        return true;
    }
    if (k > 0) {
        s->len = fleetwire_put_adds(s->out, sizeof s->out, s->next_seq, hashes, ttls,
                                    (uint32_t)k);
        s->next_seq += (uint64_t)k;
        return true;
    }
    int64_t now = monoclock_boot_ns();
    if (now - s->last_sent >= s->beat_ns) {
        struct fleethub *h = ht->h;
        /*
         * One heartbeat per beat: stream_read calls produce again at once
         * to fill MHD's block, which must find it sent (it once wrote 32 KB
         * of heartbeats, 1,170 frames, per beat and stream).
         */
        s->last_sent = now;
        pthread_mutex_lock(&h->mu);
        if (ht->beat_len > 0 && ht->beat_last == s->next_seq - 1 && ht->beat_epoch == s->epoch) {
            memcpy(s->out, ht->beat, ht->beat_len);
            s->len = ht->beat_len;
        }
        pthread_mutex_unlock(&h->mu);
        /* The pump's is of another seq or epoch (this stream is not where it stood): its own. */
        if (s->len == 0)
            s->len = fleetwire_put_pair(s->out, sizeof s->out, FLEETWIRE_HEARTBEAT,
                                        s->next_seq - 1, s->epoch);
        return true;
    }
    return false;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct stream *s = cls;
    struct fleethub *h = s->ht->h;
    (void)pos;
    for (;;) {
        size_t n = 0;
        while (n < max && (s->off < s->len || produce(s))) {
            size_t k = s->len - s->off < max - n ? s->len - s->off : max - n;
            memcpy(buf + n, s->out + s->off, k);
            s->off += k;
            n += k;
        }
        if (n > 0) {
            s->last_sent = monoclock_boot_ns();
            return (ssize_t)n;
        }
        if (s->done)
            return MHD_CONTENT_READER_END_OF_STREAM;
        /* Nothing to say: wait, suspended, unless something came since produce looked. */
        pthread_mutex_lock(&h->mu);
        bool idle = !due(s, monoclock_boot_ns());
        if (idle) {
            s->waiting = true;
            MHD_suspend_connection(s->conn);
        }
        pthread_mutex_unlock(&h->mu);
        if (idle)
            return 0;
    }
}

static void stream_free(void *cls)
{
    struct stream *s = cls;
    struct fleethub *h = s->ht->h;
    pthread_mutex_lock(&h->mu);
    if (s->prev != NULL)
        s->prev->next = s->next;
    else
        h->streams = s->next;
    if (s->next != NULL)
        s->next->prev = s->prev;
    h->nstreams--;
    atomic_fetch_sub(&s->ht->streams, 1);
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    free(s);
}

struct reply fleethub_stream(struct fleethub *h, unsigned i, const struct fleethub_where *from,
                             unsigned beat_ms, struct MHD_Connection *conn)
{
    struct hub_table *ht = &h->tables[i];
    if (conn == NULL)
        return api_error(MHD_HTTP_INTERNAL_SERVER_ERROR, "internal", "no connection to stream on");
    if (!fleetring_enable(ht->ring))
        return api_error(MHD_HTTP_SERVICE_UNAVAILABLE, "out_of_memory",
                         "no memory for the replication ring ([fleet] ring_items)");
    struct stream *s = calloc(1, sizeof *s);
    if (s == NULL)
        return (struct reply){ MHD_HTTP_INTERNAL_SERVER_ERROR, NULL, false };
    s->ht = ht;
    s->conn = conn;
    s->has_from = from != NULL;
    if (from != NULL) {
        s->from_history = from->history;
        s->from_seq = from->seq;
    }
    s->last_sent = monoclock_boot_ns();
    s->beat_ns = (int64_t)beat_ms * NS_PER_MS;
    pthread_mutex_lock(&h->mu);
    bool full = h->nstreams >= h->cfg->fleet_max_replicas, closing = atomic_load(&h->closing);
    if (!full && !closing) {
        s->next = h->streams;
        if (h->streams != NULL)
            h->streams->prev = s;
        h->streams = s;
        h->nstreams++;
        atomic_fetch_add(&ht->streams, 1);
    }
    pthread_mutex_unlock(&h->mu);
    if (full || closing) {
        free(s);
        atomic_fetch_add(&h->refused, 1);
        return closing ? api_error(MHD_HTTP_SERVICE_UNAVAILABLE, "shutting_down", "stopping")
                       : api_error(MHD_HTTP_SERVICE_UNAVAILABLE, "too_many_replicas",
                                   "%u replicas stream already ([fleet] max_replicas)",
                                   h->cfg->fleet_max_replicas);
    }
    atomic_fetch_add(&h->streams_total, 1);
    /* From here MHD owns s: stream_free unlinks it when the response goes. */
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, STREAM_BLOCK,
                                                               stream_read, s, stream_free);
    if (r == NULL) {
        stream_free(s);
        return (struct reply){ MHD_HTTP_INTERNAL_SERVER_ERROR, NULL, false };
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/x-bloomguard-replication");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    /* A proxy in between must pass frames on as they come. */
    MHD_add_response_header(r, "X-Accel-Buffering", "no");
    return (struct reply){ MHD_HTTP_OK, r, false };
}

/* ---------------------------------------------------------- the horizon -- */

struct reply fleethub_horizon(struct fleethub *h, unsigned i)
{
    struct hub_table *ht = &h->tables[i];
    struct table_proof p;
    /* The horizon first, then the seq: every key that proves it is at or below the seq. */
    table_proof(ht->t, &p);
    uint64_t seq = fleetring_last(ht->ring);
    int64_t now = monoclock_boot_ns(), age = p.horizon > 0 ? now - p.horizon : -1;
    double stale = h->cfg->max_staleness;
    bool degraded = !p.loaded || p.saturated || age < 0
                    || (stale > 0 && (double)age > stale * 1e9);
    char age_text[24], *body = NULL;
    snprintf(age_text, sizeof age_text, age < 0 ? "null" : "%" PRId64, age);
    if (asprintf(&body, "{\"history\":\"%016" PRIx64 "\",\"epoch\":%" PRIu64 ",\"covered\":%"
                 PRIu64 ",\"generation\":%" PRIu64 ",\"seq\":%" PRIu64 ",\"age_ns\":%s,"
                 "\"degraded\":%s,\"replica\":%s}", fleetring_history(ht->ring), p.epoch,
                 p.covered, p.generation, seq, age_text, degraded ? "true" : "false",
                 h->replica ? "true" : "false") < 0)
        body = NULL;
    struct reply r = api_json_take(MHD_HTTP_OK, body);
    if (r.resp != NULL)
        MHD_add_response_header(r.resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    return r;
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
                              bool replica, const struct log *lg)
{
    struct fleethub *h = calloc(1, sizeof *h);
    if (h == NULL)
        return NULL;
    h->cfg = cfg;
    h->lg = lg;
    h->replica = replica;
    pthread_mutex_init(&h->mu, NULL);
    monoclock_cond_init(&h->cv);
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
            || (ht->snap = fleetsnap_new(ht->t, ht->ring, replica)) == NULL) {
            fleethub_free(h);
            return NULL;
        }
        table_set_tap(ht->t, &(struct table_tap){ ht, tap_added, tap_changed });
    }
    return h;
}

bool fleethub_start(struct fleethub *h)
{
    h->started = pthread_create(&h->pump, NULL, pump_main, h) == 0;
    return h->started;
}

void fleethub_stop(struct fleethub *h)
{
    if (h == NULL)
        return;
    atomic_store(&h->closing, true);
    kick(h);
    /* Each stream says BYE and ends; MHD must not stop with one suspended. */
    pthread_mutex_lock(&h->mu);
    for (int i = 0; i < 200 && h->nstreams > 0; i++) {
        struct timespec ts = monoclock_after_ms(10);
        pthread_cond_broadcast(&h->cv);
        pthread_cond_timedwait(&h->cv, &h->mu, &ts);
    }
    unsigned left = h->nstreams;
    pthread_mutex_unlock(&h->mu);
    if (left > 0)
        log_warn(h->lg, "%u replication stream(s) did not end in 2 s", left);
    atomic_store(&h->stop, true);
    kick(h);
    pthread_mutex_lock(&h->mu);
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    if (h->started)
        pthread_join(h->pump, NULL);
    h->started = false;
}

void fleethub_free(struct fleethub *h)
{
    if (h == NULL)
        return;
    for (unsigned i = 0; i < h->n; i++) {
        /* Nothing adds any more (the followers and the server stopped): unhook all the same. */
        table_set_tap(h->tables[i].t, &(struct table_tap){ NULL, NULL, NULL });
        fleetsnap_free(h->tables[i].snap);
        fleetring_free(h->tables[i].ring);
    }
    free(h->tables);
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    free(h);
}

void fleethub_info(struct fleethub *h, struct fleethub_info *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&h->mu);
    out->streams = h->nstreams;
    pthread_mutex_unlock(&h->mu);
    out->streams_total = atomic_load(&h->streams_total);
    out->refused = atomic_load(&h->refused);
    out->cut_behind = atomic_load(&h->cut_behind);
    out->snapshots = atomic_load(&h->snapshots);
    out->ring_capacity = h->cfg->fleet_ring_items;
    for (unsigned i = 0; i < h->n && i < 64; i++) {
        struct fleetring_info ri;
        fleetring_info(h->tables[i].ring, &ri);
        out->ring_last[i] = ri.last;
        out->ring_oldest[i] = ri.oldest;
        out->ring_enabled[i] = ri.enabled;
    }
}
