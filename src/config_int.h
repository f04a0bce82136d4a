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

/*
 * (conffile.c) The value proper of raw value text: trimmed, one pair of
 * double quotes removed and, with comments, a trailing " #comment" or
 * " ;comment" dropped.  A heap string for the caller to free; NULL with a
 * message on error.
 */
char *config_normalize_value(const char *raw, bool comments, char *err, size_t errlen);

#endif
