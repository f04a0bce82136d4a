/*
 * bloomguard: command line, configuration, signals and service
 * notifications.  Wiring only; the work happens in the modules.
 */
#include <errno.h>
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

struct hooks_ctx {
    struct log *lg;
    /* SIGHUP sent RELOADING=1: READY=1 is owed once rebuild reload_id has finished. */
    _Atomic uint64_t reload_id;     /* 0: none owed */
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
            "keys (section.key = default), what they accept, and whether SIGHUP applies\n"
            "a new value or it needs a restart:\n",
            DEFAULT_CONFIG);
    for (size_t i = 0; i < config_key_count(); i++) {
        const char *sec, *name, *def, *help;
        char values[256];
        if (!config_key_at(i, &sec, &name, &def, &help))
            continue;
        config_key_values(i, values, sizeof values);
        fprintf(out, "  %s.%s = %s\n      %s\n      %s%s%s\n", sec, name, def, help,
                values, values[0] ? "; " : "",
                config_key_reloads(i) ? "SIGHUP applies it" : "needs a restart");
    }
}

static void on_progress(void *arg, uint64_t rows, bool first)
{
    struct hooks_ctx *h = arg;
    /*
     * systemd times a SIGHUP rebuild like the start: from RELOADING=1 to
     * READY=1 within TimeoutStartSec.  Both get more time while rows arrive.
     */
    notify_progress(rows, first, first || atomic_load(&h->reload_id) != 0);
}

static void on_done(void *arg, uint64_t id, bool ok, bool first, uint64_t rows, double seconds)
{
    struct hooks_ctx *h = arg;
    char status[128];
    snprintf(status, sizeof status, "%s: %llu rows in %.1f s", ok ? "serving" : "load failed",
             (unsigned long long)rows, seconds);
    if (first)
        log_info(h->lg, "ready: %llu ids loaded in %.3f s", (unsigned long long)rows, seconds);
    /* The rebuild the signal asked for (or a later one), not one already running before it. */
    uint64_t owed = atomic_load(&h->reload_id);
    bool reloaded = owed != 0 && id >= owed
                    && atomic_compare_exchange_strong(&h->reload_id, &owed, 0);
    if (first || reloaded)
        notify_ready(status);
    else if (ok)
        notify_status(status);
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

    struct hooks_ctx hctx = { .lg = &lg };
    atomic_init(&hctx.reload_id, 0);
    struct source_hooks hooks = { .arg = &hctx, .progress = on_progress, .done = on_done };
    struct app app = { .cfg = &cfg, .lg = &lg, .started = time(NULL), .admin_token = admin_token };
    if (admin_token != NULL)
        log_info(&lg, "POST /ids and POST /reload need the admin token read from %s", token_from);
    struct http *http = NULL;
    app.guard = guard_new();
    app.stats = stats_new();
    app.pending = pending_new(cfg.pending_limit, cfg.pending_max_bytes, cfg.pending_ttl);
    if (app.guard == NULL || app.stats == NULL || app.pending == NULL || !api_init(&app)) {
        log_error(&lg, "out of memory");
        goto out;
    }
    app.source = source_new(&cfg, app.guard, app.pending, app.stats, &lg, &hooks);
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
            /* RELOADING=1 first: systemd must see it before ExecReload= exits. */
            bool owe = guard_ready(app.guard);
            if (owe)
                notify_reloading();
            log_info(&lg, "SIGHUP: rebuilding the filter from the table");
            uint64_t id = source_request_rebuild(app.source, "SIGHUP", NULL);
            if (owe) {
                atomic_store(&hctx.reload_id, id);
                /* It may have finished before the store: then on_done owed nothing. */
                struct source_status ss;
                source_status(app.source, &ss);
                uint64_t want = id;
                if (ss.completed_id >= id && atomic_compare_exchange_strong(&hctx.reload_id, &want, 0))
                    notify_ready("serving");
            }
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
    guard_free(app.guard);
    pending_free(app.pending);
    stats_free(app.stats);
    token_free(admin_token);
    config_free(&cfg);
    if (rc == EXIT_OK)
        log_info(&lg, "stopped");
    return rc;
}
