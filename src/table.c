/*
 * The guarded table: answers, inserts, the horizon and its epochs, the
 * wants that drive loads, and a table's figures.  Why each rule holds is in
 * table.h; this file keeps them in one place, under one lock per table
 * that no lookup ever takes.
 */
#include "table.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "answer.h"

#define NS_PER_S INT64_C(1000000000)

struct table {
    const struct filter_config *fc;
    struct guard *g;
    struct pending *pending;
    int64_t max_stale_ns;           /* 0: never degraded */
    unsigned min_interval;          /* [sync] min_rebuild_interval, seconds */
    void (*wake)(void *arg);
    void *wake_arg;
    table_durable_fn durable;
    table_durable_submit_fn durable_submit;
    void *durable_arg;
    struct table_publisher pub;     /* hooks all NULL: not published */

    /* Every row committed before it is in the live filter; 0 = none. */
    _Atomic int64_t horizon;
    /*
     * The live filter can no longer keep its advertised rate (filter.h:
     * saturated): absent answers are "maybe" until a COPY replaces it.
     * Refreshed after inserts and on the scheduler's ticks.
     */
    atomic_bool saturated;
    atomic_ulong not_a_value;       /* IDs the column's type refused */
    _Atomic int spell;              /* enum spell_type of the live filter's keys */

    pthread_mutex_t mu;
    /* Everything below is guarded by mu. */
    uint64_t epoch;                 /* bumped by table_gap */
    uint64_t covered;               /* the epoch the live filter's load started in */
    bool loaded;
    /* wants */
    uint64_t wanted;                /* newest requested load id */
    uint64_t started;               /* id of the load running or last started */
    enum table_want want;           /* the strongest reason among the pending ones */
    int64_t last_end;               /* table_now of the last load's end; 0: none */
    int64_t retry_at;               /* a failed load is not retried before */
    char position[TABLE_POS_MAX];   /* "" = none: the next load copies */
    int64_t degraded_ns, accounted; /* time spent degraded, counted up to accounted */
    struct table_ident ident;       /* of the live filter's load */
    struct table_status st;
};

static const struct {
    const char *name;
    bool may_catch_up;
} wants[WANT_COUNT] = {
    [WANT_NONE] = { "none", false },
    [WANT_START] = { "start", true },
    [WANT_RECONNECT] = { "reconnect", true },
    [WANT_LONG_ID] = { "long id", true },
    [WANT_POSITION] = { "position", false },
    [WANT_API] = { "api", false },
    [WANT_SIGHUP] = { "SIGHUP", false },
    [WANT_INTERVAL] = { "interval", false },
    [WANT_DELETES] = { "deletes", false },
    [WANT_GROWTH] = { "growth", false },
};

const char *table_want_name(enum table_want w)
{
    return w > WANT_NONE && w < WANT_COUNT ? wants[w].name : "none";
}

bool table_want_may_catch_up(enum table_want w)
{
    return w > WANT_NONE && w < WANT_COUNT && wants[w].may_catch_up;
}

int64_t table_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

struct table *table_new(const struct config *cfg, const struct filter_config *fc)
{
    struct table *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    t->fc = fc;
    t->g = guard_new();
    t->pending = pending_new(fc->pending_limit, fc->pending_max_bytes, fc->pending_ttl);
    if (t->g == NULL || t->pending == NULL) {
        guard_free(t->g);
        pending_free(t->pending);
        free(t);
        return NULL;
    }
    t->max_stale_ns = (int64_t)(cfg->max_staleness * (double)NS_PER_S);
    t->min_interval = cfg->min_rebuild_interval;
    atomic_init(&t->horizon, 0);
    atomic_init(&t->saturated, false);
    atomic_init(&t->spell, SPELL_TEXT);
    atomic_init(&t->not_a_value, 0);
    pthread_mutex_init(&t->mu, NULL);
    t->epoch = 1;
    t->covered = 0;
    t->wanted = 1;                  /* the first load */
    t->want = WANT_START;
    t->st.requested_id = 1;
    return t;
}

