/*
 * The guarded table as followers and the scheduler see it: rows and counts
 * from the change stream, gaps and the epochs they start, the horizon's
 * advance, and the wants that become load jobs (table.h has the rules).
 */
#include "table_int.h"
#include "answer.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------- from followers -- */

void table_set_tap(struct table *t, const struct table_tap *tap)
{
    t->tap = *tap;
}

void table_tap_changed(struct table *t)
{
    if (t->tap.changed)
        t->tap.changed(t->tap.ctx);
}

void table_note_commit(struct table *t, uint32_t tli, uint64_t lsn)
{
    if (t->tap.committed)
        t->tap.committed(t->tap.ctx, tli, lsn);
}

void table_posted(struct table *t, const uint64_t *hs, size_t n, size_t inserted)
{
    table_check_saturated(t);
    if (inserted == n && n > 0 && t->tap.added)
        t->tap.added(t->tap.ctx, hs, n, (uint32_t)t->fc->pending_ttl, NULL);
}

bool table_add_row(struct table *t, const void *id, size_t len)
{
    char buf[KEY_STACK], *heap;
    const char *key;
    size_t klen;
    /*
     * A row's text is a value of the column: its key, or (a type whose key
     * cannot be known) the text itself, which only "maybe" answers read.
     */
    if (table_key_of(table_spell(t), id, len, buf, &heap, &key, &klen) != SPELL_KEY) {
        key = id;
        klen = len;
    }
    uint64_t h = filter_hash(key, klen);
    bool ok = guard_add_hash(t->g, h);
    free(heap);
    table_added(t, h);
    if (ok && t->tap.added)
        t->tap.added(t->tap.ctx, &h, 1, 0, NULL);
    return ok;
}

bool table_add_hashes(struct table *t, const uint64_t *hashes, size_t n, uint32_t ttl,
                      const struct table_at *at)
{
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) {
        ok = guard_add_hash(t->g, hashes[i]);
        table_added(t, hashes[i]);
    }
    if (n > 0)
        table_check_saturated(t);
    if (ok && n > 0 && t->tap.added)
        t->tap.added(t->tap.ctx, hashes, n, ttl, at);
    return ok;
}

/*
 * Degraded time in [accounted, now] under horizon h, by the rule lookups
 * apply (answer.h, table_stale): a hold, then the horizon; a table not
 * loaded yet answers "not ready", which is not degraded.  Saturation is
 * read as it is now: it is counted from the last call, at most a probe
 * interval early.  Caller holds mu.
 */
void table_account_locked(struct table *t, int64_t h, int64_t now)
{
    if (now <= t->accounted)
        return;
    if (t->loaded) {
        /* A hold (table_hold_absent) covers the start of the stretch, the horizon the rest. */
        int64_t held = atomic_load_explicit(&t->held_until, memory_order_relaxed);
        int64_t from = held > t->accounted ? (held < now ? held : now) : t->accounted;
        t->degraded_ns += atomic_load_explicit(&t->saturated, memory_order_relaxed)
            ? now - t->accounted
            : (from - t->accounted) + answer_degraded_ns(from, now, h, t->max_stale_ns);
    }
    t->accounted = now;
}

/* Caller holds mu; returns whether the scheduler must be woken. */
static bool want_locked(struct table *t, enum table_want why, bool *coalesced)
{
    bool pending = t->wanted > t->started;
    if (!pending) {
        t->wanted = t->started + 1;
        t->want = why;
        t->st.requested_id = t->wanted;
    } else if (table_want_may_catch_up(t->want) && !table_want_may_catch_up(why)) {
        /* A COPY joins a pending catch-up: the job becomes a COPY. */
        t->want = why;
    }
    if (coalesced)
        *coalesced = pending;
    return !pending;
}

static void wake(struct table *t, bool needed)
{
    if (needed && t->wake)
        t->wake(t->wake_arg);
}

