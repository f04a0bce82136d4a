/*
 * The shared runner of the Check unit tests: runs the program's suite
 * (check_suite, defined by each tests/check_*.c) and exits non-zero when a
 * test failed.  CK_FORK and CK_VERBOSITY in the environment work as Check
 * documents them.
 */
#include <stdlib.h>

#include "check_main.h"

int main(void)
{
    SRunner *sr = srunner_create(check_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
