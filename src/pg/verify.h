/*
 * The verifier's SQL (table_adapt.h, step 2): a session of
 * its own on the primary, and one primary-key lookup of a batch of
 * candidates' keys in a snapshot that is taken after the call begins,
 * sees finished the transactions the follower already applied, and reads
 * the very relation the table's load read.  The thread that paces it is
 * follow/verifier.c.
 */
#ifndef BLOOMGUARD_VERIFY_H
#define BLOOMGUARD_VERIFY_H

#include <libpq-fe.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "spell.h"

/*
 * A session for lookups (application_name "bloomguard verify", the
 * loader's session settings), refused unless it reaches a primary: a
 * standby's snapshot may lag the primary's commits, and a lookup there
 * could call a committed row absent.  Statements and lock waits are
 * bounded (VERIFY_STATEMENT_MS, VERIFY_LOCK_MS): a verification gives up
 * rather than queue behind DDL.  *sysid (at least 24 bytes) and *dboid get
 * the cluster's system identifier and the database's oid, which a table's
 * ident (loader_identify) must match before its IDs are looked up here.
 * NULL with err otherwise; PQfinish it.
 */
#define VERIFY_STATEMENT_MS 5000
#define VERIFY_LOCK_MS 1000
PGconn *verify_connect(const struct config *cfg, char *sysid, size_t sysid_cap, uint32_t *dboid,
                       char *err, size_t errlen);

enum verify_result {
    VERIFY_OK,          /* present[] filled */
    VERIFY_NOT_YET,     /* the snapshot does not see must_see finished yet: ask again soon */
    VERIFY_FAILED       /* err says why; the connection may be unusable (PQstatus) */
};

/*
 * present[i]: whether fc's table has a row whose column equals keys[i] (a
 * key, spell.h, compared as the service compares: `col = 'key'`), read in
 * one REPEATABLE READ snapshot taken during this call that sees every one
 * of must_see[0, n_must_see) finished, with fc's table name still naming
 * the relation relid.  n at most VERIFY_BATCH.  Once *stop (NULL: none)
 * is true a wait ends with VERIFY_FAILED ("interrupted").
 */
#define VERIFY_BATCH 64
enum verify_result verify_lookup(PGconn *conn, const struct filter_config *fc, uint32_t relid,
                                 enum spell_type spell, const char *const *keys,
                                 const size_t *lens, size_t n, const uint32_t *must_see,
                                 size_t n_must_see, atomic_bool *stop, bool *present, char *err,
                                 size_t errlen);

#endif
