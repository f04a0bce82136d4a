/*
 * The configuration's key table: one row per key drives defaults,
 * validation, --section.key=value overrides, reload rules and the key
 * listing, so every rule about a key lives in exactly one place.  Reading
 * INI files (libinih) is conffile.c's job; it hands each key here.
 */
#include "config.h"
#include "config_int.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "filter.h"
#include "uritmpl.h"

/* Longest value quoted back in an error message. */
#define ERR_VALUE_MAX CONFIG_ERR_VALUE_MAX
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
    T_ENUM,     /* an int-sized field (enum or unsigned) set from key_def.names */
    T_LISTEN,   /* listen_host + listen_port */
    T_TEMPLATE  /* appends to uri_templates */
};

/* One allowed text of a T_ENUM key and the value it stands for. */
struct enum_name {
    const char *name;           /* matched case-insensitively */
    int value;
};

struct key_def {
    const char *section;
    const char *name;
    enum key_type type;
    const char *def;            /* parsed like a file value by config_defaults */
    bool reload;                /* a SIGHUP applies a new value; else it needs a restart */
    bool per_filter;            /* offset is into struct filter_config; [filter NAME] may set it */
    uint64_t min, max;          /* T_UINT, T_UINT64 */
    double dmin, dmax;          /* T_DOUBLE */
    bool dmin_open, dmax_open;  /* T_DOUBLE: the bound itself is rejected */
    const struct enum_name *names; /* T_ENUM: the allowed values, ended by a NULL name */
    size_t offset;              /* field in struct config or filter_config (not T_LISTEN, T_TEMPLATE) */
    bool (*check)(const char *value, char *err, size_t errlen); /* T_STRING */
    const char *help;           /* what the key means; ranges and allowed values come from the row */
};

/* Whether a new value takes effect on SIGHUP (see config_keep_restart_keys). */
#define RELOAD true
#define RESTART false

/* Where a key's value goes: CF in struct config, FF in struct filter_config (a per-filter key). */
#define CF(f) .offset = offsetof(struct config, f)
#define FF(f) .per_filter = true, .offset = offsetof(struct filter_config, f)
#define K_STR(s, k, d, r, at, chk, h) \
    { .section = (s), .name = (k), .type = T_STRING, .def = (d), .reload = (r), \
      at, .check = (chk), .help = (h) }
#define K_UINT(s, k, d, r, at, lo, hi, h) \
    { .section = (s), .name = (k), .type = T_UINT, .def = (d), .reload = (r), \
      .min = (lo), .max = (hi), at, .help = (h) }
#define K_U64(s, k, d, r, at, lo, hi, h) \
    { .section = (s), .name = (k), .type = T_UINT64, .def = (d), .reload = (r), \
      .min = (lo), .max = (hi), at, .help = (h) }
#define K_DBL(s, k, d, r, at, lo, lo_open, hi, hi_open, h) \
    { .section = (s), .name = (k), .type = T_DOUBLE, .def = (d), .reload = (r), \
      .dmin = (lo), .dmin_open = (lo_open), .dmax = (hi), .dmax_open = (hi_open), \
      at, .help = (h) }
#define K_BOOL(s, k, d, r, at, h) \
    { .section = (s), .name = (k), .type = T_BOOL, .def = (d), .reload = (r), \
      at, .help = (h) }
