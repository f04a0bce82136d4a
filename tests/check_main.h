/*
 * The one main() of every Check unit test program (tests/check_main.c):
 * a test file defines check_suite() and links check_main.c, which runs the
 * suite and turns its failures into the exit status make check reads.
 */
#ifndef BLOOMGUARD_CHECK_MAIN_H
#define BLOOMGUARD_CHECK_MAIN_H

#include <check.h>

/* The suite of this test program; built once, owned by the runner. */
Suite *check_suite(void);

#endif
