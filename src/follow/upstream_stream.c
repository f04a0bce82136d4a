/*
 * Method upstream: a table's stream, GET /replicate/NAME?from=HISTORY:SEQ
 * on its upstream, its frames applied in order (fleetwire.h's rule: a key
 * only after every key before it) into the live filter, acknowledged POSTs
 * kept in the table's journal of hashes, and the horizon answers whose seq
 * has arrived turned into proofs.  Whatever the upstream sends, a frame
 * that breaks the rule ends the stream before anything of it is applied,
 * so a broken or hostile upstream can delay freshness (answers degrade)
 * but never make a key look applied that was not.
 */
#include "upstream.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* A stream in progress: what it resumed from, and how it ended. */
struct stream {
    struct up_table *ut;
    unsigned url;
    uint64_t version;               /* the mirror's when the stream was asked for */
    struct fleetwire_dec dec;
    struct fleetwire_track track;
    uint64_t *hashes;               /* an ADDS frame's keys, decoded */
    bool hello, stale, lost, violation, bye, mismatch;
    char why[320];
    struct up_when asked;           /* before the request went */
    bool anchored;                  /* a HORIZON of it came (and anchored if it could do better) */
};

static bool on_head(void *arg, const struct httpc_head *h, char *why, size_t whylen)
{
    struct stream *s = arg;
    if (h->has_length) {
        snprintf(why, whylen, "a stream with a Content-Length (%llu bytes) is not a stream",
                 (unsigned long long)h->length);
        return false;
    }
    /* A stream is open: how the one before it ended is no reason any more. */
    pthread_mutex_lock(&s->ut->mu);
    s->ut->stream_health = UP_OK;
    s->ut->stream_why[0] = '\0';
    pthread_mutex_unlock(&s->ut->mu);
    return true;
}

/* An ADDS frame the rule let through: its keys in order, rows and POSTs.  Caller holds mu. */
static void apply_locked(struct stream *s, const struct fleetwire_adds *a)
{
    struct up_table *ut = s->ut;
    uint64_t now = monoclock_boot_s();
    for (uint32_t i = 0; i < a->count; i++)
        s->hashes[i] = fleetwire_adds_hash(a, i);
    /* Rows in runs between the POSTs; each POST into the journal before the filter. */
    uint32_t from = 0;
    for (uint32_t j = 0; j <= a->posts; j++) {
        uint32_t index = a->count, ttl = 0;
        if (j < a->posts)
            fleetwire_adds_mark(a, j, &index, &ttl);
        /* With their seqs in the upstream's history: a ring of ours keeps them (fleethub.c). */
        if (index > from)
            table_add_hashes(ut->t, s->hashes + from, index - from, 0,
                             &(struct table_at){ ut->m.history, a->first + from });
        if (j < a->posts) {
            fleetjournal_add(ut->posts, s->hashes[index], ttl, now);
            table_add_hashes(ut->t, s->hashes + index, 1, ttl,
                             &(struct table_at){ ut->m.history, a->first + index });
            from = index + 1;
        }
    }
    ut->m.seq = a->first + a->count - 1;
    ut->keys += a->count;
    ut->stream_health = UP_OK;
    ut->stream_why[0] = '\0';
    table_count_rows(ut->t, a->count, 0);
    up_proofs_locked(ut);
}

/*
 * A HELLO that resumed at the mirror's commit position (h-stream's;
 * fleetwire.h) on an upstream of another history: the filter holds every
 * row committed up to the position, and this upstream sends every key
 * after its seq from (fleetstream.c's argument), so the mirror is of its
 * history from there, covering its epoch: its horizon answers prove as a
 * snapshot of it would.  The proofs of the history before prove nothing
 * here.  False (a violation) for one that does not cover its epoch: it
 * must not resume so.  Caller holds mu.
 */
static bool at_commit_locked(struct stream *s, const struct fleetwire_hello *h)
{
    struct up_table *ut = s->ut;
    if (h->covered != h->epoch || h->epoch == 0) {
        s->violation = true;
        snprintf(s->why, sizeof s->why, "the stream broke the protocol: it resumed at a commit "
                 "position in epoch %llu, covering %llu", (unsigned long long)h->epoch,
                 (unsigned long long)h->covered);
        return false;
    }
    log_fields(ut->u->base.lg, LOG_LVL_INFO, table_name(ut->t), "upstream_resume",
               "%s: %s goes on at commit position %u:%016" PRIx64 " (its seq %" PRIu64
               " of history %016" PRIx64 "), no snapshot", table_name(ut->t),
               ut->u->urls[s->url], ut->m.commit_tli, ut->m.commit_lsn, h->from, h->history);
    ut->m.history = h->history;
    ut->m.seq = h->from;
    ut->m.covered = h->epoch;
    ut->m.generation = h->generation;
    ut->n_proofs = 0;
    ut->heard_history = h->history;
    ut->heard_epoch = h->epoch;
    ut->heard_covered = h->covered;
    ut->heard_generation = h->generation;
    return true;
}

