/*
 * Levelled logging to stderr, one line per event.  When stderr is not a
 * terminal (journald, a pipe) each line starts with a syslog priority prefix
 * "<N>" that journald understands; on a terminal it starts with a timestamp.
 */
#ifndef BLOOMGUARD_LOG_H
#define BLOOMGUARD_LOG_H

#include <stdbool.h>

/* Most to least severe; a message is written when its level <= the configured one. */
enum log_level { LOG_LVL_ERROR, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };

struct log {
    /* Messages above this level are dropped.  Atomic: SIGHUP changes it while other threads log. */
    _Atomic(enum log_level) level;
    bool journal;           /* "<N>" prefixes instead of timestamps */
};

/* Set up from the configured level; decides the prefix style from isatty(2). */
void log_init(struct log *lg, enum log_level level);

/* Change the level; thread-safe, takes effect for the next message of every thread. */
void log_set_level(struct log *lg, enum log_level level);

/* Thread-safe: each call is one write(2) of a whole line. */
void log_msg(const struct log *lg, enum log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define log_error(lg, ...) log_msg((lg), LOG_LVL_ERROR, __VA_ARGS__)
#define log_warn(lg, ...)  log_msg((lg), LOG_LVL_WARN, __VA_ARGS__)
#define log_info(lg, ...)  log_msg((lg), LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(lg, ...) log_msg((lg), LOG_LVL_DEBUG, __VA_ARGS__)

#endif
