/*
 * The guarded table's verified-absent IDs (issue 35): what the verifier,
 * POST /absent and the status documents call.  table.h includes it; this
 * is its contract, and the proof that a denial never breaks the table's
 * promise, as table.h argues its horizon.
 *
 * An ID the filter answers "maybe" for again
 * and again (the hot sketch, hot.h), or that a service reports missing
 * (POST /absent), is a candidate; the verifier (verifier.h) looks it up
 * in PostgreSQL; one the table does not have goes into an exact set
 * (vset.h), and the lookup sequence (answer.h) denies it, subject to the
 * horizon like any absent answer.  An entry is believed only if nothing
 * can have added its ID since before the query's snapshot, and it dies
 * with the first add after:
 *   1. Ticket.  Before the query, the candidate's ticket is read: the
 *      count of adds of its hash's bucket (seq_cst).  Then the POST journal
 *      is asked whether it may hold the ID: if so it is not verified.
 *   2. Query.  One statement in a snapshot S taken after the ticket, that
 *      sees finished every transaction whose rows the follower gave the
 *      filter before S was taken (follow_unseen: logical's stream may
 *      apply a commit before new snapshots see it; NOTIFY and the feed
 *      give only rows new snapshots see), on the relation the table's
 *      load read (its oid, checked in S), on the primary the table is
 *      loaded from (the system identifier and database, checked).
 *   3. Adds.  Every add of a key to the table's filters (a followed row, a
 *      POSTed ID, a row a COPY reads) counts its bucket (seq_cst) and then
 *      kills every entry of its hash, before it returns: before the
 *      horizon that covers the row can move, before the POST's 2xx.  A
 *      COPY's rows count in a bucket array of their own, a batch at a
 *      time, then one seq_cst fence, then the kills (adapt.c,
 *      adapt_added_bulk, proves it the same); a ticket and step 4's read
 *      are the sum of both counts.
 *   4. Entry.  An absent answer is staged (PENDING: not believed; a
 *      seq_cst store), the bucket's count is read again (seq_cst), and the
 *      entry is activated only if it still equals the ticket, by a
 *      compare-and-swap that a kill defeats.
 * Why no denied ID was committed more than max_staleness ago or
 * acknowledged to a POST: take a row X of that ID, committed at C.
 *   - C before S: S sees X (2): the query answers present, no entry; a
 *     row the follower gave before the ticket is of a transaction S sees
 *     finished.
 *   - C after S: X reaches the table as an add (3) at some D: the follower
 *     gives it, or, after a gap, the load that covers the new epoch reads
 *     it (a COPY counts and kills each row it reads; a catch-up adds
 *     them).  If the add's count comes before step 4's read in the single
 *     order of seq_cst operations, the read differs from the ticket and
 *     the entry is dropped; if after it, the stage came before it too, so
 *     the kill that follows the count finds the entry, PENDING or ACTIVE,
 *     and kills it.  Either way the entry is dead before the add returns,
 *     so before a horizon past C.  A lookup that denies X meanwhile read a
 *     horizon H <= C and answered absent only because now - H <=
 *     max_staleness: X was committed less than max_staleness ago, which
 *     the contract lets answer 404.
 *   - A POST of the ID before the ticket is in the journal (1) until a
 *     COPY sees its row (then it is committed: the first case) or it
 *     expires; one after the ticket counts the bucket before its 2xx (3).
 * A degraded table (a stale horizon, a peer's filter on probation, a
 * saturated filter) answers "maybe" for entries as for any absent answer:
 * the staleness step comes after the deny.  A rebuild keeps the entries,
 * which the argument proves whatever the filter, but drops those its new
 * filter answers absent for (the filter denies them itself); a change of
 * the column's spelling drops them all and fails every verification in
 * flight (keys of the old spelling mean nothing in the new).  A restart
 * forgets them.
 *
 * On a replica (issue 35, item 4).  A replica's table has no verifier: its
 * upstream's stream carries the upstream's entries (VERIFIED frames,
 * fleetwire.h), and the replica enters each (table_enter_verified) as the
 * upstream did, by steps 1 and 4 with its own ticket and journal.  It may
 * deny such an ID only until the first add of it after the upstream's
 * query snapshot S, and it learns of adds only through the stream, in the
 * stream's order; so an entry must come before, in that order, every add
 * of its key that came after S.  The upstream sends an entry (its stream,
 * api/fleetstream.c) only while it is still in the upstream's set, asked
 * after the stream read from the ring every key it sent before: an add of
 * the key after S, with a seq already sent, killed the entry (step 3)
 * before the tap put it in the ring (table_fleet.h: the tap hears of an
 * add after the add's kill), so before the ask: the entry is not sent.
 * Any other such add has a higher seq, reaches the replica after the
 * entry, and kills it there (step 3 on the replica: its stream's adds go
 * through table_add_hashes).  Adds the replica does not see one by one (a
 * snapshot put live, a gap upstream: a new epoch, another history) end
 * every entry (table_forget_verified): the replica starts from an empty
 * set after each snapshot, and a new stream sends it the entries the
 * upstream still holds (the last ADAPT_LOG entered).  A replica's hot
 * candidates are passed up (POST /absent: a report, never believed by
 * itself) and settled here (table_forwarded).
 *
 * Down a tree (PostgreSQL -> a -> b -> c).  b enters a's entries as above,
 * logs each as its own, and its streams send them to c by the same rule:
 * b's adds are a's keys in a's order, and each kills b's entry before b's
 * tap rings it.  By induction down the tree, a node's set holds an entry
 * only while its filter holds no add of the key that came after S: it
 * took each such add either one by one, which killed the entry, or in a
 * snapshot, which emptied its set, after which the entry came again only
 * if its upstream still held it after the keys that snapshot holds.  So a
 * stream that starts anew (the replica resumes at its position, or a new
 * replica) and sends the log again from its oldest entry sends none that
 * an add the replica already applied has ended (tests/adaptive_tree.test
 * cuts the stream b -> c after inserts to show it).  Entries travel at
 * once: entering one wakes the hub (table_set_verified_wake) as an add
 * does, and a woken stream sends the log before its next keys; those
 * entered within one round of the hub's pump go out together.  A new
 * stream sends only the newest ADAPT_LOG entries; a replica that joined
 * after older ones asks for them as for any hot "maybe" (it passes them up)
 * and a report of an ID the set denies logs it again (adapt_resend), so
 * that the streams send it again, by the same rule.
 */
