/*
 * The types of configuration values: for each, how its text is parsed and
 * stored, copied, freed, compared and shown (config_int.h's struct
 * config_type).  Code that handles any key calls its row's type, so a new
 * type is one interface here and a new key never needs a switch.  The text
 * helpers every part of the module shares live here too, at the bottom.
 */
#include "config_int.h"
#include "decimal.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define ERR_VALUE_MAX CONFIG_ERR_VALUE_MAX
#define errf config_errf

bool config_copy_string(char **dst, const char *src)
{
    char *s = NULL;

    if (src != NULL && (s = strdup(src)) == NULL)
        return false;
    free(*dst);
    *dst = s;
    return true;
}

bool config_same_string(const char *a, const char *b)
{
    return a == b || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

bool config_filter_name_valid(const char *name, char *err, size_t errlen)
{
    size_t len = strlen(name);

    if (len == 0 || len >= CONFIG_FILTER_NAME_MAX + 1 || !(name[0] >= 'a' && name[0] <= 'z')
        || strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_") != len) {
        errf(err, errlen, "\"%.*s\" is not a filter name ([a-z][a-z0-9_]{0,%d})", ERR_VALUE_MAX,
             name, CONFIG_FILTER_NAME_MAX - 1);
        return false;
    }
    return true;
}

char *config_value_normalize(const char *raw, bool comments, char *err, size_t errlen)
{
    char *buf = strdup(raw);
    char *s, *e;

    if (buf == NULL) {
        errf(err, errlen, "out of memory");
        return NULL;
    }
    s = buf;
    while (isspace((unsigned char)*s))
        s++;
    if (*s == '"') {
        char *q = strchr(s + 1, '"');
        char *rest;

        if (q == NULL) {
            errf(err, errlen, "unterminated quote in %.*s%s", ERR_VALUE_MAX, s,
                 comments ? " (whitespace followed by ';' starts a comment even inside quotes)"
                          : "");
            goto fail;
        }
        rest = q + 1;
        while (isspace((unsigned char)*rest))
            rest++;
        if (*rest != '\0' && !(comments && (*rest == '#' || *rest == ';'))) {
            errf(err, errlen, "unexpected text after the closing quote in %.*s",
                 ERR_VALUE_MAX, s);
            goto fail;
        }
        *q = '\0';
        s++;
    } else {
        /*
         * libinih strips " ;comments" itself but not " #comments".  The
         * value reaches us left-trimmed, so a leading '#' also followed
         * whitespace in the file.
         */
        if (comments)
            for (char *p = s; *p != '\0'; p++)
                if ((*p == '#' || *p == ';') && (p == s || isspace((unsigned char)p[-1]))) {
                    *p = '\0';
                    break;
                }
        e = s + strlen(s);
        while (e > s && isspace((unsigned char)e[-1]))
            *--e = '\0';
    }
    memmove(buf, s, strlen(s) + 1);
    return buf;

fail:
    free(buf);
    return NULL;
}

/* The field of key k in obj. */
#define FIELD(k, obj, T) ((T *)(void *)((char *)(obj) + (k)->offset))
#define CFIELD(k, obj, T) ((const T *)(const void *)((const char *)(obj) + (k)->offset))

/* --- plain decimal numbers --- */

static bool parse_ranged(const char *v, uint64_t min, uint64_t max, uint64_t *out,
                         char *err, size_t errlen)
{
    uint64_t x = 0;
    enum decimal_status r = decimal_parse_u64(v, &x);

    if (r == DECIMAL_INVALID) {
        errf(err, errlen, "\"%.*s\" is not a number", ERR_VALUE_MAX, v);
        return false;
    }
    if (r == DECIMAL_RANGE || x < min || x > max) {
        errf(err, errlen, "%.*s is out of range (%llu..%llu)", ERR_VALUE_MAX, v,
             (unsigned long long)min, (unsigned long long)max);
        return false;
    }
    *out = x;
    return true;
}

/* A plain decimal (no "inf", "nan" or hex, which strtod would take); -1 if it is not one. */
static int parse_decimal(const char *v, size_t len, double *out)
{
    char buf[64], *end;

    if (len == 0 || len >= sizeof buf || strspn(v, "0123456789.eE+-") < len)
        return -1;
    memcpy(buf, v, len);
    buf[len] = '\0';
    errno = 0;
    *out = strtod(buf, &end);
    if (end == buf || *end != '\0' || !isfinite(*out))
        return -1;
    return 0;
}

static bool in_dbounds(const struct config_key *k, double x)
{
    return !((k->dmin_open ? x <= k->dmin : x < k->dmin) ||
             (k->dmax_open ? x >= k->dmax : x > k->dmax));
}

static void dbounds(const struct config_key *k, char *buf, size_t len)
{
    snprintf(buf, len, "%s %g and %s %g", k->dmin_open ? ">" : ">=", k->dmin,
             k->dmax_open ? "<" : "<=", k->dmax);
}

static bool dbounds_fail(const struct config_key *k, const char *v, char *err, size_t errlen)
{
    char b[96];
    dbounds(k, b, sizeof b);
    errf(err, errlen, "%.*s is out of range (must be %s)", ERR_VALUE_MAX, v, b);
    return false;
}

/* --- durations --- */

static const struct { const char *unit; double seconds; } duration_units[] = {
    { "us", 1e-6 }, { "ms", 1e-3 }, { "s", 1 }, { "sec", 1 }, { "min", 60 }, { "m", 60 },
    { "h", 3600 }, { "d", 86400 },
};

bool config_parse_duration(const char *v, double *out, char *err, size_t errlen)
{
    size_t nlen = strspn(v, "0123456789.eE+-");
    const char *u = v + nlen;
    double x;

    /* "5e" or "1e3ms": the 'e' belongs to the number only when digits follow it. */
    while (nlen > 0 && (v[nlen - 1] == 'e' || v[nlen - 1] == 'E'))
        u = v + --nlen;
    if (parse_decimal(v, nlen, &x) < 0 || x < 0)
        goto fail;
    while (*u == ' ' || *u == '\t')
        u++;
    if (*u == '\0') {
        if (u != v + nlen)
            goto fail;          /* "30 " cannot come from a normalised value; be strict anyway */
        *out = x;
        return true;
    }
    for (size_t i = 0; i < sizeof duration_units / sizeof duration_units[0]; i++)
        if (strcmp(u, duration_units[i].unit) == 0) {
            *out = x * duration_units[i].seconds;
            return true;
        }
fail:
    errf(err, errlen, "\"%.*s\" is not a duration (a number of seconds, or with a unit: "
         "250ms, 30s, 5min, 2h, 1d)", ERR_VALUE_MAX, v);
    return false;
}

/* A duration as the shortest exact text: "250ms", "30s", "5min", "2h". */
static void format_seconds(double s, char *buf, size_t len)
{
    if (s != 0 && fmod(s, 86400) == 0)
        snprintf(buf, len, "%gd", s / 86400);
    else if (s != 0 && fmod(s, 3600) == 0)
        snprintf(buf, len, "%gh", s / 3600);
    else if (s != 0 && fmod(s, 60) == 0)
        snprintf(buf, len, "%gmin", s / 60);
    else if (s != 0 && s < 1)
        snprintf(buf, len, "%gms", s * 1000);
    else
        snprintf(buf, len, "%gs", s);
}

static bool seconds_set(const struct config_key *k, void *obj, const char *v, char *err, size_t errlen)
{
    double x;

    if (!config_parse_duration(v, &x, err, errlen))
        return false;
    if (x != floor(x)) {
        errf(err, errlen, "%.*s is not a whole number of seconds", ERR_VALUE_MAX, v);
        return false;
    }
    if (x < (double)k->min || x > (double)k->max) {
        errf(err, errlen, "%.*s is out of range (%llu..%llu seconds)", ERR_VALUE_MAX, v,
             (unsigned long long)k->min, (unsigned long long)k->max);
        return false;
    }
    *FIELD(k, obj, unsigned) = (unsigned)x;
    return true;
}

static void seconds_format(const struct config_key *k, const void *obj, char *buf, size_t len)
{
    format_seconds(*CFIELD(k, obj, unsigned), buf, len);
}

static void seconds_values(const struct config_key *k, char *buf, size_t len)
{
    snprintf(buf, len, "%llu..%llu seconds, or with a unit (250ms, 30s, 5min, 2h, 1d)",
             (unsigned long long)k->min, (unsigned long long)k->max);
}

static bool seconds_real_set(const struct config_key *k, void *obj, const char *v,
                             char *err, size_t errlen)
{
    double x;

    if (!config_parse_duration(v, &x, err, errlen))
        return false;
    if (!in_dbounds(k, x))
        return dbounds_fail(k, v, err, errlen);
    *FIELD(k, obj, double) = x;
    return true;
}

static void seconds_real_format(const struct config_key *k, const void *obj, char *buf, size_t len)
{
    format_seconds(*CFIELD(k, obj, double), buf, len);
}

static void seconds_real_values(const struct config_key *k, char *buf, size_t len)
{
    char b[96];
    dbounds(k, b, sizeof b);
    snprintf(buf, len, "%s seconds, or with a unit (250ms, 30s, 5min, 2h, 1d)", b);
}

/* --- scalars: copy and compare the field's bytes --- */

static bool uint_set(const struct config_key *k, void *obj, const char *v, char *err, size_t errlen)
{
    uint64_t u = 0;
    if (!parse_ranged(v, k->min, k->max, &u, err, errlen))
        return false;
    *FIELD(k, obj, unsigned) = (unsigned)u;
    return true;
}

static void uint_format(const struct config_key *k, const void *obj, char *buf, size_t len)
{
    snprintf(buf, len, "%u", *CFIELD(k, obj, unsigned));
}

static void range_values(const struct config_key *k, char *buf, size_t len)
{
    snprintf(buf, len, "%llu..%llu", (unsigned long long)k->min, (unsigned long long)k->max);
}

static bool u64_set(const struct config_key *k, void *obj, const char *v, char *err, size_t errlen)
{
    return parse_ranged(v, k->min, k->max, FIELD(k, obj, uint64_t), err, errlen);
}

static void u64_format(const struct config_key *k, const void *obj, char *buf, size_t len)
{
    snprintf(buf, len, "%llu", (unsigned long long)*CFIELD(k, obj, uint64_t));
}

static bool double_set(const struct config_key *k, void *obj, const char *v, char *err, size_t errlen)
{
    double x;

    if (parse_decimal(v, strlen(v), &x) < 0) {
        errf(err, errlen, "\"%.*s\" is not a number", ERR_VALUE_MAX, v);
        return false;
    }
    if (!in_dbounds(k, x))
        return dbounds_fail(k, v, err, errlen);
    *FIELD(k, obj, double) = x;
    return true;
}

static void double_format(const struct config_key *k, const void *obj, char *buf, size_t len)
{
    snprintf(buf, len, "%g", *CFIELD(k, obj, double));
}

static void double_values(const struct config_key *k, char *buf, size_t len)
{
    dbounds(k, buf, len);
}

static bool bool_set(const struct config_key *k, void *obj, const char *v, char *err, size_t errlen)
{
    static const char *const yes[] = { "yes", "true", "on", "1" };
    static const char *const no[] = { "no", "false", "off", "0" };

    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (strcasecmp(v, yes[i]) == 0 || strcasecmp(v, no[i]) == 0) {
            *FIELD(k, obj, bool) = strcasecmp(v, yes[i]) == 0;
            return true;
        }
    }
    errf(err, errlen, "\"%.*s\" is not a boolean (use yes/no, true/false, on/off or 1/0)",
         ERR_VALUE_MAX, v);
    return false;
}

