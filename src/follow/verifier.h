/*
 * The verifier: one thread, one PostgreSQL session of its own, that takes
 * each table's candidates (table_adapt.h) and looks them up
 * (verify.h), at most [adaptive] verify_rate keys a second per table,
 * and tells the table what PostgreSQL said.  Answers never wait for it: a
 * candidate only changes what a later lookup answers.
 */
#ifndef BLOOMGUARD_VERIFIER_H
#define BLOOMGUARD_VERIFIER_H

#include <stdbool.h>

#include "config.h"
#include "log.h"
#include "scheduler.h"
#include "table.h"

struct verifier;

/*
 * A verifier of tables[0 .. n), whose followers the scheduler knows
 * (scheduler_follower: the transactions a lookup's snapshot must see).
 * cfg, lg, the tables and sched must outlive it.  Nothing runs until
 * verifier_start.  NULL on no memory.
 */
struct verifier *verifier_new(const struct config *cfg, const struct log *lg,
                              struct table *const *tables, unsigned n, struct scheduler *sched);

/* Start the thread (false: it could not start); stop it (in about 100 ms) and wait. */
bool verifier_start(struct verifier *v);
void verifier_stop(struct verifier *v);

/* Stop first.  NULL: no-op. */
void verifier_free(struct verifier *v);

#endif
