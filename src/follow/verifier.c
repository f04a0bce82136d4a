/*
 * The verifier's thread (verifier.h): a token bucket per table, one batch
 * of candidates per table and tick, the tickets taken by table_candidates
 * right before the lookup's snapshot, and the transactions that snapshot
 * must see asked of the table's follower after them.
 */
#include "verifier.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "follow.h"
#include "loader.h"
#include "monoclock.h"
#include "verify.h"
#include "worker.h"

/* Ticks: short while candidates wait (their tokens come in), long when none does (a wake). */
#define BUSY_MS 20
#define IDLE_MS 1000
/* A batch whose snapshot does not see the follower's transactions yet waits this long at most. */
#define NOT_YET_MS 2000
#define RETRY_MIN_S 1
#define RETRY_MAX_S 30

struct verifier {
    const struct config *cfg;
    const struct log *lg;
    struct table **tables;
    unsigned n;
    struct scheduler *sched;
    double *tokens;                 /* per table: lookups it may make now */
    bool *mismatch;                 /* per table: its load's server is not ours (logged once) */
    PGconn *conn;
    char sysid[32];
    uint32_t dboid;
    unsigned backoff;
    double retry_at;
    bool failing;                   /* the last connect or lookup failed (logged once) */

    struct worker w;                /* the thread; its wakes: candidates waiting */
};

static void wake(void *arg);

struct verifier *verifier_new(const struct config *cfg, const struct log *lg,
                              struct table *const *tables, unsigned n, struct scheduler *sched)
{
    struct verifier *v = calloc(1, sizeof *v);
    if (v == NULL)
        return NULL;
    worker_init(&v->w);
    v->tables = calloc(n, sizeof *v->tables);
    v->tokens = calloc(n, sizeof *v->tokens);
    v->mismatch = calloc(n, sizeof *v->mismatch);
    if (v->tables == NULL || v->tokens == NULL || v->mismatch == NULL) {
        verifier_free(v);
        return NULL;
    }
    memcpy(v->tables, tables, n * sizeof *tables);
    for (unsigned i = 0; i < n; i++)
        table_set_verifier_wake(tables[i], wake, v);
    v->n = n;
    v->cfg = cfg;
    v->lg = lg;
    v->sched = sched;
    v->backoff = RETRY_MIN_S;
    return v;
}

void verifier_free(struct verifier *v)
{
    if (v == NULL)
        return;
    if (v->conn != NULL)
        PQfinish(v->conn);
    worker_destroy(&v->w);
    free(v->tables);
    free(v->tokens);
    free(v->mismatch);
    free(v);
}

/* A table's candidates started waiting (a request's thread). */
static void wake(void *arg)
{
    struct verifier *v = arg;
    worker_wake(&v->w);
}

/* A failure: logged when the state turns, the session dropped if it is broken. */
static void failed(struct verifier *v, const char *name, const char *err)
{
    if (!v->failing)
        log_fields(v->lg, LOG_LVL_WARN, name, "verify_failed",
                   "%s: cannot verify IDs that answer \"maybe\" (they keep answering \"maybe\"): %s",
                   name ? name : "adaptive", err);
    v->failing = true;
    if (v->conn != NULL && PQstatus(v->conn) != CONNECTION_OK) {
        PQfinish(v->conn);
        v->conn = NULL;
    }
    if (v->conn == NULL) {
        v->retry_at = monoclock_seconds() + v->backoff;
        v->backoff = v->backoff * 2 > RETRY_MAX_S ? RETRY_MAX_S : v->backoff * 2;
    }
}

static bool connected(struct verifier *v)
{
    if (v->conn != NULL)
        return true;
    if (monoclock_seconds() < v->retry_at)
        return false;
    char err[512];
    v->conn = verify_connect(v->cfg, v->sysid, sizeof v->sysid, &v->dboid, err, sizeof err);
    if (v->conn == NULL) {
        failed(v, NULL, err);
        return false;
    }
    v->backoff = RETRY_MIN_S;
    return true;
}

/* Give every candidate of a batch back: nothing was learned of them. */
static void give_back(struct table *t, const struct table_candidate *c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        table_verified(t, &c[i], TABLE_VERIFY_FAILED);
}