static void bool_format(const struct config_key *k, const void *obj, char *buf, size_t len)
{
    snprintf(buf, len, "%s", *CFIELD(k, obj, bool) ? "yes" : "no");
}

static void bool_values(const struct config_key *k, char *buf, size_t len)
{
    (void)k;
    snprintf(buf, len, "yes or no");
}

/* "a, b, c" from an enum table, for error messages and the key listing. */
static void enum_list(const struct config_enum_name *names, const char *sep, char *buf, size_t len)
{
    size_t off = 0;

    if (len == 0)
        return;
    buf[0] = '\0';
    for (const struct config_enum_name *n = names; n->name != NULL && off < len; n++) {
        int w = snprintf(buf + off, len - off, "%s%s", n == names ? "" : sep, n->name);
        if (w < 0)
            break;
        off += (size_t)w;
    }
}

/* The key table's K_ENUM checked at compile time that the field is int-sized. */
static bool enum_set(const struct config_key *k, void *obj, const char *v, char *err, size_t errlen)
{
    char allowed[256];

    for (const struct config_enum_name *n = k->names; n->name != NULL; n++)
        if (strcasecmp(v, n->name) == 0) {
            *FIELD(k, obj, int) = n->value;
            return true;
        }
    enum_list(k->names, ", ", allowed, sizeof allowed);
    errf(err, errlen, "\"%.*s\" is not one of %s", ERR_VALUE_MAX, v, allowed);
    return false;
}

