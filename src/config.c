/*
 * Configuration loading for bloomguard: a table with one row per key drives
 * defaults, INI parsing (libinih), --section.key=value overrides and the key
 * listing, so every rule about a key lives in exactly one place.
 */
#include "config.h"
#include "filter.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A config file bigger than this is surely a mistake (wrong path). */
#define CONFIG_MAX_FILE_BYTES (1024 * 1024)
/* Longest value quoted back in an error message. */
#define ERR_VALUE_MAX 80
/* PostgreSQL's NAMEDATALEN - 1. */
#define PG_IDENT_MAX 63
/* Deletes are notified on "<channel>_deleted", which must fit in 63 bytes too. */
#define CHANNEL_MAX (PG_IDENT_MAX - 8)

enum key_type {
    T_STRING,   /* char *, optionally checked by key_def.check */
    T_UINT,     /* unsigned, min..max */
    T_UINT64,   /* uint64_t, min..max */
    T_DOUBLE,   /* double, dmin..dmax, either bound open or closed */
    T_BOOL,     /* bool */
    T_LISTEN,   /* listen_host + listen_port */
    T_LOGLEVEL, /* enum log_level */
    T_TEMPLATE, /* appends to uri_templates */
    T_STATUS,   /* unsigned HTTP deny status from a fixed set */
    T_ALLOW,    /* unsigned HTTP allow status: 200 or 204 */
    T_URISRC    /* enum auth_uri_source */
};

struct key_def {
    const char *section;
    const char *name;
    enum key_type type;
    const char *def;            /* parsed like a file value by config_defaults */
    uint64_t min, max;          /* T_UINT, T_UINT64 */
    double dmin, dmax;          /* T_DOUBLE */
    bool dmin_open, dmax_open;  /* T_DOUBLE: the bound itself is rejected */
    size_t offset;              /* field in struct config (not T_LISTEN, T_TEMPLATE) */
    bool (*check)(const char *value, char *err, size_t errlen); /* T_STRING */
    const char *help;
};

#define FIELD(f) offsetof(struct config, f)
#define K_STR(s, k, d, f, chk, h) \
    { .section = (s), .name = (k), .type = T_STRING, .def = (d), \
      .offset = FIELD(f), .check = (chk), .help = (h) }
#define K_UINT(s, k, d, f, lo, hi, h) \
    { .section = (s), .name = (k), .type = T_UINT, .def = (d), \
      .min = (lo), .max = (hi), .offset = FIELD(f), .help = (h) }
#define K_U64(s, k, d, f, lo, hi, h) \
    { .section = (s), .name = (k), .type = T_UINT64, .def = (d), \
      .min = (lo), .max = (hi), .offset = FIELD(f), .help = (h) }
#define K_DBL(s, k, d, f, lo, lo_open, hi, hi_open, h) \
    { .section = (s), .name = (k), .type = T_DOUBLE, .def = (d), \
      .dmin = (lo), .dmin_open = (lo_open), .dmax = (hi), .dmax_open = (hi_open), \
      .offset = FIELD(f), .help = (h) }
#define K_BOOL(s, k, d, f, h) \
    { .section = (s), .name = (k), .type = T_BOOL, .def = (d), \
      .offset = FIELD(f), .help = (h) }
#define K_TYPED(s, k, t, d, f, h) \
    { .section = (s), .name = (k), .type = (t), .def = (d), \
      .offset = FIELD(f), .help = (h) }

static bool check_table(const char *v, char *err, size_t errlen);
static bool check_column(const char *v, char *err, size_t errlen);
static bool check_channel(const char *v, char *err, size_t errlen);

/*
 * The one list of keys.  Keep it grouped by section in the order of the
 * sample config; conf/bloomguard.conf must mention every row (a test
 * checks).  Defaults are text so they go through the same validation as
 * user input.
 */
