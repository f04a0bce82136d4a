/*
 * What bloomguard does with snapshots (src/store/snapshot.h is the format): where
 * each filter's file lives, restoring a table at start from its file or from
 * a peer, and writing it back.  restore and save are called from the rebuild
 * thread, the only one that swaps a table's filter, so the live filter stays
 * alive while it is streamed to disk (table_live_filter); lookups and inserts
 * go on meanwhile, and nothing is copied but the POST journal.  Logs what it
 * does and why a snapshot was not used.
 */
#ifndef BLOOMGUARD_PERSIST_H
#define BLOOMGUARD_PERSIST_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "feed.h"
#include "log.h"
#include "postlog.h"
#include "snapshot.h"
#include "table.h"

/* Longest snapshot file name persist_file writes. */
#define PERSIST_PATH_MAX 4096

/*
 * [snapshot] path, with "auto" resolved: the first directory of
 * $STATE_DIRECTORY, which systemd sets for StateDirectory= (the environment
 * is only read: no thread sets it), trailing slashes dropped.  False
 * when snapshots are off or the path does not fit.  Other state of the daemon's (the logical
 * slot's name) lives there too.
 */
bool persist_dir(const struct config *cfg, char *out, size_t outlen);

/*
 * The snapshot file of filter fc: "<[snapshot] path>/<name>.snap", path
 * "auto" being $STATE_DIRECTORY (systemd's StateDirectory=).  False when
 * snapshots are off (path empty, or auto without $STATE_DIRECTORY) or the
 * name does not fit in outlen.
 */
bool persist_file(const struct config *cfg, const struct filter_config *fc, char *out,
                  size_t outlen);

/*
 * The POST log of filter fc (postlog.h): "<[snapshot] path>/<name>.posts",
 * beside its snapshot.  False, as persist_file, when snapshots are off:
 * then POSTs are kept in memory only.
 */
bool persist_postlog_file(const struct config *cfg, const struct filter_config *fc, char *out,
                          size_t outlen);

/*
 * At start, before any load of the table and before requests are served:
 * open fc's POST log (removing the temporary files a crashed rewrite left),
 * put every entry it still holds back into t's journal, even past its
 * limits, which then refuse new POSTs until there is room, and make t's
 * POSTs durable through it (table_set_durable).  *log gets the open log, or
 * NULL when snapshots are off.  False (logged as an error) when the
 * log exists but cannot be read or written: the daemon must not start and
 * acknowledge POSTs it cannot keep.  Torn tails and damage are logged.  The
 * log reads t's journal for its rewrites: close it (postlog_close) before
 * freeing t.
 */
bool persist_postlog_open(const struct config *cfg, const struct filter_config *fc,
                          struct table *t, const struct log *lg, struct postlog **log);

enum persist_origin { PERSIST_NONE, PERSIST_FILE, PERSIST_PEER };

/* What a restore put in place. */
struct persist_restored {
    enum persist_origin from;
    char position[TABLE_POS_MAX];   /* where the filter is exact (follow.h), "" = none */
    struct table_ident ident;       /* what it was loaded from (zeros: the snapshot does not say) */
    uint64_t items;                 /* the filter's items */
    double seconds;                 /* reading it took */
};

/*
 * At start, before any load of t (filter fc): put fc's snapshot file
 * (after removing the temporary files a crash left), else the snapshot of
 * [snapshot] bootstrap_from's peer (token: the admin token to send, NULL =
 * none; its certificate checked against bootstrap_ca_file; within peer.h's
 * default bounds: a deadline from the size the peer announces; the caller
 * puts the table on probation first, table_vet_begin), in place: its
 * journal back into t's (table_posts_restore), then its filter live with
 * every entry of the journal (those persist_postlog_open restored too)
 * added (table_restore).  True when one was put in place (*r filled);
 * false when there was none or it was not usable (each reason logged as a
 * warning): load the table.  stop (NULL: none): once true, a fetch from
 * the peer ends within httpc.h's HTTPC_POLL_MS, and false is returned.
 * Only from the thread that commits t's filters.
 */
bool persist_restore(const struct config *cfg, const struct filter_config *fc, const char *token,
                     atomic_bool *stop, struct table *t, const struct log *lg,
                     struct persist_restored *r);

/*
 * Write t's live filter, its POST journal and position (the change-feed
 * position the live filter is exact at, "" = none), the identity of its
 * column (snapshot metadata: relid, attnum, typid, ..., sysid) and
 * horizon_ms (wall-clock ms, 0 = none) to fc's snapshot file.  Returns 0,
 * or the errno value of the failure (logged; the previous file stays
 * whole).  Only from the thread that commits t's filters
 * (table_live_filter).
 */
int persist_save(const struct config *cfg, const struct filter_config *fc, struct table *t,
                 const char *position, uint64_t horizon_ms, const struct table_ident *ident,
                 const struct log *lg);

/*
 * Table t's POST journal (t is journal_ctx) as a snapshot's journal
 * (snapshot_journal_fn: table_posts_export), for a snapshot made of its
 * live filter; the POST log's rewrites walk it too (postlog_live_fn).
 */
bool persist_journal(void *t, snapshot_count_fn count, snapshot_entry_fn each, void *ctx);

/*
 * The identity of a filter's column as snapshot metadata pairs (relid,
 * attnum, typid, base_typid, typmod, deterministic, spell, dboid, sysid,
 * type), the way persist_save writes them, and back (a snapshot without
 * them reads as zeros, which no database's identity matches).  For a
 * snapshot made elsewhere (a replica's upstream serves one).
 */
#define PERSIST_IDENT_KV 10
struct persist_ident_kv {
    struct snapshot_kv kv[PERSIST_IDENT_KV];
    char val[PERSIST_IDENT_KV][72];
};
void persist_ident_to_kv(const struct table_ident *id, struct persist_ident_kv *out);
void persist_ident_from_kv(const struct snapshot *s, struct table_ident *id);

#endif