void table_set_wake(struct table *t, void (*wake)(void *arg), void *arg)
{
    t->wake = wake;
    t->wake_arg = arg;
}

void table_set_durable(struct table *t, table_durable_fn fn, table_durable_submit_fn submit,
                       void *arg)
{
    t->durable = fn;
    t->durable_submit = submit;
    t->durable_arg = arg;
}

void table_set_publisher(struct table *t, const struct table_publisher *p)
{
    t->pub = *p;
}

bool table_durable(const struct table *t)
{
    return t->durable != NULL;
}

void table_free(struct table *t)
{
    if (t == NULL)
        return;
    guard_free(t->g);
    pending_free(t->pending);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

const struct filter_config *table_config(const struct table *t)
{
    return t->fc;
}

const char *table_name(const struct table *t)
{
    return t->fc->name;
}

struct guard *table_guard(struct table *t)
{
    return t->g;
}

struct pending *table_pending(struct table *t)
{
    return t->pending;
}

/* ------------------------------------------------------------ answers -- */

static bool stale(struct table *t, int64_t h)
{
    return answer_degraded(table_now(), h, t->max_stale_ns,
                           atomic_load_explicit(&t->saturated, memory_order_relaxed));
}

/* After inserts: a filter that just lost its rate degrades its absent answers at once. */
static void check_saturated(struct table *t)
{
    if (!atomic_load_explicit(&t->saturated, memory_order_relaxed) && guard_saturated(t->g))
        atomic_store(&t->saturated, true);
}

enum spell_type table_spell(const struct table *t)
{
    return (enum spell_type)atomic_load_explicit(&((struct table *)t)->spell, memory_order_acquire);
}

void table_ident(struct table *t, struct table_ident *out)
{
    pthread_mutex_lock(&t->mu);
    *out = t->ident;
    pthread_mutex_unlock(&t->mu);
}

/* Keys up to this long are made on the stack. */
#define KEY_STACK 256

/*
 * The key of id for spelling sp into *key (id itself for text, else buf,
 * or *heap when it does not fit: free it).  The verdict of spell_key; a
 * key that cannot be made (no memory) is SPELL_MAYBE, never a wrong key.
 */
static enum spell_verdict key_of(enum spell_type sp, const char *id, size_t len, char *buf,
                                 char **heap, const char **key, size_t *klen)
{
    *heap = NULL;
    if (sp == SPELL_TEXT) {
        *key = id;
        *klen = len;
        return SPELL_KEY;
    }
    size_t cap = spell_key_cap(sp, len);
    char *out = buf;
    if (cap > KEY_STACK && (out = *heap = malloc(cap)) == NULL)
        return SPELL_MAYBE;
    enum spell_verdict v = spell_key(sp, id, len, out, cap, klen);
    *key = out;
    return v;
}

enum table_answer table_lookup(struct table *t, const void *id, size_t len)
{
    /* Before the lookup: a filter read after it is at least as new as h promises. */
    int64_t h = atomic_load_explicit(&t->horizon, memory_order_acquire);
    char buf[KEY_STACK], *heap;
    const char *key;
    size_t klen;
    enum spell_verdict v = key_of(table_spell(t), id, len, buf, &heap, &key, &klen);
    enum guard_answer g = v == SPELL_KEY ? guard_lookup(t->g, key, klen)
                        : guard_ready(t->g) ? GUARD_ABSENT : GUARD_NOT_READY;
    free(heap);
    if (g == GUARD_NOT_READY)
        return TABLE_NOT_READY;
    if (v == SPELL_MAYBE)
        return TABLE_UNPROVABLE;
    if (v == SPELL_NOT_A_VALUE)
        atomic_fetch_add_explicit(&t->not_a_value, 1, memory_order_relaxed);
    if (g == GUARD_MAYBE)
        return TABLE_MAYBE;
    return stale(t, h) ? TABLE_DEGRADED : TABLE_ABSENT;
}

bool table_lookup_many(struct table *t, size_t n, const char *const *ids, const size_t *lens,
                       bool *maybe, bool *degraded, size_t *absent_seen)
{
    int64_t h = atomic_load_explicit(&t->horizon, memory_order_acquire);
    enum spell_type sp = table_spell(t);
    if (!guard_ready(t->g))
        return false;
    size_t absent = 0;
    for (size_t i = 0; i < n; i++) {
        char buf[KEY_STACK], *heap;
        const char *key;
        size_t klen;
        enum spell_verdict v = key_of(sp, ids[i], lens[i], buf, &heap, &key, &klen);
        enum guard_answer g = v == SPELL_KEY ? guard_lookup(t->g, key, klen)
                            : v == SPELL_MAYBE ? GUARD_MAYBE : GUARD_ABSENT;
        free(heap);
        maybe[i] = g != GUARD_ABSENT;
        absent += !maybe[i];
        if (v == SPELL_NOT_A_VALUE)
            atomic_fetch_add_explicit(&t->not_a_value, 1, memory_order_relaxed);
    }
    bool deg = absent > 0 && stale(t, h);
    if (deg)
        for (size_t i = 0; i < n; i++)
            maybe[i] = true;
    if (degraded)
        *degraded = deg;
    if (absent_seen)
        *absent_seen = absent;
    return true;
}

/* The filter's part of an insert, once the journal and the disk have the IDs. */
static enum table_insert_result add_hashes(struct table *t, size_t n, const uint64_t *hs,
                                          size_t *inserted)
{
    *inserted = 0;
    for (size_t i = 0; i < n; i++)
        *inserted += guard_add_hash(t->g, hs[i]);
    check_saturated(t);
    return *inserted < n ? TABLE_INSERT_NOT_READY : TABLE_INSERTED;
}

/*
 * The keys of a POST's IDs (spell.h), their hashes, and where they live:
 * for text the IDs themselves, else one block for all the keys.
 */
struct keyset {
    size_t n;
    const char **keys;
    size_t *lens;
    uint64_t *hs;
    char *bytes;
};

static void keyset_free(struct keyset *k)
{
    free(k->keys);
    free(k->lens);
    free(k->hs);
    free(k->bytes);
}

/*
 * The keys of ids; TABLE_INSERT_NOT_A_VALUE (*bad its index) for an ID
 * the column's type refuses.  A spelling whose key cannot be known is kept
 * as it came (lookups of it answer "maybe" anyway).
 */
static enum table_insert_result keyset_make(struct table *t, size_t n, const char *const *ids,
                                            const size_t *lens, struct keyset *k, int *bad)
{
    enum spell_type sp = table_spell(t);
    memset(k, 0, sizeof *k);
    k->n = n;
    k->keys = malloc((n ? n : 1) * sizeof *k->keys);
    k->lens = malloc((n ? n : 1) * sizeof *k->lens);
    k->hs = malloc((n ? n : 1) * sizeof *k->hs);
    size_t total = 0;
    for (size_t i = 0; sp != SPELL_TEXT && i < n; i++)
        total += spell_key_cap(sp, lens[i]);
    if (sp != SPELL_TEXT)
        k->bytes = malloc(total ? total : 1);
    if (!k->keys || !k->lens || !k->hs || (sp != SPELL_TEXT && !k->bytes))
        return TABLE_INSERT_NOMEM;
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        if (sp == SPELL_TEXT) {
            k->keys[i] = ids[i];
            k->lens[i] = lens[i];
        } else {
            size_t cap = spell_key_cap(sp, lens[i]);
            switch (spell_key(sp, ids[i], lens[i], k->bytes + used, cap, &k->lens[i])) {
            case SPELL_KEY:
                k->keys[i] = k->bytes + used;
                used += k->lens[i];
                break;
            case SPELL_NOT_A_VALUE:
                atomic_fetch_add_explicit(&t->not_a_value, 1, memory_order_relaxed);
                if (bad)
                    *bad = (int)i;
                return TABLE_INSERT_NOT_A_VALUE;
            case SPELL_MAYBE:
                k->keys[i] = ids[i];
                k->lens[i] = lens[i];
                break;
            }
        }
        k->hs[i] = filter_hash(k->keys[i], k->lens[i]);
    }
    return TABLE_INSERTED;
}

