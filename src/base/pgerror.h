/*
 * PostgreSQL's refusals for operators: the SQLSTATE of a failure, carried
 * inside the daemon's error text as " (SQLSTATE xxxxx)", and a fixed
 * one-line hint per code for /readyz and /stats.  Pure: no libpq, no I/O.
 */
#ifndef BLOOMGUARD_PGERROR_H
#define BLOOMGUARD_PGERROR_H

#include <stdbool.h>
#include <stddef.h>

/* Bytes for a SQLSTATE with its terminator. */
#define PGERROR_SQLSTATE_LEN 6

/*
 * The hint for a SQLSTATE (5 characters), or NULL when the table has none.
 * Hints are constant strings naming no host, database, role or path, so
 * they may be shown publicly.  Thread-safe.
 */
const char *pgerror_hint(const char *sqlstate);

/*
 * The SQLSTATE that libpq's text of a failed connection implies
 * ("FATAL:  password authentication failed ..." -> "28P01"), or NULL.
 * libpq keeps no result for a refused connection, so this reads the
 * server's (English) FATAL line; other languages give NULL.  Thread-safe.
 */
const char *pgerror_guess_connect(const char *msg);

/*
 * Append " (SQLSTATE xxxxx)" to the error text err (errlen bytes) when
 * sqlstate is a valid code and the tag fits whole; otherwise leave err alone.
 */
void pgerror_tag(char *err, size_t errlen, const char *sqlstate);

/*
 * The code of the last " (SQLSTATE xxxxx)" tag in err into out
 * (PGERROR_SQLSTATE_LEN bytes): true if found; out is "" otherwise.
 */
bool pgerror_find(const char *err, char out[PGERROR_SQLSTATE_LEN]);

/* As pgerror_find, and cut that tag (with whatever follows it) off err. */
bool pgerror_take(char *err, char out[PGERROR_SQLSTATE_LEN]);

#endif
