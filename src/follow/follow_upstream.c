/*
 * Method upstream: a replica follows another bloomguard's filter of the
 * same name ([sync] upstream) instead of PostgreSQL, so that a fleet of
 * sidecars costs the database the followers of a few upstreams.  Each
 * table loads its upstream's snapshot (upstream_load.c), then applies its
 * stream of keys in order (upstream_stream.c); this file runs the threads,
 * proves freshness through the chain, and chooses which upstream to follow.
 *
 * The horizon through the chain, proved by round trips, never by comparing
 * clocks.  Every up_horizon_ms a table asks its upstream GET
 * /replicate/NAME/horizon at time a (monoclock_boot_ns, this host's clock).  The
 * upstream answers, at some time t >= a, with its history X, its epoch E,
 * the epoch C its live filter covers, its ring's newest seq S, read after
 * its horizon H_u, and age = t - H_u (its clock, a difference only).  By
 * the upstream's own rule every row committed before H_u is in its live
 * filter, and every key its filter took before H_u was published has a
 * seq <= S (the tap runs after the filter holds a key, and H_u moves after
 * the adds that prove it).  Our filter holds the same rows when (1) it is
 * a snapshot of the upstream in history X taken while its live filter
 * covered E (C = E then, and still: no EPOCH since), plus (2) every key of
 * X up to S, applied in order: a later generation of the upstream, loaded
 * in the same epoch, holds no row that was not in the earlier one or
 * followed since (else its follower would have had a gap, a new epoch).
 * Then every row committed before H_u is in our filter, and since
 * H_u = t - age >= a - age, every row committed before a - age is:
 * table_advance(epoch, a - age), in the epoch our snapshot went live in.
 * Only a's and age's are used: the two hosts' clocks are never compared,
 * and a slow answer only makes the proof older.  An answer of another
 * history or epoch, or from an upstream that cannot prove its own horizon,
 * proves nothing: the horizon stays, and answers degrade after
 * max_staleness, as for any follower.  A replica of a replica proves the
 * same way, from its upstream's answers, which rest on its upstream's.
 * After a resume at a commit position on an upstream of another history,
 * (1) reads otherwise: upstream_stream.c's at_commit_locked.  Between
 * round trips, the stream's HORIZON frames prove the same, their horizon
 * placed on our clock by an anchor that a round trip makes (rates
 * compared, never readings): upstream_anchor.c; the round trips are then
 * only every UP_ANCHOR_S, to renew it.
 */
#include "upstream.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "token.h"

#define NS_PER_MS INT64_C(1000000)

struct up_table *up_table_of(struct upstream *u, const struct table *t)
{
    int i = follow_index(&u->base, t);
    return i >= 0 && (unsigned)i < atomic_load(&u->running) ? u->tables[i] : NULL;
}

unsigned up_current(struct upstream *u)
{
    pthread_mutex_lock(&u->base.mu);
    unsigned c = u->cur;
    pthread_mutex_unlock(&u->base.mu);
    return c;
}

bool up_url(const struct upstream *u, unsigned url, const char *name, const char *suffix,
            char *out, size_t cap)
{
    const char *base = u->urls[url];
    size_t len = strlen(base);
    int n = snprintf(out, cap, "%.*s/replicate/%s%s", (int)(len && base[len - 1] == '/' ? len - 1 : len),
                     base, name, suffix);
    return n > 0 && (size_t)n < cap;
}

struct httpc_opts up_opts(struct upstream *u, const char *what, int stall_ms)
{
    const struct config *c = u->base.cfg;
    return (struct httpc_opts){
        .ca_file = c->upstream_ca_file, .token = u->token, .what = what,
        .connect_ms = 5000, .stall_ms = stall_ms, .stop = &u->base.stop,
    };
}

void up_switch(struct upstream *u, unsigned to, const char *why)
{
    pthread_mutex_lock(&u->base.mu);
    unsigned from = u->cur;
    u->cur = to % u->n_urls;
    u->last_ok = monoclock_boot_ns();
    u->degraded_since = 0;
    u->mismatch = false;
    u->switches++;
    pthread_mutex_unlock(&u->base.mu);
    log_fields(u->base.lg, LOG_LVL_WARN, NULL, "upstream_switch",
               "upstream %s: %s; following %s now", u->urls[from], why, u->urls[to % u->n_urls]);
}

