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
    lg->format = LOG_FORMAT_TEXT;
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

void log_set_format(struct log *lg, enum log_format format)
{
    lg->format = format;
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

/* syslog priorities: err 3, warning 4, info 6, debug 7 */
static const int prio[] = { 3, 4, 6, 7 };
static const char *const name[] = { "error", "warning", "info", "debug" };

/*
 * s[0 .. n) as the inside of a JSON string into out (cap bytes, room for
 * at least 7), stopping short rather than cutting an escape or a
 * character: control characters escaped, bytes that are not UTF-8 as
 * U+FFFD, so the line is JSON whatever a message quoted.  Returns the
 * bytes written.
 */
static size_t json_escape(const char *s, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        size_t len = 0, take = 1;
        const char *src = esc;
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            len = 2;
        } else if (c < 0x20 || c == 0x7f) {
            len = (size_t)snprintf(esc, sizeof esc, "\\u%04x", c);
        } else if (c < 0x80) {
            esc[0] = (char)c;
            len = 1;
        } else {
            /* A whole, shortest-form UTF-8 sequence, or U+FFFD for the byte. */
            size_t want = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
            bool ok = want > 0 && i + want <= n;
            for (size_t k = 1; ok && k < want; k++)
                ok = ((unsigned char)s[i + k] & 0xc0) == 0x80;
            if (ok && want == 3) {
                unsigned char d = (unsigned char)s[i + 1];
                ok = !(c == 0xe0 && d < 0xa0) && !(c == 0xed && d >= 0xa0);
            }
            if (ok && want == 4) {
                unsigned char d = (unsigned char)s[i + 1];
                ok = !(c == 0xf0 && d < 0x90) && !(c == 0xf4 && d >= 0x90);
            }
            if (ok) {
                src = s + i;
                len = take = want;
            } else {
                memcpy(esc, "\\ufffd", 6);
                len = 6;
            }
        }
        if (o + len >= cap)
            break;
        memcpy(out + o, src, len);
        o += len;
        i += take;
    }
    return o;
}

/*
 * One event as a JSON line ([log] format = json): the fields a journal
 * record gets, the text without its "bloomguard: LEVEL: " (the level is a
 * field), written with one write(2).
 */
static void log_json(enum log_level level, const char *filter, const char *code,
                     const char *text, size_t n)
{
    char line[8192], ts[40];
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    log_timestamp(&now, ts, sizeof ts);
    size_t o = (size_t)snprintf(line, sizeof line, "{\"time\":\"%s\",\"level\":\"%s\","
                                "\"priority\":%d,\"syslog_identifier\":\"bloomguard\","
                                "\"pid\":%ld", ts, name[level], prio[level], (long)getpid());
    const char *keys[2] = { "filter", "code" }, *vals[2] = { filter, code };
    for (int k = 0; k < 2; k++) {
        if (vals[k] == NULL)
            continue;
        o += (size_t)snprintf(line + o, sizeof line - o, ",\"%s\":\"", keys[k]);
        o += json_escape(vals[k], strlen(vals[k]), line + o, 256);
        line[o++] = '"';
    }
    memcpy(line + o, ",\"message\":\"", 12);
    o += 12;
    /* Room for the closing "}\n". */
    o += json_escape(text, n, line + o, sizeof line - o - 3);
    memcpy(line + o, "\"}\n", 3);
    o += 3;
    ssize_t r = write(STDERR_FILENO, line, o);
    (void)r;
}

/*
 * The journal record's message is the line a log file would hold, without
 * its timestamp ("bloomguard: info: ..."), so journalctl -o cat shows what
 * it showed when the lines went through the stream.
 */
__attribute__((format(printf, 6, 0)))
static void log_v(const struct log *lg, enum log_format format, enum log_level level,
                  const char *filter, const char *code, const char *fmt, va_list ap)
{
    static const char message[] = "MESSAGE=";
    static const char ident[] = "SYSLOG_IDENTIFIER=bloomguard";
    char line[2048];
    size_t n, first = 0;

    if (lg != NULL && level > atomic_load_explicit(&lg->level, memory_order_relaxed))
        return;
    if (lg != NULL)
        format = lg->format;
    if (format == LOG_FORMAT_JSON) {
        char text[2048];
        int w = vsnprintf(text, sizeof text, fmt, ap);
        size_t tn = w < 0 ? 0 : (size_t)w >= sizeof text ? sizeof text - 1 : (size_t)w;
        /* One event, one line, the same text as the text format's. */
        for (size_t i = 0; i < tn; i++)
            if (text[i] == '\n' || text[i] == '\r' || text[i] == '\t')
                text[i] = ' ';
        log_json(level, filter, code, text, tn);
        return;
    }
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
    log_v(lg, LOG_FORMAT_TEXT, level, NULL, NULL, fmt, ap);
    va_end(ap);
}

void log_msg_format(enum log_format format, enum log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_v(NULL, format, level, NULL, NULL, fmt, ap);
    va_end(ap);
}

void log_fields(const struct log *lg, enum log_level level, const char *filter,
                const char *code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_v(lg, LOG_FORMAT_TEXT, level, filter, code, fmt, ap);
    va_end(ap);
}
