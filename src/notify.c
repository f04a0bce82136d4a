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

void notify_progress(uint64_t rows, int extend_timeout)
{
    /* Each progress step buys another 60 s of start-up time. */
    if (extend_timeout)
        SEND("STATUS=loading: %llu rows\nEXTEND_TIMEOUT_USEC=60000000", (unsigned long long)rows);
    else
        SEND("STATUS=rebuilding: %llu rows", (unsigned long long)rows);
    (void)rows;
    (void)extend_timeout;
}

void notify_status(const char *status)
{
    SEND("STATUS=%s", status);
    (void)status;
}
