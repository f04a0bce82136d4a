/*
 * An upstream's streams of its tables' keys to its replicas (GET
 * /replicate/NAME, fleethub.h): a callback response on a suspended
 * connection each, what it says first (the preamble, HELLO, or a BYE when
 * it cannot resume where asked), and the frames it makes whenever MHD can
 * take more (fleethub.c's head comment has their life with the pump).
 */
#include "fleethub_int.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "fleetring.h"
#include "fleetwire.h"
#include "monoclock.h"
#include "table.h"

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

/*
 * Whether s, of another history than its replica's, may go on after a seq
 * of this ring for a replica that holds every row committed up to its
 * commit position (h-stream's; fleetwire.h).  The argument, with p read
 * before the marks:
 *  - rows: the ring's newest mark of this epoch and timeline whose lo is at
 *    or below the position has seq S, and every key of every commit after
 *    the position that this table's follower applied since has a seq > S
 *    (fleetring.h's (b): marks are only made while the table is loaded and
 *    covers its epoch, and any gap since is another epoch, which has none
 *    of them).  The ring holds every key after S, and the stream sends
 *    them; a gap after p was read is an EPOCH frame, which makes the
 *    replica fetch a snapshot as on any stream.  So the replica, holding
 *    every row up to the position and every key after S, holds every row
 *    this table holds by following (a COPY since, in the same epoch, holds
 *    no row that was not followed or older: follow_upstream.c's argument),
 *    and this upstream's horizon answers prove it as they prove a snapshot
 *    of it.  Keys of commits at or before the position sent again are only
 *    added twice.
 *  - POSTs have no commit position.  Those this upstream acknowledges from
 *    now on get seqs past S and are sent; those it acknowledged before
 *    are in its journal only, which a snapshot carries and a stream does
 *    not: so it goes on only while its journal is empty (table_posts;
 *    every ID it acknowledged has expired or was found a row by a COPY, and
 *    such a row is a commit the two bullets above cover).  The POSTs the
 *    replica's earlier upstream acknowledged, it keeps (its filter, and its
 *    journal of hashes, which each later snapshot it loads gets again).
 * why (whylen bytes) says why not.
 */
static bool at_commit(struct stream *s, const struct table_proof *p, uint64_t *after, char *why,
                      size_t whylen)
{
    struct hub_table *ht = s->ht;
    struct table_posts posts;
    if (!p->loaded || p->covered != p->epoch) {
        snprintf(why, whylen, "its table is not loaded or has had a gap since its load");
        return false;
    }
    table_posts(ht->t, &posts);
    if (posts.count > 0) {
        snprintf(why, whylen, "its POST journal holds %llu IDs the replica may not have",
                 (unsigned long long)posts.count);
        return false;
    }
    if (!fleetring_at_commit(ht->ring, p->epoch, s->from_tli, s->from_lsn, after)) {
        snprintf(why, whylen, "its ring holds no commit position at or before %u:%016" PRIx64
                 " whose keys it still keeps", s->from_tli, s->from_lsn);
        return false;
    }
    return true;
}

