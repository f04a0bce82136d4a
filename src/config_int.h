/*
 * Between config.c (the key table) and conffile.c (the file reader) only:
 * the reader finds keys and hands their values to the table through these.
 */
#ifndef BLOOMGUARD_CONFIG_INT_H
#define BLOOMGUARD_CONFIG_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"

/* Longest value quoted back in an error message. */
#define CONFIG_ERR_VALUE_MAX 80

/* snprintf into err when err != NULL and errlen > 0. */
void config_errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Index of [section] name in the key table, -1 if there is none. */
int config_key_find(const char *section, const char *name);
/* Whether any key lives in [section]. */
bool config_section_known(const char *section);
/* Whether key i may be given more than once in a file (uri_template appends). */
bool config_key_repeatable(size_t i);
/* Parse value (already normalised) into key i of *c; *c changes only on success. */
bool config_key_apply(struct config *c, size_t i, const char *value, char *err, size_t errlen);

/* [filter NAME] sections. */
/* Whether name is [a-z][a-z0-9_]{0,31}; err says why not. */
bool config_filter_name_valid(const char *name, char *err, size_t errlen);
/* A new filter from a [filter NAME] header: its index, or -1 (bad name, twice, too many). */
int config_filter_add(struct config *c, const char *name, char *err, size_t errlen);
/* Index of the per-filter key with that bare name, -1 if none. */
int config_filter_key_find(const char *name);
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

/*
 * (conffile.c) The value proper of raw value text: trimmed, one pair of
 * double quotes removed and, with comments, a trailing " #comment" or
 * " ;comment" dropped.  A heap string for the caller to free; NULL with a
 * message on error.
 */
char *config_normalize_value(const char *raw, bool comments, char *err, size_t errlen);

#endif
