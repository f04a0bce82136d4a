/*
 * Thin wrapper over sd_notify so the rest of the code never needs #ifdefs.
 */
#include "notify.h"

#include <stdio.h>

#ifdef HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#define SEND(...) (void)sd_notifyf(0, __VA_ARGS__)
#else
#define SEND(...) ((void)0)
#endif

void notify_ready(const char *status)
{
    SEND("READY=1\nSTATUS=%s", status);
    (void)status;
}

void notify_reloading(void)
{
    SEND("RELOADING=1\nSTATUS=reloading the filter");
}

void notify_stopping(void)
{
    SEND("STOPPING=1\nSTATUS=stopping");
}

void notify_progress(uint64_t rows, int first, int extend_timeout)
{
    /* Each progress step buys another 60 s for the start or the reload. */
    SEND("STATUS=%s: %llu rows%s", first ? "loading" : "rebuilding", (unsigned long long)rows,
         extend_timeout ? "\nEXTEND_TIMEOUT_USEC=60000000" : "");
    (void)rows;
    (void)first;
    (void)extend_timeout;
}

void notify_status(const char *status)
{
    SEND("STATUS=%s", status);
    (void)status;
}