/* The field must be int-sized: apply stores the table's int into it. */
#define K_ENUM(s, k, d, r, f, tbl, h) \
    { .section = (s), .name = (k), .type = T_ENUM, .def = (d), .reload = (r), \
      .names = (tbl), .help = (h), \
      .offset = offsetof(struct config, f) + 0 * sizeof(struct { \
          _Static_assert(sizeof(((struct config *)0)->f) == sizeof(int), #f " is not int-sized"); \
          int dummy; }) }
/* The same for a per-table key ([filter NAME] may set it). */
#define K_FENUM(s, k, d, r, f, tbl, h) \
    { .section = (s), .name = (k), .type = T_ENUM, .def = (d), .reload = (r), \
      .names = (tbl), .help = (h), .per_filter = true, \
      .offset = offsetof(struct filter_config, f) + 0 * sizeof(struct { \
          _Static_assert(sizeof(((struct filter_config *)0)->f) == sizeof(int), #f " is not int-sized"); \
          int dummy; }) }
#define K_TYPED(s, k, t, d, r, h) \
    { .section = (s), .name = (k), .type = (t), .def = (d), .reload = (r), .help = (h) }

static bool check_table(const char *v, char *err, size_t errlen);
static bool check_column(const char *v, char *err, size_t errlen);
static bool check_channel(const char *v, char *err, size_t errlen);
static bool check_peer(const char *v, char *err, size_t errlen);
static bool check_ident(const char *v, char *err, size_t errlen);
static bool check_slot(const char *v, char *err, size_t errlen);

static const struct enum_name log_levels[] = {
    { "error", LOG_LVL_ERROR }, { "warn", LOG_LVL_WARN },
    { "info", LOG_LVL_INFO }, { "debug", LOG_LVL_DEBUG }, { NULL, 0 }
};
static const struct enum_name deny_statuses[] = {
    { "401", 401 }, { "403", 403 }, { "404", 404 }, { "410", 410 }, { NULL, 0 }
};
/* Envoy's ext_authz allows a request only on 200. */
static const struct enum_name allow_statuses[] = { { "200", 200 }, { "204", 204 }, { NULL, 0 } };
static const struct enum_name sync_methods[] = {
    { "auto", SYNC_AUTO }, { "logical", SYNC_LOGICAL }, { "feed", SYNC_FEED },
    { "notify", SYNC_NOTIFY }, { NULL, 0 }
};
static const struct enum_name uri_sources[] = {
    { "auto", URI_SOURCE_AUTO }, { "x-original-uri", URI_SOURCE_X_ORIGINAL_URI },
    { "x-forwarded-uri", URI_SOURCE_X_FORWARDED_URI }, { "path", URI_SOURCE_PATH }, { NULL, 0 }
};

/*
 * The one list of keys.  Keep it grouped by section in the order of the
 * sample config; conf/bloomguard.conf and docs/bloomguard.8 must mention
 * every row (tests check).  Defaults are text so they go through the same
 * validation as user input.
 *
 * RESTART rows are read once at start or by the follower threads, which
 * keep the start configuration: [server] listen, threads, max_connections,
 * connection_timeout (an MHD option), header_timeout (the HTTP layer's
 * clock) and max_id_bytes (the follower decides from it whether an id too
 * long to notify may be asked for); [postgres], [filter] and [sync] belong
 * to the follower; [metrics] enabled decides what is counted from the start.
 */
static const struct key_def keys[] = {
    K_TYPED("server", "listen", T_LISTEN, "127.0.0.1:8080", RESTART,
            "address to listen on, host:port or [ipv6]:port (port 0 picks a free port), or "
            "unix:/path (a unix socket, mode 0660)"),
    K_UINT("server", "threads", "0", RESTART, CF(threads), 0, 256,
           "worker threads, 0 = one per CPU"),
    K_UINT("server", "max_connections", "10000", RESTART, CF(max_connections), 1, 1000000,
           "most client connections open at once; more are closed at once"),
    K_UINT("server", "connection_timeout", "30", RESTART, CF(connection_timeout), 0, 86400,
           "seconds an idle client connection is kept, 0 = forever"),
    K_U64("server", "max_body_bytes", "1048576", RELOAD, CF(max_body_bytes), 1, 1073741824,
          "largest request body accepted, in bytes"),
    K_UINT("server", "max_batch", "10000", RELOAD, CF(max_batch), 1, 10000000,
           "most ids accepted in one batch request"),
    K_UINT("server", "max_id_bytes", "512", RESTART, CF(max_id_bytes), 1, CONFIG_MAX_ID_BYTES,
           "longest id accepted, in bytes"),
    K_UINT("server", "header_timeout", "5", RESTART, CF(header_timeout), 0, 3600,
           "seconds a client may take to send a request's headers, 0 = no limit"),
    K_STR("server", "admin_token_file", "", RELOAD, CF(admin_token_file), NULL,
          "file holding the token POST /ids and POST /reload need (Authorization: Bearer); "
          "empty: systemd credential admin_token if any, else writes only on loopback; "
          "SIGHUP reads the token again"),
    K_STR("server", "publish_dir", "auto", RESTART, CF(publish_dir), NULL,
          "directory where each filter is published as <name>.bgf, a shared mapping that "
          "libbloomguard and the nginx module read without asking the daemon; auto: systemd's "
          "RuntimeDirectory= ($RUNTIME_DIRECTORY) when set, else off; empty: off"),

    K_STR("postgres", "conninfo", "", RESTART, CF(conninfo), NULL,
          "libpq connection string; empty uses the libpq defaults and PG* environment variables"),
    K_STR("postgres", "table", "users", RESTART, FF(table), check_table,
          "table holding the ids, optionally schema-qualified as schema.table"),
    K_STR("postgres", "column", "id", RESTART, FF(column), check_column,
          "column of that table holding the ids"),
    K_UINT("postgres", "retry_max_seconds", "30", RESTART, CF(retry_max_seconds), 1, 3600,
           "longest wait between reconnection attempts, in seconds"),

    K_U64("filter", "expected_items", "0", RESTART, FF(expected_items), 0, FILTER_MAX_ITEMS,
          "items the filter is sized for, 0 = table row count times headroom"),
    K_DBL("filter", "false_positive_rate", "0.01", RESTART, FF(false_positive_rate),
          FILTER_MIN_FPP, true, FILTER_MAX_FPP, true,
          "target false positive rate"),
    K_DBL("filter", "headroom", "2.0", RESTART, FF(headroom), 1.0, false, 100.0, false,
          "factor applied to the table row count when expected_items is 0"),
    K_UINT("filter", "max_layers", "8", RESTART, FF(max_layers), 1, FILTER_MAX_LAYERS,
           "layers the filter may grow to in memory when it fills up; 1 = never grows"),
    K_DBL("filter", "growth", "2.0", RESTART, FF(growth), FILTER_MIN_EXPANSION, false,
          FILTER_MAX_EXPANSION, false,
          "a layer added when the filter fills up is sized for this many times the items so far"),

    K_BOOL("sync", "enabled", "yes", RESTART, CF(sync_enabled),
           "follow changes to the tables after their load; no: only loads (a static table)"),
    K_FENUM("sync", "method", "auto", RESTART, method, sync_methods,
            "how a table is followed: logical (logical replication from the WAL, no trigger), "
            "feed (a trigger appends to a log, read every poll_interval), notify (a trigger sends "
            "NOTIFY: costly for the table's writers), auto (logical where the server and the table "
            "allow it, else the feed, else notify)"),
    K_DBL("sync", "poll_interval", "0.1", RESTART, CF(poll_interval), 0.01, false, 60.0, false,
          "seconds between reads of the change feed by method feed"),
    K_STR("sync", "publication", "bloomguard", RESTART, CF(publication), check_ident,
          "the publication method logical subscribes to; bloomguard_watch adds tables to it"),
    K_STR("sync", "slot", "auto", RESTART, CF(slot_name), check_slot,
          "method logical's replication slot, one for all filters: auto = a permanent slot "
          "bloomguard_<id> when snapshots are on (the id is kept in the snapshot directory), "
          "else a temporary one; a name = that permanent slot"),
    K_UINT("sync", "logical_max_daemons", "4", RESTART, CF(logical_max_daemons), 0, 10000,
           "method auto: once this many other bloomguard slots decode the server's WAL, a table "
           "the feed also serves is followed with the feed"),
    K_STR("sync", "channel", "bloomguard", RESTART, FF(channel), check_channel,
          "NOTIFY channel, an identifier [A-Za-z_][A-Za-z0-9_]*; deletes use <channel>_deleted"),
    K_UINT("sync", "rebuild_interval", "0", RESTART, FF(rebuild_interval), 0, 31536000,
           "rebuild the filter from the table every this many seconds, 0 = never"),
    K_U64("sync", "rebuild_after_deletes", "0", RESTART, FF(rebuild_after_deletes), 0, UINT64_MAX,
          "rebuild the filter after this many deletes, 0 = never"),
    K_BOOL("sync", "auto_grow", "yes", RESTART, FF(auto_grow),
           "rebuild a larger filter when the table outgrows the current one"),
    K_U64("sync", "pending_limit", "1000000", RESTART, FF(pending_limit), 0, 100000000,
          "ids POSTed to /ids that are kept across rebuilds until the table holds them; 0 = none, so every POST /ids is refused (507)"),
    K_U64("sync", "pending_max_bytes", "67108864", RESTART, FF(pending_max_bytes), 0, UINT64_C(17179869184),
          "bytes of ids that journal may hold; a POST that would exceed it or pending_limit is refused"),
    K_UINT("sync", "pending_ttl", "3600", RESTART, FF(pending_ttl), 1, 31536000,
           "seconds a POSTed id stays in the journal when no COPY shows it in the table"),
    K_DBL("sync", "max_staleness", "2", RESTART, CF(max_staleness), 0.0, false, 3600.0, false,
          "seconds: when bloomguard cannot show that it has every row committed longer ago than this, "
          "answers that would be 404 or deny become 200 or allow (degraded); 0 = never degrade"),
    K_DBL("sync", "probe_interval", "0.2", RESTART, CF(probe_interval), 0.01, false, 60.0, false,
          "seconds between the follower's round trips that prove it is up to date"),
    K_UINT("sync", "min_rebuild_interval", "30", RESTART, CF(min_rebuild_interval), 0, 86400,
           "least seconds from the end of one rebuild to the start of the next (after the first load), 0 = none"),

    K_STR("snapshot", "path", "auto", RESTART, CF(snapshot_path), NULL,
          "directory of the snapshots: each filter's is <path>/<name>.snap, written after each load, "
          "every interval and at stop, read at start; auto: systemd's StateDirectory= "
          "($STATE_DIRECTORY) when set, else none; empty: no snapshots"),
    K_UINT("snapshot", "interval", "300", RESTART, CF(snapshot_interval), 0, 86400,
           "seconds between periodic snapshots (each first catches up with the change feed), "
           "0 = only after loads and at stop"),
    K_STR("snapshot", "bootstrap_from", "", RESTART, CF(bootstrap_from), check_peer,
          "http://host:port of a peer bloomguard: a start without a snapshot file loads the peer's "
          "(GET /snapshot, with this daemon's admin token) and reads only the changes since; "
          "empty: none"),

    K_BOOL("feed", "enabled", "yes", RESTART, CF(feed_enabled),
           "where sql/notify.sql's change feed is installed, catch up from it after a restart or a "
           "reconnect instead of copying the whole table"),
    K_UINT("feed", "retention", "86400", RESTART, CF(feed_retention), 60, 31536000,
           "seconds of changes the feed keeps (pruned by every bloomguard); a position older "
           "than this may need a full load"),
    K_UINT("feed", "prune_interval", "60", RESTART, CF(feed_prune_interval), 0, 86400,
           "seconds between prunes of the feed's log, 0 = never prune from this daemon"),

    K_TYPED("auth", "uri_template", T_TEMPLATE, "", RELOAD,
            "request path with {id} where the id goes, e.g. /user/get/{id}; repeat the key for more"),
    K_ENUM("auth", "deny_status", "403", RELOAD, deny_status, deny_statuses,
           "HTTP status for an unknown id"),
    K_ENUM("auth", "allow_status", "204", RELOAD, allow_status, allow_statuses,
           "HTTP status for an id that may exist or a URI no template matches: 204, or 200 for Envoy"),
    K_BOOL("auth", "fail_open", "yes", RELOAD, CF(fail_open),
           "allow requests while no filter is loaded, instead of denying them"),
    K_ENUM("auth", "uri_source", "auto", RELOAD, uri_source, uri_sources,
           "where the original URI comes from: x-original-uri (nginx), x-forwarded-uri (Traefik), "
           "path (Envoy) or auto (the first of these present)"),

    K_BOOL("metrics", "enabled", "yes", RESTART, CF(metrics_enabled),
           "serve the metrics endpoint"),

    K_ENUM("log", "level", "info", RELOAD, log_level, log_levels,
           "least severe messages logged"),
    K_STR("log", "file", "", RESTART, CF(log_file), NULL,
          "append the log to this file instead of standard error (reopened on SIGUSR1, "
          "for logrotate); empty: standard error"),
};

#define KEY_COUNT (sizeof keys / sizeof keys[0])

void config_errf(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (err == NULL || errlen == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

#define errf config_errf

static const struct key_def *find_key(const char *section, const char *name)
{
    for (size_t i = 0; i < KEY_COUNT; i++)
        if (strcmp(keys[i].section, section) == 0 && strcmp(keys[i].name, name) == 0)
            return &keys[i];
    return NULL;
}

int config_key_find(const char *section, const char *name)
{
    const struct key_def *k = find_key(section, name);
    return k == NULL ? -1 : (int)(k - keys);
}

bool config_section_known(const char *section)
{
    for (size_t i = 0; i < KEY_COUNT; i++)
        if (strcmp(keys[i].section, section) == 0)
            return true;
    return false;
}

bool config_key_repeatable(size_t i)
{
    return i < KEY_COUNT && keys[i].type == T_TEMPLATE;
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

    /* "unix:/absolute/path": a unix socket (listen.h), kept whole as the host, port 0. */
    if (strncmp(v, "unix:", 5) == 0) {
        if (v[5] != '/' || strlen(v + 5) >= 108) {
            errf(err, errlen, "\"%.*s\": expected unix:/absolute/path (at most 107 bytes)",
                 ERR_VALUE_MAX, v);
            return false;
        }
        if ((*host = strdup(v)) == NULL) {
            errf(err, errlen, "out of memory");
            return false;
        }
        *port = 0;
        return true;
    }
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

/* uritmpl owns the rule: a template it rejects could never match. */
static bool check_template(const char *v, char *err, size_t errlen)
{
    const char *why;

    if (!uritmpl_valid(v, &why)) {
        errf(err, errlen, "\"%.*s\" %s", ERR_VALUE_MAX, v, why);
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

/* [snapshot] bootstrap_from: http://host[:port], nothing after (peer.c reads the rest). */
static bool check_peer(const char *v, char *err, size_t errlen)
{
    size_t len = strlen(v);
    if (len == 0)
        return true;
    if (strncmp(v, "http://", 7) != 0 || len == 7 || len > 255 || strpbrk(v + 7, "/?#@ \t") != NULL) {
        errf(err, errlen, "\"%.*s\" is not http://host[:port] (no path, no https)", ERR_VALUE_MAX, v);
        return false;
    }
    return true;
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

/* A publication: an identifier PostgreSQL keeps as written (bloomguard quotes it). */
static bool check_ident(const char *v, char *err, size_t errlen)
{
    size_t len = strlen(v);
    if (len == 0 || len > PG_IDENT_MAX || strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789_") != len
        || isdigit((unsigned char)v[0])) {
        errf(err, errlen, "\"%.*s\" is not a name of 1..%d characters [a-z_][a-z0-9_]*",
             ERR_VALUE_MAX, v, PG_IDENT_MAX);
        return false;
    }
    return true;
}

/* A slot name as PostgreSQL allows it ([a-z0-9_], at most 63), or "auto". */
static bool check_slot(const char *v, char *err, size_t errlen)
{
    size_t len = strlen(v);
    if (len == 0 || len > PG_IDENT_MAX || strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789_") != len) {
        errf(err, errlen, "\"%.*s\" is not a replication slot name of 1..%d characters "
             "[a-z0-9_] (or auto)", ERR_VALUE_MAX, v, PG_IDENT_MAX);
        return false;
    }
    return true;
}

/* "a, b, c" from an enum table, for error messages and the key listing. */
static void enum_list(const struct enum_name *names, const char *sep, char *buf, size_t len)
{
    size_t off = 0;

    if (len == 0)
        return;
    buf[0] = '\0';
    for (const struct enum_name *n = names; n->name != NULL && off < len; n++) {
        int w = snprintf(buf + off, len - off, "%s%s", n == names ? "" : sep, n->name);
        if (w < 0)
            break;
        off += (size_t)w;
    }
}

static bool parse_enum(const struct key_def *k, const char *v, int *out, char *err, size_t errlen)
{
    char allowed[256];

    for (const struct enum_name *n = k->names; n->name != NULL; n++)
        if (strcasecmp(v, n->name) == 0) {
            *out = n->value;
            return true;
        }
    enum_list(k->names, ", ", allowed, sizeof allowed);
    errf(err, errlen, "\"%.*s\" is not one of %s", ERR_VALUE_MAX, v, allowed);
    return false;
}

_Static_assert(sizeof keys / sizeof keys[0] <= 64, "filter_set has one bit per key");

/* --- filters --- */

bool config_filter_name_valid(const char *name, char *err, size_t errlen)
{
    size_t len = strlen(name);

    if (len == 0 || len >= CONFIG_FILTER_NAME_MAX + 1 || !(name[0] >= 'a' && name[0] <= 'z')
        || strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_") != len) {
        errf(err, errlen, "\"%.*s\" is not a filter name ([a-z][a-z0-9_]{0,%d})", ERR_VALUE_MAX,
             name, CONFIG_FILTER_NAME_MAX - 1);
        return false;
    }
    return true;
}

/* The strings of a filter_config, to free or copy them all. */
#define FC_STRINGS(fc) { &(fc)->name, &(fc)->table, &(fc)->column, &(fc)->channel }

static void fc_free(struct filter_config *fc)
{
    char **strs[] = FC_STRINGS(fc);
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
        free(*strs[i]);
        *strs[i] = NULL;
    }
}

/* Replace *dst by a copy of src (NULL stays NULL); false if out of memory. */
static bool copy_string(char **dst, const char *src)
{
    char *s = NULL;

    if (src != NULL && (s = strdup(src)) == NULL)
        return false;
    free(*dst);
    *dst = s;
    return true;
}

/* dst (its strings not owned: overwritten) becomes a deep copy of src; on failure dst is freed. */
static bool fc_copy(struct filter_config *dst, const struct filter_config *src)
{
    struct filter_config tmp = *src;
    char **strs[] = FC_STRINGS(dst);
    char *const *from[] = FC_STRINGS(&tmp);
    bool ok = true;

    *dst = *src;
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
        *strs[i] = NULL;
    for (size_t i = 0; ok && i < sizeof strs / sizeof strs[0]; i++)
        ok = copy_string(strs[i], *from[i]);
    if (!ok)
        fc_free(dst);
    return ok;
}

int config_filter_find(const struct config *c, const char *name)
{
    for (unsigned i = 0; i < c->n_filters; i++)
        if (c->filters[i].name != NULL && strcmp(c->filters[i].name, name) == 0)
            return (int)i;
    return -1;
}

int config_filter_add(struct config *c, const char *name, char *err, size_t errlen)
{
    struct filter_config *fc;

    if (!config_filter_name_valid(name, err, errlen))
        return -1;
    if (!c->named_filters) {
        /* The first [filter NAME] replaces the filter the global keys made. */
        for (unsigned i = 0; i < c->n_filters; i++)
            fc_free(&c->filters[i]);
        c->n_filters = 0;
        c->named_filters = true;
    }
    if (config_filter_find(c, name) >= 0) {
        errf(err, errlen, "[filter %s] appears twice", name);
        return -1;
    }
    if (c->n_filters >= CONFIG_MAX_FILTERS) {
        errf(err, errlen, "too many [filter NAME] sections (at most %d)", CONFIG_MAX_FILTERS);
        return -1;
    }
    fc = &c->filters[c->n_filters];
    memset(fc, 0, sizeof *fc);
    if ((fc->name = strdup(name)) == NULL) {
        errf(err, errlen, "out of memory");
        return -1;
    }
    c->filter_set[c->n_filters] = 0;
    return (int)c->n_filters++;
}

int config_filter_key_find(const char *name)
{
    for (size_t i = 0; i < KEY_COUNT; i++)
        if (keys[i].per_filter && strcmp(keys[i].name, name) == 0)
            return (int)i;
    return -1;
}

/* Where key k's value lives: in c, or for a per-filter key in fc (NULL: the global base). */
static void *field_of(struct config *c, struct filter_config *fc, const struct key_def *k)
{
    if (!k->per_filter)
        return (char *)c + k->offset;
    return (char *)(fc != NULL ? fc : &c->base) + k->offset;
}

/* Copy the value of per-filter key k from src to dst (strings duplicated). */
static bool copy_field(const struct key_def *k, struct filter_config *dst,
                       const struct filter_config *src)
{
    void *d = (char *)dst + k->offset;
    const void *f = (const char *)src + k->offset;

    switch (k->type) {
    case T_STRING:
        return copy_string((char **)d, *(char *const *)f);
    case T_UINT:
        *(unsigned *)d = *(const unsigned *)f;
        return true;
    case T_UINT64:
        *(uint64_t *)d = *(const uint64_t *)f;
        return true;
    case T_DOUBLE:
        *(double *)d = *(const double *)f;
        return true;
    case T_BOOL:
        *(bool *)d = *(const bool *)f;
        return true;
    case T_ENUM:
        memcpy(d, f, sizeof(int));
        return true;
    case T_LISTEN:
    case T_TEMPLATE:
        break;
    }
    return false;
}

/*
 * Whether the value of key k at fa equals the one at fb (the field itself,
 * in a struct config or a struct filter_config); listen addresses and
 * templates are compared by same_value.
 */
static bool same_at(const struct key_def *k, const void *fa, const void *fb)
{
    switch (k->type) {
    case T_STRING:
        return strcmp(*(char *const *)fa, *(char *const *)fb) == 0;
    case T_UINT:
        return *(const unsigned *)fa == *(const unsigned *)fb;
    case T_UINT64:
        return *(const uint64_t *)fa == *(const uint64_t *)fb;
    case T_DOUBLE:
        return *(const double *)fa == *(const double *)fb;
    case T_BOOL:
        return *(const bool *)fa == *(const bool *)fb;
    case T_ENUM:
        return memcmp(fa, fb, sizeof(int)) == 0;
    case T_LISTEN:
    case T_TEMPLATE:
        break;
    }
    return false;
}

/* Whether per-filter key k is equal in a and b. */
static bool same_field(const struct key_def *k, const struct filter_config *a,
                       const struct filter_config *b)
{
    return same_at(k, (const char *)a + k->offset, (const char *)b + k->offset);
}

/* Each template's filter index from its name; false (blaming the template) for an unknown name. */
static bool resolve_templates(struct config *c, int *blame_template, char *err, size_t errlen)
{
    for (unsigned t = 0; t < c->n_uri_templates; t++) {
        int f = 0;
        if (c->uri_template_names[t] != NULL
            && (f = config_filter_find(c, c->uri_template_names[t])) < 0) {
            *blame_template = (int)t;
            errf(err, errlen, "[auth] uri_template: %s names the filter \"%s\", but there is no "
                 "[filter %s]", c->uri_templates[t], c->uri_template_names[t],
                 c->uri_template_names[t]);
            return false;
        }
        c->uri_template_filter[t] = (unsigned)f;
    }
    return true;
}

bool config_resolve(struct config *c, int *blame_filter, int *blame_template,
                    char *err, size_t errlen)
{
    *blame_filter = *blame_template = -1;
    if (!c->named_filters) {
        fc_free(&c->filters[0]);
        if (!fc_copy(&c->filters[0], &c->base) || !copy_string(&c->filters[0].name, "default"))
            goto oom;
        c->n_filters = 1;
        c->filter_set[0] = 0;
    }
    for (unsigned i = 0; c->named_filters && i < c->n_filters; i++) {
        struct filter_config *fc = &c->filters[i];
        for (size_t k = 0; k < KEY_COUNT; k++) {
            if (!keys[k].per_filter || (c->filter_set[i] >> k & 1) != 0)
                continue;
            /*
             * A filter is its table: one that names none would silently
             * guard the global default's table, never what was meant.
             */
            if (keys[k].offset == offsetof(struct filter_config, table)
                || keys[k].offset == offsetof(struct filter_config, column)) {
                *blame_filter = (int)i;
                errf(err, errlen, "[filter %s] sets no %s: each [filter NAME] section names its "
                     "own table and column", fc->name, keys[k].name);
                return false;
            }
            if (keys[k].offset == offsetof(struct filter_config, channel)) {
                /* Each filter its own channel: one trigger per table notifies only its filter. */
                char ch[256], msg[200];
                snprintf(ch, sizeof ch, "%s_%s", c->base.channel, fc->name);
                if (!check_channel(ch, msg, sizeof msg)) {
                    *blame_filter = (int)i;
                    errf(err, errlen, "[filter %s] channel: the default %s is too long: set channel",
                         fc->name, ch);
                    return false;
                }
                if (!copy_string(&fc->channel, ch))
                    goto oom;
            } else if (!copy_field(&keys[k], fc, &c->base)) {
                goto oom;
            }
        }
    }
    for (unsigned i = 0; i < c->n_filters; i++) {
        const struct filter_config *a = &c->filters[i];
        for (unsigned j = 0; j < i; j++) {
            const struct filter_config *b = &c->filters[j];
            *blame_filter = (int)i;
            if (strcmp(a->table, b->table) == 0 && strcmp(a->column, b->column) == 0) {
                errf(err, errlen, "[filter %s] reads the same table and column as [filter %s] "
                     "(table %s, column %s)", a->name, b->name, a->table, a->column);
                return false;
            }
            if (strcmp(a->channel, b->channel) == 0) {
                errf(err, errlen, "[filter %s] listens on the same channel as [filter %s] (%s)",
                     a->name, b->name, a->channel);
                return false;
            }
        }
    }
    *blame_filter = -1;
    return resolve_templates(c, blame_template, err, errlen);

oom:
    errf(err, errlen, "out of memory");
    return false;
}

/*
 * Store one already-unquoted value in c, or for a per-filter key in fc
 * (NULL: the global value).  Everything is parsed into locals first so
 * that *c changes only on success.
 */
static bool apply(struct config *c, struct filter_config *fc, const struct key_def *k,
                  const char *v, char *err, size_t errlen)
{
    void *field = field_of(c, fc, k);
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
    case T_ENUM: {
        int x;
        if (!parse_enum(k, v, &x, err, errlen))
            return false;
        memcpy(field, &x, sizeof x);    /* K_ENUM checked the field is int-sized */
        return true;
    }
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
    case T_TEMPLATE: {
        /* "TEMPLATE [FILTER]": uritmpl_valid refuses whitespace, so the first blank splits. */
        size_t tlen = strcspn(v, " \t");
        const char *name = v + tlen;
        char *t = NULL, *n = NULL;
        while (*name == ' ' || *name == '\t')
            name++;
        if ((t = strndup(v, tlen)) == NULL || (*name != '\0' && (n = strdup(name)) == NULL)) {
            errf(err, errlen, "out of memory");
            goto template_fail;
        }
        if (!check_template(t, err, errlen)
            || (n != NULL && !config_filter_name_valid(n, err, errlen)))
            goto template_fail;
        if (c->n_uri_templates >= CONFIG_MAX_TEMPLATES) {
            errf(err, errlen, "too many templates (at most %d)", CONFIG_MAX_TEMPLATES);
            goto template_fail;
        }
        c->uri_templates[c->n_uri_templates] = t;
        c->uri_template_names[c->n_uri_templates] = n;
        c->uri_template_filter[c->n_uri_templates++] = 0;    /* config_resolve sets it */
        return true;
    template_fail:
        free(t);
        free(n);
        return false;
    }
    }
    errf(err, errlen, "internal error: bad key type");
    return false;
}

bool config_key_apply(struct config *c, size_t i, const char *value, char *err, size_t errlen)
{
    if (i >= KEY_COUNT) {
        errf(err, errlen, "internal error: no key %zu", i);
        return false;
    }
    return apply(c, NULL, &keys[i], value, err, errlen);
}

bool config_key_apply_filter(struct config *c, unsigned f, size_t i, const char *value,
                             char *err, size_t errlen)
{
    if (i >= KEY_COUNT || !keys[i].per_filter || f >= c->n_filters) {
        errf(err, errlen, "internal error: no per-filter key %zu", i);
        return false;
    }
    if (!apply(c, &c->filters[f], &keys[i], value, err, errlen))
        return false;
    c->filter_set[f] |= UINT64_C(1) << i;
    return true;
}

bool config_set(struct config *c, const char *section, const char *key,
                const char *value, char *err, size_t errlen)
{
    const struct key_def *k = NULL;
    int f = -1, bf, bt;
    char msg[256];
    char *v = NULL;
    struct config next;

    if (strncmp(section, "filter ", 7) == 0) {
        f = config_filter_find(c, section + 7);
        int i = config_filter_key_find(key);
        if (f < 0 || !c->named_filters) {
            errf(err, errlen, "unknown section [%s]", section);
            return false;
        }
        if (i < 0) {
            errf(err, errlen, "unknown key [%s] %s (a [filter NAME] takes only per-filter keys)",
                 section, key);
            return false;
        }
        k = &keys[i];
    } else if ((k = find_key(section, key)) == NULL) {
        if (config_section_known(section))
            errf(err, errlen, "unknown key [%s] %s", section, key);
        else
            errf(err, errlen, "unknown section [%s]", section);
        return false;
    }
    v = config_normalize_value(value, false, msg, sizeof msg);
    if (v == NULL)
        goto fail;
    /* On a copy: a value that breaks the filters (two on one table) must leave *c unchanged. */
    if (!config_copy(&next, c)) {
        snprintf(msg, sizeof msg, "out of memory");
        goto fail;
    }
    if ((f >= 0 ? !config_key_apply_filter(&next, (unsigned)f, (size_t)(k - keys), v, msg, sizeof msg)
                : !apply(&next, NULL, k, v, msg, sizeof msg))
        || !config_resolve(&next, &bf, &bt, msg, sizeof msg)) {
        config_free(&next);
        goto fail;
    }
    config_free(c);
    *c = next;
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

/* --- defaults, copies, reloads, cleanup, introspection --- */

bool config_defaults(struct config *c)
{
    int bf, bt;

    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < KEY_COUNT; i++) {
        if (keys[i].type == T_TEMPLATE)
            continue;           /* no templates by default */
        if (!apply(c, NULL, &keys[i], keys[i].def, NULL, 0))
            return false;
    }
    return config_resolve(c, &bf, &bt, NULL, 0);
}

/* The heap strings of c outside the filters. */
static size_t global_strings(struct config *c, char ***out, size_t max)
{
    size_t n = 0;

    out[n++] = &c->listen_host;
    for (size_t i = 0; i < KEY_COUNT && n < max; i++)
        if (keys[i].type == T_STRING && !keys[i].per_filter)
            out[n++] = (char **)((char *)c + keys[i].offset);
    for (size_t i = 0; i < CONFIG_MAX_TEMPLATES && n + 2 <= max; i++) {
        out[n++] = &c->uri_templates[i];
        out[n++] = &c->uri_template_names[i];
    }
    return n;
}

#define MAX_GLOBAL_STRINGS (1 + KEY_COUNT + 2 * CONFIG_MAX_TEMPLATES)

void config_free(struct config *c)
{
    char **strs[MAX_GLOBAL_STRINGS];
    size_t n;

    if (c == NULL)
        return;
    n = global_strings(c, strs, MAX_GLOBAL_STRINGS);
    for (size_t i = 0; i < n; i++) {
        free(*strs[i]);
        *strs[i] = NULL;
    }
    /* Every slot, not just n_uri_templates and n_filters, in case a count was reset. */
    c->n_uri_templates = 0;
    fc_free(&c->base);
    for (size_t i = 0; i < CONFIG_MAX_FILTERS; i++)
        fc_free(&c->filters[i]);
    c->n_filters = 0;
}

bool config_copy(struct config *dst, const struct config *src)
{
    char **d[MAX_GLOBAL_STRINGS], **s[MAX_GLOBAL_STRINGS];
    struct config *msrc = (struct config *)src;     /* only read */
    size_t n;
    bool ok = true;

    memcpy(dst, src, sizeof *dst);
    /* The pointers are src's: clear them before copying, so a failure frees only copies. */
    n = global_strings(dst, d, MAX_GLOBAL_STRINGS);
    global_strings(msrc, s, MAX_GLOBAL_STRINGS);
    for (size_t i = 0; i < n; i++)
        *d[i] = NULL;
    {
        char **fs[] = FC_STRINGS(&dst->base);
        for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++)
            *fs[i] = NULL;
        for (size_t f = 0; f < CONFIG_MAX_FILTERS; f++) {
            char **ff[] = FC_STRINGS(&dst->filters[f]);
            for (size_t i = 0; i < sizeof ff / sizeof ff[0]; i++)
                *ff[i] = NULL;
        }
    }
    for (size_t i = 0; ok && i < n; i++)
        ok = copy_string(d[i], *s[i]);
    ok = ok && fc_copy(&dst->base, &src->base);
    for (size_t f = 0; ok && f < src->n_filters; f++)
        ok = fc_copy(&dst->filters[f], &src->filters[f]);
    if (!ok)
        config_free(dst);
    return ok;
}

/* Whether key k holds the same value in a and b (not per-filter keys). */
static bool same_value(const struct key_def *k, const struct config *a, const struct config *b)
{
    if (k->type == T_LISTEN)
        return strcmp(a->listen_host, b->listen_host) == 0 && a->listen_port == b->listen_port;
    if (k->type == T_TEMPLATE)
        return true;            /* always reloadable */
    return same_at(k, (const char *)a + k->offset, (const char *)b + k->offset);
}

/* Report the filter keys that differ between next and cur; true if any does. */
static bool filters_differ(const struct config *next, const struct config *cur,
                           void (*changed)(void *arg, const char *section, const char *name),
                           void *arg)
{
    bool any = false;

    if (next->n_filters != cur->n_filters || next->named_filters != cur->named_filters) {
        if (changed != NULL)
            changed(arg, "filter NAME", "sections");
        return true;
    }
    for (unsigned f = 0; f < cur->n_filters; f++) {
        char section[CONFIG_FILTER_NAME_MAX + 16];
        if (strcmp(next->filters[f].name, cur->filters[f].name) != 0) {
            if (changed != NULL)
                changed(arg, "filter NAME", "sections");
            return true;
        }
        for (size_t i = 0; i < KEY_COUNT; i++) {
            if (!keys[i].per_filter || same_field(&keys[i], &next->filters[f], &cur->filters[f]))
                continue;
            any = true;
            snprintf(section, sizeof section, "filter %s", cur->filters[f].name);
            if (changed != NULL)
                changed(arg, cur->named_filters ? section : keys[i].section, keys[i].name);
        }
    }
    return any;
}

bool config_keep_restart_keys(struct config *next, const struct config *cur,
                              void (*changed)(void *arg, const char *section, const char *name),
                              void *arg, char *err, size_t errlen)
{
    int bt = -1;

    for (size_t i = 0; i < KEY_COUNT; i++) {
        const struct key_def *k = &keys[i];
        void *fn = (char *)next + k->offset;
        const void *fc = (const char *)cur + k->offset;

        if (k->reload || k->per_filter || same_value(k, next, cur))
            continue;
        if (changed != NULL)
            changed(arg, k->section, k->name);
        switch (k->type) {
        case T_STRING:
            if (!copy_string((char **)fn, *(char *const *)fc))
                goto oom;
            break;
        case T_LISTEN:
            if (!copy_string(&next->listen_host, cur->listen_host))
                goto oom;
            next->listen_port = cur->listen_port;
            break;
        case T_UINT:
            *(unsigned *)fn = *(const unsigned *)fc;
            break;
        case T_UINT64:
            *(uint64_t *)fn = *(const uint64_t *)fc;
            break;
        case T_DOUBLE:
            *(double *)fn = *(const double *)fc;
            break;
        case T_BOOL:
            *(bool *)fn = *(const bool *)fc;
            break;
        case T_ENUM:
            memcpy(fn, fc, sizeof(int));
            break;
        case T_TEMPLATE:
            break;
        }
    }
    /* Every per-filter key needs a restart: the filters are cur's, wholesale. */
    if (filters_differ(next, cur, changed, arg)) {
        fc_free(&next->base);
        for (unsigned f = 0; f < CONFIG_MAX_FILTERS; f++)
            fc_free(&next->filters[f]);
        next->n_filters = 0;
        if (!fc_copy(&next->base, &cur->base))
            goto oom;
        for (unsigned f = 0; f < cur->n_filters; f++) {
            if (!fc_copy(&next->filters[f], &cur->filters[f]))
                goto oom;
            next->n_filters = f + 1;
        }
        memcpy(next->filter_set, cur->filter_set, sizeof next->filter_set);
        next->named_filters = cur->named_filters;
        if (!resolve_templates(next, &bt, err, errlen)) {
            size_t len = err != NULL ? strlen(err) : 0;
            if (err != NULL && len < errlen)
                snprintf(err + len, errlen - len, " in force (filters need a restart)");
            return false;
        }
    }
    return true;

oom:
    errf(err, errlen, "out of memory");
    return false;
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

bool config_key_reloads(size_t i)
{
    return i < KEY_COUNT && keys[i].reload;
}

bool config_key_per_filter(size_t i)
{
    return i < KEY_COUNT && keys[i].per_filter;
}

void config_key_values(size_t i, char *buf, size_t len)
{
    const struct key_def *k;

    if (len == 0)
        return;
    buf[0] = '\0';
    if (i >= KEY_COUNT)
        return;
    k = &keys[i];
    switch (k->type) {
    case T_UINT:
    case T_UINT64:
        snprintf(buf, len, "%llu..%llu", (unsigned long long)k->min, (unsigned long long)k->max);
        break;
    case T_DOUBLE:
        snprintf(buf, len, "%s %g and %s %g", k->dmin_open ? ">" : ">=", k->dmin,
                 k->dmax_open ? "<" : "<=", k->dmax);
        break;
    case T_BOOL:
        snprintf(buf, len, "yes or no");
        break;
    case T_ENUM:
        enum_list(k->names, " | ", buf, len);
        break;
    case T_STRING:
    case T_LISTEN:
    case T_TEMPLATE:
        break;
    }
}

const char *config_log_level_name(enum log_level level)
{
    for (const struct enum_name *n = log_levels; n->name != NULL; n++)
        if (n->value == (int)level)
            return n->name;
    return "?";
}
