/*
 * Unit tests of the configuration module: defaults, every value type, file
 * syntax and error messages, overrides, and that conf/bloomguard.conf
 * documents every key of the table with its default.
 */
#include <check.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * Not "config.h": with autotools, -I$(top_builddir) comes before -I src and
 * would find autoconf's config.h instead.
 */
#include "check_main.h"
#include "config.h"
#include "config_int.h"  /* config_parse_duration, config_key_find */
#include "filter.h"
#include "uritmpl.h"

#define ERRLEN 256
#define MAX_FILES 8

/*
 * Fixture: a private temporary directory for the whole test case.  It is an
 * unchecked fixture (run in the parent) so the directory is removed even
 * when a test fails in its forked child.
 */
static char tmpdir[4096];
static char files[MAX_FILES][sizeof tmpdir + 64];
static size_t n_files;

static void setup(void)
{
    const char *base = getenv("TMPDIR");

    if (base == NULL || base[0] == '\0')
        base = "/tmp";
    snprintf(tmpdir, sizeof tmpdir, "%s/check_config.XXXXXX", base);
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
    DIR *d = opendir(tmpdir);
    struct dirent *e;
    char path[sizeof tmpdir + sizeof e->d_name + 1];

    ck_assert_ptr_nonnull(d);
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", tmpdir, e->d_name);
        ck_assert_int_eq(unlink(path), 0);
    }
    closedir(d);
    ck_assert_int_eq(rmdir(tmpdir), 0);
}

/* Write text to tmpdir/name and return the file's path (fixture-owned). */
static const char *write_file(const char *name, const char *text)
{
    char path[sizeof files[0]];
    FILE *f;
    size_t i;

    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    for (i = 0; i < n_files; i++)
        if (strcmp(files[i], path) == 0)
            break;
    if (i == n_files) {
        ck_assert_uint_lt(n_files, MAX_FILES);
        strcpy(files[n_files++], path);
    }
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(text, 1, strlen(text), f), strlen(text));
    ck_assert_int_eq(fclose(f), 0);
    return files[i];
}

/* Load text as tmpdir/test.conf over *c; err gets the message on failure. */
static bool load(struct config *c, const char *text, char *err)
{
    const char *path = write_file("test.conf", text);

    err[0] = '\0';
    return config_load_file(c, path, err, ERRLEN);
}

static void assert_contains(const char *haystack, const char *needle)
{
    ck_assert_msg(strstr(haystack, needle) != NULL, "\"%s\" does not contain \"%s\"",
                  haystack, needle);
}

/* config_set on a fresh defaults struct; returns success, err on failure. */
static bool set_one(struct config *c, const char *section, const char *key,
                    const char *value, char *err)
{
    err[0] = '\0';
    return config_set(c, section, key, value, err, ERRLEN);
}

/*
 * The value tests below are tables of config_set (or, where section is NULL,
 * config_override) calls walked in order on one struct config, so a row may
 * rely on what the rows before it left.  An accepted row reads its field
 * back; a refused one must leave the field as it was and say why.
 */
enum field_kind { F_NONE, F_UINT, F_U64, F_DOUBLE, F_BOOL, F_ENUM, F_STR, F_LISTEN };

struct set_case {
    const char *section, *key, *value;  /* section NULL: value is an override */
    size_t off;                         /* offsetof the field the key sets */
    enum field_kind kind;
    uint64_t u;                         /* accepted: F_UINT, F_U64, F_BOOL, F_ENUM, F_LISTEN's port */
    double d;                           /* accepted: F_DOUBLE */
    const char *s;                      /* accepted: F_STR, F_LISTEN's host */
    const char *err;                    /* refused with exactly this message */
    const char *part;                   /* refused with a message containing this ("": any) */
};

#define FIELD(f, kind) offsetof(struct config, f), kind
#define NO_FIELD 0, F_NONE
#define LISTEN 0, F_LISTEN
#define OVERRIDE(arg) NULL, NULL, arg
#define REFUSED .part = ""

/* A field's value, copied so that a change to the struct cannot alter it. */
struct field_val {
    uint64_t u;
    double d;
    char s[320];
};

static struct field_val field_get(const struct config *c, const struct set_case *r)
{
    const char *p = (const char *)c + r->off;
    struct field_val v = { 0, 0, "" };

    switch (r->kind) {
    case F_NONE: break;
    case F_UINT: v.u = *(const unsigned *)(const void *)p; break;
    case F_U64: v.u = *(const uint64_t *)(const void *)p; break;
    case F_DOUBLE: v.d = *(const double *)(const void *)p; break;
    case F_BOOL: v.u = *(const bool *)(const void *)p; break;
    case F_ENUM: v.u = (uint64_t)*(const int *)(const void *)p; break;
    case F_STR: snprintf(v.s, sizeof v.s, "%s", *(char *const *)(const void *)p); break;
    case F_LISTEN:
        v.u = c->listen_port;
        snprintf(v.s, sizeof v.s, "%s", c->listen_host);
        break;
    }
    return v;
}

static bool field_eq(const struct field_val *a, const struct field_val *b)
{
    return a->u == b->u && a->d == b->d && strcmp(a->s, b->s) == 0;
}

/* The value an accepted row (or a config_fields row) expects. */
static struct field_val field_want(const struct set_case *r)
{
    struct field_val v = { r->u, r->d, "" };

    snprintf(v.s, sizeof v.s, "%s", r->s != NULL ? r->s : "");
    return v;
}

/* Walk rows[0..n) on *c; each failure message names the row. */
static void walk_sets(struct config *c, const struct set_case *rows, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const struct set_case *r = &rows[i];
        char err[ERRLEN] = "", row[ERRLEN + 64];
        bool refused = r->err != NULL || r->part != NULL;
        struct field_val before = field_get(c, r), after, want = before;
        bool ok;

        if (r->section != NULL) {
            snprintf(row, sizeof row, "row %zu [%s] %s = \"%s\"", i, r->section, r->key, r->value);
            ok = config_set(c, r->section, r->key, r->value, err, sizeof err);
        } else {
            snprintf(row, sizeof row, "row %zu --%s", i, r->value);
            ok = config_override(c, r->value, err, sizeof err);
        }
        after = field_get(c, r);
        if (!refused) {
            ck_assert_msg(ok, "%s: refused: %s", row, err);
            want = field_want(r);
        } else {
            ck_assert_msg(!ok, "%s: accepted", row);
            ck_assert_msg(err[0] != '\0', "%s: no message", row);
            ck_assert_msg(r->err == NULL || strcmp(err, r->err) == 0, "%s: \"%s\", want \"%s\"",
                          row, err, r->err);
            ck_assert_msg(r->part == NULL || strstr(err, r->part) != NULL,
                          "%s: \"%s\" lacks \"%s\"", row, err, r->part);
        }
        ck_assert_msg(field_eq(&after, &want), "%s: field is %" PRIu64 " / %.17g / \"%s\", want %"
                      PRIu64 " / %.17g / \"%s\"", row, after.u, after.d, after.s, want.u, want.d,
                      want.s);
    }
}

/* The fields test_defaults and assert_config_eq look at, with their defaults. */
static const struct set_case config_fields[] = {
    { "server", "listen", NULL, LISTEN, .s = "127.0.0.1", .u = 8080 },
    { "server", "threads", NULL, FIELD(threads, F_UINT), .u = 0 },
    { "server", "max_connections", NULL, FIELD(max_connections, F_UINT), .u = 10000 },
    { "server", "connection_timeout", NULL, FIELD(connection_timeout, F_UINT), .u = 30 },
    { "server", "max_body_bytes", NULL, FIELD(max_body_bytes, F_U64), .u = 1048576 },
    { "server", "max_batch", NULL, FIELD(max_batch, F_UINT), .u = 10000 },
    { "server", "max_id_bytes", NULL, FIELD(max_id_bytes, F_UINT), .u = 512 },
    { "postgres", "conninfo", NULL, FIELD(conninfo, F_STR), .s = "" },
    { "postgres", "table", NULL, FIELD(filters[0].table, F_STR), .s = "users" },
    { "postgres", "column", NULL, FIELD(filters[0].column, F_STR), .s = "id" },
    { "postgres", "retry_max_seconds", NULL, FIELD(retry_max_seconds, F_UINT), .u = 30 },
    { "filter", "expected_items", NULL, FIELD(filters[0].expected_items, F_U64), .u = 0 },
    { "filter", "false_positive_rate", NULL, FIELD(filters[0].false_positive_rate, F_DOUBLE),
      .d = 0.01 },
    { "filter", "headroom", NULL, FIELD(filters[0].headroom, F_DOUBLE), .d = 2.0 },
    { "sync", "enabled", NULL, FIELD(sync_enabled, F_BOOL), .u = true },
    { "sync", "channel", NULL, FIELD(filters[0].channel, F_STR), .s = "bloomguard" },
    { "sync", "rebuild_interval", NULL, FIELD(filters[0].rebuild_interval, F_UINT), .u = 0 },
    { "sync", "rebuild_after_deletes", NULL, FIELD(filters[0].rebuild_after_deletes, F_U64),
      .u = 0 },
    { "sync", "auto_grow", NULL, FIELD(filters[0].auto_grow, F_BOOL), .u = true },
    { "auth", "uri_template", NULL, FIELD(n_uri_templates, F_UINT), .u = 0 },
    { "auth", "deny_status", NULL, FIELD(deny_status, F_UINT), .u = 403 },
    { "auth", "fail_open", NULL, FIELD(fail_open, F_BOOL), .u = true },
    { "metrics", "enabled", NULL, FIELD(metrics_enabled, F_BOOL), .u = true },
    { "log", "level", NULL, FIELD(log_level, F_ENUM), .u = LOG_LVL_INFO },
};

/* Each of config_fields in *a equals the same field of *b, or its default when b is NULL. */
static void assert_fields(const struct config *a, const struct config *b)
{
    for (size_t i = 0; i < sizeof config_fields / sizeof config_fields[0]; i++) {
        const struct set_case *r = &config_fields[i];
        struct field_val x = field_get(a, r), y = b != NULL ? field_get(b, r) : field_want(r);
        ck_assert_msg(field_eq(&x, &y), "[%s] %s is %" PRIu64 " / %.17g / \"%s\", want %" PRIu64
                      " / %.17g / \"%s\"", r->section, r->key, x.u, x.d, x.s, y.u, y.d, y.s);
    }
}

#define WALK(c, rows) walk_sets((c), (rows), sizeof (rows) / sizeof (rows)[0])

