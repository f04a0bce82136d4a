/*
 * Helpers the Check unit tests share (tests/check_util.c): scratch
 * directories and paths in them.  Each helper fails the running test (a
 * Check assertion) instead of returning an error.
 */
#ifndef BLOOMGUARD_CHECK_UTIL_H
#define BLOOMGUARD_CHECK_UTIL_H

/* A new empty directory /tmp/<prefix>.XXXXXX; malloc'ed, the caller frees it. */
char *check_tmpdir(const char *prefix);

/* "dir/name", malloc'ed; the caller frees it. */
char *check_join(const char *dir, const char *name);

/* Remove dir and everything below it (made writable first); dir stays the caller's. */
void check_rm_rf(const char *dir);

#endif
