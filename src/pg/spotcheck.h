/*
 * A random sample of a table's IDs read from PostgreSQL, for checking a
 * filter that came from elsewhere (a peer's snapshot) before its "absent"
 * answers are believed: every sampled row must be in it.  This module
 * reads the sample; the caller looks each row up (scheduler_vet.c, through
 * table_lookup: the spelling and the filter the answers use).
 *
 * How large, and what it proves.  A filter that would answer "absent" for
 * a fraction q of the table's rows passes a check of n rows drawn at random
 * with probability (1 - q)^n: no false-positive term, since a row the
 * filter answers "maybe" for is one it would never deny.  With
 * SPOTCHECK_ROWS = 500: a zeroed filter (q = 1) fails at the first row; q =
 * 10% passes with probability 1.3e-23, q = 5% 7e-12, q = 2% 4e-5, q = 1%
 * 0.7%.  So a snapshot that is wrong for more than a few percent of the
 * table (zeroed, of another table, years stale, corrupted in a way the
 * checksums do not see because whoever sent it recomputed them) is refused
 * with overwhelming probability; one missing a handful of chosen IDs is
 * not caught by sampling, which is what TLS with a CA (bootstrap_ca_file)
 * is for: the bytes come from the peer they claim to.
 *
 * The rows are drawn with TABLESAMPLE SYSTEM, which reads whole pages:
 * about 2n pages are picked (each independently), then n of their rows at
 * random, so the draws come from about 0.8n distinct pages, and the bound
 * above holds with q the fraction of pages holding missing rows when those
 * are clustered.  The sample costs about 2n page reads however large the
 * table (a table of under 2n pages, about 8 MiB, is read whole), never a
 * COPY's scan; a view or a foreign table, which TABLESAMPLE cannot read, is
 * read whole with ORDER BY random().
 */
#ifndef BLOOMGUARD_SPOTCHECK_H
#define BLOOMGUARD_SPOTCHECK_H

#include <libpq-fe.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "config.h"

#define SPOTCHECK_ROWS 500u

/* The rows read: each `col::text` (under LOADER_SESSION_SETTINGS), as COPY gives them. */
struct spotcheck {
    size_t n;
    char **rows;                /* NUL-terminated; owned */
    size_t *lens;
    char how[96];               /* how they were drawn, for the log ("TABLESAMPLE SYSTEM (0.5%) of 200000 pages") */
};

/*
 * Read up to n random non-NULL IDs of fc's table on conn (a session of
 * loader_connect: its settings spell the IDs as the loader's COPY does).
 * Every row returned was committed before the call returned.  True with
 * *out filled (fewer than n rows when the table holds fewer); false with
 * err (the server's error, or "interrupted" once *stop (NULL: none) is
 * true: PQfinish the connection then).  spotcheck_release frees *out.
 */
bool spotcheck_take(PGconn *conn, const struct filter_config *fc, unsigned n, atomic_bool *stop,
                    struct spotcheck *out, char *err, size_t errlen);

/* Free what spotcheck_take filled; a zeroed struct is fine. */
void spotcheck_release(struct spotcheck *s);

#endif
