/*
 * bloomguard: command line, configuration, signals and service
 * notifications.  Wiring only; the work happens in the modules.
 */
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
#include "config.h"
#include "guard.h"
#include "http.h"
#include "log.h"
#include "notify.h"
#include "source.h"
#include "stats.h"
#include "token.h"

#define DEFAULT_CONFIG SYSCONFDIR "/bloomguard/bloomguard.conf"

/* Exit codes (documented in bloomguard(8)). */
enum { EXIT_OK = 0, EXIT_CONFIG = 1, EXIT_STARTUP = 2 };

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

static void usage(FILE *out)
{
    fprintf(out,
            "usage: bloomguard [-c FILE] [-t] [--section.key=value ...]\n"
            "       bloomguard -V | -h\n"
            "\n"
            "  -c FILE              configuration file (default %s)\n"
            "  -t                   check the configuration and exit (0 ok, 1 error)\n"
            "  -V                   print the version and exit\n"
            "  -h                   this help, with every configuration key\n"
            "  --section.key=value  override a configuration key\n"
            "\n"
            "keys (section.key = default):\n",
            DEFAULT_CONFIG);
    for (size_t i = 0; i < config_key_count(); i++) {
        const char *sec, *name, *def, *help;
        if (config_key_at(i, &sec, &name, &def, &help))
            fprintf(out, "  %s.%s = %s\n      %s\n", sec, name, def, help);
    }
}

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
        log_info(h->lg, "ready: %llu ids loaded in %.3f s", (unsigned long long)rows, seconds);
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

