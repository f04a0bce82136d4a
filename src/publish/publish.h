/*
 * Published filters: the daemon keeps each table's live bits in a
 * file-backed shared mapping under [server] publish_dir, so that a process
 * on the same host (libbloomguard, the nginx module) checks an ID in its
 * own address space, with no request to the daemon, and gets the answer
 * the daemon would give.  The file format is pubfmt.h; the reader is
 * reader.c.
 *
 * What is written when.  A load's filter gets its layers from this module
 * (table_publisher.begin: a filter_alloc), so every insert sets its bits in
 * the shared file itself, once, with no copy.  One file per generation
 * (each load's filter): made under a hidden temporary name, the header's
 * fixed part first; each layer is announced in the header (geometry, then
 * nlayers with a release store) inside the allocator, before filter.c lets
 * any insert reach it.  When the load goes live (table_publisher.live,
 * under the table's lock, before guard_commit): the header gets the
 * table's horizon and READY, the file is renamed to <dir>/<name>.bgf, and
 * only then is the previous generation marked SUPERSEDED.  Afterwards the
 * table's horizon hook stores each new horizon into the current
 * generation's header (under the table's lock, so never into a generation
 * that is no longer the live one's).  A snapshot restored at start is no
 * exception: the table copies its filter into a generation made the same
 * way before it goes live (table_restore), with horizon 0.
 *
 * Why a reader sees a false "maybe" at worst, never a wrong "absent".  A
 * reader answers "absent" only after, in this order: an acquire load of
 * the flags (READY, not SUPERSEDED), of nlayers (all of those layers
 * mapped), of the horizon H, then the bits, and H is fresh by answer.h's
 * rule.  A wrong absent would be a key k that is in the daemon's filter
 * for a reason that happened before the lookup, missing from what the
 * reader read.  The reasons:
 *   (a) k was inserted (a POST acknowledged, a followed row) into
 *       generation G before the lookup, and the reader reads G.  The
 *       insert set k's bits in G's file with release ORs (the shared
 *       mapping is the filter's memory, not a copy of it).  If it went into
 *       layer i, the header said nlayers > i before filter.c published
 *       layer i to inserters (the allocator runs first), so the reader's
 *       nlayers covers layer i and it checks it.  Bits only ever get set,
 *       a word is read whole: the reader sees k's bits.
 *   (b) k was inserted into G+1 only, before the lookup: that is after
 *       guard_commit made G+1 live, which came after G's SUPERSEDED store,
 *       so the reader's flags load sees SUPERSEDED and it moves to the
 *       file at the path, which has been G+1 (or newer) since before that
 *       store.  G+1 holds every key that G held for a reason in force:
 *       from its load's start every insert reached both (guard.h), the
 *       POST journal was replayed into it, and the rows older than the
 *       COPY are the COPY's.  By induction, the same for G+2 and on.
 *   (c) k's row was committed before the horizon H the reader read from
 *       G's header.  H was stored there only while G was the live filter,
 *       after table.c moved its horizon to H, which it does only once
 *       every row committed before H is in the live filter; G+1's first H
 *       is the table's horizon when it goes live, which G+1 covers for the
 *       reasons of (b).  The release store of H after k's bits, the
 *       reader's acquire load of H before its loads of the bits: it sees
 *       them.
 *   (d) k is denied by the verified-absent set (table_adapt.h), which
 *       the daemon keeps in <name>.bgv, the very memory readers map (not
 *       a copy), and which a reader searches after the bits, as the
 *       daemon does: the reader's answer is the daemon's at that moment.
 *       An entry of k dies before the add of k returns (table_adapt.h,
 *       step 3), so before the daemon's horizon passes k's commit, so
 *       before the horizon store into G's header that the reader's
 *       acquire load of H read (and before a POST's 2xx, after which a
 *       reader's lookup starts): the reader sees the kill.  A reader that
 *       read a horizon older than k's commit may deny k while its row is
 *       younger than max_staleness, as the daemon may.  The set outlives
 *       generations (entries are about the table, not a filter); a run's
 *       set pairs only with its own generations (instance and boot id).
 * What remains is a reader racing an insert (the lookup and the insert
 * overlap): either answer is right.  A superseded generation's bits stay
 * mapped, and valid, for as long as a reader holds them (an unlinked file
 * lives on while mapped).  A daemon that stops storing horizons (stopped,
 * hung, killed) leaves H to age: after max_staleness its readers answer
 * degraded, never stale.  A daemon that exits withdraws its files
 * (SUPERSEDED, then unlinked): its readers answer "not ready".
 *
 * If the directory cannot hold a layer (tmpfs full: posix_fallocate
 * fails), the layer takes private memory instead and the generation is
 * withdrawn before the layer is used: readers go "not ready" (they fail
 * open) until a later load fits.
 *
 * One daemon per directory.  The caller holds the directory's lock
 * (dirlock.h) before publish_new, so what publish_new withdraws at the path
 * is an ended run's, never a live daemon's.  The live generation also has a
 * second, hidden name (a temporary's); if the file at the path is removed
 * or replaced while the daemon runs, publish_check puts it back from that
 * name, the same file, so its readers lose nothing but the moments between.
 */
