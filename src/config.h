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

#include "log.h"                /* enum log_level */

/*
 * Where /auth reads the original request URI.  AUTO tries X-Original-URI,
 * then X-Forwarded-Uri, then the path after /auth; the others read only
 * the one source their proxy sets, so a client cannot supply another.
 */
enum auth_uri_source {
    URI_SOURCE_AUTO, URI_SOURCE_X_ORIGINAL_URI, URI_SOURCE_X_FORWARDED_URI, URI_SOURCE_PATH
};

/* [sync] method: how a table is followed after its first load (follow.h). */
enum sync_method { SYNC_AUTO, SYNC_LOGICAL, SYNC_FEED, SYNC_NOTIFY };

/* Upper bound of [server] max_id_bytes: callers may size stack buffers by it. */
#define CONFIG_MAX_ID_BYTES 65536

/* Most [auth] uri_template entries one configuration may hold. */
#define CONFIG_MAX_TEMPLATES 32

/* Most [filter NAME] sections; a name is [a-z][a-z0-9_]{0,31}. */
#define CONFIG_MAX_FILTERS 64
#define CONFIG_FILTER_NAME_MAX 32

/*
 * The per-table keys: the global sections give their defaults, [filter
 * NAME] overrides them.  Strings as in struct config.
 */
struct filter_config {
    char *name;                  /* "default" for the filter the global keys define */
    char *table;                 /* [postgres] table: "name" or "schema.name", quote each part as an identifier */
    char *column;                /* [postgres] column */
    char *channel;               /* [sync] channel, an identifier; case is kept: quote it in LISTEN.
                                    In [filter NAME] it defaults to <global channel>_<NAME> */
    uint64_t expected_items;     /* [filter]; 0 = size from table row count * headroom */
    double false_positive_rate;  /* [filter]; bounds: filter.h */
    double headroom;             /* [filter] */
    unsigned max_layers;         /* [filter] layers the filter may grow to (filter.h) */
    double growth;               /* [filter] a new layer's size over the items so far */
    int kind;                    /* [filter] kind: enum filter_kind (filter.h) */
    unsigned rebuild_interval;   /* [sync] seconds; 0 = off */
    uint64_t rebuild_after_deletes; /* [sync]; 0 = off */
    bool auto_grow;              /* [sync] */
    int method;                  /* [sync] method: enum sync_method */
    uint64_t pending_limit;      /* [sync] POSTed ids remembered until seen in the table */
    uint64_t pending_max_bytes;  /* [sync] bytes of POSTed ids the journal may hold */
    unsigned pending_ttl;        /* [sync] seconds a journal entry lives without a COPY showing it */
};

/*
 * Every char * below is owned by the struct (heap, NUL-terminated, never
 * NULL after config_defaults) and released by config_free.  Replace a
 * string only through config_set so the old one is freed.  The comments say
 * what a field means; defaults, ranges and allowed values are in the key
 * table of config.c (bloomguard -h lists them).
 */