void table_count_rows(struct table *t, uint64_t added, uint64_t deleted)
{
    bool w = false;
    if (added > 0)
        table_check_saturated(t);
    pthread_mutex_lock(&t->mu);
    t->st.notifications += added;
    t->st.deletes += deleted;
    uint64_t limit = t->fc->rebuild_after_deletes;
    if (limit > 0 && deleted > 0 && t->st.deletes >= limit) {
        t->st.deletes = 0;
        w = want_locked(t, WANT_DELETES, NULL);
    }
    pthread_mutex_unlock(&t->mu);
    wake(t, w);
}

void table_note_truncate(struct table *t)
{
    bool w = false;
    pthread_mutex_lock(&t->mu);
    if (t->fc->rebuild_after_deletes > 0) {
        t->st.deletes = 0;
        w = want_locked(t, WANT_DELETES, NULL);
    }
    pthread_mutex_unlock(&t->mu);
    wake(t, w);
}

void table_count_long_id(struct table *t)
{
    pthread_mutex_lock(&t->mu);
    t->st.long_ids++;
    pthread_mutex_unlock(&t->mu);
}

uint64_t table_epoch(struct table *t)
{
    pthread_mutex_lock(&t->mu);
    uint64_t e = t->epoch;
    pthread_mutex_unlock(&t->mu);
    return e;
}

void table_gap(struct table *t, enum table_want why)
{
    pthread_mutex_lock(&t->mu);
    t->epoch++;
    bool w = why != WANT_NONE && want_locked(t, why, NULL);
    pthread_mutex_unlock(&t->mu);
    table_tap_changed(t);
    wake(t, w);
}

void table_proof(struct table *t, struct table_proof *out)
{
    pthread_mutex_lock(&t->mu);
    out->horizon = atomic_load(&t->horizon);
    out->epoch = t->epoch;
    out->covered = t->covered;
    out->generation = t->generation;
    out->loaded = t->loaded;
    pthread_mutex_unlock(&t->mu);
    out->saturated = atomic_load(&t->saturated);
}

/* Caller holds mu. */
bool table_advance_locked(struct table *t, uint64_t epoch, int64_t when)
{
    if (t->covered != t->epoch || epoch != t->epoch)
        return false;
    if (atomic_load(&t->vet) != TABLE_VET_NONE) {
        /* Proved, but held back until the filter is believed (table_vetted publishes it). */
        if (when > t->vet_horizon)
            t->vet_horizon = when;
        return true;
    }
    int64_t h = atomic_load(&t->horizon);
    if (when <= h)
        return true;
    table_account_locked(t, h, monoclock_boot_ns());
    atomic_store_explicit(&t->horizon, when, memory_order_release);
    if (t->pub.horizon)
        t->pub.horizon(t->pub.ctx, when);
    return true;
}

bool table_advance(struct table *t, uint64_t epoch, int64_t when)
{
    pthread_mutex_lock(&t->mu);
    bool ok = !t->schema_off && table_advance_locked(t, epoch, when);
    pthread_mutex_unlock(&t->mu);
    return ok;
}

bool table_covered(struct table *t)
{
    pthread_mutex_lock(&t->mu);
    bool c = t->loaded && t->covered == t->epoch;
    pthread_mutex_unlock(&t->mu);
    return c;
}

/* ------------------------------------------------------------ schema -- */

void table_schema_eval_locked(struct table *t)
{
    const struct filter_config *fc = t->fc;
    bool unlike = t->schema_seen_set && t->loaded
                  && strcmp(t->schema_seen, t->ident.shape) != 0;
    t->schema_off = t->loaded && (unlike || t->schema_uncovered[0] != '\0');
    if (!t->schema_off)
        t->st.schema_why[0] = '\0';
    else if (t->schema_uncovered[0] != '\0')
        snprintf(t->st.schema_why, sizeof t->st.schema_why, "%s", t->schema_uncovered);
    else if (t->schema_seen[0] == '\0')
        snprintf(t->st.schema_why, sizeof t->st.schema_why, "%s.%s is gone (a rename or a drop): "
                 "degraded until it is back and copied", fc->table, fc->column);
    else
        snprintf(t->st.schema_why, sizeof t->st.schema_why, "%s.%s changed since the filter's "
                 "load (a rename, a new type, a child table or partition): degraded until "
                 "a COPY", fc->table, fc->column);
}

