/*
 * The configuration in force and the admin token read with it.  SIGHUP
 * makes main publish a new generation; request threads read the current one
 * inside an RCU read section, so a request sees one consistent
 * configuration and an old one is freed only when no request can hold it.
 */
#ifndef BLOOMGUARD_LIVE_H
#define BLOOMGUARD_LIVE_H

#include <stdbool.h>

#include "config.h"
#include "rcu.h"

struct live;

/* What a reader holds between live_enter and live_exit; a plain value. */
struct live_view {
    const struct config *cfg;   /* never NULL */
    const char *admin_token;    /* NULL: none */
    struct rcu_read t;
};

/*
 * A holder publishing *cfg and admin_token, both moved in: on success *cfg
 * is left zeroed (config_free on it is a no-op) and the token belongs to
 * the holder.  NULL on allocation failure, and then nothing was taken.
 */
struct live *live_new(struct config *cfg, char *admin_token);

/* Frees the holder and the generation in force; no reader may remain. */
void live_free(struct live *l);

/*
 * Readers, any thread, lock-free: the generation in force stays valid until
 * live_exit.  Keep the section short (one request callback): live_publish
 * waits for it.
 */
struct live_view live_enter(struct live *l);
void live_exit(struct live_view v);

/*
 * The generation in force, for the publishing thread only (no read
 * section needed: only that thread replaces it).
 */
const struct config *live_current(const struct live *l);
const char *live_current_token(const struct live *l);

/*
 * Make *cfg and admin_token the generation in force (moved in as for
 * live_new), wait until no reader can still hold the previous one, then
 * free it.  One publishing thread at a time, never inside a read section.
 * False on allocation failure: nothing changed and nothing was taken.
 */
bool live_publish(struct live *l, struct config *cfg, char *admin_token);

#endif
