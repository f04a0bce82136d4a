/*
 * Reading configuration files: libinih does the INI parse, this file feeds
 * it one checked line at a time (so errors carry file:line and say what is
 * wrong) and hands each name and value to config.c; nothing in the
 * configuration module calls back into it.
 */
#include "config.h"
#include "config_build.h"
#include "config_int.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A config file bigger than this is surely a mistake (wrong path). */
#define CONFIG_MAX_FILE_BYTES (1024 * 1024)
#define ERR_VALUE_MAX CONFIG_ERR_VALUE_MAX
#define errf config_errf

struct parse_state {
    struct config *c;
    const char *name;           /* file name for messages */
    const char *pos, *end;      /* unread input */
    int lineno;                 /* line last handed to libinih */
    bool failed;
    int err_line;
    char msg[256];
    int *seen;                  /* per key: line it was set on, 0 = not yet */
    int cur_filter;             /* index of the [filter NAME] being read, -1: another section */
    int filter_line[CONFIG_MAX_FILTERS];        /* line of each [filter NAME] header */
    int template_line[CONFIG_MAX_TEMPLATES];    /* line of each uri_template */
};

static void parse_fail(struct parse_state *st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void parse_fail(struct parse_state *st, const char *fmt, ...)
{
    va_list ap;

    st->failed = true;
    st->err_line = st->lineno;
    va_start(ap, fmt);
    vsnprintf(st->msg, sizeof st->msg, fmt, ap);
    va_end(ap);
}

/* Like libinih's search: ';' starts a comment only after whitespace. */
static const char *find_unless_comment(const char *s, const char *chars)
{
    for (const char *p = s; *p != '\0'; p++) {
        if (*p == ';' && p > s && isspace((unsigned char)p[-1]))
            return NULL;
        if (strchr(chars, *p) != NULL)
            return p;
    }
    return NULL;
}

/*
 * Structural checks libinih would only report as a bare line number, done
 * here so the message can say what is wrong; libinih still does the parse.
 */
static bool check_line(struct parse_state *st, const char *line)
{
    if (*line == '\0' || *line == ';' || *line == '#')
        return true;
    if (*line == '[') {
        const char *close = find_unless_comment(line + 1, "]");
        const char *rest;
        char section[64];
        size_t len;

        if (close == NULL) {
            parse_fail(st, "missing ']' in section header");
            return false;
        }
        len = (size_t)(close - line - 1);
        if (len >= sizeof section) {
            parse_fail(st, "unknown section [%.*s]", ERR_VALUE_MAX, line + 1);
            return false;
        }
        memcpy(section, line + 1, len);
        section[len] = '\0';
        st->cur_filter = -1;
        if (strncmp(section, "filter ", 7) == 0) {
            /* Made here, not on its first key: a section without keys is a filter too. */
            const char *name = section + 7;
            char msg[200];
            int f;
            while (*name == ' ')
                name++;
            if ((f = config_filter_add(st->c, name, msg, sizeof msg)) < 0) {
                parse_fail(st, "%s", msg);
                return false;
            }
            st->cur_filter = f;
            st->filter_line[f] = st->lineno;
        } else if (!config_section_known(section)) {
            parse_fail(st, "unknown section [%s]", section);
            return false;
        }
        for (rest = close + 1; isspace((unsigned char)*rest); rest++)
            ;
        if (*rest != '\0' && *rest != ';' && *rest != '#') {
            parse_fail(st, "unexpected text after [%s]", section);
            return false;
        }
        return true;
    }
    if (find_unless_comment(line, "=:") == NULL) {
        parse_fail(st, "expected \"key = value\", \"[section]\" or a comment");
        return false;
    }
    return true;
}

/*
 * libinih's fgets-like input.  Handing it one whole line at a time keeps
 * st->lineno in step with the line being parsed, and stopping here is the
 * only way to end a parse early.  Leading whitespace is dropped because
 * libinih would take an indented line as a continuation of the previous
 * value, which is never what an indented "key = value" means.
 */
static char *read_line(char *buf, int num, void *stream)
{
    struct parse_state *st = stream;
    const char *line, *nl;
    size_t len;

    if (st->failed || st->pos >= st->end)
        return NULL;
    line = st->pos;
    nl = memchr(line, '\n', (size_t)(st->end - line));
    len = nl != NULL ? (size_t)(nl - line) : (size_t)(st->end - line);
    st->pos = line + len + (nl != NULL);
    st->lineno++;

    if (st->lineno == 1 && len >= 3 && memcmp(line, "\xEF\xBB\xBF", 3) == 0) {
        line += 3;
        len -= 3;
    }
    while (len > 0 && isspace((unsigned char)*line)) {
        line++;
        len--;
    }
    if (memchr(line, '\0', len) != NULL) {
        parse_fail(st, "NUL byte in line");
        return NULL;
    }
    /* Room for the line, '\n' and '\0'; libinih would split a longer one. */
    if (num >= 2 && len > (size_t)num - 2 && (*line == '#' || *line == ';'))
        len = 1;                /* a comment's text does not matter */
    if (num < 2 || len > (size_t)num - 2) {
        parse_fail(st, "line too long (at most %d bytes)", num - 2);
        return NULL;
    }
    memcpy(buf, line, len);
    buf[len] = '\0';
    if (!check_line(st, buf))
        return NULL;
    buf[len] = '\n';
    buf[len + 1] = '\0';
    return buf;
}

static int on_key(void *user, const char *section, const char *name, const char *value)
{
    struct parse_state *st = user;
    char msg[256];
    char *v = NULL;
    int i;

    if (st->failed)
        return 0;
    if (name == NULL)
        return 1;               /* new-section callback, if libinih was built with it */
    if (value == NULL) {
        parse_fail(st, "%s has no value", name);
        return 0;
    }
    if (section[0] == '\0') {
        parse_fail(st, "key %s appears before any [section]", name);
        return 0;
    }
    if (st->cur_filter >= 0) {
        unsigned f = (unsigned)st->cur_filter;
        i = config_filter_key_find(name);
        if (i < 0) {
            parse_fail(st, "unknown key [%s] %s (a [filter NAME] takes only per-filter keys: "
                       "bloomguard -h lists them)", section, name);
            return 0;
        }
        if ((st->c->filter_set[f][i / 64] >> (i % 64) & 1) != 0) {
            parse_fail(st, "[%s] %s: set twice in this section", section, name);
            return 0;
        }
        v = config_value_normalize(value, true, msg, sizeof msg);
        if (v == NULL || !config_key_apply_filter(st->c, f, (size_t)i, v, msg, sizeof msg)) {
            parse_fail(st, "[%s] %s: %s", section, name, msg);
            free(v);
            return 0;
        }
        free(v);
        return 1;
    }
    i = config_key_find(section, name);
    if (i < 0) {
        parse_fail(st, "unknown key [%s] %s", section, name);
        return 0;
    }
    if (st->seen[i] != 0 && !config_key_repeatable((size_t)i)) {
        parse_fail(st, "[%s] %s: set twice (first on line %d)", section, name, st->seen[i]);
        return 0;
    }
    st->seen[i] = st->lineno;
    v = config_value_normalize(value, true, msg, sizeof msg);
    if (v == NULL || !config_key_apply(st->c, (size_t)i, v, msg, sizeof msg)) {
        parse_fail(st, "[%s] %s: %s", section, name, msg);
        free(v);
        return 0;
    }
    free(v);
    if (config_key_repeatable((size_t)i) && st->c->n_uri_templates > 0)
        st->template_line[st->c->n_uri_templates - 1] = st->lineno;
    return 1;
}

static bool parse_buffer(struct config *c, const char *name, const char *text, size_t len,
                         char *err, size_t errlen)
{
    struct parse_state *st = calloc(1, sizeof *st);
    int r;
    bool ok = false;

    if (st == NULL || (st->seen = calloc(config_key_count(), sizeof *st->seen)) == NULL) {
        errf(err, errlen, "%s: out of memory", name);
        free(st);
        return false;
    }
    st->c = c;
    st->cur_filter = -1;
    st->name = name;
    st->pos = text;
    st->end = text + len;
    r = ini_parse_stream(read_line, st, on_key, st);
    if (r == 0 && !st->failed) {
        /* Filters take the global keys from anywhere in the file: resolve once it is all read. */
        int bf, bt;
        if (!config_resolve(c, &bf, &bt, st->msg, sizeof st->msg)) {
            st->failed = true;
            st->err_line = bf >= 0 ? st->filter_line[bf]
                         : bt >= 0 && bt < CONFIG_MAX_TEMPLATES ? st->template_line[bt] : 0;
        }
    }
    if (st->failed && st->err_line == 0)
        errf(err, errlen, "%s: %s", name, st->msg);
    else if (st->failed)
        errf(err, errlen, "%s:%d: %s", name, st->err_line, st->msg);
    else if (r > 0)             /* a syntax error read_line did not foresee */
        errf(err, errlen, "%s:%d: syntax error", name, r);
    else if (r < 0)
        errf(err, errlen, "%s: out of memory", name);
    else
        ok = true;
    free(st->seen);
    free(st);
    return ok;
}

bool config_load_string(struct config *c, const char *name, const char *text,
                        char *err, size_t errlen)
{
    return parse_buffer(c, name, text, strlen(text), err, errlen);
}

bool config_load_file(struct config *c, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    char *text = NULL;
    size_t len = 0, got;
    bool ok = false;

    if (f == NULL) {
        errf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return false;
    }
    /* One byte more than the limit tells "too large" from "exactly the limit". */
    text = malloc(CONFIG_MAX_FILE_BYTES + 1);
    if (text == NULL) {
        errf(err, errlen, "%s: out of memory", path);
        goto fail;
    }
    while ((got = fread(text + len, 1, CONFIG_MAX_FILE_BYTES + 1 - len, f)) > 0)
        len += got;
    if (ferror(f)) {
        errf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        goto fail;
    }
    if (len > CONFIG_MAX_FILE_BYTES) {
        errf(err, errlen, "%s: larger than %d bytes, not a config file?", path,
             CONFIG_MAX_FILE_BYTES);
        goto fail;
    }
    ok = parse_buffer(c, path, text, len, err, errlen);
fail:
    free(text);
    fclose(f);
    return ok;
}

