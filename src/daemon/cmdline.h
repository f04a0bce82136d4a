/*
 * The command line of bloomguard(8): options, help, and the -s signal
 * sender.  Used by main.c only; nothing here touches the daemon's state.
 */
#ifndef BLOOMGUARD_CMDLINE_H
#define BLOOMGUARD_CMDLINE_H

#include <stdbool.h>

#include "proxyconf.h"

/* Exit statuses (bloomguard(8), EXIT STATUS). */
enum { EXIT_OK = 0, EXIT_CONFIG = 1, EXIT_STARTUP = 2, EXIT_USAGE = 2 };

/* What the command line asks for besides the configuration. */
struct cmdline_args {
    const char *path;           /* -c FILE, or NULL */
    bool check_only, connect, print, drop_slot;
    enum proxyconf_kind print_kind;
    const char *signal, *pid;   /* -s SIGNAL -p PID, or NULL */
};

enum cmdline_result { CMDLINE_RUN, CMDLINE_EXIT_OK, CMDLINE_EXIT_USAGE };

/*
 * Parse argv (getopt_long; "--section.key=value" overrides are skipped:
 * the caller reads them from argv, again on every SIGHUP) into *a, whose
 * strings point into argv.  -h prints the help (naming default_config) and
 * -V the version on stdout: CMDLINE_EXIT_OK.  A mistake prints the synopsis
 * on stderr: CMDLINE_EXIT_USAGE (exit 2).  Not thread-safe (getopt).
 */
enum cmdline_result cmdline_parse(int argc, char **argv, const char *default_config,
                                  struct cmdline_args *a);

/* Whether arg is a "--section.key=value" override (a dot before any '='). */
bool cmdline_is_override(const char *arg);

/*
 * -s NAME -p PID: send reload (SIGHUP), reopen (SIGUSR1) or stop (SIGTERM)
 * to PID; reload returns once PID has taken the signal.  Returns the exit
 * status: EXIT_OK, EXIT_CONFIG (cannot signal), EXIT_USAGE (bad NAME/PID).
 */
int cmdline_send_signal(const char *name, const char *pidstr);

#endif
