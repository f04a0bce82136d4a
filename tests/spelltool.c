/*
 * The oracle of src/core/spell.c, for tests/spell.test: for each column type a
 * table of a few hundred values (edges included) is made, thousands of
 * spellings of those values and of non-values are generated, and for every
 * spelling PostgreSQL's own `SELECT EXISTS (SELECT 1 FROM t WHERE col = $1)`
 * (the parameter sent as text, an input the server refuses counting as
 * false) must agree with spell_key's verdict against the exact set of the
 * rows' keys: KEY -> exists iff the key is in the set, NOT_A_VALUE -> false,
 * MAYBE -> anything (counted).  The spellings include tests/spell_cases.txt's
 * hand-picked ones (tests/check_spell's cases) of the column's spell type.
 * Each spelling is asked in two sessions: one
 * with bloomguard's pinned settings, one with other DateStyle, TimeZone,
 * IntervalStyle and output settings, as the service's own may be.
 *
 *   spelltool [-d CONNINFO] [-s SEED] [-v] [TYPE...]
 *
 * Prints one line per type ("TYPE rows=... spellings=... (hand-picked N) key=... ...
 * mismatches=N") and a line for each disagreement; exit 0 when there was
 * none, 1 on a disagreement or an error, 2 on bad usage.  Tables are
 * spell_<type> in the connection's database, replaced on each run.
 */
#include <inttypes.h>
#include <libpq-fe.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loader.h"
#include "spell.h"
#include "spell_cases.h"

/* The service's session, as unlike bloomguard's as the settings allow. */
#define FOREIGN_SETTINGS \
    "SET client_encoding = 'UTF8'; SET DateStyle = 'SQL, DMY'; SET TimeZone = 'Asia/Kathmandu'; " \
    "SET IntervalStyle = 'sql_standard'; SET extra_float_digits = 0; SET bytea_output = 'escape'"

/* Queries in flight at once in a pipeline. */
#define PIPELINE_DEPTH 256

/* ------------------------------------------------------ small helpers -- */

static uint64_t rng_state;

