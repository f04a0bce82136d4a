/*
 * What anyone may ask of the key table (config_keys.c): how many keys there
 * are, each key's section, name, default, help, accepted values and reload
 * rule, for -h, the docs and the tests.  Below config.h, which includes it.
 */
#ifndef BLOOMGUARD_CONFIG_KEYS_H
#define BLOOMGUARD_CONFIG_KEYS_H

#include <stdbool.h>
#include <stddef.h>

#include "config_data.h"        /* enum config_reload, enum log_level */

/* Number of keys in the table. */
size_t config_key_count(void);

/*
 * Describe key i (0 <= i < config_key_count()), in table order, grouped by
 * section.  Each out-pointer may be NULL; the strings are static.
 * default_value is the text form the default is parsed from ("" for
 * uri_template, which has no default).  Returns false if i is out of range.
 */
bool config_key_at(size_t i, const char **section, const char **name,
                   const char **default_value, const char **help);

/* When a new value of key i takes effect (CONFIG_RESTART for i out of range). */
enum config_reload config_key_reload(size_t i);

/* Whether key i takes a new value on SIGHUP (RELOAD or REBUILD; else it needs a restart). */
bool config_key_reloads(size_t i);

/* Whether key i is a duration: it accepts units ("30s", "5min", "250ms"). */
bool config_key_duration(size_t i);

/*
 * Whether key i is a per-filter key: its global value is every filter's
 * default and a [filter NAME] section may set it by its bare name.
 */
bool config_key_per_filter(size_t i);

/*
 * The values key i accepts, from its row: "1..256", "> 1e-06 and < 0.5",
 * "401 | 403 | 404 | 410", "yes or no"; "" for strings.  Writes to buf,
 * truncated to len.
 */
void config_key_values(size_t i, char *buf, size_t len);

/*
 * A follow method's name (SYNC_METHOD_LIST): "logical", "feed", ...; "none"
 * for SYNC_NONE (a choice that found no method), "?" for an invalid value.
 */
const char *sync_method_name(enum sync_method m);

/* "error", "warn", "info" or "debug"; "?" for an invalid value. */
const char *config_log_level_name(enum log_level level);

#endif /* BLOOMGUARD_CONFIG_KEYS_H */
