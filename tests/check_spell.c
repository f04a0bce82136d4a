/*
 * Unit tests of src/core/spell.c: for each column type the spellings PostgreSQL
 * 15's input function takes and refuses, with the tricky ones (range
 * edges, uuid forms uuid_in refuses, numeric scales, float -0, interval
 * months of 30 days), the capacity rule, and that every key is a fixed
 * point.  tests/spell.test checks the same rule against a real server.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "spell.h"

#define K SPELL_KEY
#define N SPELL_NOT_A_VALUE
#define M SPELL_MAYBE

struct spell_case {
    enum spell_type type;
    const char *in;
    enum spell_verdict want;
    const char *key;        /* for K */
};

static const struct spell_case cases[] = {
    /* ---- integers: ws, sign, digits, ws; PostgreSQL 15 has no '_' or 0x */
    { SPELL_INT8, "5", K, "5" },
    { SPELL_INT8, "0005", K, "5" },
    { SPELL_INT8, "+0005", K, "5" },
    { SPELL_INT8, " 7 ", K, "7" },
    { SPELL_INT8, "\t\n\v\f\r7\r\n", K, "7" },
    { SPELL_INT8, "-0", K, "0" },
    { SPELL_INT8, "-000", K, "0" },
    { SPELL_INT8, "-12", K, "-12" },
    { SPELL_INT8, "", N, NULL },
    { SPELL_INT8, " ", N, NULL },
    { SPELL_INT8, "+", N, NULL },
    { SPELL_INT8, "- 5", N, NULL },
    { SPELL_INT8, "--5", N, NULL },
    { SPELL_INT8, "5 5", N, NULL },
    { SPELL_INT8, "1_000", N, NULL },
    { SPELL_INT8, "0x10", N, NULL },
    { SPELL_INT8, "5.0", N, NULL },
    { SPELL_INT8, "1e3", N, NULL },
    { SPELL_INT8, "9223372036854775807", K, "9223372036854775807" },
    { SPELL_INT8, "9223372036854775808", N, NULL },
    { SPELL_INT8, "-9223372036854775808", K, "-9223372036854775808" },
    { SPELL_INT8, "-9223372036854775809", N, NULL },
    { SPELL_INT8, "00000000000000000000009223372036854775807", K, "9223372036854775807" },
    { SPELL_INT8, "99999999999999999999999", N, NULL },
    { SPELL_INT4, "2147483647", K, "2147483647" },
    { SPELL_INT4, "2147483648", N, NULL },
    { SPELL_INT4, "-2147483648", K, "-2147483648" },
    { SPELL_INT4, "-2147483649", N, NULL },
    { SPELL_INT4, "99999999999", N, NULL },
    { SPELL_INT2, "32767", K, "32767" },
    { SPELL_INT2, "32768", N, NULL },
    { SPELL_INT2, "-32768", K, "-32768" },
    { SPELL_INT2, "-32769", N, NULL },
    /* A byte >= 0x80 where the server asks isspace(): its locale decides. */
    { SPELL_INT4, "5\xc2\xa0", M, NULL },
    { SPELL_INT4, "\xc2\xa0" "5", M, NULL },
    { SPELL_INT4, "5\xc2\xa0x", N, NULL },
    { SPELL_INT4, "\xef\xbc\x95", N, NULL },          /* fullwidth 5 */
    /* ---- oid: strtoul, then kept if it fits after either extension */
    { SPELL_OID, "4294967295", K, "4294967295" },
    { SPELL_OID, "4294967296", N, NULL },
    { SPELL_OID, "-1", K, "4294967295" },
    { SPELL_OID, "-2147483648", K, "2147483648" },
    { SPELL_OID, "-2147483649", N, NULL },
    { SPELL_OID, " +07 ", K, "7" },
    { SPELL_OID, "-0", K, "0" },
    { SPELL_OID, "-18446744073709551615", K, "1" },
    { SPELL_OID, "-18446744073709551616", N, NULL },
    { SPELL_OID, "18446744073709551615", K, "4294967295" },    /* (int) -1 */
    { SPELL_OID, "18446744071562067968", K, "2147483648" },
    { SPELL_OID, "18446744071562067967", N, NULL },
    /* ---- uuid: braces, a hyphen after any group of four, any case */
    { SPELL_UUID, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", K, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11" },
    { SPELL_UUID, "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11", K, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11" },
    { SPELL_UUID, "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}", K, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11" },
    { SPELL_UUID, "a0eebc999c0b4ef8bb6d6bb9bd380a11", K, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11" },
    { SPELL_UUID, "{a0eebc999c0b4ef8bb6d6bb9bd380a11}", K, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11" },
    { SPELL_UUID, "a0ee-bc99-9c0b-4ef8-bb6d-6bb9-bd38-0a11", K, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11" },
    { SPELL_UUID, "a0eebc99-9c0b4ef8-bb6d6bb9-bd380a11", K, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11" },
    { SPELL_UUID, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}", N, NULL },
    { SPELL_UUID, "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", N, NULL },
    { SPELL_UUID, "a0-eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", N, NULL },
    { SPELL_UUID, "a0eebc99--9c0b-4ef8-bb6d-6bb9bd380a11", N, NULL },
    { SPELL_UUID, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11-", N, NULL },
    { SPELL_UUID, "-a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", N, NULL },
    { SPELL_UUID, " a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", N, NULL },
    { SPELL_UUID, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1", N, NULL },
    { SPELL_UUID, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a111", N, NULL },
    { SPELL_UUID, "g0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", N, NULL },
    { SPELL_UUID, "urn:uuid:a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", N, NULL },
    { SPELL_UUID, "{}", N, NULL },
    { SPELL_UUID, "", N, NULL },
    /* ---- numeric: equal values, one key */
    { SPELL_NUMERIC, "1.5", K, "1.5" },
    { SPELL_NUMERIC, "1.50", K, "1.5" },
    { SPELL_NUMERIC, "+01.5", K, "1.5" },
    { SPELL_NUMERIC, "15e-1", K, "1.5" },
    { SPELL_NUMERIC, " .15E1 ", K, "1.5" },
    { SPELL_NUMERIC, "1.e5", K, "100000" },
    { SPELL_NUMERIC, "1e 5", K, "100000" },
    { SPELL_NUMERIC, "5.", K, "5" },
    { SPELL_NUMERIC, "-0.000", K, "0" },
    { SPELL_NUMERIC, "0e-16383", K, "0" },
    { SPELL_NUMERIC, "0e-16384", N, NULL },
    { SPELL_NUMERIC, "-0.0015", K, "-0.0015" },
    { SPELL_NUMERIC, "100", K, "100" },
    { SPELL_NUMERIC, "NaN", K, "NaN" },
    { SPELL_NUMERIC, " nan ", K, "NaN" },
    { SPELL_NUMERIC, "+nan", N, NULL },
    { SPELL_NUMERIC, "inf", K, "Infinity" },
    { SPELL_NUMERIC, "-INFINITY", K, "-Infinity" },
    { SPELL_NUMERIC, "+inf", K, "Infinity" },
    { SPELL_NUMERIC, "infinit", N, NULL },
    { SPELL_NUMERIC, ".", N, NULL },
    { SPELL_NUMERIC, "1..2", N, NULL },
    { SPELL_NUMERIC, "1e", N, NULL },
    { SPELL_NUMERIC, "1e+", N, NULL },
    { SPELL_NUMERIC, "e5", N, NULL },
    { SPELL_NUMERIC, "1e1073741823", N, NULL },
    { SPELL_NUMERIC, "1e-1073741823", N, NULL },
    { SPELL_NUMERIC, "1e131071", M, NULL },     /* valid, but a long key */
    { SPELL_NUMERIC, "1e131072", N, NULL },
    { SPELL_NUMERIC, "1e20", K, "100000000000000000000" },
    { SPELL_NUMERIC, "1\xc2\xa0", M, NULL },
    /* ---- floats: value equality through strtod/strtof */
    { SPELL_FLOAT8, "1e20", K, "1e+20" },
    { SPELL_FLOAT8, "100000000000000000000", K, "1e+20" },
    { SPELL_FLOAT8, "0.1", K, "0.1" },
    { SPELL_FLOAT8, "0.10000000000000001", K, "0.1" },
    { SPELL_FLOAT8, "1e-5", K, "1e-05" },
    { SPELL_FLOAT8, "0.0001", K, "0.0001" },
    { SPELL_FLOAT8, "1e14", K, "100000000000000" },
    { SPELL_FLOAT8, "1e15", K, "1e+15" },
    { SPELL_FLOAT8, "123456789012345678", K, "1.2345678901234568e+17" },
    { SPELL_FLOAT8, "-0", K, "0" },
    { SPELL_FLOAT8, "0e-999", K, "0" },
    { SPELL_FLOAT8, "5e-324", K, "5e-324" },
    { SPELL_FLOAT8, "1e-400", N, NULL },
    { SPELL_FLOAT8, "1e400", N, NULL },
    { SPELL_FLOAT8, "-nan", K, "NaN" },
    { SPELL_FLOAT8, " Infinity ", K, "Infinity" },
    { SPELL_FLOAT8, "-inf", K, "-Infinity" },
    { SPELL_FLOAT8, "0x1p3", K, "8" },
    { SPELL_FLOAT8, "1e", N, NULL },
    { SPELL_FLOAT8, "", N, NULL },
    { SPELL_FLOAT8, "infinit", N, NULL },
    { SPELL_FLOAT4, "0.1", K, "0.1" },
    { SPELL_FLOAT4, "1e6", K, "1e+06" },
    { SPELL_FLOAT4, "123456.7", K, "123456.7" },
    { SPELL_FLOAT4, "3.4028235e38", K, "3.4028235e+38" },
    { SPELL_FLOAT4, "3.5e38", N, NULL },
    { SPELL_FLOAT4, "1e-46", N, NULL },
    { SPELL_FLOAT4, "16777217", K, "1.6777216e+07" },
    /* ---- bool: boolin's words */
    { SPELL_BOOL, "t", K, "true" },
    { SPELL_BOOL, "TRUE", K, "true" },
    { SPELL_BOOL, "ye", K, "true" },
    { SPELL_BOOL, " on ", K, "true" },
    { SPELL_BOOL, "1", K, "true" },
    { SPELL_BOOL, "of", K, "false" },
    { SPELL_BOOL, "nO", K, "false" },
    { SPELL_BOOL, "0", K, "false" },
    { SPELL_BOOL, "o", N, NULL },
    { SPELL_BOOL, "truex", N, NULL },
    { SPELL_BOOL, "01", N, NULL },
    { SPELL_BOOL, "", N, NULL },
    { SPELL_BOOL, "t\xc2\xa0", M, NULL },
    /* ---- bytea: hex and escape formats, one key */
    { SPELL_BYTEA, "\\x0a1b", K, "\\x0a1b" },
    { SPELL_BYTEA, "\\x0A1B", K, "\\x0a1b" },
    { SPELL_BYTEA, "\\x 0a\n1b\t", K, "\\x0a1b" },
    { SPELL_BYTEA, "\\x", K, "\\x" },
    { SPELL_BYTEA, "", K, "\\x" },
    { SPELL_BYTEA, "abc", K, "\\x616263" },
    { SPELL_BYTEA, "\\\\", K, "\\x5c" },
    { SPELL_BYTEA, "\\001\\377", K, "\\x01ff" },
    { SPELL_BYTEA, "\\X0a", N, NULL },
    { SPELL_BYTEA, "\\x0", N, NULL },
    { SPELL_BYTEA, "\\x0 a", N, NULL },
    { SPELL_BYTEA, "\\400", N, NULL },
    { SPELL_BYTEA, "a\\", N, NULL },
    { SPELL_BYTEA, "caf\xc3\xa9", M, NULL },
    /* ---- dates and times: the canonical text only */
    { SPELL_DATE, "2024-02-29", K, "2024-02-29" },
    { SPELL_DATE, "0044-03-15 BC", K, "0044-03-15 BC" },
    { SPELL_DATE, "0001-12-31 BC", K, "0001-12-31 BC" },
    { SPELL_DATE, "0004-02-29 BC", M, NULL },               /* astronomical year -3 */
    { SPELL_DATE, "0005-02-29 BC", K, "0005-02-29 BC" },    /* -4: leap */
    { SPELL_DATE, "0099-01-01", K, "0099-01-01" },
    { SPELL_DATE, "10000-01-01", K, "10000-01-01" },
    { SPELL_DATE, "4713-11-24 BC", K, "4713-11-24 BC" },
    { SPELL_DATE, "5874897-12-31", K, "5874897-12-31" },
    { SPELL_DATE, "infinity", K, "infinity" },
    { SPELL_DATE, "-infinity", K, "-infinity" },
    { SPELL_DATE, "2023-02-29", M, NULL },
    { SPELL_DATE, "4713-11-23 BC", M, NULL },
    { SPELL_DATE, "5874898-01-01", M, NULL },
    { SPELL_DATE, "010000-01-01", M, NULL },
    { SPELL_DATE, "0000-01-01", M, NULL },
    { SPELL_DATE, "2024-1-05", M, NULL },
    { SPELL_DATE, " 2024-01-05", M, NULL },
    { SPELL_DATE, "20240105", M, NULL },
    { SPELL_DATE, "Infinity", M, NULL },
    { SPELL_TIMESTAMP, "2024-01-05 10:00:00", K, "2024-01-05 10:00:00" },
    { SPELL_TIMESTAMP, "2024-01-05 10:00:00.5", K, "2024-01-05 10:00:00.5" },
    { SPELL_TIMESTAMP, "0044-03-15 12:00:00.5 BC", K, "0044-03-15 12:00:00.5 BC" },
    { SPELL_TIMESTAMP, "294276-12-31 23:59:59.999999", K, "294276-12-31 23:59:59.999999" },
    { SPELL_TIMESTAMP, "294277-01-01 00:00:00", M, NULL },
    { SPELL_TIMESTAMP, "2024-01-05 10:00:00.50", M, NULL },
    { SPELL_TIMESTAMP, "2024-01-05 23:59:60", M, NULL },   /* the next day */
    { SPELL_TIMESTAMP, "2024-01-05 24:00:00", M, NULL },
    { SPELL_TIMESTAMP, "2024-01-05T10:00:00", M, NULL },
    { SPELL_TIMESTAMP, "2024-01-05 10:00:00.1234567", M, NULL },
    { SPELL_TIMESTAMPTZ, "2024-01-05 10:00:00+00", K, "2024-01-05 10:00:00+00" },
    { SPELL_TIMESTAMPTZ, "0044-03-15 12:00:00+00 BC", K, "0044-03-15 12:00:00+00 BC" },
    { SPELL_TIMESTAMPTZ, "2024-01-05 10:00:00", M, NULL },    /* the service's TimeZone */
    { SPELL_TIMESTAMPTZ, "2024-01-05 15:30:00+05:30", M, NULL },
    { SPELL_TIMESTAMPTZ, "2024-01-05 10:00:00+00:00", M, NULL },
    { SPELL_TIME, "12:34:56", K, "12:34:56" },
    { SPELL_TIME, "12:34:56.5", K, "12:34:56.5" },
    { SPELL_TIME, "24:00:00", K, "24:00:00" },
    { SPELL_TIME, "24:00:00.5", M, NULL },
    { SPELL_TIME, "23:59:60", M, NULL },
    { SPELL_TIME, "12:34:56.50", M, NULL },
    { SPELL_TIME, "12:34", M, NULL },
    /* ---- interval: the span, months of 30 days and days of 24 hours */
    { SPELL_INTERVAL, "1 mon", K, "1 mon" },
    { SPELL_INTERVAL, "30 days", K, "1 mon" },
    { SPELL_INTERVAL, "720:00:00", K, "1 mon" },
    { SPELL_INTERVAL, "1 day", K, "1 day" },
    { SPELL_INTERVAL, "24:00:00", K, "1 day" },
    { SPELL_INTERVAL, "-1 days +24:00:00", K, "00:00:00" },
    { SPELL_INTERVAL, "00:00:00", K, "00:00:00" },
    { SPELL_INTERVAL, "1 year 2 mons -3 days +04:05:06.5", K, "1 year 1 mon 27 days 04:05:06.5" },
    { SPELL_INTERVAL, "-1 years -1 mons", K, "-1 years -1 mons" },
    { SPELL_INTERVAL, "-11 mons +5 days", K, "-10 mons -25 days" },
    { SPELL_INTERVAL, "-00:55:00", K, "-00:55:00" },
    { SPELL_INTERVAL, "2562047788:00:54.775807", K,
      "296533 years 3 mons 21 days 04:00:54.775807" },
    { SPELL_INTERVAL, "1 mons", M, NULL },
    { SPELL_INTERVAL, "1 month", M, NULL },
    { SPELL_INTERVAL, "30 day", M, NULL },
    { SPELL_INTERVAL, "0", M, NULL },
    { SPELL_INTERVAL, "@ 1 day", M, NULL },
    { SPELL_INTERVAL, "-1 days 02:00:00", M, NULL },    /* sql_standard reads it otherwise */
    { SPELL_INTERVAL, "1 day 00:00:00", M, NULL },
    { SPELL_INTERVAL, "00:00:00.50", M, NULL },
    /* ---- text-like */
    { SPELL_TEXT, "Hello World ", K, "Hello World " },
    { SPELL_TEXT, "", K, "" },
    { SPELL_BPCHAR, "abc   ", K, "abc" },
    { SPELL_BPCHAR, "abc\t", K, "abc\t" },
    { SPELL_BPCHAR, " abc", K, " abc" },
    { SPELL_BPCHAR, "   ", K, "" },
    { SPELL_NAME, "abc", K, "abc" },
    { SPELL_NAME, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxyyy", K,
      "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" },
    { SPELL_NAME, "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
                  "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
                  "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
                  "\xc3\xa9\xc3\xa9", M, NULL },
    { SPELL_COLLATED, "abc", M, NULL },
    { SPELL_OTHER, "10.0.0.1", M, NULL },
};

START_TEST(test_cases)
{
    const struct spell_case *c = &cases[_i];
    size_t len = strlen(c->in), cap = spell_key_cap(c->type, len);
    /* Exactly cap bytes plus a canary, so a write past cap shows. */
    char *out = malloc(cap + 1);
    ck_assert_ptr_nonnull(out);
    out[cap] = 0x5A;
    size_t outlen = 12345;
    enum spell_verdict v = spell_key(c->type, c->in, len, out, cap, &outlen);
    ck_assert_msg(v == c->want, "%s \"%s\": %s, want %s", spell_type_name(c->type), c->in,
                  spell_verdict_name(v), spell_verdict_name(c->want));
    ck_assert_int_eq(out[cap], 0x5A);
    if (v != SPELL_KEY) {
        ck_assert_uint_eq(outlen, 0);
    } else {
        ck_assert_msg(outlen == strlen(c->key) && memcmp(out, c->key, outlen) == 0,
                      "%s \"%s\": key \"%.*s\", want \"%s\"", spell_type_name(c->type), c->in,
                      (int)outlen, out, c->key);
        /* A key is a fixed point. */
        size_t cap2 = spell_key_cap(c->type, outlen), len2;
        char *again = malloc(cap2);
        ck_assert_ptr_nonnull(again);
        ck_assert_int_eq(spell_key(c->type, out, outlen, again, cap2, &len2), SPELL_KEY);
        ck_assert(len2 == outlen && memcmp(again, out, outlen) == 0);
        free(again);
    }
    free(out);
}
END_TEST

/* A NUL (which the daemon refuses before) is no white space and no digit. */
START_TEST(test_nul)
{
    char out[128];
    size_t outlen;
    ck_assert_int_eq(spell_key(SPELL_INT4, "5\0", 2, out, sizeof out, &outlen), SPELL_NOT_A_VALUE);
    ck_assert_int_eq(spell_key(SPELL_UUID, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11\0", 37, out,
                               sizeof out, &outlen), SPELL_NOT_A_VALUE);
    ck_assert_int_eq(spell_key(SPELL_FLOAT8, "1\0" "5", 3, out, sizeof out, &outlen),
                     SPELL_NOT_A_VALUE);
    ck_assert_int_eq(spell_key(SPELL_BYTEA, "a\0", 2, out, sizeof out, &outlen),
                     SPELL_NOT_A_VALUE);
}
END_TEST

START_TEST(test_small_cap_is_maybe)
{
    char out[64];
    size_t outlen = 99;
    size_t need = spell_key_cap(SPELL_INT8, 1);
    ck_assert_uint_eq(need, 1 + SPELL_SLACK);
    ck_assert_int_eq(spell_key(SPELL_INT8, "5", 1, out, need - 1, &outlen), SPELL_MAYBE);
    ck_assert_uint_eq(outlen, 0);
    ck_assert_int_eq(spell_key(SPELL_INT8, "5", 1, out, need, &outlen), SPELL_KEY);
    ck_assert_uint_eq(spell_key_cap(SPELL_BYTEA, 10), 22);
    ck_assert_uint_eq(spell_key_cap(SPELL_INTERVAL, 10), 10 + 4 * SPELL_SLACK);
}
END_TEST

START_TEST(test_type_of)
{
    static const struct { uint32_t oid; bool det; enum spell_type t; } t[] = {
        { 25, true, SPELL_TEXT }, { 1043, true, SPELL_TEXT }, { 25, false, SPELL_COLLATED },
        { 1043, false, SPELL_COLLATED }, { 1042, true, SPELL_BPCHAR },
        { 1042, false, SPELL_COLLATED }, { 19, true, SPELL_NAME }, { 21, true, SPELL_INT2 },
        { 23, true, SPELL_INT4 }, { 20, true, SPELL_INT8 }, { 26, true, SPELL_OID },
        { 2950, true, SPELL_UUID }, { 1700, true, SPELL_NUMERIC },
        { 700, true, SPELL_FLOAT4 }, { 701, true, SPELL_FLOAT8 }, { 16, true, SPELL_BOOL },
        { 1082, true, SPELL_DATE }, { 1114, true, SPELL_TIMESTAMP },
        { 1184, true, SPELL_TIMESTAMPTZ }, { 1083, true, SPELL_TIME },
        { 1186, true, SPELL_INTERVAL }, { 17, true, SPELL_BYTEA },
        /* A collation does not matter to a type that has none. */
        { 20, false, SPELL_INT8 },
        { 18, true, SPELL_OTHER },      /* "char" */
        { 869, true, SPELL_OTHER },     /* inet */
        { 1266, true, SPELL_OTHER },    /* timetz */
        { 0, true, SPELL_OTHER },
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        ck_assert_msg(spell_type_of(t[i].oid, -1, t[i].det) == t[i].t, "oid %u", t[i].oid);
}
END_TEST

START_TEST(test_names)
{
    ck_assert_str_eq(spell_type_name(SPELL_TEXT), "text");
    ck_assert_str_eq(spell_type_name(SPELL_COLLATED), "text_nondeterministic");
    ck_assert_str_eq(spell_type_name(SPELL_OTHER), "other");
    ck_assert_str_eq(spell_type_name((enum spell_type)99), "unknown");
    for (int t = 0; t < SPELL_NTYPES; t++)
        ck_assert_str_ne(spell_type_name((enum spell_type)t), "unknown");
    ck_assert_str_eq(spell_verdict_name(SPELL_KEY), "key");
    ck_assert_str_eq(spell_verdict_name(SPELL_NOT_A_VALUE), "not_a_value");
    ck_assert_str_eq(spell_verdict_name(SPELL_MAYBE), "maybe");
    ck_assert_str_eq(spell_verdict_name((enum spell_verdict)7), "unknown");
}
END_TEST

/* Every integer of int2 spelled with sign, zeros and white space, both ways. */
START_TEST(test_int2_exhaustive)
{
    char in[64], out[128];
    size_t outlen;
    for (long v = -40000; v <= 40000; v++) {
        int n = snprintf(in, sizeof in, " %s%03ld\t", v < 0 ? "-" : "+", v < 0 ? -v : v);
        enum spell_verdict got = spell_key(SPELL_INT2, in, (size_t)n, out, sizeof out, &outlen);
        if (v < -32768 || v > 32767) {
            ck_assert_int_eq(got, SPELL_NOT_A_VALUE);
        } else {
            char want[16];
            int wl = snprintf(want, sizeof want, "%ld", v);
            ck_assert_int_eq(got, SPELL_KEY);
            ck_assert(outlen == (size_t)wl && memcmp(out, want, outlen) == 0);
        }
    }
}
END_TEST

CHECK_SUITE("spell",
    CHECK_CASE("core"),
    CHECK_EACH(test_cases, cases),
    CHECK_TEST(test_nul),
    CHECK_TEST(test_small_cap_is_maybe),
    CHECK_TEST(test_type_of),
    CHECK_TEST(test_names),
    CHECK_TEST(test_int2_exhaustive),
)