static const struct key_def keys[] = {
    K_TYPED("server", "listen", T_LISTEN, "127.0.0.1:8080", listen_host,
            "address to listen on, host:port or [ipv6]:port; port 0 picks a free port"),
    K_UINT("server", "threads", "0", threads, 0, 256,
           "worker threads, 0 = one per CPU (at most 256)"),
    K_UINT("server", "max_connections", "1024", max_connections, 1, 1000000,
           "most client connections open at once (1..1000000)"),
    K_UINT("server", "connection_timeout", "30", connection_timeout, 0, 86400,
           "seconds an idle client connection is kept, 0 = forever (at most 86400)"),
    K_U64("server", "max_body_bytes", "1048576", max_body_bytes, 1, 1073741824,
          "largest request body accepted, in bytes (1..1073741824)"),
    K_UINT("server", "max_batch", "10000", max_batch, 1, 10000000,
           "most ids accepted in one batch request (1..10000000)"),
    K_UINT("server", "max_id_bytes", "512", max_id_bytes, 1, CONFIG_MAX_ID_BYTES,
           "longest id accepted, in bytes (1..65536)"),

    K_STR("postgres", "conninfo", "", conninfo, NULL,
          "libpq connection string; empty uses the libpq defaults and PG* environment variables"),
    K_STR("postgres", "table", "users", table, check_table,
          "table holding the ids, optionally schema-qualified as schema.table"),
    K_STR("postgres", "column", "id", column, check_column,
          "column of that table holding the ids"),
    K_UINT("postgres", "retry_max_seconds", "30", retry_max_seconds, 1, 3600,
           "longest wait between reconnection attempts, in seconds (1..3600)"),

    K_U64("filter", "expected_items", "0", expected_items, 0, UINT64_C(1000000000000),
          "items the filter is sized for, 0 = table row count times headroom (at most 1e12)"),
    K_DBL("filter", "false_positive_rate", "0.01", false_positive_rate,
          FILTER_MIN_FPP, true, FILTER_MAX_FPP, true,
          "target false positive rate, greater than 0.000001 and less than 0.5"),
    K_DBL("filter", "headroom", "2.0", headroom, 1.0, false, 100.0, false,
          "factor applied to the table row count when expected_items is 0 (1..100)"),

    K_BOOL("sync", "enabled", "yes", sync_enabled,
           "follow changes to the table with LISTEN/NOTIFY"),
    K_STR("sync", "channel", "bloomguard", channel, check_channel,
          "NOTIFY channel, an identifier of 1..55 characters [A-Za-z_][A-Za-z0-9_]*; deletes use <channel>_deleted"),
    K_UINT("sync", "rebuild_interval", "0", rebuild_interval, 0, 31536000,
           "rebuild the filter from the table every this many seconds, 0 = never"),
    K_U64("sync", "rebuild_after_deletes", "0", rebuild_after_deletes, 0, UINT64_MAX,
          "rebuild the filter after this many deletes, 0 = never"),
    K_BOOL("sync", "auto_grow", "yes", auto_grow,
           "rebuild a larger filter when the table outgrows the current one"),
    K_U64("sync", "pending_limit", "1000000", pending_limit, 0, 100000000,
          "ids POSTed to /ids that are kept across rebuilds until the table holds them, 0 = none"),
    K_U64("sync", "pending_max_bytes", "67108864", pending_max_bytes, 0, UINT64_C(17179869184),
          "bytes of ids that journal may hold (at most 16 GiB); a POST that would exceed it or pending_limit is refused"),
    K_UINT("sync", "pending_ttl", "3600", pending_ttl, 1, 31536000,
           "seconds a POSTed id stays in the journal when no COPY shows it in the table (1..31536000)"),
    K_DBL("sync", "max_staleness", "2", max_staleness, 0.0, false, 3600.0, false,
          "seconds: when bloomguard cannot show that it has every row committed longer ago than this, "
          "answers that would be 404 or deny become 200 or allow (degraded); 0 = never degrade"),
    K_DBL("sync", "probe_interval", "0.2", probe_interval, 0.01, false, 60.0, false,
          "seconds between the follower's round trips that prove it is up to date (0.01..60)"),
    K_UINT("sync", "min_rebuild_interval", "30", min_rebuild_interval, 0, 86400,
           "least seconds from the end of one rebuild to the start of the next (after the first load), 0 = none"),

    K_TYPED("auth", "uri_template", T_TEMPLATE, "", uri_templates,
            "request path with {id} where the id goes, e.g. /user/get/{id}; repeat the key for more"),
    K_TYPED("auth", "deny_status", T_STATUS, "403", deny_status,
            "HTTP status for an unknown id: 401, 403, 404 or 410"),
    K_TYPED("auth", "allow_status", T_ALLOW, "204", allow_status,
            "HTTP status for an id that may exist or a URI no template matches: 204, or 200 for Envoy"),
    K_BOOL("auth", "fail_open", "yes", fail_open,
           "allow requests while no filter is loaded, instead of denying them"),
    K_TYPED("auth", "uri_source", T_URISRC, "auto", uri_source,
            "where the original URI comes from: auto, x-original-uri (nginx), x-forwarded-uri (Traefik) or path (Envoy)"),

    K_BOOL("metrics", "enabled", "yes", metrics_enabled,
           "serve the metrics endpoint"),

    K_TYPED("log", "level", T_LOGLEVEL, "info", log_level,
            "least severe messages logged: error, warn, info or debug"),
};

