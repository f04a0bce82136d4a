/*
 * What an operator must hear without polling anything: a filter that
 * becomes degraded (and why), one that recovers, and, while a filter stays
 * degraded, the warning again every [log] repeat_interval, so that a guard
 * that guards nothing is not said once at start and then forgotten.  The
 * state comes from the status snapshot (status.h), the rule for each
 * answer stays table.c's: the watch only notices when it changed.
 */
#ifndef BLOOMGUARD_WATCH_H
#define BLOOMGUARD_WATCH_H

#include "app.h"

/* How often the caller should call watch_tick, in milliseconds. */
#define WATCH_TICK_MS 500

struct watch;

/* For the tables of a (a->n_tables); NULL on allocation failure.  watch_free(NULL) is a no-op. */
struct watch *watch_new(const struct app *a);
void watch_free(struct watch *w);

/*
 * Look at every table once: log each change of its degraded state (a
 * warning with the reason, CODE=degraded; its end, CODE=recovered), and
 * repeat a lasting one every repeat_interval seconds (0: never) of the
 * configuration in force.  One caller at a time (the main thread).
 */
void watch_tick(struct watch *w, struct app *a, unsigned repeat_interval);

#endif