/* The preamble and HELLO, and a BYE when the stream cannot resume where asked. */
static void open_stream(struct stream *s)
{
    struct hub_table *ht = s->ht;
    struct fleetwire_hello hello;
    struct table_proof p;
    memset(&hello, 0, sizeof hello);
    uint64_t history, last;
    s->changes = atomic_load(&ht->changes);
    fleethub_proof(ht, &p, &history, &last);
    /* The ring's own, read at once: the keys this stream sends are of it. */
    fleetring_where(ht->ring, &history, &last);
    s->resumed = s->has_from && s->from_history == history
                 && fleetring_holds_in(ht->ring, history, s->from_seq);
    char why[200] = "";
    uint64_t after = 0;
    if (!s->resumed && s->has_from && s->from_history != history && s->from_lsn != 0
        && at_commit(s, &p, &after, why, sizeof why)) {
        s->resumed = s->at_commit = true;
        s->from_seq = after;
    }
    s->history = history;
    s->next_seq = s->resumed ? s->from_seq + 1 : last + 1;
    s->epoch = p.epoch;
    s->generation = p.generation;
    hello_of(ht, &hello);
    hello.flags = (ht->h->replica ? FLEETWIRE_HELLO_REPLICA : 0)
                  | (s->resumed ? FLEETWIRE_HELLO_RESUMED : 0)
                  | (s->at_commit ? FLEETWIRE_HELLO_AT_COMMIT : 0);
    hello.history = history;
    hello.epoch = p.epoch;
    hello.covered = p.covered;
    hello.generation = p.generation;
    hello.from = s->resumed ? s->from_seq : 0;
    hello.last = last;
    s->len = fleetwire_put_preamble(s->out, sizeof s->out);
    s->len += fleetwire_put_hello(s->out + s->len, sizeof s->out - s->len, &hello);
    if (!s->resumed) {
        char reason[FLEETWIRE_MAX_REASON];
        snprintf(reason, sizeof reason, "%s%s%s", !s->has_from ? "no position given"
                 : s->from_history != hello.history ? "another history"
                 : "the ring no longer holds the position",
                 why[0] ? ", and no commit position: " : "", why);
        s->len += fleetwire_put_bye(s->out + s->len, sizeof s->out - s->len,
                                    FLEETWIRE_BYE_SNAPSHOT, reason);
        s->done = true;
    }
    s->opened = true;
}

/*
 * Adaptive (issue 35): the table's verified-absent entries entered since
 * the stream last looked, as a VERIFIED frame into s->out; false: none.
 * The order a replica may deny them in is table_adapt.h's ("On a
 * replica"): each is sent after every key this stream sent before, and
 * table_verified_log asks the set whether it still holds it after this
 * stream read those keys from the ring (or, for those up to its
 * position, after open_stream read the ring's newest seq): an add of the
 * key among them killed the entry before the tap put the add in the ring,
 * so it is not sent; any later add follows it to the replica and kills it
 * there.  A new stream starts from the oldest entry the log keeps.
 */
static bool produce_verified(struct stream *s)
{
    struct table_candidate v[16];
    size_t n = table_verified_log(s->ht->t, &s->vcursor, v, 16);
    if (n == 0)
        return false;
    uint64_t hashes[16];
    const char *keys[16];
    size_t klens[16];
    for (size_t i = 0; i < n; i++) {
        hashes[i] = v[i].hash;
        keys[i] = v[i].key;
        klens[i] = v[i].klen;
    }
    s->len = fleetwire_put_verified(s->out, sizeof s->out, hashes, keys, klens, (uint32_t)n);
    return s->len > 0;
}

/*
 * h-horizon's: a HORIZON frame into s->out when the stream asked for them
 * and the clock has crossed a multiple of its beat since the last one
 * (the first at once: it anchors the replica); false: not due.  It takes
 * the place of heartbeats, and comes while keys flow too, once the
 * stream has sent what the ring held: a replica's proofs must not wait
 * for an idle moment.  Made here, after the
 * replica's request arrived, which is all the replica's anchor needs
 * (follow_upstream.c).
 */
