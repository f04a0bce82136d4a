/*
 * Unit tests of the ID codec: percent-decoding and its error cases, UTF-8
 * validation against a reference decoder, text/plain line splitting and the
 * JSON string escaper, with canaries and exact-size heap buffers so any
 * write past the stated capacity shows up (also under valgrind).
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "idcodec.h"

#define CANARY ((char)0x5A)
/* A length that tells the table helpers to use strlen. */
#define SLEN ((size_t)-1)

static size_t len_of(const char *s, size_t len)
{
    return len == SLEN ? strlen(s) : len;
}

/* ---- id_strerror / id_error_code ---- */

START_TEST(test_error_texts)
{
    static const struct {
        enum id_error e;
        const char *text, *code;
    } t[] = {
        { ID_OK, "ok", "ok" },
        { ID_EMPTY, "id is empty", "empty_id" },
        { ID_BAD_PERCENT, "malformed percent-encoding in id", "bad_percent_encoding" },
        { ID_NUL, "id contains a NUL byte", "nul_byte" },
        { ID_TOO_LONG, "id is longer than max_id_bytes", "id_too_long" },
        { ID_BAD_UTF8, "id is not valid UTF-8", "bad_utf8" },
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        ck_assert_str_eq(id_strerror(t[i].e), t[i].text);
        ck_assert_str_eq(id_error_code(t[i].e), t[i].code);
    }
    ck_assert_str_eq(id_strerror((enum id_error)99), "unknown id error");
    ck_assert_str_eq(id_error_code((enum id_error)99), "unknown");
}
END_TEST

/* ---- id_decode ---- */

struct decode_case {
    const char *in;
    size_t len;         /* SLEN: strlen(in) */
    size_t max;
    enum id_error want;
    const char *out;    /* expected decoded bytes on ID_OK */
    size_t outlen;      /* SLEN: strlen(out) */
};