/* Journal first, all or nothing.  TABLE_INSERTED: journalled. */
static enum table_insert_result journal(struct table *t, const struct keyset *k)
{
    if (!guard_writable(t->g))
        return TABLE_INSERT_NOT_READY;
    switch (pending_add_many(t->pending, k->n, k->keys, k->lens, k->hs, pending_clock())) {
    case PENDING_OK: return TABLE_INSERTED;
    case PENDING_FULL_COUNT: return TABLE_INSERT_FULL_COUNT;
    case PENDING_FULL_BYTES: return TABLE_INSERT_FULL_BYTES;
    case PENDING_NOMEM: break;
    }
    return TABLE_INSERT_NOMEM;
}

enum table_insert_result table_insert(struct table *t, size_t n, const char *const *ids,
                                      const size_t *lens, size_t *inserted, int *err)
{
    struct keyset k;
    int bad = 0;
    *inserted = 0;
    if (err)
        *err = 0;
    enum table_insert_result r = keyset_make(t, n, ids, lens, &k, &bad);
    if (r == TABLE_INSERT_NOT_A_VALUE && err)
        *err = bad;
    if (r == TABLE_INSERTED)
        r = journal(t, &k);
    if (r == TABLE_INSERTED && t->durable != NULL && n > 0) {
        /* On disk before the filter and the 2xx; the journal's copy is harmless. */
        int e = t->durable(t->durable_arg, n, k.keys, k.lens, t->fc->pending_ttl);
        if (e != 0) {
            if (err)
                *err = e;
            r = TABLE_INSERT_NOT_DURABLE;
        }
    }
    if (r == TABLE_INSERTED)
        r = add_hashes(t, n, k.hs, inserted);
    keyset_free(&k);
    return r;
}