static uint64_t rnd(void)
{
    /* xorshift64*: reproducible from -s, good enough to pick mutations. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * UINT64_C(2685821657736338717);
}

static unsigned rndn(unsigned n)
{
    return (unsigned)(rnd() % n);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL) {
        fprintf(stderr, "spelltool: out of memory\n");
        exit(1);
    }
    return p;
}

static char *xstrdup(const char *s)
{
    size_t n = strlen(s);
    char *p = xmalloc(n + 1);
    memcpy(p, s, n + 1);
    return p;
}

/* A set of strings (open addressing, FNV-1a), also keeping insertion order. */
struct strset {
    char **slot;
    size_t cap, n;
    char **order;
};

static uint64_t fnv(const char *s)
{
    uint64_t h = 1469598103934665603u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

static bool set_has(const struct strset *st, const char *s)
{
    if (st->cap == 0)
        return false;
    for (size_t i = fnv(s) & (st->cap - 1);; i = (i + 1) & (st->cap - 1)) {
        if (st->slot[i] == NULL)
            return false;
        if (strcmp(st->slot[i], s) == 0)
            return true;
    }
}

/* Adds a copy of s; false if it was there. */
static bool set_add(struct strset *st, const char *s)
{
    if (set_has(st, s))
        return false;
    if (2 * (st->n + 1) > st->cap) {
        size_t ncap = st->cap ? 2 * st->cap : 1024;
        char **ns = calloc(ncap, sizeof *ns);
        char **no = realloc(st->order, ncap * sizeof *no);
        if (ns == NULL || no == NULL) {
            fprintf(stderr, "spelltool: out of memory\n");
            exit(1);
        }
        st->order = no;
        for (size_t k = 0; k < st->n; k++) {
            size_t i = fnv(st->order[k]) & (ncap - 1);
            while (ns[i] != NULL)
                i = (i + 1) & (ncap - 1);
            ns[i] = st->order[k];
        }
        free(st->slot);
        st->slot = ns;
        st->cap = ncap;
    }
    char *c = xstrdup(s);
    size_t i = fnv(c) & (st->cap - 1);
    while (st->slot[i] != NULL)
        i = (i + 1) & (st->cap - 1);
    st->slot[i] = c;
    st->order[st->n++] = c;
    return true;
}

static void set_free(struct strset *st)
{
    for (size_t k = 0; k < st->n; k++)
        free(st->order[k]);
    free(st->slot);
    free(st->order);
    memset(st, 0, sizeof *st);
}

/* The spellings of one type (deduplicated). */
static struct strset spellings;

/* tests/spell_cases.txt, read once by main. */
static struct spell_case *hand;
static size_t nhand;

static void emit(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void emit(const char *fmt, ...)
{
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof buf)
        set_add(&spellings, buf);
}

static const char *const spaces[] = { " ", "  ", "\t", "\n", "\r", "\v", "\f", " \t\n" };
static const char *const junk[] = {
    " ", "x", "0", "-", "+", ".", "e", "E", "_", ",", "{", "}", ":", "/", "'", "\\",
    "a", "F", "\xc3\xa9" /* é */, "\xc2\xa0" /* NBSP */, "\xef\xbc\x95" /* fullwidth 5 */,
    "9", "1", "T", "Z", "(", ")", "\t",
};

static const char *any_space(void)
{
    return spaces[rndn(sizeof spaces / sizeof spaces[0])];
}

/* s with random white space around it (none, before, after, both). */
/* Emits each spelling of a fixed list, as it is. */
static void emit_each(const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        emit("%s", list[i]);
}
#define EMIT_EACH(list) emit_each((list), sizeof (list) / sizeof (list)[0])

static void emit_spaced(const char *s)
{
    switch (rndn(4)) {
    case 0: emit("%s%s", any_space(), s); break;
    case 1: emit("%s%s", s, any_space()); break;
    case 2: emit("%s%s%s", any_space(), s, any_space()); break;
    default: emit("%s", s); break;
    }
}

/* s with one random edit: a byte inserted, deleted or replaced, or cut. */
static void emit_mutated(const char *s)
{
    size_t n = strlen(s);
    char buf[4096];
    if (n + 8 >= sizeof buf)
        return;
    size_t at = n ? rndn((unsigned)n + 1) : 0;
    const char *j = junk[rndn(sizeof junk / sizeof junk[0])];
    switch (rndn(4)) {
    case 0:         /* insert */
        snprintf(buf, sizeof buf, "%.*s%s%s", (int)at, s, j, s + at);
        break;
    case 1:         /* delete */
        if (n == 0)
            return;
        if (at == n)
            at--;
        snprintf(buf, sizeof buf, "%.*s%s", (int)at, s, s + at + 1);
        break;
    case 2:         /* replace */
        if (at == n)
            return;
        snprintf(buf, sizeof buf, "%.*s%s%s", (int)at, s, j, s + at + 1);
        break;
    default:        /* cut */
        snprintf(buf, sizeof buf, "%.*s", (int)at, s);
        break;
    }
    /* Keep to valid UTF-8 (the daemon refuses the rest): no cut sequences. */
    for (const unsigned char *p = (const unsigned char *)buf; *p;) {
        int k = *p < 0x80 ? 1 : *p >= 0xf0 ? 4 : *p >= 0xe0 ? 3 : *p >= 0xc2 ? 2 : 0;
        if (k == 0)
            return;
        for (int q = 1; q < k; q++)
            if ((p[q] & 0xc0) != 0x80)
                return;
        p += k;
    }
    emit("%s", buf);
}

static void emit_case(const char *s, int mode)     /* 0 lower, 1 upper, 2 random */
{
    char buf[4096];
    size_t n = strlen(s);
    if (n >= sizeof buf)
        return;
    for (size_t i = 0; i <= n; i++) {
        char c = s[i];
        bool up = mode == 1 || (mode == 2 && rndn(2));
        if (up && c >= 'a' && c <= 'z')
            c = (char)(c - 32);
        else if (!up && c >= 'A' && c <= 'Z')
            c = (char)(c + 32);
        buf[i] = c;
    }
    emit("%s", buf);
}

static void emit_common(const char *row)
{
    emit("%s", row);
    emit_spaced(row);
    for (int k = 0; k < 3; k++)
        emit_mutated(row);
}

/* ------------------------------------------------- spellings by type -- */

/* Integers: signs, zeros, white space, neighbours, and ones beyond the type. */
static void gen_int(const char *row)
{
    emit_common(row);
    const char *digits = row + (row[0] == '-');
    bool neg = row[0] == '-';
    int z = 1 + (int)rndn(4);
    emit("%s%.*s%s", neg ? "-" : "+", z, "0000", digits);
    emit_spaced(neg ? row : digits);
    char buf[64];
    snprintf(buf, sizeof buf, "%s%s", neg ? "-" : "+", digits);
    emit_spaced(buf);
    if (strcmp(row, "0") == 0) {
        emit("-0");
        emit("+000");
        emit(" -00 ");
    }
    emit("%s.0", row);
    emit("%se0", row);
    emit("%s_0", row);
    emit("0x%s", digits);
    long long v = strtoll(row, NULL, 10);
    if (v < INT64_MAX)
        emit("%lld", v + 1);
    if (v > INT64_MIN)
        emit("%lld", v - 1);
    emit("%s0", row);               /* ten times: often out of range at the edges */
}

static void extra_int(const char *type)
{
    static const char *const fixed[] = {
        "", " ", "+", "-", "- 5", "5 5", "+-5", "--5", "0x10", "1e3", "5.", ".5", "1_000",
        "\xd9\xa1" /* Arabic-indic 1 */, "\xef\xbc\x95", "5\xc2\xa0", "\xc2\xa0" "5",
        "5\xc3\xa9", "32767", "32768", "-32768", "-32769", "2147483647", "2147483648",
        "-2147483648", "-2147483649", "9223372036854775807", "9223372036854775808",
        "-9223372036854775808", "-9223372036854775809", "99999999999999999999",
        "-99999999999999999999", "000000000000000000000000000000000000000000042",
        "4294967295", "4294967296", "-4294967295", "-18446744073709551615",
        "-18446744073709551616", "18446744073709551615", "\v7\f", "\r\n7\r\n",
    };
    EMIT_EACH(fixed);
    int bits = strcmp(type, "int2") == 0 ? 16 : strcmp(type, "int4") == 0 ? 32 : 63;
    for (int k = 0; k < 300; k++) {
        long long v = (long long)(rnd() >> (64 - bits));
        if (rndn(2))
            v = -v;
        if (rndn(3) == 0)
            v %= 1000;
        emit("%lld", v);
    }
}

/* oid: also the negative spellings oidin wraps to 2^32 + value. */
static void gen_oid(const char *row)
{
    gen_int(row);
    unsigned long long v = strtoull(row, NULL, 10);
    if (v >= 2147483648ull)
        emit("-%llu", 4294967296ull - v);
    emit("-%llu", (unsigned long long)(0 - v));     /* 2^64 - v */
    emit(" -%llu ", (unsigned long long)(0 - v - 4294967296ull));
}

static void gen_uuid(const char *row)
{
    char hex[33];
    size_t n = 0;
    for (const char *p = row; *p && n < 32; p++)
        if (*p != '-')
            hex[n++] = *p;
    hex[n] = '\0';
    emit_common(row);
    emit_case(row, 1);
    emit_case(row, 2);
    emit("{%s}", row);
    emit("{%s", row);
    emit("%s}", row);
    emit("%s", hex);
    emit("{%s}", hex);
    emit_case(hex, 2);
    for (int k = 0; k < 4; k++) {       /* hyphens after random groups of four */
        char buf[64];
        size_t o = 0;
        unsigned mask = rndn(128);
        for (int g = 0; g < 8; g++) {
            memcpy(buf + o, hex + 4 * g, 4);
            o += 4;
            if (g < 7 && (mask >> g & 1))
                buf[o++] = '-';
        }
        buf[o] = '\0';
        emit_case(buf, rndn(3));
    }
    /* Hyphens where uuid_in takes none. */
    emit("%.2s-%s", hex, hex + 2);
    emit("%.4s--%s", hex, hex + 4);
    emit("-%s", hex);
    emit("%s-", hex);
    emit("%.31s", hex);
    emit("%s0", hex);
    emit("%.31sg", hex);
    emit("urn:uuid:%s", row);
    emit("%.35s%c", row, row[35] == '0' ? '1' : '0');   /* a neighbour */
}

static void extra_uuid(void)
{
    for (int k = 0; k < 200; k++)
        emit("%08" PRIx64 "-%04x-%04x-%04x-%012" PRIx64, rnd() >> 32, rndn(65536), rndn(65536),
             rndn(65536), rnd() >> 16);
    emit("00000000-0000-0000-0000-000000000000");
    emit("{}");
    emit("%s", "");
}

/* A decimal with digits d, point after p of them, spelled with exponent e. */
static void emit_shifted(const char *sign, const char *d, int p, int e, const char *echar)
{
    int n = (int)strlen(d), q = p - e;      /* the point's place in the mantissa */
    char m[512];
    if (n + abs(q) + 4 >= (int)sizeof m)
        return;
    if (q <= 0)
        snprintf(m, sizeof m, "0.%.*s%s", -q, "00000000000000000000000000000000", d);
    else if (q >= n)
        snprintf(m, sizeof m, "%s%.*s", d, q - n, "00000000000000000000000000000000");
    else
        snprintf(m, sizeof m, "%.*s.%s", q, d, d + q);
    emit("%s%s%s%d", sign, m, echar, e);
}

/* Numeric-style spellings of a decimal row: zeros, signs, exponents. */
static void gen_decimal(const char *row)
{
    const char *p = row;
    const char *sign = "";
    if (*p == '-' || *p == '+') {
        sign = *p == '-' ? "-" : "";
        p++;
    }
    char d[512];
    int n = 0, point = -1;
    for (; *p && n < 500; p++) {
        if (*p >= '0' && *p <= '9')
            d[n++] = *p;
        else if (*p == '.')
            point = n;
        else
            return;         /* exponent forms and words: left to the callers */
    }
    d[n] = '\0';
    if (point < 0)
        point = n;
    const char *dot = strchr(row, '.');
    emit("%s0", dot ? row : "");
    emit("%s%s", row, dot ? "000" : ".000");
    emit("%s00%s", sign, row + (*sign != '\0'));
    if (*sign == '\0')
        emit("+%s", row);
    if (dot && dot == row + strlen(sign) + 1 && row[strlen(sign)] == '0')
        emit("%s%s", sign, dot);            /* ".5" */
    if (!dot)
        emit("%s.", row);                   /* "5." */
    for (int k = 0; k < 3; k++) {
        int e = (int)rndn(13) - 6;
        emit_shifted(sign, d, point, e, rndn(2) ? "e" : "E");
    }
    emit_shifted(sign, d, point, 0, "e+");
    emit_shifted(sign, d, point, 2, "e ");
    emit_shifted(sign, d, point, -2, "e-0");
    emit_shifted(sign, d, point, -1, "e--");
    /* A neighbour: the last digit changed. */
    char nb[600];
    snprintf(nb, sizeof nb, "%s", row);
    size_t l = strlen(nb);
    if (l > 0 && nb[l - 1] >= '0' && nb[l - 1] <= '9') {
        nb[l - 1] = nb[l - 1] == '9' ? '8' : (char)(nb[l - 1] + 1);
        emit("%s", nb);
    }
}

static const char *const special_words[] = {
    "NaN", "nan", "NAN", "+NaN", "-nan", "Infinity", "infinity", "INFINITY", "+Infinity",
    "-Infinity", "-infinity", "inf", "INF", "+inf", "-inf", "-INF", "infinit", "infinityx",
    "nanx", "na", "in", "+-inf", "nan(1)", "nan()", "nan(x_1)", "-nan(2)", "nan(", " NaN ",
    "\tinf\n", "Inf inity",
};

static void gen_numeric(const char *row)
{
    emit_common(row);
    gen_decimal(row);
    if (strpbrk(row, "0123456789") == NULL) {       /* NaN, Infinity */
        emit_case(row, 2);
        emit_case(row, 1);
        emit_spaced(row);
    }
}

static void extra_numeric(void)
{
    static const char *const fixed[] = {
        "", " ", ".", "+.", "-.", "..5", "1..2", "1.2.3", "1e", "1e+", "1e-", "e5", "--1",
        "1e1073741823", "1e-1073741823", "1e1073741822", "1e-1073741822", "1e500", "1e-500",
        "0e99999", "0e-99999", "1e99999999999999999999", "1 000", "1,5", "0x10", "1_000",
        "1e5x", "1e 5", "1e\t-5", "5e0", "-0", "+0", "-0.000", "0.0e5", "\xc2\xa0" "1",
        "1\xc2\xa0", "1e\xc2\xa0" "5", "123456789012345678901234567890",
        "0.000000000000000000001", "1e-20", "1E+30", "-1.5e-3",
    };
    EMIT_EACH(fixed);
    EMIT_EACH(special_words);
    for (int k = 0; k < 200; k++) {
        char buf[64];
        snprintf(buf, sizeof buf, "%s%u.%0*u", rndn(2) ? "-" : "", rndn(1000), (int)rndn(4) + 1,
                 rndn(10000) % 10);
        emit("%s", buf);
        gen_decimal(buf);
    }
}

static void gen_float(const char *row, bool single)
{
    emit_common(row);
    gen_decimal(row);
    char *end;
    double v = single ? strtof(row, &end) : strtod(row, &end);
    if (*end == '\0' && isfinite(v)) {
        emit("%.17g", v);
        emit("%.20e", v);
        emit("%a", v);
        emit("%.3g", v);
        emit("%.9g", v);
        emit("%.8g", v);
        emit("%.15g", v);
        emit("%.16g", v);
        /* The next value up and down, spelled shortest-ish. */
        double up = single ? (double)nextafterf((float)v, INFINITY) : nextafter(v, INFINITY);
        double dn = single ? (double)nextafterf((float)v, -INFINITY) : nextafter(v, -INFINITY);
        emit("%.17g", up);
        emit("%.17g", dn);
        emit("%.9g", up);
    } else {
        emit_case(row, 2);
        emit_spaced(row);
    }
    /* An exponent form of the row's own exponent, when it has one. */
    const char *e = strchr(row, 'e');
    if (e != NULL) {
        emit("%.*sE%s", (int)(e - row), row, e + 1);
        emit("%.*se%d", (int)(e - row), row, atoi(e + 1));
    }
}

static void gen_float4(const char *row)
{
    gen_float(row, true);
}

static void gen_float8(const char *row)
{
    gen_float(row, false);
}

static void extra_float(bool single)
{
    static const char *const fixed[] = {
        "", " ", ".", "e5", "1e", "1e+", "--1", "0x", "0x1p3", "0X1P-2", "-0x1.8p1", "0x1p",
        "1e400", "-1e400", "1e-400", "2e-324", "3e-324", "4.9e-324", "5e-324", "1e308",
        "1.7976931348623157e308", "1.7976931348623159e308", "2.2250738585072014e-308",
        "3.5e38", "3.4028235e38", "3.4028236e38", "1e-45", "1e-46", "7e-46", "1.4e-45",
        "-0", "+0", "-0.0e10", "0e-999", "1e-999", "00.100", "1_0", "1,5", "1.5f", "1.5d",
        "\xc2\xa0" "1", "1\xc2\xa0", "12345678901234567890", "0.1", "0.30000000000000004",
        "1e22", "1e23", "9007199254740993", "16777217",
    };
    EMIT_EACH(fixed);
    EMIT_EACH(special_words);
    for (int k = 0; k < 150; k++) {
        double v = ((double)(rnd() >> 11) / 9007199254740992.0 - 0.5)
                   * pow(10, (int)rndn(40) - 20);
        if (single)
            v = (float)v;
        emit("%.17g", v);
        emit("%.6g", v);
    }
}

static void extra_float4(void)
{
    extra_float(true);
}

static void extra_float8(void)
{
    extra_float(false);
}

static void extra_bool(void)
{
    static const char *const words[] = { "true", "false", "yes", "no", "on", "off", "1", "0" };
    for (size_t w = 0; w < sizeof words / sizeof words[0]; w++) {
        size_t n = strlen(words[w]);
        for (size_t k = 1; k <= n; k++) {
            char buf[16];
            snprintf(buf, sizeof buf, "%.*s", (int)k, words[w]);
            emit_case(buf, 0);
            emit_case(buf, 1);
            emit_case(buf, 2);
            emit_spaced(buf);
            emit("%sx", buf);
            emit_mutated(buf);
        }
    }
    /* Every word in many cases and white space: the table holds only true. */
    for (int k = 0; k < 800; k++) {
        size_t w = rndn(sizeof words / sizeof words[0]), n = strlen(words[w]);
        char buf[16];
        snprintf(buf, sizeof buf, "%.*s", 1 + (int)rndn((unsigned)n), words[w]);
        for (char *c = buf; *c; c++)
            if (rndn(2) && *c >= 'a' && *c <= 'z')
                *c = (char)(*c - 32);
        emit_spaced(buf);
        if (k % 4 == 0)
            emit_mutated(buf);
    }
    static const char *const fixed[] = {
        "", " ", "o", "O", "2", "-1", "tr ue", "truex", "yess", "offf", "onn", "t\xc2\xa0",
        "\xc2\xa0t", "\xc2\xa0", "t\xc3\xa9", "\v\ton\f\r", "+1", "01", "10", "y e",
    };
    EMIT_EACH(fixed);
}

static void gen_bool(const char *row)
{
    emit_common(row);
}

/* Replace the first occurrence of from in s by to. */
static void emit_replaced(const char *s, const char *from, const char *to)
{
    const char *at = strstr(s, from);
    if (at != NULL)
        emit("%.*s%s%s", (int)(at - s), s, to, at + strlen(from));
}

/* A substitution for emit_replaced; EMIT_SWAPS makes each of a list, in order. */
struct swap {
    const char *from, *to;
};

static void emit_swaps(const char *s, const struct swap *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        emit_replaced(s, list[i].from, list[i].to);
}
#define EMIT_SWAPS(s, list) emit_swaps((s), (list), sizeof (list) / sizeof (list)[0])

static void gen_datetime(const char *row)
{
    emit_common(row);
    emit_case(row, 1);
    static const struct swap swaps[] = {
        { "-0", "-" },                      /* month without its zero */
        { "-", "/" }, { " ", "T" },
        { "+00", "" }, { "+00", "+00:00" }, { "+00", "Z" }, { "+00", "+0000" }, { "+00", "-00" },
        { "+00", "+01" },
        { " BC", "BC" }, { " BC", " bc" }, { " BC", " AD" },
        { ":", "::" },
    };
    EMIT_SWAPS(row, swaps);
    char buf[128];
    snprintf(buf, sizeof buf, "%s", row);
    char *dot = strchr(buf, '.');
    if (dot != NULL) {
        char *end = dot + 1;
        while (*end >= '0' && *end <= '9')
            end++;
        emit("%.*s0%s", (int)(end - buf), buf, end);        /* a trailing zero */
        emit("%.*s%s", (int)(dot - buf), buf, end);         /* no fraction */
        emit("%.*s9999999%s", (int)(end - buf), buf, end);  /* beyond microseconds */
    } else {
        /* After the seconds: ".0" (equal, not canonical). */
        const char *sec = NULL;
        for (const char *c = row; (c = strchr(c, ':')) != NULL; c++)
            sec = c;
        if (sec != NULL && strlen(sec) >= 3)
            emit("%.*s.0%s", (int)(sec + 3 - row), row, sec + 3);
    }
    if (strlen(row) >= 10 && row[4] == '-' && row[7] == '-')
        emit("%s%s", row, strchr(row, ':') ? "" : " 00:00:00");
    emit("0%s", row);                       /* a five-digit year with a zero */
}

static void extra_datetime(void)
{
    static const char *const fixed[] = {
        "", "epoch", "today", "now", "allballs", "2023-02-29", "2024-02-29", "2023-13-01",
        "2023-00-10", "0000-01-01", "2024-01-05 24:00:00", "2024-01-05 23:59:60",
        "2024-01-05 23:59:59.9999999", "23:59:60", "24:00:00", "24:00:00.5", "25:00:00",
        "12:60:00", "00:00:00", "2024-01-05 12:00:00+00", "2024-01-05 12:00:00",
        "2024-01-05", "4713-11-24 BC", "4713-11-23 BC", "4714-01-01 BC",
        "5874897-12-31", "5874898-01-01", "294276-12-31 23:59:59.999999+00",
        "294277-01-01 00:00:00", "4713-11-24 00:00:00 BC", "4713-11-24 00:00:00+00 BC",
        "infinity", "-infinity", "Infinity", "+infinity", "0044-03-15 BC", "44-03-15 BC",
        "J2451545", "2024-W01-1", "20240105", "2024-001", "1999-01-08 04:05:06 PST",
    };
    EMIT_EACH(fixed);
}

static void gen_interval(const char *row)
{
    emit_common(row);
    emit_case(row, 1);
    static const struct swap swaps[] = {
        { "mons", "months" }, { "mon", "month" }, { "days", "d" }, { "year", "yr" }, { " ", "  " },
    };
    EMIT_SWAPS(row, swaps);
    emit("@ %s", row);
    emit("%s ago", row);
    emit("+%s", row);
    emit_replaced(row, ":00", "");
}

static void extra_interval(void)
{
    static const char *const fixed[] = {
        "", "0", "00:00:00", "1 mon", "30 days", "720:00:00", "1 day", "24:00:00",
        "-1 days +24:00:00", "1 year", "12 mons", "360 days", "P1Y2M", "PT1H",
        "1-2", "1 2:03:04", "-1 2:03:04", "1 day 1 day", "1 mons", "01:00", "1:00:00",
        "-00:00:00", "00:00:00.5", "00:00:00.50", "1 day -24:00:00", "2147483647 days",
        "178956970 years 7 mons", "-178956970 years -8 mons", "2562047788:00:54.775807",
        "-2562047788:00:54.775808",
    };
    EMIT_EACH(fixed);
}

static int hexv(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static void gen_bytea(const char *row)
{
    emit_common(row);
    if (strncmp(row, "\\x", 2) != 0)
        return;
    const char *h = row + 2;
    size_t n = strlen(h) / 2;
    char esc[2048], oct[2048], spaced[2048], up[2048];
    size_t e = 0, o = 0, s = 0;
    for (size_t i = 0; i < n && e + 8 < sizeof esc; i++) {
        int b = hexv(h[2 * i]) * 16 + hexv(h[2 * i + 1]);
        if (b == '\\') {
            e += (size_t)sprintf(esc + e, "\\\\");
        } else if (b >= 0x20 && b < 0x7f) {
            esc[e++] = (char)b;
        } else {
            e += (size_t)sprintf(esc + e, "\\%03o", b);
        }
        o += (size_t)sprintf(oct + o, "\\%03o", b);
        s += (size_t)sprintf(spaced + s, "%s%c%c", i ? any_space() : "", h[2 * i], h[2 * i + 1]);
    }
    esc[e] = oct[o] = spaced[s] = '\0';
    emit("%s", esc);
    emit("%s", oct);
    emit("\\x%s", spaced);
    emit("\\x %s\n", spaced);
    snprintf(up, sizeof up, "%s", row);
    emit_case(up + 2, 1);
    emit("\\x%s", up + 2);
    emit("\\X%s", h);
    emit("\\x%s0", h);
    emit("\\x%sg0", h);
    emit("%s\\", esc);
    emit("%s\\8", esc);
    emit("%s\\400", esc);
    emit("%s\xc3\xa9", esc);
    if (n > 0)
        emit("\\x%c %s", h[0], h + 1);
}

static void extra_bytea(void)
{
    static const char *const fixed[] = {
        "", "\\x", "\\", "\\\\", "\\\\\\", "\\000", "\\0", "\\x0", "\\x 0", "abc", "ABC",
        "a\\b", "\\141\\142\\143", "\\xzz", "\\x\t61\r\n62 ", "caf\xc3\xa9", "\\x\\x",
        "x61", "\\x6", "\\X61", "\\x61 6",
    };
    EMIT_EACH(fixed);
}

static void gen_text(const char *row)
{
    emit_common(row);
    emit_case(row, 1);
    emit_case(row, 0);
    emit_case(row, 2);
    emit("%s ", row);
    emit("%s   ", row);
    emit(" %s", row);
    emit("%s\t", row);
    emit("%sxyz", row);
    emit("%s%s", row, row);
    emit("%s\xc3\xa9\xc3\xa9\xc3\xa9", row);
}

static void extra_text(void)
{
    static const char *const fixed[] = {
        "", " ", "  ", "e\xcc\x81" /* e + combining acute */, "\xc3\xa9", "ABC", "abc",
    };
    EMIT_EACH(fixed);
}

static void gen_other(const char *row)
{
    emit_common(row);
    emit("%s/32", row);
    emit("0%s", row);
    emit_case(row, 1);
}

/* ------------------------------------------------------------- types -- */

struct tdef {
    const char *name;       /* table spell_NAME; the spell_type_name expected */
    const char *expect;
    const char *coltype;    /* the column's SQL type */
    const char *fill;       /* SQL inserting the values into "t" */
    const char *variants;   /* SQL: more spellings from the rows ("SELECT ... FROM TBL"), or NULL */
    void (*gen)(const char *row);
    void (*extra)(void);
};

#define RANDOM_TEXT "substr(md5(random()::text), 1, 1 + (random() * 19)::int)"

static void extra_int2(void) { extra_int("int2"); }
static void extra_int4(void) { extra_int("int4"); }
static void extra_int8(void) { extra_int("int8"); }

static const struct tdef types[] = {
    { "int2", "int2", "int2",
      "INSERT INTO TBL SELECT unnest('{-32768,32767,0,1,-1,-32767,32766,10,100}'::int2[]);"
      "INSERT INTO TBL SELECT (random() * 65535 - 32768)::int FROM generate_series(1, 200);"
      "INSERT INTO TBL SELECT (random() * 200 - 100)::int FROM generate_series(1, 100)",
      NULL, gen_int, extra_int2 },
    { "int4", "int4", "int4",
      "INSERT INTO TBL SELECT unnest('{-2147483648,2147483647,0,1,-1,-2147483647,2147483646,"
      "42,32768}'::int4[]);"
      "INSERT INTO TBL SELECT (random() * 4294967295 - 2147483648)::bigint FROM generate_series(1, 200);"
      "INSERT INTO TBL SELECT (random() * 2000 - 1000)::int FROM generate_series(1, 100)",
      NULL, gen_int, extra_int4 },
    { "int8", "int8", "int8",
      "INSERT INTO TBL SELECT unnest('{-9223372036854775808,9223372036854775807,0,1,-1,"
      "-9223372036854775807,9223372036854775806,5,2147483648}'::int8[]);"
      "INSERT INTO TBL SELECT ((random() - 0.5) * 1.8e19)::numeric::int8 FROM generate_series(1, 200);"
      "INSERT INTO TBL SELECT (random() * 2000 - 1000)::int FROM generate_series(1, 100)",
      NULL, gen_int, extra_int8 },
    { "int8dom", "int8", "spell_posint8",
      "INSERT INTO TBL SELECT unnest('{1,5,9223372036854775807,1000}'::int8[]);"
      "INSERT INTO TBL SELECT 1 + (random() * 1000)::int FROM generate_series(1, 100)",
      NULL, gen_int, extra_int8 },
    { "oid", "oid", "oid",
      "INSERT INTO TBL SELECT unnest('{0,1,4294967295,2147483648,2147483647,4294967294,7}'::oid[]);"
      "INSERT INTO TBL SELECT (random() * 4294967295)::bigint::text::oid FROM generate_series(1, 200);"
      "INSERT INTO TBL SELECT (random() * 1000)::int::text::oid FROM generate_series(1, 100)",
      NULL, gen_oid, extra_int8 },
    { "uuid", "uuid", "uuid",
      "INSERT INTO TBL VALUES ('00000000-0000-0000-0000-000000000000'), "
      "('ffffffff-ffff-ffff-ffff-ffffffffffff'), ('66e07a2a-0b5c-4d6e-8f1a-2b3c4d5e6f70');"
      "INSERT INTO TBL SELECT gen_random_uuid() FROM generate_series(1, 300)",
      NULL, gen_uuid, extra_uuid },
    { "numeric", "numeric", "numeric",
      "INSERT INTO TBL SELECT unnest('{0,0.000,1,-1,1.500,-0.5,NaN,Infinity,-Infinity,1e-20,"
      "1e30,123456789012345678901234567890.123456789,0.1,10,100,1000.0001}'::numeric[]);"
      "INSERT INTO TBL SELECT round(((random() - 0.5) * 10 ^ (floor(random() * 16) - 6))::numeric,"
      " floor(random() * 9)::int) FROM generate_series(1, 250);"
      "INSERT INTO TBL SELECT (random() * 100)::int FROM generate_series(1, 50)",
      NULL, gen_numeric, extra_numeric },
    /* A typmod rounds the rows, never the untyped parameter: 1.0005 is no 1.001. */
    { "numeric_ps", "numeric", "numeric(12,3)",
      "INSERT INTO TBL SELECT unnest('{0,1.5,-1.001,999999999.999,1.001}'::numeric[]);"
      "INSERT INTO TBL SELECT round(((random() - 0.5) * 10 ^ (floor(random() * 10) - 3))::numeric, 3)"
      " FROM generate_series(1, 250)",
      "SELECT (col + 0.0005)::text FROM TBL UNION ALL SELECT (col - 0.0004)::text FROM TBL",
      gen_numeric, NULL },
    { "float8", "float8", "float8",
      "INSERT INTO TBL SELECT unnest('{0,-0,1,-1,0.1,1.5,100,1e20,1e-5,0.0001,1e15,1e14,"
      "123456789012345678,5e-324,1.7976931348623157e308,2.2250738585072014e-308,NaN,"
      "Infinity,-Infinity,0.30000000000000004,9007199254740993}'::float8[]);"
      "INSERT INTO TBL SELECT (random() - 0.5) * 10 ^ (random() * 40 - 20) FROM generate_series(1, 250);"
      "INSERT INTO TBL SELECT (random() * 100)::int FROM generate_series(1, 50)",
      NULL, gen_float8, extra_float8 },
    { "float4", "float4", "float4",
      "INSERT INTO TBL SELECT unnest('{0,-0,1,-1,0.1,1.5,100,1e6,100000,123456.7,3.4028235e38,"
      "1e-45,1.17549435e-38,NaN,Infinity,-Infinity,16777216}'::float4[]);"
      "INSERT INTO TBL SELECT ((random() - 0.5) * 10 ^ (random() * 30 - 15))::float4 "
      "FROM generate_series(1, 250);"
      "INSERT INTO TBL SELECT (random() * 100)::int FROM generate_series(1, 50)",
      NULL, gen_float4, extra_float4 },
    { "bool", "bool", "bool", "INSERT INTO TBL VALUES (true)", NULL, gen_bool, extra_bool },
    { "date", "date", "date",
      "INSERT INTO TBL SELECT unnest('{4713-11-24 BC,5874897-12-31,2000-02-29,1900-02-28,"
      "0001-01-01,0001-12-31 BC,infinity,-infinity,0099-06-15,10000-01-01,2024-01-05}'::date[]);"
      "INSERT INTO TBL SELECT '2000-01-01'::date + (random() * 1600000 - 800000)::int "
      "FROM generate_series(1, 300)",
      "WITH v AS (SELECT col FROM TBL WHERE col BETWEEN '4700-01-01 BC' AND '200000-01-01') "
      "SELECT to_char(col, 'YYYYMMDD') FROM v UNION ALL SELECT to_char(col, 'DD.MM.YYYY') FROM v "
      "UNION ALL SELECT to_char(col, 'MM/DD/YYYY') FROM v UNION ALL SELECT to_char(col, 'Mon DD, YYYY') "
      "FROM v UNION ALL SELECT (col + 1)::text FROM v",
      gen_datetime, extra_datetime },
    { "timestamp", "timestamp", "timestamp",
      "INSERT INTO TBL SELECT unnest('{4713-11-24 00:00:00 BC,294276-12-31 23:59:59.999999,"
      "infinity,-infinity,2000-02-29 12:00:00,0044-03-15 12:00:00.5 BC,2024-01-05 10:00:00}'"
      "::timestamp[]);"
      "INSERT INTO TBL SELECT '2000-01-01'::timestamp + random() * interval '1000000 days'"
      " - interval '500000 days' FROM generate_series(1, 200);"
      "INSERT INTO TBL SELECT date_trunc('second', '2000-01-01'::timestamp + random() * "
      "interval '20000 days') FROM generate_series(1, 100)",
      "WITH v AS (SELECT col FROM TBL WHERE col BETWEEN '4700-01-01 BC' AND '200000-01-01') "
      "SELECT to_char(col, 'YYYY-MM-DD\"T\"HH24:MI:SS.US') FROM v UNION ALL "
      "SELECT (col + interval '1 microsecond')::text FROM v UNION ALL "
      "SELECT to_char(col, 'DD/MM/YYYY HH24:MI:SS') FROM v",
      gen_datetime, extra_datetime },
    { "timestamptz", "timestamptz", "timestamptz",
      "INSERT INTO TBL SELECT unnest('{4713-11-24 00:00:00+00 BC,294276-12-31 23:59:59.999999+00,"
      "infinity,-infinity,2000-02-29 12:00:00+00,0044-03-15 12:00:00.5+00 BC,"
      "2024-01-05 10:00:00+00}'::timestamptz[]);"
      "INSERT INTO TBL SELECT '2000-01-01+00'::timestamptz + random() * interval '1000000 days'"
      " - interval '500000 days' FROM generate_series(1, 200);"
      "INSERT INTO TBL SELECT date_trunc('second', '2000-01-01+00'::timestamptz + random() * "
      "interval '20000 days') FROM generate_series(1, 100)",
      "WITH v AS (SELECT col FROM TBL WHERE col BETWEEN '4700-01-01 BC' AND '200000-01-01') "
      "SELECT to_char(col AT TIME ZONE 'Asia/Kolkata', 'YYYY-MM-DD HH24:MI:SS.US') || '+05:30' "
      "FROM v UNION ALL SELECT (col + interval '1 microsecond')::text FROM v UNION ALL "
      "SELECT to_char(col, 'YYYY-MM-DD HH24:MI:SS') FROM v",
      gen_datetime, extra_datetime },
    { "time", "time", "time",
      "INSERT INTO TBL SELECT unnest('{00:00:00,24:00:00,23:59:59.999999,12:00:00.5}'::time[]);"
      "INSERT INTO TBL SELECT '00:00'::time + random() * interval '24 hours' FROM generate_series(1, 200);"
      "INSERT INTO TBL SELECT date_trunc('second', '00:00'::time + random() * interval '24 hours')"
      " FROM generate_series(1, 100)",
      "SELECT (col + interval '1 microsecond')::text FROM TBL UNION ALL "
      "SELECT to_char('2000-01-01'::date + col, 'HH12:MI:SS AM') FROM TBL",
      gen_datetime, extra_datetime },
    { "interval", "interval", "interval",
      "INSERT INTO TBL SELECT unnest('{0,1 mon,30 days,-1 days +02:03:00,1 year -1 mons,"
      "-00:55:00,00:00:00.5,178956970 years 7 mons,2562047788:00:54.775807,"
      "1 day,-1 years -2 mons +3 days -04:05:06.000007}'::interval[]);"
      "INSERT INTO TBL SELECT make_interval(years => (random() * 20 - 10)::int, months => "
      "(random() * 24 - 12)::int, days => (random() * 60 - 30)::int, secs => "
      "round(((random() - 0.5) * 200000)::numeric, (random() * 6)::int)) "
      "FROM generate_series(1, 250);"
      "INSERT INTO TBL SELECT make_interval(days => (random() * 100)::int) FROM generate_series(1, 50)",
      "WITH v AS (SELECT col FROM TBL WHERE col BETWEEN '-1000 years' AND '1000 years') "
      "SELECT justify_days(col)::text FROM v UNION ALL SELECT justify_hours(col)::text FROM v "
      "UNION ALL SELECT justify_interval(col)::text FROM v UNION ALL "
      "SELECT (col - interval '1 mon' + interval '30 days')::text FROM v UNION ALL "
      "SELECT (col + interval '1 day' - interval '24 hours')::text FROM v UNION ALL "
      "SELECT (col + interval '1 microsecond')::text FROM v",
      gen_interval, extra_interval },
    { "bytea", "bytea", "bytea",
      "INSERT INTO TBL VALUES (''), ('\\x00'), ('\\x5c'), ('\\xff00'), ('abc'), ('a\\\\b');"
      "INSERT INTO TBL SELECT decode(substr(md5(random()::text), 1, 2 * (random() * 12)::int), 'hex')"
      " FROM generate_series(1, 250)",
      NULL, gen_bytea, extra_bytea },
    { "text", "text", "text",
      "INSERT INTO TBL VALUES ('Hello World'), ('trailing  '), (' leading'), ('\xc3\xbcn\xc3\xaf'),"
      " ('MiXeD'), ('e\xcc\x81'), ('abc');"
      "INSERT INTO TBL SELECT " RANDOM_TEXT " FROM generate_series(1, 250)",
      NULL, gen_text, extra_text },
    { "varchar", "text", "varchar(20)",
      "INSERT INTO TBL VALUES ('Hello World'), ('trailing  '), ('abc');"
      "INSERT INTO TBL SELECT " RANDOM_TEXT " FROM generate_series(1, 250)",
      NULL, gen_text, extra_text },
    { "name", "name", "name",
      "INSERT INTO TBL VALUES ('abc'), (repeat('x', 63)), (repeat('\xc3\xa9', 31)), ('Hello World');"
      "INSERT INTO TBL SELECT rpad(md5(random()::text), 63, 'y') FROM generate_series(1, 100);"
      "INSERT INTO TBL SELECT " RANDOM_TEXT " FROM generate_series(1, 150)",
      NULL, gen_text, extra_text },
    { "bpchar", "bpchar", "char(12)",
      "INSERT INTO TBL VALUES ('abc'), ('trailing  '), (' leading'), ('123456789012'), ('');"
      "INSERT INTO TBL SELECT substr(md5(random()::text), 1, (random() * 12)::int) "
      "FROM generate_series(1, 250)",
      NULL, gen_text, extra_text },
    { "text_ci", "text_nondeterministic", "text COLLATE spell_ci",
      "INSERT INTO TBL VALUES ('Hello World'), ('abc'), ('MiXeD');"
      "INSERT INTO TBL SELECT " RANDOM_TEXT " FROM generate_series(1, 250)",
      NULL, gen_text, extra_text },
    { "inet", "other", "inet",
      "INSERT INTO TBL VALUES ('10.0.0.1'), ('::1'), ('192.168.0.0/16');"
      "INSERT INTO TBL SELECT ('10.' || (random() * 255)::int || '.' || (random() * 255)::int || '.'"
      " || (random() * 255)::int)::inet FROM generate_series(1, 100)",
      NULL, gen_other, NULL },
};
#define NTYPES (sizeof types / sizeof types[0])

/* --------------------------------------------------------- PostgreSQL -- */

static PGconn *connect_with(const char *conninfo, const char *settings)
{
    PGconn *c = PQconnectdb(conninfo);
    if (PQstatus(c) != CONNECTION_OK) {
        fprintf(stderr, "spelltool: connect: %s", PQerrorMessage(c));
        PQfinish(c);
        return NULL;
    }
    PGresult *r = PQexec(c, settings);
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok)
        fprintf(stderr, "spelltool: %s: %s", settings, PQerrorMessage(c));
    PQclear(r);
    if (!ok) {
        PQfinish(c);
        return NULL;
    }
    return c;
}

static bool run(PGconn *c, const char *sql)
{
    PGresult *r = PQexec(c, sql);
    ExecStatusType st = PQresultStatus(r);
    bool ok = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
    if (!ok)
        fprintf(stderr, "spelltool: %s: %s", sql, PQerrorMessage(c));
    PQclear(r);
    return ok;
}

/* sql with every "TBL" replaced by table. */
static char *for_table(const char *sql, const char *table)
{
    size_t n = 0, tl = strlen(table);
    char *out = xmalloc(strlen(sql) * (tl + 1) + 1);
    for (const char *p = sql; *p;) {
        if (strncmp(p, "TBL", 3) == 0) {
            memcpy(out + n, table, tl);
            n += tl;
            p += 3;
        } else {
            out[n++] = *p++;
        }
    }
    out[n] = '\0';
    return out;
}

/*
 * The catalog facts spell_type_of wants, as the daemon would read them: the
 * base type through domains, its typmod, the collation's determinism.
 */
static bool column_type(PGconn *c, const char *table, enum spell_type *t)
{
    const char *sql =
        "WITH RECURSIVE b(oid, typmod) AS ("
        "  SELECT a.atttypid, a.atttypmod FROM pg_attribute a"
        "   WHERE a.attrelid = $1::regclass AND a.attname = 'col'"
        "  UNION ALL"
        "  SELECT ty.typbasetype, ty.typtypmod FROM b JOIN pg_type ty ON ty.oid = b.oid"
        "   WHERE ty.typtype = 'd')"
        " SELECT b.oid, b.typmod, coalesce((SELECT co.collisdeterministic FROM pg_collation co"
        "   JOIN pg_attribute a ON co.oid = a.attcollation"
        "   WHERE a.attrelid = $1::regclass AND a.attname = 'col'), true)"
        " FROM b JOIN pg_type ty ON ty.oid = b.oid WHERE ty.typtype <> 'd'";
    PGresult *r = PQexecParams(c, sql, 1, NULL, &table, NULL, NULL, 0);
    bool ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
    if (ok)
        *t = spell_type_of((uint32_t)strtoul(PQgetvalue(r, 0, 0), NULL, 10),
                           (int32_t)atoi(PQgetvalue(r, 0, 1)), PQgetvalue(r, 0, 2)[0] == 't');
    else
        fprintf(stderr, "spelltool: column type of %s: %s", table, PQerrorMessage(c));
    PQclear(r);
    return ok;
}

/* The text of every row of a one-column query, into set (rows NULL skipped). */
static bool fetch_texts(PGconn *c, const char *sql, struct strset *set, bool keep_dups,
                        char ***all, size_t *nall)
{
    PGresult *r = PQexec(c, sql);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        fprintf(stderr, "spelltool: %s: %s", sql, PQerrorMessage(c));
        PQclear(r);
        return false;
    }
    int n = PQntuples(r);
    if (keep_dups) {
        *all = xmalloc((size_t)n * sizeof **all);
        *nall = 0;
    }
    for (int i = 0; i < n; i++) {
        if (PQgetisnull(r, i, 0))
            continue;
        set_add(set, PQgetvalue(r, i, 0));
        if (keep_dups)
            (*all)[(*nall)++] = xstrdup(PQgetvalue(r, i, 0));
    }
    PQclear(r);
    return true;
}

/*
 * EXISTS for every spelling, pipelined (a Sync after each query, so that an
 * input the server refuses fails alone).  res[i]: 1 exists, 0 not (or
 * refused with a data exception, SQLSTATE class 22).  False on any other
 * error.
 */
static bool ask_all(PGconn *c, const char *table, char **sp, size_t n, signed char *res)
{
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT EXISTS (SELECT 1 FROM %s WHERE col = $1)", table);
    PGresult *r = PQprepare(c, "", sql, 1, NULL);
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok)
        fprintf(stderr, "spelltool: prepare %s: %s", sql, PQerrorMessage(c));
    PQclear(r);
    if (!ok || PQenterPipelineMode(c) != 1)
        return false;
    size_t sent = 0, got = 0;
    while (ok && got < n) {
        while (sent < n && sent - got < PIPELINE_DEPTH) {
            const char *p = sp[sent];
            if (PQsendQueryPrepared(c, "", 1, &p, NULL, NULL, 0) != 1 || PQpipelineSync(c) != 1) {
                fprintf(stderr, "spelltool: send: %s", PQerrorMessage(c));
                ok = false;
                break;
            }
            sent++;
        }
        res[got] = -1;
        for (;;) {
            r = PQgetResult(c);
            if (r == NULL)
                continue;       /* the end of one query's results */
            ExecStatusType st = PQresultStatus(r);
            if (st == PGRES_PIPELINE_SYNC) {
                PQclear(r);
                break;
            }
            if (st == PGRES_TUPLES_OK) {
                res[got] = PQgetvalue(r, 0, 0)[0] == 't';
            } else {
                const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
                if (state != NULL && strncmp(state, "22", 2) == 0) {
                    res[got] = 0;
                } else {
                    fprintf(stderr, "spelltool: \"%s\": %s", sp[got], PQresultErrorMessage(r));
                    ok = false;
                }
            }
            PQclear(r);
        }
        got++;
    }
    if (PQexitPipelineMode(c) != 1 && ok) {
        fprintf(stderr, "spelltool: exit pipeline: %s", PQerrorMessage(c));
        ok = false;
    }
    return ok;
}