static const struct decode_case decode_cases[] = {
    /* plain and percent-encoded */
    { "abc", SLEN, 512, ID_OK, "abc", SLEN },
    { "%2F", SLEN, 512, ID_OK, "/", SLEN },
    { "a%2fb", SLEN, 512, ID_OK, "a/b", SLEN },
    { "%41%62%7a", SLEN, 512, ID_OK, "Abz", SLEN },
    { "%20", SLEN, 512, ID_OK, " ", SLEN },
    { "a%20b", SLEN, 512, ID_OK, "a b", SLEN },
    { " a b ", SLEN, 512, ID_OK, " a b ", SLEN },
    { "\t", SLEN, 512, ID_OK, "\t", SLEN },
    { "a+b", SLEN, 512, ID_OK, "a+b", SLEN },
    { "%2B", SLEN, 512, ID_OK, "+", SLEN },
    { "%25", SLEN, 512, ID_OK, "%", SLEN },
    { "%2541", SLEN, 512, ID_OK, "%41", SLEN },   /* decoded once only */
    { "%7F", SLEN, 512, ID_OK, "\x7f", SLEN },
    { "%01", SLEN, 512, ID_OK, "\x01", SLEN },
    { "user@example.com", SLEN, 512, ID_OK, "user@example.com", SLEN },
    /* UTF-8 */
    { "%C3%A9", SLEN, 512, ID_OK, "\xC3\xA9", SLEN },
    { "%c3%a9", SLEN, 512, ID_OK, "\xC3\xA9", SLEN },
    { "%C3%a9", SLEN, 512, ID_OK, "\xC3\xA9", SLEN },
    { "\xC3\xA9", SLEN, 512, ID_OK, "\xC3\xA9", SLEN },   /* raw bytes pass */
    { "%C3\xA9", SLEN, 512, ID_OK, "\xC3\xA9", SLEN },    /* mixed */
    { "caf%C3%A9", SLEN, 512, ID_OK, "caf\xC3\xA9", SLEN },
    { "%C2%80", SLEN, 512, ID_OK, "\xC2\x80", SLEN },     /* U+0080 */
    { "%DF%BF", SLEN, 512, ID_OK, "\xDF\xBF", SLEN },     /* U+07FF */
    { "%E0%A0%80", SLEN, 512, ID_OK, "\xE0\xA0\x80", SLEN }, /* U+0800 */
    { "%E2%82%AC", SLEN, 512, ID_OK, "\xE2\x82\xAC", SLEN }, /* euro */
    { "%ED%9F%BF", SLEN, 512, ID_OK, "\xED\x9F\xBF", SLEN }, /* U+D7FF */
    { "%EE%80%80", SLEN, 512, ID_OK, "\xEE\x80\x80", SLEN }, /* U+E000 */
    { "%EF%BF%BF", SLEN, 512, ID_OK, "\xEF\xBF\xBF", SLEN }, /* U+FFFF */
    { "%F0%90%80%80", SLEN, 512, ID_OK, "\xF0\x90\x80\x80", SLEN }, /* U+10000 */
    { "%F0%9F%98%80", SLEN, 512, ID_OK, "\xF0\x9F\x98\x80", SLEN }, /* emoji */
    { "%F4%8F%BF%BF", SLEN, 512, ID_OK, "\xF4\x8F\xBF\xBF", SLEN }, /* U+10FFFF */
    /* empty */
    { "", 0, 512, ID_EMPTY, NULL, 0 },
    { "xyz", 0, 512, ID_EMPTY, NULL, 0 },
    /* malformed percent-encoding */
    { "%zz", SLEN, 512, ID_BAD_PERCENT, NULL, 0 },
    { "%4", SLEN, 512, ID_BAD_PERCENT, NULL, 0 },
    { "%", SLEN, 512, ID_BAD_PERCENT, NULL, 0 },
    { "abc%", SLEN, 512, ID_BAD_PERCENT, NULL, 0 },
    { "abc%4", SLEN, 512, ID_BAD_PERCENT, NULL, 0 },
    { "%4g", SLEN, 512, ID_BAD_PERCENT, NULL, 0 },
    { "%g4", SLEN, 512, ID_BAD_PERCENT, NULL, 0 },
    { "% 41", SLEN, 512, ID_BAD_PERCENT, NULL, 0 },
    { "%%41", SLEN, 512, ID_BAD_PERCENT, NULL, 0 },
    { "%-1", SLEN, 512, ID_BAD_PERCENT, NULL, 0 },
    { "%+1", SLEN, 512, ID_BAD_PERCENT, NULL, 0 },
    { "%0x", SLEN, 512, ID_BAD_PERCENT, NULL, 0 },
    { "%\xC3\xA9", SLEN, 512, ID_BAD_PERCENT, NULL, 0 },
    { "%4\0", 3, 512, ID_BAD_PERCENT, NULL, 0 },
    /* "%41" cut short by len: the bytes after len must not be read */
    { "%41", 2, 512, ID_BAD_PERCENT, NULL, 0 },
    { "%41", 1, 512, ID_BAD_PERCENT, NULL, 0 },
    /* NUL */
    { "%00", SLEN, 512, ID_NUL, NULL, 0 },
    { "a%00b", SLEN, 512, ID_NUL, NULL, 0 },
    { "a\0b", 3, 512, ID_NUL, NULL, 0 },
    { "\0", 1, 512, ID_NUL, NULL, 0 },
    /* bad UTF-8 */
    { "\xFF", SLEN, 512, ID_BAD_UTF8, NULL, 0 },
    { "a\xFF" "b", SLEN, 512, ID_BAD_UTF8, NULL, 0 },
    { "%FF", SLEN, 512, ID_BAD_UTF8, NULL, 0 },
    { "%FE", SLEN, 512, ID_BAD_UTF8, NULL, 0 },
    { "%80", SLEN, 512, ID_BAD_UTF8, NULL, 0 },          /* lone continuation */
    { "%BF", SLEN, 512, ID_BAD_UTF8, NULL, 0 },
    { "%C0%AF", SLEN, 512, ID_BAD_UTF8, NULL, 0 },       /* overlong '/' */
    { "%C0%80", SLEN, 512, ID_BAD_UTF8, NULL, 0 },       /* overlong NUL */
    { "%C1%BF", SLEN, 512, ID_BAD_UTF8, NULL, 0 },
    { "%E0%80%AF", SLEN, 512, ID_BAD_UTF8, NULL, 0 },
    { "%E0%9F%BF", SLEN, 512, ID_BAD_UTF8, NULL, 0 },    /* overlong U+07FF */
    { "%F0%80%80%AF", SLEN, 512, ID_BAD_UTF8, NULL, 0 },
    { "%F0%8F%BF%BF", SLEN, 512, ID_BAD_UTF8, NULL, 0 }, /* overlong U+FFFF */
    { "%ED%A0%80", SLEN, 512, ID_BAD_UTF8, NULL, 0 },    /* U+D800 */
    { "%ED%BF%BF", SLEN, 512, ID_BAD_UTF8, NULL, 0 },    /* U+DFFF */
    { "%ED%A0%BD%ED%B8%80", SLEN, 512, ID_BAD_UTF8, NULL, 0 }, /* CESU pair */
    { "%F4%90%80%80", SLEN, 512, ID_BAD_UTF8, NULL, 0 }, /* U+110000 */
    { "%F5%80%80%80", SLEN, 512, ID_BAD_UTF8, NULL, 0 },
    { "%F8%88%80%80%80", SLEN, 512, ID_BAD_UTF8, NULL, 0 },
    { "%C3", SLEN, 512, ID_BAD_UTF8, NULL, 0 },          /* truncated */
    { "%C3a", SLEN, 512, ID_BAD_UTF8, NULL, 0 },
    { "%E2%82", SLEN, 512, ID_BAD_UTF8, NULL, 0 },
    { "%E2%82a", SLEN, 512, ID_BAD_UTF8, NULL, 0 },
    { "%F0%9F%98", SLEN, 512, ID_BAD_UTF8, NULL, 0 },
    { "%C3%A9%C3", SLEN, 512, ID_BAD_UTF8, NULL, 0 },
    { "%C3%A9%A9", SLEN, 512, ID_BAD_UTF8, NULL, 0 },
    /* lengths count decoded bytes */
    { "abcde", SLEN, 5, ID_OK, "abcde", SLEN },
    { "abcdef", SLEN, 5, ID_TOO_LONG, NULL, 0 },
    { "%41%42%43%44%45", SLEN, 5, ID_OK, "ABCDE", SLEN },
    { "%41%42%43%44%45%46", SLEN, 5, ID_TOO_LONG, NULL, 0 },
    { "abcd%C3%A9", SLEN, 5, ID_TOO_LONG, NULL, 0 },     /* 6 bytes, 5 chars */
    { "abc%C3%A9", SLEN, 5, ID_OK, "abc\xC3\xA9", SLEN },
    { "a", SLEN, 1, ID_OK, "a", SLEN },
    { "ab", SLEN, 1, ID_TOO_LONG, NULL, 0 },
    { "a", SLEN, 0, ID_TOO_LONG, NULL, 0 },
    /* first problem from the left wins; UTF-8 is judged on the whole result */
    { "abcdef%zz", SLEN, 5, ID_TOO_LONG, NULL, 0 },
    { "%zzabcdef", SLEN, 5, ID_BAD_PERCENT, NULL, 0 },
    { "%00abcdef", SLEN, 5, ID_NUL, NULL, 0 },
    { "%FF%00", SLEN, 512, ID_NUL, NULL, 0 },
    { "%FF%zz", SLEN, 512, ID_BAD_PERCENT, NULL, 0 },
    { "%FFabcdef", SLEN, 5, ID_TOO_LONG, NULL, 0 },
};

