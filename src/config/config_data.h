/*
 * The configuration as data: struct config, its enums and limits, what
 * the key table describes.  It has no code of its own so that the files
 * below config.c (the key table, the value types) can see the struct
 * without including config.h, whose functions sit above them.
 */
#ifndef BLOOMGUARD_CONFIG_DATA_H
#define BLOOMGUARD_CONFIG_DATA_H

#include <stdbool.h>
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

/*
 * The follow methods (docs/follow.md), one row each: X(constant, name).
 * The name is what [sync] method takes and what the log, /stats and
 * /metrics say.  The enum, the configuration's values and sync_method_name
 * are made from this list; follow.c's table of methods gives each row its
 * struct follow_ops (tests/check_follow holds the two together).
 */
#define SYNC_METHOD_LIST(X) \
    X(SYNC_LOGICAL, "logical") \
    X(SYNC_FEED, "feed") \
    X(SYNC_NOTIFY, "notify") \
    X(SYNC_UPSTREAM, "upstream")

/*
 * [sync] method: how a table is followed after its first load (follow.h).
 * 0 is "auto" as a setting (the daemon picks) and "none" as a choice made
 * (follow_choose: nothing can follow the table).
 */
enum sync_method {
    SYNC_AUTO = 0,
    SYNC_NONE = SYNC_AUTO,
#define SYNC_METHOD_ENUM(id, name) id,
    SYNC_METHOD_LIST(SYNC_METHOD_ENUM)
#undef SYNC_METHOD_ENUM
    SYNC_METHODS            /* how many values, 0 included; not a method */
};

/* Upper bound of [server] max_id_bytes: callers may size stack buffers by it. */
#define CONFIG_MAX_ID_BYTES 65536

/* Most [auth] uri_template entries one configuration may hold. */
#define CONFIG_MAX_TEMPLATES 32

/* Most [sync] upstream URLs, and the longest of each. */
#define CONFIG_MAX_UPSTREAMS 8
#define CONFIG_UPSTREAM_URL_MAX 255

/* Words of one bit per key of the key table (config_keys.c asserts they suffice). */
#define CONFIG_KEY_WORDS 2

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
 * table, config_keys.c (bloomguard -h lists them).
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
    char *tls_cert_file;         /* PEM certificate (chain) served over TLS; "" = plain http */
    char *tls_key_file;          /* its private key (PEM); set with tls_cert_file or not at all */
    unsigned publish_mode;       /* the published files' permission bits (within 0644) */
    char *publish_group;         /* their group: a name or a gid; "" = the process's */
    char *replication_token_file; /* a token for GET /snapshot and /replicate only; "" = none */
    /* [postgres] */
    char *conninfo;              /* "" = libpq defaults / PG* env */
    unsigned retry_max_seconds;  /* cap of reconnect backoff */
    /* [sync] */
    bool sync_enabled;           /* key "enabled": LISTEN/NOTIFY follower */
    double max_staleness;        /* seconds; 0 = never degrade */
    double probe_interval;       /* seconds between follower round trips */
    unsigned silence_timeout;    /* seconds a follower's connection may go unanswered before it is given up */
    unsigned min_rebuild_interval; /* seconds between the end of a rebuild and the next start */
    double poll_interval;        /* seconds between reads of the change feed (method feed) */
    char *publication;           /* the publication method logical reads, an identifier */
    char *slot_name;             /* key "slot": "auto" or a replication slot name */
    unsigned logical_max_daemons; /* auto: past this many other bloomguard slots, prefer the feed */
    char *upstream;              /* method upstream: the upstreams' URLs, space-separated, tried in order */
    char *upstream_token_file;   /* method upstream: the token sent to them; "" = none */
    char *upstream_ca_file;      /* method upstream: CAs of an https upstream; "" = the system's */
    /* [snapshot] */
    char *snapshot_path;         /* key "path": directory of <name>.snap files; "" = off */
    unsigned snapshot_interval;  /* seconds between periodic snapshots; 0 = only after loads */
    char *bootstrap_from;        /* "http[s]://host[:port]" of a peer, "" = none */
    char *bootstrap_ca_file;     /* PEM CAs an https peer must chain to; "" = the system's */
    /* [fleet] */
    uint64_t fleet_ring_items;   /* keys each table keeps for replicas to resume from */
    unsigned fleet_max_replicas; /* replication streams served at once */
    /* [feed] */
    bool feed_enabled;           /* key "enabled": catch up from the change feed where installed */
    unsigned feed_retention;     /* seconds of changes bloomguard_feed_prune keeps */
    unsigned feed_prune_interval; /* seconds between prunes; 0 = never */
    /* [adaptive] */
    bool adaptive_enabled;       /* key "enabled": verify hot "maybe" IDs, deny the absent ones */
    unsigned adaptive_min_hits;  /* "maybe" answers within adaptive_window that make a candidate */
    double adaptive_window;      /* seconds */
    unsigned adaptive_verify_rate; /* primary-key lookups per second per filter at most */
    unsigned adaptive_max_entries; /* verified-absent IDs kept per filter */
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
    uint64_t filter_set[CONFIG_MAX_FILTERS][CONFIG_KEY_WORDS];
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
    unsigned log_repeat_interval;   /* key "repeat_interval", seconds; 0: say a lasting state once */
    enum log_format log_format;  /* key "format" */
};

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

#endif /* BLOOMGUARD_CONFIG_DATA_H */
