/*
 * Levelled logging to stderr (or a file), one line per event.  Under
 * journald (JOURNAL_STREAM names standard error) each event is a journal
 * record sent with sd_journal_sendv: its priority, and the filter and a
 * stable event code where the caller knows them (FILTER=, CODE=), so that
 * journalctl can select them; should that fail, a line on standard error
 * with a syslog priority prefix "<N>" that journald turns into the
 * entry's priority.  Anywhere else (a terminal, a pipe, a file) each line
 * starts with an RFC 3339 timestamp in milliseconds, as nginx's and
 * pgbouncer's logs have one.
 */
#ifndef BLOOMGUARD_LOG_H
#define BLOOMGUARD_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/uio.h>
#include <time.h>

/* Most to least severe; a message is written when its level <= the configured one. */
enum log_level { LOG_LVL_ERROR, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };

struct log {
    /* Messages above this level are dropped.  Atomic: SIGHUP changes it while other threads log. */
    _Atomic(enum log_level) level;
    bool journal;           /* journal records (or "<N>" prefixes) instead of timestamps */
    const char *file;       /* log_open_file's path (the caller's), or NULL: stderr as inherited */
    /*
     * Sends one journal record (sd_journal_sendv's contract: one "KEY=value"
     * field per element, >= 0 on success, a negative errno on failure).
     * log_init sets sd_journal_sendv, or NULL without libsystemd or without
     * LOG_JOURNAL_SOCKET (then the "<N>" lines go to standard error); tests
     * put a fake in its place.
     */
    int (*journal_send)(const struct iovec *iov, int n);
    /* log_journal_records: records now, not "<N>" lines.  Atomic: threads log meanwhile. */
    _Atomic(bool) records;
};

/* Where journald takes records (sd_journal_sendv sends there). */
#define LOG_JOURNAL_SOCKET "/run/systemd/journal/socket"

/* Set up from the configured level; decides the style from JOURNAL_STREAM. */
void log_init(struct log *lg, enum log_level level);

/*
 * Whether standard error is journald's stream: JOURNAL_STREAM ("dev:ino",
 * set by systemd) names the file standard error is.  A redirected stderr
 * under systemd is not.
 */
bool log_under_journald(void);

/*
 * Append to path (created 0640 if missing) instead of what standard error
 * was: the file becomes standard error itself, so stray writes land there
 * too, and lines get timestamps.  path must outlive lg (log_reopen opens it
 * again).  False with the reason in err; nothing changed then.  Call before
 * other threads log.
 */
bool log_open_file(struct log *lg, const char *path, char *err, size_t errlen);

/*
 * SIGUSR1: open the file of log_open_file again (new if logrotate moved it)
 * and put it in place of standard error with one dup2, so threads logging
 * meanwhile write to the old file or the new one, never to a closed
 * descriptor.  True (doing nothing) without a file; false with the reason
 * in err, the old file still in use.
 */
bool log_reopen(struct log *lg, char *err, size_t errlen);

/*
 * Whether journal_send is used (log_init: not yet).  journald reads a
 * record's unit (_SYSTEMD_UNIT, which journalctl -u selects) from the
 * sender's /proc entry when the datagram arrives: the last messages of a
 * process that exits right after them may lose it, where the stream's lines
 * keep it.  So the daemon turns records on once it runs and off when it
 * stops.  Thread-safe.
 */
void log_journal_records(struct log *lg, bool on);

/* Change the level; thread-safe, takes effect for the next message of every thread. */
void log_set_level(struct log *lg, enum log_level level);

/*
 * Thread-safe: each call is one write(2) of a whole line, or one journal
 * record.  lg may be NULL (libpq's notice hook, which has no logger): every
 * level is written, as a line, in the style log_under_journald says.
 */
void log_msg(const struct log *lg, enum log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * log_msg with structured fields for the journal: filter (the [filter.NAME]
 * the event is about) becomes FILTER=, code (a stable short name of the
 * event, lower case and underscores: rebuild_done, follower_reconnect; the
 * list is in bloomguard(8), LOGGING) becomes CODE=.  Either may be NULL:
 * no such field.  Off the journal the line is exactly log_msg's: the
 * fields are not written.
 */
void log_fields(const struct log *lg, enum log_level level, const char *filter,
                const char *code, const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/*
 * The RFC 3339 timestamp of ts in local time with milliseconds,
 * "2026-11-24T20:34:03.123+01:00", into buf (at least 32 bytes).  Returns
 * its length.
 */
size_t log_timestamp(const struct timespec *ts, char *buf, size_t buflen);

#define log_error(lg, ...) log_msg((lg), LOG_LVL_ERROR, __VA_ARGS__)
#define log_warn(lg, ...)  log_msg((lg), LOG_LVL_WARN, __VA_ARGS__)
#define log_info(lg, ...)  log_msg((lg), LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(lg, ...) log_msg((lg), LOG_LVL_DEBUG, __VA_ARGS__)

#endif