struct config {
    /* [server] */
    char *listen_host;           /* key "listen" = "host:port" or "[v6addr]:port": the host, brackets stripped */
    unsigned listen_port;        /* ... and the port; 0 = pick a free one */
    unsigned listen_mode;        /* a unix socket's permission bits (at most 0777) */
    char *listen_group;          /* a unix socket's group: a name or a gid; "" = the process's */
    unsigned threads;            /* worker threads; 0 = number of CPUs */
    unsigned max_connections;    /* client connections open at once */
    unsigned connection_timeout; /* seconds an idle connection is kept; 0 = none */
    uint64_t max_body_bytes;     /* largest request body */
    unsigned max_batch;          /* most ids in one batch request */
    unsigned max_id_bytes;       /* longest id (at most CONFIG_MAX_ID_BYTES) */
    unsigned header_timeout;     /* seconds to send a request's headers; 0 = none */
    char *admin_token_file;      /* "" = systemd credential admin_token, else no token */
    char *publish_dir;           /* where filters are published (publish.h); "" = off, "auto" = $RUNTIME_DIRECTORY */
    /* [postgres] */
    char *conninfo;              /* "" = libpq defaults / PG* env */
    unsigned retry_max_seconds;  /* cap of reconnect backoff */
    /* [sync] */
    bool sync_enabled;           /* key "enabled": LISTEN/NOTIFY follower */
    double max_staleness;        /* seconds; 0 = never degrade */
    double probe_interval;       /* seconds between follower round trips */
    unsigned min_rebuild_interval; /* seconds between the end of a rebuild and the next start */
    double poll_interval;        /* seconds between reads of the change feed (method feed) */
    char *publication;           /* the publication method logical reads, an identifier */
    char *slot_name;             /* key "slot": "auto" or a replication slot name */
    unsigned logical_max_daemons; /* auto: past this many other bloomguard slots, prefer the feed */
    /* [snapshot] */
    char *snapshot_path;         /* key "path": directory of <name>.snap files; "" = off */
    unsigned snapshot_interval;  /* seconds between periodic snapshots; 0 = only after loads */
    char *bootstrap_from;        /* "http://host[:port]" of a peer, "" = none */
    /* [feed] */
    bool feed_enabled;           /* key "enabled": catch up from the change feed where installed */
    unsigned feed_retention;     /* seconds of changes bloomguard_feed_prune keeps */
    unsigned feed_prune_interval; /* seconds between prunes; 0 = never */
    /*
     * The filters, in file order; filters[0] is the default one (GET
     * /exists/{id}, templates that name none).  Without [filter NAME]
     * sections there is exactly one, "default", made of the global keys.
     */
    struct filter_config filters[CONFIG_MAX_FILTERS];
    unsigned n_filters;
    /*
     * Private to config.c: the per-filter keys as the global sections set
     * them (each filter starts from these), and which keys each [filter
     * NAME] section set itself (bit = index in the key table).
     */
    struct filter_config base;
    uint64_t filter_set[CONFIG_MAX_FILTERS];
    bool named_filters;          /* the file has [filter NAME] sections */
    /* [auth] */
    char *uri_templates[CONFIG_MAX_TEMPLATES]; /* key "uri_template", repeatable: each occurrence appends (uritmpl_valid holds) */
    char *uri_template_names[CONFIG_MAX_TEMPLATES]; /* the filter named after the template, NULL: none */
    unsigned uri_template_filter[CONFIG_MAX_TEMPLATES]; /* index into filters[] of each template's filter */
    unsigned n_uri_templates;
    unsigned deny_status;        /* HTTP status for an unknown id */
    unsigned allow_status;       /* HTTP status for a maybe-known id */
    enum auth_uri_source uri_source; /* key "uri_source" */
    bool fail_open;
    /* [metrics] */
    bool metrics_enabled;        /* key "enabled" */
    /* [log] */
    enum log_level log_level;    /* key "level" */
    char *log_file;              /* key "file": "" = standard error */
};

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

/*
 * Copy src into dst (fresh or freed, as for config_defaults), strings
 * included.  False when memory runs out; dst is then freed.
 */
bool config_copy(struct config *dst, const struct config *src);

/*
 * When a new value of a key takes effect.  A SIGHUP puts RELOAD and
 * REBUILD keys in force at once (the daemon reads them through live.h);
 * REBUILD keys size a filter's next load, so a SIGHUP that changes one
 * rebuilds the filters it concerns, and only then.  RESTART keys keep
 * their old value until a restart (the follower threads keep the start
 * configuration).
 */
enum config_reload { CONFIG_RELOAD, CONFIG_REBUILD, CONFIG_RESTART };

/* What the keys' apply hooks act on (config_apply_reload); main.c fills it. */
struct config_reload_ctx {
    struct log *log;
};

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

/* Index into c->filters of the filter with that name, -1 if none. */
int config_filter_find(const struct config *c, const char *name);

/*
 * The values key i accepts, from its row: "1..256", "> 1e-06 and < 0.5",
 * "401 | 403 | 404 | 410", "yes or no"; "" for strings.  Writes to buf,
 * truncated to len.
 */
void config_key_values(size_t i, char *buf, size_t len);

/*
 * A directory setting resolved: value itself, or for "auto" the first
 * ':'-separated entry of the environment variable env (systemd's
 * StateDirectory=/RuntimeDirectory= lists; the environment is only read).
 * Trailing slashes are dropped ("/" stays).  Writes out; false when the
 * result is empty (value NULL or "", auto without env) or does not fit.
 */
bool config_dir_resolve(const char *value, const char *env, char *out, size_t outlen);

/* "error", "warn", "info" or "debug"; "?" for an invalid value. */
const char *config_log_level_name(enum log_level level);

#endif /* BLOOMGUARD_CONFIG_H */
