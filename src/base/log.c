/*
 * Logging: formats a whole line into a stack buffer and writes it with one
 * write(2), or sends it as one journal record, so lines from different
 * threads never interleave.
 */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef HAVE_SYSTEMD
#include <systemd/sd-journal.h>
#endif

bool log_under_journald(void)
{
    const char *js = getenv("JOURNAL_STREAM");
    unsigned long long dev, ino;
    struct stat st;
    if (js == NULL || sscanf(js, "%llu:%llu", &dev, &ino) != 2)
        return false;
    return fstat(STDERR_FILENO, &st) == 0 && (unsigned long long)st.st_dev == dev
           && (unsigned long long)st.st_ino == ino;
}

void log_init(struct log *lg, enum log_level level)
{
    atomic_init(&lg->level, level);
    lg->journal = log_under_journald();
    lg->file = NULL;
    lg->journal_send = NULL;
    atomic_init(&lg->records, false);
#ifdef HAVE_SYSTEMD
    /*
     * sd_journal_sendv reports success when the socket is missing (it
     * "fails silently" on ENOENT), which would lose every message of a
     * service whose mount namespace hides /run/systemd/journal but whose
     * stream works: look once, as the namespace is fixed by now.
     */
    if (access(LOG_JOURNAL_SOCKET, F_OK) == 0)
        lg->journal_send = sd_journal_sendv;
#endif
}

/* path onto standard error; false with errno set. */
static bool open_onto_stderr(const char *path)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0640);
    if (fd < 0)
        return false;
    if (dup2(fd, STDERR_FILENO) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return false;
    }
    close(fd);
    return true;
}

bool log_open_file(struct log *lg, const char *path, char *err, size_t errlen)
{
    if (!open_onto_stderr(path)) {
        snprintf(err, errlen, "[log] file: cannot open %s: %s", path, strerror(errno));
        return false;
    }
    lg->file = path;
    lg->journal = false;
    return true;
}

bool log_reopen(struct log *lg, char *err, size_t errlen)
{
    if (lg->file == NULL)
        return true;
    if (!open_onto_stderr(lg->file)) {
        snprintf(err, errlen, "cannot reopen the log file %s: %s", lg->file, strerror(errno));
        return false;
    }
    return true;
}

void log_journal_records(struct log *lg, bool on)
{
    atomic_store_explicit(&lg->records, on, memory_order_relaxed);
}

void log_set_level(struct log *lg, enum log_level level)
{
    atomic_store_explicit(&lg->level, level, memory_order_relaxed);
}

size_t log_timestamp(const struct timespec *ts, char *buf, size_t buflen)
{
    struct tm tm;
    char zone[8];
    localtime_r(&ts->tv_sec, &tm);
    size_t n = strftime(buf, buflen, "%Y-%m-%dT%H:%M:%S", &tm);
    /* %z is "+0100"; RFC 3339 wants "+01:00". */
    if (strftime(zone, sizeof zone, "%z", &tm) != 5)
        snprintf(zone, sizeof zone, "+0000");
    int w = snprintf(buf + n, buflen - n, ".%03ld%.3s:%.2s", ts->tv_nsec / 1000000, zone,
                     zone + 3);
    return w > 0 ? n + (size_t)w : n;
}

/*
 * The journal record's message is the line a log file would hold, without
 * its timestamp ("bloomguard: info: ..."), so journalctl -o cat shows what
 * it showed when the lines went through the stream.
 */
__attribute__((format(printf, 5, 0)))
static void log_v(const struct log *lg, enum log_level level, const char *filter,
                  const char *code, const char *fmt, va_list ap)
{
    /* syslog priorities: err 3, warning 4, info 6, debug 7 */
    static const int prio[] = { 3, 4, 6, 7 };
    static const char *const name[] = { "error", "warning", "info", "debug" };
    static const char message[] = "MESSAGE=";
    static const char ident[] = "SYSLOG_IDENTIFIER=bloomguard";
    char line[2048];
    size_t n, first = 0;

    if (lg != NULL && level > atomic_load_explicit(&lg->level, memory_order_relaxed))
        return;
    bool journal = lg != NULL ? lg->journal : log_under_journald();
    bool send = journal && lg != NULL && lg->journal_send != NULL
                && atomic_load_explicit(&lg->records, memory_order_relaxed);
    if (send) {
        /* Room for "<N>" before the text too, should the record not go. */
        n = sizeof message - 1;
        memcpy(line, message, n);
    } else if (journal) {
        n = (size_t)snprintf(line, sizeof line, "<%d>", prio[level]);
    } else {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        n = log_timestamp(&ts, line, sizeof line);
        line[n++] = ' ';
    }
    n += (size_t)snprintf(line + n, sizeof line - n, "bloomguard: %s: ", name[level]);

    int w = vsnprintf(line + n, sizeof line - n, fmt, ap);
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

    if (send) {
        char pf[16], ff[160], cf[96];
        struct iovec iov[5];
        int k = 0;
        iov[k++] = (struct iovec){ line, n };
        iov[k].iov_base = pf;
        iov[k++].iov_len = (size_t)snprintf(pf, sizeof pf, "PRIORITY=%d", prio[level]);
        iov[k++] = (struct iovec){ (void *)ident, sizeof ident - 1 };
        if (filter != NULL) {
            int fw = snprintf(ff, sizeof ff, "FILTER=%s", filter);
            iov[k++] = (struct iovec){ ff, fw < (int)sizeof ff ? (size_t)fw : sizeof ff - 1 };
        }
        if (code != NULL) {
            int cw = snprintf(cf, sizeof cf, "CODE=%s", code);
            iov[k++] = (struct iovec){ cf, cw < (int)sizeof cf ? (size_t)cw : sizeof cf - 1 };
        }
        if (lg->journal_send(iov, k) >= 0)
            return;
        /* Refused (no permission, a closed socket): the stream's line, so nothing is lost. */
        char pre[8];
        int pw = snprintf(pre, sizeof pre, "<%d>", prio[level]);
        first = sizeof message - 1 - (size_t)pw;
        memcpy(line + first, pre, (size_t)pw);
    }
    line[n++] = '\n';
    ssize_t r = write(STDERR_FILENO, line + first, n - first);
    (void)r;
}

void log_msg(const struct log *lg, enum log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_v(lg, level, NULL, NULL, fmt, ap);
    va_end(ap);
}

void log_fields(const struct log *lg, enum log_level level, const char *filter,
                const char *code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_v(lg, level, filter, code, fmt, ap);
    va_end(ap);
}
