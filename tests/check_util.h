/*
 * Helpers the Check unit tests share (tests/check_util.c): scratch
 * directories and paths in them, filters compared layer by layer, a small
 * configuration fixture, and an ID POSTed to a table.  Each helper fails
 * the running test (a Check assertion) instead of returning an error.
 */
#ifndef BLOOMGUARD_CHECK_UTIL_H
#define BLOOMGUARD_CHECK_UTIL_H

#include <stdint.h>

#include "config.h"
#include "filter.h"
#include "table.h"

/* A new empty directory /tmp/<prefix>.XXXXXX; malloc'ed, the caller frees it. */
char *check_tmpdir(const char *prefix);

/* "dir/name", malloc'ed; the caller frees it. */
char *check_join(const char *dir, const char *name);

/* Remove dir and everything below it (made writable first); dir stays the caller's. */
void check_rm_rf(const char *dir);

/*
 * filter_new_from refuses p with error want (a filter made is freed first);
 * what, the case (e.g. the field changed), names it in the failure.
 */
void check_refused_params(const struct filter_params *p, enum filter_error want, const char *what);

/* The end of a test's scratch: check_rm_rf(dir), then both freed (path may be NULL). */
void check_scratch_free(char *dir, char *path);

/*
 * f and g have the same layers: as many, each of the same capacity, target
 * rate, blocks and probes, holding the same bits (read with filter_bits_read).
 */
void check_same_layers(const struct filter *f, const struct filter *g);

/*
 * Zero *cfg and *fc and give them the settings the table and publish tests
 * build filters with: staleness 60 s, rebuilds 30 s apart, one filter
 * named name (a static string, not owned) of false-positive rate fpp
 * holding at most pending_limit POSTed ids.  Free neither with config_free.
 */
void check_filter_fixture(struct config *cfg, struct filter_config *fc, const char *name,
                          double fpp, uint64_t pending_limit);

/* The column the table tests load: relation 1, attribute 1, spelled as text. */
extern const struct table_ident check_text_ident;

/*
 * A COPY into t begun as the loader begins one (a filter for items, the
 * column ident), never NULL; *epoch, t's epoch before it, is what its
 * table_load_commit must be given.
 */
struct table_load *check_load_begin(struct table *t, uint64_t items,
                                    const struct table_ident *ident, uint64_t *epoch);

/* id POSTed to t alone, as POST /ids hands it over; the table's answer. */
enum table_insert_result check_post(struct table *t, const char *id);

#endif