/* An insert waiting for the disk. */
struct insert_op {
    struct table *t;
    uint64_t *hs;
    size_t n;
    table_insert_done_fn done;
    void *arg;
};

static void insert_durable(void *arg, int err)
{
    struct insert_op *op = arg;
    size_t inserted = 0;
    enum table_insert_result r = err != 0 ? TABLE_INSERT_NOT_DURABLE
                                          : add_hashes(op->t, op->n, op->hs, &inserted);
    op->done(op->arg, r, inserted, err);
    free(op->hs);
    free(op);
}

enum table_insert_result table_insert_later(struct table *t, size_t n, const char *const *ids,
                                            const size_t *lens, size_t *inserted, int *err,
                                            table_insert_done_fn done, void *arg)
{
    if (t->durable_submit == NULL || n == 0)
        return table_insert(t, n, ids, lens, inserted, err);
    struct keyset k;
    int bad = 0;
    *inserted = 0;
    if (err)
        *err = 0;
    enum table_insert_result r = keyset_make(t, n, ids, lens, &k, &bad);
    if (r == TABLE_INSERT_NOT_A_VALUE && err)
        *err = bad;
    if (r == TABLE_INSERTED)
        r = journal(t, &k);
    struct insert_op *op = r == TABLE_INSERTED ? malloc(sizeof *op) : NULL;
    if (r == TABLE_INSERTED && op == NULL)
        r = TABLE_INSERT_NOMEM;
    if (r != TABLE_INSERTED) {
        keyset_free(&k);
        return r;
    }
    *op = (struct insert_op){ t, k.hs, n, done, arg };
    k.hs = NULL;                    /* the op's now */
    int e = t->durable_submit(t->durable_arg, n, k.keys, k.lens, t->fc->pending_ttl,
                              insert_durable, op);
    keyset_free(&k);                /* the log copied the keys */
    if (e != 0) {
        free(op->hs);
        free(op);
        if (err)
            *err = e;
        return TABLE_INSERT_NOT_DURABLE;
    }
    return TABLE_INSERT_LATER;
}

/* ------------------------------------------------------- from followers -- */

bool table_add_row(struct table *t, const void *id, size_t len)
{
    char buf[KEY_STACK], *heap;
    const char *key;
    size_t klen;
    /*
     * A row's text is a value of the column: its key, or (a type whose key
     * cannot be known) the text itself, which only "maybe" answers read.
     */
    if (key_of(table_spell(t), id, len, buf, &heap, &key, &klen) != SPELL_KEY) {
        key = id;
        klen = len;
    }
    bool ok = guard_add(t->g, key, klen);
    free(heap);
    return ok;
}