unsigned up_horizon_ms(const struct config *cfg)
{
    double ms = cfg->max_staleness > 0 ? cfg->max_staleness * 1000 / 4 : 1000;
    return ms < UP_HORIZON_MIN_MS ? UP_HORIZON_MIN_MS
         : ms > UP_HORIZON_MAX_MS ? UP_HORIZON_MAX_MS : (unsigned)ms;
}

/* How long the upstream followed may fail, or be degraded, before the others are asked. */
static int64_t patience(const struct upstream *u)
{
    int64_t p = (int64_t)(u->base.cfg->max_staleness * 1e9);
    return p < INT64_C(1000000000) ? INT64_C(1000000000) : p;
}

void up_report(struct upstream *u, unsigned url, enum up_health h, const char *why)
{
    char err[320];
    int64_t now = monoclock_boot_ns();
    pthread_mutex_lock(&u->base.mu);
    if (url != u->cur) {
        pthread_mutex_unlock(&u->base.mu);
        return;
    }
    switch (h) {
    case UP_OK:
        /* (A horizon answer says nothing of the identity: mismatch stays until a switch.) */
        u->last_ok = now;
        u->degraded_since = 0;
        follow_set_state_locked(&u->base, FOLLOW_CONNECTED, NULL);
        break;
    case UP_DEGRADED:
        u->last_ok = now;
        if (u->degraded_since == 0)
            u->degraded_since = now;
        /* The public part (before the first colon) is what /readyz shows: no URL in it. */
        snprintf(err, sizeof err, "the upstream is degraded: %s: %s", u->urls[url], why);
        follow_set_state_locked(&u->base, FOLLOW_CONNECTED, err);
        break;
    case UP_FAILED:
    case UP_LAGGING:
    case UP_BROKEN:
    case UP_MISMATCH:
        u->mismatch = u->mismatch || h == UP_MISMATCH;
        snprintf(err, sizeof err, "%s: %s", h == UP_MISMATCH ? "the upstream serves another table"
                 : h == UP_LAGGING ? "the upstream's stream lags its answers"
                 : h == UP_BROKEN ? "the upstream's stream is broken"
                 : "the upstream does not answer", why);
        follow_set_state_locked(&u->base, u->base.state == FOLLOW_CONNECTING
                                ? FOLLOW_CONNECTING : FOLLOW_RECONNECTING, err);
        break;
    }
    pthread_mutex_unlock(&u->base.mu);
}

void up_lost_locked(struct up_table *ut, const char *why)
{
    ut->n_proofs = 0;
    /* Rows may be missing: the filter holds no commit position any more. */
    ut->m.commit_tli = 0;
    ut->m.commit_lsn = 0;
    if (ut->lost)
        return;
    ut->lost = true;
    snprintf(ut->lost_why, sizeof ut->lost_why, "%s", why);
    /* Rows may be missing from here on: the horizon waits for a snapshot that covers them. */
    table_gap(ut->t, WANT_NONE);
    log_fields(ut->u->base.lg, LOG_LVL_WARN, table_name(ut->t), "upstream_lost",
               "%s: %s; waiting for a snapshot of the upstream", table_name(ut->t), why);
}

void up_proofs_locked(struct up_table *ut)
{
    unsigned keep = 0;
    for (unsigned i = 0; i < ut->n_proofs; i++) {
        if (ut->proofs[i].seq <= ut->m.seq)
            table_advance(ut->t, ut->m.epoch, ut->proofs[i].when);
        else
            ut->proofs[keep++] = ut->proofs[i];
    }
    ut->n_proofs = keep;
}

/* ---------------------------------------------------------- the horizon -- */

struct body {
    char buf[4096];
    size_t len;
};

static bool take_body(void *arg, const void *buf, size_t len)
{
    struct body *b = arg;
    if (len > sizeof b->buf - 1 - b->len)
        return false;
    memcpy(b->buf + b->len, buf, len);
    b->len += len;
    return true;
}