static bool produce_horizon(struct stream *s)
{
    if (!s->horizon)
        return false;
    int64_t slot = monoclock_boot_ns() / s->beat_ns;
    if (slot == s->beat_slot)
        return false;
    /*
     * Keys first: the frame's seq is then one the replica holds as it
     * reads it, and the proof applies at once instead of waiting (and
     * counting as a stream that lags its upstream, follow_upstream.c).
     */
    if (fleetring_last(s->ht->ring) >= s->next_seq)
        return false;
    struct fleetwire_horizon hz;
    fleethub_horizon_of(s->ht, &hz);
    s->beat_slot = slot;
    s->len = fleetwire_put_horizon(s->out, sizeof s->out, &hz);
    atomic_fetch_add_explicit(&s->ht->h->horizon_frames, 1, memory_order_relaxed);
    return s->len > 0;
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
        uint64_t history, seq;
        s->changes = changes;
        fleethub_proof(ht, &p, &history, &seq);
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
    /* h-horizon's: the proof every beat, whatever else goes (its own function). */
    if (produce_horizon(s))
        return true;
    /* The newest commit position the replica holds once it has what was sent (fleetwire.h). */
    uint64_t pseq, plsn;
    uint32_t ptli;
    if (fleetring_position(ht->ring, s->history, s->epoch, s->next_seq - 1, &pseq, &ptli, &plsn)
        && (plsn != s->pos_lsn || ptli != s->pos_tli)) {
        s->pos_lsn = plsn;
        s->pos_tli = ptli;
        s->len = fleetwire_put_position(s->out, sizeof s->out, pseq, s->epoch, ptli, plsn);
        return true;
    }
    /* Adaptive (issue 35): entries go between the keys, in the order produce_verified argues. */
    if (produce_verified(s))
        return true;
    uint64_t hashes[STREAM_OUT / 16];
    uint32_t ttls[STREAM_OUT / 16];
    uint32_t room = fleetwire_adds_room(sizeof s->out);
    long k = fleetring_read_in(ht->ring, s->history, s->next_seq, hashes, ttls, room);
    if (k == -2) {
        /* A replica's ring follows its upstream's history: another now. */
        s->len = fleetwire_put_bye(s->out, sizeof s->out, FLEETWIRE_BYE_SNAPSHOT,
                                   "this upstream follows another history now");
        s->done = true;
        return true;
    }
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
    if (!s->horizon && fleethub_beat_due(s, now)) {
        struct fleethub *h = ht->h;
        /*
         * One heartbeat per beat: stream_read calls produce again at once
         * to fill MHD's block, which must find it sent (it once wrote 32 KB
         * of heartbeats, 1,170 frames, per beat and stream).
         */
        s->last_sent = now;
        pthread_mutex_lock(&h->w.mu);
        if (ht->beat_len > 0 && ht->beat_last == s->next_seq - 1 && ht->beat_epoch == s->epoch) {
            memcpy(s->out, ht->beat, ht->beat_len);
            s->len = ht->beat_len;
        }
        pthread_mutex_unlock(&h->w.mu);
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
        pthread_mutex_lock(&h->w.mu);
        bool idle = !fleethub_due(s, monoclock_boot_ns());
        if (idle) {
            s->waiting = true;
            MHD_suspend_connection(s->conn);
        }
        pthread_mutex_unlock(&h->w.mu);
        if (idle)
            return 0;
    }
}

static void stream_free(void *cls)
{
    struct stream *s = cls;
    struct fleethub *h = s->ht->h;
    pthread_mutex_lock(&h->w.mu);
    if (s->prev != NULL)
        s->prev->next = s->next;
    else
        h->streams = s->next;
    if (s->next != NULL)
        s->next->prev = s->prev;
    h->nstreams--;
    atomic_fetch_sub(&s->ht->streams, 1);
    pthread_cond_broadcast(&h->w.cv);
    pthread_mutex_unlock(&h->w.mu);
    free(s);
}

struct reply fleethub_stream(struct fleethub *h, unsigned i, const struct fleethub_where *from,
                             unsigned beat_ms, bool horizon, struct MHD_Connection *conn)
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
        s->from_tli = from->tli;
        s->from_lsn = from->lsn;
    }
    s->last_sent = monoclock_boot_ns();
    s->beat_ns = (int64_t)beat_ms * NS_PER_MS;
    s->horizon = horizon;
    s->beat_slot = -1;
    pthread_mutex_lock(&h->w.mu);
    bool full = h->nstreams >= h->cfg->fleet_max_replicas, closing = atomic_load(&h->closing);
    if (!full && !closing) {
        s->next = h->streams;
        if (h->streams != NULL)
            h->streams->prev = s;
        h->streams = s;
        h->nstreams++;
        atomic_fetch_add(&ht->streams, 1);
        if (horizon && (h->beat_min_ns == 0 || s->beat_ns < h->beat_min_ns))
            h->beat_min_ns = s->beat_ns;
    }
    pthread_mutex_unlock(&h->w.mu);
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
