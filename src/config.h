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

enum log_level { LOG_LVL_ERROR, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };

/*
 * Where /auth reads the original request URI.  AUTO tries X-Original-URI,
 * then X-Forwarded-Uri, then the path after /auth; the others read only
 * the one source their proxy sets, so a client cannot supply another.
 */
enum auth_uri_source {
    URI_SOURCE_AUTO, URI_SOURCE_X_ORIGINAL_URI, URI_SOURCE_X_FORWARDED_URI, URI_SOURCE_PATH
};

/* Upper bound of [server] max_id_bytes: callers may size stack buffers by it. */
#define CONFIG_MAX_ID_BYTES 65536

/* Most [auth] uri_template entries one configuration may hold. */
#define CONFIG_MAX_TEMPLATES 32

/* The per-table keys: the global sections give their defaults, [filter NAME] overrides them. */
struct filter_config {
    char *name;                   /* "default" for the filter the global keys define */
    char *table, *column;         /* [postgres] table, column */
    char *channel;                /* [sync] channel */
    uint64_t expected_items; double false_positive_rate; double headroom;      /* [filter] */
    unsigned rebuild_interval; uint64_t rebuild_after_deletes; bool auto_grow;  /* [sync] */
    uint64_t pending_limit, pending_max_bytes; unsigned pending_ttl;            /* [sync] */
};
#define CONFIG_MAX_FILTERS 64

/*
 * Every char * below is owned by the struct (heap, NUL-terminated, never
 * NULL after config_defaults) and released by config_free.  Replace a
 * string only through config_set so the old one is freed.
 */
struct config {
    /* [server] */
    char *listen_host;           /* from listen "host:port", default 127.0.0.1:8080; "[::1]:8080" IPv6 form allowed (brackets stripped here); port 0..65535 (0 = pick a free port) */
    unsigned listen_port;
    unsigned threads;            /* 0 = number of CPUs; max 256 */
    unsigned max_connections;    /* default 10000, 1..1000000 */
    unsigned connection_timeout; /* seconds, default 30, 0..86400 (0 = none) */
    uint64_t max_body_bytes;     /* default 1048576, 1..1073741824 */
    unsigned max_batch;          /* default 10000, 1..10000000 */
    unsigned max_id_bytes;       /* default 512, 1..65536 */
    unsigned header_timeout;     /* seconds to send a request's headers, default 5, 0..3600 (0 = none) */
    char *admin_token_file;      /* default "" (systemd credential admin_token, else no token) */
    /* [postgres] */
    char *conninfo;              /* default "" (libpq defaults / PG* env) */
    char *table;                 /* default "users"; "name" or "schema.name", each part 1..63 bytes, no '"' or control characters: quote each part as an identifier */
    char *column;                /* default "id"; 1..63 bytes, no '"' or control characters */
    unsigned retry_max_seconds;  /* cap of reconnect backoff, default 30, 1..3600 */
    /* [filter] */
    uint64_t expected_items;     /* default 0 = size from table row count * headroom; max 1e12 */
    double false_positive_rate;  /* [filter] false_positive_rate (bounds: filter.h) */
    double headroom;             /* default 2.0, 1.0..100.0 */
    /* [sync] */
    bool sync_enabled;           /* key "enabled", default yes: LISTEN/NOTIFY follower */
    char *channel;               /* default "bloomguard"; a valid identifier 1..55 bytes [A-Za-z_][A-Za-z0-9_]* (case is kept: quote it in LISTEN) */
    unsigned rebuild_interval;   /* seconds, default 0 = off, max 31536000 */
    uint64_t rebuild_after_deletes; /* default 0 = off */
    bool auto_grow;              /* key "auto_grow", default yes */
    uint64_t pending_limit;      /* POSTed ids remembered until seen in the table */
    uint64_t pending_max_bytes;  /* bytes of POSTed ids the journal may hold */
    unsigned pending_ttl;        /* seconds a journal entry lives without a COPY showing it */
    double max_staleness;        /* seconds; 0 = never degrade */
    double probe_interval;       /* seconds between follower round trips */
    unsigned min_rebuild_interval; /* seconds between the end of a rebuild and the next start */
    /* [auth] */
    char *uri_templates[CONFIG_MAX_TEMPLATES]; /* key "uri_template", repeatable: each occurrence appends; default none. Each starts with '/' and holds "{id}" exactly once, no other '{' '}' and no whitespace */
    unsigned uri_template_filter[CONFIG_MAX_TEMPLATES]; /* TEMPORARY shim: the filter each template checks */
    unsigned n_uri_templates;
    unsigned deny_status;        /* default 403; allowed values 401, 403, 404, 410 */
    unsigned allow_status;       /* default 204; 200 or 204 (Envoy's ext_authz allows only on 200) */
    enum auth_uri_source uri_source; /* key "uri_source", default auto */
    bool fail_open;              /* default yes */
    /* [metrics] */
    bool metrics_enabled;        /* key "enabled", default yes */
    /* [log] */
    enum log_level log_level;    /* key "level": error|warn|info|debug, default info */
    /* TEMPORARY shim until the config branch lands: filled by main from the globals. */
    struct filter_config filters[CONFIG_MAX_FILTERS];
    unsigned n_filters;
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

/* "error", "warn", "info" or "debug"; "?" for an invalid value. */
const char *config_log_level_name(enum log_level level);

#endif /* BLOOMGUARD_CONFIG_H */