START_TEST(test_decode_table)
{
    const struct decode_case *c = &decode_cases[_i];
    size_t len = len_of(c->in, c->len);
    char out[600];
    size_t outlen = 777;

    memset(out, CANARY, sizeof out);
    enum id_error e = id_decode(c->in, len, c->max, out, c->max + 1, &outlen);
    ck_assert_msg(e == c->want, "case %d \"%s\": got %s, want %s", _i, c->in,
                  id_error_code(e), id_error_code(c->want));
    if (e == ID_OK) {
        size_t want_len = len_of(c->out, c->outlen);
        ck_assert_uint_eq(outlen, want_len);
        ck_assert_mem_eq(out, c->out, want_len);
        ck_assert_int_eq(out[outlen], '\0');
    } else {
        ck_assert_uint_eq(outlen, 0);
        ck_assert_int_eq(out[0], '\0');
    }
    /* Nothing past outcap. */
    ck_assert_int_eq(out[c->max + 1], CANARY);

    /* id_check on what id_decode produced agrees. */
    if (e == ID_OK)
        ck_assert_int_eq(id_check(out, outlen, c->max), ID_OK);
}
END_TEST

/* A heap buffer of exactly outcap bytes so valgrind catches any overrun. */
static enum id_error decode_exact(const char *in, size_t len, size_t max, size_t outcap,
                                  char *copy, size_t *outlen)
{
    char *out = outcap > 0 ? malloc(outcap) : NULL;
    if (outcap > 0)
        ck_assert_ptr_nonnull(out);
    enum id_error e = id_decode(in, len, max, out, outcap, outlen);
    if (outcap > 0)
        memcpy(copy, out, outcap);
    free(out);
    return e;
}