/* A file config_load_file refuses, and a part of the file:line message it gives. */
struct load_error {
    const char *text, *want;
};

/* Load each row's text over fresh defaults; the failure messages name the row. */
static void assert_load_errors(const struct load_error *rows, size_t n)
{
    char err[ERRLEN];

    for (size_t i = 0; i < n; i++) {
        struct config c;
        ck_assert(config_defaults(&c));
        ck_assert_msg(!load(&c, rows[i].text, err), "row %zu loaded: %s", i, rows[i].text);
        ck_assert_msg(strstr(err, rows[i].want) != NULL, "row %zu: \"%s\" lacks \"%s\"", i, err,
                      rows[i].want);
        config_free(&c);
    }
}

#define LOAD_ERRORS(rows) assert_load_errors((rows), sizeof (rows) / sizeof (rows)[0])

static void assert_config_eq(const struct config *a, const struct config *b)
{
    assert_fields(a, b);
    for (unsigned i = 0; i < a->n_uri_templates; i++)
        ck_assert_str_eq(a->uri_templates[i], b->uri_templates[i]);
}

static void sample_path(char *buf, size_t len)
{
    const char *top = getenv("top_srcdir");

    snprintf(buf, len, "%s/conf/bloomguard.conf", top != NULL && top[0] != '\0' ? top : "..");
}

START_TEST(test_defaults)
{
    struct config c;

    ck_assert(config_defaults(&c));
    assert_fields(&c, NULL);
    ck_assert_ptr_null(c.uri_templates[0]);
    config_free(&c);
    ck_assert_ptr_null(c.listen_host);
    ck_assert_ptr_null(c.conninfo);
    config_free(&c);            /* twice is fine */
}
END_TEST

START_TEST(test_free_zeroed_and_null)
{
    struct config c;

    memset(&c, 0, sizeof c);
    config_free(&c);
    config_free(NULL);
}
END_TEST

START_TEST(test_key_table)
{
    size_t n = config_key_count();
    const char *s, *k, *d, *h;

    ck_assert_uint_ge(n, 24);
    for (size_t i = 0; i < n; i++) {
        ck_assert(config_key_at(i, &s, &k, &d, &h));
        ck_assert_ptr_nonnull(d);
        ck_assert_msg(h != NULL && h[0] != '\0', "[%s] %s has no help", s, k);
        for (size_t j = 0; j < i; j++) {
            const char *s2, *k2;
            ck_assert(config_key_at(j, &s2, &k2, NULL, NULL));
            ck_assert_msg(strcmp(s, s2) != 0 || strcmp(k, k2) != 0, "[%s] %s twice", s, k);
        }
        /* Each default, set on its own, must be accepted (uri_template has none). */
        if (strcmp(k, "uri_template") != 0) {
            struct config c;
            char err[ERRLEN];
            ck_assert(config_defaults(&c));
            ck_assert_msg(set_one(&c, s, k, d, err), "%s", err);
            config_free(&c);
        }
    }
    ck_assert(!config_key_at(n, &s, &k, &d, &h));
    ck_assert(config_key_at(0, NULL, NULL, NULL, NULL));
}
END_TEST

START_TEST(test_sample_conf_gives_defaults)
{
    struct config def, c;
    char path[4096], err[ERRLEN] = "";

    sample_path(path, sizeof path);
    ck_assert(config_defaults(&def));
    ck_assert(config_defaults(&c));
    ck_assert_msg(config_load_file(&c, path, err, sizeof err), "%s", err);
    assert_config_eq(&c, &def);
    config_free(&c);
    config_free(&def);
}
END_TEST

/* Strip one pair of surrounding double quotes, as the parser does. */
static void unquote(char *v)
{
    size_t len = strlen(v);

    if (len >= 2 && v[0] == '"' && v[len - 1] == '"') {
        memmove(v, v + 1, len - 2);
        v[len - 2] = '\0';
    }
}

/*
 * Read conf/bloomguard.conf as text: every key of the table must appear as
 * "key =", ";key =" or "#key =" under its [section], with a comment line
 * right above it, and active keys must carry the table's default.
 */
START_TEST(test_sample_conf_lists_every_key)
{
    char path[4096], line[1024], section[64] = "", prev[1024] = "";
    size_t n = config_key_count();
    int *found = calloc(n, sizeof *found);
    int lineno = 0;
    FILE *f;

    ck_assert_ptr_nonnull(found);
    sample_path(path, sizeof path);
    f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s: %s", path, strerror(errno));
    while (fgets(line, sizeof line, f) != NULL) {
        char *p = line, *e = line + strlen(line), *name, *eq, *value;
        bool commented = false;

        lineno++;
        while (e > line && isspace((unsigned char)e[-1]))
            *--e = '\0';
        if (line[0] == '[') {
            char *close = strchr(line, ']');
            ck_assert_ptr_nonnull(close);
            *close = '\0';
            snprintf(section, sizeof section, "%.63s", line + 1);
            goto next;
        }
        if (*p == '#' || *p == ';') {
            commented = true;
            p++;
        }
        name = p;
        while (isalnum((unsigned char)*p) || *p == '_')
            p++;
        if (p == name)
            goto next;
        eq = p;
        while (*eq == ' ')
            eq++;
        if (*eq != '=')
            goto next;
        *p = '\0';
        value = eq + 1;
        while (*value == ' ')
            value++;
        for (size_t i = 0; i < n; i++) {
            const char *s, *k, *d;
            ck_assert(config_key_at(i, &s, &k, &d, NULL));
            if (strcmp(k, name) != 0 || strcmp(s, section) != 0)
                continue;
            found[i] = lineno;
            ck_assert_msg(prev[0] == '#' || prev[0] == ';',
                          "%s:%d: no comment above [%s] %s", path, lineno, s, k);
            if (!commented) {
                unquote(value);
                ck_assert_msg(strcmp(value, d) == 0, "%s:%d: [%s] %s = %s, default is %s",
                              path, lineno, s, k, value, d);
            }
        }
    next:
        snprintf(prev, sizeof prev, "%s", line);
    }
    fclose(f);
    for (size_t i = 0; i < n; i++) {
        const char *s, *k;
        ck_assert(config_key_at(i, &s, &k, NULL, NULL));
        ck_assert_msg(found[i] != 0, "[%s] %s is missing from %s", s, k, path);
    }
    free(found);
}
END_TEST

START_TEST(test_uint_values)
{
    static const struct set_case rows[] = {
        { "server", "threads", "256", FIELD(threads, F_UINT), .u = 256 },
        { "server", "threads", "  7  ", FIELD(threads, F_UINT), .u = 7 },
        { "server", "threads", "\"8\"", FIELD(threads, F_UINT), .u = 8 },
        { "server", "max_connections", "1000000", FIELD(max_connections, F_UINT), .u = 1000000 },
        { "server", "connection_timeout", "0", FIELD(connection_timeout, F_UINT), .u = 0 },
        { "server", "max_batch", "10000000", FIELD(max_batch, F_UINT), .u = 10000000 },
        { "server", "max_id_bytes", "65536", FIELD(max_id_bytes, F_UINT), .u = 65536 },
        { "postgres", "retry_max_seconds", "3600", FIELD(retry_max_seconds, F_UINT), .u = 3600 },
        { "sync", "rebuild_interval", "31536000", FIELD(filters[0].rebuild_interval, F_UINT),
          .u = 31536000 },
        { "server", "threads", "257", FIELD(threads, F_UINT),
          .err = "[server] threads: 257 is out of range (0..256)" },
        { "server", "max_batch", "abc", FIELD(max_batch, F_UINT),
          .err = "[server] max_batch: \"abc\" is not a number" },
        { "server", "max_batch", "0", FIELD(max_batch, F_UINT),
          .err = "[server] max_batch: 0 is out of range (1..10000000)" },
        { "server", "max_connections", "1000001", FIELD(max_connections, F_UINT), REFUSED },
        { "server", "connection_timeout", "86401", FIELD(connection_timeout, F_UINT), REFUSED },
        { "server", "max_id_bytes", "65537", FIELD(max_id_bytes, F_UINT), REFUSED },
        { "postgres", "retry_max_seconds", "0", FIELD(retry_max_seconds, F_UINT), REFUSED },
        { "sync", "rebuild_interval", "31536001", FIELD(filters[0].rebuild_interval, F_UINT),
          REFUSED },
        { "server", "threads", "-1", FIELD(threads, F_UINT), .part = "is not a number" },
        { "server", "threads", "+1", FIELD(threads, F_UINT), REFUSED },
        { "server", "threads", "4x", FIELD(threads, F_UINT), REFUSED },
        { "server", "threads", "4 4", FIELD(threads, F_UINT), REFUSED },
        { "server", "threads", "1.5", FIELD(threads, F_UINT), REFUSED },
        { "server", "threads", "0x10", FIELD(threads, F_UINT), REFUSED },
        { "server", "threads", "1_000", FIELD(threads, F_UINT), REFUSED },
        { "server", "threads", "", FIELD(threads, F_UINT), REFUSED },
        { "server", "threads", "99999999999999999999999", FIELD(threads, F_UINT),
          .part = "out of range (0..256)" },
        { "server", "threads", "4294967297", FIELD(threads, F_UINT), REFUSED },   /* 2^32 + 1 */
    };
    struct config c;

    ck_assert(config_defaults(&c));
    WALK(&c, rows);
    ck_assert_uint_eq(c.threads, 8);
    config_free(&c);
}
END_TEST

START_TEST(test_uint64_values)
{
    static const struct set_case rows[] = {
        { "server", "max_body_bytes", "1073741824", FIELD(max_body_bytes, F_U64), .u = 1073741824 },
        { "server", "max_body_bytes", "1073741825", FIELD(max_body_bytes, F_U64),
          .err = "[server] max_body_bytes: 1073741825 is out of range (1..1073741824)" },
        { "server", "max_body_bytes", "0", FIELD(max_body_bytes, F_U64), REFUSED },
        { "filter", "expected_items", "1000000000000", FIELD(filters[0].expected_items, F_U64),
          .u = UINT64_C(1000000000000) },
        { "filter", "expected_items", "1000000000001", FIELD(filters[0].expected_items, F_U64),
          .part = "(0..1000000000000)" },
        { "sync", "rebuild_after_deletes", "18446744073709551615",
          FIELD(filters[0].rebuild_after_deletes, F_U64), .u = UINT64_MAX },
        { "sync", "rebuild_after_deletes", "18446744073709551616",
          FIELD(filters[0].rebuild_after_deletes, F_U64), .part = "out of range" },
        { "sync", "rebuild_after_deletes", "-1", FIELD(filters[0].rebuild_after_deletes, F_U64),
          REFUSED },
    };
    struct config c;

    ck_assert(config_defaults(&c));
    WALK(&c, rows);
    config_free(&c);
}
END_TEST