#define KEY_COUNT (sizeof keys / sizeof keys[0])

static const unsigned deny_statuses[] = { 401, 403, 404, 410 };
static const char *const level_names[] = {
    [LOG_LVL_ERROR] = "error", [LOG_LVL_WARN] = "warn",
    [LOG_LVL_INFO] = "info", [LOG_LVL_DEBUG] = "debug",
};

static void errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void errf(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (err == NULL || errlen == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static const struct key_def *find_key(const char *section, const char *name)
{
    for (size_t i = 0; i < KEY_COUNT; i++)
        if (strcmp(keys[i].section, section) == 0 && strcmp(keys[i].name, name) == 0)
            return &keys[i];
    return NULL;
}

static bool section_known(const char *section)
{
    for (size_t i = 0; i < KEY_COUNT; i++)
        if (strcmp(keys[i].section, section) == 0)
            return true;
    return false;
}

/* --- value parsers: each writes a message without the key prefix --- */

/* 0: ok, -1: not a plain decimal number, 1: does not fit in 64 bits. */
static int parse_u64(const char *v, uint64_t *out)
{
    char *end;
    unsigned long long x;

    /* strtoull would accept leading space, '+' and '-' (negating!). */
    if (!isdigit((unsigned char)v[0]))
        return -1;
    errno = 0;
    x = strtoull(v, &end, 10);
    if (*end != '\0')
        return -1;
    if (errno == ERANGE)
        return 1;
    *out = x;
    return 0;
}

static bool parse_ranged(const char *v, uint64_t min, uint64_t max, uint64_t *out,
                         char *err, size_t errlen)
{
    uint64_t x = 0;
    int r = parse_u64(v, &x);

    if (r < 0) {
        errf(err, errlen, "\"%.*s\" is not a number", ERR_VALUE_MAX, v);
        return false;
    }
    if (r > 0 || x < min || x > max) {
        errf(err, errlen, "%.*s is out of range (%llu..%llu)", ERR_VALUE_MAX, v,
             (unsigned long long)min, (unsigned long long)max);
        return false;
    }
    *out = x;
    return true;
}

static bool parse_double(const struct key_def *k, const char *v, double *out,
                         char *err, size_t errlen)
{
    char *end;
    double x;

    /* Plain decimal only: strtod would also take "inf", "nan" and hex. */
    if (v[0] == '\0' || strspn(v, "0123456789.eE+-") != strlen(v))
        goto fail;
    x = strtod(v, &end);
    if (end == v || *end != '\0')
        goto fail;
    if (!isfinite(x) || (k->dmin_open ? x <= k->dmin : x < k->dmin) ||
        (k->dmax_open ? x >= k->dmax : x > k->dmax)) {
        errf(err, errlen, "%.*s is out of range (must be %s %g and %s %g)", ERR_VALUE_MAX, v,
             k->dmin_open ? ">" : ">=", k->dmin, k->dmax_open ? "<" : "<=", k->dmax);
        return false;
    }
    *out = x;
    return true;

fail:
    errf(err, errlen, "\"%.*s\" is not a number", ERR_VALUE_MAX, v);
    return false;
}

static bool parse_bool(const char *v, bool *out, char *err, size_t errlen)
{
    static const char *const yes[] = { "yes", "true", "on", "1" };
    static const char *const no[] = { "no", "false", "off", "0" };

    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (strcasecmp(v, yes[i]) == 0) {
            *out = true;
            return true;
        }
        if (strcasecmp(v, no[i]) == 0) {
            *out = false;
            return true;
        }
    }
    errf(err, errlen, "\"%.*s\" is not a boolean (use yes/no, true/false, on/off or 1/0)",
         ERR_VALUE_MAX, v);
    return false;
}

/* An IPv6 literal as written between brackets, with an optional %zone. */
static bool valid_ipv6(const char *s, size_t len)
{
    char addr[INET6_ADDRSTRLEN];
    struct in6_addr a6;
    const char *pct = memchr(s, '%', len);
    size_t alen = pct != NULL ? (size_t)(pct - s) : len;

    if (alen == 0 || alen >= sizeof addr)
        return false;
    memcpy(addr, s, alen);
    addr[alen] = '\0';
    if (inet_pton(AF_INET6, addr, &a6) != 1)
        return false;
    if (pct == NULL)
        return true;
    /* Interface names or numbers: eth0, enp3s0.100, 2. */
    size_t zlen = len - alen - 1;
    return zlen > 0 && zlen <= 64 &&
           strspn(pct + 1, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                           "0123456789_.-") >= zlen;
}

/*
 * Split "host:port" or "[v6addr]:port".  Only the shape is checked here;
 * whether the name resolves is the listener's business.
 */
static bool parse_listen(const char *v, char **host, unsigned *port, char *err, size_t errlen)
{
    const char *h, *hend, *p;
    uint64_t x = 0;
    size_t hlen;

    if (v[0] == '[') {
        h = v + 1;
        hend = strchr(h, ']');
        if (hend == NULL) {
            errf(err, errlen, "\"%.*s\" lacks the closing ']' of the IPv6 address",
                 ERR_VALUE_MAX, v);
            return false;
        }
        if (hend[1] != ':') {
            errf(err, errlen, "\"%.*s\" has no port (expected [address]:port)", ERR_VALUE_MAX, v);
            return false;
        }
        p = hend + 2;
        hlen = (size_t)(hend - h);
        if (!valid_ipv6(h, hlen)) {
            errf(err, errlen, "\"%.*s\" is not a valid IPv6 address", ERR_VALUE_MAX, v);
            return false;
        }
    } else {
        const char *colon = strrchr(v, ':');

        if (colon == NULL) {
            errf(err, errlen, "\"%.*s\" has no port (expected host:port)", ERR_VALUE_MAX, v);
            return false;
        }
        h = v;
        hend = colon;
        hlen = (size_t)(hend - h);
        p = colon + 1;
        if (memchr(h, ':', hlen) != NULL) {
            errf(err, errlen, "\"%.*s\": write IPv6 addresses in brackets, like [::1]:8080",
                 ERR_VALUE_MAX, v);
            return false;
        }
        if (hlen == 0) {
            errf(err, errlen, "\"%.*s\" has no host (use 0.0.0.0 or [::] for all addresses)",
                 ERR_VALUE_MAX, v);
            return false;
        }
        /* Host names (RFC 1123, at most 253 bytes) and IPv4 literals. */
        if (hlen > 253 || strspn(h, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                    "0123456789.-_") < hlen) {
            errf(err, errlen, "\"%.*s\": invalid host name or address",
                 ERR_VALUE_MAX, v);
            return false;
        }
    }
    if (*p == '\0') {
        errf(err, errlen, "\"%.*s\" has no port (expected host:port)", ERR_VALUE_MAX, v);
        return false;
    }
    if (parse_u64(p, &x) != 0 || x > 65535) {
        errf(err, errlen, "\"%.*s\": port %.*s is not a number in 0..65535", ERR_VALUE_MAX, v,
             ERR_VALUE_MAX, p);
        return false;
    }
    *host = strndup(h, hlen);
    if (*host == NULL) {
        errf(err, errlen, "out of memory");
        return false;
    }
    *port = (unsigned)x;
    return true;
}

static bool parse_level(const char *v, enum log_level *out, char *err, size_t errlen)
{
    for (size_t i = 0; i < sizeof level_names / sizeof level_names[0]; i++) {
        if (strcasecmp(v, level_names[i]) == 0) {
            *out = (enum log_level)i;
            return true;
        }
    }
    errf(err, errlen, "\"%.*s\" is not a log level (use error, warn, info or debug)",
         ERR_VALUE_MAX, v);
    return false;
}

static bool parse_status(const char *v, unsigned *out, char *err, size_t errlen)
{
    uint64_t x = 0;

    if (parse_u64(v, &x) == 0)
        for (size_t i = 0; i < sizeof deny_statuses / sizeof deny_statuses[0]; i++)
            if (x == deny_statuses[i]) {
                *out = deny_statuses[i];
                return true;
            }
    errf(err, errlen, "\"%.*s\" is not an allowed status (use 401, 403, 404 or 410)",
         ERR_VALUE_MAX, v);
    return false;
}

static bool parse_allow(const char *v, unsigned *out, char *err, size_t errlen)
{
    uint64_t x = 0;

    if (parse_u64(v, &x) == 0 && (x == 200 || x == 204)) {
        *out = (unsigned)x;
        return true;
    }
    errf(err, errlen, "\"%.*s\" is not an allowed status (use 200 or 204)", ERR_VALUE_MAX, v);
    return false;
}

static bool parse_uri_source(const char *v, enum auth_uri_source *out, char *err, size_t errlen)
{
    static const char *const names[] = { "auto", "x-original-uri", "x-forwarded-uri", "path" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcasecmp(v, names[i]) == 0) {
            *out = (enum auth_uri_source)i;
            return true;
        }
    errf(err, errlen, "\"%.*s\" is not one of auto, x-original-uri, x-forwarded-uri, path",
         ERR_VALUE_MAX, v);
    return false;
}

static bool check_template(const char *v, char *err, size_t errlen)
{
    unsigned ids = 0;

    if (v[0] != '/') {
        errf(err, errlen, "\"%.*s\" must start with '/'", ERR_VALUE_MAX, v);
        return false;
    }
    for (const char *p = v; *p != '\0'; p++) {
        if (strncmp(p, "{id}", 4) == 0) {
            ids++;
            p += 3;
        } else if (*p == '{' || *p == '}') {
            errf(err, errlen, "\"%.*s\": {id} is the only placeholder allowed", ERR_VALUE_MAX, v);
            return false;
        } else if (isspace((unsigned char)*p) || iscntrl((unsigned char)*p)) {
            errf(err, errlen, "\"%.*s\" must not contain whitespace or control characters",
                 ERR_VALUE_MAX, v);
            return false;
        }
    }
    if (ids != 1) {
        errf(err, errlen, "\"%.*s\" must contain {id} exactly once", ERR_VALUE_MAX, v);
        return false;
    }
    return true;
}

/*
 * The loader quotes names as identifiers, so any character but '"' and
 * control characters could work; refusing those keeps quoting trivial.
 */
static bool check_pg_name(const char *what, const char *v, size_t len, char *err, size_t errlen)
{
    if (len == 0 || len > PG_IDENT_MAX) {
        errf(err, errlen, "%s name must be 1..%d bytes", what, PG_IDENT_MAX);
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        if (v[i] == '"' || iscntrl((unsigned char)v[i])) {
            errf(err, errlen, "%s name must not contain '\"' or control characters", what);
            return false;
        }
    }
    return true;
}

static bool check_table(const char *v, char *err, size_t errlen)
{
    const char *dot = strchr(v, '.');

    if (dot == NULL)
        return check_pg_name("table", v, strlen(v), err, errlen);
    if (strchr(dot + 1, '.') != NULL) {
        errf(err, errlen, "\"%.*s\" must be table or schema.table", ERR_VALUE_MAX, v);
        return false;
    }
    return check_pg_name("schema", v, (size_t)(dot - v), err, errlen) &&
           check_pg_name("table", dot + 1, strlen(dot + 1), err, errlen);
}

static bool check_column(const char *v, char *err, size_t errlen)
{
    return check_pg_name("column", v, strlen(v), err, errlen);
}

static bool check_channel(const char *v, char *err, size_t errlen)
{
    size_t len = strlen(v);

    if (len == 0 || len > CHANNEL_MAX || !(isalpha((unsigned char)v[0]) || v[0] == '_') ||
        strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") != len) {
        errf(err, errlen, "\"%.*s\" is not an identifier of 1..%d characters [A-Za-z_][A-Za-z0-9_]*",
             ERR_VALUE_MAX, v, CHANNEL_MAX);
        return false;
    }
    return true;
}

/*
 * Store one already-unquoted value.  Everything is parsed into locals first
 * so that *c changes only on success.
 */
static bool apply(struct config *c, const struct key_def *k, const char *v,
                  char *err, size_t errlen)
{
    void *field = (char *)c + k->offset;
    uint64_t u = 0;

    switch (k->type) {
    case T_STRING: {
        char *s;
        if (k->check != NULL && !k->check(v, err, errlen))
            return false;
        s = strdup(v);
        if (s == NULL) {
            errf(err, errlen, "out of memory");
            return false;
        }
        free(*(char **)field);
        *(char **)field = s;
        return true;
    }
    case T_UINT:
        if (!parse_ranged(v, k->min, k->max, &u, err, errlen))
            return false;
        *(unsigned *)field = (unsigned)u;
        return true;
    case T_UINT64:
        return parse_ranged(v, k->min, k->max, (uint64_t *)field, err, errlen);
    case T_DOUBLE:
        return parse_double(k, v, (double *)field, err, errlen);
    case T_BOOL:
        return parse_bool(v, (bool *)field, err, errlen);
    case T_LISTEN: {
        char *host = NULL;
        unsigned port = 0;
        if (!parse_listen(v, &host, &port, err, errlen))
            return false;
        free(c->listen_host);
        c->listen_host = host;
        c->listen_port = port;
        return true;
    }
    case T_LOGLEVEL:
        return parse_level(v, (enum log_level *)field, err, errlen);
    case T_TEMPLATE: {
        char *s;
        if (!check_template(v, err, errlen))
            return false;
        if (c->n_uri_templates >= CONFIG_MAX_TEMPLATES) {
            errf(err, errlen, "too many templates (at most %d)", CONFIG_MAX_TEMPLATES);
            return false;
        }
        s = strdup(v);
        if (s == NULL) {
            errf(err, errlen, "out of memory");
            return false;
        }
        c->uri_templates[c->n_uri_templates++] = s;
        return true;
    }
    case T_STATUS:
        return parse_status(v, (unsigned *)field, err, errlen);
    case T_ALLOW:
        return parse_allow(v, (unsigned *)field, err, errlen);
    case T_URISRC:
        return parse_uri_source(v, (enum auth_uri_source *)field, err, errlen);
    }
    errf(err, errlen, "internal error: bad key type");
    return false;
}

/*
 * Turn raw value text into the value proper: trim, drop a trailing comment
 * (file syntax only) and one pair of double quotes.  Returns a heap copy.
 */
static char *normalize_value(const char *raw, bool comments, char *err, size_t errlen)
{
    char *buf = strdup(raw);
    char *s, *e;

    if (buf == NULL) {
        errf(err, errlen, "out of memory");
        return NULL;
    }
    s = buf;
    while (isspace((unsigned char)*s))
        s++;
    if (*s == '"') {
        char *q = strchr(s + 1, '"');
        char *rest;

        if (q == NULL) {
            errf(err, errlen, "unterminated quote in %.*s%s", ERR_VALUE_MAX, s,
                 comments ? " (whitespace followed by ';' starts a comment even inside quotes)"
                          : "");
            goto fail;
        }
        rest = q + 1;
        while (isspace((unsigned char)*rest))
            rest++;
        if (*rest != '\0' && !(comments && (*rest == '#' || *rest == ';'))) {
            errf(err, errlen, "unexpected text after the closing quote in %.*s",
                 ERR_VALUE_MAX, s);
            goto fail;
        }
        *q = '\0';
        s++;
    } else {
        /*
         * libinih strips " ;comments" itself but not " #comments".  The
         * value reaches us left-trimmed, so a leading '#' also followed
         * whitespace in the file.
         */
        if (comments)
            for (char *p = s; *p != '\0'; p++)
                if ((*p == '#' || *p == ';') && (p == s || isspace((unsigned char)p[-1]))) {
                    *p = '\0';
                    break;
                }
        e = s + strlen(s);
        while (e > s && isspace((unsigned char)e[-1]))
            *--e = '\0';
    }
    memmove(buf, s, strlen(s) + 1);
    return buf;

fail:
    free(buf);
    return NULL;
}

bool config_set(struct config *c, const char *section, const char *key,
                const char *value, char *err, size_t errlen)
{
    const struct key_def *k = find_key(section, key);
    char msg[256];
    char *v = NULL;

    if (k == NULL) {
        if (section_known(section))
            errf(err, errlen, "unknown key [%s] %s", section, key);
        else
            errf(err, errlen, "unknown section [%s]", section);
        return false;
    }
    v = normalize_value(value, false, msg, sizeof msg);
    if (v == NULL || !apply(c, k, v, msg, sizeof msg))
        goto fail;
    free(v);
    return true;

fail:
    errf(err, errlen, "[%s] %s: %s", section, key, msg);
    free(v);
    return false;
}

bool config_override(struct config *c, const char *arg, char *err, size_t errlen)
{
    const char *eq = strchr(arg, '=');
    const char *dot = strchr(arg, '.');
    char *section = NULL;
    char *key = NULL;
    char msg[256];
    bool ok = false;

    if (eq == NULL || dot == NULL || dot > eq || dot == arg || dot + 1 == eq) {
        errf(err, errlen, "--%s: expected --section.key=value", arg);
        return false;
    }
    section = strndup(arg, (size_t)(dot - arg));
    key = strndup(dot + 1, (size_t)(eq - dot - 1));
    if (section == NULL || key == NULL) {
        errf(err, errlen, "--%s: out of memory", arg);
        goto fail;
    }
    ok = config_set(c, section, key, eq + 1, msg, sizeof msg);
    if (!ok)
        errf(err, errlen, "--%s: %s", arg, msg);
fail:
    free(section);
    free(key);
    return ok;
}

/* --- file parsing --- */

struct parse_state {
    struct config *c;
    const char *name;           /* file name for messages */
    const char *pos, *end;      /* unread input */
    int lineno;                 /* line last handed to libinih */
    bool failed;
    int err_line;
    char msg[256];
    int seen[KEY_COUNT];        /* line a key was set on, 0 = not yet */
};

static void parse_fail(struct parse_state *st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void parse_fail(struct parse_state *st, const char *fmt, ...)
{
    va_list ap;

    st->failed = true;
    st->err_line = st->lineno;
    va_start(ap, fmt);
    vsnprintf(st->msg, sizeof st->msg, fmt, ap);
    va_end(ap);
}

/* Like libinih's search: ';' starts a comment only after whitespace. */
static const char *find_unless_comment(const char *s, const char *chars)
{
    for (const char *p = s; *p != '\0'; p++) {
        if (*p == ';' && p > s && isspace((unsigned char)p[-1]))
            return NULL;
        if (strchr(chars, *p) != NULL)
            return p;
    }
    return NULL;
}

/*
 * Structural checks libinih would only report as a bare line number, done
 * here so the message can say what is wrong; libinih still does the parse.
 */
static bool check_line(struct parse_state *st, const char *line)
{
    if (*line == '\0' || *line == ';' || *line == '#')
        return true;
    if (*line == '[') {
        const char *close = find_unless_comment(line + 1, "]");
        const char *rest;
        char section[64];
        size_t len;

        if (close == NULL) {
            parse_fail(st, "missing ']' in section header");
            return false;
        }
        len = (size_t)(close - line - 1);
        if (len >= sizeof section) {
            parse_fail(st, "unknown section [%.*s]", ERR_VALUE_MAX, line + 1);
            return false;
        }
        memcpy(section, line + 1, len);
        section[len] = '\0';
        if (!section_known(section)) {
            parse_fail(st, "unknown section [%s]", section);
            return false;
        }
        for (rest = close + 1; isspace((unsigned char)*rest); rest++)
            ;
        if (*rest != '\0' && *rest != ';' && *rest != '#') {
            parse_fail(st, "unexpected text after [%s]", section);
            return false;
        }
        return true;
    }
    if (find_unless_comment(line, "=:") == NULL) {
        parse_fail(st, "expected \"key = value\", \"[section]\" or a comment");
        return false;
    }
    return true;
}

/*
 * libinih's fgets-like input.  Handing it one whole line at a time keeps
 * st->lineno in step with the line being parsed, and stopping here is the
 * only way to end a parse early.  Leading whitespace is dropped because
 * libinih would take an indented line as a continuation of the previous
 * value, which is never what an indented "key = value" means.
 */
static char *read_line(char *buf, int num, void *stream)
{
    struct parse_state *st = stream;
    const char *line, *nl;
    size_t len;

    if (st->failed || st->pos >= st->end)
        return NULL;
    line = st->pos;
    nl = memchr(line, '\n', (size_t)(st->end - line));
    len = nl != NULL ? (size_t)(nl - line) : (size_t)(st->end - line);
    st->pos = line + len + (nl != NULL);
    st->lineno++;

    if (st->lineno == 1 && len >= 3 && memcmp(line, "\xEF\xBB\xBF", 3) == 0) {
        line += 3;
        len -= 3;
    }
    while (len > 0 && isspace((unsigned char)*line)) {
        line++;
        len--;
    }
    if (memchr(line, '\0', len) != NULL) {
        parse_fail(st, "NUL byte in line");
        return NULL;
    }
    /* Room for the line, '\n' and '\0'; libinih would split a longer one. */
    if (num >= 2 && len > (size_t)num - 2 && (*line == '#' || *line == ';'))
        len = 1;                /* a comment's text does not matter */
    if (num < 2 || len > (size_t)num - 2) {
        parse_fail(st, "line too long (at most %d bytes)", num - 2);
        return NULL;
    }
    memcpy(buf, line, len);
    buf[len] = '\0';
    if (!check_line(st, buf))
        return NULL;
    buf[len] = '\n';
    buf[len + 1] = '\0';
    return buf;
}

static int on_key(void *user, const char *section, const char *name, const char *value)
{
    struct parse_state *st = user;
    const struct key_def *k;
    char msg[256];
    char *v = NULL;
    size_t i;

    if (st->failed)
        return 0;
    if (name == NULL)
        return 1;               /* new-section callback, if libinih was built with it */
    if (value == NULL) {
        parse_fail(st, "%s has no value", name);
        return 0;
    }
    if (section[0] == '\0') {
        parse_fail(st, "key %s appears before any [section]", name);
        return 0;
    }
    k = find_key(section, name);
    if (k == NULL) {
        parse_fail(st, "unknown key [%s] %s", section, name);
        return 0;
    }
    i = (size_t)(k - keys);
    if (st->seen[i] != 0 && k->type != T_TEMPLATE) {
        parse_fail(st, "[%s] %s: set twice (first on line %d)", section, name, st->seen[i]);
        return 0;
    }
    st->seen[i] = st->lineno;
    v = normalize_value(value, true, msg, sizeof msg);
    if (v == NULL || !apply(st->c, k, v, msg, sizeof msg)) {
        parse_fail(st, "[%s] %s: %s", section, name, msg);
        free(v);
        return 0;
    }
    free(v);
    return 1;
}

static bool parse_buffer(struct config *c, const char *name, const char *text, size_t len,
                         char *err, size_t errlen)
{
    struct parse_state *st = calloc(1, sizeof *st);
    int r;
    bool ok = false;

    if (st == NULL) {
        errf(err, errlen, "%s: out of memory", name);
        return false;
    }
    st->c = c;
    st->name = name;
    st->pos = text;
    st->end = text + len;
    r = ini_parse_stream(read_line, st, on_key, st);
    if (st->failed)
        errf(err, errlen, "%s:%d: %s", name, st->err_line, st->msg);
    else if (r > 0)             /* a syntax error read_line did not foresee */
        errf(err, errlen, "%s:%d: syntax error", name, r);
    else if (r < 0)
        errf(err, errlen, "%s: out of memory", name);
    else
        ok = true;
    free(st);
    return ok;
}

bool config_load_string(struct config *c, const char *name, const char *text,
                        char *err, size_t errlen)
{
    return parse_buffer(c, name, text, strlen(text), err, errlen);
}

bool config_load_file(struct config *c, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    char *text = NULL;
    size_t len = 0, got;
    bool ok = false;

    if (f == NULL) {
        errf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return false;
    }
    /* One byte more than the limit tells "too large" from "exactly the limit". */
    text = malloc(CONFIG_MAX_FILE_BYTES + 1);
    if (text == NULL) {
        errf(err, errlen, "%s: out of memory", path);
        goto fail;
    }
    while ((got = fread(text + len, 1, CONFIG_MAX_FILE_BYTES + 1 - len, f)) > 0)
        len += got;
    if (ferror(f)) {
        errf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        goto fail;
    }
    if (len > CONFIG_MAX_FILE_BYTES) {
        errf(err, errlen, "%s: larger than %d bytes, not a config file?", path,
             CONFIG_MAX_FILE_BYTES);
        goto fail;
    }
    ok = parse_buffer(c, path, text, len, err, errlen);
fail:
    free(text);
    fclose(f);
    return ok;
}

/* --- defaults, cleanup, introspection --- */

bool config_defaults(struct config *c)
{
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < KEY_COUNT; i++) {
        if (keys[i].type == T_TEMPLATE)
            continue;           /* no templates by default */
        if (!apply(c, &keys[i], keys[i].def, NULL, 0))
            return false;
    }
    return true;
}

void config_free(struct config *c)
{
    if (c == NULL)
        return;
    free(c->listen_host);
    c->listen_host = NULL;
    for (size_t i = 0; i < KEY_COUNT; i++) {
        if (keys[i].type == T_STRING) {
            char **s = (char **)((char *)c + keys[i].offset);
            free(*s);
            *s = NULL;
        }
    }
    /* Free every slot, not just n_uri_templates, in case the count was reset. */
    for (size_t i = 0; i < CONFIG_MAX_TEMPLATES; i++) {
        free(c->uri_templates[i]);
        c->uri_templates[i] = NULL;
    }
    c->n_uri_templates = 0;
}

size_t config_key_count(void)
{
    return KEY_COUNT;
}

bool config_key_at(size_t i, const char **section, const char **name,
                   const char **default_value, const char **help)
{
    if (i >= KEY_COUNT)
        return false;
    if (section != NULL)
        *section = keys[i].section;
    if (name != NULL)
        *name = keys[i].name;
    if (default_value != NULL)
        *default_value = keys[i].def;
    if (help != NULL)
        *help = keys[i].help;
    return true;
}

const char *config_log_level_name(enum log_level level)
{
    if ((unsigned)level < sizeof level_names / sizeof level_names[0])
        return level_names[level];
    return "?";
}
