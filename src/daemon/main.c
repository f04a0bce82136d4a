/*
 * bloomguard: configuration, signals and service notifications, after
 * cmdline.c has read the command line.  Wiring only; the work happens in
 * the modules.
 */
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api.h"
#include "cmdline.h"
#include "routes.h"
#include "rundirs.h"
#include "config.h"
#include "fleethub.h"
#include "http.h"
#include "live.h"
#include "log.h"
#include "metrics.h"
#include "notify.h"
#include "persist.h"
#include "postlog.h"
#include "preflight.h"
#include "proxyconf.h"
#include "publish.h"
#include "source.h"
#include "table.h"
#include "stats.h"
#include "token.h"
#include "watch.h"

#define DEFAULT_CONFIG SYSCONFDIR "/bloomguard/bloomguard.conf"

/*
 * Readiness across tables, for sd_notify.  The hooks run on the rebuild
 * thread, SIGHUP on the main thread; mu orders them (taken before the
 * source's own lock, never after).
 */
struct hooks_ctx {
    struct log *lg;
    unsigned n;
    pthread_mutex_t mu;
    bool ready_sent;                /* the start's READY=1 */
    uint64_t loaded, attempted;     /* bit t: table t loaded / finished a first load */
    /* SIGHUP sent RELOADING=1: READY=1 is owed once each table's rebuild owed[t] has finished. */
    uint64_t owed[CONFIG_MAX_FILTERS];  /* 0: none owed */
    unsigned owing;                 /* tables with owed[t] != 0 */
};

static void on_progress(void *arg, unsigned t, uint64_t rows, bool first)
{
    struct hooks_ctx *h = arg;
    (void)t;
    pthread_mutex_lock(&h->mu);
    bool reloading = h->owing > 0;
    pthread_mutex_unlock(&h->mu);
    /*
     * systemd times a SIGHUP rebuild like the start: from RELOADING=1 to
     * READY=1 within TimeoutStartSec.  Both get more time while rows arrive.
     */
    notify_progress(rows, first, first || reloading);
}

/*
 * READY=1 at the start once every table is loaded, or once one is and every
 * other has failed its first try (a missing table must not keep the others
 * from serving, nor systemd from seeing the service up; /readyz says which
 * is not loaded).  After SIGHUP, once the rebuild it asked of each table
 * (or a later one) has finished.
 */
static void on_done(void *arg, unsigned t, uint64_t id, bool ok, bool first, uint64_t rows,
                    double seconds)
{
    struct hooks_ctx *h = arg;
    uint64_t all = h->n == 64 ? UINT64_MAX : (UINT64_C(1) << h->n) - 1;
    char status[128];
    snprintf(status, sizeof status, "%s: %llu rows in %.1f s", ok ? "serving" : "load failed",
             (unsigned long long)rows, seconds);
    if (first)
        log_fields(h->lg, LOG_LVL_INFO, NULL, "ready", "ready: %llu ids loaded in %.3f s",
                   (unsigned long long)rows, seconds);
    pthread_mutex_lock(&h->mu);
    if (ok)
        h->loaded |= UINT64_C(1) << t;
    h->attempted |= UINT64_C(1) << t;
    bool ready = !h->ready_sent && (h->loaded == all || (h->loaded != 0 && h->attempted == all));
    if (ready)
        h->ready_sent = true;
    /* The rebuild the signal asked for (or a later one), not one already running before it. */
    bool reloaded = false;
    if (h->owed[t] != 0 && id >= h->owed[t]) {
        h->owed[t] = 0;
        reloaded = --h->owing == 0;
    }
    pthread_mutex_unlock(&h->mu);
    if (h->n > 1)
        snprintf(status, sizeof status, "serving %u of %u tables", __builtin_popcountll(h->loaded),
                 h->n);
    if (ready || reloaded)
        notify_ready(status);
    else if (ok)
        notify_status(status);
}

/* Whether a SIGHUP owes READY=1: only once the start's has been sent. */
static bool reload_owes_ready(struct hooks_ctx *h)
{
    pthread_mutex_lock(&h->mu);
    bool owe = h->ready_sent;
    pthread_mutex_unlock(&h->mu);
    return owe;
}

