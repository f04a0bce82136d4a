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
/* STATUS= with load progress, and more start-up time so a long load is not killed. */
void notify_progress(uint64_t rows, int extend_timeout);
void notify_status(const char *status);

#endif
