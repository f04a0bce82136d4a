/*
 * The rebuild scheduler's thread: snapshots in place at start, then round
 * robin over the tables' wanted loads (catch-ups where a want and a
 * position allow, else COPYs, which min_rebuild_interval spaces out),
 * periodic snapshots and prunes of the change feed (scheduler_store.c) and
 * the check of a peer's snapshot (scheduler_vet.c).  It is the only thread
 * that swaps a table's filter, so the live filter it streams to a snapshot
 * stays alive while it does.
 */
#include "scheduler_int.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "feed.h"
#include "loader.h"
#include "monoclock.h"

/* How often the scheduler wakes to check timers and growth. */
#define TICK_MS 500

struct scheduler *scheduler_new(const struct config *cfg, struct table *const *tables, unsigned n,
                        const struct log *lg, const struct scheduler_hooks *hooks, const char *token)
{
    struct scheduler *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    worker_init(&s->w);
    s->tables = calloc(n, sizeof *s->tables);
    s->follower = calloc(n, sizeof *s->follower);
    s->backoff = calloc(n, sizeof *s->backoff);
    s->next_snapshot = calloc(n, sizeof *s->next_snapshot);
    s->vetting = calloc(n, sizeof *s->vetting);
    if (s->tables == NULL || s->follower == NULL || s->backoff == NULL
        || s->next_snapshot == NULL || s->vetting == NULL) {
        scheduler_free(s);
        return NULL;
    }
    memcpy(s->tables, tables, n * sizeof *s->tables);
    for (unsigned i = 0; i < n; i++)
        s->backoff[i] = 1;
    s->n = n;
    s->cfg = cfg;
    s->lg = lg;
    s->token = token;
    if (hooks)
        s->hooks = *hooks;
    s->rng = (unsigned)monoclock_boot_ns() ^ (unsigned)getpid();
    return s;
}

void scheduler_free(struct scheduler *s)
{
    if (s == NULL)
        return;
    worker_destroy(&s->w);
    free(s->tables);
    free(s->follower);
    free(s->backoff);
    free(s->next_snapshot);
    for (unsigned i = 0; s->vetting != NULL && i < s->n; i++)
        spotcheck_release(&s->vetting[i].sample);
    free(s->vetting);
    free(s);
}

void scheduler_set_follower(struct scheduler *s, unsigned i, struct follower *f)
{
    pthread_mutex_lock(&s->w.mu);
    s->follower[i] = f;
    pthread_mutex_unlock(&s->w.mu);
}

struct follower *scheduler_follower(struct scheduler *s, unsigned i)
{
    pthread_mutex_lock(&s->w.mu);
    struct follower *f = s->follower[i];
    pthread_mutex_unlock(&s->w.mu);
    return f;
}

void scheduler_wake(void *arg)
{
    struct scheduler *s = arg;
    worker_wake(&s->w);
}

/* ------------------------------------------------------------- loads -- */

struct progress_ctx {
    struct scheduler *s;
    unsigned i;
    bool first;
};

static void on_progress(void *arg, uint64_t rows)
{
    struct progress_ctx *p = arg;
    table_job_progress(p->s->tables[p->i], rows);
    if (p->s->hooks.progress)
        p->s->hooks.progress(p->s->hooks.arg, p->i, rows, p->first);
}

/*
 * A COPY of table i into a new filter that goes live when it is done.
 * Every insert made meanwhile reaches the new filter too, and the
 * follower's ticket says in which epoch the COPY started, so the horizon
 * moves to the COPY's start only if nothing was lost since.
 */
