/*
 * The one list of configuration keys, with the hooks that put a reloaded
 * value in force (the checks only one key needs are config_checks.c's):
 * one row per key drives defaults, validation, overrides, reload rules, -h
 * and the docs.
 */
#include "config_keys.h"
#include "config_int.h"

#include <stdio.h>
#include <string.h>

#include "filter.h"
#include "log.h"

/*
 * Row builders.  Where a key's value goes: CF(field) in struct config,
 * FF(field) in struct filter_config (a per-filter key).  Anything after
 * the help text is more designated initialisers: .apply = hook,
 * .secret = true.
 */
#define CF(f) .offset = offsetof(struct config, f)
#define FF(f) .per_filter = true, .offset = offsetof(struct filter_config, f)
#define ROW(s, k, t, d, r) .section = (s), .name = (k), .type = &config_type_##t, .def = (d), .reload = (r)
#define K_STR(s, k, d, r, at, chk, h, ...) \
    { ROW(s, k, string, d, r), at, .check = (chk), .help = (h), __VA_ARGS__ }
#define K_UINT(s, k, d, r, at, lo, hi, h, ...) \
    { ROW(s, k, uint, d, r), .min = (lo), .max = (hi), at, .help = (h), __VA_ARGS__ }
/* A whole number of seconds, written with or without a unit. */
#define K_SECS(s, k, d, r, at, lo, hi, h, ...) \
    { ROW(s, k, seconds, d, r), .min = (lo), .max = (hi), at, .help = (h), __VA_ARGS__ }
#define K_U64(s, k, d, r, at, lo, hi, h, ...) \
    { ROW(s, k, u64, d, r), .min = (lo), .max = (hi), at, .help = (h), __VA_ARGS__ }
#define K_DBL(s, k, d, r, at, lo, lo_open, hi, hi_open, h, ...) \
    { ROW(s, k, double, d, r), .dmin = (lo), .dmin_open = (lo_open), .dmax = (hi), \
      .dmax_open = (hi_open), at, .help = (h), __VA_ARGS__ }
/* Seconds with a fraction, written with or without a unit. */
#define K_DSECS(s, k, d, r, at, lo, lo_open, hi, hi_open, h, ...) \
    { ROW(s, k, seconds_real, d, r), .dmin = (lo), .dmin_open = (lo_open), .dmax = (hi), \
      .dmax_open = (hi_open), at, .help = (h), __VA_ARGS__ }
#define K_BOOL(s, k, d, r, at, h, ...) \
    { ROW(s, k, bool, d, r), at, .help = (h), __VA_ARGS__ }
