/*
 * Fuzz spell_key: any bytes as an ID of any column type.  Invariants: the
 * output stays within cap (an exact-size buffer, so ASan sees an overrun),
 * *outlen is 0 unless KEY, the answer is the same twice, a KEY is a fixed
 * point, and for the hot types the verdict agrees with a model written
 * another way (strtoll for the integers, a digit counter for uuid); for
 * numeric and float a KEY must read back as the same double as the input.
 *
 * Input: byte 0 picks the type, byte 1 the capacity (below 200: exactly
 * spell_key_cap; else something smaller), the rest is the ID.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "spell.h"

static bool c_space(unsigned char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

/*
 * pg_strtoint{16,32,64} as strtoll sees them, ASCII only: trimmed, a sign,
 * digits only.  Returns the verdict and the value.
 */
static enum spell_verdict ref_int(const unsigned char *s, size_t len, long long lo, long long hi,
                                  long long *v)
{
    size_t a = 0, b = len;
    while (a < b && c_space(s[a]))
        a++;
    while (b > a && c_space(s[b - 1]))
        b--;
    if (b - a > 400)
        return SPELL_NOT_A_VALUE;           /* the caller skips long ones */
    char buf[512];
    memcpy(buf, s + a, b - a);
    buf[b - a] = '\0';
    const char *d = buf + (buf[0] == '+' || buf[0] == '-');
    if (*d == '\0')
        return SPELL_NOT_A_VALUE;
    for (const char *p = d; *p; p++)
        if (*p < '0' || *p > '9')
            return SPELL_NOT_A_VALUE;
    errno = 0;
    char *end;
    *v = strtoll(buf, &end, 10);
    if (errno == ERANGE || *v < lo || *v > hi)
        return SPELL_NOT_A_VALUE;
    return SPELL_KEY;
}

/* uuid_in's rule said another way: a '-' may follow 4, 8, ..., 28 hex digits. */
static bool ref_uuid(const unsigned char *s, size_t len)
{
    if (len >= 1 && s[0] == '{') {
        if (len < 2 || s[len - 1] != '}')
            return false;
        s++;
        len -= 2;
    }
    int digits = 0;
    bool after_hyphen = false;
    for (size_t i = 0; i < len; i++) {
        if (isxdigit(s[i]) && s[i] < 0x80) {
            digits++;
            after_hyphen = false;
        } else if (s[i] == '-' && !after_hyphen && digits % 4 == 0 && digits > 0 && digits < 32) {
            after_hyphen = true;
        } else {
            return false;
        }
    }
    return digits == 32 && !after_hyphen;
}

static bool has_high(const unsigned char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (s[i] >= 0x80)
            return true;
    return false;
}

/*
 * strtod of s[0..len) trimmed, if it reads all of it.  Any length: a key
 * may be longer than its input (".5" is "0.5"), so a cap on the model's
 * side would fail a key whose input it read (fuzz/corpus/spell/numeric-201).
 */
static bool whole_double(const char *s, size_t len, bool single, double *v)
{
    while (len > 0 && c_space((unsigned char)*s)) {
        s++;
        len--;
    }
    while (len > 0 && c_space((unsigned char)s[len - 1]))
        len--;
    if (len == 0 || memchr(s, '\0', len) != NULL)
        return false;
    char *buf = malloc(len + 1);
    FUZZ_CHECK(buf != NULL);
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *end;
    *v = single ? strtof(buf, &end) : strtod(buf, &end);
    bool whole = *end == '\0';
    free(buf);
    return whole;
}