START_TEST(test_double_values)
{
#define FPR "filter", "false_positive_rate"
#define FPR_FIELD FIELD(filters[0].false_positive_rate, F_DOUBLE)
    /* The bounds are filter.h's: -t refuses what no load could build. */
    static const struct set_case rows[] = {
        { FPR, "0.4999", FPR_FIELD, .d = 0.4999 },
        { FPR, "1e-9", FPR_FIELD, REFUSED },
        { FPR, "0.0000001", FPR_FIELD,
          .err = "[filter] false_positive_rate: 0.0000001 is out of range (must be > 1e-06 and < 0.5)" },
        { FPR, "0.000001", FPR_FIELD, REFUSED },
        { FPR, ".25", FPR_FIELD, .d = 0.25 },
        { FPR, "0", FPR_FIELD,
          .err = "[filter] false_positive_rate: 0 is out of range (must be > 1e-06 and < 0.5)" },
        { FPR, "0.5", FPR_FIELD, .part = "out of range" },
        { FPR, "0.0", FPR_FIELD, REFUSED },
        { FPR, "-0.1", FPR_FIELD, REFUSED },
        { FPR, "1", FPR_FIELD, REFUSED },
        { FPR, "nan", FPR_FIELD, .part = "is not a number" },
        { FPR, "inf", FPR_FIELD, REFUSED },
        { FPR, "0x1p-3", FPR_FIELD, REFUSED },
        { FPR, "0.01x", FPR_FIELD, REFUSED },
        { FPR, "1e999", FPR_FIELD, REFUSED },
        { FPR, "", FPR_FIELD, REFUSED },
        { FPR, "e", FPR_FIELD, REFUSED },
        { "filter", "headroom", "1", FIELD(filters[0].headroom, F_DOUBLE), .d = 1.0 },
        { "filter", "headroom", "100.0", FIELD(filters[0].headroom, F_DOUBLE), .d = 100.0 },
        { "filter", "headroom", "0.99", FIELD(filters[0].headroom, F_DOUBLE),
          .err = "[filter] headroom: 0.99 is out of range (must be >= 1 and <= 100)" },
        { "filter", "headroom", "100.01", FIELD(filters[0].headroom, F_DOUBLE), REFUSED },
    };
    static const char *const accepted[] = { "0.0000011", "0.00001", "0.01", "0.4999" };
    struct config c;
    char err[ERRLEN];

    ck_assert(config_defaults(&c));
    WALK(&c, rows);
    ck_assert_double_eq(c.filters[0].false_positive_rate, 0.25);
    /* What config accepts, filter_plan builds. */
    for (size_t i = 0; i < sizeof accepted / sizeof accepted[0]; i++) {
        struct filter_plan plan;
        ck_assert_msg(set_one(&c, FPR, accepted[i], err), "%s: %s", accepted[i], err);
        ck_assert_msg(filter_plan(1000, c.filters[0].false_positive_rate, &plan) == FILTER_OK,
                      "%s", accepted[i]);
    }
    config_free(&c);
#undef FPR
#undef FPR_FIELD
}
END_TEST

START_TEST(test_bool_values)
{
    static const char *const yes[] = { "yes", "true", "on", "1", "YES", "True", "oN" };
    static const char *const no[] = { "no", "false", "off", "0", "NO", "False", "OFF" };
    static const char *const bad[] = { "maybe", "2", "", "y", "n", "yess", "01", "enabled" };
    struct config c;
    char err[ERRLEN];

    ck_assert(config_defaults(&c));
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        ck_assert(set_one(&c, "sync", "enabled", no[i], err));
        ck_assert(!c.sync_enabled);
        ck_assert(set_one(&c, "sync", "enabled", yes[i], err));
        ck_assert(c.sync_enabled);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(!set_one(&c, "auth", "fail_open", bad[i], err), "accepted %s", bad[i]);
        assert_contains(err, "is not a boolean");
        ck_assert(c.fail_open);
    }
    ck_assert(set_one(&c, "sync", "auto_grow", "off", err));
    ck_assert(!c.filters[0].auto_grow);
    ck_assert(set_one(&c, "auth", "fail_open", "false", err));
    ck_assert(!c.fail_open);
    ck_assert(set_one(&c, "metrics", "enabled", "0", err));
    ck_assert(!c.metrics_enabled);
    ck_assert(c.sync_enabled);      /* same key name, other section */
    config_free(&c);
}
END_TEST

START_TEST(test_listen_values)
{
    static const char *const bad[] = {
        "127.0.0.1:65536", "127.0.0.1", "127.0.0.1:", ":8080", "::1:8080", "[::1]",
        "[::1]8080", "[::1:8080", "[zz::1]:80", "[]:80", "[127.0.0.1]:80", "host:-1",
        "host:80x", "host:+80", "host: 80", "ho st:80", "host/x:80", "", "[fe80::1%]:80",
        "[fe80::1%e/0]:80", "127.0.0.1:99999999999999999999999",
    };
    static const struct set_case rows[] = {
        { "server", "listen", "0.0.0.0:0", LISTEN, .s = "0.0.0.0", .u = 0 },
        { "server", "listen", "[::1]:8080", LISTEN, .s = "::1", .u = 8080 },
        { "server", "listen", "[::]:1", LISTEN, .s = "::", .u = 1 },
        { "server", "listen", "[fe80::1%eth0]:80", LISTEN, .s = "fe80::1%eth0", .u = 80 },
        { "server", "listen", "localhost:65535", LISTEN, .s = "localhost", .u = 65535 },
        { "server", "listen", "127.0.0.1:65536", LISTEN, .part = "0..65535" },
        { "server", "listen", "127.0.0.1", LISTEN, .part = "has no port" },
        { "server", "listen", "::1:8080", LISTEN, .part = "brackets" },
    };
    struct config c;
    char err[ERRLEN];

    ck_assert(config_defaults(&c));
    WALK(&c, rows);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(!set_one(&c, "server", "listen", bad[i], err), "accepted %s", bad[i]);
        assert_contains(err, "[server] listen: ");
        ck_assert_str_eq(c.listen_host, "localhost");
        ck_assert_uint_eq(c.listen_port, 65535);
    }
    config_free(&c);
}
END_TEST

/* listen_mode takes chmod's octal digits up to 0777; listen_group only a spelling (listen.h looks it up). */
/* listen_mode takes chmod's octal digits up to 0777; listen_group only a spelling (listen.h looks it up). */
START_TEST(test_listen_unix_values)
{
    static const char *const bad_modes[] = { "", "rw", "0x1ff", "0888", "8", "1660", "4755",
                                              "00660", "-660" };
    static const char *const bad_groups[] = { "a b", "a:b", "/etc/group", "-g", "x\ty" };
    static const struct set_case modes[] = {
        { "server", "listen_mode", "0640", FIELD(listen_mode, F_UINT), .u = 0640 },
        { "server", "listen_mode", "666", FIELD(listen_mode, F_UINT), .u = 0666 },
        { "server", "listen_mode", "0", FIELD(listen_mode, F_UINT), .u = 0 },
        { "server", "listen_mode", "0777", FIELD(listen_mode, F_UINT), .u = 0777 },
        { "server", "listen_mode", "1660", FIELD(listen_mode, F_UINT), .part = "beyond 0777" },
    }, groups[] = {
        { "server", "listen_group", "www-data", FIELD(listen_group, F_STR), .s = "www-data" },
        { "server", "listen_group", "33", FIELD(listen_group, F_STR), .s = "33" },
    }, no_group[] = {
        { "server", "listen_group", "", FIELD(listen_group, F_STR), .s = "" },
    };
    struct config c;
    char err[ERRLEN];

    ck_assert(config_defaults(&c));
    ck_assert_uint_eq(c.listen_mode, 0660);
    ck_assert_str_eq(c.listen_group, "");
    WALK(&c, modes);
    for (size_t i = 0; i < sizeof bad_modes / sizeof bad_modes[0]; i++) {
        ck_assert_msg(!set_one(&c, "server", "listen_mode", bad_modes[i], err), "accepted %s",
                      bad_modes[i]);
        assert_contains(err, "[server] listen_mode: ");
        ck_assert_uint_eq(c.listen_mode, 0777);
    }
    WALK(&c, groups);
    for (size_t i = 0; i < sizeof bad_groups / sizeof bad_groups[0]; i++) {
        ck_assert_msg(!set_one(&c, "server", "listen_group", bad_groups[i], err), "accepted %s",
                      bad_groups[i]);
        assert_contains(err, "[server] listen_group: ");
        ck_assert_str_eq(c.listen_group, "33");
    }
    WALK(&c, no_group);
    config_free(&c);
}
END_TEST