static bool run_copy(struct scheduler *s, unsigned i, const struct table_job *job, uint64_t *rows_out,
                     double *secs_out, char *err, size_t errlen)
{
    struct table *t = s->tables[i];
    struct follower *f = scheduler_follower(s, i);
    const struct filter_config *fc = table_config(t);
    struct table_load *l = NULL;
    struct follow_ticket tk = { 0 };
    bool ticket = false, ok = false;
    uint64_t rows = 0;

    PGconn *conn = loader_connect(s->cfg, err, errlen);
    if (conn == NULL)
        goto out;
    struct table_ident ident;
    if (!loader_identify(conn, fc, &ident, err, errlen)
        || !loader_estimate_rows(conn, fc, &rows, err, errlen))
        goto out;
    uint64_t items = table_plan_items(t, rows);
    enum filter_error fe;
    if ((l = table_load_begin(t, items, &ident, &fe)) == NULL) {
        snprintf(err, errlen, "cannot create a filter for %llu items: %s",
                 (unsigned long long)items, filter_strerror(fe));
        goto out;
    }
    struct filter_info fi;
    filter_info(table_load_filter(l), &fi);
    log_fields(s->lg, LOG_LVL_INFO, fc->name, "rebuild_start",
               "%s: rebuild %llu (%s): loading %s.%s, about %llu rows, filter for %llu "
               "items (%.1f KiB, k=%u)",
               fc->name, (unsigned long long)job->id, table_want_name(job->why), fc->table,
               fc->column, (unsigned long long)rows, (unsigned long long)items,
               (double)fi.memory_bytes / 1024.0, fi.probes);
    /* From here every insert reaches the new filter; then the ticket, then the snapshot. */
    if (f != NULL) {
        if (!f->ops->ticket(f, t, conn, &tk, err, errlen))
            goto out;
        ticket = true;
    } else {
        tk.epoch = table_epoch(t);
    }
    int64_t copy_start = monoclock_boot_ns();
    struct progress_ctx pc = { s, i, job->first };
    const struct loader_copy_opts o = {
        .snapshot = tk.snapshot, .must_see = tk.must_see, .n_must_see = tk.n_must_see,
        .spell = ident.spell, .stop = &s->w.stop,
        .progress = on_progress, .progress_arg = &pc,
    };
    struct load_result res;
    if (!loader_copy(conn, fc, l, &o, &res, err, errlen))
        goto out;
    if (res.resized)
        log_fields(s->lg, LOG_LVL_INFO, fc->name, "rebuild_resized", "%s: rebuild %llu: the "
                   "table holds %llu rows, more than a filter for %llu items takes: copied "
                   "again into one for %llu", fc->name, (unsigned long long)job->id,
                   (unsigned long long)res.rows, (unsigned long long)items,
                   (unsigned long long)res.resized);
    struct table_load *done = l;
    l = NULL;
    if (!table_load_commit(done, tk.epoch, tk.start ? tk.start : copy_start, tk.position)) {
        snprintf(err, errlen, "out of memory for the inserts made during the load");
        goto out;
    }
    *rows_out = res.rows;
    *secs_out = res.seconds;
    ok = true;
out:
    table_load_abort(l);
    PQfinish(conn);
    if (ticket && f->ops->copied)
        f->ops->copied(f, t, &tk, ok);
    free(tk.must_see);
    return ok;
}

/*
 * Whether the live filter's identity (from its load, or a restored
 * snapshot's metadata) is what the table name means now, with this
 * daemon's session: the same relation (OID), column, type, database and
 * cluster.  A position is only worth resuming from then: a table renamed
 * into place, another schema's table of the same name, a snapshot of
 * another database or cluster are copied instead.  False with why when
 * not; an error reaching the server is an error (err) and false too.
 */
static bool same_identity(struct scheduler *s, struct table *t, char *err, size_t errlen,
                          bool *mismatch)
{
    struct table_ident had, now;
    *mismatch = false;
    PGconn *conn = loader_connect(s->cfg, err, errlen);
    if (conn == NULL)
        return false;
    bool ok = loader_identify(conn, table_config(t), &now, err, errlen);
    PQfinish(conn);
    if (!ok)
        return false;
    table_ident(t, &had);
    if (had.relid == now.relid && had.attnum == now.attnum && had.typid == now.typid
        && had.base_typid == now.base_typid && had.spell == now.spell && had.dboid == now.dboid
        && strcmp(had.sysid, now.sysid) == 0)
        return true;
    *mismatch = true;
    snprintf(err, errlen, "the filter was loaded from relation %u column %d (%s) of database %u "
             "in cluster %s, but %s.%s is now relation %u column %d (%s) of database %u in "
             "cluster %s", had.relid, had.attnum, had.type_name[0] ? had.type_name : "?",
             had.dboid, had.sysid[0] ? had.sysid : "?", table_config(t)->table,
             table_config(t)->column, now.relid, now.attnum, now.type_name, now.dboid, now.sysid);
    return false;
}