/* Adaptive (issue 35): a VERIFIED frame's entries into the table's set.  Caller holds mu. */
static void enter_verified(struct up_table *ut, const struct fleetwire_verified *v)
{
    size_t at = 0, klen;
    uint64_t hash;
    const char *key;
    while (fleetwire_verified_next(v, &at, &hash, &key, &klen))
        table_enter_verified(ut->t, hash, key, klen);
}

/*
 * h-horizon's: a HORIZON frame as an answer, and the moment on our clock
 * its horizon is proved at (-1: none).  Every frame of this stream was
 * made after its request went at s->asked: so a frame of a clock the
 * anchor does not know anchors it (remote = its now, local = asked; a
 * restarted upstream is a new stream of a new clock, and a new anchor),
 * and the first frame of a stream asked after the anchor was made renews
 * it.  The horizon thread renews it with round trips of the same clock.
 * Never later than now: the upstream made the frame before we read it.
 * Caller holds mu.
 */
static int64_t horizon_locked(struct stream *s, const struct fleetwire_horizon *h,
                              struct up_answer *ans)
{
    struct up_table *ut = s->ut;
    *ans = (struct up_answer){
        .history = h->history, .epoch = h->epoch, .covered = h->covered,
        .generation = h->generation, .seq = h->seq,
        .age_ns = h->horizon > 0 ? h->now - h->horizon : -1,
        .degraded = (h->flags & FLEETWIRE_HORIZON_DEGRADED) != 0,
        .replica = (h->flags & FLEETWIRE_HORIZON_REPLICA) != 0,
        .clock = h->clock, .now_ns = h->now,
    };
    if (ut->anchor.clock != h->clock || (!s->anchored && s->asked.raw > ut->anchor.local.raw)) {
        ut->anchor = (struct up_anchor){ h->clock, s->asked, h->now };
        ut->anchors++;
    }
    s->anchored = true;
    int64_t heard = monoclock_boot_ns();
    int64_t when = h->horizon == 0 ? -1 : up_placed(&ut->anchor, h->horizon, up_now());
    /* Our clocks ran apart since the anchor (a suspend): not heard, so a question anchors anew. */
    if (h->horizon != 0 && when < 0)
        return -1;
    ut->stream_heard = heard;
    ut->stream_proofs++;
    if (h->horizon == 0)
        return -1;
    return when < heard ? when : heard;
}

