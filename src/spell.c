/*
 * spell_key: what PostgreSQL 15's input function of the guarded column's
 * type would read from an ID, reduced to one key per value (spell.h has the
 * per-type table).  Each reader below follows the server function it names;
 * where the server's answer depends on something this process cannot see
 * (its locale, encoding, DateStyle, TimeZone, libc), the answer is MAYBE.
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spell.h"

/* Type OIDs of PostgreSQL's catalog (pg_type.dat); stable across versions. */
enum {
    OID_BOOL = 16, OID_BYTEA = 17, OID_NAME = 19, OID_INT8 = 20, OID_INT2 = 21,
    OID_INT4 = 23, OID_TEXT = 25, OID_OID = 26, OID_FLOAT4 = 700,
    OID_FLOAT8 = 701, OID_BPCHAR = 1042, OID_VARCHAR = 1043, OID_DATE = 1082,
    OID_TIME = 1083, OID_TIMESTAMP = 1114, OID_TIMESTAMPTZ = 1184,
    OID_INTERVAL = 1186, OID_NUMERIC = 1700, OID_UUID = 2950
};

#define NAMEDATALEN 64

enum spell_type spell_type_of(uint32_t base_oid, int32_t typmod, bool deterministic)
{
    (void)typmod;
    switch (base_oid) {
    case OID_TEXT:
    case OID_VARCHAR:
        return deterministic ? SPELL_TEXT : SPELL_COLLATED;
    case OID_NAME:
        return deterministic ? SPELL_NAME : SPELL_COLLATED;
    case OID_BPCHAR:
        return deterministic ? SPELL_BPCHAR : SPELL_COLLATED;
    case OID_INT2: return SPELL_INT2;
    case OID_INT4: return SPELL_INT4;
    case OID_INT8: return SPELL_INT8;
    case OID_OID: return SPELL_OID;
    case OID_UUID: return SPELL_UUID;
    case OID_NUMERIC: return SPELL_NUMERIC;
    case OID_FLOAT4: return SPELL_FLOAT4;
    case OID_FLOAT8: return SPELL_FLOAT8;
    case OID_BOOL: return SPELL_BOOL;
    case OID_DATE: return SPELL_DATE;
    case OID_TIMESTAMP: return SPELL_TIMESTAMP;
    case OID_TIMESTAMPTZ: return SPELL_TIMESTAMPTZ;
    case OID_TIME: return SPELL_TIME;
    case OID_INTERVAL: return SPELL_INTERVAL;
    case OID_BYTEA: return SPELL_BYTEA;
    default: return SPELL_OTHER;
    }
}

static const char *const type_names[SPELL_NTYPES] = {
    [SPELL_TEXT] = "text", [SPELL_NAME] = "name", [SPELL_BPCHAR] = "bpchar",
    [SPELL_COLLATED] = "text_nondeterministic", [SPELL_INT2] = "int2",
    [SPELL_INT4] = "int4", [SPELL_INT8] = "int8", [SPELL_OID] = "oid",
    [SPELL_UUID] = "uuid", [SPELL_NUMERIC] = "numeric", [SPELL_FLOAT4] = "float4",
    [SPELL_FLOAT8] = "float8", [SPELL_BOOL] = "bool", [SPELL_DATE] = "date",
    [SPELL_TIMESTAMP] = "timestamp", [SPELL_TIMESTAMPTZ] = "timestamptz",
    [SPELL_TIME] = "time", [SPELL_INTERVAL] = "interval", [SPELL_BYTEA] = "bytea",
    [SPELL_OTHER] = "other",
};

const char *spell_type_name(enum spell_type t)
{
    return (unsigned)t < SPELL_NTYPES ? type_names[t] : "unknown";
}

const char *spell_verdict_name(enum spell_verdict v)
{
    switch (v) {
    case SPELL_KEY: return "key";
    case SPELL_NOT_A_VALUE: return "not_a_value";
    case SPELL_MAYBE: return "maybe";
    }
    return "unknown";
}

size_t spell_key_cap(enum spell_type t, size_t len)
{
    switch (t) {
    case SPELL_BYTEA: return 2 * len + 2;
    case SPELL_INTERVAL: return len + 4 * SPELL_SLACK;
    default: return len + SPELL_SLACK;
    }
}

/* ------------------------------------------------------------ helpers -- */

