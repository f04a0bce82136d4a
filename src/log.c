/*
 * Logging: formats a whole line into a stack buffer and writes it with one
 * write(2), so lines from different threads never interleave.
 */
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void log_init(struct log *lg, enum log_level level)
{
    atomic_init(&lg->level, level);
    lg->journal = !isatty(STDERR_FILENO);
}

void log_set_level(struct log *lg, enum log_level level)
{
    atomic_store_explicit(&lg->level, level, memory_order_relaxed);
}

void log_msg(const struct log *lg, enum log_level level, const char *fmt, ...)
{
    /* syslog priorities: err 3, warning 4, info 6, debug 7 */
    static const int prio[] = { 3, 4, 6, 7 };
    static const char *const name[] = { "error", "warning", "info", "debug" };
    char line[2048];
    size_t n;

    if (lg != NULL && level > atomic_load_explicit(&lg->level, memory_order_relaxed))
        return;
    if (lg == NULL || lg->journal) {
        n = (size_t)snprintf(line, sizeof line, "<%d>", prio[level]);
    } else {
        struct timespec ts;
        struct tm tm;
        clock_gettime(CLOCK_REALTIME, &ts);
        localtime_r(&ts.tv_sec, &tm);
        n = strftime(line, sizeof line, "%Y-%m-%d %H:%M:%S ", &tm);
    }
    n += (size_t)snprintf(line + n, sizeof line - n, "bloomguard: %s: ", name[level]);

    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(line + n, sizeof line - n, fmt, ap);
    va_end(ap);
    if (w < 0)
        w = 0;
    size_t start = n;
    n += (size_t)w;
    if (n > sizeof line - 2)
        n = sizeof line - 2;          /* truncated; keep the newline */
    /* One event, one line: libpq's messages carry "\n\t" continuations. */
    for (size_t i = start; i < n; i++)
        if (line[i] == '\n' || line[i] == '\r' || line[i] == '\t')
            line[i] = ' ';
    line[n++] = '\n';
    ssize_t r = write(STDERR_FILENO, line, n);
    (void)r;
}
