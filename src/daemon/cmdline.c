/*
 * The command line, as nginx and pgbouncer users expect: getopt_long with
 * the "--section.key=value" overrides set apart, the help with every key,
 * route, status code and metric rendered from their tables, and -s/-p, the
 * signal sender systemd's ExecReload= runs.
 */
#include "cmdline.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "metrics.h"
#include "routes.h"
#include "stats.h"

/* The synopsis alone: what a mistyped command line gets, on stderr. */
static void synopsis(FILE *out)
{
    fprintf(out,
            "usage: bloomguard [-c FILE] [-t [--connect]] [--section.key=value ...]\n"
            "       bloomguard [-c FILE] --print-nginx | --print-caddy [--section.key=value ...]\n"
            "       bloomguard [-c FILE] --drop-slot [--section.key=value ...]\n"
            "       bloomguard -s reload|reopen|stop -p PID\n"
            "       bloomguard -V | -h\n");
}

static void usage(FILE *out, const char *default_config)
{
    synopsis(out);
    fprintf(out,
            "\n"
            "  -c FILE (--config)   configuration file (default %s)\n"
            "  -t (--test)          check the configuration and exit (0 ok, 1 error): the\n"
            "                       conninfo parses, directories exist and are writable,\n"
            "                       secrets are not readable by others\n"
            "  --connect            with -t: also connect and check each table and column\n"
            "  --print-nginx        print the nginx configuration for the templates and exit\n"
            "  --print-caddy        print the Caddyfile for the templates and exit\n"
            "  --drop-slot          drop this daemon's permanent replication slot (method\n"
            "                       logical) on the server and exit; the daemon must be\n"
            "                       stopped (a retired daemon's slot keeps WAL)\n"
            "  -s SIGNAL (--signal) send SIGNAL to the daemon of -p PID and exit: reload\n"
            "                       (SIGHUP; waits until the daemon has taken it), reopen\n"
            "                       (SIGUSR1, the log file), stop (SIGTERM)\n"
            "  -p PID (--pid)       the daemon -s signals (systemd: $MAINPID)\n"
            "  -V (--version)       print the version and exit\n"
            "  -h (--help)          this help, with every configuration key\n"
            "  --section.key=value  override a configuration key\n"
            "\n"
            "keys (section.key = default), what they accept, and whether SIGHUP applies\n"
            "a new value or it needs a restart:\n",
            default_config);
    for (size_t i = 0; i < config_key_count(); i++) {
        const char *sec, *name, *def, *help;
        char values[256];
        if (!config_key_at(i, &sec, &name, &def, &help))
            continue;
        config_key_values(i, values, sizeof values);
        fprintf(out, "  %s.%s = %s\n      %s\n      %s%s%s%s\n", sec, name, def, help,
                values, values[0] ? "; " : "",
                config_key_reload(i) == CONFIG_REBUILD ? "SIGHUP applies it; a change rebuilds the filter"
                : config_key_reloads(i) ? "SIGHUP applies it" : "needs a restart",
                config_key_per_filter(i) ? "; per filter" : "");
    }
    fprintf(out,
            "\n"
            "[filter NAME] sections (NAME: [a-z][a-z0-9_]{0,31}) each declare a filter, on\n"
            "its own table; inside one only the keys marked \"per filter\" may appear, by\n"
            "bare name (table = orders).  Each sets its own table and column; the other keys\n"
            "start from their global values, except channel, which defaults to\n"
            "<[sync] channel>_<NAME>.  The first one is\n"
            "the default filter (GET /exists/{id}); \"uri_template = /order/{id} orders\"\n"
            "names the filter of a template.\n");
    fprintf(out, "\nendpoints (path, methods, name in /stats and /metrics, match, needs):\n");
    routes_list(out);
    fprintf(out, "\nstatus codes counted one by one in /stats and /metrics (others: \"other\"):\n ");
    for (unsigned k = 0; k < SS_OTHER; k++)
        fprintf(out, " %u", stats_status_code(k));
    fprintf(out, "\n\nmetrics (GET /metrics):\n");
    metrics_list(out);
}

/* "--section.key=value": a dot before any '=' tells it from the long options. */
bool cmdline_is_override(const char *arg)
{
    if (strncmp(arg, "--", 2) != 0)
        return false;
    size_t name = strcspn(arg + 2, "=");
    const char *dot = memchr(arg + 2, '.', name);
    return dot != NULL && dot != arg + 2;
}


/*
 * getopt_long, as nginx and pgbouncer users expect (-tc FILE, --config=FILE,
 * --), with the "--section.key=value" overrides taken out first: they are
 * read again on every SIGHUP, from argv itself.  A mistake prints the
 * synopsis on stderr: the caller exits 2.
 */