/*
 * One wanted load of table i: a catch-up where the want and the position
 * allow, the filter is of the relation the name means now, and the
 * follower can serve it; else a COPY.  *kind says which ran.
 */
static bool run_job(struct scheduler *s, unsigned i, const struct table_job *job, uint64_t *rows,
                    double *secs, const char **kind, char *err, size_t errlen)
{
    struct table *t = s->tables[i];
    struct follower *f = scheduler_follower(s, i);
    if (f != NULL && f->ops->load != NULL) {        /* a replica: its upstream's snapshot */
        *kind = "snapshot";
        return f->ops->load(f, t, job, rows, secs, err, errlen);
    }
    if (job->may_catch_up && f != NULL && f->ops->catch_up != NULL) {
        *kind = "catchup";
        bool mismatch;
        if (!same_identity(s, t, err, errlen, &mismatch)) {
            if (!mismatch)
                return false;
            log_fields(s->lg, LOG_LVL_WARN, table_name(t), "resume_refused",
                       "%s: not resuming from the filter's position: %s; copying the table",
                       table_name(t), err);
            table_count_too_old(t);
            *kind = "copy";
            return run_copy(s, i, job, rows, secs, err, errlen);
        }
        int64_t t0 = monoclock_boot_ns();
        int r = f->ops->catch_up(f, t, rows, err, errlen);
        *secs = (double)(monoclock_boot_ns() - t0) / (double)NS_PER_S;
        if (r == 1)
            return true;
        if (r == 0)
            return false;
    }
    *kind = "copy";
    return run_copy(s, i, job, rows, secs, err, errlen);
}

/* ------------------------------------------------------------ the loop -- */

/*
 * The next table whose load may start now, round robin so that one table's
 * loads cannot starve another's; -1 if none.  *wait_ms gets how long until
 * the earliest one held back may go.
 */
static int pick(struct scheduler *s, struct table_job *job, unsigned *wait_ms)
{
    int64_t now = monoclock_boot_ns(), wait_ns = (int64_t)TICK_MS * 1000000;
    for (unsigned k = 0; k < s->n; k++) {
        unsigned i = (s->next_pick + k) % s->n;
        struct table *t = s->tables[i];
        struct follower *f = scheduler_follower(s, i);
        table_check_timers(t);
        /* No COPY without the follower in place: rows committed meanwhile would be missed. */
        if (f != NULL && !f->ops->ready(f, t))
            continue;
        if (table_take_job(t, now, job, &wait_ns)) {
            s->next_pick = (i + 1) % s->n;
            return (int)i;
        }
    }
    *wait_ms = (unsigned)(wait_ns / 1000000) + 1;
    return -1;
}

/* Before any load: until the followers are chosen (or some tables are found to have none). */
static void prepare_followers(struct scheduler *s)
{
    char err[512], pub[160];
    unsigned backoff = 1;
    int r = 1;
    while (s->prepare && !worker_stopping(&s->w)
           && (r = s->prepare(s->prepare_arg, err, sizeof err)) < 0) {
        log_warn(s->lg, "cannot choose how to follow the tables: %s; retrying in %u s", err,
                 backoff);
        follow_public_error(pub, sizeof pub, err);
        for (unsigned i = 0; i < s->n; i++)
            table_set_error(s->tables[i], pub);
        worker_nap(&s->w, follow_jitter_ms(&s->rng, backoff));
        backoff = backoff * 2 > s->cfg->retry_max_seconds ? s->cfg->retry_max_seconds
                                                          : backoff * 2;
    }
    if (s->prepare && r == 0)
        s->prepare_again = monoclock_boot_ns() + SCHEDULER_PREPARE_AGAIN_S * NS_PER_S;
}

static void maybe_prepare_again_now(struct scheduler *s)
{
    char err[512];
    int r = s->prepare(s->prepare_arg, err, sizeof err);
    if (r < 0)
        log_debug(s->lg, "looking again for how to follow the tables: %s", err);
    s->prepare_again = r == 1 ? 0 : monoclock_boot_ns() + SCHEDULER_PREPARE_AGAIN_S * NS_PER_S;
}

