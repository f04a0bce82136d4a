/*
 * What bloomguard does with snapshots (src/snapshot.h is the format): where
 * each filter's file lives, restoring a table at start from its file or a
 * peer, and writing it back.  Called from the rebuild thread, which is the
 * only one that swaps a guard's filter, so the live filter stays alive while
 * it is streamed to disk (guard_live).
 */
#ifndef BLOOMGUARD_PERSIST_H
#define BLOOMGUARD_PERSIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "guard.h"
#include "log.h"
#include "pending.h"

/* Longest snapshot file name persist_file writes. */
#define PERSIST_PATH_MAX 4096

/*
 * The snapshot file of filter fc: "<[snapshot] path>/<name>.snap".  False
 * when snapshots are off (path empty) or the name does not fit in outlen.
 */
bool persist_file(const struct config *cfg, const struct filter_config *fc, char *out,
                  size_t outlen);

#endif
