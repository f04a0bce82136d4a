/*
 * Service manager notifications (sd_notify): readiness, reloads, progress.
 * No-ops when built without libsystemd or not started by systemd.
 */
#ifndef BLOOMGUARD_NOTIFY_H
#define BLOOMGUARD_NOTIFY_H

#include <stdint.h>

void notify_ready(const char *status);
void notify_reloading(void);
void notify_stopping(void);
/*
 * STATUS= with load progress ("loading" for the first load, else
 * "rebuilding"); with extend_timeout also 60 s more for the job systemd is
 * timing (the start, or a reload after RELOADING=1), so a long load is not
 * killed or failed.
 */
void notify_progress(uint64_t rows, int first, int extend_timeout);
void notify_status(const char *status);

#endif
