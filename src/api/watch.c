/*
 * The filters' degraded state, watched from the status snapshot and told
 * to the log when it changes and while it lasts.  The HTTP answers and
 * /readyz know the state at every request; only the log had to be told.
 */
#include "watch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "log.h"
#include "status.h"

struct watched {
    enum status_degraded why;   /* as last told */
    double since;               /* monotonic seconds: when it became that */
    double told;                /* when the log last said it */
};

struct watch {
    unsigned n;
    struct watched t[];
};

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct watch *watch_new(const struct app *a)
{
    struct watch *w = calloc(1, sizeof *w + a->n_tables * sizeof w->t[0]);
    if (w != NULL)
        w->n = a->n_tables;
    return w;
}

void watch_free(struct watch *w)
{
    free(w);
}

/* What a degraded filter's answers rest on, and what ends it, for the log. */
static void detail(const struct status *st, const struct status_filter *f, char *out, size_t cap)
{
    const struct table_status *ts = &f->table;
    switch (f->why) {
    case DEGRADED_SATURATED:
        snprintf(out, cap, "past [filter] max_layers the filter cannot keep false_positive_rate: "
                 "absent IDs answer \"maybe\" until a rebuild from the table");
        break;
    case DEGRADED_PEER_UNCHECKED:
        snprintf(out, cap, "the filter is a peer's snapshot not yet checked against a sample of "
                 "the table: absent IDs answer \"maybe\" until it is");
        break;
    case DEGRADED_POST_LOG_CUT:
        snprintf(out, cap, "POSTs acknowledged before this start may be lost (the POST log was "
                 "cut or damaged while stopped): absent IDs answer \"maybe\" for %.0f s more",
                 ts->held_for);
        break;
    case DEGRADED_NOT_FOLLOWED:
        snprintf(out, cap, "%s", ts->method_why[0] ? ts->method_why : "nothing follows the table");
        break;
    default: {
        char age[64], src[256] = "";
        if (ts->horizon_age >= 0)
            snprintf(age, sizeof age, "the horizon is %.1f s old, past max_staleness (%g s)",
                     ts->horizon_age, st->max_staleness);
        else
            snprintf(age, sizeof age, "no horizon yet (a restored filter not caught up)");
        const char *err = ts->last_error[0] ? ts->last_error : f->conn.last_error;
        snprintf(src, sizeof src, "; follower %s%s%s", follow_state_name(f->conn.state),
                 err[0] ? ": " : "", err);
        snprintf(out, cap, "%s: absent IDs answer \"maybe\" until the filter is proven fresh "
                 "again%s", age, src);
        break;
    }
    }
}

void watch_tick(struct watch *w, struct app *a, unsigned repeat_interval)
{
    struct status st;
    char why[512];
    if (w == NULL)
        return;
    status_take(a, &st, false);
    double now = mono_s();
    for (unsigned i = 0; i < st.n && i < w->n; i++) {
        const struct status_filter *f = &st.filters[i];
        struct watched *s = &w->t[i];
        if (f->why == s->why) {
            if (f->why != DEGRADED_NO && repeat_interval > 0 && now - s->told >= repeat_interval) {
                detail(&st, f, why, sizeof why);
                log_fields(a->lg, LOG_LVL_WARN, f->name, "degraded",
                           "%s: still degraded (%s) after %.0f s: %s", f->name,
                           status_degraded_name(f->why), now - s->since, why);
                s->told = now;
            }
            continue;
        }
        if (f->why == DEGRADED_NO) {
            log_fields(a->lg, LOG_LVL_INFO, f->name, "recovered",
                       "%s: no longer degraded (was %s for %.1f s): absent IDs are answered from the "
                       "filter again",
                       f->name, status_degraded_name(s->why), now - s->since);
        } else {
            detail(&st, f, why, sizeof why);
            log_fields(a->lg, LOG_LVL_WARN, f->name, "degraded", "%s: degraded (%s): %s", f->name,
                       status_degraded_name(f->why), why);
        }
        s->why = f->why;
        s->since = s->told = now;
    }
    status_release(&st);
}
