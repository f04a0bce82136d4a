/*
 * Inside the configuration module only: the shape of a key-table row and
 * the one interface every type of value implements, so that code handling
 * "any key" calls the row's type instead of switching on it, and the
 * helpers the parts share.  Everything declared here is defined below
 * config.c (config_keys.c, config_types.c, config_compound.c), so it sees
 * the configuration as data (config_data.h), never config.h.
 */
#ifndef BLOOMGUARD_CONFIG_INT_H
#define BLOOMGUARD_CONFIG_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config_data.h"
#include "errfmt.h"

/* Longest value quoted back in an error message. */
#define CONFIG_ERR_VALUE_MAX 80

struct config_key;

/*
 * One type of value.  obj is the struct the key's field lives in: struct
 * config, or struct filter_config for a per-filter key; the type finds the
 * field from the row (k->offset), and the two whole-config types (listen,
 * uri_template) reach their fields in struct config directly.  Error
 * messages are written without the "[section] key: " prefix.
 */
struct config_type {
    /* Parse text (already normalised) into obj; obj changes only on success, the old value freed. */
    bool (*set)(const struct config_key *k, void *obj, const char *text, char *err, size_t errlen);
    /*
     * Make dst's value a deep copy of src's.  dst's old value is owned (or
     * zero bytes) and freed on success; on failure (memory) dst is unchanged.
     */
    bool (*copy)(const struct config_key *k, void *dst, const void *src);
    /* Release what the value owns and leave its zero value (NULL strings); safe twice. */
    void (*free)(const struct config_key *k, void *obj);
    bool (*equal)(const struct config_key *k, const void *a, const void *b);
    /* The value as text for the reload log ("30s", "users", "2 templates"); truncated to len. */
    void (*format)(const struct config_key *k, const void *obj, char *buf, size_t len);
    /* The values the key accepts, from its row ("1..256", "yes or no"); "" when anything goes. */
    void (*values)(const struct config_key *k, char *buf, size_t len);
};

extern const struct config_type config_type_string;     /* char *, checked by k->check */
extern const struct config_type config_type_uint;       /* unsigned, min..max */
extern const struct config_type config_type_u64;        /* uint64_t, min..max */
extern const struct config_type config_type_double;     /* double, dmin..dmax, open or closed */
extern const struct config_type config_type_bool;       /* bool */
extern const struct config_type config_type_enum;       /* an int-sized field, from k->names */
extern const struct config_type config_type_seconds;    /* unsigned seconds, min..max; units allowed */
extern const struct config_type config_type_seconds_real; /* double seconds, dmin..dmax; units allowed */
extern const struct config_type config_type_listen;     /* listen_host + listen_port */
extern const struct config_type config_type_mode;       /* unsigned permission bits, octal text, <= 0777 */
extern const struct config_type config_type_template;   /* uri_templates[], appends */

/* One allowed text of an enum key and the value it stands for. */
struct config_enum_name {
    const char *name;           /* matched case-insensitively */
    int value;
};

/*
 * One row of the key table (config_keys.c).  Everything about a key is
 * here: tests, -h, the docs and the SIGHUP diff read it.
 */
struct config_key {
    const char *section;
    const char *name;
    const struct config_type *type;
    const char *def;            /* parsed like a file value by config_defaults; NULL: no default */
    enum config_reload reload;  /* when a new value takes effect (config_data.h) */
    bool per_filter;            /* offset is into struct filter_config; [filter NAME] may set it */
    bool secret;                /* never logged: a reload says "(changed)" */
    bool repeatable;            /* may be given more than once in a file (each appends) */
    uint64_t min, max;          /* uint, u64, seconds; mode: the bits allowed (0: any) */
    double dmin, dmax;          /* double, seconds_real */
    bool dmin_open, dmax_open;  /* double: the bound itself is rejected */
    const struct config_enum_name *names; /* enum: the allowed values, ended by a NULL name */
    size_t offset;              /* field in struct config or filter_config */
    bool (*check)(const char *value, char *err, size_t errlen); /* string: extra validation */
    /*
     * Apply hook: run by config_apply_reload when a reload changed the
     * key's value, with the configuration now in force.
     */
    void (*apply)(const struct config *c, const struct config_reload_ctx *ctx);
    const char *help;           /* what the key means; ranges and allowed values come from the row */
};

/* The table and its size (config_keys.c). */
extern const struct config_key config_keys[];
extern const size_t config_nkeys;

/* snprintf into err when err != NULL and errlen > 0 (errfmt.h). */
#define config_errf errfmt

/* Whether name is [a-z][a-z0-9_]{0,31}, a [filter NAME] name; err says why not. */
bool config_filter_name_valid(const char *name, char *err, size_t errlen);

/* Replace *dst by a heap copy of src (NULL stays NULL), freeing the old; false if out of memory. */
bool config_copy_string(char **dst, const char *src);
/* Whether a and b are both NULL or equal strings. */
bool config_same_string(const char *a, const char *b);

/* Index of [section] name in the key table, -1 if there is none. */
int config_key_find(const char *section, const char *name);
/* Index of the per-filter key with that bare name, -1 if none. */
int config_filter_key_find(const char *name);
/* Whether any key lives in [section]. */
bool config_section_known(const char *section);
/* Whether key i may be given more than once in a file (uri_template appends). */
bool config_key_repeatable(size_t i);
/* The check of [sync] channel, which resolving a filter's default channel applies too. */
bool config_check_channel(const char *v, char *err, size_t errlen);
/* The checks of single keys (config_checks.c): false with err saying why v will not do. */
bool config_check_table(const char *v, char *err, size_t errlen);
bool config_check_column(const char *v, char *err, size_t errlen);
bool config_check_peer(const char *v, char *err, size_t errlen);
bool config_check_upstreams(const char *v, char *err, size_t errlen);
bool config_check_group(const char *v, char *err, size_t errlen);
bool config_check_ident(const char *v, char *err, size_t errlen);
bool config_check_slot(const char *v, char *err, size_t errlen);

/*
 * The value proper of raw value text: trimmed, one pair of double quotes
 * removed and, with comments (file syntax), a trailing " #comment" or
 * " ;comment" dropped.  A heap string for the caller to free; NULL with a
 * message on error.
 */
char *config_value_normalize(const char *raw, bool comments, char *err, size_t errlen);

/*
 * Parse a duration: a plain number is in seconds (as before units
 * existed); otherwise a number and one unit, with optional blanks between:
 * us, ms, s/sec, min/m, h, d (PostgreSQL's and systemd's spellings).
 * *out gets seconds.  False with a message for any other text.
 */
bool config_parse_duration(const char *v, double *out, char *err, size_t errlen);

#endif
