/*
 * The filter being served.  Lookups and inserts go through a guard, which
 * holds the live filter and, while a rebuild runs, the filter being built, and
 * swaps one for the other without ever blocking a reader.
 */
#ifndef BLOOMGUARD_GUARD_H
#define BLOOMGUARD_GUARD_H

#include <stdbool.h>
#include <stddef.h>

#include "filter.h"
#include "rcu.h"

struct guard;

enum guard_answer {
    GUARD_NOT_READY = -1,   /* no filter loaded yet */
    GUARD_ABSENT = 0,       /* surely absent */
    GUARD_MAYBE = 1         /* maybe present */
};

/* An empty guard (not ready).  NULL on allocation failure. */
struct guard *guard_new(void);
/* Frees the guard and any filters it holds; no other thread may use it. */
void guard_free(struct guard *g);

/*
 * Lookups and inserts: lock-free, wait-free in the common case, safe from any
 * number of threads, and never blocked by a rebuild or a swap.
 *
 * guard_add puts the key in the live filter and in the filter being built, if
 * any, so a key added at any moment of a rebuild is in the filter that
 * replaces the live one.  Returns false (and stores nothing) only when there
 * is neither a live filter nor one being built.
 */
enum guard_answer guard_lookup(struct guard *g, const void *key, size_t len);

/*
 * A read section over the live filter, for the table's lookup sequence
 * (answer.h): *live (NULL: none yet) stays valid until guard_read_exit.
 * Lock-free, from any thread, may nest; keep it short (a swap waits for
 * it).
 */
struct rcu_read guard_read_enter(struct guard *g, const struct filter **live);
void guard_read_exit(struct rcu_read r);
bool guard_add(struct guard *g, const void *key, size_t len);
/* The same with the key's filter_hash computed by the caller. */
bool guard_add_hash(struct guard *g, uint64_t h);

/*
 * Rebuild protocol, for one rebuilding thread at a time:
 *   guard_begin(g, next)   next starts receiving every guard_add; when this
 *                          returns, no insert can still miss next;
 *   ... fill next (e.g. COPY from the table) ...
 *   guard_commit(g)        next becomes live; the old filter is freed once no
 *                          reader can still be using it; or
 *   guard_abort(g)         next is dropped and freed the same way.
 * guard_begin takes ownership of next.  Writers wait (briefly) for readers;
 * readers never wait for writers.
 */
void guard_begin(struct guard *g, struct filter *next);
void guard_commit(struct guard *g);
void guard_abort(struct guard *g);

/*
 * The same for a bulk load with filter_add_hashes_exclusive, which needs to
 * be next's only writer: between guard_begin_bulk and guard_end_bulk,
 * guard_add keeps its keys for next in a backlog instead of writing them;
 * guard_end_bulk lets inserts reach next directly again and then adds the
 * backlog.  False if the backlog ran out of memory (some keys are then
 * missing from next: abort).  Call guard_commit or guard_abort afterwards.
 */
void guard_begin_bulk(struct guard *g, struct filter *next);
bool guard_end_bulk(struct guard *g);
/*
 * Between the two: next is dropped for another (takes ownership; the first
 * was too small, say) and freed once no reader can still use it.  Nothing
 * is lost: the keys added since guard_begin_bulk wait in the backlog for
 * whichever filter guard_end_bulk finds.
 */
void guard_replace_bulk(struct guard *g, struct filter *next);

/* Whether a filter has been committed yet. */
bool guard_ready(struct guard *g);
/* Whether guard_add would store anything (a live or a rebuilding filter). */
bool guard_writable(struct guard *g);

/*
 * Figures of the live filter (false if none), and of the filter being built
 * (false if none).
 */
bool guard_info(struct guard *g, struct filter_info *out);
bool guard_next_info(struct guard *g, struct filter_info *out);
/* Whether the live filter is saturated (filter_saturated); false when there is none. */
bool guard_saturated(struct guard *g);

/*
 * The live filter's layers, oldest first, into out[0 .. cap): returns how
 * many were written (0: no live filter).
 */
unsigned guard_layers(struct guard *g, struct filter_layer_info *out, unsigned cap);

/*
 * The live filter (NULL if none), for the rebuilding thread only: valid
 * until that thread's next guard_commit, which is the only thing that frees
 * it.  Lets the rebuilder stream it to a snapshot while lookups and inserts
 * go on.
 */
const struct filter *guard_live(struct guard *g);

/*
 * fn(arg, f) with the live filter (NULL if none), from any thread: f stays
 * alive until fn returns (a read section: a commit meanwhile waits for fn,
 * so keep it to copying the filter).  Inserts go on meanwhile.
 */
void guard_with_live(struct guard *g, void (*fn)(void *arg, const struct filter *f), void *arg);

#endif