/*
 * SIGHUP: rebuild the tables of mask (bit t: table t) with the sizing now in
 * force in cfg; if owe, READY=1 is owed when all have (at once when mask
 * is 0 or their rebuilds have already finished).
 */
static void reload_tables(struct hooks_ctx *h, struct source *src, const struct config *cfg,
                          uint64_t mask, bool owe)
{
    pthread_mutex_lock(&h->mu);
    for (unsigned t = 0; t < h->n; t++) {
        if (!(mask & (UINT64_C(1) << t)))
            continue;
        table_set_sizing(source_table(src, t), &cfg->filters[t]);
        uint64_t id = source_request_rebuild(src, t, WANT_SIGHUP, NULL);
        if (!owe)
            continue;
        /* It may have finished already (a coalesced request): then nothing is owed. */
        struct table_status ts;
        table_status(source_table(src, t), &ts);
        if (ts.completed_id >= id)
            continue;
        if (h->owed[t] == 0)
            h->owing++;
        h->owed[t] = id;
    }
    bool done = owe && h->owing == 0;
    pthread_mutex_unlock(&h->mu);
    if (done)
        notify_ready("serving");
}

/* What the command line says about the configuration, for the start and every SIGHUP. */
struct cmdline {
    const char *path;           /* -c FILE, or NULL: DEFAULT_CONFIG if it exists */
    char **argv;                /* its "--section.key=value" arguments are applied after the file */
    int argc;
};

/*
 * The file, then the overrides, over *c (filled by config_defaults).
 * *file gets the file read (NULL: built-in defaults).  False with the
 * reason in err; *c must then be freed.
 */
static bool read_config(const struct cmdline *cl, struct config *c, const char **file,
                        char *err, size_t errlen)
{
    *file = cl->path ? cl->path : DEFAULT_CONFIG;
    if (cl->path != NULL || access(*file, F_OK) == 0) {
        if (!config_load_file(c, *file, err, errlen))
            return false;
    } else {
        *file = NULL;
    }
    for (int i = 1; i < cl->argc; i++)
        if (cmdline_is_override(cl->argv[i]) && !config_override(c, cl->argv[i] + 2, err, errlen))
            return false;
    return true;
}

/* The write credential is configuration too: false (with the reason) stops a start or a reload. */
static bool read_token(const struct config *c, char **token, char *from, size_t fromlen,
                       char *err, size_t errlen)
{
    char why[256];
    *token = NULL;
    if (token_load(c->admin_token_file, getenv("CREDENTIALS_DIRECTORY"), token, from, fromlen,
                   why, sizeof why) != TOKEN_ERROR)
        return true;
    snprintf(err, errlen, "%s: %s",
             c->admin_token_file[0] ? "[server] admin_token_file" : "credential " TOKEN_CREDENTIAL, why);
    return false;
}

/* One changed key of a SIGHUP, in the log: what it was, what it is, whether it is in force. */
static void log_change(void *arg, const struct config_change *ch)
{
    if (ch->reload == CONFIG_RESTART)
        log_warn(arg, "reload: [%s] %s: %s -> %s: needs a restart (the old value stays in force)",
                 ch->section, ch->name, ch->old_value, ch->new_value);
    else
        log_info(arg, "reload: [%s] %s: %s -> %s", ch->section, ch->name, ch->old_value,
                 ch->new_value);
}

/*
 * SIGHUP, as pgbouncer and nginx do: read the file and the command-line
 * overrides again and put the keys that may change at once in force (each
 * changed key is logged; the keys' apply hooks do the rest).  Keys that
 * need a restart keep their values; a file or token that cannot be read
 * changes nothing.  False when nothing was reloaded; *rebuild gets the
 * tables (bit t: table t) whose sizing a changed key altered.
 */