START_TEST(test_enum_values)
{
#define LEVEL FIELD(log_level, F_ENUM)
#define DENY FIELD(deny_status, F_UINT)
#define ALLOW FIELD(allow_status, F_UINT)
#define SOURCE FIELD(uri_source, F_ENUM)
    static const struct set_case rows[] = {
        { "log", "level", "error", LEVEL, .u = LOG_LVL_ERROR },
        { "log", "level", "warn", LEVEL, .u = LOG_LVL_WARN },
        { "log", "level", "DEBUG", LEVEL, .u = LOG_LVL_DEBUG },
        { "log", "level", "info", LEVEL, .u = LOG_LVL_INFO },
        { "log", "level", "verbose", LEVEL,
          .err = "[log] level: \"verbose\" is not one of error, warn, info, debug" },
        { "log", "level", "", LEVEL, REFUSED },
        { "auth", "deny_status", "401", DENY, .u = 401 },
        { "auth", "deny_status", "403", DENY, .u = 403 },
        { "auth", "deny_status", "404", DENY, .u = 404 },
        { "auth", "deny_status", "410", DENY, .u = 410 },
        /* The message lists the enum table of the key. */
        { "auth", "deny_status", "200", DENY,
          .err = "[auth] deny_status: \"200\" is not one of 401, 403, 404, 410" },
        { "auth", "deny_status", "402", DENY, REFUSED },
        { "auth", "deny_status", "forbidden", DENY, REFUSED },
        { "auth", "deny_status", "-403", DENY, REFUSED },
        { "auth", "deny_status", "0403", DENY, REFUSED },
        { "auth", "allow_status", "200", ALLOW, .u = 200 },
        { "auth", "allow_status", "204", ALLOW, .u = 204 },
        { "auth", "allow_status", "403", ALLOW,
          .err = "[auth] allow_status: \"403\" is not one of 200, 204" },
        { "auth", "uri_source", "X-Forwarded-Uri", SOURCE, .u = URI_SOURCE_X_FORWARDED_URI },
        { "auth", "uri_source", "path", SOURCE, .u = URI_SOURCE_PATH },
        { "auth", "uri_source", "x-original-uri", SOURCE, .u = URI_SOURCE_X_ORIGINAL_URI },
        { "auth", "uri_source", "header", SOURCE,
          .err = "[auth] uri_source: \"header\" is not one of auto, x-original-uri, "
                 "x-forwarded-uri, path" },
    };
    struct config c;

    ck_assert(config_defaults(&c));
    WALK(&c, rows);
    ck_assert_int_eq(c.log_level, LOG_LVL_INFO);
    ck_assert_uint_eq(c.deny_status, 410);
    ck_assert_str_eq(config_log_level_name(LOG_LVL_WARN), "warn");
    ck_assert_str_eq(config_log_level_name((enum log_level)42), "?");
    config_free(&c);
#undef LEVEL
#undef DENY
#undef ALLOW
#undef SOURCE
}
END_TEST

START_TEST(test_string_values)
{
#define A8 "aaaaaaaa"
#define A55 A8 A8 A8 A8 A8 A8 "aaaaaaa"
#define TABLE FIELD(filters[0].table, F_STR)
#define COLUMN FIELD(filters[0].column, F_STR)
#define CHANNEL FIELD(filters[0].channel, F_STR)
    static const struct set_case rows[] = {
        { "postgres", "conninfo", "host=db dbname=app", FIELD(conninfo, F_STR),
          .s = "host=db dbname=app" },
        { "postgres", "conninfo", "\"\"", FIELD(conninfo, F_STR), .s = "" },
        { "postgres", "conninfo", "\" x \"", FIELD(conninfo, F_STR), .s = " x " },
        { "postgres", "conninfo", "\"x", FIELD(conninfo, F_STR), .part = "unterminated quote" },
        { "postgres", "table", "app.accounts", TABLE, .s = "app.accounts" },
        { "postgres", "table", "Users", TABLE, .s = "Users" },
        { "postgres", "table", "", TABLE, REFUSED },
        { "postgres", "table", "a.b.c", TABLE, REFUSED },
        { "postgres", "table", ".b", TABLE, REFUSED },
        { "postgres", "table", "a.", TABLE, REFUSED },
        { "postgres", "table", "x\"y", TABLE, REFUSED },
        { "postgres", "table", A55 A8 "a", TABLE, REFUSED },            /* 64 bytes */
        { "postgres", "column", "user_id", COLUMN, .s = "user_id" },
        { "postgres", "column", "", COLUMN, REFUSED },
        { "postgres", "column", A55 A8 "a", COLUMN, REFUSED },
        { "sync", "channel", A55 A8 "a", CHANNEL, REFUSED },
        { "sync", "channel", A55 "a", CHANNEL, REFUSED },
        { "sync", "channel", A55, CHANNEL, .s = A55 },
        { "sync", "channel", "_bg_2", CHANNEL, .s = "_bg_2" },
        { "sync", "channel", "", CHANNEL, REFUSED },
        { "sync", "channel", "1abc", CHANNEL, REFUSED },
        { "sync", "channel", "bad-name", CHANNEL,
          .err = "[sync] channel: \"bad-name\" is not an identifier of 1..55 characters "
                 "[A-Za-z_][A-Za-z0-9_]*" },
        { "sync", "channel", "a b", CHANNEL, REFUSED },
    };
    struct config c;

    ck_assert_uint_eq(strlen(A55), 55);
    ck_assert(config_defaults(&c));
    WALK(&c, rows);
    ck_assert_str_eq(c.filters[0].table, "Users");
    ck_assert_str_eq(c.filters[0].channel, "_bg_2");
    config_free(&c);
#undef A8
#undef A55
#undef TABLE
#undef COLUMN
#undef CHANNEL
}
END_TEST

START_TEST(test_templates)
{
#define TMPL "auth", "uri_template"
#define COUNT FIELD(n_uri_templates, F_UINT)
    static const struct set_case refused[] = {
        { TMPL, "user/{id}", COUNT, .err = "[auth] uri_template: \"user/{id}\" must start with '/'" },
        { TMPL, "/user", COUNT, .part = "must contain {id} exactly once" },
        { TMPL, "/{id}/{id}", COUNT, .part = "exactly once" },
        { TMPL, "/{ID}", COUNT, REFUSED },
        { TMPL, "/{name}/{id}", COUNT, .part = "only placeholder" },
        { TMPL, "/a b/{id}", COUNT, REFUSED },
        { TMPL, "/{id", COUNT, REFUSED },
        { TMPL, "", COUNT, REFUSED },
        /* The matcher drops the query and fragment: such a template never matches. */
        { TMPL, "/get?id={id}", COUNT, .part = "must not contain '?' or '#'" },
        { TMPL, "/a#{id}", COUNT, REFUSED },
    };
    struct config c;
    char err[ERRLEN], text[4096];
    size_t off = 0;

    ck_assert(config_defaults(&c));
    ck_assert_msg(load(&c, "[auth]\nuri_template = /user/get/{id}\n"
                           "uri_template = /v2/users/{id}/profile\n", err), "%s", err);
    ck_assert_uint_eq(c.n_uri_templates, 2);
    ck_assert_str_eq(c.uri_templates[0], "/user/get/{id}");
    ck_assert_str_eq(c.uri_templates[1], "/v2/users/{id}/profile");
    ck_assert(set_one(&c, TMPL, "/x/{id}", err));
    ck_assert_uint_eq(c.n_uri_templates, 3);
    ck_assert_str_eq(c.uri_templates[2], "/x/{id}");
    WALK(&c, refused);
    ck_assert_uint_eq(c.n_uri_templates, 3);
    config_free(&c);

    /* CONFIG_MAX_TEMPLATES fit; one more fails on its own line. */
    off += (size_t)snprintf(text + off, sizeof text - off, "[auth]\n");
    for (int i = 0; i < CONFIG_MAX_TEMPLATES + 1; i++)
        off += (size_t)snprintf(text + off, sizeof text - off, "uri_template = /t%d/{id}\n", i);
    ck_assert_uint_lt(off, sizeof text);
    ck_assert(config_defaults(&c));
    ck_assert(!load(&c, text, err));
    assert_contains(err, "test.conf:34: [auth] uri_template: too many templates (at most 32)");
    ck_assert_uint_eq(c.n_uri_templates, CONFIG_MAX_TEMPLATES);
    config_free(&c);            /* valgrind: all 32 freed */
    ck_assert_uint_eq(c.n_uri_templates, 0);
#undef TMPL
#undef COUNT
}
END_TEST

/*
 * Issue 12's two former bugs: a rule checked by config and again by its
 * owner, with the copies drifted apart.  Now the owner decides.
 */
START_TEST(test_owner_rules)
{
    struct config c;
    char err[ERRLEN];
    const char *why = NULL;
    struct filter_plan plan;
    char v[64];

    ck_assert(config_defaults(&c));
    /* uritmpl says a template with a query never matches: config refuses it. */
    ck_assert(!uritmpl_valid("/a?x={id}", &why));
    ck_assert(!config_override(&c, "auth.uri_template=/a?x={id}", err, sizeof err));
    ck_assert_str_eq(err, "--auth.uri_template=/a?x={id}: [auth] uri_template: \"/a?x={id}\" "
                          "must not contain '?' or '#'");
    assert_contains(err, why);
    ck_assert_uint_eq(c.n_uri_templates, 0);
    /* ... and takes what uritmpl takes. */
    ck_assert(uritmpl_valid("/a/{id}/b", NULL));
    ck_assert_msg(config_override(&c, "auth.uri_template=/a/{id}/b", err, sizeof err), "%s", err);

    /* A rate filter_new cannot build is refused: 1e-7 < FILTER_MIN_FPP. */
    ck_assert_int_eq(filter_plan(1000, 0.0000001, &plan), FILTER_EINVAL_FPP);
    ck_assert(!set_one(&c, "filter", "false_positive_rate", "0.0000001", err));
    assert_contains(err, "out of range");

    /* Every bound config enforces is filter.h's, and filter_plan agrees at each. */
    snprintf(v, sizeof v, "%.17g", FILTER_MIN_FPP);
    ck_assert(!set_one(&c, "filter", "false_positive_rate", v, err));
    ck_assert_int_eq(filter_plan(1000, FILTER_MIN_FPP, &plan), FILTER_EINVAL_FPP);
    snprintf(v, sizeof v, "%.17g", FILTER_MIN_FPP * 1.0001);
    ck_assert_msg(set_one(&c, "filter", "false_positive_rate", v, err), "%s", err);
    ck_assert_int_eq(filter_plan(1000, c.filters[0].false_positive_rate, &plan), FILTER_OK);
    snprintf(v, sizeof v, "%.17g", FILTER_MAX_FPP);
    ck_assert(!set_one(&c, "filter", "false_positive_rate", v, err));
    ck_assert_int_eq(filter_plan(1000, FILTER_MAX_FPP, &plan), FILTER_EINVAL_FPP);
    snprintf(v, sizeof v, "%.17g", FILTER_MAX_FPP * 0.9999);
    ck_assert_msg(set_one(&c, "filter", "false_positive_rate", v, err), "%s", err);
    ck_assert_int_eq(filter_plan(1000, c.filters[0].false_positive_rate, &plan), FILTER_OK);

    snprintf(v, sizeof v, "%llu", (unsigned long long)FILTER_MAX_ITEMS);
    ck_assert_msg(set_one(&c, "filter", "expected_items", v, err), "%s", err);
    ck_assert_uint_eq(c.filters[0].expected_items, FILTER_MAX_ITEMS);
    snprintf(v, sizeof v, "%llu", (unsigned long long)FILTER_MAX_ITEMS + 1);
    ck_assert(!set_one(&c, "filter", "expected_items", v, err));
    ck_assert_uint_eq(c.filters[0].expected_items, FILTER_MAX_ITEMS);
    config_free(&c);
}
END_TEST