/* While a table has no follower: look again now and then (it may have been watched since). */
static void maybe_prepare_again(struct scheduler *s, unsigned *wait_ms)
{
    if (s->prepare_again == 0)
        return;
    int64_t now = monoclock_boot_ns();
    if (now < s->prepare_again) {
        int64_t ms = (s->prepare_again - now) / 1000000 + 1;
        if (ms < *wait_ms)
            *wait_ms = (unsigned)ms;
        return;
    }
    maybe_prepare_again_now(s);
}

static void *scheduler_main(void *arg)
{
    struct scheduler *s = arg;

    scheduler_restore_all(s);
    prepare_followers(s);
    while (!worker_stopping(&s->w)) {
        unsigned wait_ms = TICK_MS, vet_wait = TICK_MS;
        scheduler_vet_all(s, &vet_wait);
        struct table_job job;
        int i = pick(s, &job, &wait_ms);
        if (i < 0) {
            if (vet_wait < wait_ms)
                wait_ms = vet_wait;
            int due = scheduler_snapshot_due(s, &wait_ms);
            if (due >= 0) {
                scheduler_periodic_snapshot(s, (unsigned)due);
                continue;
            }
            scheduler_maybe_prune(s, &wait_ms);
            maybe_prepare_again(s, &wait_ms);
            worker_nap(&s->w, wait_ms);
            continue;
        }
        struct table *t = s->tables[i];
        uint64_t rows = 0;
        double secs = 0;
        const char *kind = "copy";
        char err[512] = "";
        /*
         * A table nothing followed yet may have been watched since the last
         * look (a table created and watched while the daemon waited for it):
         * look again first, so its load starts under its follower.
         */
        if (scheduler_follower(s, (unsigned)i) == NULL && s->prepare_again != 0) {
            s->prepare_again = 0;
            maybe_prepare_again_now(s);
        }
        bool ok = run_job(s, (unsigned)i, &job, &rows, &secs, &kind, err, sizeof err);
        unsigned backoff = s->backoff[i];
        unsigned retry_ms = ok ? 0 : follow_jitter_ms(&s->rng, backoff);
        if (ok)
            s->backoff[i] = 1;
        else
            s->backoff[i] = backoff * 2 > s->cfg->retry_max_seconds ? s->cfg->retry_max_seconds
                                                                    : backoff * 2;
        if (!ok) {
            char pub[160];
            follow_public_error(pub, sizeof pub, err);
            table_set_error(t, pub);
            log_fields(s->lg, LOG_LVL_ERROR, table_name(t),
                       strcmp(kind, "copy") == 0 ? "rebuild_failed" : "catchup_failed",
                       "%s: %s %llu (%s) failed: %s", table_name(t),
                       strcmp(kind, "copy") == 0 ? "rebuild" : "catch-up",
                       (unsigned long long)job.id, table_want_name(job.why), err);
        }
        table_job_done(t, &job, ok, kind, rows, secs, retry_ms);
        if (s->hooks.done)
            s->hooks.done(s->hooks.arg, (unsigned)i, job.id, ok, ok && job.first, rows, secs);
        if (ok)
            log_fields(s->lg, LOG_LVL_INFO, table_name(t),
                       strcmp(kind, "copy") == 0 ? "rebuild_done" : "catchup_done",
                       "%s: %s %llu (%s) done: %llu rows in %.3f s", table_name(t),
                       strcmp(kind, "copy") == 0 ? "rebuild" : "catch-up",
                       (unsigned long long)job.id, table_want_name(job.why),
                       (unsigned long long)rows, secs);
        else if (!worker_stopping(&s->w))
            log_fields(s->lg, LOG_LVL_INFO, table_name(t), "load_retry",
                       "%s: retrying the load in about %u s", table_name(t), backoff);
        if (ok)
            scheduler_save_table(s, (unsigned)i);
    }
    /* A clean stop leaves each table's newest state on disk for the next start. */
    for (unsigned i = 0; i < s->n; i++)
        scheduler_save_table(s, i);
    return NULL;
}

bool scheduler_start(struct scheduler *s, scheduler_prepare_fn prepare, void *arg)
{
    s->prepare = prepare;
    s->prepare_arg = arg;
    return worker_start(&s->w, scheduler_main, s);
}

void scheduler_stop(struct scheduler *s)
{
    worker_stop(&s->w);
}