START_TEST(test_decode_bounds)
{
    /* An input decoded with max_len 10 into outcap bytes. */
    static const struct small_cap {
        const char *in;
        size_t outcap;
        enum id_error want;
    } small_caps[] = {
        { "abcd", 3, ID_TOO_LONG },
        { "%41%42%43%44", 3, ID_TOO_LONG },
        { "a", 1, ID_OK },
        { "a", 0, ID_TOO_LONG },
        { "", 0, ID_EMPTY },
        { "%zz", 0, ID_BAD_PERCENT },
    };
    enum { MAX = 16 };
    char buf[MAX + 2], copy[64], in[200];
    size_t outlen;

    /* Exactly max bytes: fits, NUL lands in the last byte of outcap. */
    memset(in, 'x', MAX);
    memset(buf, CANARY, sizeof buf);
    ck_assert_int_eq(id_decode(in, MAX, MAX, buf, MAX + 1, &outlen), ID_OK);
    ck_assert_uint_eq(outlen, MAX);
    ck_assert_int_eq(buf[MAX], '\0');
    ck_assert_int_eq(buf[MAX + 1], CANARY);

    /* max + 1 and far more, raw and encoded: refused, canary intact. */
    memset(in, 'x', sizeof in);
    for (size_t n = MAX + 1; n <= sizeof in; n++) {
        memset(buf, CANARY, sizeof buf);
        ck_assert_int_eq(id_decode(in, n, MAX, buf, MAX + 1, &outlen), ID_TOO_LONG);
        ck_assert_uint_eq(outlen, 0);
        ck_assert_int_eq(buf[MAX + 1], CANARY);
    }
    for (size_t k = 0; k < 60; k++)
        memcpy(in + 3 * k, "%41", 3);
    for (size_t k = 1; k <= 60; k++) {
        memset(buf, CANARY, sizeof buf);
        enum id_error e = id_decode(in, 3 * k, MAX, buf, MAX + 1, &outlen);
        ck_assert_int_eq(e, k <= MAX ? ID_OK : ID_TOO_LONG);
        ck_assert_int_eq(buf[MAX + 1], CANARY);
        if (e == ID_OK) {
            ck_assert_uint_eq(outlen, k);
            ck_assert_int_eq(buf[k], '\0');
        }
    }

    /* Exact-size heap buffers. */
    memset(in, 'y', sizeof in);
    ck_assert_int_eq(decode_exact(in, MAX, MAX, MAX + 1, copy, &outlen), ID_OK);
    ck_assert_uint_eq(outlen, MAX);
    ck_assert_int_eq(copy[MAX], '\0');
    ck_assert_int_eq(decode_exact(in, MAX + 1, MAX, MAX + 1, copy, &outlen), ID_TOO_LONG);
    ck_assert_int_eq(decode_exact(in, 150, MAX, MAX + 1, copy, &outlen), ID_TOO_LONG);

    /* Caller passed outcap <= max_len: outcap still wins, never overrun. */
    ck_assert_int_eq(decode_exact("abc", 3, 10, 3, copy, &outlen), ID_OK);
    ck_assert_uint_eq(outlen, 3);        /* fits, no room for the NUL */
    ck_assert_mem_eq(copy, "abc", 3);
    char small[4];
    memset(small, CANARY, sizeof small);
    ck_assert_int_eq(id_decode("abc", 3, 10, small, 3, &outlen), ID_OK);
    ck_assert_int_eq(small[3], CANARY);
    for (size_t i = 0; i < sizeof small_caps / sizeof small_caps[0]; i++) {
        const struct small_cap *r = &small_caps[i];
        enum id_error e = decode_exact(r->in, strlen(r->in), 10, r->outcap, copy, &outlen);
        ck_assert_msg(e == r->want, "\"%s\" into %zu bytes: got %s, want %s", r->in, r->outcap,
                      id_error_code(e), id_error_code(r->want));
    }
    ck_assert_int_eq(id_decode("abc", 3, 10, NULL, 0, &outlen), ID_TOO_LONG);
    ck_assert_uint_eq(outlen, 0);

    /* The input is read only within len. */
    char *exact = malloc(3);
    ck_assert_ptr_nonnull(exact);
    memcpy(exact, "a%4", 3);
    ck_assert_int_eq(id_decode(exact, 3, MAX, buf, sizeof buf, &outlen), ID_BAD_PERCENT);
    memcpy(exact, "%41", 3);
    ck_assert_int_eq(id_decode(exact, 3, MAX, buf, sizeof buf, &outlen), ID_OK);
    ck_assert_str_eq(buf, "A");
    free(exact);
}
END_TEST

START_TEST(test_decode_in_place)
{
    char buf[32] = "a%2Fb%C3%A9%20c";
    size_t outlen;

    ck_assert_int_eq(id_decode(buf, strlen(buf), 31, buf, sizeof buf, &outlen), ID_OK);
    ck_assert_uint_eq(outlen, 7);
    ck_assert_str_eq(buf, "a/b\xC3\xA9 c");
}
END_TEST

/* ---- id_check ---- */

START_TEST(test_check)
{
    static const struct {
        const char *in;
        size_t len, max;
        enum id_error want;
    } rows[] = {
        { "abc", 3, 512, ID_OK },
        { "%zz", 3, 512, ID_OK },       /* no percent rules */
        { "%00", 3, 512, ID_OK },
        { "  spaced  ", 10, 512, ID_OK },
        { "a+b/c", 5, 512, ID_OK },
        { "\xC3\xA9", 2, 512, ID_OK },
        { "", 0, 512, ID_EMPTY },
        { NULL, 0, 512, ID_EMPTY },
        { "abcde", 5, 5, ID_OK },
        { "abcdef", 6, 5, ID_TOO_LONG },
        { "a\0b", 3, 512, ID_NUL },
        { "\0", 1, 512, ID_NUL },
        { "\xFF", 1, 512, ID_BAD_UTF8 },
        { "\xC0\xAF", 2, 512, ID_BAD_UTF8 },
        { "\xED\xA0\x80", 3, 512, ID_BAD_UTF8 },
        { "\xF4\x90\x80\x80", 4, 512, ID_BAD_UTF8 },
        { "\xC3", 1, 512, ID_BAD_UTF8 },
        /* Order: empty, too long, NUL, UTF-8. */
        { "a\0b\xFF", 4, 3, ID_TOO_LONG },
        { "\xFF\0", 2, 3, ID_NUL },
        /* Only len bytes are looked at. */
        { "ab\xFF", 2, 512, ID_OK },
    };

    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        enum id_error e = id_check(rows[i].in, rows[i].len, rows[i].max);
        ck_assert_msg(e == rows[i].want, "row %zu (%zu bytes, max %zu): got %s, want %s", i,
                      rows[i].len, rows[i].max, id_error_code(e), id_error_code(rows[i].want));
    }
}
END_TEST

