/*
 * The directories a run removes and replaces files in, [snapshot] path
 * (snapshots, POST logs, the slot's name) and [server] publish_dir, made
 * one daemon's: locked (dirlock.h) before anything in them is written or
 * removed, so that a second daemon started on them stops at once instead
 * of taking the first one's files away; and looked after on the main
 * thread's tick (the locks still at their names, each published filter
 * at its path: publish_check).
 */
#ifndef BLOOMGUARD_RUNDIRS_H
#define BLOOMGUARD_RUNDIRS_H

#include "config.h"
#include "log.h"
#include "publish.h"
#include "source.h"

struct rundirs;

/*
 * Lock cfg's state directory (when snapshots are on and it exists: a
 * missing one holds nothing to protect) and its publishing directory (when
 * publishing is on: made first if missing, under publish_dir_check's
 * rules; one lock when both are one directory).  NULL when a lock is held
 * by another process or cannot be taken (logged as an error naming the
 * directory, and the holder's pid): the start must stop (exit 2).  Logs
 * that nothing is published when publish_dir = auto finds no
 * RUNTIME_DIRECTORY.  Not thread-safe (reads the environment).
 */
struct rundirs *rundirs_take(const struct config *cfg, const struct log *lg);

/* The publishing directory, "" when publishing is off. */
const char *rundirs_publish_dir(const struct rundirs *d);

/*
 * One tick: each lock still at its name (taken again if the file was
 * removed; logged), a removed publishing directory made again, then, only
 * while this run holds the publishing directory, publish_check of each of
 * cfg's n_filters publishers (pubs[t], NULL: none), asking src for a
 * rebuild (WANT_REPUBLISH) of a table whose published file is lost.  From
 * one thread.
 */
void rundirs_check(struct rundirs *d, const struct config *cfg, struct publish **pubs,
                   struct source *src, const struct log *lg);

/* Release the locks and free d, once nothing more is written there.  NULL: no-op. */
void rundirs_free(struct rundirs *d);

#endif
