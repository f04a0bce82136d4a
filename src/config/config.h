/*
 * bloomguard's configuration: the INI file, the --section.key=value
 * overrides and their defaults, all driven by one table of keys so that
 * parsing, validation, the sample config and -h cannot drift apart.
 */
#ifndef BLOOMGUARD_CONFIG_H
#define BLOOMGUARD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config_data.h"       /* struct config, its enums and limits */
#include "config_keys.h"       /* the questions about the key table */

/*
 * Thread safety: no function here touches global state (libinih's option
 * variables are read, never written), so different struct configs may be
 * used from different threads; one struct config needs external locking.
 *
 * Error reporting: functions taking err/errlen write one line of text (no
 * trailing newline, truncated to errlen) on failure; err may be NULL when
 * errlen is 0.  256 bytes is plenty for any message.
 */

/*
 * Fill *c with the defaults of every key, allocating its strings.  Whatever
 * *c held before is overwritten, not freed: pass a fresh or freed struct.
 * Returns false only when memory runs out; *c is then still safe to pass to
 * config_free.
 */
bool config_defaults(struct config *c);

/*
 * Release every string in *c and reset the string fields to NULL and
 * n_uri_templates to 0.  Safe on a zeroed struct, a defaults-filled one,
 * one left half-updated by a failed load or set, and twice in a row.
 * c == NULL is a no-op.
 */
void config_free(struct config *c);

/*
 * Parse the INI file at path over the current values of *c (call
 * config_defaults first).  Each uri_template line appends to the templates
 * already in *c, so a reload should start from a fresh config_defaults
 * struct.  Unknown sections and keys, a key given twice in one file (other
 * than uri_template), lines that are not "[section]", "key = value", blank
 * or a comment, and values that fail validation are errors; parsing stops
 * at the first one and err gets e.g.
 *     bloomguard.conf:12: [server] max_batch: "abc" is not a number
 *     cannot open bloomguard.conf: No such file or directory
 * (path is quoted as given).  On failure *c may be partly updated but stays
 * valid for config_free; the caller is expected to discard it.
 *
 * "[filter NAME]" sections declare c->filters (see struct filter_config):
 * once the whole file is read, each takes the global value of every
 * per-filter key it does not set, and the filters and the templates' filter
 * names are checked; such an error names the line of the section header
 * or of the template.  config_set and config_override resolve again.
 *
 * File syntax: "[section]" headers, "key = value" (or "key: value"), whole
 * line comments starting with ';' or '#', and trailing comments starting
 * with ';' or '#' after whitespace.  Leading indentation is ignored (there
 * are no continuation lines).  A value may be wrapped in double quotes to
 * keep leading/trailing spaces or a " #" ("" is the empty string), but
 * libinih always ends a value at whitespace followed by ';', quoted or not.
 * Lines are limited to libinih's maximum line length (ini_max_line - 2,
 * 198 bytes with the Debian build); longer lines are reported as errors.
 */
bool config_load_file(struct config *c, const char *path, char *err, size_t errlen);

/*
 * As config_load_file, but parses the NUL-terminated text; name stands in
 * for the file name in error messages.
 */
bool config_load_string(struct config *c, const char *name, const char *text,
                        char *err, size_t errlen);

/*
 * Set one key from its text form, exactly as a file line "key = value"
 * inside [section] would, except that comments are not recognised: value
 * is trimmed and one pair of surrounding double quotes is removed.  The
 * value is copied.  On failure *c is unchanged and err gets e.g.
 *     [server] max_batch: "abc" is not a number
 *     unknown key [server] foo
 *     unknown section [foo]
 */
bool config_set(struct config *c, const char *section, const char *key,
                const char *value, char *err, size_t errlen);

/*
 * Apply one command-line override; arg is the text after "--", of the form
 * "section.key=value" (e.g. "server.listen=127.0.0.1:0").  The key is split
 * at the first '.', the value starts after the first '='.  Errors name the
 * argument, e.g. "--server.foo=1: unknown key [server] foo".  On failure *c
 * is unchanged.
 */
bool config_override(struct config *c, const char *arg, char *err, size_t errlen);

/*
 * Copy src into dst (fresh or freed, as for config_defaults), strings
 * included.  False when memory runs out; dst is then freed.
 */
bool config_copy(struct config *dst, const struct config *src);

/* One key a reload found changed (config_reload_diff). */
struct config_change {
    const char *section;        /* "server", "filter orders" (a [filter NAME] key), ... */
    const char *name;           /* the key, or "sections" for added/removed/renamed [filter NAME]s */
    const char *old_value;      /* in force before; "(changed)" for both of a secret key */
    const char *new_value;      /* read now */
    enum config_reload reload;  /* RESTART: the old value stays in force */
};

/*
 * For a reload: compare next (the configuration just read) with cur (the
 * one in force) key by key.  Every key that differs is reported to report
 * (when not NULL; the strings live for the call only), in table order.
 * Keys that need a restart are set back to cur's value in next, so next
 * can replace cur; the others keep next's.  A per-filter key is reported
 * as ("filter NAME", key) (or its global section without [filter NAME]
 * sections); added, removed or renamed sections as ("filter NAME",
 * "sections"), and then next gets cur's filters, wholesale.
 * *rebuild (when not NULL) gets one bit per filter of cur (bit f:
 * filters[f]) whose next load a changed key that now takes effect sizes
 * differently (CONFIG_REBUILD): a per-filter key sets its filter's bit, a
 * global one every filter's; 0 when none.  False when memory runs out or a
 * template of next names a filter cur does not have (err says which); next
 * is then still valid for config_free.
 */
bool config_reload_diff(struct config *next, const struct config *cur,
                        void (*report)(void *arg, const struct config_change *ch),
                        void *arg, uint64_t *rebuild, char *err, size_t errlen);

/*
 * After a reload put now in force in place of prev: run the apply hook of
 * every key whose value differs (e.g. [log] level sets ctx->log's level).
 * Call from the thread that owns ctx's objects.
 */
void config_apply_reload(const struct config *now, const struct config *prev,
                         const struct config_reload_ctx *ctx);

/* Index into c->filters of the filter with that name, -1 if none. */
int config_filter_find(const struct config *c, const char *name);

/*
 * A directory setting resolved: value itself, or for "auto" the first
 * ':'-separated entry of the environment variable env (systemd's
 * StateDirectory=/RuntimeDirectory= lists; the environment is only read).
 * Trailing slashes are dropped ("/" stays).  Writes out; false when the
 * result is empty (value NULL or "", auto without env) or does not fit.
 */
bool config_dir_resolve(const char *value, const char *env, char *out, size_t outlen);

#endif /* BLOOMGUARD_CONFIG_H */