/* The listing's ranges come from the rows, and each row says whether SIGHUP applies it. */
START_TEST(test_key_values_and_reload_flags)
{
    char buf[128];
    bool seen_level = false, seen_table = false;

    for (size_t i = 0; i < config_key_count(); i++) {
        const char *s, *k;
        ck_assert(config_key_at(i, &s, &k, NULL, NULL));
        config_key_values(i, buf, sizeof buf);
        if (strcmp(s, "log") == 0 && strcmp(k, "level") == 0) {
            ck_assert_str_eq(buf, "error | warn | info | debug");
            ck_assert(config_key_reloads(i));
            seen_level = true;
        } else if (strcmp(s, "server") == 0 && strcmp(k, "threads") == 0) {
            ck_assert_str_eq(buf, "0..256");
            ck_assert(!config_key_reloads(i));
        } else if (strcmp(s, "auth") == 0 && strcmp(k, "deny_status") == 0) {
            ck_assert_str_eq(buf, "401 | 403 | 404 | 410");
            ck_assert(config_key_reloads(i));
        } else if (strcmp(s, "filter") == 0 && strcmp(k, "false_positive_rate") == 0) {
            ck_assert_str_eq(buf, "> 1e-06 and < 0.5");
        } else if (strcmp(s, "postgres") == 0 && strcmp(k, "table") == 0) {
            ck_assert_str_eq(buf, "");
            ck_assert(!config_key_reloads(i));
            seen_table = true;
        }
    }
    ck_assert(seen_level && seen_table);
    ck_assert(!config_key_reloads(config_key_count()));
    config_key_values(config_key_count(), buf, sizeof buf);
    ck_assert_str_eq(buf, "");
}
END_TEST

/*
 * Load text over fresh defaults into *a and copy it to *b: the copy equals it
 * and shares no string with it, so either can be freed alone.
 */
static void load_and_copy(struct config *a, struct config *b, const char *text)
{
    char err[ERRLEN];

    ck_assert(config_defaults(a));
    ck_assert_msg(load(a, text, err), "%s", err);
    ck_assert(config_copy(b, a));
    assert_config_eq(a, b);
    for (unsigned f = 0; f < a->n_filters; f++) {
        ck_assert_ptr_ne(a->filters[f].table, b->filters[f].table);
        ck_assert_ptr_ne(a->filters[f].column, b->filters[f].column);
        ck_assert_ptr_ne(a->filters[f].channel, b->filters[f].channel);
        ck_assert_ptr_ne(a->filters[f].name, b->filters[f].name);
        ck_assert_str_eq(a->filters[f].channel, b->filters[f].channel);
    }
    for (unsigned t = 0; t < a->n_uri_templates; t++)
        ck_assert_ptr_ne(a->uri_templates[t], b->uri_templates[t]);
    ck_assert_ptr_ne(a->base.table, b->base.table);
    ck_assert_ptr_ne(a->listen_host, b->listen_host);
}

START_TEST(test_copy)
{
    struct config a, b;

    load_and_copy(&a, &b, "[auth]\nuri_template = /u/{id}\nuri_template = /v/{id}\n"
                          "deny_status = 404\n[postgres]\ntable = s.t\n");
    config_free(&a);
    ck_assert_str_eq(b.filters[0].table, "s.t");               /* b owns its own strings */
    ck_assert_str_eq(b.uri_templates[1], "/v/{id}");
    config_free(&b);
}
END_TEST

struct changes {
    char text[512];
    int n;
};

/* The changes that need a restart, as "[section] key;". */
static void note_change(void *arg, const struct config_change *c)
{
    struct changes *ch = arg;
    size_t len = strlen(ch->text);
    if (c->reload != CONFIG_RESTART)
        return;
    snprintf(ch->text + len, sizeof ch->text - len, "[%s] %s;", c->section, c->name);
    ch->n++;
}

/* Every change, as "[section] key: old -> new (restart);". */
static void note_all(void *arg, const struct config_change *c)
{
    struct changes *ch = arg;
    size_t len = strlen(ch->text);
    snprintf(ch->text + len, sizeof ch->text - len, "[%s] %s: %s -> %s%s;", c->section, c->name,
             c->old_value, c->new_value, c->reload == CONFIG_RESTART ? " (restart)" : "");
    ch->n++;
}

START_TEST(test_keep_restart_keys)
{
    struct config cur, next;
    struct changes ch = { "", 0 };
    char err[ERRLEN];

    ck_assert(config_defaults(&cur));
    ck_assert(config_defaults(&next));
    ck_assert(load(&next, "[server]\nlisten = 127.0.0.1:9999\nmax_batch = 7\n"
                          "[postgres]\ntable = other\n[filter]\nheadroom = 3\n"
                          "[auth]\nuri_template = /n/{id}\ndeny_status = 404\n"
                          "[log]\nlevel = debug\n", err));
    uint64_t rebuild = 99;
    ck_assert(config_reload_diff(&next, &cur, note_change, &ch, &rebuild, err, sizeof err));
    ck_assert_str_eq(ch.text, "[server] listen;[postgres] table;");
    ck_assert_int_eq(ch.n, 2);
    /* Restart-only keys are back to cur's values, the base included ... */
    ck_assert_str_eq(next.listen_host, "127.0.0.1");
    ck_assert_uint_eq(next.listen_port, 8080);
    ck_assert_str_eq(next.filters[0].table, "users");
    ck_assert_str_eq(next.base.table, "users");
    /* ... a sizing key takes effect with the rebuild it asks for ... */
    ck_assert_double_eq(next.filters[0].headroom, 3.0);
    ck_assert_uint_eq(rebuild, 1);
    /* ... the others keep the new ones. */
    ck_assert_uint_eq(next.max_batch, 7);
    ck_assert_uint_eq(next.deny_status, 404);
    ck_assert_int_eq(next.log_level, LOG_LVL_DEBUG);
    ck_assert_uint_eq(next.n_uri_templates, 1);
    /* Now nothing restart-only differs. */
    ch.n = 0;
    ck_assert(config_reload_diff(&next, &cur, note_change, &ch, &rebuild, err, sizeof err));
    ck_assert_int_eq(ch.n, 0);
    ck_assert_uint_eq(rebuild, 1);
    /* Keys that apply live alone ask for no rebuild. */
    config_free(&cur);
    ck_assert(config_copy(&cur, &next));
    ck_assert(config_set(&next, "auth", "deny_status", "410", err, sizeof err));
    ck_assert(config_set(&next, "server", "max_batch", "8", err, sizeof err));
    ck_assert(config_reload_diff(&next, &cur, NULL, NULL, &rebuild, err, sizeof err));
    ck_assert_uint_eq(rebuild, 0);
    ck_assert_uint_eq(next.deny_status, 410);
    ck_assert(config_reload_diff(&next, &cur, NULL, NULL, NULL, err, sizeof err));
    config_free(&next);
    config_free(&cur);
}
END_TEST

/* --- [filter NAME] sections (issue 13) --- */

START_TEST(test_filters_default)
{
    struct config c;
    char err[ERRLEN];

    ck_assert(config_defaults(&c));
    ck_assert_uint_eq(c.n_filters, 1);
    ck_assert_str_eq(c.filters[0].name, "default");
    ck_assert_str_eq(c.filters[0].table, "users");
    ck_assert_str_eq(c.filters[0].channel, "bloomguard");
    ck_assert(load(&c, "[postgres]\ntable = accounts\n[sync]\nchannel = bg\n"
                       "[auth]\nuri_template = /u/{id}\n", err));
    ck_assert_uint_eq(c.n_filters, 1);
    ck_assert_str_eq(c.filters[0].name, "default");
    ck_assert_str_eq(c.filters[0].table, "accounts");
    ck_assert_str_eq(c.filters[0].channel, "bg");      /* no _NAME suffix without sections */
    ck_assert_uint_eq(c.uri_template_filter[0], 0);
    ck_assert_ptr_null(c.uri_template_names[0]);
    ck_assert(config_override(&c, "filter.headroom=3", err, sizeof err));
    ck_assert_double_eq(c.filters[0].headroom, 3.0);
    config_free(&c);
}
END_TEST

