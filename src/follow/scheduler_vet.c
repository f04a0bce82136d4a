/*
 * The scheduler's check of a peer's snapshot (table_vet): a random sample
 * of the table's rows, read before the first catch-up, must all be found
 * in the peer's filter once the held-back horizon has passed the sample;
 * else the snapshot is refused and the table loaded.
 */
#include "scheduler_int.h"

#include <stdio.h>

#include "loader.h"
#include "monoclock.h"

/*
 * Read table i's sample: every row of it committed before taken_at, so
 * once the held-back horizon (table_vet) has passed taken_at the filter
 * must hold each one, whatever the table's rate of change and however old
 * the peer's file was.  Taken before the first catch-up, so that catch-up
 * is what proves it.
 */
static void vet_take(struct scheduler *s, unsigned i, struct vetting *v)
{
    struct table *t = s->tables[i];
    char err[512];
    PGconn *conn = loader_connect(s->cfg, err, sizeof err);
    bool ok = conn != NULL
              && spotcheck_take(conn, table_config(t), SPOTCHECK_ROWS, &s->w.stop, &v->sample, err,
                                sizeof err);
    PQfinish(conn);
    if (ok) {
        v->taken = true;
        v->taken_at = monoclock_boot_ns();
        v->backoff = 1;
        return;
    }
    if (worker_stopping(&s->w))
        return;
    if (v->backoff == 0)
        v->backoff = 1;
    log_fields(s->lg, LOG_LVL_WARN, table_name(t), "peer_check_retry",
               "%s: cannot read a sample of the table to check the peer's snapshot against "
               "(%s); answers stay degraded; retrying in about %u s", table_name(t), err,
               v->backoff);
    v->retry_at = monoclock_boot_ns() + (int64_t)follow_jitter_ms(&s->rng, v->backoff) * 1000000;
    v->backoff = v->backoff * 2 > s->cfg->retry_max_seconds ? s->cfg->retry_max_seconds
                                                            : v->backoff * 2;
}

/*
 * Look each sampled row up as a request would be answered (table_lookup:
 * the live filter, the table's spelling): any "absent" refuses the
 * snapshot.
 */
static void vet_check(struct scheduler *s, unsigned i, struct vetting *v)
{
    struct table *t = s->tables[i];
    size_t missing = 0, first = 0;
    for (size_t k = 0; k < v->sample.n; k++) {
        enum table_answer a = table_lookup(t, v->sample.rows[k], v->sample.lens[k]);
        if (a == TABLE_ABSENT || a == TABLE_DEGRADED) {
            if (missing++ == 0)
                first = k;
        }
    }
    if (missing == 0) {
        log_fields(s->lg, LOG_LVL_INFO, table_name(t), "peer_snapshot_checked",
                   "%s: the peer's snapshot holds all %zu rows of a random sample of the table "
                   "(%s): believed", table_name(t), v->sample.n, v->sample.how);
        table_vetted(t, true);
        /* Now it is the daemon's own: what the catch-ups skipped while on probation. */
        scheduler_save_table(s, i);
    } else {
        /* The row, cut and made printable: it is the table's, not the peer's. */
        char row[64];
        size_t n = 0;
        for (size_t k = 0; k < v->sample.lens[first] && n + 1 < sizeof row; k++) {
            unsigned char c = (unsigned char)v->sample.rows[first][k];
            row[n++] = c >= 0x20 && c < 0x7f && c != '"' ? (char)c : '?';
        }
        row[n] = '\0';
        log_fields(s->lg, LOG_LVL_WARN, table_name(t), "peer_snapshot_refused",
                   "%s: the peer's snapshot lacks %zu of %zu rows of a random sample of the "
                   "table (%s), e.g. \"%s\": refused, not resuming from its position; loading the table", table_name(t), missing,
                   v->sample.n, v->sample.how, row);
        table_vetted(t, false);
    }
    spotcheck_release(&v->sample);
    v->taken = false;
}

/* Each table on probation: its sample, then its verdict once proved; *wait_ms shrinks meanwhile. */
void scheduler_vet_all(struct scheduler *s, unsigned *wait_ms)
{
    for (unsigned i = 0; i < s->n && !worker_stopping(&s->w); i++) {
        struct vetting *v = &s->vetting[i];
        int64_t proved = 0;
        if (table_vet(s->tables[i], &proved) != TABLE_VET_PENDING) {
            if (v->taken) {             /* a COPY ended the probation first */
                spotcheck_release(&v->sample);
                v->taken = false;
            }
            continue;
        }
        if (!v->taken && monoclock_boot_ns() >= v->retry_at)
            vet_take(s, i, v);
        if (v->taken && proved >= v->taken_at)
            vet_check(s, i, v);
        else if (*wait_ms > 100)
            *wait_ms = 100;
    }
}