/* ---------------------------------------------------------- the check -- */

static void print_escaped(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(f, "\\x%02x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

static int check_type(PGconn *home, PGconn *away, const struct tdef *td, bool verbose)
{
    char table[64], sql[512];
    snprintf(table, sizeof table, "spell_%s", td->name);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);

    snprintf(sql, sizeof sql, "DROP TABLE IF EXISTS %s; CREATE TABLE %s (col %s)", table, table,
             td->coltype);
    if (!run(home, sql))
        return -1;
    char *fill = for_table(td->fill, table);
    bool ok = run(home, "SELECT setseed(0.4242)") && run(home, fill);
    free(fill);
    if (!ok || !run(home, "ANALYZE") )
        return -1;
    enum spell_type type;
    if (!column_type(home, table, &type))
        return -1;
    int mismatches = 0;
    if (strcmp(spell_type_name(type), td->expect) != 0) {
        printf("MISMATCH %s: spell_type_of gives %s, not %s\n", td->name, spell_type_name(type),
               td->expect);
        mismatches++;
    }

    /* The rows' keys, from their text as the daemon's COPY reads it. */
    struct strset rowtexts = { 0 }, keys = { 0 };
    char **rows = NULL;
    size_t nrows = 0, changed = 0;
    snprintf(sql, sizeof sql, "SELECT col::text FROM %s WHERE col IS NOT NULL", table);
    if (!fetch_texts(home, sql, &rowtexts, true, &rows, &nrows))
        return -1;
    char *out = xmalloc(2 * 4096 + SPELL_SLACK);
    size_t outlen;
    bool guarded = type != SPELL_OTHER && type != SPELL_COLLATED;
    for (size_t i = 0; i < rowtexts.n; i++) {
        const char *rt = rowtexts.order[i];
        enum spell_verdict v = spell_key(type, rt, strlen(rt), out, spell_key_cap(type, strlen(rt)),
                                         &outlen);
        if (v != (guarded ? SPELL_KEY : SPELL_MAYBE)) {
            printf("MISMATCH %s: row ", td->name);
            print_escaped(stdout, rt);
            printf(" gives %s\n", spell_verdict_name(v));
            mismatches++;
            continue;
        }
        if (v != SPELL_KEY)
            continue;
        out[outlen] = '\0';
        if (outlen != strlen(rt) || memcmp(out, rt, outlen) != 0) {
            changed++;
            if (verbose) {
                printf("# %s row ", td->name);
                print_escaped(stdout, rt);
                printf(" has key ");
                print_escaped(stdout, out);
                printf("\n");
            }
        }
        set_add(&keys, out);
    }

    /* The spellings: from each row, from the server, and not from any row. */
    set_free(&spellings);
    for (size_t i = 0; i < rowtexts.n; i++)
        td->gen(rowtexts.order[i]);
    if (td->extra)
        td->extra();
    size_t handed = 0;
    for (size_t i = 0; i < nhand; i++)
        if (hand[i].type == type) {
            emit("%s", hand[i].in);
            handed++;
        }
    if (td->variants != NULL) {
        char *v = for_table(td->variants, table);
        struct strset more = { 0 };
        ok = fetch_texts(home, v, &more, false, NULL, NULL);
        free(v);
        if (!ok)
            return -1;
        for (size_t i = 0; i < more.n; i++) {
            emit("%s", more.order[i]);
            td->gen(more.order[i]);
        }
        set_free(&more);
    }
    size_t n = spellings.n;
    signed char *res_home = xmalloc(n), *res_away = xmalloc(n);
    if (!ask_all(home, table, spellings.order, n, res_home)
        || !ask_all(away, table, spellings.order, n, res_away))
        return -1;

    size_t count[3] = { 0, 0, 0 }, key_exist = 0, maybe_exist = 0, maybe_differ = 0;
    char *again = xmalloc(2 * 4096 + SPELL_SLACK);
    for (size_t i = 0; i < n; i++) {
        const char *s = spellings.order[i];
        size_t len = strlen(s), againlen;
        enum spell_verdict v = spell_key(type, s, len, out, spell_key_cap(type, len), &outlen);
        count[v]++;
        bool want = false, known = v != SPELL_MAYBE;
        if (v == SPELL_KEY) {
            out[outlen] = '\0';
            want = set_has(&keys, out);
            key_exist += want;
            /* The key is a fixed point. */
            enum spell_verdict v2 = spell_key(type, out, outlen, again,
                                              spell_key_cap(type, outlen), &againlen);
            if (v2 != SPELL_KEY || againlen != outlen || memcmp(again, out, outlen) != 0) {
                printf("MISMATCH %s: key of ", td->name);
                print_escaped(stdout, s);
                printf(" is no fixed point\n");
                mismatches++;
            }
        } else if (v == SPELL_MAYBE) {
            maybe_exist += res_home[i] == 1;
            maybe_differ += res_home[i] != res_away[i];
        }
        for (int side = 0; side < 2 && known; side++) {
            signed char got = side == 0 ? res_home[i] : res_away[i];
            if (got == (want ? 1 : 0))
                continue;
            printf("MISMATCH %s (%s session): ", td->name, side == 0 ? "pinned" : "foreign");
            print_escaped(stdout, s);
            printf(" is %s", spell_verdict_name(v));
            if (v == SPELL_KEY) {
                printf(" ");
                print_escaped(stdout, out);
                printf(" (%s the rows' keys)", want ? "in" : "not in");
            }
            printf(" but the server says %s\n", got == 1 ? "exists" : "absent");
            mismatches++;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%s type=%s rows=%zu row_keys_not_text=%zu spellings=%zu (hand-picked %zu) key=%zu"
           " (exist %zu) not_a_value=%zu maybe=%zu (exist %zu, sessions differ %zu) mismatches=%d"
           " seconds=%.1f\n",
           td->name, spell_type_name(type), nrows, changed, n, handed, count[SPELL_KEY], key_exist,
           count[SPELL_NOT_A_VALUE], count[SPELL_MAYBE], maybe_exist, maybe_differ, mismatches,
           (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
    fflush(stdout);
    for (size_t i = 0; i < nrows; i++)
        free(rows[i]);
    free(rows);
    free(out);
    free(again);
    free(res_home);
    free(res_away);
    set_free(&rowtexts);
    set_free(&keys);
    set_free(&spellings);
    return mismatches;
}

int main(int argc, char **argv)
{
    const char *conninfo = "";
    bool verbose = false;
    rng_state = 0x5eed5eed12345678u;
    int a = 1;
    for (; a < argc && argv[a][0] == '-'; a++) {
        if (strcmp(argv[a], "-d") == 0 && a + 1 < argc)
            conninfo = argv[++a];
        else if (strcmp(argv[a], "-s") == 0 && a + 1 < argc)
            rng_state = strtoull(argv[++a], NULL, 0) | 1;
        else if (strcmp(argv[a], "-v") == 0)
            verbose = true;
        else {
            fprintf(stderr, "usage: spelltool [-d CONNINFO] [-s SEED] [-v] [TYPE...]\n");
            return 2;
        }
    }
    char err[512];
    hand = spell_cases_read(spell_cases_path(), &nhand, err, sizeof err);
    if (hand == NULL) {
        fprintf(stderr, "spelltool: %s\n", err);
        return 1;
    }
    PGconn *home = connect_with(conninfo, LOADER_SESSION_SETTINGS);
    PGconn *away = home ? connect_with(conninfo, FOREIGN_SETTINGS) : NULL;
    if (away == NULL
        || !run(home, "SET client_min_messages = warning;"
                      "DO $$ BEGIN CREATE DOMAIN spell_posint8 AS int8 CHECK (VALUE > 0);"
                      " EXCEPTION WHEN duplicate_object THEN NULL; END $$")) {
        PQfinish(home);
        PQfinish(away);
        return 1;
    }
    /* A server built without ICU has no nondeterministic collation to test. */
    PGresult *r = PQexec(home, "CREATE COLLATION IF NOT EXISTS spell_ci"
                               " (provider = icu, locale = 'und-u-ks-level2', deterministic = false)");
    bool icu = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    int bad = 0;
    size_t done = 0;
    for (size_t k = 0; k < NTYPES; k++) {
        bool wanted = a == argc;
        for (int j = a; j < argc; j++)
            wanted |= strcmp(argv[j], types[k].name) == 0;
        if (!wanted)
            continue;
        if (!icu && strcmp(types[k].coltype, "text COLLATE spell_ci") == 0) {
            printf("%s skip (the server has no ICU)\n", types[k].name);
            continue;
        }
        int m = check_type(home, away, &types[k], verbose);
        if (m < 0) {
            bad = 1;
            break;
        }
        bad |= m > 0;
        done++;
    }
    if (done == 0 && !bad) {
        fprintf(stderr, "spelltool: no such type\n");
        bad = 1;
    }
    PQfinish(home);
    PQfinish(away);
    spell_cases_free(hand, nhand);
    return bad;
}