static bool on_frame(void *arg, const struct fleetwire_frame *f)
{
    struct stream *s = arg;
    struct up_table *ut = s->ut;
    char why[256];
    enum fleetwire_verdict v = fleetwire_track_frame(&s->track, f, why, sizeof why);
    if (v == FLEETWIRE_VIOLATION) {
        s->violation = true;
        snprintf(s->why, sizeof s->why, "the stream broke the protocol: %s", why);
        return false;
    }
    if (f->type == FLEETWIRE_HELLO) {
        struct table_ident id;
        const struct fleetwire_ident *w = &f->u.hello.ident;
        up_ident_of(w, &id);
        pthread_mutex_lock(&ut->mu);
        bool same = up_same_ident_locked(ut, &id, w->name, w->table, w->column, s->why,
                                         sizeof s->why);
        ut->heard_replica = (f->u.hello.flags & FLEETWIRE_HELLO_REPLICA) != 0;
        pthread_mutex_unlock(&ut->mu);
        if (!same || w->hash != FLEETWIRE_HASH) {
            if (same)
                snprintf(s->why, sizeof s->why, "its stream hashes keys by scheme %u, not %u",
                         w->hash, FLEETWIRE_HASH);
            s->mismatch = true;
            return false;
        }
        s->hello = true;
    }
    if (v == FLEETWIRE_SNAPSHOT) {
        s->lost = true;
        snprintf(s->why, sizeof s->why, "%s", why);
        /* A refusing HELLO is followed by its BYE, which says why: read on for it. */
        return f->type == FLEETWIRE_HELLO;
    }
    if (f->type == FLEETWIRE_BYE) {
        s->bye = true;
        snprintf(s->why, sizeof s->why, "the upstream ended the stream: %.200s", f->u.bye.reason);
        return false;
    }
    struct up_answer ans;
    int64_t when = -1;
    pthread_mutex_lock(&ut->mu);
    /* A load is fetching a snapshot: nothing past the seq it will be exact at is applied. */
    while (ut->paused && !atomic_load(&ut->u->base.stop))
        pthread_cond_wait(&ut->cv, &ut->mu);
    ut->frames++;
    /* Another snapshot went live since this stream was asked for: it resumes from that. */
    if (ut->m.version != s->version) {
        s->stale = true;
        pthread_mutex_unlock(&ut->mu);
        return false;
    }
    switch (f->type) {
    case FLEETWIRE_HELLO:
        if (s->track.at_commit && !at_commit_locked(s, &f->u.hello)) {
            pthread_mutex_unlock(&ut->mu);
            return false;
        }
        break;
    case FLEETWIRE_POSITION:
        /* Of the epoch the mirror covers, once every key up to its seq is applied (the track). */
        if (!ut->lost && f->u.position.epoch == ut->m.covered) {
            ut->m.commit_tli = f->u.position.tli;
            ut->m.commit_lsn = f->u.position.lsn;
        }
        break;
    case FLEETWIRE_ADDS:
        apply_locked(s, &f->u.adds);
        break;
    case FLEETWIRE_EPOCH:
        /* Keys keep coming and are kept, but no answer of the new epoch proves anything. */
        ut->heard_epoch = f->u.epoch.epoch;
        if (f->u.epoch.epoch != ut->m.covered)
            up_lost_locked(ut, "the upstream had a gap (a new epoch)");
        break;
    case FLEETWIRE_GENERATION:
        ut->heard_generation = f->u.generation.generation;
        break;
    case FLEETWIRE_VERIFIED:
        /*
         * Adaptive (issue 35): the upstream's verified-absent entries, in
         * the stream's order (table_adapt.h, "On a replica"); none while
         * the mirror is lost: the adds that would end them are not all
         * coming one by one.
         */
        if (!ut->lost)
            enter_verified(ut, &f->u.verified);
        break;
    case FLEETWIRE_HORIZON:
        when = horizon_locked(s, &f->u.horizon, &ans);
        break;
    default:
        break;
    }
    bool fresh_generation = f->type == FLEETWIRE_GENERATION
                            && f->u.generation.generation > ut->m.generation;
    pthread_mutex_unlock(&ut->mu);
    if (f->type == FLEETWIRE_HORIZON)
        up_heard(ut, s->url, &ans, when);
    /* Advised (deletes shed), not needed: a COPY's pace, min_rebuild_interval apart. */
    if (fresh_generation)
        table_want(ut->t, WANT_INTERVAL, NULL);
    return true;
}

static bool on_body(void *arg, const void *buf, size_t len)
{
    struct stream *s = arg;
    if (up_current(s->ut->u) != s->url) {
        snprintf(s->why, sizeof s->why, "another upstream is followed now");
        s->stale = true;
        return false;
    }
    char why[256];
    enum fleetwire_status st = fleetwire_feed(&s->dec, buf, len, on_frame, s, why, sizeof why);
    if (st != FLEETWIRE_OK && st != FLEETWIRE_STOPPED) {
        s->violation = true;
        snprintf(s->why, sizeof s->why, "the stream is unreadable: %s", why);
    }
    return st == FLEETWIRE_OK;
}

unsigned up_beat_ms(const struct config *cfg)
{
    double ms = cfg->silence_timeout * 1000 / 4;
    if (ms > up_horizon_ms(cfg))
        ms = up_horizon_ms(cfg);
    return ms < FLEETWIRE_BEAT_MIN_MS ? FLEETWIRE_BEAT_MIN_MS
         : ms > FLEETWIRE_BEAT_MAX_MS ? FLEETWIRE_BEAT_MAX_MS : (unsigned)ms;
}