/* ---- id_utf8_valid ---- */

/*
 * Reference: decode the bit pattern naively (accepting anything shaped like
 * UTF-8, as RFC 2279 did), then apply the RFC 3629 restrictions.  Different
 * enough from the implementation to catch a wrong range in either.
 */
static bool ref_utf8_valid(const unsigned char *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned char c = p[i];
        size_t k;
        uint32_t cp, min;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            k = 2, cp = c & 0x1F, min = 0x80;
        } else if ((c & 0xF0) == 0xE0) {
            k = 3, cp = c & 0x0F, min = 0x800;
        } else if ((c & 0xF8) == 0xF0) {
            k = 4, cp = c & 0x07, min = 0x10000;
        } else {
            return false;
        }
        if (n - i < k)
            return false;
        for (size_t j = 1; j < k; j++) {
            if ((p[i + j] & 0xC0) != 0x80)
                return false;
            cp = cp << 6 | (p[i + j] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += k;
    }
    return true;
}

static size_t encode_utf8(uint32_t cp, unsigned char *o)
{
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | cp >> 6);
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | cp >> 12);
        o[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | cp >> 18);
    o[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

START_TEST(test_utf8_every_code_point)
{
    unsigned char b[4];
    for (uint32_t cp = 0; cp <= 0x10FFFF; cp++) {
        size_t n = encode_utf8(cp, b);
        bool want = !(cp >= 0xD800 && cp <= 0xDFFF);
        /* Plain ifs: every passing ck_assert costs a write to Check's pipe. */
        if (id_utf8_valid((const char *)b, n) != want)
            ck_abort_msg("U+%04X", (unsigned)cp);
        /* Every proper prefix of a multi-byte sequence is truncated. */
        for (size_t k = 1; k < n; k++)
            if (id_utf8_valid((const char *)b, k))
                ck_abort_msg("U+%04X prefix of %zu bytes", (unsigned)cp, k);
    }
    /* Above U+10FFFF, in the 4-byte form. */
    for (uint32_t cp = 0x110000; cp < 0x200000; cp += 0x1001) {
        encode_utf8(cp, b);
        if (id_utf8_valid((const char *)b, 4))
            ck_abort_msg("U+%X", (unsigned)cp);
    }
}
END_TEST

START_TEST(test_utf8_all_short_sequences)
{
    unsigned char b[4];
    /* Every 1-, 2- and 3-byte string against the reference. */
    for (uint32_t v = 0; v < 0x1000000; v++) {
        b[0] = (unsigned char)(v >> 16);
        b[1] = (unsigned char)(v >> 8);
        b[2] = (unsigned char)v;
        if (v < 0x100 && id_utf8_valid((const char *)b + 2, 1) != ref_utf8_valid(b + 2, 1))
            ck_abort_msg("%02X", b[2]);
        if (v < 0x10000 && id_utf8_valid((const char *)b + 1, 2) != ref_utf8_valid(b + 1, 2))
            ck_abort_msg("%02X %02X", b[1], b[2]);
        if (id_utf8_valid((const char *)b, 3) != ref_utf8_valid(b, 3))
            ck_abort_msg("%02X %02X %02X", b[0], b[1], b[2]);
    }
    /* 4-byte strings: every first two bytes, interesting last two. */
    static const unsigned char tail[] = { 0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0xBF, 0xC0, 0xC3, 0xF0, 0xFF };
    for (unsigned x = 0; x < 0x10000; x++)
        for (size_t j = 0; j < sizeof tail; j++)
            for (size_t k = 0; k < sizeof tail; k++) {
                b[0] = (unsigned char)(x >> 8);
                b[1] = (unsigned char)x;
                b[2] = tail[j];
                b[3] = tail[k];
                if (id_utf8_valid((const char *)b, 4) != ref_utf8_valid(b, 4))
                    ck_abort_msg("%02X %02X %02X %02X", b[0], b[1], b[2], b[3]);
            }
}
END_TEST

START_TEST(test_utf8_positions)
{
    /* A bad or good sequence at every offset, across the 8-byte ASCII skip. */
    char s[64];
    for (size_t pos = 0; pos + 4 <= sizeof s; pos++) {
        memset(s, 'a', sizeof s);
        s[pos] = (char)0xFF;
        ck_assert(!id_utf8_valid(s, sizeof s));
        ck_assert(id_utf8_valid(s, pos));
        memcpy(s + pos, "\xF0\x9F\x98\x80", 4);
        ck_assert(id_utf8_valid(s, sizeof s));
        ck_assert(!id_utf8_valid(s, pos + 3));  /* truncated at the end */
        s[pos + 3] = 'a';
        ck_assert(!id_utf8_valid(s, sizeof s));
    }
    ck_assert(id_utf8_valid("", 0));
    ck_assert(id_utf8_valid(NULL, 0));
    ck_assert(id_utf8_valid("\0", 1));
}
END_TEST

/* ---- id_next_line ---- */

struct lines_case {
    const char *body;
    size_t len;             /* SLEN: strlen(body) */
    const char *want[6];    /* NULL-terminated */
    size_t want_len[6];     /* 0: strlen(want[i]) */
};

static const struct lines_case lines_cases[] = {
    { "", SLEN, { NULL }, { 0 } },
    { "\n", SLEN, { NULL }, { 0 } },
    { "\r\n", SLEN, { NULL }, { 0 } },
    { "\n\n\r\n\n", SLEN, { NULL }, { 0 } },
    { "a", SLEN, { "a", NULL }, { 0 } },
    { "a\n", SLEN, { "a", NULL }, { 0 } },
    { "a\nb\n", SLEN, { "a", "b", NULL }, { 0 } },
    { "a\nb", SLEN, { "a", "b", NULL }, { 0 } },
    { "a\r\nb\r\n", SLEN, { "a", "b", NULL }, { 0 } },
    { "a\r\nb", SLEN, { "a", "b", NULL }, { 0 } },
    { "a\nb\r\nc", SLEN, { "a", "b", "c", NULL }, { 0 } },
    { "\n\na\n\n\nb\n\n", SLEN, { "a", "b", NULL }, { 0 } },
    { "\r\n\r\na\r\n\r\n", SLEN, { "a", NULL }, { 0 } },
    { "  spaced  ", SLEN, { "  spaced  ", NULL }, { 0 } },
    { "  spaced  \r\n\tx\t\n", SLEN, { "  spaced  ", "\tx\t", NULL }, { 0 } },
    { " \n\t\n", SLEN, { " ", "\t", NULL }, { 0 } },
    /* only the '\r' right before '\n' goes */
    { "a\rb\n", SLEN, { "a\rb", NULL }, { 0 } },
    { "a\r\r\n", SLEN, { "a\r", NULL }, { 0 } },
    { "\r\r\n", SLEN, { "\r", NULL }, { 0 } },
    { "a\r", SLEN, { "a\r", NULL }, { 0 } },
    { "\r", SLEN, { "\r", NULL }, { 0 } },
    /* bytes are bytes */
    { "a\0b\nc", 5, { "a\0b", "c", NULL }, { 3, 0 } },
    { "caf\xC3\xA9\n%2F\n", SLEN, { "caf\xC3\xA9", "%2F", NULL }, { 0 } },
    /* len ends the body even mid-line */
    { "abc\ndef", 5, { "abc", "d", NULL }, { 0 } },
    { "abc\r\n", 4, { "abc\r", NULL }, { 0 } },
};

START_TEST(test_next_line_table)
{
    const struct lines_case *c = &lines_cases[_i];
    size_t len = len_of(c->body, c->len), pos = 0, k = 0, idlen;
    const char *id;
    /* Exact-size copy so a read past len is caught by valgrind. */
    char *body = malloc(len ? len : 1);
    ck_assert_ptr_nonnull(body);
    memcpy(body, c->body, len);

    while (id_next_line(body, len, &pos, &id, &idlen)) {
        ck_assert_msg(c->want[k] != NULL, "case %d: extra line", _i);
        size_t wl = c->want_len[k] ? c->want_len[k] : strlen(c->want[k]);
        ck_assert_uint_eq(idlen, wl);
        ck_assert_mem_eq(id, c->want[k], wl);
        ck_assert(id >= body && id + idlen <= body + len);
        ck_assert_uint_le(pos, len);
        k++;
    }
    ck_assert_msg(c->want[k] == NULL, "case %d: line %zu missing", _i, k);
    ck_assert_uint_eq(pos, len);
    /* Stays at the end. */
    ck_assert(!id_next_line(body, len, &pos, &id, &idlen));
    free(body);
}
END_TEST

START_TEST(test_next_line_misc)
{
    const char *id = "untouched";
    size_t idlen = 42, pos;

    pos = 10;   /* beyond len */
    ck_assert(!id_next_line("abc", 3, &pos, &id, &idlen));
    ck_assert_str_eq(id, "untouched");
    ck_assert_uint_eq(idlen, 42);
    pos = 0;
    ck_assert(!id_next_line(NULL, 0, &pos, &id, &idlen));
    ck_assert_uint_eq(pos, 0);

    /* pos lands just past each line terminator. */
    const char *b = "ab\r\n\ncd\n";
    pos = 0;
    ck_assert(id_next_line(b, strlen(b), &pos, &id, &idlen));
    ck_assert_uint_eq(pos, 4);
    ck_assert(id == b && idlen == 2);
    ck_assert(id_next_line(b, strlen(b), &pos, &id, &idlen));
    ck_assert_uint_eq(pos, 8);
    ck_assert(id == b + 5 && idlen == 2);
    ck_assert(!id_next_line(b, strlen(b), &pos, &id, &idlen));

    /* A large body: count lines. */
    enum { N = 10000 };
    static char big[N * 8];
    size_t len = 0;
    for (int i = 0; i < N; i++)
        len += (size_t)snprintf(big + len, sizeof big - len, i % 2 ? "u%d\r\n" : "u%d\n", i);
    size_t count = 0;
    pos = 0;
    while (id_next_line(big, len, &pos, &id, &idlen)) {
        if (id[0] != 'u' || id[idlen - 1] == '\r')
            ck_abort_msg("bad line %zu: \"%.*s\"", count, (int)idlen, id);
        count++;
    }
    ck_assert_uint_eq(count, N);
}
END_TEST

/* ---- json_escape_append ---- */

struct json_case {
    const char *in;
    size_t len;     /* SLEN: strlen(in) */
    const char *out;
};

static const struct json_case json_cases[] = {
    { "", SLEN, "" },
    { "abc", SLEN, "abc" },
    { "a b/c+d%2F", SLEN, "a b/c+d%2F" },
    { "\"", SLEN, "\\\"" },
    { "say \"hi\"", SLEN, "say \\\"hi\\\"" },
    { "\\", SLEN, "\\\\" },
    { "a\\b", SLEN, "a\\\\b" },
    { "\n\r\t\b\f", SLEN, "\\n\\r\\t\\b\\f" },
    { "\0", 1, "\\u0000" },
    { "a\0b", 3, "a\\u0000b" },
    { "\x01", SLEN, "\\u0001" },
    { "\x0b", SLEN, "\\u000b" },
    { "\x1b[0m", SLEN, "\\u001b[0m" },
    { "\x1f", SLEN, "\\u001f" },
    { " ~", SLEN, " ~" },
    { "\x7f", SLEN, "\x7f" },
    { "'<>&", SLEN, "'<>&" },
    /* well-formed UTF-8 passes through */
    { "caf\xC3\xA9", SLEN, "caf\xC3\xA9" },
    { "\xE2\x82\xAC", SLEN, "\xE2\x82\xAC" },
    { "\xF0\x9F\x98\x80", SLEN, "\xF0\x9F\x98\x80" },
    { "\xF4\x8F\xBF\xBF", SLEN, "\xF4\x8F\xBF\xBF" },
    { "\xE2\x80\xA8", SLEN, "\xE2\x80\xA8" },     /* U+2028 is legal JSON */
    /* ill-formed: one U+FFFD per maximal subpart */
    { "\xFF", SLEN, "\xEF\xBF\xBD" },
    { "a\xFF" "b", SLEN, "a\xEF\xBF\xBD" "b" },
    { "\x80\x80", SLEN, "\xEF\xBF\xBD\xEF\xBF\xBD" },
    { "a\xC3", SLEN, "a\xEF\xBF\xBD" },
    { "\xC3\"", SLEN, "\xEF\xBF\xBD\\\"" },
    { "\xE2\x82" "a", SLEN, "\xEF\xBF\xBD" "a" },
    { "\xF0\x9F\x98", SLEN, "\xEF\xBF\xBD" },
    { "\xF0\x9F\x98\n", SLEN, "\xEF\xBF\xBD\\n" },
    { "\xC0\xAF", SLEN, "\xEF\xBF\xBD\xEF\xBF\xBD" },
    { "\xED\xA0\x80", SLEN, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD" },
    { "\xF4\x90\x80\x80", SLEN, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD" },
};

START_TEST(test_json_table)
{
    const struct json_case *c = &json_cases[_i];
    size_t len = len_of(c->in, c->len), want = strlen(c->out);
    char out[128];
    size_t used = 0;

    memset(out, CANARY, sizeof out);
    ck_assert(json_escape_append(out, sizeof out, &used, c->in, len));
    ck_assert_uint_eq(used, want);
    ck_assert_mem_eq(out, c->out, want);
    ck_assert(id_utf8_valid(out, used));

    /* Every smaller capacity fails without moving *used or writing past cap;
     * the exact capacity succeeds. */
    for (size_t cap = 0; cap <= want; cap++) {
        char *buf = malloc(cap + 1);
        ck_assert_ptr_nonnull(buf);
        buf[cap] = CANARY;
        used = 0;
        bool ok = json_escape_append(buf, cap, &used, c->in, len);
        ck_assert(ok == (cap == want));
        ck_assert_uint_eq(used, ok ? want : 0);
        ck_assert_int_eq(buf[cap], CANARY);
        if (ok)
            ck_assert_mem_eq(buf, c->out, want);
        free(buf);
    }
}
END_TEST

START_TEST(test_json_append)
{
    /*
     * Appends to one 16-byte buffer in turn, each from the *used its row
     * sets: whether it fits, *used after, and the buffer's text up to it.
     */
    static const struct {
        size_t used;
        const char *in;
        size_t len;
        bool ok;
        size_t after;
        const char *out;    /* NULL: not checked */
    } rows[] = {
        { 0, "{\"id\":\"", 0, true, 0, NULL },
        { 2, "a\"b", 3, true, 6, "[\"a\\\"b" },
        /* 10 bytes left: "\u0001" + "xxxx" fits exactly. */
        { 6, "\x01xxxx", 5, true, 16, "[\"a\\\"b\\u0001xxxx" },
        /* Full: even one byte fails, empty still succeeds. */
        { 16, "y", 1, false, 16, NULL },
        { 16, "", 0, true, 16, NULL },
        /* An escape that does not fit whole is not split. */
        { 11, "\x01", 1, false, 11, NULL },
        { 10, "\x01", 1, true, 16, NULL },
        /* *used past cap is refused. */
        { 17, "", 0, false, 17, NULL },
    };
    char out[16];
    size_t used;

    memset(out, CANARY, sizeof out);
    memcpy(out, "[\"", 2);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        used = rows[i].used;
        bool ok = json_escape_append(out, sizeof out, &used, rows[i].in, rows[i].len);
        ck_assert_msg(ok == rows[i].ok, "row %zu: %s", i, ok ? "fits" : "does not fit");
        ck_assert_msg(used == rows[i].after, "row %zu: *used %zu, want %zu", i, used,
                      rows[i].after);
        if (rows[i].out != NULL)
            ck_assert_msg(memcmp(out, rows[i].out, used) == 0, "row %zu: \"%.*s\"", i,
                          (int)used, out);
    }

    /* cap 0, NULL output, empty input. */
    used = 0;
    ck_assert(json_escape_append(NULL, 0, &used, "", 0));
    ck_assert(!json_escape_append(NULL, 0, &used, "a", 1));
}
END_TEST

/* Undo the escaping (the subset json_escape_append produces). */
static size_t json_unescape(const char *s, size_t n, char *o)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char)s[i] < 0x20 || s[i] == '"')
            ck_abort_msg("raw control byte or quote at %zu", i);
        if (s[i] != '\\') {
            o[k++] = s[i];
            continue;
        }
        if (i + 1 >= n)
            ck_abort_msg("lone backslash at the end");
        /* Each escape letter, then the byte it stands for. */
        static const char pairs[] = "\"\"\\\\n\nr\rt\tb\bf\f";
        const char *p = s[++i] != '\0' ? strchr(pairs, s[i]) : NULL;
        if (p != NULL && (p - pairs) % 2 == 0) {
            o[k++] = p[1];
        } else if (s[i] == 'u') {
            unsigned v;
            char hex[5] = { 0 };
            if (i + 4 >= n)
                ck_abort_msg("short \\u escape");
            memcpy(hex, s + i + 1, 4);
            if (sscanf(hex, "%4x", &v) != 1 || v >= 0x20)
                ck_abort_msg("bad \\u escape %s", hex);
            o[k++] = (char)v;
            i += 4;
        } else {
            ck_abort_msg("bad escape \\%c", s[i]);
        }
    }
    return k;
}

