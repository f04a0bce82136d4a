/*
 * Building a configuration one line at a time: the steps of config.c that
 * the file reader (conffile.c) takes for each [filter NAME] header and
 * "key = value" line, and the checks across keys once the file is read.
 * Inside the configuration module only; config_set is the same for one key.
 */
#ifndef BLOOMGUARD_CONFIG_BUILD_H
#define BLOOMGUARD_CONFIG_BUILD_H

#include <stdbool.h>
#include <stddef.h>

#include "config_data.h"

/*
 * Parse value (already normalised: config_value_normalize) into key i of
 * the key table (its global value for a per-filter key); *c changes only on
 * success.
 */
bool config_key_apply(struct config *c, size_t i, const char *value, char *err, size_t errlen);

/*
 * A new filter from a [filter NAME] header: its index, or -1 (bad name,
 * twice, too many).  The first one replaces the filter the global keys made.
 */
int config_filter_add(struct config *c, const char *name, char *err, size_t errlen);

/* Parse value into per-filter key i of filter f, and mark it set in that section. */
bool config_key_apply_filter(struct config *c, unsigned f, size_t i, const char *value,
                             char *err, size_t errlen);

/*
 * After the whole file (or an override): fill each filter's unset keys from
 * the global values (channel: <global channel>_<NAME>), refuse two filters
 * on one table and column or one channel, and find each template's filter.
 * Idempotent.  On failure *blame_filter or *blame_template is the index at
 * fault (else -1) so the caller can name its line.
 */
bool config_resolve(struct config *c, int *blame_filter, int *blame_template,
                    char *err, size_t errlen);

#endif /* BLOOMGUARD_CONFIG_BUILD_H */