static void enum_format(const struct config_key *k, const void *obj, char *buf, size_t len)
{
    int x = *CFIELD(k, obj, int);
    for (const struct config_enum_name *n = k->names; n->name != NULL; n++)
        if (n->value == x) {
            snprintf(buf, len, "%s", n->name);
            return;
        }
    snprintf(buf, len, "%d", x);
}

static void enum_values(const struct config_key *k, char *buf, size_t len)
{
    enum_list(k->names, " | ", buf, len);
}

/*
 * Permission bits as chmod writes them: octal, "0660" or "660".  Only the
 * nine rwx bits: setuid, setgid and sticky mean nothing on a socket.
 */
static bool mode_set(const struct config_key *k, void *obj, const char *v, char *err, size_t errlen)
{
    size_t len = strlen(v);
    unsigned m = 0;

    if (len == 0 || len > 4 || strspn(v, "01234567") != len) {
        errf(err, errlen, "\"%.*s\" is not an octal mode such as 0660", ERR_VALUE_MAX, v);
        return false;
    }
    for (size_t i = 0; i < len; i++)
        m = m * 8 + (unsigned)(v[i] - '0');
    if (m > 0777) {
        errf(err, errlen, "%s has bits beyond 0777 (setuid, setgid and sticky mean nothing on a "
             "socket)", v);
        return false;
    }
    /* A row's max, when set, is the bits the key allows (publish_mode: no one else writes). */
    if (k->max != 0 && (m & ~(unsigned)k->max) != 0) {
        errf(err, errlen, "%s sets bits outside %04o", v, (unsigned)k->max);
        return false;
    }
    *FIELD(k, obj, unsigned) = m;
    return true;
}

