/*
 * Unit tests of src/core/spell.c: for each column type the spellings PostgreSQL
 * 15's input function takes and refuses, with the tricky ones (range
 * edges, uuid forms uuid_in refuses, numeric scales, float -0, interval
 * months of 30 days), the capacity rule, and that every key is a fixed
 * point.  tests/spell.test checks the same rule, and the same hand-picked
 * cases (tests/spell_cases.txt), against a real server.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "spell.h"
#include "spell_cases.h"

/*
 * The hand-picked cases: tests/spell_cases.txt, which tests/spelltool asks
 * PostgreSQL about too.  Read once, before the suite is built, so that each
 * case runs as its own loop test (one test, to fail, if they cannot be read).
 */
static struct spell_case *cases;
static size_t ncases;
static char cases_err[512] = "no cases";

/* How many there were when the table moved out of this file: none may be lost. */
#define AT_LEAST_CASES 228

static int case_count(void)
{
    cases = spell_cases_read(spell_cases_path(), &ncases, cases_err, sizeof cases_err);
    return cases != NULL && ncases > 0 ? (int)ncases : 1;
}

START_TEST(test_cases)
{
    ck_assert_msg(cases != NULL && ncases > 0, "%s", cases_err);
    ck_assert_msg(ncases >= AT_LEAST_CASES, "%s: %zu cases, fewer than %d", spell_cases_path(),
                  ncases, AT_LEAST_CASES);
    const struct spell_case *c = &cases[_i];
    size_t len = strlen(c->in), cap = spell_key_cap(c->type, len);
    /* Exactly cap bytes plus a canary, so a write past cap shows. */
    char *out = malloc(cap + 1);
    ck_assert_ptr_nonnull(out);
    out[cap] = 0x5A;
    size_t outlen = 12345;
    enum spell_verdict v = spell_key(c->type, c->in, len, out, cap, &outlen);
    ck_assert_msg(v == c->want, "line %u, %s \"%s\": %s, want %s", c->line,
                  spell_type_name(c->type), c->in, spell_verdict_name(v),
                  spell_verdict_name(c->want));
    ck_assert_int_eq(out[cap], 0x5A);
    if (v != SPELL_KEY) {
        ck_assert_uint_eq(outlen, 0);
    } else {
        ck_assert_msg(outlen == strlen(c->key) && memcmp(out, c->key, outlen) == 0,
                      "line %u, %s \"%s\": key \"%.*s\", want \"%s\"", c->line,
                      spell_type_name(c->type), c->in, (int)outlen, out, c->key);
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
    CHECK_LOOP(test_cases, case_count()),
    CHECK_TEST(test_nul),
    CHECK_TEST(test_small_cap_is_maybe),
    CHECK_TEST(test_type_of),
    CHECK_TEST(test_names),
    CHECK_TEST(test_int2_exhaustive),
)