FUZZ_TARGET(spell)
{
    if (size < 2)
        return 0;
    enum spell_type t = (enum spell_type)(data[0] % SPELL_NTYPES);
    const char *in = (const char *)data + 2;
    const unsigned char *u = data + 2;
    size_t len = size - 2, need = spell_key_cap(t, len);
    size_t cap = data[1] < 200 ? need : need * data[1] / 256;
    FUZZ_CHECK(need <= 2 * len + 4 * SPELL_SLACK);

    char *out = malloc(cap ? cap : 1), *out2 = malloc(cap ? cap : 1);
    FUZZ_CHECK(out != NULL && out2 != NULL);
    size_t outlen = 777, outlen2 = 777;
    enum spell_verdict v = spell_key(t, in, len, out, cap, &outlen);
    enum spell_verdict v2 = spell_key(t, in, len, out2, cap, &outlen2);
    FUZZ_CHECK(v == SPELL_KEY || v == SPELL_NOT_A_VALUE || v == SPELL_MAYBE);
    FUZZ_CHECK(v == v2 && outlen == outlen2 && memcmp(out, out2, outlen) == 0);
    FUZZ_CHECK(outlen <= cap);
    if (cap < need)
        FUZZ_CHECK(v == SPELL_MAYBE);
    if (v != SPELL_KEY)
        FUZZ_CHECK(outlen == 0);

    if (v == SPELL_KEY) {
        /* A fixed point, with its own exact capacity. */
        size_t cap3 = spell_key_cap(t, outlen), outlen3;
        char *again = malloc(cap3);
        FUZZ_CHECK(again != NULL);
        FUZZ_CHECK(spell_key(t, out, outlen, again, cap3, &outlen3) == SPELL_KEY);
        FUZZ_CHECK(outlen3 == outlen && memcmp(again, out, outlen) == 0);
        free(again);
    }

    /* The hot types against their models. */
    long long lo = 0, hi = 0, val;
    switch (t) {
    case SPELL_INT2: lo = INT16_MIN; hi = INT16_MAX; break;
    case SPELL_INT4: lo = INT32_MIN; hi = INT32_MAX; break;
    case SPELL_INT8: lo = INT64_MIN; hi = INT64_MAX; break;
    default: break;
    }
    if (hi != 0 && cap >= need && !has_high(u, len) && memchr(u, '\0', len) == NULL
        && len < 400) {
        enum spell_verdict rv = ref_int(u, len, lo, hi, &val);
        FUZZ_CHECK(rv == v);
        if (v == SPELL_KEY) {
            char want[32];
            int n = snprintf(want, sizeof want, "%lld", val);
            FUZZ_CHECK(outlen == (size_t)n && memcmp(out, want, outlen) == 0);
        }
    }
    if (t == SPELL_UUID && cap >= need) {
        FUZZ_CHECK((v == SPELL_KEY) == ref_uuid(u, len));
        FUZZ_CHECK(v != SPELL_MAYBE);
        if (v == SPELL_KEY) {
            FUZZ_CHECK(outlen == 36);
            for (size_t i = 0; i < 36; i++)
                FUZZ_CHECK(i == 8 || i == 13 || i == 18 || i == 23
                           ? out[i] == '-'
                           : (isdigit((unsigned char)out[i]) || (out[i] >= 'a' && out[i] <= 'f')));
        }
    }
    if (t == SPELL_TEXT && cap >= need)
        FUZZ_CHECK(v == SPELL_KEY && outlen == len && memcmp(out, in, len) == 0);
    if (t == SPELL_BOOL && v == SPELL_KEY)
        FUZZ_CHECK((outlen == 4 && memcmp(out, "true", 4) == 0)
                   || (outlen == 5 && memcmp(out, "false", 5) == 0));
    /* A numeric or float key is the input's value. */
    if ((t == SPELL_NUMERIC || t == SPELL_FLOAT4 || t == SPELL_FLOAT8) && v == SPELL_KEY) {
        bool single = t == SPELL_FLOAT4;
        double a, b;
        if (whole_double(in, len, single, &a)) {
            FUZZ_CHECK(whole_double(out, outlen, single, &b));
            FUZZ_CHECK((isnan(a) && isnan(b)) || a == b);
        }
    }
    free(out);
    free(out2);
    return 0;
}
