/*
 * The hand-picked spellings of tests/spell_cases.txt (its opening comment
 * gives the format), read for the two programs that check them:
 * tests/check_spell against the verdict and key each line expects, and
 * tests/spelltool (tests/spell.test) against PostgreSQL itself.
 */
#ifndef BLOOMGUARD_SPELL_CASES_H
#define BLOOMGUARD_SPELL_CASES_H

#include <stddef.h>

#include "spell.h"

struct spell_case {
    enum spell_type type;
    enum spell_verdict want;
    char *in;               /* the spelling, unescaped (never holds a NUL byte) */
    char *key;              /* the key a SPELL_KEY case expects; NULL for the others */
    unsigned line;          /* the case's line in the file, to name it in messages */
};

/*
 * The file of the cases: $top_srcdir/tests/spell_cases.txt (make check
 * exports top_srcdir), else tests/spell_cases.txt below the current
 * directory.  A static string.
 */
const char *spell_cases_path(void);

/*
 * Every case of path, in order, *n of them: malloc'ed, the caller frees
 * them with spell_cases_free.  NULL when the file cannot be read or a line
 * breaks the format, with err (errlen bytes) saying which line and why.
 */
struct spell_case *spell_cases_read(const char *path, size_t *n, char *err, size_t errlen);

/* Frees the n cases c (NULL: nothing). */
void spell_cases_free(struct spell_case *c, size_t n);

#endif