static bool parse_answer(const struct body *b, struct up_answer *a)
{
    json_t *j = json_loadb(b->buf, b->len, 0, NULL);
    const char *hist = json_string_value(json_object_get(j, "history"));
    json_t *age = json_object_get(j, "age_ns");
    bool ok = j != NULL && hist != NULL && json_is_integer(json_object_get(j, "seq"))
              && (json_is_integer(age) || json_is_null(age));
    if (ok) {
        char *end;
        a->history = strtoull(hist, &end, 16);
        a->epoch = (uint64_t)json_integer_value(json_object_get(j, "epoch"));
        a->covered = (uint64_t)json_integer_value(json_object_get(j, "covered"));
        a->generation = (uint64_t)json_integer_value(json_object_get(j, "generation"));
        a->seq = (uint64_t)json_integer_value(json_object_get(j, "seq"));
        a->age_ns = json_is_integer(age) ? (int64_t)json_integer_value(age) : -1;
        a->degraded = json_is_true(json_object_get(j, "degraded"));
        a->replica = json_is_true(json_object_get(j, "replica"));
        /* h-horizon's: an older upstream says neither: no anchor from it. */
        const char *clock = json_string_value(json_object_get(j, "clock"));
        json_t *now = json_object_get(j, "now_ns");
        a->clock = clock != NULL && json_is_integer(now) ? strtoull(clock, NULL, 16) : 0;
        a->now_ns = a->clock != 0 ? (int64_t)json_integer_value(now) : 0;
        ok = *end == '\0' && a->history != 0 && (a->age_ns >= -1);
    }
    json_decref(j);
    return ok;
}

/* Ask upstream url how fresh its t is, within ms; false with why if it did not say. */
static bool ask(struct upstream *u, struct httpc *c, unsigned url, struct table *t,
                struct up_answer *a, char *why, size_t whylen, int ms)
{
    char target[CONFIG_UPSTREAM_URL_MAX + 128];
    static __thread struct body b;
    struct httpc_opts o = up_opts(u, "horizon", ms);
    o.head_ms = ms;
    if (o.connect_ms > ms)
        o.connect_ms = ms;
    b.len = 0;
    if (!up_url(u, url, table_name(t), "/horizon", target, sizeof target)) {
        snprintf(why, whylen, "the URL is too long");
        return false;
    }
    if (httpc_get(c, target, &o, NULL, take_body, &b, why, whylen) != HTTPC_OK)
        return false;
    if (!parse_answer(&b, a)) {
        snprintf(why, whylen, "%s: not a horizon answer", target);
        return false;
    }
    return true;
}

/*
 * One answer, proving when (see the top of this file): the proof, now or
 * once the stream has delivered its seq; and the snapshot to ask for when
 * the mirror is lost or of an older epoch, once the upstream covers its
 * own.
 */
static bool take_answer(struct up_table *ut, const struct up_answer *ans, int64_t when,
                        uint64_t *behind, enum up_health *health, char *why, size_t whylen)
{
    pthread_mutex_lock(&ut->mu);
    ut->heard_history = ans->history;
    ut->heard_seq = ans->seq;
    ut->heard_epoch = ans->epoch;
    ut->heard_covered = ans->covered;
    ut->heard_generation = ans->generation;
    ut->heard_replica = ans->replica;
    const struct up_mirror *m = &ut->m;
    bool ready = ans->covered == ans->epoch && ans->age_ns >= 0 && when >= 0;
    bool want = false;
    if (m->have && !ut->lost && ans->history == m->history && ans->epoch == m->covered && ready) {
        struct up_proof p = { ans->seq, when };
        if (m->seq >= p.seq) {
            table_advance(ut->t, m->epoch, p.when);
        } else {
            if (ut->n_proofs == UP_PROOFS) {
                memmove(ut->proofs, ut->proofs + 1, (UP_PROOFS - 1) * sizeof *ut->proofs);
                ut->n_proofs--;
            }
            ut->proofs[ut->n_proofs++] = p;
        }
    } else if (m->have && ans->history != m->history && !ut->lost && m->commit_lsn == 0) {
        /* (With a commit position the stream asks first: its HELLO says whether it can go on.) */
        up_lost_locked(ut, "the upstream is of another history (restarted, or another one)");
    } else if (m->have && ans->history == m->history && ans->epoch != m->covered && !ut->lost) {
        up_lost_locked(ut, "the upstream had a gap (a new epoch)");
    }
    /* (Before the first snapshot the table wants its start load already.) */
    want = ut->lost && ready;
    /*
     * A stream that lags its upstream's answers (trickling, stuck) proves
     * nothing: after max_staleness it counts as a failure of the upstream.
     */
    int64_t now = monoclock_boot_ns(), stale = (int64_t)(ut->u->base.cfg->max_staleness * 1e9);
    bool lagging = m->have && !ut->lost && ans->history == m->history && ans->seq > m->seq;
    if (!lagging)
        ut->behind_since = 0;
    else if (ut->behind_since == 0)
        ut->behind_since = now;
    *behind = lagging ? ans->seq - m->seq : 0;
    bool late = lagging && now - ut->behind_since > (stale > INT64_C(1000000000) ? stale
                                                     : INT64_C(1000000000));
    /* Why it lags, when a stream said so: that is the reason /readyz should give. */
    *health = ut->stream_health == UP_OK ? UP_LAGGING : ut->stream_health;
    snprintf(why, whylen, "%s", ut->stream_why);
    pthread_mutex_unlock(&ut->mu);
    /* Coalesces with a pending one; a catch-up want is not held back by min_rebuild_interval. */
    if (want)
        table_want(ut->t, WANT_RECONNECT, NULL);
    return late;
}