enum table_schema_verdict table_schema(struct table *t, const char *shape, const char *uncovered)
{
    const char *unc = uncovered ? uncovered : "";
    pthread_mutex_lock(&t->mu);
    if (shape == NULL)
        shape = t->schema_seen_set ? t->schema_seen : t->ident.shape;
    bool changed = t->schema_seen_set && (strcmp(t->schema_seen, shape) != 0
                                          || (t->schema_uncovered[0] != '\0') != (unc[0] != '\0'));
    t->schema_seen_set = true;
    if (shape != t->schema_seen)
        snprintf(t->schema_seen, sizeof t->schema_seen, "%s", shape);
    snprintf(t->schema_uncovered, sizeof t->schema_uncovered, "%s", unc);
    if (!t->loaded) {
        /* The first load reads the shape itself; the next check compares with this one. */
        table_schema_eval_locked(t);
        pthread_mutex_unlock(&t->mu);
        return TABLE_SCHEMA_SAME;
    }
    /* A restored snapshot's metadata has no shape: its catch-up checked the column's identity. */
    if (t->ident.shape[0] == '\0')
        snprintf(t->ident.shape, sizeof t->ident.shape, "%s", shape);
    table_schema_eval_locked(t);
    bool unlike = strcmp(shape, t->ident.shape) != 0;
    /*
     * A COPY identifies the column before its ticket and its snapshot: one
     * that did so just before the change went live with the old shape and
     * a filter of the new one, and nothing else would ask for another.
     */
    bool pending = t->wanted > t->started || t->st.running;
    bool gap = changed || (unlike && unc[0] == '\0' && !pending);
    bool w = false;
    if (gap) {
        t->epoch++;
        w = want_locked(t, WANT_SCHEMA, NULL);
    }
    enum table_schema_verdict v = changed ? TABLE_SCHEMA_CHANGED
                                  : t->schema_off ? TABLE_SCHEMA_OFF : TABLE_SCHEMA_SAME;
    pthread_mutex_unlock(&t->mu);
    wake(t, w);
    return v;
}

/* ------------------------------------------------------------- wants -- */

uint64_t table_want(struct table *t, enum table_want why, bool *coalesced)
{
    pthread_mutex_lock(&t->mu);
    bool w = want_locked(t, why, coalesced);
    uint64_t id = t->wanted;
    pthread_mutex_unlock(&t->mu);
    wake(t, w);
    return id;
}

/* Nanoseconds min_rebuild_interval still holds a COPY back.  Caller holds mu. */
int64_t table_hold_back_locked(const struct table *t, int64_t now)
{
    /* A refused peer's filter is known bad: its COPY is not spaced out from the catch-up. */
    if (!t->loaded || t->last_end == 0 || atomic_load(&t->vet) == TABLE_VET_REFUSED)
        return 0;
    int64_t until = t->last_end + (int64_t)t->min_interval * NS_PER_S;
    return until > now ? until - now : 0;
}

/* Whether the pending want may be served by a catch-up.  Caller holds mu. */
bool table_may_catch_up_locked(const struct table *t)
{
    /* A refused peer's filter is replaced, never brought up to date. */
    return table_want_may_catch_up(t->want) && t->loaded && t->position[0] != '\0'
           && atomic_load(&t->vet) != TABLE_VET_REFUSED;
}

enum table_vet table_vet(struct table *t, int64_t *proved)
{
    pthread_mutex_lock(&t->mu);
    enum table_vet v = (enum table_vet)atomic_load(&t->vet);
    if (proved != NULL)
        *proved = v == TABLE_VET_NONE ? 0 : t->vet_horizon;
    pthread_mutex_unlock(&t->mu);
    return v;
}

void table_vet_begin(struct table *t)
{
    pthread_mutex_lock(&t->mu);
    atomic_store_explicit(&t->vet, TABLE_VET_PENDING, memory_order_release);
    t->vet_horizon = 0;
    table_tell_unsure_locked(t);
    snprintf(t->st.peer_check, sizeof t->st.peer_check, "pending");
    pthread_mutex_unlock(&t->mu);
}