static void mode_format(const struct config_key *k, const void *obj, char *buf, size_t len)
{
    snprintf(buf, len, "%04o", *CFIELD(k, obj, unsigned));
}

static void mode_values(const struct config_key *k, char *buf, size_t len)
{
    if (k->max != 0)
        snprintf(buf, len, "an octal mode within %04o", (unsigned)k->max);
    else
        snprintf(buf, len, "an octal mode, 0000..0777");
}

#define SCALAR_OPS(T)                                                                \
    static bool T##_copy(const struct config_key *k, void *dst, const void *src)    \
    {                                                                                \
        *FIELD(k, dst, T) = *CFIELD(k, src, T);                                      \
        return true;                                                                 \
    }                                                                                \
    static bool T##_equal(const struct config_key *k, const void *a, const void *b) \
    {                                                                                \
        return *CFIELD(k, a, T) == *CFIELD(k, b, T);                                 \
    }
SCALAR_OPS(unsigned)
SCALAR_OPS(uint64_t)
SCALAR_OPS(double)
SCALAR_OPS(bool)
SCALAR_OPS(int)

const struct config_type config_type_uint = {
    uint_set, unsigned_copy, NULL, unsigned_equal, uint_format, range_values
};
const struct config_type config_type_u64 = {
    u64_set, uint64_t_copy, NULL, uint64_t_equal, u64_format, range_values
};
const struct config_type config_type_double = {
    double_set, double_copy, NULL, double_equal, double_format, double_values
};
const struct config_type config_type_bool = {
    bool_set, bool_copy, NULL, bool_equal, bool_format, bool_values
};
const struct config_type config_type_enum = {
    enum_set, int_copy, NULL, int_equal, enum_format, enum_values
};
const struct config_type config_type_mode = {
    mode_set, unsigned_copy, NULL, unsigned_equal, mode_format, mode_values
};
const struct config_type config_type_seconds = {
    seconds_set, unsigned_copy, NULL, unsigned_equal, seconds_format, seconds_values
};
const struct config_type config_type_seconds_real = {
    seconds_real_set, double_copy, NULL, double_equal, seconds_real_format, seconds_real_values
};

/* --- strings --- */

static bool string_set(const struct config_key *k, void *obj, const char *v, char *err, size_t errlen)
{
    char *s;

    if (k->check != NULL && !k->check(v, err, errlen))
        return false;
    if ((s = strdup(v)) == NULL) {
        errf(err, errlen, "out of memory");
        return false;
    }
    free(*FIELD(k, obj, char *));
    *FIELD(k, obj, char *) = s;
    return true;
}

static bool string_copy(const struct config_key *k, void *dst, const void *src)
{
    return config_copy_string(FIELD(k, dst, char *), *CFIELD(k, src, char *));
}

static void string_free(const struct config_key *k, void *obj)
{
    free(*FIELD(k, obj, char *));
    *FIELD(k, obj, char *) = NULL;
}

static bool string_equal(const struct config_key *k, const void *a, const void *b)
{
    return config_same_string(*CFIELD(k, a, char *), *CFIELD(k, b, char *));
}

static void string_format(const struct config_key *k, const void *obj, char *buf, size_t len)
{
    const char *s = *CFIELD(k, obj, char *);
    snprintf(buf, len, "\"%s\"", s != NULL ? s : "");
}

static void no_values(const struct config_key *k, char *buf, size_t len)
{
    (void)k;
    if (len > 0)
        buf[0] = '\0';
}

const struct config_type config_type_string = {
    string_set, string_copy, string_free, string_equal, string_format, no_values
};

