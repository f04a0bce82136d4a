/*
 * The one main() of every Check unit test program (tests/check_main.c) and
 * the one way to register tests: a test file defines check_suite() as a
 * declarative list of cases and tests, and check_main.c builds the suite,
 * runs it and turns its failures into the exit status make check reads.
 */
#ifndef BLOOMGUARD_CHECK_MAIN_H
#define BLOOMGUARD_CHECK_MAIN_H

#include <stddef.h>

#include <check.h>

/*
 * A test file registers its tests with one list at its end:
 *
 *     CHECK_SUITE("snapshot",
 *         CHECK_CASE("core", .timeout = 120, .setup = setup, .teardown = teardown),
 *         CHECK_TEST(test_round_trip),
 *         CHECK_EACH(test_table, table_cases),
 *     )
 *
 * Each row is a struct check_entry: either the start of a TCase (tcase !=
 * NULL) or a test added to the TCase the last such row started.  Write rows
 * with the macros below, never by hand.
 */
struct check_entry {
    const char *tcase;  /* a case row: the TCase's name (CK_RUN_CASE selects by it) */
    double timeout;     /* a case row: seconds per test; 0 keeps Check's default */
    SFun setup;         /* a case row: checked fixture, run in each test's fork */
    SFun teardown;
    SFun unchecked_setup;  /* a case row: unchecked fixture, run once per case */
    SFun unchecked_teardown;
    const TTest *test;  /* a test row: the test START_TEST defined */
    int end;            /* a test row: it runs with _i = 0 .. end - 1 */
};

/* Starts the TCase name; the rest are designated initializers of the fields
 * above (.timeout, .setup, .teardown, .unchecked_setup, .unchecked_teardown). */
#define CHECK_CASE(name, ...) { .tcase = (name), __VA_ARGS__ }

/* The test t, run once (as tcase_add_test). */
#define CHECK_TEST(t) { .test = (t), .end = 1 }

/* The test t, run n times with _i = 0 .. n - 1 (as tcase_add_loop_test). */
#define CHECK_LOOP(t, n) { .test = (t), .end = (n) }

/* The test t, run once for each element of the array cases (_i indexes it). */
#define CHECK_EACH(t, cases) CHECK_LOOP(t, (int)(sizeof(cases) / sizeof((cases)[0])))

/*
 * A new suite named name holding the n rows of list, in order; what
 * CHECK_SUITE expands to.  list must start with a CHECK_CASE row (the
 * runner aborts, naming the suite, when it does not).  The suite is the
 * caller's; main() in check_main.c frees it with the runner.
 */
Suite *check_suite_of(const char *name, const struct check_entry *list, size_t n);

/* The suite of this test program; built once, owned by the runner. */
Suite *check_suite(void);

/*
 * Defines check_suite() as the suite name of the rows that follow, in
 * order (a trailing comma is fine).  The rows live inside the function
 * because START_TEST(x) makes x a static variable, which a file-scope
 * initializer may not read.
 */
#define CHECK_SUITE(name, ...)                                                   \
    Suite *check_suite(void)                                                     \
    {                                                                            \
        const struct check_entry check_rows_[] = {__VA_ARGS__};                  \
        return check_suite_of((name), check_rows_,                               \
                              sizeof check_rows_ / sizeof check_rows_[0]);       \
    }

#endif
