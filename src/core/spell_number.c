/*
 * spell_key's readers of numbers and bytes: the integer types, oid, uuid,
 * numeric, float4/float8, bool and bytea, each following the server input
 * function it names (spell.c says how the verdicts are chosen).
 */
#include "spell_int.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ----------------------------------------------------------- integers -- */

/*
 * The start strtol-alikes share: ws, then one optional sign (*neg for '-'),
 * leaving *i at what must be the first digit; false when it is not one.
 */
static bool signed_start(const unsigned char *s, size_t len, size_t *i, bool *high, bool *neg)
{
    spell_skip_space(s, len, i, high);
    if (*i < len && (s[*i] == '-' || s[*i] == '+'))
        *neg = s[(*i)++] == '-';
    return *i < len && spell_is_digit(s[*i]);
}

/*
 * pg_strtoint16/32/64 (numutils.c, PostgreSQL 15): ws, [+-], at least one
 * digit, digits, ws, end.  A magnitude beyond the type is "out of range"
 * the moment a digit overflows, before anything after the digits is looked
 * at; either way an error.
 */
enum spell_verdict spell_int(const unsigned char *s, size_t len, uint64_t posmax,
                             char *out, size_t *outlen)
{
    size_t i = 0;
    bool high = false, neg = false;
    if (!signed_start(s, len, &i, &high, &neg))
        return SPELL_NOT_A_VALUE;
    uint64_t limit = neg ? posmax + 1 : posmax, mag = 0;
    uint64_t lim10 = limit / 10;
    unsigned limd = (unsigned)(limit % 10);
    while (i + 1 < len && s[i] == '0' && spell_is_digit(s[i + 1]))
        i++;
    size_t first = i;       /* the key's digits are the input's from here */
    for (; i < len && spell_is_digit(s[i]); i++) {
        unsigned d = s[i] - '0';
        if (mag >= lim10 && (mag > lim10 || d > limd))
            return SPELL_NOT_A_VALUE;
        mag = mag * 10 + d;
    }
    size_t ndigits = i - first;
    spell_skip_space(s, len, &i, &high);
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
enum spell_verdict spell_oid(const unsigned char *s, size_t len, char *out, size_t *outlen)
{
    size_t i = 0;
    bool high = false, neg = false;
    if (!signed_start(s, len, &i, &high, &neg))
        return SPELL_NOT_A_VALUE;
    uint64_t mag = 0;
    for (; i < len && spell_is_digit(s[i]); i++) {
        unsigned d = s[i] - '0';
        if (mag > (UINT64_MAX - d) / 10)
            return SPELL_NOT_A_VALUE;
        mag = mag * 10 + d;
    }
    spell_skip_space(s, len, &i, &high);
    if (i != len)
        return SPELL_NOT_A_VALUE;
    uint64_t cvt = neg ? 0 - mag : mag;
    if (cvt > UINT32_MAX && cvt < UINT64_C(0xFFFFFFFF80000000))
        return SPELL_NOT_A_VALUE;
    if (high)
        return SPELL_MAYBE;
    *outlen = spell_put_u64(out, (uint32_t)cvt);
    return SPELL_KEY;
}

/* --------------------------------------------------------------- uuid -- */

/*
 * string_to_uuid (uuid.c): an optional '{', 16 pairs of hex digits with an
 * optional '-' after every second pair but the last, the matching '}', and
 * nothing else: no white space.  isxdigit() is 0-9a-fA-F in every locale
 * (POSIX allows no more), so nothing here depends on the server.
 */
enum spell_verdict spell_uuid(const unsigned char *s, size_t len, char *out, size_t *outlen)
{
    static const char hex[] = "0123456789abcdef";
    size_t i = 0, n = 0;
    bool braces = len > 0 && s[0] == '{';
    if (braces)
        i = 1;
    for (int b = 0; b < 16; b++) {
        if (i + 2 > len)
            return SPELL_NOT_A_VALUE;
        int hi = hexdigit_value(s[i]), lo = hexdigit_value(s[i + 1]);
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
enum spell_verdict spell_numeric(const unsigned char *s, size_t len, char *out,
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
    spell_skip_space(s, len, &i, &high);
    for (size_t k = 0; k < sizeof specials / sizeof specials[0]; k++) {
        if (!spell_starts_with_ci(s + i, len - i, specials[k].word))
            continue;
        i += strlen(specials[k].word);
        spell_skip_space(s, len, &i, &high);
        if (i != len)
            return SPELL_NOT_A_VALUE;
        return high ? SPELL_MAYBE : spell_key_literal(specials[k].key, out, outlen);
    }

    bool neg = false, have_dp = false;
    if (i < len && (s[i] == '+' || s[i] == '-'))
        neg = s[i++] == '-';
    if (i < len && s[i] == '.') {
        have_dp = true;
        i++;
    }
    if (i >= len || !spell_is_digit(s[i]))
        return SPELL_NOT_A_VALUE;
    /* Digits go to out as they come; intdigits of them before the point. */
    size_t ndig = 0, intdigits = 0;
    for (; i < len; i++) {
        if (spell_is_digit(s[i])) {
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
        spell_skip_space(s, len, &i, &high);
        bool eneg = false;
        if (i < len && (s[i] == '+' || s[i] == '-'))
            eneg = s[i++] == '-';
        if (i >= len || !spell_is_digit(s[i]))
            return SPELL_NOT_A_VALUE;
        for (; i < len && spell_is_digit(s[i]); i++)
            if (exponent < NUMERIC_EXP_LIMIT)
                exponent = exponent * 10 + (s[i] - '0');
        if (exponent >= NUMERIC_EXP_LIMIT)
            return SPELL_NOT_A_VALUE;
        if (eneg)
            exponent = -exponent;
    }
    spell_skip_space(s, len, &i, &high);
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
        return spell_key_literal("0", out, outlen);
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
        if (spell_is_digit((unsigned char)*c))
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
enum spell_verdict spell_float(const unsigned char *s, size_t len, bool single,
                               char *out, size_t *outlen)
{
    size_t i = 0, end = len;
    bool high = false;
    spell_skip_space(s, len, &i, &high);
    if (i == len)
        return SPELL_NOT_A_VALUE;
    /*
     * strtod reads C99's forms: decimal, hex, inf, infinity, nan and
     * nan(chars), signed.  Its own whitespace skip is moot (done above);
     * what it leaves must be ws to the end.
     */
    spell_trim_space(s, i, &end, &high);
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
        /* float8in's special words; the first that starts buf wins, so "infinity" precedes "inf". */
        static const struct {
            const char *word;
            double value;
        } specials[] = {
            { "nan", NAN },
            { "infinity", INFINITY },
            { "+infinity", INFINITY },
            { "-infinity", -INFINITY },
            { "inf", INFINITY },
            { "+inf", INFINITY },
            { "-inf", -INFINITY },
        };
        const unsigned char *u = (const unsigned char *)buf;
        size_t k = 0;
        while (k < sizeof specials / sizeof specials[0]
               && !spell_starts_with_ci(u, n, specials[k].word))
            k++;
        if (k < sizeof specials / sizeof specials[0]) {
            v = specials[k].value;
            stop = buf + strlen(specials[k].word);
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
        return spell_key_literal("NaN", out, outlen);
    if (isinf(v))
        return spell_key_literal(v > 0 ? "Infinity" : "-Infinity", out, outlen);
    if (v == 0.0)
        return spell_key_literal("0", out, outlen);
    *outlen = float_text(v, single, out);
    return SPELL_KEY;
}

/* --------------------------------------------------------------- bool -- */

/*
 * boolin and parse_bool_with_len (bool.c): ws trimmed from both ends, then
 * a prefix of true, false, yes, no in any case (at least the first
 * letter), "on", "of"/"off", "1" or "0".
 */
enum spell_verdict spell_bool(const unsigned char *s, size_t len, char *out,
                              size_t *outlen)
{
    size_t i = 0, end = len;
    bool high = false;
    spell_skip_space(s, len, &i, &high);
    spell_trim_space(s, i, &end, &high);
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
            match = spell_lower(v[j]) == (unsigned char)words[k].word[j];
        if (match) {
            if (high)
                return SPELL_MAYBE;
            return spell_key_literal(words[k].value ? "true" : "false", out, outlen);
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
enum spell_verdict spell_bytea(const unsigned char *s, size_t len, char *out,
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
            int hi = hexdigit_value(s[i]), lo = hexdigit_value(s[i + 1]);
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