START_TEST(test_filters_named)
{
    struct config c;
    char err[ERRLEN];

    ck_assert(config_defaults(&c));
    ck_assert_msg(load(&c,
        "[filter users]\n"
        "table = people\n"
        "column = id\n"
        "[filter orders]\n"
        "table = shop.orders\n"
        "column = order_id\n"
        "false_positive_rate = 0.001\n"
        "[filter tags]\n"
        "table = tags\n"
        "column = id\n"
        "channel = tagchan\n"
        "auto_grow = no\n"
        "[auth]\n"
        "uri_template = /user/get/{id}\n"
        "uri_template = /order/{id}   orders\n"
        "uri_template = /tag/{id} tags\n"
        "uri_template = /u2/{id} users\n"
        /* global keys after the sections still give every filter its defaults */
        "[postgres]\ntable = people\n"
        "[filter]\nfalse_positive_rate = 0.02\nheadroom = 4\n"
        "[sync]\nchannel = bgc\npending_ttl = 60\n", err), "%s", err);
    ck_assert_uint_eq(c.n_filters, 3);
    ck_assert_str_eq(c.filters[0].name, "users");
    ck_assert_str_eq(c.filters[1].name, "orders");
    ck_assert_str_eq(c.filters[2].name, "tags");
    /* users: its own table and column, the rest global */
    ck_assert_str_eq(c.filters[0].table, "people");
    ck_assert_str_eq(c.filters[0].column, "id");
    ck_assert_str_eq(c.filters[0].channel, "bgc_users");
    ck_assert_double_eq(c.filters[0].false_positive_rate, 0.02);
    ck_assert_double_eq(c.filters[0].headroom, 4.0);
    ck_assert_uint_eq(c.filters[0].pending_ttl, 60);
    ck_assert(c.filters[0].auto_grow);
    /* orders: its own table, column and rate; the rest global */
    ck_assert_str_eq(c.filters[1].table, "shop.orders");
    ck_assert_str_eq(c.filters[1].column, "order_id");
    ck_assert_double_eq(c.filters[1].false_positive_rate, 0.001);
    ck_assert_double_eq(c.filters[1].headroom, 4.0);
    ck_assert_str_eq(c.filters[1].channel, "bgc_orders");
    /* tags: its own channel is kept */
    ck_assert_str_eq(c.filters[2].channel, "tagchan");
    ck_assert(!c.filters[2].auto_grow);
    /* templates: no name -> the first (default) filter */
    ck_assert_uint_eq(c.n_uri_templates, 4);
    ck_assert_str_eq(c.uri_templates[1], "/order/{id}");
    ck_assert_uint_eq(c.uri_template_filter[0], 0);
    ck_assert_uint_eq(c.uri_template_filter[1], 1);
    ck_assert_uint_eq(c.uri_template_filter[2], 2);
    ck_assert_uint_eq(c.uri_template_filter[3], 0);
    ck_assert_int_eq(config_filter_find(&c, "tags"), 2);
    ck_assert_int_eq(config_filter_find(&c, "nope"), -1);

    /* Overrides: a global one reaches the filters that inherit it, not the others. */
    ck_assert_msg(config_override(&c, "filter.false_positive_rate=0.005", err, sizeof err), "%s", err);
    ck_assert_double_eq(c.filters[0].false_positive_rate, 0.005);
    ck_assert_double_eq(c.filters[1].false_positive_rate, 0.001);
    ck_assert_msg(config_override(&c, "sync.channel=zz", err, sizeof err), "%s", err);
    ck_assert_str_eq(c.filters[0].channel, "zz_users");
    ck_assert_str_eq(c.filters[2].channel, "tagchan");
    /* ... and one section's key by "filter NAME.key". */
    ck_assert_msg(config_override(&c, "filter orders.headroom=9", err, sizeof err), "%s", err);
    ck_assert_double_eq(c.filters[1].headroom, 9.0);
    ck_assert_double_eq(c.filters[0].headroom, 4.0);
    ck_assert(!config_override(&c, "filter nope.headroom=9", err, sizeof err));
    ck_assert_str_eq(err, "--filter nope.headroom=9: unknown section [filter nope]");
    ck_assert(!config_override(&c, "filter orders.listen=1.2.3.4:5", err, sizeof err));
    assert_contains(err, "unknown key [filter orders] listen");
    /* An override that puts two filters on one table fails and changes nothing. */
    ck_assert(!config_override(&c, "filter users.table=tags", err, sizeof err));
    assert_contains(err, "[filter tags] reads the same table and column as [filter users]");
    ck_assert_str_eq(c.filters[0].table, "people");
    ck_assert_msg(config_override(&c, "auth.uri_template=/x/{id} tags", err, sizeof err), "%s", err);
    ck_assert_uint_eq(c.uri_template_filter[4], 2);
    ck_assert(!config_override(&c, "auth.uri_template=/y/{id} ghost", err, sizeof err));
    assert_contains(err, "names the filter \"ghost\", but there is no [filter ghost]");
    ck_assert_uint_eq(c.n_uri_templates, 5);
    config_free(&c);
}
END_TEST

/* Each bad [filter NAME] file and the file:line it is reported at. */
START_TEST(test_filters_errors)
{
    static const struct load_error rows[] = {
        { "[filter Users]\n", "test.conf:1: \"Users\" is not a filter name ([a-z][a-z0-9_]{0,31})" },
        { "[filter 1a]\n", "test.conf:1: \"1a\" is not a filter name" },
        { "[filter a-b]\n", "test.conf:1: \"a-b\" is not a filter name" },
        { "[filter ]\n", "test.conf:1: \"\" is not a filter name" },
        { "[filter abcdefghijabcdefghijabcdefghijabc]\n",
          "test.conf:1: \"abcdefghijabcdefghijabcdefghijabc\" is not a filter name" },
        { "[filter a]\ntable = a\n\n[filter a]\n", "test.conf:4: [filter a] appears twice" },
        { "[filter a]\nlisten = 1.2.3.4:5\n",
          "test.conf:2: unknown key [filter a] listen (a [filter NAME] takes only per-filter keys" },
        { "[filter a]\nfoo = 1\n", "test.conf:2: unknown key [filter a] foo" },
        { "[filter a]\ntable = t\ntable = u\n", "test.conf:3: [filter a] table: set twice in this section" },
        { "[filter a]\nfalse_positive_rate = 0.0000001\n",
          "test.conf:2: [filter a] false_positive_rate: 0.0000001 is out of range" },
        /* a filter is its table: none inherits the global one (blamed on its header) */
        { "[filter a]\n[filter b]\n", "test.conf:1: [filter a] sets no table" },
        { "[postgres]\ntable = users\n[filter a]\ncolumn = id\n", "test.conf:3: [filter a] sets no table" },
        { "[filter a]\ntable = t\n", "test.conf:1: [filter a] sets no column" },
        { "[filter a]\ntable = t\ncolumn = id\n[filter b]\ntable = t\ncolumn = c\n[filter c]\ntable = t\ncolumn = c\n",
          "test.conf:7: [filter c] reads the same table and column as [filter b]" },
        { "[filter a]\ntable = a\ncolumn = id\nchannel = ch\n[filter b]\ntable = b\ncolumn = id\nchannel = ch\n",
          "test.conf:5: [filter b] listens on the same channel as [filter a] (ch)" },
        { "[filter a]\ntable = a\ncolumn = id\n[filter b]\ntable = b\ncolumn = id\nchannel = a_x\n"
          "[sync]\nchannel = a\n[filter x]\ntable = x\ncolumn = id\n",
          "listens on the same channel" },
        { "[auth]\nuri_template = /a/{id}\nuri_template = /b/{id} nope\n[filter a]\ntable = a\ncolumn = id\n",
          "test.conf:3: [auth] uri_template: /b/{id} names the filter \"nope\", but there is no [filter nope]" },
        { "[auth]\nuri_template = /b/{id} Bad\n", "test.conf:2: [auth] uri_template: \"Bad\" is not a filter name" },
        { "[auth]\nuri_template = /b/{id} a b\n", "test.conf:2: [auth] uri_template: \"a b\" is not a filter name" },
        { "[sync]\nchannel = cccccccccccccccccccccccccccccccccccccccccccccccccc\n[filter abcdef]\ntable = t\ncolumn = id\n",
          "test.conf:3: [filter abcdef] channel: the default cccccccccccccccccccccccccccccccccccccccccccccccccc_abcdef is too long: set channel" },
    };
    char err[ERRLEN], text[8192];
    size_t off = 0;
    struct config c;

    LOAD_ERRORS(rows);

    /* CONFIG_MAX_FILTERS fit, one more does not. */
    for (int i = 0; i <= CONFIG_MAX_FILTERS; i++)
        off += (size_t)snprintf(text + off, sizeof text - off, "[filter f%d]\ntable = t%d\ncolumn = id\n", i, i);
    ck_assert_uint_lt(off, sizeof text);
    ck_assert(config_defaults(&c));
    ck_assert(!load(&c, text, err));
    assert_contains(err, "test.conf:193: too many [filter NAME] sections (at most 64)");
    config_free(&c);
    text[0] = '\0';
    off = 0;
    for (int i = 0; i < CONFIG_MAX_FILTERS; i++)
        off += (size_t)snprintf(text + off, sizeof text - off, "[filter f%d]\ntable = t%d\ncolumn = id\n", i, i);
    ck_assert(config_defaults(&c));
    ck_assert_msg(load(&c, text, err), "%s", err);
    ck_assert_uint_eq(c.n_filters, CONFIG_MAX_FILTERS);
    ck_assert_str_eq(c.filters[63].channel, "bloomguard_f63");
    config_free(&c);
}
END_TEST

START_TEST(test_filters_copy_and_reload)
{
    struct config cur, next, cp;
    struct changes ch = { "", 0 };
    char err[ERRLEN];
    static const char base[] = "[filter users]\ntable = users\ncolumn = id\n"
                               "[filter orders]\ntable = orders\ncolumn = id\n"
                               "[auth]\nuri_template = /o/{id} orders\n";

    ck_assert(config_defaults(&cur));
    ck_assert(load(&cur, base, err));
    ck_assert(config_copy(&cp, &cur));
    ck_assert_uint_eq(cp.n_filters, 2);
    ck_assert_ptr_ne(cp.filters[1].table, cur.filters[1].table);
    ck_assert_str_eq(cp.filters[1].table, "orders");
    ck_assert_str_eq(cp.uri_template_names[0], "orders");
    config_free(&cp);

    /* A filter key changed: reported by section, kept as in force. */
    ck_assert(config_defaults(&next));
    ck_assert(load(&next, "[filter users]\ntable = users\ncolumn = id\n"
                          "[filter orders]\ntable = orders2\ncolumn = id\n"
                          "[auth]\nuri_template = /o/{id} orders\ndeny_status = 404\n", err));
    ck_assert(config_reload_diff(&next, &cur, note_change, &ch, NULL, err, sizeof err));
    ck_assert_str_eq(ch.text, "[filter orders] table;");
    ck_assert_str_eq(next.filters[1].table, "orders");
    ck_assert_uint_eq(next.deny_status, 404);
    ck_assert_uint_eq(next.uri_template_filter[0], 1);
    config_free(&next);

    /* A sizing key of one filter: that filter alone is rebuilt, with the new value. */
    uint64_t rebuild = 0;
    ch.text[0] = '\0';
    ck_assert(config_defaults(&next));
    ck_assert(load(&next, "[filter users]\ntable = users\ncolumn = id\n"
                          "[filter orders]\ntable = orders\ncolumn = id\nfalse_positive_rate = 0.001\n"
                          "[auth]\nuri_template = /o/{id} orders\n", err));
    ck_assert(config_reload_diff(&next, &cur, note_all, &ch, &rebuild, err, sizeof err));
    ck_assert_str_eq(ch.text, "[filter orders] false_positive_rate: 0.01 -> 0.001;");
    ck_assert_uint_eq(rebuild, 2);
    ck_assert_double_eq(next.filters[1].false_positive_rate, 0.001);
    ck_assert_double_eq(next.filters[0].false_positive_rate, 0.01);
    config_free(&next);

    /* The global value reaches every filter that does not set its own: both rebuild. */
    ck_assert(config_defaults(&next));
    ck_assert(load(&next, "[filter]\nexpected_items = 5000\n"
                          "[filter users]\ntable = users\ncolumn = id\n"
                          "[filter orders]\ntable = orders\ncolumn = id\n"
                          "[auth]\nuri_template = /o/{id} orders\n", err));
    ck_assert(config_reload_diff(&next, &cur, NULL, NULL, &rebuild, err, sizeof err));
    ck_assert_uint_eq(rebuild, 3);
    config_free(&next);

    /* A new section: sections need a restart; a template naming it cannot be kept. */
    ch.text[0] = '\0';
    ck_assert(config_defaults(&next));
    ck_assert(load(&next, "[filter users]\ntable = users\ncolumn = id\n[filter orders]\ntable = orders\ncolumn = id\n"
                          "[filter tags]\ntable = tags\ncolumn = id\n"
                          "[auth]\nuri_template = /o/{id} orders\nuri_template = /t/{id} tags\n", err));
    ck_assert(!config_reload_diff(&next, &cur, note_change, &ch, NULL, err, sizeof err));
    ck_assert_str_eq(ch.text, "[filter NAME] sections;");
    assert_contains(err, "no [filter tags]");
    config_free(&next);

    /* Without the template it reloads, with the filters in force. */
    ck_assert(config_defaults(&next));
    ck_assert(load(&next, "[filter users]\ntable = users\ncolumn = id\n[filter orders]\ntable = orders\ncolumn = id\n"
                          "[filter tags]\ntable = tags\ncolumn = id\n"
                          "[auth]\nuri_template = /o/{id} orders\n", err));
    ck_assert(config_reload_diff(&next, &cur, NULL, NULL, NULL, err, sizeof err));
    ck_assert_uint_eq(next.n_filters, 2);
    ck_assert_uint_eq(next.uri_template_filter[0], 1);
    config_free(&next);
    config_free(&cur);
}
END_TEST