void table_vetted(struct table *t, bool passed)
{
    bool w = false;
    pthread_mutex_lock(&t->mu);
    if (atomic_load(&t->vet) == TABLE_VET_PENDING) {
        /* Nothing of a peer's went live: nothing was checked either. */
        bool any = strcmp(t->st.restored_from, "peer") == 0;
        snprintf(t->st.peer_check, sizeof t->st.peer_check, "%s",
                 !any ? "" : passed ? "passed" : "refused");
        int64_t h = t->vet_horizon;
        t->vet_horizon = 0;
        if (passed) {
            atomic_store_explicit(&t->vet, TABLE_VET_NONE, memory_order_release);
            table_tell_unsure_locked(t);
            /* What the catch-ups proved meanwhile, if no gap has opened since. */
            if (h > 0)
                table_advance_locked(t, t->epoch, h);
        } else {
            atomic_store_explicit(&t->vet, TABLE_VET_REFUSED, memory_order_release);
            t->position[0] = '\0';
            w = want_locked(t, WANT_POSITION, NULL);
        }
    }
    pthread_mutex_unlock(&t->mu);
    wake(t, w);
}

bool table_take_job(struct table *t, int64_t now, struct table_job *job, int64_t *wait_ns)
{
    pthread_mutex_lock(&t->mu);
    if (t->wanted <= t->started) {
        pthread_mutex_unlock(&t->mu);
        return false;
    }
    bool catchup = table_may_catch_up_locked(t);
    /* Nothing (a /reload loop, forged deletes) may copy a table back to back. */
    int64_t until = t->retry_at;
    int64_t hold = catchup ? 0 : table_hold_back_locked(t, now);
    if (hold > 0 && now + hold > until)
        until = now + hold;
    if (until > now) {
        if (until - now < *wait_ns)
            *wait_ns = until - now;
        pthread_mutex_unlock(&t->mu);
        return false;
    }
    job->id = t->started = t->wanted;
    job->why = t->job_why = t->want;
    job->may_catch_up = catchup;
    job->first = !t->loaded;
    t->st.running = true;
    t->st.running_id = job->id;
    t->st.running_rows = 0;
    t->st.running_since = time(NULL);
    snprintf(t->st.running_reason, sizeof t->st.running_reason, "%s", table_want_name(job->why));
    pthread_mutex_unlock(&t->mu);
    return true;
}

void table_job_progress(struct table *t, uint64_t rows)
{
    pthread_mutex_lock(&t->mu);
    t->st.running_rows = rows;
    pthread_mutex_unlock(&t->mu);
}

void table_job_done(struct table *t, const struct table_job *job, bool ok, const char *kind,
                    uint64_t rows, double seconds, unsigned retry_ms)
{
    int64_t now = monoclock_boot_ns();
    pthread_mutex_lock(&t->mu);
    t->st.running = false;
    t->st.attempted = true;
    t->last_end = now;
    if (ok) {
        t->loaded = true;
        t->retry_at = 0;
        t->st.completed_id = job->id;
        t->st.rebuilds_ok++;
        t->st.rebuild_seconds_sum += seconds;
        t->st.last_rows = rows;
        t->st.last_seconds = seconds;
        t->st.last_finished = time(NULL);
        t->st.last_error[0] = '\0';
        t->st.last_sqlstate[0] = '\0';
        if (strcmp(kind, "copy") == 0)
            t->st.deletes = 0;
        snprintf(t->st.last_reason, sizeof t->st.last_reason, "%s", table_want_name(job->why));
        snprintf(t->st.last_kind, sizeof t->st.last_kind, "%s", kind);
    } else {
        t->st.rebuilds_failed++;
        /* Still wanted: pending again, after a backoff of its own. */
        if (t->started == job->id)
            t->started = job->id - 1;
        t->retry_at = now + (int64_t)retry_ms * 1000000;
    }
    pthread_mutex_unlock(&t->mu);
}