/* Degraded time in [accounted, now] under horizon h.  Caller holds mu. */
static void account_locked(struct table *t, int64_t h, int64_t now)
{
    if (t->max_stale_ns == 0 || h == 0)
        return;
    int64_t from = h + t->max_stale_ns;
    if (from < t->accounted)
        from = t->accounted;
    if (now > from)
        t->degraded_ns += now - from;
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
        check_saturated(t);
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
    wake(t, w);
}

/* Caller holds mu. */
static bool advance_locked(struct table *t, uint64_t epoch, int64_t when)
{
    if (t->covered != t->epoch || epoch != t->epoch)
        return false;
    int64_t h = atomic_load(&t->horizon);
    if (when <= h)
        return true;
    account_locked(t, h, table_now());
    atomic_store_explicit(&t->horizon, when, memory_order_release);
    if (t->pub.horizon)
        t->pub.horizon(t->pub.ctx, when);
    return true;
}

bool table_advance(struct table *t, uint64_t epoch, int64_t when)
{
    pthread_mutex_lock(&t->mu);
    bool ok = advance_locked(t, epoch, when);
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
static int64_t hold_back_locked(const struct table *t, int64_t now)
{
    if (!t->loaded || t->last_end == 0)
        return 0;
    int64_t until = t->last_end + (int64_t)t->min_interval * NS_PER_S;
    return until > now ? until - now : 0;
}

/* Whether the pending want may be served by a catch-up.  Caller holds mu. */
static bool may_catch_up_locked(const struct table *t)
{
    return table_want_may_catch_up(t->want) && t->loaded && t->position[0] != '\0';
}

bool table_take_job(struct table *t, int64_t now, struct table_job *job, int64_t *wait_ns)
{
    pthread_mutex_lock(&t->mu);
    if (t->wanted <= t->started) {
        pthread_mutex_unlock(&t->mu);
        return false;
    }
    bool catchup = may_catch_up_locked(t);
    /* Nothing (a /reload loop, forged deletes) may copy a table back to back. */
    int64_t until = t->retry_at;
    int64_t hold = catchup ? 0 : hold_back_locked(t, now);
    if (hold > 0 && now + hold > until)
        until = now + hold;
    if (until > now) {
        if (until - now < *wait_ns)
            *wait_ns = until - now;
        pthread_mutex_unlock(&t->mu);
        return false;
    }
    job->id = t->started = t->wanted;
    job->why = t->want;
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
    int64_t now = table_now();
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

void table_check_timers(struct table *t)
{
    const struct filter_config *fc = t->fc;
    enum table_want why = WANT_NONE;
    atomic_store(&t->saturated, guard_saturated(t->g));
    pthread_mutex_lock(&t->mu);
    if (t->wanted <= t->started && t->loaded) {
        time_t now = time(NULL);
        struct filter_info fi;
        /*
         * A filter that grew layers (or can no longer grow) is folded back
         * into one sized from the table by a COPY, when min_rebuild_interval
         * allows: growth itself never waits for the database.
         */
        if (fc->rebuild_interval > 0 && t->st.last_finished > 0
            && now - t->st.last_finished >= (time_t)fc->rebuild_interval)
            why = WANT_INTERVAL;
        else if (fc->auto_grow && fc->expected_items == 0 && guard_info(t->g, &fi)
                 && (fi.layers > 1 || fi.saturated))
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

/* Smallest filter worth building: a fresh table still gets room to grow. */
#define MIN_CAPACITY 1024

uint64_t table_plan_items(struct table *t, uint64_t estimated_rows)
{
    const struct filter_config *fc = t->fc;
    if (fc->expected_items > 0)
        return fc->expected_items;
    uint64_t base = estimated_rows;
    pthread_mutex_lock(&t->mu);
    if (t->st.last_rows > base)
        base = t->st.last_rows;
    pthread_mutex_unlock(&t->mu);
    /* Statistics may be stale; never size below what the live filter took in. */
    struct filter_info fi;
    if (guard_info(t->g, &fi) && fi.items > base)
        base = fi.items;
    double want = ceil((double)base * fc->headroom);
    if (want < MIN_CAPACITY)
        want = MIN_CAPACITY;
    if (want > (double)FILTER_MAX_ITEMS)
        want = (double)FILTER_MAX_ITEMS;
    return (uint64_t)want;
}

/* ------------------------------------------------------------- loads -- */

struct table_load {
    struct table *t;
    struct filter *f;
    struct table_ident ident;
};

struct table_load *table_load_begin(struct table *t, uint64_t items,
                                    const struct table_ident *ident, enum filter_error *err)
{
    struct table_load *l = malloc(sizeof *l);
    if (l == NULL) {
        *err = FILTER_ENOMEM;
        return NULL;
    }
    l->t = t;
    l->ident = *ident;
    struct filter_growth g = table_growth(t->fc);
    struct filter_alloc a;
    bool pub = t->pub.begin && t->pub.begin(t->pub.ctx, &a);
    l->f = filter_new_with(items, t->fc->false_positive_rate, &g, pub ? &a : NULL, err);
    if (l->f == NULL) {
        free(l);
        return NULL;
    }
    guard_begin_bulk(t->g, l->f);
    return l;
}

struct filter *table_load_filter(struct table_load *l)
{
    return l->f;
}

void table_load_seen(struct table_load *l, const char *id, size_t len, uint64_t h)
{
    pending_seen(l->t->pending, id, len, h);
}

/* Caller holds mu: a load or catch-up that started at start in epoch is live. */
static void covered_locked(struct table *t, uint64_t epoch, int64_t start, const char *pos)
{
    /* A gap since the load began is not covered by it: keep waiting for the next. */
    if (epoch == t->epoch)
        t->covered = epoch;
    advance_locked(t, epoch, start);
    snprintf(t->position, sizeof t->position, "%s", pos ? pos : "");
}

bool table_load_commit(struct table_load *l, uint64_t epoch, int64_t start, const char *pos)
{
    struct table *t = l->t;
    if (!guard_end_bulk(t->g)) {
        table_load_abort(l);
        return false;
    }
    /* POSTed IDs the table does not hold (yet) must survive the swap, until they expire. */
    pending_expire(t->pending, pending_clock());
    pending_replay(t->pending, l->f);
    if (t->pub.live) {
        pthread_mutex_lock(&t->mu);
        t->pub.live(t->pub.ctx, l->f, l->ident.spell, atomic_load(&t->horizon));
        pthread_mutex_unlock(&t->mu);
    }
    guard_commit(t->g);
    /* The keys of the new filter are of its load's spelling. */
    atomic_store_explicit(&t->spell, l->ident.spell, memory_order_release);
    struct table_ident ident = l->ident;
    free(l);
    atomic_store(&t->saturated, guard_saturated(t->g));
    pthread_mutex_lock(&t->mu);
    t->ident = ident;
    t->loaded = true;
    covered_locked(t, epoch, start, pos);
    t->st.copies++;
    pthread_mutex_unlock(&t->mu);
    return true;
}

void table_load_abort(struct table_load *l)
{
    if (l == NULL)
        return;
    guard_abort(l->t->g);           /* frees the filter */
    free(l);
}

void table_caught_up(struct table *t, uint64_t epoch, int64_t start, const char *pos,
                     uint64_t rows)
{
    pthread_mutex_lock(&t->mu);
    covered_locked(t, epoch, start, pos);
    t->st.catchups++;
    t->st.feed_rows_read += rows;
    t->st.last_feed_rows = rows;
    pthread_mutex_unlock(&t->mu);
}

void table_polled(struct table *t, uint64_t epoch, int64_t start, const char *pos,
                  uint64_t rows)
{
    pthread_mutex_lock(&t->mu);
    covered_locked(t, epoch, start, pos);
    t->st.notifications += rows;
    pthread_mutex_unlock(&t->mu);
}

void table_restored(struct table *t, const char *pos, const char *from, uint64_t items,
                    double seconds, const struct table_ident *ident)
{
    atomic_store_explicit(&t->spell, ident->spell, memory_order_release);
    if (t->pub.restored)
        t->pub.restored(t->pub.ctx, ident->spell);
    pthread_mutex_lock(&t->mu);
    t->ident = *ident;
    /* The horizon stays 0 (degraded) until a catch-up or a COPY. */
    t->loaded = true;
    snprintf(t->position, sizeof t->position, "%s", pos ? pos : "");
    t->st.attempted = true;
    t->st.last_rows = items;
    t->st.last_seconds = seconds;
    t->st.last_finished = time(NULL);
    snprintf(t->st.last_reason, sizeof t->st.last_reason, "start");
    snprintf(t->st.last_kind, sizeof t->st.last_kind, "%s", from);
    snprintf(t->st.restored_from, sizeof t->st.restored_from, "%s",
             strcmp(from, "peer") == 0 ? "peer" : "file");
    pthread_mutex_unlock(&t->mu);
}

void table_position(struct table *t, char *out, size_t cap)
{
    pthread_mutex_lock(&t->mu);
    snprintf(out, cap, "%s", t->position);
    pthread_mutex_unlock(&t->mu);
}

void table_drop_position(struct table *t)
{
    pthread_mutex_lock(&t->mu);
    t->position[0] = '\0';
    pthread_mutex_unlock(&t->mu);
}

bool table_loaded(struct table *t)
{
    pthread_mutex_lock(&t->mu);
    bool l = t->loaded;
    pthread_mutex_unlock(&t->mu);
    return l;
}

/* -------------------------------------------------------------- status -- */

void table_set_method(struct table *t, const char *method, const char *why)
{
    pthread_mutex_lock(&t->mu);
    snprintf(t->st.method, sizeof t->st.method, "%s", method);
    snprintf(t->st.method_why, sizeof t->st.method_why, "%s", why);
    pthread_mutex_unlock(&t->mu);
}

void table_set_error(struct table *t, const char *err)
{
    pthread_mutex_lock(&t->mu);
    snprintf(t->st.last_error, sizeof t->st.last_error, "%s", err);
    pthread_mutex_unlock(&t->mu);
}

void table_snapshot_written(struct table *t, bool ok)
{
    pthread_mutex_lock(&t->mu);
    if (ok) {
        t->st.snapshot_writes++;
        t->st.snapshot_written = time(NULL);
    } else {
        t->st.snapshot_failures++;
    }
    pthread_mutex_unlock(&t->mu);
}

void table_count_too_old(struct table *t)
{
    pthread_mutex_lock(&t->mu);
    t->st.too_old++;
    t->position[0] = '\0';
    pthread_mutex_unlock(&t->mu);
}

void table_set_feed_available(struct table *t, bool available)
{
    pthread_mutex_lock(&t->mu);
    t->st.feed_available = available;
    pthread_mutex_unlock(&t->mu);
}

void table_status(struct table *t, struct table_status *out)
{
    int64_t now = table_now();
    pthread_mutex_lock(&t->mu);
    int64_t h = atomic_load(&t->horizon);
    account_locked(t, h, now);
    *out = t->st;
    out->ident = t->ident;
    out->not_a_value = atomic_load_explicit(&t->not_a_value, memory_order_relaxed);
    snprintf(out->position, sizeof out->position, "%s", t->position);
    out->horizon_age = h ? (double)(now - h) / (double)NS_PER_S : -1;
    /* h == 0 after a load: a gap overtook the first load's epoch. */
    out->saturated = atomic_load(&t->saturated);
    out->degraded = t->loaded && ((t->max_stale_ns > 0 && now - h > t->max_stale_ns)
                                  || out->saturated);
    out->degraded_seconds = (double)t->degraded_ns / (double)NS_PER_S;
    out->next_rebuild_in = t->wanted > t->started && !may_catch_up_locked(t)
        ? (double)hold_back_locked(t, now) / (double)NS_PER_S : 0;
    pthread_mutex_unlock(&t->mu);
}