static bool reload_config(const struct cmdline *cl, struct live *live, struct log *lg,
                          uint64_t *rebuild)
{
    struct config next, prev;
    const struct config *cur = live_current(live);
    const char *file = NULL;
    char err[512] = "out of memory", from[256];
    char *token = NULL;
    bool ok = false;

    memset(&prev, 0, sizeof prev);
    if (!config_defaults(&next) || !read_config(cl, &next, &file, err, sizeof err)
        || !read_token(&next, &token, from, sizeof from, err, sizeof err)) {
        log_error(lg, "SIGHUP: configuration not reloaded, nothing changed: %s", err);
        goto out;
    }
    /* The hooks compare with the values in force before; cur may be freed once next is published. */
    if (!config_copy(&prev, cur)) {
        log_error(lg, "SIGHUP: configuration not reloaded: out of memory");
        goto out;
    }
    if (!config_reload_diff(&next, cur, log_change, lg, rebuild, err, sizeof err)) {
        log_error(lg, "SIGHUP: configuration not reloaded, nothing changed: %s", err);
        goto out;
    }
    /* Whether writes need a token at all was decided at start, from the listen address too. */
    if ((token == NULL) != (live_current_token(live) == NULL)) {
        log_warn(lg, "SIGHUP: an admin token %s: needs a restart (the old one stays in force)",
                 token == NULL ? "is no longer set" : "is now set");
        token_free(token);
        token = NULL;
        if (live_current_token(live) != NULL && (token = strdup(live_current_token(live))) == NULL) {
            log_error(lg, "SIGHUP: configuration not reloaded: out of memory");
            goto out;
        }
    }
    if (!live_publish(live, &next, token)) {
        log_error(lg, "SIGHUP: configuration not reloaded: out of memory");
        goto out;
    }
    token = NULL;                       /* the holder owns both now */
    config_apply_reload(live_current(live), &prev, &(struct config_reload_ctx){ .log = lg });
    log_info(lg, "SIGHUP: configuration reloaded from %s", file ? file : "built-in defaults");
    ok = true;
out:
    token_free(token);
    config_free(&prev);
    config_free(&next);
    return ok;
}

