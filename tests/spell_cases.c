/*
 * Reads tests/spell_cases.txt (see spell_cases.h), so that the unit test and
 * the server oracle check one list of hand-picked spellings.
 */
#define _POSIX_C_SOURCE 200809L
#include "spell_cases.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *spell_cases_path(void)
{
    static char path[4096];
    const char *top = getenv("top_srcdir");
    snprintf(path, sizeof path, "%s/tests/spell_cases.txt", top != NULL && *top ? top : ".");
    return path;
}

static int hex(char c)
{
    return c >= '0' && c <= '9' ? c - '0'
         : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* The field s unescaped into a new string; NULL (why set) on a bad escape. */
static char *unescape(const char *s, const char **why)
{
    char *out = malloc(strlen(s) + 1), *o = out;
    if (out == NULL) {
        *why = "out of memory";
        return NULL;
    }
    for (; *s; s++) {
        if (*s != '\\') {
            *o++ = *s;
            continue;
        }
        const char *from = "\\tnvfr", *to = "\\\t\n\v\f\r";
        const char *at = s[1] ? strchr(from, s[1]) : NULL;
        if (at != NULL) {
            *o++ = to[at - from];
            s++;
        } else if (s[1] == 'x' && hex(s[2]) >= 0 && hex(s[3]) >= 0
                   && hex(s[2]) * 16 + hex(s[3]) != 0) {
            *o++ = (char)(hex(s[2]) * 16 + hex(s[3]));
            s += 3;
        } else {
            *why = "a backslash that is none of \\\\ \\t \\n \\v \\f \\r \\xHH (HH not 00)";
            free(out);
            return NULL;
        }
    }
    *o = '\0';
    return out;
}

static void say(char *err, size_t errlen, const char *path, unsigned line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void say(char *err, size_t errlen, const char *path, unsigned line, const char *fmt, ...)
{
    int n = snprintf(err, errlen, "%s:%u: ", path, line);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < errlen)
        vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
    va_end(ap);
}

/* One line's fields (tab-separated, up to a "#" field) into c; false (why set) if they break the format. */
static bool parse_line(char *text, struct spell_case *c, const char **why)
{
    char *field[5];
    int nf = 0;
    for (char *f = text; f != NULL && nf < 5 && *f != '#';) {
        char *tab = strchr(f, '\t');
        if (tab != NULL)
            *tab = '\0';
        field[nf++] = f;
        f = tab != NULL ? tab + 1 : NULL;
    }
    if (nf < 2 || nf > 4) {
        *why = "not TYPE, VERDICT and at most an input and a key";
        return false;
    }
    int t = 0, v = SPELL_KEY;
    while (t < SPELL_NTYPES && strcmp(spell_type_name((enum spell_type)t), field[0]) != 0)
        t++;
    while (v <= SPELL_MAYBE && strcmp(spell_verdict_name((enum spell_verdict)v), field[1]) != 0)
        v++;
    if (t == SPELL_NTYPES || v > SPELL_MAYBE) {
        *why = t == SPELL_NTYPES ? "no such type" : "no such verdict";
        return false;
    }
    if (nf == 4 && v != SPELL_KEY) {
        *why = "a key for a verdict that is not \"key\"";
        return false;
    }
    c->type = (enum spell_type)t;
    c->want = (enum spell_verdict)v;
    c->in = unescape(nf > 2 ? field[2] : "", why);
    c->key = c->in != NULL && v == SPELL_KEY ? unescape(nf > 3 ? field[3] : "", why) : NULL;
    if (c->in == NULL || (v == SPELL_KEY && c->key == NULL)) {
        free(c->in);
        return false;
    }
    return true;
}

struct spell_case *spell_cases_read(const char *path, size_t *n, char *err, size_t errlen)
{
    struct spell_case *cases = NULL;
    size_t count = 0, room = 0;
    char *text = NULL;
    size_t cap = 0;
    ssize_t len;
    unsigned line = 0;
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        say(err, errlen, path, 0, "cannot be read");
        return NULL;
    }
    while ((len = getline(&text, &cap, f)) >= 0) {
        line++;
        if (len > 0 && text[len - 1] == '\n')
            text[--len] = '\0';
        if (len == 0 || text[0] == '#')
            continue;
        if (count == room) {
            room = room ? 2 * room : 256;
            struct spell_case *more = realloc(cases, room * sizeof *cases);
            if (more == NULL) {
                say(err, errlen, path, line, "out of memory");
                goto fail;
            }
            cases = more;
        }
        const char *why = NULL;
        if (!parse_line(text, &cases[count], &why)) {
            say(err, errlen, path, line, "%s", why);
            goto fail;
        }
        cases[count++].line = line;
    }
    fclose(f);
    free(text);
    *n = count;
    return cases;

fail:
    fclose(f);
    free(text);
    spell_cases_free(cases, count);
    return NULL;
}

void spell_cases_free(struct spell_case *c, size_t n)
{
    for (size_t i = 0; c != NULL && i < n; i++) {
        free(c[i].in);
        free(c[i].key);
    }
    free(c);
}
