/*
 * What a fleet asks of the guarded table (a part of table.h, which
 * includes it; nothing else does): a replication upstream's tap on every
 * key the live filter takes and the proof its replicas are answered with,
 * a replica's keys by hash and the snapshot it puts live, and the live
 * filter lent to a copier (a snapshot made for a replica).  The rules are
 * table.h's; the upstream's side is api/fleethub.c, the replica's
 * follow/follow_upstream.c.
 */
#ifndef BLOOMGUARD_TABLE_FLEET_H
#define BLOOMGUARD_TABLE_FLEET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct filter;
struct table;
struct table_ident;
struct table_load;

/*
 * Who hears of every key the live filter takes, and of each new epoch and
 * generation: a replication upstream's ring (fleetring.h), which streams
 * them to replicas.  Each hook may be NULL; set it before other threads
 * use the table.
 *   added    n keys (each its filter_hash) are in the live filter (and in
 *            the one being built, if any); ttl is 0 for rows a follower
 *            added (table_add_row, table_add_hashes) and the POST
 *            journal's pending_ttl for an acknowledged POST's keys.  On
 *            the adding thread, after the filter holds them (so a snapshot
 *            that reads the ring's newest seq before the filter's bits
 *            holds every key up to it), under no lock of the table.
 *   changed  the epoch or the generation moved (table_proof has both):
 *            on the thread that moved it, under no lock of the table.
 * Keys a load copies into its new filter (a COPY's rows, the journal
 * replayed, a snapshot's) are not added one by one: the new generation
 * holds them.
 */
/*
 * Where keys a replica takes from its upstream's stream stand in the
 * history it mirrors: their seqs are first, first + 1, ..., as the
 * upstream numbered them (a replica that serves replicas keeps them, so
 * that its replicas may resume on it at a position they got elsewhere).
 */
struct table_at {
    uint64_t history, first;
};

/*
 * at: for keys of table_add_hashes given one, else NULL.  committed
 * (h-stream's commit positions, fleetring.h's marks): the follower applied
 * a commit of the table's database ending at lsn on timeline tli, every
 * key of it added before this call and none of the next commit's yet
 * (table_note_commit); on the follower's thread, under no lock of the table.
 */
struct table_tap {
    void *ctx;
    void (*added)(void *ctx, const uint64_t *hashes, size_t n, uint32_t ttl,
                  const struct table_at *at);
    void (*changed)(void *ctx);
    void (*committed)(void *ctx, uint32_t tli, uint64_t lsn);
};
void table_set_tap(struct table *t, const struct table_tap *tap);

/*
 * A follower that applies whole commits in order, one at a time (method
 * logical), says it has applied the one ending at lsn on timeline tli:
 * the tap's committed hears it.  Thread-safe.
 */
void table_note_commit(struct table *t, uint32_t tli, uint64_t lsn);

/*
 * Keys by their filter_hash, as a replica's stream carries them: into the
 * live filter and the one being built, as table_add_row does with a row's
 * key (ttl 0), or as an acknowledged POST's (ttl: the seconds its journal
 * keeps it, which the tap passes on).  Never into the journal.  False
 * when there is no filter yet.  Thread-safe.
 */
bool table_add_hashes(struct table *t, const uint64_t *hashes, size_t n, uint32_t ttl,
                      const struct table_at *at);

/*
 * The horizon with what it rests on, read at once under the table's lock:
 * what an upstream answers a replica that asks how fresh it is (fleet).
 */
struct table_proof {
    int64_t horizon;                /* H (monoclock_boot_ns), 0: none */
    uint64_t epoch;                 /* the current epoch */
    uint64_t covered;               /* the epoch the live filter's load started in (0: none) */
    uint64_t generation;            /* live filters so far: each load or restore that went live */
    bool loaded;
    bool saturated;                 /* answers are degraded whatever H */
};
void table_proof(struct table *t, struct table_proof *out);
/*
 * A load whose filter was made elsewhere: a replica's snapshot of its
 * upstream (f is taken, whatever happens; it must not be in use).  A
 * published table (table_set_publisher) copies it into a filter its
 * publisher allocates, so that the published file holds the live filter.
 * From now on every insert reaches the new filter too, as with
 * table_load_begin: the caller adds what else it must hold through
 * table_load_filter, then commits it (the journal is replayed into it
 * then) or aborts.  NULL (f freed) when out of memory.
 */
struct table_load *table_load_adopt(struct table *t, struct filter *f,
                                    const struct table_ident *ident);

/*
 * fn(arg, f) with the live filter, f kept alive until fn returns (a
 * commit meanwhile waits for it: keep fn to copying it and the POST
 * journal, table_posts_export, e.g. a snapshot into memory).  Any thread;
 * false (fn not called) when there is no live filter.
 */
bool table_with_live(struct table *t, void (*fn)(void *arg, const struct filter *f), void *arg);

#endif