/*
 * The choice of upstream, made by the first table's horizon thread: when
 * the one followed serves another table, or has not answered (or kept its
 * stream up) for max_staleness, or has been degraded that long, ask the
 * others (at most every few seconds) and follow the first that answers
 * fresh.  Only to one that answers: under a load that slows every
 * upstream, switching would cost a snapshot and gain nothing.
 */
static void maybe_leave(struct upstream *u, struct httpc *c, struct table *t)
{
    int64_t now = monoclock_boot_ns(), p = patience(u);
    pthread_mutex_lock(&u->base.mu);
    unsigned cur = u->cur;
    const char *why = u->mismatch ? "it serves another table"
                    : now - u->last_ok > p ? "no answer for max_staleness"
                    : u->degraded_since != 0 && now - u->degraded_since > p ? "it is degraded"
                    : NULL;
    bool look = u->n_urls > 1 && why != NULL && now >= u->next_probe;
    if (look)
        u->next_probe = now + 5 * INT64_C(1000000000);
    pthread_mutex_unlock(&u->base.mu);
    for (unsigned k = 1; look && k < u->n_urls && !atomic_load(&u->base.stop); k++) {
        unsigned i = (cur + k) % u->n_urls;
        struct up_answer a;
        char err[512], text[160];
        if (ask(u, c, i, t, &a, err, sizeof err, 2000) && !a.degraded && a.age_ns >= 0
            && a.covered == a.epoch) {
            snprintf(text, sizeof text, "%s, and %s answers fresh", why, u->urls[i]);
            up_switch(u, i, text);
            return;
        }
    }
}

void up_heard(struct up_table *ut, unsigned url, const struct up_answer *ans, int64_t when)
{
    struct upstream *u = ut->u;
    uint64_t behind = 0;
    enum up_health health;
    char why[512], stream_why[320];
    if (take_answer(ut, ans, when, &behind, &health, stream_why, sizeof stream_why)) {
        snprintf(why, sizeof why, "%s: %llu keys behind for max_staleness%s%s", u->urls[url],
                 (unsigned long long)behind, stream_why[0] ? "; " : "", stream_why);
        up_report(u, url, health, why);
    } else if (ans->degraded || ans->age_ns < 0)
        up_report(u, url, UP_DEGRADED, ans->age_ns < 0 ? "it has no horizon (loading)"
                                                       : "its own horizon is stale");
    else
        up_report(u, url, UP_OK, NULL);
}