/* The field must be int-sized: the enum type stores the table's int into it. */
#define K_ENUM(s, k, d, r, f, tbl, h, ...) \
    { ROW(s, k, enum, d, r), .names = (tbl), .help = (h), \
      .offset = offsetof(struct config, f) + 0 * sizeof(struct { \
          _Static_assert(sizeof(((struct config *)0)->f) == sizeof(int), #f " is not int-sized"); \
          int dummy; }), __VA_ARGS__ }
/* The same for a per-table key ([filter NAME] may set it). */
#define K_FENUM(s, k, d, r, f, tbl, h, ...) \
    { ROW(s, k, enum, d, r), .names = (tbl), .help = (h), .per_filter = true, \
      .offset = offsetof(struct filter_config, f) + 0 * sizeof(struct { \
          _Static_assert(sizeof(((struct filter_config *)0)->f) == sizeof(int), #f " is not int-sized"); \
          int dummy; }), __VA_ARGS__ }
/* A type that knows its own fields (listen, template). */
#define K_TYPED(s, k, t, d, r, h, ...) \
    { ROW(s, k, t, d, r), .help = (h), __VA_ARGS__ }


/* --- apply hooks: what a reload does beyond publishing the new values --- */

static void apply_log_level(const struct config *c, const struct config_reload_ctx *ctx)
{
    if (ctx->log != NULL)
        log_set_level(ctx->log, c->log_level);
}

static const struct config_enum_name log_formats[] = {
    { "text", LOG_FORMAT_TEXT }, { "json", LOG_FORMAT_JSON }, { NULL, 0 }
};

static const struct config_enum_name log_levels[] = {
    { "error", LOG_LVL_ERROR }, { "warn", LOG_LVL_WARN },
    { "info", LOG_LVL_INFO }, { "debug", LOG_LVL_DEBUG }, { NULL, 0 }
};
static const struct config_enum_name deny_statuses[] = {
    { "401", 401 }, { "403", 403 }, { "404", 404 }, { "410", 410 }, { NULL, 0 }
};
/* Envoy's ext_authz allows a request only on 200. */
static const struct config_enum_name allow_statuses[] = { { "200", 200 }, { "204", 204 }, { NULL, 0 } };
/* Every enum sync_method by its name, from the one list (config_data.h). */
static const struct config_enum_name sync_methods[] = {
    { "auto", SYNC_AUTO },
#define METHOD_VALUE(id, name) { (name), (id) },
    SYNC_METHOD_LIST(METHOD_VALUE)
#undef METHOD_VALUE
    { NULL, 0 }
};
/* Every enum filter_kind by its name, from the one list (filter_types.h). */
static const struct config_enum_name filter_kinds[] = {
#define KIND_VALUE(id, number, name) { (name), (id) },
    FILTER_KIND_LIST(KIND_VALUE)
#undef KIND_VALUE
    { NULL, 0 }
};
static const struct config_enum_name uri_sources[] = {
    { "auto", URI_SOURCE_AUTO }, { "x-original-uri", URI_SOURCE_X_ORIGINAL_URI },
    { "x-forwarded-uri", URI_SOURCE_X_FORWARDED_URI }, { "path", URI_SOURCE_PATH }, { NULL, 0 }
};

/*
 * The one list of keys.  Keep it grouped by section in the order of the
 * sample config; conf/bloomguard.conf and docs/bloomguard.8 must mention
 * every row (tests check).  Defaults are text so they go through the same
 * validation as user input.
 *
 * CONFIG_RESTART rows are read once at start or by the follower threads,
 * which keep the start configuration.  CONFIG_REBUILD rows are what a
 * load sizes its filter by (table_set_sizing): a SIGHUP that changes one
 * rebuilds that filter.  What a filter holds (table, column, the spelling
 * the column's type gives) is bound to its follower, so it needs a restart.  Which keys a SIGHUP applies is this
 * column only: -h prints it and tests/docs.test holds bloomguard(8)'s list
 * to it, so no comment repeats the list.
 */
const struct config_key config_keys[] = {
    K_TYPED("server", "listen", listen, "127.0.0.1:8080", CONFIG_RESTART,
            "address to listen on, host:port or [ipv6]:port (port 0 picks a free port), or "
            "unix:/path (a unix socket, mode listen_mode, group listen_group)"),
    K_TYPED("server", "listen_mode", mode, "0660", CONFIG_RESTART,
            "permission bits of a unix socket (listen = unix:/path); a client needs write "
            "permission to connect; o+w (any local user) draws a warning", CF(listen_mode)),
    K_STR("server", "listen_group", "", CONFIG_RESTART, CF(listen_group), config_check_group,
          "group of a unix socket (listen = unix:/path), a name or a gid, e.g. the proxy's "
          "www-data; the daemon's user must be in it; empty: the daemon's group"),
    K_UINT("server", "threads", "0", CONFIG_RESTART, CF(threads), 0, 256,
           "worker threads, 0 = one per CPU"),
    K_UINT("server", "max_connections", "10000", CONFIG_RESTART, CF(max_connections), 1, 1000000,
           "most client connections open at once; more are closed at once"),
    K_SECS("server", "connection_timeout", "30", CONFIG_RESTART, CF(connection_timeout), 0, 86400,
           "seconds an idle client connection is kept, 0 = forever"),
    K_U64("server", "max_body_bytes", "1048576", CONFIG_RELOAD, CF(max_body_bytes), 1, 1073741824,
          "largest request body accepted, in bytes"),
    K_UINT("server", "max_batch", "10000", CONFIG_RELOAD, CF(max_batch), 1, 10000000,
           "most ids accepted in one batch request"),
    K_UINT("server", "max_id_bytes", "512", CONFIG_RESTART, CF(max_id_bytes), 1, CONFIG_MAX_ID_BYTES,
           "longest id accepted, in bytes"),
    K_SECS("server", "header_timeout", "5", CONFIG_RESTART, CF(header_timeout), 0, 3600,
           "seconds a client may take to send a request's headers, 0 = no limit"),
    K_BOOL("server", "fast_path", "yes", CONFIG_RESTART, CF(fast_path),
           "answer plain GET /exists/{id} requests without libmicrohttpd, at a fraction of its "
           "CPU per request; any other request, and the rest of its connection, goes to "
           "libmicrohttpd as before; off with TLS"),
    K_STR("server", "admin_token_file", "", CONFIG_RELOAD, CF(admin_token_file), NULL,
          "file holding the token the admin routes need (Authorization: Bearer; -h lists "
          "the routes); "
          "empty: systemd credential admin_token if any, else writes only on loopback; "
          "SIGHUP reads the token again"),
    K_STR("server", "replication_token_file", "", CONFIG_RESTART, CF(replication_token_file), NULL,
          "file holding a token that allows GET /snapshot, GET /replicate and POST /absent only, for replicas "
          "([sync] method = upstream) that should hold no admin right; the admin token works "
          "there too; empty: none"),
    K_STR("server", "publish_dir", "auto", CONFIG_RESTART, CF(publish_dir), NULL,
          "directory where each filter is published as <name>.bgf, a shared mapping that "
          "libbloomguard and the nginx module read without asking the daemon; auto: systemd's "
          "RuntimeDirectory= ($RUNTIME_DIRECTORY) when set, else off; empty: off; the "
          "daemon's own: created if missing, refused when another user owns it or others may "
          "write to it"),
    K_STR("server", "tls_cert_file", "", CONFIG_RESTART, CF(tls_cert_file), NULL,
          "PEM certificate (leaf first, then its chain) to serve https with, so that a peer or a "
          "client on another host sends the admin token encrypted; needs tls_key_file; "
          "empty: plain http"),
    K_STR("server", "tls_key_file", "", CONFIG_RESTART, CF(tls_key_file), NULL,
          "PEM private key of tls_cert_file (read at start, before any privilege is dropped); "
          "empty: plain http"),
    K_TYPED("server", "publish_mode", mode, "0644", CONFIG_RESTART,
            "permission bits of the published files, within 0644 (no one but the daemon may "
            "write the filter's memory): 0644 lets every local user test ids, 0640 only "
            "publish_group", CF(publish_mode), .max = 0644),
    K_STR("server", "publish_group", "", CONFIG_RESTART, CF(publish_group), config_check_group,
          "group of the published files (and of publish_dir when the daemon creates it), a "
          "name or a gid, e.g. nginx's www-data with publish_mode = 0640; the daemon's user "
          "must be in it; empty: the daemon's group"),

    K_STR("postgres", "conninfo", "", CONFIG_RESTART, CF(conninfo), NULL,
          "libpq connection string; empty uses the libpq defaults and PG* environment variables",
          .secret = true),
    K_STR("postgres", "table", "users", CONFIG_RESTART, FF(table), config_check_table,
          "table holding the ids, optionally schema-qualified as schema.table"),
    K_STR("postgres", "column", "id", CONFIG_RESTART, FF(column), config_check_column,
          "column of that table holding the ids"),
    K_SECS("postgres", "retry_max_seconds", "30", CONFIG_RESTART, CF(retry_max_seconds), 1, 3600,
           "longest wait between reconnection attempts, in seconds"),

    K_U64("filter", "expected_items", "0", CONFIG_REBUILD, FF(expected_items), 0, FILTER_MAX_ITEMS,
          "least items a load sizes the filter for: while the table's rows fit, exactly this "
          "(an estimate up to 2% over it fits); past it (or 0), the rows times headroom"),
    K_DBL("filter", "false_positive_rate", "0.01", CONFIG_REBUILD, FF(false_positive_rate),
          FILTER_MIN_FPP, true, FILTER_MAX_FPP, true,
          "target false positive rate"),
    K_DBL("filter", "headroom", "2.0", CONFIG_REBUILD, FF(headroom), 1.0, false, 100.0, false,
          "factor applied to the table's row count when it is above expected_items"),
    K_UINT("filter", "max_layers", "8", CONFIG_REBUILD, FF(max_layers), 1, FILTER_MAX_LAYERS,
           "layers the filter may grow to in memory when it fills up; 1 = never grows"),
    K_DBL("filter", "growth", "2.0", CONFIG_REBUILD, FF(growth), FILTER_MIN_EXPANSION, false,
          FILTER_MAX_EXPANSION, false,
          "a layer added when the filter fills up is sized for this many times the items so far"),
    K_FENUM("filter", "kind", "blocked", CONFIG_REBUILD, kind, filter_kinds,
            "the filter's layout: blocked (each key's bits in one 64-byte block: one cache line "
            "per lookup)"),

    K_BOOL("sync", "enabled", "yes", CONFIG_RESTART, CF(sync_enabled),
           "follow changes to the tables after their load; no: only loads (a static table)"),
    K_FENUM("sync", "method", "auto", CONFIG_RESTART, method, sync_methods,
            "how a table is followed: logical (logical replication from the WAL, no trigger), "
            "feed (a trigger appends to a log, read every poll_interval), notify (a trigger sends "
            "NOTIFY: costly for the table's writers), upstream (another bloomguard's filter of the "
            "same name, [sync] upstream: no PostgreSQL), auto (logical where the server and the "
            "table allow it, else the feed, else notify)"),
    K_DSECS("sync", "poll_interval", "0.1", CONFIG_RESTART, CF(poll_interval), 0.01, false, 60.0, false,
          "seconds between reads of the change feed by method feed"),
    K_STR("sync", "publication", "bloomguard", CONFIG_RESTART, CF(publication), config_check_ident,
          "the publication method logical subscribes to; bloomguard_watch adds tables to it"),
    K_STR("sync", "slot", "auto", CONFIG_RESTART, CF(slot_name), config_check_slot,
          "method logical's replication slot, one for all filters: auto = a permanent slot "
          "bloomguard_<id> when snapshots are on (the id is kept in the snapshot directory), "
          "else a temporary one; a name = that permanent slot"),
    K_UINT("sync", "logical_max_daemons", "4", CONFIG_RESTART, CF(logical_max_daemons), 0, 10000,
           "method auto: once this many other bloomguard slots decode the server's WAL, a table "
           "the feed also serves is followed with the feed"),
    K_STR("sync", "upstream", "", CONFIG_RESTART, CF(upstream), config_check_upstreams,
          "method upstream: the bloomguard daemons to follow, space-separated, tried in order: "
          "https://host:port, or http:// to a loopback address"),
    K_STR("sync", "upstream_token_file", "", CONFIG_RESTART, CF(upstream_token_file), NULL,
          "method upstream: file holding the token sent to the upstreams (their "
          "replication_token_file's, or their admin token); empty: none"),
    K_STR("sync", "upstream_ca_file", "", CONFIG_RESTART, CF(upstream_ca_file), NULL,
          "method upstream: PEM file of the CAs an https upstream's certificate must chain to; "
          "empty: the system's CAs"),
    K_STR("sync", "channel", "bloomguard", CONFIG_RESTART, FF(channel), config_check_channel,
          "NOTIFY channel, an identifier [A-Za-z_][A-Za-z0-9_]*; deletes use <channel>_deleted"),
    K_SECS("sync", "rebuild_interval", "0", CONFIG_RESTART, FF(rebuild_interval), 0, 31536000,
           "rebuild the filter from the table every this many seconds, 0 = never"),
    K_U64("sync", "rebuild_after_deletes", "0", CONFIG_RESTART, FF(rebuild_after_deletes), 0, UINT64_MAX,
          "rebuild the filter after this many deletes, 0 = never"),
    K_BOOL("sync", "auto_grow", "yes", CONFIG_RESTART, FF(auto_grow),
           "when the filter grew layers and has added none for min_rebuild_interval, or can no "
           "longer keep its rate, rebuild it as one layer sized from the table"),
    K_U64("sync", "pending_limit", "1000000", CONFIG_RESTART, FF(pending_limit), 0, 100000000,
          "ids POSTed to /ids that are kept across rebuilds until the table holds them; 0 = none, so every POST /ids is refused (507)"),
    K_U64("sync", "pending_max_bytes", "67108864", CONFIG_RESTART, FF(pending_max_bytes), 0, UINT64_C(17179869184),
          "bytes of ids that journal may hold; a POST that would exceed it or pending_limit is refused"),
    K_SECS("sync", "pending_ttl", "3600", CONFIG_RESTART, FF(pending_ttl), 1, 31536000,
           "seconds a POSTed id stays in the journal when no COPY shows it in the table"),
    K_DSECS("sync", "max_staleness", "2", CONFIG_RESTART, CF(max_staleness), 0.0, false, 3600.0, false,
          "seconds: when bloomguard cannot show that it has every row committed longer ago than this, "
          "answers that would be 404 or deny become 200 or allow (degraded); 0 = never degrade"),
    K_DSECS("sync", "probe_interval", "0.2", CONFIG_RESTART, CF(probe_interval), 0.01, false, 60.0, false,
          "seconds between the follower's round trips that prove it is up to date"),
    K_SECS("sync", "silence_timeout", "15", CONFIG_RESTART, CF(silence_timeout), 1, 3600,
           "seconds a follower's probe or feed read may go unanswered before its connection is given "
           "up and made again (a silent network); answers are degraded after max_staleness long before"),
    K_SECS("sync", "min_rebuild_interval", "30", CONFIG_RESTART, CF(min_rebuild_interval), 0, 86400,
           "least seconds from the end of one rebuild to the start of the next (after the first load), 0 = none"),

    K_STR("snapshot", "path", "auto", CONFIG_RESTART, CF(snapshot_path), NULL,
          "directory of the snapshots: each filter's is <path>/<name>.snap, written after each load, "
          "every interval and at stop, read at start; auto: systemd's StateDirectory= "
          "($STATE_DIRECTORY) when set, else none; empty: no snapshots"),
    K_SECS("snapshot", "interval", "300", CONFIG_RESTART, CF(snapshot_interval), 0, 86400,
           "seconds between periodic snapshots (each first catches up with the change feed), "
           "0 = only after loads and at stop"),
    K_STR("snapshot", "bootstrap_from", "", CONFIG_RESTART, CF(bootstrap_from), config_check_peer,
          "https://host:port (or http:// to a loopback address) of a peer bloomguard: a start "
          "without a snapshot file loads the peer's (GET /snapshot, with this daemon's admin "
          "token), checks a sample of the table's rows against it, and reads only the changes "
          "since; empty: none"),
    K_STR("snapshot", "bootstrap_ca_file", "", CONFIG_RESTART, CF(bootstrap_ca_file), NULL,
          "PEM file of the CAs an https bootstrap_from peer's certificate must chain to; empty: "
          "the system's CAs"),

    K_U64("fleet", "ring_items", "1048576", CONFIG_RESTART, CF(fleet_ring_items), 1, 1073741824,
          "keys each table keeps for its replicas to resume their stream from (12 bytes each, "
          "made when the first replica asks); a replica further behind fetches a snapshot"),
    K_UINT("fleet", "max_replicas", "256", CONFIG_RESTART, CF(fleet_max_replicas), 0, 100000,
           "replication streams served at once (GET /replicate/NAME); more are refused with "
           "503; 0: this daemon serves no replica"),

    K_BOOL("feed", "enabled", "yes", CONFIG_RESTART, CF(feed_enabled),
           "where sql/notify.sql's change feed is installed, catch up from it after a restart or a "
           "reconnect instead of copying the whole table"),
    K_SECS("feed", "retention", "86400", CONFIG_RESTART, CF(feed_retention), 60, 31536000,
           "seconds of changes the feed keeps (pruned by every bloomguard); a position older "
           "than this may need a full load"),
    K_SECS("feed", "prune_interval", "60", CONFIG_RESTART, CF(feed_prune_interval), 0, 86400,
           "seconds between prunes of the feed's log, 0 = never prune from this daemon"),

    K_BOOL("adaptive", "enabled", "yes", CONFIG_RESTART, CF(adaptive_enabled),
           "learn which ids answer \"maybe\" again and again, look each up in PostgreSQL once, and "
           "answer those it lacks absent until the insert that adds them (a false positive found "
           "is a false positive fixed)"),
    K_UINT("adaptive", "min_hits", "8", CONFIG_RESTART, CF(adaptive_min_hits), 1, 32767,
           "\"maybe\" answers within window that make an id a candidate for a lookup"),
    K_DSECS("adaptive", "window", "10", CONFIG_RESTART, CF(adaptive_window), 0.01, false, 3600.0,
            false, "seconds within which an id must answer \"maybe\" min_hits times"),
    K_UINT("adaptive", "verify_rate", "20", CONFIG_RESTART, CF(adaptive_verify_rate), 1, 100000,
           "primary-key lookups per second per filter at most, on a connection of their own"),
    K_UINT("adaptive", "max_entries", "10000", CONFIG_RESTART, CF(adaptive_max_entries), 16,
           1000000, "verified-absent ids kept per filter (about 380 bytes each with their "
           "sketch); a new one makes room by evicting one, which answers \"maybe\" again"),

    K_TYPED("auth", "uri_template", template, NULL, CONFIG_RELOAD,
            "request path with {id} where the id goes, e.g. /user/get/{id}; repeat the key for more"),
    K_ENUM("auth", "deny_status", "403", CONFIG_RELOAD, deny_status, deny_statuses,
           "HTTP status for an unknown id"),
    K_ENUM("auth", "allow_status", "204", CONFIG_RELOAD, allow_status, allow_statuses,
           "HTTP status for an id that may exist or a URI no template matches: 204, or 200 for Envoy"),
    K_BOOL("auth", "fail_open", "yes", CONFIG_RELOAD, CF(fail_open),
           "allow requests while no filter is loaded, instead of denying them"),
    K_ENUM("auth", "uri_source", "auto", CONFIG_RELOAD, uri_source, uri_sources,
           "where the original URI comes from: x-original-uri (nginx), x-forwarded-uri (Traefik), "
           "path (Envoy) or auto (the first of these present)"),

    K_BOOL("metrics", "enabled", "yes", CONFIG_RESTART, CF(metrics_enabled),
           "serve the metrics endpoint"),

    K_ENUM("log", "level", "info", CONFIG_RELOAD, log_level, log_levels,
           "least severe messages logged", .apply = apply_log_level),
    K_ENUM("log", "format", "text", CONFIG_RESTART, log_format, log_formats,
           "text: one line per event (journal records under journald); json: one JSON object "
           "per line with the fields journald gets (time, level, priority, syslog_identifier, "
           "pid, filter, code, message), wherever the log goes"),
    K_STR("log", "file", "", CONFIG_RESTART, CF(log_file), NULL,
          "append the log to this file instead of standard error (reopened on SIGUSR1, "
          "for logrotate); empty: standard error"),
    K_SECS("log", "repeat_interval", "60", CONFIG_RELOAD, CF(log_repeat_interval), 0, 86400,
           "while a filter stays degraded (nothing follows its table, the follower is down, the "
           "filter is saturated), say so again this often; 0: only when it starts and ends"),
};

const size_t config_nkeys = sizeof config_keys / sizeof config_keys[0];

_Static_assert(sizeof config_keys / sizeof config_keys[0] <= 64 * CONFIG_KEY_WORDS,
               "filter_set has one bit per key");

int config_key_find(const char *section, const char *name)
{
    for (size_t i = 0; i < config_nkeys; i++)
        if (strcmp(config_keys[i].section, section) == 0 && strcmp(config_keys[i].name, name) == 0)
            return (int)i;
    return -1;
}

int config_filter_key_find(const char *name)
{
    for (size_t i = 0; i < config_nkeys; i++)
        if (config_keys[i].per_filter && strcmp(config_keys[i].name, name) == 0)
            return (int)i;
    return -1;
}

bool config_section_known(const char *section)
{
    for (size_t i = 0; i < config_nkeys; i++)
        if (strcmp(config_keys[i].section, section) == 0)
            return true;
    return false;
}

bool config_key_repeatable(size_t i)
{
    return i < config_nkeys && config_keys[i].type == &config_type_template;
}

size_t config_key_count(void)
{
    return config_nkeys;
}

bool config_key_at(size_t i, const char **section, const char **name,
                   const char **default_value, const char **help)
{
    if (i >= config_nkeys)
        return false;
    if (section != NULL)
        *section = config_keys[i].section;
    if (name != NULL)
        *name = config_keys[i].name;
    if (default_value != NULL)
        *default_value = config_keys[i].def != NULL ? config_keys[i].def : "";
    if (help != NULL)
        *help = config_keys[i].help;
    return true;
}

enum config_reload config_key_reload(size_t i)
{
    return i < config_nkeys ? config_keys[i].reload : CONFIG_RESTART;
}

bool config_key_reloads(size_t i)
{
    return config_key_reload(i) != CONFIG_RESTART;
}

bool config_key_per_filter(size_t i)
{
    return i < config_nkeys && config_keys[i].per_filter;
}

bool config_key_duration(size_t i)
{
    return i < config_nkeys && (config_keys[i].type == &config_type_seconds
                                || config_keys[i].type == &config_type_seconds_real);
}

void config_key_values(size_t i, char *buf, size_t len)
{
    if (len == 0)
        return;
    buf[0] = '\0';
    if (i < config_nkeys)
        config_keys[i].type->values(&config_keys[i], buf, len);
}

const char *config_log_level_name(enum log_level level)
{
    for (const struct config_enum_name *n = log_levels; n->name != NULL; n++)
        if (n->value == (int)level)
            return n->name;
    return "?";
}

const char *sync_method_name(enum sync_method m)
{
    if (m == SYNC_NONE)
        return "none";
    for (const struct config_enum_name *n = sync_methods; n->name != NULL; n++)
        if (n->value == (int)m)
            return n->name;
    return "?";
}