enum cmdline_result cmdline_parse(int argc, char **argv, const char *default_config,
                                  struct cmdline_args *a)
{
    enum { OPT_CONNECT = 256, OPT_PRINT_NGINX, OPT_PRINT_CADDY, OPT_DROP_SLOT };
    static const struct option longopts[] = {
        { "config", required_argument, NULL, 'c' },
        { "test", no_argument, NULL, 't' },
        { "connect", no_argument, NULL, OPT_CONNECT },
        { "print-nginx", no_argument, NULL, OPT_PRINT_NGINX },
        { "print-caddy", no_argument, NULL, OPT_PRINT_CADDY },
        { "drop-slot", no_argument, NULL, OPT_DROP_SLOT },
        { "signal", required_argument, NULL, 's' },
        { "pid", required_argument, NULL, 'p' },
        { "version", no_argument, NULL, 'V' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    enum cmdline_result res = CMDLINE_RUN;
    int n = 0, opt;

    memset(a, 0, sizeof *a);
    if (rest == NULL) {
        fprintf(stderr, "bloomguard: out of memory\n");
        return CMDLINE_EXIT_USAGE;
    }
    for (int i = 0; i < argc; i++) {
        if (i > 0 && strcmp(argv[i], "--") == 0) {
            while (i < argc)
                rest[n++] = argv[i++];
            break;
        }
        if (i == 0 || !cmdline_is_override(argv[i]))
            rest[n++] = argv[i];
    }
    opterr = 0;
    optind = 1;
    while (res == CMDLINE_RUN && (opt = getopt_long(n, rest, ":c:tVhs:p:", longopts, NULL)) != -1) {
        switch (opt) {
        case 'c': a->path = optarg; break;
        case 't': a->check_only = true; break;
        case OPT_CONNECT: a->connect = true; break;
        case OPT_PRINT_NGINX: a->print = true; a->print_kind = PROXYCONF_NGINX; break;
        case OPT_PRINT_CADDY: a->print = true; a->print_kind = PROXYCONF_CADDY; break;
        case OPT_DROP_SLOT: a->drop_slot = true; break;
        case 's': a->signal = optarg; break;
        case 'p': a->pid = optarg; break;
        case 'V':
            printf("bloomguard %s\n", PACKAGE_VERSION);
            res = CMDLINE_EXIT_OK;
            break;
        case 'h':
            usage(stdout, default_config);
            res = CMDLINE_EXIT_OK;
            break;
        case ':':
            fprintf(stderr, "bloomguard: option %s needs an argument\n", rest[optind - 1]);
            res = CMDLINE_EXIT_USAGE;
            break;
        default:
            if (optopt != 0)
                fprintf(stderr, "bloomguard: unknown option -%c\n", optopt);
            else
                fprintf(stderr, "bloomguard: unknown option %s\n", rest[optind - 1]);
            res = CMDLINE_EXIT_USAGE;
            break;
        }
    }
    if (res == CMDLINE_RUN && optind < n) {
        fprintf(stderr, "bloomguard: unexpected argument \"%s\"\n", rest[optind]);
        res = CMDLINE_EXIT_USAGE;
    }
    if (res == CMDLINE_RUN && a->connect && !a->check_only) {
        fprintf(stderr, "bloomguard: --connect goes with -t\n");
        res = CMDLINE_EXIT_USAGE;
    }
    if (res == CMDLINE_RUN && (a->signal != NULL) != (a->pid != NULL)) {
        fprintf(stderr, "bloomguard: -s and -p go together\n");
        res = CMDLINE_EXIT_USAGE;
    }
    if (res == CMDLINE_EXIT_USAGE) {
        synopsis(stderr);
        fprintf(stderr, "(bloomguard --help lists every option and key)\n");
    }
    free(rest);
    return res;
}

/* Whether signal sig is pending for the whole process pid (its ShdPnd mask); false once taken. */
static bool signal_pending(long pid, int sig)
{
    char path[64], line[256];
    bool pending = false;
    snprintf(path, sizeof path, "/proc/%ld/status", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return false;
    while (fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, "ShdPnd:", 7) == 0)
            pending = (strtoull(line + 7, NULL, 16) >> (sig - 1)) & 1;
    fclose(f);
    return pending;
}

/*
 * -s reload|reopen|stop -p PID, as nginx -s: what systemd's ExecReload= runs,
 * so that the unit needs no kill(1) (a minbase system has none).  reload
 * returns once the daemon has taken the SIGHUP and had a moment to send
 * RELOADING=1: systemd must see that before ExecReload= exits to wait for
 * READY=1.
 */
int cmdline_send_signal(const char *name, const char *pidstr)
{
    static const struct { const char *name; int sig; } sigs[] = {
        { "reload", SIGHUP }, { "reopen", SIGUSR1 }, { "stop", SIGTERM }, { "quit", SIGTERM },
    };
    int sig = 0;
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        if (strcmp(name, sigs[i].name) == 0)
            sig = sigs[i].sig;
    char *end;
    errno = 0;
    long pid = strtol(pidstr, &end, 10);
    if (sig == 0 || errno != 0 || end == pidstr || *end != '\0' || pid <= 1) {
        fprintf(stderr, "bloomguard: -s %s -p %s: expected -s reload|reopen|stop and a process id\n",
                name, pidstr);
        return EXIT_USAGE;
    }
    if (kill((pid_t)pid, sig) != 0) {
        fprintf(stderr, "bloomguard: cannot signal process %ld: %s\n", pid, strerror(errno));
        return EXIT_CONFIG;
    }
    if (sig != SIGHUP)
        return EXIT_OK;
    struct timespec tick = { 0, 50 * 1000 * 1000 };
    for (int i = 0; i < 100 && signal_pending(pid, sig); i++)
        nanosleep(&tick, NULL);
    struct timespec settle = { 0, 200 * 1000 * 1000 };
    nanosleep(&settle, NULL);
    return EXIT_OK;
}