#ifndef BLOOMGUARD_PUBLISH_H
#define BLOOMGUARD_PUBLISH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "log.h"
#include "publish_dir.h"
#include "table.h"

struct publish;

/*
 * Publish table t (filter fc of cfg) in dir as <dir>/<fc->name>.bgf from
 * its next load on: sets t's publisher (table_set_publisher), so call it
 * before other threads use t, and only while holding dir's lock
 * (dirlock_take): it removes what another run left.  Each generation's
 * file is made anew
 * (O_EXCL, a random temporary name), mode [server] publish_mode, group
 * publish_group.  Whatever an earlier run (or anyone) left at the path is
 * withdrawn (its readers go "not ready" until this run's first load), and
 * temporary files an interrupted run left are removed.  NULL with err when
 * publish_dir_check(create) refuses dir, when the path cannot be cleared,
 * or on no memory.  cfg, t and lg must outlive it.
 */
struct publish *publish_new(const struct config *cfg, const struct filter_config *fc,
                            struct table *t, const char *dir, const struct log *lg, char *err,
                            size_t errlen);

/*
 * Withdraw the published filter (SUPERSEDED, then the name unlinked) and
 * free p.  Call it after every thread that loads, inserts or advances the
 * horizon of t has stopped, and before the table is freed (the filters'
 * memory is released with them).  NULL: no-op.
 */
void publish_free(struct publish *p);

/*
 * Whether the live generation is still at the path, for a periodic tick
 * (one fstatat when it is; thread-safe against the table's hooks, but call
 * it from one thread).  If the file there was removed or replaced (by
 * hand, or the directory mounted anew), it is put back from its hidden name
 * and logged: PUBLISH_RESTORED.  If that name is gone too (a fresh tmpfs),
 * only a new load can publish the filter: PUBLISH_LOST, logged, returned
 * once per generation, and the caller asks the table for a rebuild
 * (WANT_REPUBLISH).  Call it only while holding dir's lock: without it the
 * path may be another daemon's.
 */
enum publish_check { PUBLISH_IN_PLACE, PUBLISH_RESTORED, PUBLISH_LOST };
enum publish_check publish_check(struct publish *p);

/* Figures for /stats and logs. */
struct publish_status {
    char path[4096];            /* <dir>/<name>.bgf */
    uint64_t generation;        /* of the file at path; 0: none published yet */
    uint64_t generations;       /* published by this run */
    uint64_t withdrawn;         /* generations withdrawn because a layer did not fit */
    /*
     * The file at path as this process maps it (/proc/self/smaps; zeros
     * where /proc is not there): bytes resident, and of those the bytes in
     * huge pages, each mapped by one page table entry (a tmpfs mounted
     * huge=within_size; docs/operations.md "Huge pages for the published
     * filters").
     */
    uint64_t resident_bytes;
    uint64_t huge_bytes;
};
/*
 * What p published; thread-safe; false (and *out zeros) when p is NULL:
 * nothing published.  The page figures come from /proc/self/smaps (every
 * mapping of the process), read again at most every 10 s and at each new
 * generation: for /stats and /metrics, not for a hot path.
 */
bool publish_status(struct publish *p, struct publish_status *out);

#endif