#ifndef BLOOMGUARD_TABLE_ADAPT_H
#define BLOOMGUARD_TABLE_ADAPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct table;

/* Whether [adaptive] enabled gave the table a verified-absent set. */
bool table_adaptive(const struct table *t);

/*
 * wake(arg) when candidates start waiting (under no lock of the table; a
 * request's thread): the verifier's.  Set it before other threads use t.
 */
void table_set_verifier_wake(struct table *t, void (*wake)(void *arg), void *arg);

/* A candidate to look up, its ticket taken (step 1 above). */
#define TABLE_KEY_MAX 120               /* vset.h's VSET_KEY_MAX */
struct table_candidate {
    char key[TABLE_KEY_MAX];            /* the column's text of the value (spell.h) */
    size_t klen;
    uint64_t hash, ticket, generation;  /* the table's: give them back unchanged */
};
/* Up to max candidates, tickets taken now: right before the lookup's snapshot. */
size_t table_candidates(struct table *t, struct table_candidate *out, size_t max);
bool table_candidates_waiting(struct table *t);

/*
 * What the lookup said of c (v), and what came of it: denied from now on;
 * raced (an add of its hash came after the ticket: not believed); settled
 * (present: not asked again for a while); given back (failed).
 */
enum table_verdict { TABLE_VERIFIED_ABSENT, TABLE_VERIFIED_PRESENT, TABLE_VERIFY_FAILED };
enum table_verified { TABLE_ENTERED, TABLE_RACED, TABLE_SETTLED, TABLE_GIVEN_BACK };
enum table_verified table_verified(struct table *t, const struct table_candidate *c,
                                   enum table_verdict v);

/*
 * POST /absent: the ID a service did not find is a candidate now (QUEUED),
 * or not: answered absent already (the filter or the set; one the set
 * denies is sent down to the replicas again unless on its way already), a spelling or
 * key that cannot be verified, queued or looked up lately (or the queue is
 * full), [adaptive] off, no filter yet.
 */
enum table_report { TABLE_REPORT_QUEUED, TABLE_REPORT_ABSENT, TABLE_REPORT_UNPROVABLE,
                    TABLE_REPORT_HELD, TABLE_REPORT_OFF, TABLE_REPORT_NOT_READY };
enum table_report table_report(struct table *t, const void *id, size_t len);

/*
 * A replica's entry from its upstream's stream (above, "On a replica"):
 * ENTERED (denied from now on), RACED (an add of its hash came meanwhile),
 * GIVEN_BACK (not entered: [adaptive] off, its key does not hash to hash,
 * too long, or the journal may hold it).  The stream's thread.
 */
enum table_verified table_enter_verified(struct table *t, uint64_t hash, const char *key,
                                         size_t klen);
/* Every entry ends, every verification in flight fails: the replica missed adds. */
void table_forget_verified(struct table *t);
/* A replica's candidate c was passed on to its upstream: not a candidate again for a while. */
void table_forwarded(struct table *t, const struct table_candidate *c);
/*
 * The entries entered since *cursor (0: the oldest kept), still in the
 * set as they are read, up to max (16 at most a call) into out (key, klen, hash); *cursor
 * moves on.  Any thread: an upstream's stream, after it read its ring.
 */
size_t table_verified_log(struct table *t, uint64_t *cursor, struct table_candidate *out,
                          size_t max);
/*
 * wake(arg) whenever an entry joins the set (a verification's or an
 * upstream's): an upstream's hub, whose streams then send it at once, not
 * with the next key or heartbeat.  Under no lock of the table, on the
 * entering thread.  Set it before other threads use t; NULL: nobody.
 */
void table_set_verified_wake(struct table *t, void (*wake)(void *arg), void *arg);
/* Whether entries were entered past cursor (table_verified_log's); lock-free. */
bool table_verified_ahead(struct table *t, uint64_t cursor);

/* /stats and /metrics (zeros with [adaptive] off); docs/api.md says what each counts. */
struct table_adaptive {
    bool enabled;
    uint64_t entries, max_entries, queued, candidates, reported, dropped;
    uint64_t verified_absent, verified_present, verify_failed, raced, posted;
    uint64_t evictions, invalidations, denied;
    uint64_t received, forwarded;       /* a replica's: entries from its upstream, candidates passed up */
};
void table_adaptive_info(struct table *t, struct table_adaptive *out);

#endif