static bool is_space(unsigned char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

static bool is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

/* Hex digit values, -1 for every other byte: one load per byte on the hot path. */
static const signed char hex_table[256] = {
    ['0'] = 1, ['1'] = 2, ['2'] = 3, ['3'] = 4, ['4'] = 5, ['5'] = 6, ['6'] = 7, ['7'] = 8,
    ['8'] = 9, ['9'] = 10, ['a'] = 11, ['b'] = 12, ['c'] = 13, ['d'] = 14, ['e'] = 15,
    ['f'] = 16, ['A'] = 11, ['B'] = 12, ['C'] = 13, ['D'] = 14, ['E'] = 15, ['F'] = 16,
};

static int hex_value(unsigned char c)
{
    return hex_table[c] - 1;        /* stored + 1 so that the zero fill means "none" */
}

static unsigned char lower(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? (unsigned char)(c + ('a' - 'A')) : c;
}

/*
 * Skip what the server's isspace() might skip from s[*i] on.  Bytes >= 0x80
 * are skipped too and flagged in *high: in the C and UTF-8 locales they are
 * no white space, so the server then stops there and refuses the input; a
 * single-byte locale may call one white space.  A parse that succeeds only
 * by skipping one is therefore MAYBE, and one that fails fails either way
 * (a non-space byte where white space or the end must be is a syntax error).
 */
static void skip_space(const unsigned char *s, size_t len, size_t *i, bool *high)
{
    while (*i < len && (is_space(s[*i]) || s[*i] >= 0x80)) {
        if (s[*i] >= 0x80)
            *high = true;
        (*i)++;
    }
}

/* The same from the end: the new end of s[start..*end). */
static void trim_space(const unsigned char *s, size_t start, size_t *end, bool *high)
{
    while (*end > start && (is_space(s[*end - 1]) || s[*end - 1] >= 0x80)) {
        if (s[*end - 1] >= 0x80)
            *high = true;
        (*end)--;
    }
}

/* pg_strncasecmp(s, word, strlen(word)) == 0 for s[0..len) not NUL-terminated. */
static bool starts_with_ci(const unsigned char *s, size_t len, const char *word)
{
    size_t n = strlen(word);
    if (len < n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (lower(s[i]) != (unsigned char)word[i])
            return false;
    return true;
}

/* Decimal digits of v into out (no sign); returns the length. */
static size_t put_u64(char *out, uint64_t v)
{
    char tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    for (size_t i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    return n;
}

static enum spell_verdict key_literal(const char *key, char *out, size_t *outlen)
{
    size_t n = strlen(key);
    memcpy(out, key, n);
    *outlen = n;
    return SPELL_KEY;
}

/* ----------------------------------------------------------- integers -- */

/*
 * pg_strtoint16/32/64 (numutils.c, PostgreSQL 15): ws, [+-], at least one
 * digit, digits, ws, end.  A magnitude beyond the type is "out of range"
 * the moment a digit overflows, before anything after the digits is looked
 * at; either way an error.
 */
static enum spell_verdict spell_int(const unsigned char *s, size_t len, uint64_t posmax,
                                    char *out, size_t *outlen)
{
    size_t i = 0;
    bool high = false, neg = false;
    skip_space(s, len, &i, &high);
    if (i < len && (s[i] == '-' || s[i] == '+'))
        neg = s[i++] == '-';
    if (i >= len || !is_digit(s[i]))
        return SPELL_NOT_A_VALUE;
    uint64_t limit = neg ? posmax + 1 : posmax, mag = 0;
    uint64_t lim10 = limit / 10;
    unsigned limd = (unsigned)(limit % 10);
    while (i + 1 < len && s[i] == '0' && is_digit(s[i + 1]))
        i++;
    size_t first = i;       /* the key's digits are the input's from here */
    for (; i < len && is_digit(s[i]); i++) {
        unsigned d = s[i] - '0';
        if (mag >= lim10 && (mag > lim10 || d > limd))
            return SPELL_NOT_A_VALUE;
        mag = mag * 10 + d;
    }
    size_t ndigits = i - first;
    skip_space(s, len, &i, &high);
    if (i != len)
        return SPELL_NOT_A_VALUE;
    if (high)
        return SPELL_MAYBE;
    size_t n = 0;
    if (neg && mag != 0)
        out[n++] = '-';
    memcpy(out + n, s + first, ndigits);
    *outlen = n + ndigits;
    return SPELL_KEY;
}

/*
 * oidin (oid.c): strtoul(s, &end, 10) (ws, [+-], digits; a '-' negates in
 * unsigned long, a magnitude beyond ULONG_MAX is ERANGE), then only ws.
 * The result is kept if it equals its 32-bit value after either unsigned
 * or signed extension, so -2147483648..-1 read as 2^32 + value.
 */
static enum spell_verdict spell_oid(const unsigned char *s, size_t len, char *out, size_t *outlen)
{
    size_t i = 0;
    bool high = false, neg = false;
    skip_space(s, len, &i, &high);
    if (i < len && (s[i] == '-' || s[i] == '+'))
        neg = s[i++] == '-';
    if (i >= len || !is_digit(s[i]))
        return SPELL_NOT_A_VALUE;
    uint64_t mag = 0;
    for (; i < len && is_digit(s[i]); i++) {
        unsigned d = s[i] - '0';
        if (mag > (UINT64_MAX - d) / 10)
            return SPELL_NOT_A_VALUE;
        mag = mag * 10 + d;
    }
    skip_space(s, len, &i, &high);
    if (i != len)
        return SPELL_NOT_A_VALUE;
    uint64_t cvt = neg ? 0 - mag : mag;
    if (cvt > UINT32_MAX && cvt < UINT64_C(0xFFFFFFFF80000000))
        return SPELL_NOT_A_VALUE;
    if (high)
        return SPELL_MAYBE;
    *outlen = put_u64(out, (uint32_t)cvt);
    return SPELL_KEY;
}

/* --------------------------------------------------------------- uuid -- */

/*
 * string_to_uuid (uuid.c): an optional '{', 16 pairs of hex digits with an
 * optional '-' after every second pair but the last, the matching '}', and
 * nothing else: no white space.  isxdigit() is 0-9a-fA-F in every locale
 * (POSIX allows no more), so nothing here depends on the server.
 */
static enum spell_verdict spell_uuid(const unsigned char *s, size_t len, char *out, size_t *outlen)
{
    static const char hex[] = "0123456789abcdef";
    size_t i = 0, n = 0;
    bool braces = len > 0 && s[0] == '{';
    if (braces)
        i = 1;
    for (int b = 0; b < 16; b++) {
        if (i + 2 > len)
            return SPELL_NOT_A_VALUE;
        int hi = hex_value(s[i]), lo = hex_value(s[i + 1]);
        if (hi < 0 || lo < 0)
            return SPELL_NOT_A_VALUE;
        if (b == 4 || b == 6 || b == 8 || b == 10)
            out[n++] = '-';
        out[n++] = hex[hi];
        out[n++] = hex[lo];
        i += 2;
        if (i < len && s[i] == '-' && b % 2 == 1 && b < 15)
            i++;
    }
    if (braces) {
        if (i >= len || s[i] != '}')
            return SPELL_NOT_A_VALUE;
        i++;
    }
    if (i != len)
        return SPELL_NOT_A_VALUE;
    *outlen = n;
    return SPELL_KEY;
}

/* ------------------------------------------------------------ numeric -- */

/* Exponents numeric_in refuses ("value overflows numeric format"). */
#define NUMERIC_EXP_LIMIT 1073741823L   /* INT_MAX / 2 */
#define NUMERIC_DSCALE_MAX 0x3FFF
#define NUMERIC_MAX_POINT (4LL * 32767 + 4)   /* digits before the point at weight 32767 */

/*
 * numeric_in and set_var_from_str (numeric.c): ws; NaN, [+-]Infinity or
 * [+-]inf in any case; or [+-], [.]digit, digits with at most one '.', an
 * optional exponent read by strtol (ws, [+-], digits); then ws.  Equality
 * ignores the scale, so the key is the value without redundant zeros.
 */
static enum spell_verdict spell_numeric(const unsigned char *s, size_t len, char *out,
                                        size_t cap, size_t *outlen)
{
    static const struct { const char *word, *key; } specials[] = {
        /* numeric_in's order: "infinity" before "inf". */
        { "nan", "NaN" }, { "infinity", "Infinity" }, { "+infinity", "Infinity" },
        { "-infinity", "-Infinity" }, { "inf", "Infinity" }, { "+inf", "Infinity" },
        { "-inf", "-Infinity" },
    };
    size_t i = 0;
    bool high = false;
    skip_space(s, len, &i, &high);
    for (size_t k = 0; k < sizeof specials / sizeof specials[0]; k++) {
        if (!starts_with_ci(s + i, len - i, specials[k].word))
            continue;
        i += strlen(specials[k].word);
        skip_space(s, len, &i, &high);
        if (i != len)
            return SPELL_NOT_A_VALUE;
        return high ? SPELL_MAYBE : key_literal(specials[k].key, out, outlen);
    }

    bool neg = false, have_dp = false;
    if (i < len && (s[i] == '+' || s[i] == '-'))
        neg = s[i++] == '-';
    if (i < len && s[i] == '.') {
        have_dp = true;
        i++;
    }
    if (i >= len || !is_digit(s[i]))
        return SPELL_NOT_A_VALUE;
    /* Digits go to out as they come; intdigits of them before the point. */
    size_t ndig = 0, intdigits = 0;
    for (; i < len; i++) {
        if (is_digit(s[i])) {
            out[ndig++] = (char)s[i];
            if (!have_dp)
                intdigits++;
        } else if (s[i] == '.') {
            if (have_dp)
                return SPELL_NOT_A_VALUE;
            have_dp = true;
        } else {
            break;
        }
    }
    long exponent = 0;
    if (i < len && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        /* strtol: ws, [+-], digits; saturates (ERANGE, unchecked). */
        skip_space(s, len, &i, &high);
        bool eneg = false;
        if (i < len && (s[i] == '+' || s[i] == '-'))
            eneg = s[i++] == '-';
        if (i >= len || !is_digit(s[i]))
            return SPELL_NOT_A_VALUE;
        for (; i < len && is_digit(s[i]); i++)
            if (exponent < NUMERIC_EXP_LIMIT)
                exponent = exponent * 10 + (s[i] - '0');
        if (exponent >= NUMERIC_EXP_LIMIT)
            return SPELL_NOT_A_VALUE;
        if (eneg)
            exponent = -exponent;
    }
    skip_space(s, len, &i, &high);
    if (i != len)
        return SPELL_NOT_A_VALUE;
    if (high)
        return SPELL_MAYBE;

    /*
     * make_result refuses what its int16 fields cannot hold: a display
     * scale above NUMERIC_DSCALE_MAX (even for zero: "0e-99999"), a first
     * digit beyond base-10000 weight 32767 (10^131072).
     */
    long long dscale = (long long)(ndig - intdigits) - exponent;
    if (dscale > NUMERIC_DSCALE_MAX)
        return SPELL_NOT_A_VALUE;
    size_t lz = 0, end = ndig;
    while (lz < ndig && out[lz] == '0')
        lz++;
    if (lz == ndig)
        return key_literal("0", out, outlen);
    while (out[end - 1] == '0')
        end--;
    size_t nsig = end - lz;
    /* Digits of the significand before the point (may be <= 0 or > nsig). */
    long long point = (long long)intdigits - (long long)lz + exponent;
    if (point > NUMERIC_MAX_POINT)
        return SPELL_NOT_A_VALUE;
    size_t sign = neg ? 1 : 0;
    long long total = point <= 0 ? 2 - point + (long long)nsig
                    : point >= (long long)nsig ? point
                    : (long long)nsig + 1;
    total += (long long)sign;
    if (total > (long long)len + SPELL_SLACK || (size_t)total > cap)
        return SPELL_MAYBE;
    if (point <= 0) {
        size_t zeros = (size_t)-point;
        memmove(out + sign + 2 + zeros, out + lz, nsig);
        memcpy(out + sign, "0.", 2);
        memset(out + sign + 2, '0', zeros);
    } else if (point >= (long long)nsig) {
        memmove(out + sign, out + lz, nsig);
        memset(out + sign + nsig, '0', (size_t)point - nsig);
    } else {
        size_t p = (size_t)point;
        memmove(out + sign, out + lz, nsig);
        memmove(out + sign + p + 1, out + sign + p, nsig - p);
        out[sign + p] = '.';
    }
    if (neg)
        out[0] = '-';
    *outlen = (size_t)total;
    return SPELL_KEY;
}

/* -------------------------------------------------------------- float -- */

/* Longest float input read exactly; longer ones are MAYBE (strtod may allocate). */
#define FLOAT_MAX_INPUT 127

/*
 * The key of a finite, nonzero value: PostgreSQL's output with
 * extra_float_digits > 0 (the shortest digits that read back as the value,
 * fixed notation for decimal exponents -4 <= e < 15 for float8 and < 6 for
 * float4, else d.ddde+XX), the shortest digits found by asking printf for
 * 1, 2, ... significant digits until they read back.
 */
static size_t float_text(double v, bool single, char *out)
{
    char buf[40], digits[20];
    int maxp = single ? 9 : 17, p, exp10 = 0;
    for (p = 1; p <= maxp; p++) {
        snprintf(buf, sizeof buf, "%.*e", p - 1, v);
        if (single ? strtof(buf, NULL) == (float)v : strtod(buf, NULL) == v)
            break;
    }
    if (p > maxp)
        p = maxp;           /* unreachable: 9 and 17 digits always read back */
    /* buf is "-d.ddde-XX": take the digits and the exponent apart. */
    size_t nd = 0;
    const char *c = buf;
    bool neg = *c == '-';
    if (neg)
        c++;
    for (; *c != 'e'; c++)
        if (is_digit((unsigned char)*c))
            digits[nd++] = *c;
    exp10 = atoi(c + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    size_t n = 0;
    if (neg)
        out[n++] = '-';
    if (exp10 >= -4 && exp10 < (single ? 6 : 15)) {
        if (exp10 < 0) {
            out[n++] = '0';
            out[n++] = '.';
            for (int z = 0; z < -exp10 - 1; z++)
                out[n++] = '0';
            memcpy(out + n, digits, nd);
            n += nd;
        } else {
            for (size_t k = 0; k < (size_t)exp10 + 1; k++)
                out[n++] = k < nd ? digits[k] : '0';
            if (nd > (size_t)exp10 + 1) {
                out[n++] = '.';
                memcpy(out + n, digits + exp10 + 1, nd - (size_t)exp10 - 1);
                n += nd - (size_t)exp10 - 1;
            }
        }
    } else {
        out[n++] = digits[0];
        if (nd > 1) {
            out[n++] = '.';
            memcpy(out + n, digits + 1, nd - 1);
            n += nd - 1;
        }
        n += (size_t)sprintf(out + n, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
    }
    return n;
}

/*
 * float4in/float8in (float.c): ws; strtof/strtod; if that reads nothing or
 * sets errno: NaN, [+-]Infinity, [+-]inf in any case, or for ERANGE a value
 * that is neither 0 nor huge (a denormal), else an error; then ws.
 */
static enum spell_verdict spell_float(const unsigned char *s, size_t len, bool single,
                                      char *out, size_t *outlen)
{
    size_t i = 0, end = len;
    bool high = false;
    skip_space(s, len, &i, &high);
    if (i == len)
        return SPELL_NOT_A_VALUE;
    /*
     * strtod reads C99's forms: decimal, hex, inf, infinity, nan and
     * nan(chars), signed.  Its own whitespace skip is moot (done above);
     * what it leaves must be ws to the end.
     */
    trim_space(s, i, &end, &high);
    size_t n = end - i;
    if (n > FLOAT_MAX_INPUT)
        return SPELL_MAYBE;
    char buf[FLOAT_MAX_INPUT + 1];
    memcpy(buf, s + i, n);
    buf[n] = '\0';
    /* A NUL inside: the server would have read a shorter string. */
    if (memchr(buf, '\0', n) != NULL)
        return SPELL_NOT_A_VALUE;
    char *stop;
    double v;
    errno = 0;
    if (single)
        v = strtof(buf, &stop);
    else
        v = strtod(buf, &stop);
    int err = errno;
    if (stop == buf || err != 0) {
        const unsigned char *u = (const unsigned char *)buf;
        if (starts_with_ci(u, n, "nan")) {
            v = NAN;
            stop = buf + 3;
        } else if (starts_with_ci(u, n, "infinity")) {
            v = INFINITY;
            stop = buf + 8;
        } else if (starts_with_ci(u, n, "+infinity")) {
            v = INFINITY;
            stop = buf + 9;
        } else if (starts_with_ci(u, n, "-infinity")) {
            v = -INFINITY;
            stop = buf + 9;
        } else if (starts_with_ci(u, n, "inf")) {
            v = INFINITY;
            stop = buf + 3;
        } else if (starts_with_ci(u, n, "+inf")) {
            v = INFINITY;
            stop = buf + 4;
        } else if (starts_with_ci(u, n, "-inf")) {
            v = -INFINITY;
            stop = buf + 4;
        } else if (err == ERANGE) {
            if (v == 0.0 || isinf(v))
                return SPELL_NOT_A_VALUE;
        } else {
            return SPELL_NOT_A_VALUE;
        }
    }
    /*
     * Only trailing ws was trimmed, so strtod must have read to the end.
     * Bytes >= 0x80 in the middle are no number's and no white space's
     * bytes, so stopping before them is a syntax error either way.
     */
    if (stop != buf + n)
        return SPELL_NOT_A_VALUE;
    if (high)
        return SPELL_MAYBE;
    if (isnan(v))
        return key_literal("NaN", out, outlen);
    if (isinf(v))
        return key_literal(v > 0 ? "Infinity" : "-Infinity", out, outlen);
    if (v == 0.0)
        return key_literal("0", out, outlen);
    *outlen = float_text(v, single, out);
    return SPELL_KEY;
}

/* --------------------------------------------------------------- bool -- */

/*
 * boolin and parse_bool_with_len (bool.c): ws trimmed from both ends, then
 * a prefix of true, false, yes, no in any case (at least the first
 * letter), "on", "of"/"off", "1" or "0".
 */
static enum spell_verdict spell_bool(const unsigned char *s, size_t len, char *out,
                                     size_t *outlen)
{
    size_t i = 0, end = len;
    bool high = false;
    skip_space(s, len, &i, &high);
    trim_space(s, i, &end, &high);
    const unsigned char *v = s + i;
    size_t n = end - i;
    static const struct { const char *word; size_t min; bool value; } words[] = {
        { "true", 1, true }, { "false", 1, false }, { "yes", 1, true },
        { "no", 1, false }, { "on", 2, true }, { "off", 2, false },
        { "1", 1, true }, { "0", 1, false },
    };
    for (size_t k = 0; k < sizeof words / sizeof words[0]; k++) {
        size_t wl = strlen(words[k].word);
        if (n < words[k].min || n > wl)
            continue;
        bool match = true;
        for (size_t j = 0; j < n && match; j++)
            match = lower(v[j]) == (unsigned char)words[k].word[j];
        if (match) {
            if (high)
                return SPELL_MAYBE;
            return key_literal(words[k].value ? "true" : "false", out, outlen);
        }
    }
    return SPELL_NOT_A_VALUE;
}

/* -------------------------------------------------------------- bytea -- */

/*
 * byteain (varlena.c) and hex_decode (encode.c): "\x" then pairs of hex
 * digits, with ' ', \t, \n, \r skipped between pairs; else the escape
 * format: "\\" is a backslash, "\ooo" (first digit 0-3) an octal byte, any
 * other backslash an error, any other byte itself.
 */
static enum spell_verdict spell_bytea(const unsigned char *s, size_t len, char *out,
                                      size_t *outlen)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = 0;
    out[n++] = '\\';
    out[n++] = 'x';
    if (len >= 2 && s[0] == '\\' && s[1] == 'x') {
        for (size_t i = 2; i < len;) {
            if (s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r') {
                i++;
                continue;
            }
            if (i + 1 >= len)
                return SPELL_NOT_A_VALUE;
            int hi = hex_value(s[i]), lo = hex_value(s[i + 1]);
            if (hi < 0 || lo < 0)
                return SPELL_NOT_A_VALUE;
            out[n++] = hex[hi];
            out[n++] = hex[lo];
            i += 2;
        }
        *outlen = n;
        return SPELL_KEY;
    }
    bool high = false;
    for (size_t i = 0; i < len;) {
        unsigned byte;
        if (s[i] != '\\') {
            if (s[i] == '\0')
                return SPELL_NOT_A_VALUE;
            high |= s[i] >= 0x80;
            byte = s[i++];
        } else if (i + 3 < len && s[i + 1] >= '0' && s[i + 1] <= '3' && s[i + 2] >= '0'
                   && s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7') {
            byte = (unsigned)(s[i + 1] - '0') * 64 + (unsigned)(s[i + 2] - '0') * 8
                   + (unsigned)(s[i + 3] - '0');
            i += 4;
        } else if (i + 1 < len && s[i + 1] == '\\') {
            byte = '\\';
            i += 2;
        } else {
            return SPELL_NOT_A_VALUE;
        }
        out[n++] = hex[byte >> 4];
        out[n++] = hex[byte & 15];
    }
    if (high)
        return SPELL_MAYBE;
    *outlen = n;
    return SPELL_KEY;
}

/* ----------------------------------------------------- dates and times -- */

/*
 * For these the key is the input itself when the input is exactly what the
 * column prints for some value, which PostgreSQL reads back as that value
 * under any DateStyle (a year of three or more digits comes first in every
 * field order).  The check reads the fields strictly and prints them again
 * the way the server does; the input must come back byte for byte.
 */

/* Read exactly n digits at s[*i]. */
static bool fixed_digits(const unsigned char *s, size_t len, size_t *i, int n, int *v)
{
    *v = 0;
    for (int k = 0; k < n; k++, (*i)++) {
        if (*i >= len || !is_digit(s[*i]))
            return false;
        *v = *v * 10 + (s[*i] - '0');
    }
    return true;
}

static bool expect(const unsigned char *s, size_t len, size_t *i, const char *lit)
{
    size_t n = strlen(lit);
    if (len - *i < n || memcmp(s + *i, lit, n) != 0)
        return false;
    *i += n;
    return true;
}

static bool leap(long astro_year)
{
    return astro_year % 4 == 0 && (astro_year % 100 != 0 || astro_year % 400 == 0);
}

static int month_days(long astro_year, int month)
{
    static const int days[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
    return month == 2 && leap(astro_year) ? 29 : days[month - 1];
}

struct stamp {
    long year;          /* as printed: 1.. */
    int month, day;
    bool bc;
};

/*
 * "YYYY-MM-DD" as EncodeDateOnly/EncodeDateTime print it: the year zero
 * padded to four digits (more digits without a leading zero), a real
 * calendar day.  " BC" is read by the caller, after the time and zone.
 */
static bool read_date(const unsigned char *s, size_t len, size_t *i, struct stamp *st)
{
    size_t start = *i;
    long year = 0;
    while (*i < len && is_digit(s[*i]) && *i - start < 8)
        year = year * 10 + (s[(*i)++] - '0');
    size_t ylen = *i - start;
    if (ylen < 4 || (ylen > 4 && s[start] == '0') || year < 1)
        return false;
    st->year = year;
    return expect(s, len, i, "-") && fixed_digits(s, len, i, 2, &st->month)
           && expect(s, len, i, "-") && fixed_digits(s, len, i, 2, &st->day)
           && st->month >= 1 && st->month <= 12 && st->day >= 1;
}

/* The day's validity and the type's range, once " BC" is known. */
static bool date_valid(const struct stamp *st, long maxyear)
{
    long astro = st->bc ? 1 - st->year : st->year;
    if (st->day > month_days(astro, st->month))
        return false;
    if (st->bc)     /* the first day is 4713-11-24 BC for every type */
        return st->year < 4713
               || (st->year == 4713 && (st->month > 11 || (st->month == 11 && st->day >= 24)));
    return st->year <= maxyear;
}

/*
 * "HH:MM:SS" and a fraction of 1 to 6 digits without a trailing zero, as
 * AppendSeconds prints it.  hour_max is 23 (24:00:00 is the caller's).
 */
static bool read_time(const unsigned char *s, size_t len, size_t *i, int hour_max, int *hour)
{
    int min, sec;
    if (!fixed_digits(s, len, i, 2, hour) || !expect(s, len, i, ":")
        || !fixed_digits(s, len, i, 2, &min) || !expect(s, len, i, ":")
        || !fixed_digits(s, len, i, 2, &sec))
        return false;
    if (*hour > hour_max || min > 59 || sec > 59)
        return false;
    if (*i < len && s[*i] == '.') {
        size_t start = ++*i;
        while (*i < len && is_digit(s[*i]) && *i - start < 7)
            (*i)++;
        size_t n = *i - start;
        if (n == 0 || n > 6 || s[*i - 1] == '0')
            return false;
    }
    return true;
}

static enum spell_verdict key_self(const unsigned char *s, size_t len, char *out,
                                   size_t *outlen)
{
    memcpy(out, s, len);
    *outlen = len;
    return SPELL_KEY;
}

static bool is_infinity(const unsigned char *s, size_t len)
{
    return (len == 8 && memcmp(s, "infinity", 8) == 0)
           || (len == 9 && memcmp(s, "-infinity", 9) == 0);
}

/* date: "YYYY-MM-DD[ BC]" within 4713-11-24 BC .. 5874897-12-31, or (-)infinity. */
static enum spell_verdict spell_date(const unsigned char *s, size_t len, char *out,
                                     size_t *outlen)
{
    if (is_infinity(s, len))
        return key_self(s, len, out, outlen);
    size_t i = 0;
    struct stamp st;
    if (!read_date(s, len, &i, &st))
        return SPELL_MAYBE;
    st.bc = expect(s, len, &i, " BC");
    if (i != len || !date_valid(&st, 5874897))
        return SPELL_MAYBE;
    return key_self(s, len, out, outlen);
}

/*
 * timestamp: "YYYY-MM-DD HH:MM:SS[.f][ BC]"; timestamptz the same with
 * "+00" (TimeZone UTC) before " BC", within 4713-11-24 BC .. 294276-12-31
 * 23:59:59.999999 (UTC).
 */
static enum spell_verdict spell_timestamp(const unsigned char *s, size_t len, bool tz,
                                          char *out, size_t *outlen)
{
    if (is_infinity(s, len))
        return key_self(s, len, out, outlen);
    size_t i = 0;
    int hour;
    struct stamp st;
    if (!read_date(s, len, &i, &st) || !expect(s, len, &i, " ")
        || !read_time(s, len, &i, 23, &hour))
        return SPELL_MAYBE;
    if (tz && !expect(s, len, &i, "+00"))
        return SPELL_MAYBE;
    st.bc = expect(s, len, &i, " BC");
    if (i != len || !date_valid(&st, 294276))
        return SPELL_MAYBE;
    return key_self(s, len, out, outlen);
}

/* time: "HH:MM:SS[.f]" up to 23:59:59.999999, or exactly "24:00:00". */
static enum spell_verdict spell_time(const unsigned char *s, size_t len, char *out,
                                     size_t *outlen)
{
    size_t i = 0;
    int hour;
    if (len == 8 && memcmp(s, "24:00:00", 8) == 0)
        return key_self(s, len, out, outlen);
    if (!read_time(s, len, &i, 23, &hour) || i != len)
        return SPELL_MAYBE;
    return key_self(s, len, out, outlen);
}

/* ----------------------------------------------------------- interval -- */

#define USECS_PER_SEC INT64_C(1000000)
#define USECS_PER_MINUTE (60 * USECS_PER_SEC)
#define USECS_PER_HOUR (60 * USECS_PER_MINUTE)
#define USECS_PER_DAY (24 * USECS_PER_HOUR)

struct interval {
    int32_t month, day;
    int64_t time;       /* microseconds */
};

/* Decimal digits at s[*i] into *v, at most lim; false if none or more. */
static bool read_digits(const unsigned char *s, size_t len, size_t *i, uint64_t lim, uint64_t *v)
{
    if (*i >= len || !is_digit(s[*i]))
        return false;
    uint64_t m = 0;
    for (; *i < len && is_digit(s[*i]); (*i)++) {
        unsigned d = s[*i] - '0';
        if (m > (lim - d) / 10)
            return false;
        m = m * 10 + d;
    }
    *v = m;
    return true;
}

/* [+-] then digits, within the range of a signed type of that many bits. */
static bool read_signed(const unsigned char *s, size_t len, size_t *i, int bits, int64_t *v)
{
    bool neg = false;
    if (*i < len && (s[*i] == '-' || s[*i] == '+'))
        neg = s[(*i)++] == '-';
    uint64_t m, lim = (UINT64_C(1) << (bits - 1)) - (neg ? 0 : 1);
    if (!read_digits(s, len, i, lim, &m))
        return false;
    *v = neg ? (int64_t)(0 - m) : (int64_t)m;
    return true;
}

/*
 * Read the fields of a postgres-style interval loosely: "[+-]N year(s)",
 * "[+-]N mon(s)", "[+-]N day(s)", each at most once and in that order,
 * then "[+-]H:MM:SS[.f]", separated by single spaces.  Whether the text is
 * canonical is decided by printing the value again.
 */
static bool read_interval(const unsigned char *s, size_t len, struct interval *iv)
{
    static const char *const units[] = { "year", "mon", "day" };
    int64_t field[3] = { 0, 0, 0 };
    size_t i = 0;
    int next = 0;
    while (i < len) {
        size_t save = i;
        if (i > 0 && !expect(s, len, &i, " "))
            return false;
        int64_t v;
        if (!read_signed(s, len, &i, 32, &v) || !expect(s, len, &i, " ")) {
            i = save;           /* the time, or junk */
            break;
        }
        int u = next;
        while (u < 3 && !expect(s, len, &i, units[u]))
            u++;
        if (u == 3)
            return false;
        expect(s, len, &i, "s");
        field[u] = v;
        next = u + 1;
    }
    int64_t months = field[0] * 12 + field[1];
    if (months < INT32_MIN || months > INT32_MAX)
        return false;
    iv->month = (int32_t)months;
    iv->day = (int32_t)field[2];
    iv->time = 0;
    if (i == len)
        return true;
    if (i > 0 && !expect(s, len, &i, " "))
        return false;
    bool neg = false;
    if (i < len && (s[i] == '-' || s[i] == '+'))
        neg = s[i++] == '-';
    uint64_t hour, frac = 0;
    int min, sec;
    if (!read_digits(s, len, &i, INT64_MAX / USECS_PER_HOUR, &hour)
        || !expect(s, len, &i, ":") || !fixed_digits(s, len, &i, 2, &min)
        || !expect(s, len, &i, ":") || !fixed_digits(s, len, &i, 2, &sec))
        return false;
    if (i < len && s[i] == '.') {
        int nd = 0;
        for (i++; i < len && is_digit(s[i]) && nd < 6; i++, nd++)
            frac = frac * 10 + (s[i] - '0');
        if (nd == 0)
            return false;
        for (; nd < 6; nd++)
            frac *= 10;
    }
    if (i != len || min > 59 || sec > 59)
        return false;
    /* The magnitude may be 2^63 when negative (INT64_MIN microseconds). */
    uint64_t mag = hour * (uint64_t)USECS_PER_HOUR + (uint64_t)min * USECS_PER_MINUTE
                   + (uint64_t)sec * USECS_PER_SEC + frac;
    if (mag > (uint64_t)INT64_MAX + (neg ? 1 : 0))
        return false;
    iv->time = neg ? (int64_t)(0 - mag) : (int64_t)mag;
    return true;
}

/* One nonzero field as AddPostgresIntPart prints it. */
static size_t put_part(char *out, int64_t value, const char *unit, bool *is_zero,
                       bool *is_before)
{
    if (value == 0)
        return 0;
    int n = sprintf(out, "%s%s%lld %s%s", *is_zero ? "" : " ",
                    *is_before && value > 0 ? "+" : "", (long long)value, unit,
                    value != 1 ? "s" : "");
    *is_before = value < 0;
    *is_zero = false;
    return (size_t)n;
}

/* EncodeInterval, IntervalStyle postgres (PostgreSQL 15's datetime.c). */
static size_t print_interval(const struct interval *iv, char *out)
{
    bool is_zero = true, is_before = false;
    size_t n = 0;
    int64_t t = iv->time;
    int64_t hour = t / USECS_PER_HOUR;
    t -= hour * USECS_PER_HOUR;
    int64_t min = t / USECS_PER_MINUTE;
    t -= min * USECS_PER_MINUTE;
    int64_t sec = t / USECS_PER_SEC;
    int64_t fsec = t - sec * USECS_PER_SEC;
    n += put_part(out + n, iv->month / 12, "year", &is_zero, &is_before);
    n += put_part(out + n, iv->month % 12, "mon", &is_zero, &is_before);
    n += put_part(out + n, iv->day, "day", &is_zero, &is_before);
    if (is_zero || hour != 0 || min != 0 || sec != 0 || fsec != 0) {
        bool minus = hour < 0 || min < 0 || sec < 0 || fsec < 0;
        n += (size_t)sprintf(out + n, "%s%s%02lld:%02lld:%02lld", is_zero ? "" : " ",
                             minus ? "-" : is_before ? "+" : "",
                             (long long)(hour < 0 ? -hour : hour),
                             (long long)(min < 0 ? -min : min),
                             (long long)(sec < 0 ? -sec : sec));
        if (fsec != 0) {
            char frac[24];
            snprintf(frac, sizeof frac, "%06lld", (long long)(fsec < 0 ? -fsec : fsec));
            int nd = 6;
            while (frac[nd - 1] == '0')
                nd--;
            out[n++] = '.';
            memcpy(out + n, frac, (size_t)nd);
            n += (size_t)nd;
        }
    }
    return n;
}

/* The longest postgres-style interval text, with room to spare. */
#define INTERVAL_TEXT_MAX 128

/* trunc(a / b) clamped to int32. */
static int32_t div_clamp32(__int128 a, int64_t b)
{
    __int128 q = a / b;
    return q > INT32_MAX ? INT32_MAX : q < INT32_MIN ? INT32_MIN : (int32_t)q;
}

/*
 * Intervals are equal when interval_cmp_value's span is (months of 30
 * days, days of 24 hours, then microseconds): "1 mon" = "30 days" =
 * "720:00:00".  The key is the text of one interval per span, taking whole
 * months first, then whole days, the rest as time ("30 days" and
 * "720:00:00" have the key "1 mon"), so a key is itself a canonical
 * interval text and spell_key gives it back.  The clamps keep it a valid
 * interval at the extremes of the range.
 */
static enum spell_verdict spell_interval(const unsigned char *s, size_t len, char *out,
                                         size_t *outlen)
{
    struct interval iv, rep;
    char again[INTERVAL_TEXT_MAX];
    if (len >= INTERVAL_TEXT_MAX || !read_interval(s, len, &iv))
        return SPELL_MAYBE;
    size_t n = print_interval(&iv, again);
    if (n != len || memcmp(again, s, len) != 0)
        return SPELL_MAYBE;
    __int128 span = ((__int128)iv.month * 30 + iv.day) * USECS_PER_DAY + iv.time;
    rep.month = div_clamp32(span, 30 * USECS_PER_DAY);
    span -= (__int128)rep.month * 30 * USECS_PER_DAY;
    rep.day = div_clamp32(span, USECS_PER_DAY);
    span -= (__int128)rep.day * USECS_PER_DAY;
    rep.time = (int64_t)span;      /* fits: at most iv's own fields' worth */
    *outlen = print_interval(&rep, out);
    return SPELL_KEY;
}

/* --------------------------------------------------------------- text -- */

static enum spell_verdict spell_name(const unsigned char *s, size_t len, char *out,
                                     size_t *outlen)
{
    if (len < NAMEDATALEN)
        return key_self(s, len, out, outlen);
    /* namein clips to 63 bytes at a character boundary of the server encoding. */
    for (size_t i = 0; i < len; i++)
        if (s[i] >= 0x80)
            return SPELL_MAYBE;
    return key_self(s, NAMEDATALEN - 1, out, outlen);
}

static enum spell_verdict spell_bpchar(const unsigned char *s, size_t len, char *out,
                                       size_t *outlen)
{
    while (len > 0 && s[len - 1] == ' ')
        len--;
    return key_self(s, len, out, outlen);
}

/* ---------------------------------------------------------- spell_key -- */

enum spell_verdict spell_key(enum spell_type t, const char *in, size_t len, char *out,
                             size_t cap, size_t *outlen)
{
    const unsigned char *s = (const unsigned char *)in;
    int saved_errno = errno;    /* strtod sets it; callers need not know */
    *outlen = 0;
    if (cap < spell_key_cap(t, len))
        return SPELL_MAYBE;
    enum spell_verdict v;
    switch (t) {
    case SPELL_TEXT: v = key_self(s, len, out, outlen); break;
    case SPELL_NAME: v = spell_name(s, len, out, outlen); break;
    case SPELL_BPCHAR: v = spell_bpchar(s, len, out, outlen); break;
    case SPELL_INT2: v = spell_int(s, len, INT16_MAX, out, outlen); break;
    case SPELL_INT4: v = spell_int(s, len, INT32_MAX, out, outlen); break;
    case SPELL_INT8: v = spell_int(s, len, INT64_MAX, out, outlen); break;
    case SPELL_OID: v = spell_oid(s, len, out, outlen); break;
    case SPELL_UUID: v = spell_uuid(s, len, out, outlen); break;
    case SPELL_NUMERIC: v = spell_numeric(s, len, out, cap, outlen); break;
    case SPELL_FLOAT4: v = spell_float(s, len, true, out, outlen); break;
    case SPELL_FLOAT8: v = spell_float(s, len, false, out, outlen); break;
    case SPELL_BOOL: v = spell_bool(s, len, out, outlen); break;
    case SPELL_DATE: v = spell_date(s, len, out, outlen); break;
    case SPELL_TIMESTAMP: v = spell_timestamp(s, len, false, out, outlen); break;
    case SPELL_TIMESTAMPTZ: v = spell_timestamp(s, len, true, out, outlen); break;
    case SPELL_TIME: v = spell_time(s, len, out, outlen); break;
    case SPELL_INTERVAL: v = spell_interval(s, len, out, outlen); break;
    case SPELL_BYTEA: v = spell_bytea(s, len, out, outlen); break;
    case SPELL_COLLATED:
    case SPELL_OTHER:
    default: v = SPELL_MAYBE; break;
    }
    if (v != SPELL_KEY)
        *outlen = 0;
    errno = saved_errno;
    return v;
}