/* One stream from the mirror's position at pos; s says how it ended. */
static void stream_once(struct up_table *ut, struct httpc *c, const struct up_mirror *pos,
                        struct stream *s, enum httpc_status *st, char *why, size_t whylen)
{
    struct upstream *u = ut->u;
    char suffix[160], url[CONFIG_UPSTREAM_URL_MAX + 256];
    snprintf(suffix, sizeof suffix, "?from=%016" PRIx64 ":%" PRIu64 "&beat=%u&horizon=1",
             pos->history, pos->seq, up_beat_ms(u->base.cfg));
    s->url = up_current(u);
    s->version = pos->version;
    fleetwire_track_init(&s->track, pos->history, pos->seq);
    if (pos->commit_lsn != 0) {
        /* Another upstream of the cluster may go on from there (fleetwire.h). */
        size_t n = strlen(suffix);
        snprintf(suffix + n, sizeof suffix - n, "&commit=%u:%016" PRIx64, pos->commit_tli,
                 pos->commit_lsn);
        fleetwire_track_by_commit(&s->track);
    }
    if (!up_url(u, s->url, table_name(ut->t), suffix, url, sizeof url)) {
        snprintf(why, whylen, "the URL is too long");
        *st = HTTPC_BAD_URL;
        return;
    }
    /* A silent upstream: heartbeats come 4 times per silence_timeout, so that means gone. */
    struct httpc_opts o = up_opts(u, "stream", (int)u->base.cfg->silence_timeout * 1000);
    o.head_ms = 10000;
    s->asked = up_now();
    *st = httpc_get(c, url, &o, on_head, on_body, s, why, whylen);
}

void *up_stream_main(void *arg)
{
    struct up_table *ut = arg;
    struct upstream *u = ut->u;
    struct httpc *c = httpc_new();
    struct stream *s = calloc(1, sizeof *s);
    uint64_t *hashes = malloc(FLEETWIRE_MAX_PAYLOAD / 8 * sizeof *hashes);
    unsigned backoff_ms = 100;
    char why[512];
    if (c == NULL || s == NULL || hashes == NULL)
        log_error(u->base.lg, "%s: method upstream: out of memory for the stream",
                  table_name(ut->t));
    while (c != NULL && s != NULL && hashes != NULL && !atomic_load(&u->base.stop)) {
        /* Nothing to resume until a snapshot of the upstream is live. */
        pthread_mutex_lock(&ut->mu);
        while ((!ut->m.have || ut->lost) && !atomic_load(&u->base.stop)) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 200000000;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            pthread_cond_timedwait(&ut->cv, &ut->mu, &ts);
        }
        struct up_mirror pos = ut->m;
        pthread_mutex_unlock(&ut->mu);
        if (atomic_load(&u->base.stop))
            break;
        *s = (struct stream){ .ut = ut, .hashes = hashes };
        if (!fleetwire_dec_init(&s->dec))
            break;
        enum httpc_status st;
        stream_once(ut, c, &pos, s, &st, why, sizeof why);
        fleetwire_dec_free(&s->dec);
        if (st == HTTPC_STOPPED)
            break;
        if (s->stale)
            continue;                       /* at once, from the new position */
        pthread_mutex_lock(&ut->mu);
        ut->resumes += s->track.resumed;
        ut->violations += s->violation;
        if (s->lost && ut->m.version == pos.version)
            up_lost_locked(ut, s->why);
        pthread_mutex_unlock(&ut->mu);
        if (s->lost)
            continue;                       /* wait for the snapshot above */
        if (st == HTTPC_OK && !s->bye && s->why[0] == '\0')
            snprintf(s->why, sizeof s->why, "%s",
                     s->dec.have > 0 ? "the stream ended inside a frame"
                                     : "the stream ended without a BYE");
        const char *reason = s->why[0] ? s->why : why;
        enum up_health h = s->mismatch ? UP_MISMATCH : s->violation ? UP_BROKEN : UP_FAILED;
        pthread_mutex_lock(&ut->mu);
        ut->stream_health = h;
        snprintf(ut->stream_why, sizeof ut->stream_why, "%.300s", reason);
        pthread_mutex_unlock(&ut->mu);
        up_report(u, s->url, h, reason);
        log_fields(u->base.lg, s->bye ? LOG_LVL_INFO : LOG_LVL_WARN, table_name(ut->t),
                   "upstream_stream", "%s: stream from %s ended: %s", table_name(ut->t),
                   u->urls[s->url], reason);
        /* A stream that got going resumes at once; one that failed backs off. */
        backoff_ms = s->hello && !s->violation ? 100 : backoff_ms * 2 > 5000 ? 5000 : backoff_ms * 2;
        follow_nap(&u->base.stop, backoff_ms);
    }
    free(hashes);
    free(s);
    httpc_free(c);
    return NULL;
}