void *up_horizon_main(void *arg)
{
    struct up_table *ut = arg;
    struct upstream *u = ut->u;
    struct httpc *c = httpc_new();
    char why[512];
    int64_t next_standby = 0;
    while (c != NULL && !atomic_load(&u->base.stop)) {
        struct up_when at = up_now();
        int64_t a = at.boot;
        unsigned url = up_current(u);
        struct up_answer ans;
        if (u->token_err[0] != '\0') {
            up_report(u, url, UP_FAILED, u->token_err);
        } else if (up_stream_proves(ut, a)) {
            /* The stream's frames proved it (up_heard): no question. */
        } else if (ask(u, c, url, ut->t, &ans, why, sizeof why, 2000)) {
            up_reanchor(ut, &ans, at, up_now());
            up_heard(ut, url, &ans, ans.age_ns >= 0 ? a - ans.age_ns : -1);
        } else {
            up_report(u, url, UP_FAILED, why);
        }
        if (ut == u->tables[0])
            maybe_leave(u, c, ut->t);
        up_forward(ut, c, url);     /* issue 35: hot "maybe" IDs passed up */
        /*
         * The others, now and then (briefly: the next proof waits): a
         * replica asked keeps its ring, so this one can resume on it.
         */
        if (u->n_urls > 1 && a >= next_standby) {
            unsigned cur = up_current(u);
            struct up_answer other;
            char err[512];
            for (unsigned i = 0; i < u->n_urls && !atomic_load(&u->base.stop); i++)
                if (i != cur)
                    (void)ask(u, c, i, ut->t, &other, err, sizeof err, UP_STANDBY_MS);
            next_standby = a + UP_STANDBY_S * INT64_C(1000000000);
        }
        int64_t left = a + up_horizon_ms(u->base.cfg) * NS_PER_MS - monoclock_boot_ns();
        if (left > 0)
            up_nap(u, (unsigned)(left / NS_PER_MS));
    }
    httpc_free(c);
    return NULL;
}

/* ----------------------------------------------------------- the method -- */

static void up_init(struct follower *f)
{
    struct upstream *u = (struct upstream *)f;
    pthread_mutex_init(&u->nap_mu, NULL);
    monoclock_cond_init(&u->nap_cv);
    const char *p = f->cfg->upstream;
    for (p += strspn(p, " \t"); *p != '\0' && u->n_urls < CONFIG_MAX_UPSTREAMS;
         p += strspn(p, " \t")) {
        size_t len = strcspn(p, " \t");
        snprintf(u->urls[u->n_urls++], sizeof u->urls[0], "%.*s", (int)len, p);
        p += len;
    }
    u->last_ok = monoclock_boot_ns();
    if (f->cfg->upstream_token_file[0] != '\0') {
        char why[200];
        if (token_load(f->cfg->upstream_token_file, NULL, &u->token, NULL, 0, why, sizeof why)
            != TOKEN_LOADED)
            snprintf(u->token_err, sizeof u->token_err, "[sync] upstream_token_file: %s", why);
    }
}

static void up_fini(struct follower *f)
{
    struct upstream *u = (struct upstream *)f;
    for (unsigned i = 0; i < atomic_load(&u->running); i++) {
        struct up_table *ut = u->tables[i];
        fleetjournal_free(ut->posts);
        pthread_mutex_destroy(&ut->mu);
        pthread_cond_destroy(&ut->cv);
        free(ut);
    }
    token_free(u->token);
    pthread_cond_destroy(&u->nap_cv);
    pthread_mutex_destroy(&u->nap_mu);
}

/* Table i's state, its journal sized by its pending_limit, and its threads; false if not. */
static bool up_start_table(struct upstream *u, unsigned i)
{
    struct up_table *ut = calloc(1, sizeof *ut);
    if (ut == NULL)
        return false;
    ut->u = u;
    ut->t = u->base.tables[i];
    ut->posts = fleetjournal_new(table_config(ut->t)->pending_limit);
    pthread_mutex_init(&ut->mu, NULL);
    pthread_cond_init(&ut->cv, NULL);
    /* A snapshot of our own put back at start pins the identity it was of. */
    table_ident(ut->t, &ut->ident);
    ut->pinned = ut->ident.relid != 0;
    u->tables[i] = ut;
    /* The slot first, then the count that shows it (fini frees what it counts). */
    atomic_store(&u->running, i + 1);
    ut->stream_started = ut->posts != NULL
                         && pthread_create(&ut->stream_thread, NULL, up_stream_main, ut) == 0;
    ut->horizon_started = ut->stream_started
                          && pthread_create(&ut->horizon_thread, NULL, up_horizon_main, ut) == 0;
    return ut->horizon_started;
}

static void up_wake_all(struct upstream *u)
{
    for (unsigned i = 0; i < atomic_load(&u->running); i++) {
        pthread_mutex_lock(&u->tables[i]->mu);
        pthread_cond_broadcast(&u->tables[i]->cv);
        pthread_mutex_unlock(&u->tables[i]->mu);
    }
}