int main(int argc, char **argv)
{
    struct config cfg;
    struct log lg;
    char err[512];
    struct cmdline cl = { .path = NULL, .argv = argv, .argc = argc };
    const char *file = NULL;
    bool check_only = false, print = false;
    enum proxyconf_kind print_kind = PROXYCONF_NGINX;
    struct cmdline_args args;
    int rc = EXIT_STARTUP;

    memset(&cfg, 0, sizeof cfg);
    switch (cmdline_parse(argc, argv, DEFAULT_CONFIG, &args)) {
    case CMDLINE_RUN:
        break;
    case CMDLINE_EXIT_OK:
        return EXIT_OK;
    case CMDLINE_EXIT_USAGE:
        return EXIT_USAGE;
    }
    cl.path = args.path;
    check_only = args.check_only;
    print = args.print;
    print_kind = args.print_kind;
    if (args.signal != NULL)
        return cmdline_send_signal(args.signal, args.pid);
    if (!config_defaults(&cfg)) {
        fprintf(stderr, "bloomguard: out of memory\n");
        config_free(&cfg);
        return EXIT_STARTUP;
    }
    if (!read_config(&cl, &cfg, &file, err, sizeof err)) {
        fprintf(stderr, "bloomguard: %s\n", err);
        config_free(&cfg);
        return EXIT_CONFIG;
    }
    /* No token: the proxy's configuration does not hold it, and its file may be unreadable here. */
    if (print) {
        bool ok = proxyconf_write(stdout, &cfg, print_kind, err, sizeof err);
        if (ok && fflush(stdout) != 0) {
            snprintf(err, sizeof err, "cannot write to standard output: %s", strerror(errno));
            ok = false;
        }
        if (!ok)
            fprintf(stderr, "bloomguard: %s\n", err);
        config_free(&cfg);
        return ok ? EXIT_OK : EXIT_CONFIG;
    }
    char *admin_token = NULL, token_from[256] = "", *replication_token = NULL;
    if (!read_token(&cfg, &admin_token, token_from, sizeof token_from, err, sizeof err)) {
        fprintf(stderr, "bloomguard: %s\n", err);
        config_free(&cfg);
        return EXIT_CONFIG;
    }
    /* Run by hand, they see what the packaged unit's service sees (its password file, its state). */
    if (args.drop_slot || (check_only && args.connect))
        preflight_unit_environment(&cfg, file, SYSCONFDIR "/bloomguard",
                                   args.drop_slot ? stdout : stderr);
    /* The replicas' token: read once (a restart key), like the admin token a credential. */
    if (cfg.replication_token_file[0] != '\0') {
        char why[256];
        if (token_load(cfg.replication_token_file, NULL, &replication_token, NULL, 0, why,
                       sizeof why) != TOKEN_LOADED) {
            fprintf(stderr, "bloomguard: [server] replication_token_file: %s\n", why);
            token_free(admin_token);
            config_free(&cfg);
            return EXIT_CONFIG;
        }
    }
    if (args.drop_slot) {
        int failed = preflight_drop_slot(&cfg, stdout);
        token_free(admin_token);
        config_free(&cfg);
        return failed ? EXIT_CONFIG : EXIT_OK;
    }
    if (check_only) {
        unsigned errors = preflight_offline(&cfg, file, stderr);
        bool replica_only = false;
        char up[256];
        preflight_upstream(&cfg, &replica_only, up, sizeof up);
        if (args.connect && replica_only)
            printf("bloomguard: every filter follows an upstream ([sync] method = upstream): no "
                   "PostgreSQL to connect to\n");
        else if (args.connect)
            errors += preflight_connect(&cfg, stderr);
        if (errors == 0)
            printf("bloomguard: configuration %s is valid\n", file ? file : "(built-in defaults)");
        else
            fprintf(stderr, "bloomguard: configuration %s: %u error%s\n",
                    file ? file : "(built-in defaults)", errors, errors == 1 ? "" : "s");
        token_free(admin_token);
        config_free(&cfg);
        return errors == 0 ? EXIT_OK : EXIT_CONFIG;
    }

    /* A replica of nothing would never load: a configuration error too. */
    if (!preflight_upstream(&cfg, NULL, err, sizeof err)) {
        fprintf(stderr, "bloomguard: %s\n", err);
        token_free(admin_token);
        token_free(replication_token);
        config_free(&cfg);
        return EXIT_CONFIG;
    }
    /* A listen_group no group has is a configuration error (exit 1): restarting cannot fix it. */
    char listen_warn[512];
    if (!preflight_listen(&cfg, err, sizeof err, listen_warn, sizeof listen_warn)) {
        fprintf(stderr, "bloomguard: %s\n", err);
        token_free(admin_token);
        config_free(&cfg);
        return EXIT_CONFIG;
    }

    log_init(&lg, cfg.log_level);
    log_set_format(&lg, cfg.log_format);
    if (cfg.log_file[0] != '\0' && !log_open_file(&lg, cfg.log_file, err, sizeof err)) {
        fprintf(stderr, "bloomguard: %s\n", err);
        token_free(admin_token);
        config_free(&cfg);
        return EXIT_STARTUP;
    }
    /* pgbouncer refuses root; a warning keeps containers and test rigs working. */
    if (geteuid() == 0)
        log_warn(&lg, "running as root: use the packaged unit's DynamicUser or a dedicated user");
    if (listen_warn[0] != '\0')
        log_warn(&lg, "%s", listen_warn);
    /* Every thread inherits this mask; only the main thread takes signals. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    sigaddset(&sigs, SIGQUIT);
    sigaddset(&sigs, SIGUSR1);
    sigaddset(&sigs, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* libcurl's (httpc.c) once, before any thread may make a handle. */
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) {
        log_error(&lg, "cannot initialise libcurl");
        token_free(admin_token);
        token_free(replication_token);
        config_free(&cfg);
        return EXIT_STARTUP;
    }

    struct hooks_ctx hctx = { .lg = &lg, .n = cfg.n_filters };
    pthread_mutex_init(&hctx.mu, NULL);
    struct scheduler_hooks hooks = { .arg = &hctx, .progress = on_progress, .done = on_done };
    /*
     * cfg stays the configuration at start until exit: what the follower,
     * http_start and the keys that need a restart read.  The holder gets a
     * copy, which SIGHUP replaces.
     */
    struct config live_cfg;
    char *live_token = NULL;
    struct table *tables[CONFIG_MAX_FILTERS] = { NULL };
    struct postlog *postlogs[CONFIG_MAX_FILTERS] = { NULL };
    struct publish *publishers[CONFIG_MAX_FILTERS] = { NULL };
    struct app app = { .cfg = &cfg, .lg = &lg, .started = time(NULL), .admin_token = admin_token,
                       .replication_token = replication_token, .tables = tables,
                       .n_tables = cfg.n_filters, .publishers = publishers };
    if (admin_token != NULL) {
        char admin_routes[160];
        routes_admin_text(admin_routes, sizeof admin_routes);
        log_info(&lg, "%s need the admin token read from %s", admin_routes, token_from);
    }
    struct http *http = NULL;
    struct rundirs *dirs = NULL;
    if (config_copy(&live_cfg, &cfg)) {
        if ((admin_token == NULL || (live_token = strdup(admin_token)) != NULL)
            && (app.live = live_new(&live_cfg, live_token)) != NULL)
            live_token = NULL;
        token_free(live_token);
        config_free(&live_cfg);
    }
    bool oom = app.live == NULL || (app.stats = routes_stats_new()) == NULL
               || (app.source = source_new(&cfg, &lg, &hooks, admin_token)) == NULL;
    for (unsigned t = 0; !oom && t < cfg.n_filters; t++)
        tables[t] = source_table(app.source, t);
    /* Every key the tables take goes to their rings from the first (replicas stream them). */
    bool replica = false;
    for (unsigned t = 0; t < cfg.n_filters; t++)
        replica = replica || cfg.filters[t].method == SYNC_UPSTREAM;
    if (!oom)
        oom = (app.fleet = fleethub_new(&cfg, tables, cfg.n_filters, replica ? app.source : NULL,
                                        &lg)) == NULL;
    if (oom || !api_init(&app)) {
        log_error(&lg, "out of memory");
        goto out;
    }
    if (!fleethub_start(app.fleet)) {
        log_error(&lg, "cannot start the replication thread");
        goto out;
    }
    /* Before anything in them is written or removed (exit 2: systemd may retry). */
    if ((dirs = rundirs_take(&cfg, &lg)) == NULL)
        goto out;
    /* Before any load: each load's filter is then written in place in its published file. */
    const char *pubdir = rundirs_publish_dir(dirs);
    if (pubdir[0] != '\0') {
        for (unsigned t = 0; t < cfg.n_filters; t++)
            if ((publishers[t] = publish_new(&cfg, &cfg.filters[t], tables[t], pubdir, &lg, err,
                                             sizeof err)) == NULL) {
                log_error(&lg, "%s", err);
                goto out;
            }
        log_info(&lg, "publishing the filters in %s (<name>.bgf, for libbloomguard and the "
                 "nginx module)", pubdir);
    }
    /* The POSTs acknowledged before a crash go back into the journals before anything else. */
    for (unsigned t = 0; t < cfg.n_filters; t++)
        if (!persist_postlog_open(&cfg, &cfg.filters[t], tables[t], &lg, &postlogs[t]))
            goto out;
    http = http_start(&app, err, sizeof err);
    if (http == NULL) {
        log_error(&lg, "%s", err);
        goto out;
    }
    if (strncmp(cfg.listen_host, "unix:", 5) == 0)
        log_info(&lg, "bloomguard %s listening on %s (config %s)", PACKAGE_VERSION,
                 cfg.listen_host, file ? file : "built-in defaults");
    else
        log_info(&lg, "bloomguard %s listening on http%s://%s%s%s:%u (config %s)", PACKAGE_VERSION,
                 cfg.tls_cert_file[0] != '\0' ? "s" : "",
                 strchr(cfg.listen_host, ':') ? "[" : "", cfg.listen_host,
                 strchr(cfg.listen_host, ':') ? "]" : "", http_port(http),
                 file ? file : "built-in defaults");
    /* Journal records with FILTER= and CODE= while it runs (log_journal_records). */
    log_journal_records(&lg, true);
    if (!source_start(app.source)) {
        log_journal_records(&lg, false);
        log_error(&lg, "cannot start the loader threads");
        goto out;
    }

    /* Between signals, the filters' state changes go to the log (watch.h). */
    struct watch *watch = watch_new(&app);
    for (;;) {
        const struct timespec tick = { 0, WATCH_TICK_MS * 1000000L };
        int sig = sigtimedwait(&sigs, NULL, &tick);
        if (sig < 0) {
            if (errno == EAGAIN) {
                watch_tick(watch, &app, live_current(app.live)->log_repeat_interval);
                rundirs_check(dirs, &cfg, publishers, app.source, &lg);
            }
            continue;
        }
        if (sig == SIGHUP) {
            /* RELOADING=1 first: systemd must see it before ExecReload= exits. */
            bool owe = reload_owes_ready(&hctx);
            if (owe)
                notify_reloading();
            uint64_t rebuild = 0;
            /*
             * A refused configuration changes nothing, the filters included.
             * An accepted one rebuilds only the filters whose sizing a
             * changed key altered: reload re-reads the configuration and is
             * cheap, as in pgbouncer and nginx; POST /reload forces a
             * rebuild from the table.
             */
            if (!reload_config(&cl, app.live, &lg, &rebuild)) {
                if (owe)
                    notify_ready("serving");
                continue;
            }
            if (rebuild == 0) {
                log_info(&lg, "SIGHUP: no changed key needs a rebuild; the filters are kept "
                         "(POST /reload rebuilds them from their tables)");
            } else {
                char names[512] = "";
                size_t off = 0;
                for (unsigned t = 0; t < cfg.n_filters && off < sizeof names; t++)
                    if (rebuild & (UINT64_C(1) << t)) {
                        int w = snprintf(names + off, sizeof names - off, "%s%s", off ? ", " : "",
                                         cfg.filters[t].name);
                        off += w > 0 ? (size_t)w : 0;
                    }
                log_info(&lg, "SIGHUP: rebuilding %s from %s table%s: a changed key sizes "
                         "%s anew", names, __builtin_popcountll(rebuild) == 1 ? "its" : "their",
                         __builtin_popcountll(rebuild) == 1 ? "" : "s",
                         __builtin_popcountll(rebuild) == 1 ? "it" : "them");
            }
            reload_tables(&hctx, app.source, live_current(app.live), rebuild, owe);
            continue;
        }
        if (sig == SIGUSR1) {
            /* logrotate (and nginx habits): a new file where the old one was moved away. */
            if (!log_reopen(&lg, err, sizeof err))
                log_error(&lg, "SIGUSR1: %s", err);
            else if (lg.file != NULL)
                log_info(&lg, "SIGUSR1: log file %s reopened", lg.file);
            else
                log_info(&lg, "SIGUSR1: no [log] file to reopen");
            continue;
        }
        if (sig == SIGUSR2) {
            log_info(&lg, "SIGUSR2: ignored (reserved)");
            continue;
        }
        log_info(&lg, "%s: shutting down", strsignal(sig));
        break;
    }
    watch_free(watch);
    log_journal_records(&lg, false);
    notify_stopping();
    http_quiesce(http);
    rc = EXIT_OK;

out:
    if (app.source != NULL)
        source_stop(app.source);
    /* The replicas' streams end (BYE) before the server stops: none may stay suspended. */
    fleethub_stop(app.fleet);
    http_stop(http);
    /* They read the journals for their rewrites: closed before the tables go. */
    for (unsigned t = 0; t < CONFIG_MAX_FILTERS; t++)
        postlog_close(postlogs[t]);
    /* Nothing loads, inserts or moves a horizon any more; the tables (and filters) still live. */
    for (unsigned t = 0; t < CONFIG_MAX_FILTERS; t++)
        publish_free(publishers[t]);
    fleethub_free(app.fleet);
    source_free(app.source);
    api_fini(&app);
    pthread_mutex_destroy(&hctx.mu);
    stats_free(app.stats);
    live_free(app.live);
    token_free(admin_token);
    token_free(replication_token);
    config_free(&cfg);
    curl_global_cleanup();
    rundirs_free(dirs);                 /* every file of the run's is written or withdrawn */
    if (rc == EXIT_OK)
        log_info(&lg, "stopped");
    return rc;
}
