/*
 * Unit tests of the one decimal parser (src/base/decimal.c): what it takes,
 * what it refuses, and the 64-bit boundary it must not saturate across.
 */
#include <stdint.h>

#include "check_main.h"
#include "decimal.h"

START_TEST(takes_plain_digits)
{
    uint64_t v = 7;
    ck_assert_int_eq(decimal_parse_u64("0", &v), DECIMAL_OK);
    ck_assert_uint_eq(v, 0);
    ck_assert_int_eq(decimal_parse_u64("00042", &v), DECIMAL_OK);
    ck_assert_uint_eq(v, 42);
    ck_assert_int_eq(decimal_parse_u64n("12345xyz", 5, &v), DECIMAL_OK);
    ck_assert_uint_eq(v, 12345);
}
END_TEST

START_TEST(refuses_what_strtoull_takes)
{
    static const char *const bad[] = { "", " 1", "+1", "-1", "1 ", "0x10", "1e3", "1.0" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t v = 99;
        ck_assert_int_eq(decimal_parse_u64(bad[i], &v), DECIMAL_INVALID);
        ck_assert_uint_eq(v, 99);
    }
    uint64_t v = 0;
    ck_assert_int_eq(decimal_parse_u64(NULL, &v), DECIMAL_INVALID);
    ck_assert_int_eq(decimal_parse_u64n("1", 0, &v), DECIMAL_INVALID);
}
END_TEST

START_TEST(range_at_64_bits)
{
    uint64_t v = 0;
    ck_assert_int_eq(decimal_parse_u64("18446744073709551615", &v), DECIMAL_OK);
    ck_assert_uint_eq(v, UINT64_MAX);
    v = 5;
    ck_assert_int_eq(decimal_parse_u64("18446744073709551616", &v), DECIMAL_RANGE);
    ck_assert_int_eq(decimal_parse_u64("99999999999999999999", &v), DECIMAL_RANGE);
    ck_assert_uint_eq(v, 5);
    /* Leading zeros do not count against the range. */
    ck_assert_int_eq(decimal_parse_u64("000018446744073709551615", &v), DECIMAL_OK);
    ck_assert_uint_eq(v, UINT64_MAX);
}
END_TEST

CHECK_SUITE("decimal",
    CHECK_CASE("parse"),
    CHECK_TEST(takes_plain_digits),
    CHECK_TEST(refuses_what_strtoull_takes),
    CHECK_TEST(range_at_64_bits),
)