/* SIGHUP: rebuild every table; READY=1 is owed when all have (if the start's was sent). */
static void reload_tables(struct hooks_ctx *h, struct source *src)
{
    pthread_mutex_lock(&h->mu);
    bool owe = h->ready_sent;
    /* RELOADING=1 first: systemd must see it before ExecReload= exits. */
    if (owe)
        notify_reloading();
    for (unsigned t = 0; t < h->n; t++) {
        uint64_t id = source_request_rebuild(src, t, "SIGHUP", NULL);
        if (!owe)
            continue;
        /* It may have finished already (a coalesced request): then nothing is owed. */
        struct source_status ss;
        source_status(src, t, &ss);
        if (ss.completed_id >= id)
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

int main(int argc, char **argv)
{
    struct config cfg;
    struct log lg;
    char err[512];
    const char *path = NULL;
    bool check_only = false;
    int rc = EXIT_STARTUP;

    memset(&cfg, 0, sizeof cfg);
    if (!config_defaults(&cfg)) {
        fprintf(stderr, "bloomguard: out of memory\n");
        return EXIT_STARTUP;
    }
    /* -c FILE, -t, -V, -h; every "--section.key=value" is an override, applied after the file. */
    int first_override = argc;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strncmp(arg, "--", 2) == 0 && arg[2] != '\0') {
            if (first_override == argc)
                first_override = i;
            continue;
        }
        if (strcmp(arg, "-c") == 0 && i + 1 < argc) {
            path = argv[++i];
        } else if (strncmp(arg, "-c", 2) == 0 && arg[2] != '\0') {
            path = arg + 2;
        } else if (strcmp(arg, "-t") == 0) {
            check_only = true;
        } else if (strcmp(arg, "-V") == 0) {
            printf("bloomguard %s\n", PACKAGE_VERSION);
            config_free(&cfg);
            return EXIT_OK;
        } else if (strcmp(arg, "-h") == 0) {
            usage(stdout);
            config_free(&cfg);
            return EXIT_OK;
        } else {
            fprintf(stderr, "bloomguard: unexpected argument \"%s\" (try -h)\n", arg);
            config_free(&cfg);
            return EXIT_CONFIG;
        }
    }
    const char *file = path ? path : DEFAULT_CONFIG;
    if (path != NULL || access(file, F_OK) == 0) {
        if (!config_load_file(&cfg, file, err, sizeof err)) {
            fprintf(stderr, "bloomguard: %s\n", err);
            config_free(&cfg);
            return EXIT_CONFIG;
        }
    } else {
        file = NULL;                    /* built-in defaults */
    }
    for (int i = first_override; i < argc; i++) {
        if (strncmp(argv[i], "--", 2) != 0 || argv[i][2] == '\0')
            continue;
        if (!config_override(&cfg, argv[i] + 2, err, sizeof err)) {
            fprintf(stderr, "bloomguard: %s\n", err);
            config_free(&cfg);
            return EXIT_CONFIG;
        }
    }
    /* The write credential is configuration too: a bad one stops the start (and -t). */
    char *admin_token = NULL, token_from[256] = "";
    if (token_load(cfg.admin_token_file, getenv("CREDENTIALS_DIRECTORY"), &admin_token,
                   token_from, sizeof token_from, err, sizeof err) == TOKEN_ERROR) {
        fprintf(stderr, "bloomguard: %s: %s\n",
                cfg.admin_token_file[0] ? "[server] admin_token_file" : "credential " TOKEN_CREDENTIAL,
                err);
        config_free(&cfg);
        return EXIT_CONFIG;
    }
    if (check_only) {
        printf("bloomguard: configuration %s is valid\n", file ? file : "(built-in defaults)");
        token_free(admin_token);
        config_free(&cfg);
        return EXIT_OK;
    }

    log_init(&lg, cfg.log_level);
    /* Every thread inherits this mask; only the main thread takes signals. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    sigaddset(&sigs, SIGQUIT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    /* TEMPORARY until the config branch lands: the one table of the global keys. */
    cfg.n_filters = 1;
    cfg.filters[0] = (struct filter_config){
        .name = "default", .table = cfg.table, .column = cfg.column, .channel = cfg.channel,
        .expected_items = cfg.expected_items, .false_positive_rate = cfg.false_positive_rate,
        .headroom = cfg.headroom, .rebuild_interval = cfg.rebuild_interval,
        .rebuild_after_deletes = cfg.rebuild_after_deletes, .auto_grow = cfg.auto_grow,
        .pending_limit = cfg.pending_limit, .pending_max_bytes = cfg.pending_max_bytes,
        .pending_ttl = cfg.pending_ttl };

    struct hooks_ctx hctx = { .lg = &lg, .n = cfg.n_filters };
    pthread_mutex_init(&hctx.mu, NULL);
    struct source_hooks hooks = { .arg = &hctx, .progress = on_progress, .done = on_done };
    struct source_table tables[CONFIG_MAX_FILTERS] = { { NULL, NULL, NULL } };
    struct app app = { .cfg = &cfg, .lg = &lg, .started = time(NULL), .admin_token = admin_token,
                       .tables = tables, .n_tables = cfg.n_filters };
    if (admin_token != NULL)
        log_info(&lg, "POST /ids and POST /reload need the admin token read from %s", token_from);
    struct http *http = NULL;
    bool oom = (app.stats = api_stats_new()) == NULL;
    for (unsigned t = 0; t < cfg.n_filters; t++) {
        const struct filter_config *fc = &cfg.filters[t];
        tables[t].fc = fc;
        tables[t].g = guard_new();
        tables[t].pending = pending_new(fc->pending_limit, fc->pending_max_bytes, fc->pending_ttl);
        oom = oom || tables[t].g == NULL || tables[t].pending == NULL;
    }
    if (oom || !api_init(&app)) {
        log_error(&lg, "out of memory");
        goto out;
    }
    app.source = source_new(&cfg, tables, cfg.n_filters, &lg, &hooks);
    if (app.source == NULL) {
        log_error(&lg, "out of memory");
        goto out;
    }
    http = http_start(&app, err, sizeof err);
    if (http == NULL) {
        log_error(&lg, "%s", err);
        goto out;
    }
    log_info(&lg, "bloomguard %s listening on http://%s%s%s:%u (config %s)", PACKAGE_VERSION,
             strchr(cfg.listen_host, ':') ? "[" : "", cfg.listen_host,
             strchr(cfg.listen_host, ':') ? "]" : "", http_port(http),
             file ? file : "built-in defaults");
    if (!source_start(app.source)) {
        log_error(&lg, "cannot start the loader threads");
        goto out;
    }

    for (;;) {
        int sig = 0;
        if (sigwait(&sigs, &sig) != 0)
            continue;
        if (sig == SIGHUP) {
            log_info(&lg, "SIGHUP: rebuilding the filters from their tables");
            reload_tables(&hctx, app.source);
            continue;
        }
        log_info(&lg, "%s: shutting down", strsignal(sig));
        break;
    }
    notify_stopping();
    http_quiesce(http);
    rc = EXIT_OK;

out:
    if (app.source != NULL)
        source_stop(app.source);
    http_stop(http);
    source_free(app.source);
    api_fini(&app);
    for (unsigned t = 0; t < CONFIG_MAX_FILTERS; t++) {
        guard_free(tables[t].g);
        pending_free(tables[t].pending);
    }
    pthread_mutex_destroy(&hctx.mu);
    stats_free(app.stats);
    token_free(admin_token);
    config_free(&cfg);
    if (rc == EXIT_OK)
        log_info(&lg, "stopped");
    return rc;
}
