/*
 * Unit tests of the logger's operator-facing habits: RFC 3339 timestamps
 * with milliseconds, journald told apart by JOURNAL_STREAM, journal records
 * with FILTER= and CODE= (through a fake sd_journal_sendv) that fall back
 * to "<N>" lines, a [log] file that SIGUSR1 reopens after logrotate
 * moved it away, and [log] format = json: one JSON object per line that
 * jansson reads back, whatever bytes a message quoted.
 */
#include <check.h>
#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "check_main.h"
#include "log.h"

static char dir[64];
static int saved_stderr = -1;

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/check_log.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    saved_stderr = dup(STDERR_FILENO);
    ck_assert_int_ge(saved_stderr, 0);
}

static void teardown(void)
{
    char cmd[128];
    dup2(saved_stderr, STDERR_FILENO);
    close(saved_stderr);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

static void slurp(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    fclose(f);
}

static bool matches(const char *s, const char *re)
{
    regex_t r;
    ck_assert_int_eq(regcomp(&r, re, REG_EXTENDED | REG_NOSUB), 0);
    bool m = regexec(&r, s, 0, NULL, 0) == 0;
    regfree(&r);
    return m;
}

START_TEST(timestamp_is_rfc3339_with_ms)
{
    char buf[64];
    struct timespec ts = { .tv_sec = 1795638843, .tv_nsec = 7 * 1000000 + 999 };
    setenv("TZ", "UTC", 1);
    tzset();
    size_t n = log_timestamp(&ts, buf, sizeof buf);
    ck_assert_uint_eq(n, strlen(buf));
    ck_assert_str_eq(buf, "2026-11-25T20:34:03.007+00:00");
    setenv("TZ", "XXX-05:30", 1);
    tzset();
    log_timestamp(&ts, buf, sizeof buf);
    ck_assert_str_eq(buf, "2026-11-26T02:04:03.007+05:30");
    unsetenv("TZ");
    tzset();
}
END_TEST

START_TEST(journald_only_when_journal_stream_is_stderr)
{
    char path[128], env[64];
    struct stat st;
    struct log lg;
    snprintf(path, sizeof path, "%s/stream", dir);
    ck_assert(log_open_file(&lg, path, env, sizeof env));
    ck_assert_int_eq(fstat(STDERR_FILENO, &st), 0);
    unsetenv("JOURNAL_STREAM");
    ck_assert(!log_under_journald());
    snprintf(env, sizeof env, "%llu:%llu", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino);
    setenv("JOURNAL_STREAM", env, 1);
    ck_assert(log_under_journald());
    log_init(&lg, LOG_LVL_INFO);
    ck_assert(lg.journal);
    lg.journal_send = NULL;         /* the "<N>" lines, whatever journal this machine has */
    log_info(&lg, "to journald");
    snprintf(env, sizeof env, "%llu:%llu", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino + 1);
    setenv("JOURNAL_STREAM", env, 1);
    ck_assert(!log_under_journald());
    log_init(&lg, LOG_LVL_INFO);
    ck_assert(!lg.journal);
    log_warn(&lg, "to a file");
    unsetenv("JOURNAL_STREAM");

    char got[512];
    slurp(path, got, sizeof got);
    ck_assert_msg(matches(got, "^<6>bloomguard: info: to journald\n"
                               "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}\\.[0-9]{3}[+-][0-9]{2}:[0-9]{2} "
                               "bloomguard: warning: to a file\n$"), "got: %s", got);
}
END_TEST

/* What the fake sd_journal_sendv was given: each record's fields, "|"-separated. */
static char sent[1024];
static int send_result;

static int fake_send(const struct iovec *iov, int n)
{
    size_t used = strlen(sent);
    for (int i = 0; i < n; i++)
        used += (size_t)snprintf(sent + used, sizeof sent - used, "%.*s|", (int)iov[i].iov_len,
                                 (const char *)iov[i].iov_base);
    snprintf(sent + used, sizeof sent - used, "\n");
    return send_result;
}

/* lg logging to a file at dir/name, as if it were journald's stream. */
static void journal_to(struct log *lg, const char *name, char *path, size_t pathlen)
{
    char err[256];
    snprintf(path, pathlen, "%s/%s", dir, name);
    log_init(lg, LOG_LVL_INFO);
    ck_assert(log_open_file(lg, path, err, sizeof err));
    lg->journal = true;
    lg->journal_send = fake_send;
    log_journal_records(lg, true);
    sent[0] = '\0';
}

START_TEST(journal_records_carry_filter_and_code)
{
    char path[128], got[512];
    struct log lg;
    journal_to(&lg, "journal", path, sizeof path);
    send_result = 0;
    log_fields(&lg, LOG_LVL_WARN, "default", "rebuild_done", "x %d\n\tcontinued", 5);
    log_info(&lg, "plain");
    log_fields(&lg, LOG_LVL_ERROR, NULL, "follower_reconnect", "no filter");
    log_fields(&lg, LOG_LVL_DEBUG, "default", "noise", "above the level");
    ck_assert_str_eq(sent,
                     "MESSAGE=bloomguard: warning: x 5  continued|PRIORITY=4|"
                     "SYSLOG_IDENTIFIER=bloomguard|FILTER=default|CODE=rebuild_done|\n"
                     "MESSAGE=bloomguard: info: plain|PRIORITY=6|SYSLOG_IDENTIFIER=bloomguard|\n"
                     "MESSAGE=bloomguard: error: no filter|PRIORITY=3|"
                     "SYSLOG_IDENTIFIER=bloomguard|CODE=follower_reconnect|\n");
    slurp(path, got, sizeof got);
    ck_assert_str_eq(got, "");      /* sent, so not written as well */
}
END_TEST

START_TEST(journal_send_failure_falls_back_to_lines)
{
    char path[128], got[512];
    struct log lg;
    journal_to(&lg, "fallback", path, sizeof path);
    send_result = -ENOENT;          /* no /run/systemd/journal/socket */
    log_fields(&lg, LOG_LVL_WARN, "default", "degraded", "x %d", 5);
    log_error(&lg, "plain");
    ck_assert_ptr_nonnull(strstr(sent, "CODE=degraded"));   /* it was tried */
    slurp(path, got, sizeof got);
    ck_assert_str_eq(got, "<4>bloomguard: warning: x 5\n<3>bloomguard: error: plain\n");
}
END_TEST

START_TEST(records_only_while_turned_on)
{
    char path[128], got[512];
    struct log lg;
    journal_to(&lg, "switch", path, sizeof path);
    send_result = 0;
    log_journal_records(&lg, false);
    log_fields(&lg, LOG_LVL_INFO, "default", "ready", "before");
    log_journal_records(&lg, true);
    log_fields(&lg, LOG_LVL_INFO, "default", "ready", "running");
    log_journal_records(&lg, false);
    log_info(&lg, "stopped");
    ck_assert_str_eq(sent, "MESSAGE=bloomguard: info: running|PRIORITY=6|"
                           "SYSLOG_IDENTIFIER=bloomguard|FILTER=default|CODE=ready|\n");
    slurp(path, got, sizeof got);
    ck_assert_str_eq(got, "<6>bloomguard: info: before\n<6>bloomguard: info: stopped\n");
}
END_TEST

/* sd_journal_sendv says 0 when the socket is missing: only the stream keeps those messages. */
START_TEST(no_journal_socket_no_records)
{
    struct log lg;
    log_init(&lg, LOG_LVL_INFO);
    if (access(LOG_JOURNAL_SOCKET, F_OK) != 0)
        ck_assert_ptr_null(lg.journal_send);
#ifndef HAVE_SYSTEMD
    ck_assert_ptr_null(lg.journal_send);
#endif
}
END_TEST

START_TEST(fields_change_nothing_off_the_journal)
{
    char path[128], err[256], got[512];
    struct log lg;
    snprintf(path, sizeof path, "%s/plain.log", dir);
    log_init(&lg, LOG_LVL_INFO);
    ck_assert(log_open_file(&lg, path, err, sizeof err));
    lg.journal_send = fake_send;
    sent[0] = '\0';
    log_fields(&lg, LOG_LVL_INFO, "default", "rebuild_done", "same %s", "text");
    log_info(&lg, "same %s", "text");
    ck_assert_str_eq(sent, "");
    slurp(path, got, sizeof got);
    const char *ts = "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}\\.[0-9]{3}[+-][0-9]{2}:[0-9]{2} ";
    char re[256];
    snprintf(re, sizeof re, "^%sbloomguard: info: same text\n%sbloomguard: info: same text\n$", ts,
             ts);
    ck_assert_msg(matches(got, re), "got: %s", got);
}
END_TEST

START_TEST(reopen_follows_logrotate)
{
    char path[128], moved[128], err[256], got[512];
    struct log lg;
    log_init(&lg, LOG_LVL_INFO);
    snprintf(path, sizeof path, "%s/bloomguard.log", dir);
    snprintf(moved, sizeof moved, "%s/bloomguard.log.1", dir);
    ck_assert(log_open_file(&lg, path, err, sizeof err));
    ck_assert(!lg.journal);
    log_info(&lg, "before");
    ck_assert_int_eq(rename(path, moved), 0);
    log_info(&lg, "still the old file");
    ck_assert(log_reopen(&lg, err, sizeof err));
    log_info(&lg, "after");
    slurp(moved, got, sizeof got);
    ck_assert_ptr_nonnull(strstr(got, "info: before\n"));
    ck_assert_ptr_nonnull(strstr(got, "info: still the old file\n"));
    ck_assert_ptr_null(strstr(got, "after"));
    slurp(path, got, sizeof got);
    ck_assert_ptr_nonnull(strstr(got, "info: after\n"));
    ck_assert_ptr_null(strstr(got, "before"));
}
END_TEST

START_TEST(file_that_cannot_open_changes_nothing)
{
    char err[256];
    struct log lg;
    log_init(&lg, LOG_LVL_INFO);
    ck_assert(!log_open_file(&lg, "/nonexistent-dir/x.log", err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent-dir/x.log"));
    ck_assert_ptr_null(lg.file);
    ck_assert(log_reopen(&lg, err, sizeof err));   /* nothing to reopen */
}
END_TEST

/* Each line of path as a JSON object, into objs (n at most); returns how many lines. */
static size_t json_lines(const char *path, json_t **objs, size_t n)
{
    static char got[16384];
    slurp(path, got, sizeof got);
    size_t k = 0;
    for (char *line = got, *nl; *line != '\0' && k < n; line = nl + 1) {
        nl = strchr(line, '\n');
        ck_assert_msg(nl != NULL, "a line without its newline: %s", line);
        *nl = '\0';
        json_error_t e;
        objs[k] = json_loads(line, 0, &e);
        ck_assert_msg(objs[k] != NULL && json_is_object(objs[k]), "not a JSON object (%s): %s",
                      e.text, line);
        k++;
    }
    return k;
}

static const char *str_field(json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/* [log] format = json: the fields journald gets, and any bytes of a message as valid JSON. */
START_TEST(json_lines_carry_the_journal_fields)
{
    char path[128], err[256];
    struct log lg;
    snprintf(path, sizeof path, "%s/json.log", dir);
    log_init(&lg, LOG_LVL_INFO);
    log_set_format(&lg, LOG_FORMAT_JSON);
    ck_assert(log_open_file(&lg, path, err, sizeof err));
    log_fields(&lg, LOG_LVL_WARN, "users", "degraded", "id \"%s\" \\ tab\there\nnext \x01 bad %s",
               "a\"b", "\xff\xc3\xa9 \xed\xa0\x80 \xf0\x9f\x98\x80");
    log_info(&lg, "plain");
    log_debug(&lg, "above the level");
    char big[4000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    log_error(&lg, "long %s", big);
    log_msg_format(LOG_FORMAT_JSON, LOG_LVL_ERROR, "postgres: FATAL: %s", "terminated");

    json_t *o[8];
    size_t n = json_lines(path, o, 8);
    ck_assert_uint_eq(n, 4);
    ck_assert_str_eq(str_field(o[0], "level"), "warning");
    ck_assert_int_eq(json_integer_value(json_object_get(o[0], "priority")), 4);
    ck_assert_str_eq(str_field(o[0], "syslog_identifier"), "bloomguard");
    ck_assert_str_eq(str_field(o[0], "filter"), "users");
    ck_assert_str_eq(str_field(o[0], "code"), "degraded");
    ck_assert_int_eq(json_integer_value(json_object_get(o[0], "pid")), getpid());
    ck_assert_msg(matches(str_field(o[0], "time"),
                          "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}\\.[0-9]{3}[+-][0-9]{2}:[0-9]{2}$"),
                  "time: %s", str_field(o[0], "time"));
    /* The text line's text: no prefix, tab and newline as spaces, bad bytes as U+FFFD. */
    ck_assert_str_eq(str_field(o[0], "message"),
                     "id \"a\"b\" \\ tab here next \x01 bad \xef\xbf\xbd\xc3\xa9 "
                     "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd \xf0\x9f\x98\x80");
    ck_assert_str_eq(str_field(o[1], "message"), "plain");
    ck_assert_ptr_null(json_object_get(o[1], "filter"));
    ck_assert_ptr_null(json_object_get(o[1], "code"));
    ck_assert_str_eq(str_field(o[2], "level"), "error");
    ck_assert_uint_ge(strlen(str_field(o[2], "message")), 2000);    /* cut, still one object */
    ck_assert_str_eq(str_field(o[3], "message"), "postgres: FATAL: terminated");
    for (size_t i = 0; i < n; i++)
        json_decref(o[i]);
}
END_TEST

/* json wins over journald: no record, no "<N>", the collector reads JSON from the stream. */
START_TEST(json_even_under_journald)
{
    char path[128], got[512];
    struct log lg;
    journal_to(&lg, "jjournal", path, sizeof path);
    log_set_format(&lg, LOG_FORMAT_JSON);
    send_result = 0;
    log_fields(&lg, LOG_LVL_INFO, "default", "ready", "ready");
    ck_assert_str_eq(sent, "");
    slurp(path, got, sizeof got);
    ck_assert_msg(matches(got, "^\\{\"time\":\"[^\"]+\",\"level\":\"info\",\"priority\":6,"
                               "\"syslog_identifier\":\"bloomguard\",\"pid\":[0-9]+,"
                               "\"filter\":\"default\",\"code\":\"ready\",\"message\":\"ready\"\\}\n$"),
                  "got: %s", got);
}
END_TEST

CHECK_SUITE("log",
    CHECK_CASE("log", .setup = setup, .teardown = teardown),
    CHECK_TEST(timestamp_is_rfc3339_with_ms),
    CHECK_TEST(journald_only_when_journal_stream_is_stderr),
    CHECK_TEST(journal_records_carry_filter_and_code),
    CHECK_TEST(journal_send_failure_falls_back_to_lines),
    CHECK_TEST(records_only_while_turned_on),
    CHECK_TEST(no_journal_socket_no_records),
    CHECK_TEST(fields_change_nothing_off_the_journal),
    CHECK_TEST(reopen_follows_logrotate),
    CHECK_TEST(file_that_cannot_open_changes_nothing),
    CHECK_TEST(json_lines_carry_the_journal_fields),
    CHECK_TEST(json_even_under_journald),
)