static void up_run(struct follower *f)
{
    struct upstream *u = (struct upstream *)f;
    bool failed = false;
    if (u->token_err[0] != '\0')
        log_error(f->lg, "method upstream: %s", u->token_err);
    while (!atomic_load(&f->stop)) {
        unsigned n = follow_count(f), i;
        while (!failed && (i = atomic_load(&u->running)) < n)
            if (!up_start_table(u, i)) {
                log_error(f->lg, "method upstream: cannot start the threads of %s",
                          table_name(f->tables[i]));
                failed = true;
            }
        up_nap(u, 1000);            /* (a reload's new tables: started within a second) */
    }
    up_wake_all(u);
    for (unsigned i = 0; i < atomic_load(&u->running); i++) {
        struct up_table *ut = u->tables[i];
        if (ut->stream_started)
            pthread_join(ut->stream_thread, NULL);
        if (ut->horizon_started)
            pthread_join(ut->horizon_thread, NULL);
    }
}

static bool up_ready(struct follower *f, struct table *t)
{
    /* The load waits for the table's threads: its install resumes their stream. */
    return up_table_of((struct upstream *)f, t) != NULL;
}

static bool up_ticket(struct follower *f, struct table *t, PGconn *conn, struct follow_ticket *tk,
                      char *err, size_t errlen)
{
    (void)f, (void)t, (void)conn, (void)tk;
    snprintf(err, errlen, "method upstream loads its upstream's snapshot, never a COPY");
    return false;
}

static void up_status_locked(struct follower *f, struct follow_status *out)
{
    struct upstream *u = (struct upstream *)f;
    snprintf(out->upstream, sizeof out->upstream, "%s", u->urls[u->cur]);
    out->upstream_switches = u->switches;
}

static void up_table_status(struct follower *f, struct table *t, struct follow_status *out)
{
    struct up_table *ut = up_table_of((struct upstream *)f, t);
    if (ut == NULL)
        return;
    pthread_mutex_lock(&ut->mu);
    out->upstream_replica = ut->heard_replica;
    out->mirror = ut->m.have;
    out->mirror_history = ut->m.history;
    out->mirror_seq = ut->m.seq;
    out->heard_seq = ut->heard_seq;
    out->mirror_snapshots = ut->snapshots;
    out->mirror_resumes = ut->resumes;
    if (ut->m.commit_lsn != 0)
        snprintf(out->mirror_commit, sizeof out->mirror_commit, "%u:%016" PRIx64,
                 ut->m.commit_tli, ut->m.commit_lsn);
    out->mirror_violations = ut->violations;
    out->mirror_keys = ut->keys;
    snprintf(out->mirror_lost, sizeof out->mirror_lost, "%s", ut->lost ? ut->lost_why : "");
    pthread_mutex_unlock(&ut->mu);
}

static bool up_mirror_of(struct follower *f, struct table *t, struct follow_mirror *out)
{
    struct up_table *ut = up_table_of((struct upstream *)f, t);
    if (ut == NULL)
        return false;
    pthread_mutex_lock(&ut->mu);
    bool have = ut->m.have;
    if (have) {
        /* Our own gap (a stream broken, a key missed) is repaired by a snapshot: none trusted till then. */
        bool whole = !ut->lost && table_covered(t)
                     && (ut->heard_history == 0 || ut->heard_history == ut->m.history);
        *out = (struct follow_mirror){
            .history = ut->m.history, .seq = ut->m.seq,
            .epoch = ut->heard_epoch != 0 ? ut->heard_epoch : ut->m.covered,
            .covered = whole ? ut->m.covered : 0, .generation = ut->m.generation,
        };
    }
    pthread_mutex_unlock(&ut->mu);
    return have;
}

const struct follow_ops follow_upstream_ops = {
    .method = SYNC_UPSTREAM,
    .fresh_positions = true,
    .size = sizeof(struct upstream),
    .init = up_init,
    .fini = up_fini,
    .interrupt = up_interrupt,
    .run = up_run,
    .ready = up_ready,
    .ticket = up_ticket,
    .load = up_load,
    .status_locked = up_status_locked,
    .table_status = up_table_status,
    .mirror = up_mirror_of,
};