START_TEST(test_error_names_file_line_key)
{
    struct config c;
    char err[ERRLEN], want[ERRLEN + 4200];
    const char *path;

    ck_assert(config_defaults(&c));
    path = write_file("bloomguard.conf", "; comment\n[server]\nthreads = 4\n\n"
                      "max_batch = abc\nmax_connections = 0\n");
    ck_assert(!config_load_file(&c, path, err, sizeof err));
    snprintf(want, sizeof want, "%s:5: [server] max_batch: \"abc\" is not a number", path);
    ck_assert_str_eq(err, want);
    ck_assert_uint_eq(c.threads, 4);            /* lines before the error applied */
    ck_assert_uint_eq(c.max_connections, 10000); /* stopped at the first error */
    config_free(&c);

    ck_assert(config_defaults(&c));
    snprintf(want, sizeof want, "%s/nonexistent.conf", tmpdir);
    ck_assert(!config_load_file(&c, want, err, sizeof err));
    assert_contains(err, "cannot open ");
    assert_contains(err, "nonexistent.conf: No such file or directory");

    /* Truncation and a NULL buffer are both safe. */
    ck_assert(!config_load_file(&c, path, err, 8));
    ck_assert_uint_eq(strlen(err), 7);
    ck_assert(!config_load_file(&c, path, NULL, 0));
    config_free(&c);
}
END_TEST

START_TEST(test_syntax_errors)
{
    static const struct load_error rows[] = {
        { "[server]\nfoo = 1\n", "test.conf:2: unknown key [server] foo" },
        { "[server]\nthreads = 1\n[nosuch]\n", "test.conf:3: unknown section [nosuch]" },
        { "[nosuch]\nthreads = 1\n", "test.conf:1: unknown section [nosuch]" },
        { "[ server ]\n", "test.conf:1: unknown section [ server ]" },
        { "threads = 1\n", "test.conf:1: key threads appears before any [section]" },
        { "[server\n", "test.conf:1: missing ']' in section header" },
        { "[server] x\n", "test.conf:1: unexpected text after [server]" },
        { "[server]\n\nthreads\n", "test.conf:3: expected \"key = value\", \"[section]\" or a comment" },
        { "[server]\nthreads = 1\nthreads = 2\n", "test.conf:3: [server] threads: set twice (first on line 2)" },
        { "[sync]\nenabled = yes\n[metrics]\nenabled = maybe\n",
          "test.conf:4: [metrics] enabled: \"maybe\" is not a boolean" },
        { "[postgres]\nconninfo = \"a ;b\"\n", "test.conf:2: [postgres] conninfo: unterminated quote" },
        { "[postgres]\nconninfo = \"a\" b\n", "test.conf:2: [postgres] conninfo: unexpected text after the closing quote" },
        { "[server]\nthreads = 1 2\n", "test.conf:2: [server] threads: \"1 2\" is not a number" },
    };

    LOAD_ERRORS(rows);
}
END_TEST

START_TEST(test_file_syntax)
{
    struct config c;
    char err[ERRLEN], text[1024];

    ck_assert(config_defaults(&c));
    ck_assert_msg(load(&c,
                       "\xEF\xBB\xBF# leading BOM and comments\r\n"
                       "; semicolon comment\r\n"
                       "[server] ; trailing comment\r\n"
                       "  threads = 3   # indented, hash comment\r\n"
                       "\tmax_batch=77;no space: part of the value? no, a number error\r\n",
                       err) == false, "bad max_batch accepted");
    assert_contains(err, "test.conf:5: [server] max_batch: \"77;no space");
    ck_assert_uint_eq(c.threads, 3);
    config_free(&c);

    ck_assert(config_defaults(&c));
    ck_assert_msg(load(&c,
                       "[server]\n"
                       "max_batch = 77 ; semicolon comment\n"
                       "listen: [::1]:0\n"
                       "[postgres]\n"
                       "conninfo = \"host=db #not a comment\"  # a comment\n"
                       "table = users#1\n"
                       "[sync]\n"
                       "channel = \"bg\"\n"
                       "[server]\n"
                       "max_id_bytes = 9 #\n",
                       err), "%s", err);
    ck_assert_uint_eq(c.max_batch, 77);
    ck_assert_str_eq(c.listen_host, "::1");
    ck_assert_uint_eq(c.listen_port, 0);
    ck_assert_str_eq(c.conninfo, "host=db #not a comment");
    ck_assert_str_eq(c.filters[0].table, "users#1");
    ck_assert_str_eq(c.filters[0].channel, "bg");
    ck_assert_uint_eq(c.max_id_bytes, 9);
    config_free(&c);

    /* column = (empty) is read as the empty string, which column rejects. */
    ck_assert(config_defaults(&c));
    ck_assert(!load(&c, "[postgres]\ncolumn =\n", err));
    assert_contains(err, "test.conf:2: [postgres] column: column name must be 1..63 bytes");
    ck_assert(load(&c, "[postgres]\nconninfo =\n", err));
    ck_assert_str_eq(c.conninfo, "");
    config_free(&c);

    /* An over-long comment is fine; an over-long setting is an error. */
    memset(text, 0, sizeof text);
    strcpy(text, "#");
    memset(text + 1, 'x', 400);
    strcat(text, "\n[postgres]\nconninfo = ");
    memset(text + strlen(text), 'y', 300);
    strcat(text, "\n");
    ck_assert(config_defaults(&c));
    ck_assert(!load(&c, text, err));
    assert_contains(err, "test.conf:3: line too long");
    config_free(&c);

    ck_assert(config_defaults(&c));
    ck_assert_msg(config_load_string(&c, "inline", "[log]\nlevel = debug", err, sizeof err),
                  "%s", err);
    ck_assert_int_eq(c.log_level, LOG_LVL_DEBUG);
    ck_assert(!config_load_string(&c, "inline", "\n[log]\nlevel = loud\n", err, sizeof err));
    ck_assert_str_eq(err, "inline:3: [log] level: \"loud\" is not one of error, warn, info, debug");
    ck_assert(config_load_string(&c, "empty", "", err, sizeof err));
    config_free(&c);
}
END_TEST

START_TEST(test_overrides)
{
    static const char *const bad_form[] = {
        "server", "server.listen", ".listen=1", "server.=1", "=1", "serverlisten=1", "",
    };
    static const struct set_case rows[] = {
        { OVERRIDE("server.listen=127.0.0.1:0"), LISTEN, .s = "127.0.0.1", .u = 0 },
        { OVERRIDE("postgres.conninfo=host=db dbname=x"), FIELD(conninfo, F_STR),
          .s = "host=db dbname=x" },
        { OVERRIDE("postgres.conninfo="), FIELD(conninfo, F_STR), .s = "" },
        { OVERRIDE("postgres.table=app.users"), FIELD(filters[0].table, F_STR), .s = "app.users" },
        { OVERRIDE("log.level=debug"), FIELD(log_level, F_ENUM), .u = LOG_LVL_DEBUG },
        { OVERRIDE("auth.uri_template=/u/{id}"), FIELD(n_uri_templates, F_UINT), .u = 1 },
        /* In an override '#' is just a character. */
        { OVERRIDE("postgres.conninfo=password=a #b"), FIELD(conninfo, F_STR),
          .s = "password=a #b" },
        { OVERRIDE("server.foo=1"), NO_FIELD, .err = "--server.foo=1: unknown key [server] foo" },
        { OVERRIDE("nosuch.foo=1"), NO_FIELD, .err = "--nosuch.foo=1: unknown section [nosuch]" },
        { OVERRIDE("server.max_batch=abc"), FIELD(max_batch, F_UINT),
          .err = "--server.max_batch=abc: [server] max_batch: \"abc\" is not a number" },
        { OVERRIDE("server.listen=127.0.0.1:65536"), LISTEN,
          .part = "--server.listen=127.0.0.1:65536: [server] listen: " },
    };
    struct config c;
    char err[ERRLEN];

    ck_assert(config_defaults(&c));
    WALK(&c, rows);
    ck_assert_uint_eq(c.listen_port, 0);
    for (size_t i = 0; i < sizeof bad_form / sizeof bad_form[0]; i++) {
        char want[ERRLEN];
        ck_assert_msg(!config_override(&c, bad_form[i], err, sizeof err), "accepted %s",
                      bad_form[i]);
        snprintf(want, sizeof want, "--%s: expected --section.key=value", bad_form[i]);
        ck_assert_str_eq(err, want);
    }

    /* An override replaces what the file set. */
    ck_assert(load(&c, "[server]\nthreads = 5\n", err));
    ck_assert(config_override(&c, "server.threads=6", err, sizeof err));
    ck_assert_uint_eq(c.threads, 6);
    config_free(&c);
}
END_TEST

START_TEST(test_set_unknown)
{
    static const struct set_case rows[] = {
        { "server", "foo", "1", NO_FIELD, .err = "unknown key [server] foo" },
        { "foo", "threads", "1", NO_FIELD, .err = "unknown section [foo]" },
        { "SERVER", "threads", "1", NO_FIELD, REFUSED },
    };
    struct config c;

    ck_assert(config_defaults(&c));
    WALK(&c, rows);
    ck_assert(!config_set(&c, "server", "threads", "x", NULL, 0));
    config_free(&c);
}
END_TEST