START_TEST(test_json_random)
{
    /* Random bytes: output is always valid UTF-8 without raw controls or
     * quotes; for well-formed input it round-trips. */
    unsigned seed = 12345;
    char in[64], out[64 * 6], back[64 * 6];
    int valid_seen = 0;

    for (int iter = 0; iter < 200000; iter++) {
        size_t len = (size_t)(iter % 64);
        for (size_t i = 0; i < len; i++) {
            seed = seed * 1103515245u + 12345u;
            unsigned r = seed >> 16;
            /* Bias towards ASCII so that whole strings are often valid. */
            in[i] = (char)(r % 4 ? r % 128 : r % 256);
        }
        size_t used = 0;
        if (!json_escape_append(out, sizeof out, &used, in, len))
            ck_abort_msg("iteration %d: did not fit", iter);
        if (!id_utf8_valid(out, used))
            ck_abort_msg("iteration %d: output not UTF-8", iter);
        size_t bl = json_unescape(out, used, back);
        if (id_utf8_valid(in, len)) {
            valid_seen++;
            if (bl != len || memcmp(back, in, len) != 0)
                ck_abort_msg("iteration %d: no round trip", iter);
        }
    }
    ck_assert_int_gt(valid_seen, 1000);
}
END_TEST

CHECK_SUITE("idcodec",
    CHECK_CASE("decode"),
    CHECK_TEST(test_error_texts),
    CHECK_EACH(test_decode_table, decode_cases),
    CHECK_TEST(test_decode_bounds),
    CHECK_TEST(test_decode_in_place),
    CHECK_TEST(test_check),

    CHECK_CASE("utf8", .timeout = 120),
    CHECK_TEST(test_utf8_every_code_point),
    CHECK_TEST(test_utf8_all_short_sequences),
    CHECK_TEST(test_utf8_positions),

    CHECK_CASE("lines"),
    CHECK_EACH(test_next_line_table, lines_cases),
    CHECK_TEST(test_next_line_misc),

    CHECK_CASE("json", .timeout = 60),
    CHECK_EACH(test_json_table, json_cases),
    CHECK_TEST(test_json_append),
    CHECK_TEST(test_json_random),
)
