/*
 * The shared runner of the Check unit tests: builds the program's suite
 * from the registration list each tests/check_*.c writes with CHECK_SUITE,
 * runs it and exits non-zero when a test failed.  CK_FORK, CK_VERBOSITY,
 * CK_RUN_CASE and the timeout variables work as Check documents them.
 */
#include <stdio.h>
#include <stdlib.h>

#include "check_main.h"

Suite *check_suite_of(const char *name, const struct check_entry *list, size_t n)
{
    Suite *s = suite_create(name);
    TCase *tc = NULL;

    for (size_t i = 0; i < n; i++) {
        const struct check_entry *e = &list[i];
        if (e->tcase != NULL) {
            tc = tcase_create(e->tcase);
            if (e->timeout > 0)
                tcase_set_timeout(tc, e->timeout);
            if (e->unchecked_setup != NULL || e->unchecked_teardown != NULL)
                tcase_add_unchecked_fixture(tc, e->unchecked_setup, e->unchecked_teardown);
            if (e->setup != NULL || e->teardown != NULL)
                tcase_add_checked_fixture(tc, e->setup, e->teardown);
            suite_add_tcase(s, tc);
            continue;
        }
        /* A mistake in a test file's list, not a test failure: stop loudly. */
        if (tc == NULL) {
            fprintf(stderr, "%s: the registration list must start with CHECK_CASE\n", name);
            abort();
        }
        tcase_add_loop_test(tc, e->test, 0, e->end);
    }
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(check_suite());
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