/*
 * Whether f's layers have settled: more than one, and none added for
 * min_rebuild_interval (counted from the first tick that saw the count).
 * Folding them into one while the table still grows fast would be outgrown
 * again at once; a lookup meanwhile reads a cache line per layer.  Caller
 * holds mu.
 */
static bool layers_settled(struct table *t, const struct filter_info *fi, int64_t now)
{
    if (fi->layers != t->layers_seen) {
        t->layers_seen = fi->layers;
        t->layers_since = now;
    }
    return fi->layers > 1 && now - t->layers_since >= (int64_t)t->min_interval * NS_PER_S;
}

void table_check_timers(struct table *t)
{
    const struct filter_config *fc = t->fc;
    enum table_want why = WANT_NONE;
    table_set_saturated(t, guard_saturated(t->g));
    pthread_mutex_lock(&t->mu);
    if (t->wanted <= t->started && t->loaded) {
        time_t now = time(NULL);
        struct filter_info fi;
        /*
         * A filter that grew layers (or can no longer grow) is folded back
         * into one sized from the table by a COPY, once its growth has
         * settled and min_rebuild_interval allows: growth itself never
         * waits for the database.
         */
        if (fc->rebuild_interval > 0 && t->st.last_finished > 0
            && now - t->st.last_finished >= (time_t)fc->rebuild_interval)
            why = WANT_INTERVAL;
        else if (fc->auto_grow && guard_info(t->g, &fi)
                 && (fi.saturated || layers_settled(t, &fi, monoclock_boot_ns())))
            why = WANT_GROWTH;
    }
    bool w = why != WANT_NONE && want_locked(t, why, NULL);
    pthread_mutex_unlock(&t->mu);
    wake(t, w);
}

struct filter_growth table_growth(const struct filter_config *fc)
{
    return (struct filter_growth){ fc->growth, FILTER_DEFAULT_TIGHTENING, fc->max_layers };
}

struct filter_growth table_growth_of(const struct table_sizing *sz)
{
    return (struct filter_growth){ sz->growth, FILTER_DEFAULT_TIGHTENING, sz->max_layers };
}

/* Smallest filter worth building: a fresh table still gets room to grow. */
#define MIN_CAPACITY 1024
/*
 * How far above expected_items a row count may lie and still count as
 * within it.  ANALYZE's reltuples of a table larger than its sample is
 * extrapolated from the pages it read, and lands a little either side of
 * the truth (+0.003% in bench/run's 10^7 rows); taken as "past
 * expected_items" it sized the filter for the rows times headroom: twice
 * the memory, and every lookup's misses with it, for a table the operator
 * sized exactly.  A table that really holds more than the first layer
 * takes is counted by the COPY and copied again into a filter sized for
 * it (table_load_resize), never stacked in layers.
 */
#define FLOOR_TOLERANCE 0.02

uint64_t table_plan_items(struct table *t, uint64_t estimated_rows)
{
    pthread_mutex_lock(&t->mu);
    struct table_sizing sz = t->size;
    uint64_t base = estimated_rows;
    if (t->st.last_rows > base)
        base = t->st.last_rows;
    bool grew = t->job_why == WANT_GROWTH;
    pthread_mutex_unlock(&t->mu);
    /* Statistics may be stale; never size below what the live filter took in. */
    struct filter_info fi;
    if (guard_info(t->g, &fi) && fi.items > base)
        base = fi.items;
    uint64_t floor = sz.expected_items;
    if (floor > 0 && (double)base <= (double)floor * (1.0 + FLOOR_TOLERANCE) && !grew)
        return floor;
    double h = grew && sz.growth > sz.headroom ? sz.growth : sz.headroom;
    double want = ceil((double)base * h);
    if (want < (double)floor)
        want = (double)floor;
    if (want < MIN_CAPACITY)
        want = MIN_CAPACITY;
    if (want > (double)FILTER_MAX_ITEMS)
        want = (double)FILTER_MAX_ITEMS;
    return (uint64_t)want;
}