/* Failed loads leave a struct that config_free cleans up (run under valgrind). */
START_TEST(test_free_after_errors)
{
    struct config c;
    char err[ERRLEN];

    ck_assert(config_defaults(&c));
    ck_assert(!load(&c, "[server]\nlisten = [::1]:1\n[postgres]\nconninfo = x\n"
                        "table = t\n[auth]\nuri_template = /a/{id}\nuri_template = /b\n", err));
    ck_assert_str_eq(c.conninfo, "x");
    ck_assert_uint_eq(c.n_uri_templates, 1);
    ck_assert(!config_override(&c, "sync.channel=1x", err, sizeof err));
    ck_assert(!config_override(&c, "server.listen=[::1]:x", err, sizeof err));
    config_free(&c);
    ck_assert_ptr_null(c.conninfo);
    ck_assert_ptr_null(c.uri_templates[0]);
}
END_TEST


/* --- durations with units (issue 25) --- */

START_TEST(test_durations)
{
    /* want < 0: refused, and err contains part ("" any). */
    static const struct {
        const char *in;
        double want;
        const char *part;
    } parses[] = {
        { "250ms", 0.25, NULL },
        { "5min", 300, NULL },
        { "2h", 7200, NULL },
        { "1d", 86400, NULL },
        { "30 s", 30, NULL },
        { "1e3ms", 1, NULL },
        { "45", 45, NULL },         /* bare: seconds */
        { "5 minutes", -1, "\"5 minutes\" is not a duration" },
        { "-5s", -1, "" },
        { "s", -1, "" },
        { "", -1, "" },
        { "5e", -1, "" },
        { "inf", -1, "" },
    };
    /* Errors name file:line, the key and the bad value, as for any key. */
    static const struct load_error load_errors[] = {
        { "[server]\n\nheader_timeout = 5 parsecs\n",
          "test.conf:3: [server] header_timeout: \"5 parsecs\" is not a duration" },
        { "[server]\nheader_timeout = 2h\n",
          "test.conf:2: [server] header_timeout: 2h is out of range (0..3600 seconds)" },
        { "[server]\nconnection_timeout = 1500ms\n",
          "[server] connection_timeout: 1500ms is not a whole number of seconds" },
        { "[sync]\nprobe_interval = 5ms\n",
          "[sync] probe_interval: 5ms is out of range (must be >= 0.01 and <= 60)" },
    };
    struct config c;
    char err[ERRLEN];

    for (size_t i = 0; i < sizeof parses / sizeof parses[0]; i++) {
        double d = -1;
        bool ok = config_parse_duration(parses[i].in, &d, err, sizeof err);
        ck_assert_msg(ok == (parses[i].want >= 0), "\"%s\": %s", parses[i].in, ok ? "accepted" : err);
        if (ok)
            ck_assert_msg(d > parses[i].want - 1e-9 && d < parses[i].want + 1e-9, "\"%s\": %.17g, want %.17g",
                          parses[i].in, d, parses[i].want);
        else
            ck_assert_msg(strstr(err, parses[i].part) != NULL, "\"%s\": \"%s\" lacks \"%s\"",
                          parses[i].in, err, parses[i].part);
    }

    ck_assert(config_defaults(&c));
    /* Whole-second keys and fractional ones, plain numbers keep meaning seconds. */
    ck_assert_msg(load(&c, "[server]\nconnection_timeout = 2min\nheader_timeout = 10\n"
                           "[sync]\nmax_staleness = 500ms\nprobe_interval = 0.5\n"
                           "rebuild_interval = 1h\n[feed]\nretention = 1d\n", err), "%s", err);
    ck_assert_uint_eq(c.connection_timeout, 120);
    ck_assert_uint_eq(c.header_timeout, 10);
    ck_assert_double_eq_tol(c.max_staleness, 0.5, 1e-12);
    ck_assert_double_eq_tol(c.probe_interval, 0.5, 1e-12);
    ck_assert_uint_eq(c.filters[0].rebuild_interval, 3600);
    ck_assert_uint_eq(c.feed_retention, 86400);
    config_free(&c);

    LOAD_ERRORS(load_errors);
    ck_assert(config_defaults(&c));
    ck_assert(config_override(&c, "sync.min_rebuild_interval=1min", err, sizeof err));
    ck_assert_uint_eq(c.min_rebuild_interval, 60);
    config_free(&c);

    /* -h says which keys take units, and non-durations do not. */
    {
        int secs = config_key_find("server", "header_timeout");
        int batch = config_key_find("server", "max_batch");
        char buf[256];
        ck_assert(secs >= 0 && batch >= 0);
        ck_assert(config_key_duration((size_t)secs));
        ck_assert(!config_key_duration((size_t)batch));
        config_key_values((size_t)secs, buf, sizeof buf);
        assert_contains(buf, "with a unit");
        ck_assert(config_defaults(&c));
        ck_assert(!config_set(&c, "server", "max_batch", "5s", err, sizeof err));
        ck_assert_str_eq(err, "[server] max_batch: \"5s\" is not a number");
        config_free(&c);
    }
}
END_TEST

/* --- what a reload reports, keeps and applies (issue 27, 25) --- */

START_TEST(test_reload_diff_reports_values)
{
    struct config cur, next;
    struct changes ch = { "", 0 };
    char err[ERRLEN];
    uint64_t rebuild = 99;

    ck_assert(config_defaults(&cur));
    ck_assert(config_defaults(&next));
    ck_assert(load(&next, "[server]\nlisten = 127.0.0.1:9999\nmax_batch = 7\n"
                          "[postgres]\nconninfo = password=sekrit\n"
                          "[auth]\nuri_template = /n/{id}\n"
                          "[sync]\nmax_staleness = 1500ms\n"
                          "[log]\nlevel = debug\n", err));
    ck_assert(config_reload_diff(&next, &cur, note_all, &ch, &rebuild, err, sizeof err));
    ck_assert_str_eq(ch.text,
                     "[server] listen: 127.0.0.1:8080 -> 127.0.0.1:9999 (restart);"
                     "[server] max_batch: 10000 -> 7;"
                     "[postgres] conninfo: (changed) -> (changed) (restart);"
                     "[sync] max_staleness: 2s -> 1.5s (restart);"
                     "[auth] uri_template: 0 templates -> 1 template;"
                     "[log] level: info -> debug;");
    ck_assert(strstr(ch.text, "sekrit") == NULL);
    ck_assert_uint_eq(rebuild, 0);               /* none of these sizes a filter */
    /* Restart keys kept their old values, the secret one too. */
    ck_assert_str_eq(next.conninfo, "");
    ck_assert_double_eq(next.max_staleness, 2);
    /* A second diff of the same pair finds only what stays changed: the reloadable keys. */
    ch.text[0] = '\0';
    ch.n = 0;
    ck_assert(config_reload_diff(&next, &cur, note_change, &ch, NULL, err, sizeof err));
    ck_assert_int_eq(ch.n, 0);
    config_free(&next);
    config_free(&cur);
}
END_TEST

START_TEST(test_reload_apply_hooks)
{
    struct config prev, now;
    struct log lg;
    char err[ERRLEN];

    log_init(&lg, LOG_LVL_INFO);
    ck_assert(config_defaults(&prev));
    ck_assert(config_defaults(&now));
    /* Unchanged: the hook does not run (the level set by hand stays). */
    log_set_level(&lg, LOG_LVL_ERROR);
    config_apply_reload(&now, &prev, &(struct config_reload_ctx){ .log = &lg });
    ck_assert_int_eq(lg.level, LOG_LVL_ERROR);
    /* Changed: [log] level's hook sets it. */
    ck_assert(config_set(&now, "log", "level", "debug", err, sizeof err));
    config_apply_reload(&now, &prev, &(struct config_reload_ctx){ .log = &lg });
    ck_assert_int_eq(lg.level, LOG_LVL_DEBUG);
    config_free(&now);
    config_free(&prev);
}
END_TEST

/* Every owned value is the type's: copies share no pointer, free leaves nothing (per-filter strings too). */
START_TEST(test_types_own_filter_strings)
{
    struct config a, b;

    load_and_copy(&a, &b, "[filter one]\ntable = t1\ncolumn = c1\nchannel = ch1\n"
                          "[filter two]\ntable = t2\ncolumn = c2\n");
    ck_assert_str_eq(b.filters[1].channel, "bloomguard_two");
    config_free(&a);
    ck_assert_ptr_null(a.filters[0].table);
    ck_assert_ptr_null(a.base.channel);
    ck_assert_ptr_null(a.listen_host);
    config_free(&b);
}
END_TEST

CHECK_SUITE("config",
    CHECK_CASE("core", .unchecked_setup = setup, .unchecked_teardown = teardown),
    CHECK_TEST(test_defaults),
    CHECK_TEST(test_free_zeroed_and_null),
    CHECK_TEST(test_key_table),
    CHECK_TEST(test_sample_conf_gives_defaults),
    CHECK_TEST(test_sample_conf_lists_every_key),
    CHECK_TEST(test_uint_values),
    CHECK_TEST(test_uint64_values),
    CHECK_TEST(test_double_values),
    CHECK_TEST(test_bool_values),
    CHECK_TEST(test_listen_values),
    CHECK_TEST(test_listen_unix_values),
    CHECK_TEST(test_enum_values),
    CHECK_TEST(test_string_values),
    CHECK_TEST(test_templates),
    CHECK_TEST(test_owner_rules),
    CHECK_TEST(test_key_values_and_reload_flags),
    CHECK_TEST(test_copy),
    CHECK_TEST(test_keep_restart_keys),
    CHECK_TEST(test_filters_default),
    CHECK_TEST(test_filters_named),
    CHECK_TEST(test_filters_errors),
    CHECK_TEST(test_filters_copy_and_reload),
    CHECK_TEST(test_error_names_file_line_key),
    CHECK_TEST(test_syntax_errors),
    CHECK_TEST(test_file_syntax),
    CHECK_TEST(test_overrides),
    CHECK_TEST(test_set_unknown),
    CHECK_TEST(test_free_after_errors),
    CHECK_TEST(test_durations),
    CHECK_TEST(test_reload_diff_reports_values),
    CHECK_TEST(test_reload_apply_hooks),
    CHECK_TEST(test_types_own_filter_strings),
)