/* One batch of table i's candidates, as many as its tokens allow. */
static void verify_table(struct verifier *v, unsigned i)
{
    struct table *t = v->tables[i];
    const char *name = table_name(t);
    struct table_ident id;
    table_ident(t, &id);
    if (id.relid == 0 || !table_ready(t))
        return;
    /* Only the server and database the table was loaded from can tell what it lacks. */
    bool same = strcmp(id.sysid, v->sysid) == 0 && id.dboid == v->dboid;
    if (!same) {
        if (!v->mismatch[i])
            log_fields(v->lg, LOG_LVL_WARN, name, "verify_other_server",
                       "%s: the verifier's server (system %s, database %u) is not the one the "
                       "table was loaded from (system %s, database %u): nothing is verified",
                       name, v->sysid, v->dboid, id.sysid, id.dboid);
        v->mismatch[i] = true;
        return;
    }
    v->mismatch[i] = false;
    size_t max = (size_t)v->tokens[i];
    if (max > VERIFY_BATCH)
        max = VERIFY_BATCH;
    struct table_candidate c[VERIFY_BATCH];
    /* The tickets, now: before the lookup's snapshot (table_adapt.h, step 1). */
    size_t n = table_candidates(t, c, max);
    if (n == 0)
        return;
    v->tokens[i] -= (double)n;
    /* After the tickets: every transaction the follower applied before them is in here. */
    uint32_t *xids = NULL;
    size_t nx = 0;
    char err[512] = "";
    if (!follow_unseen(scheduler_follower(v->sched, i), t, &xids, &nx)) {
        snprintf(err, sizeof err, "the follower's stream has too many transactions not yet "
                 "seen finished");
        give_back(t, c, n);
        failed(v, name, err);
        return;
    }
    const char *keys[VERIFY_BATCH];
    size_t lens[VERIFY_BATCH];
    bool present[VERIFY_BATCH];
    for (size_t k = 0; k < n; k++) {
        keys[k] = c[k].key;
        lens[k] = c[k].klen;
    }
    enum verify_result r;
    double t0 = monoclock_seconds(), until = t0 + NOT_YET_MS / 1000.0;
    unsigned tries = 0;
    while ((r = verify_lookup(v->conn, table_config(t), id.relid, id.spell, keys, lens, n, xids,
                              nx, &v->w.stop, present, err, sizeof err)) == VERIFY_NOT_YET
           && monoclock_seconds() < until && !worker_stopping(&v->w)) {
        tries++;
        worker_nap(&v->w, 10);
    }
    free(xids);
    /* How long learning takes under load: the lookup's round trips, timed. */
    log_debug(v->lg, "%s: verified a batch of %zu in %.0f ms (%u not-yet retr%s, %zu "
              "transactions to see)", name, n, (monoclock_seconds() - t0) * 1000, tries,
              tries == 1 ? "y" : "ies", nx);
    if (r != VERIFY_OK) {
        if (r == VERIFY_NOT_YET)
            snprintf(err, sizeof err, "transactions the follower applied are still not visible "
                     "after %d ms", NOT_YET_MS);
        give_back(t, c, n);
        failed(v, name, err);
        return;
    }
    if (v->failing)
        log_fields(v->lg, LOG_LVL_INFO, name, "verify_ok", "%s: verifying IDs again", name);
    v->failing = false;
    for (size_t k = 0; k < n; k++) {
        enum table_verified out = table_verified(t, &c[k], present[k] ? TABLE_VERIFIED_PRESENT
                                                                      : TABLE_VERIFIED_ABSENT);
        if (out == TABLE_ENTERED)
            log_debug(v->lg, "%s: verified absent, denied from now on: %.*s", name,
                      (int)c[k].klen, c[k].key);
    }
}

static void *verifier_main(void *arg)
{
    struct verifier *v = arg;
    pthread_setname_np(pthread_self(), "bg-verify");
    double rate = v->cfg->adaptive_verify_rate, last = monoclock_seconds();
    /* A burst of at most a fifth of a second's lookups, and at least one. */
    double cap = rate / 5 < 1 ? 1 : rate / 5;
    while (!worker_stopping(&v->w)) {
        double now = monoclock_seconds();
        bool waiting = false;
        for (unsigned i = 0; i < v->n; i++) {
            v->tokens[i] += rate * (now - last);
            if (v->tokens[i] > cap)
                v->tokens[i] = cap;
            if (table_candidates_waiting(v->tables[i]))
                waiting = true;
        }
        last = now;
        /*
         * Connected before any candidate waits, and kept: the candidates
         * come with an attack, when the database is busiest, and a new
         * session's first statements there once took longer than their 5 s
         * (bench/attack, the repeated ids at 5,300/s: the first entries came
         * 16 s late, after the backoff).  One idle session per daemon.
         */
        bool up = connected(v);
        if (waiting && up)
            for (unsigned i = 0; i < v->n && !worker_stopping(&v->w) && v->conn != NULL; i++)
                if (v->tokens[i] >= 1)
                    verify_table(v, i);
        worker_nap(&v->w, waiting ? BUSY_MS : IDLE_MS);
    }
    return NULL;
}

bool verifier_start(struct verifier *v)
{
    return worker_start(&v->w, verifier_main, v);
}

void verifier_stop(struct verifier *v)
{
    if (v == NULL)
        return;
    worker_stop(&v->w);
}
