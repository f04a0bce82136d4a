/*
 * Unit tests of the guarded table (src/table/table.c), the core protocol, without
 * PostgreSQL: which answers may be "absent" (the horizon, its epochs, a
 * stale horizon), inserts (journal first, refusals), loads (the journal
 * replayed, inserts made during a load kept), wants (coalescing, a reload
 * never becoming a catch-up, COPYs spaced out, catch-ups not), a peer's
 * snapshot on probation (table_vet), and lookups racing inserts and swaps
 * from threads.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check_main.h"
#include "check_util.h"
#include "config.h"
#include "table.h"

#define NS INT64_C(1000000000)

static struct config cfg;
static struct filter_config fc;

static void setup(void)
{
    check_filter_fixture(&cfg, &fc, "t", 0.001, 100);
}

/* A COPY of ids[0..n) of a column spelled as ident says, started at start in the current epoch. */
static void load_as(struct table *t, const struct table_ident *ident, const char *const *ids,
                    size_t n, int64_t start)
{
    uint64_t epoch;
    struct table_load *l = check_load_begin(t, 1000, ident, &epoch);
    for (size_t i = 0; i < n; i++) {
        char key[256];
        size_t klen;
        /* As the loader does: each row by its key. */
        ck_assert_int_eq(spell_key(ident->spell, ids[i], strlen(ids[i]), key, sizeof key, &klen),
                         SPELL_KEY);
        filter_add(table_load_filter(l), key, klen);
    }
    ck_assert(table_load_commit(l, epoch, start, "pos-1"));
}

static void load(struct table *t, const char *const *ids, size_t n, int64_t start)
{
    load_as(t, &check_text_ident, ids, n, start);
}

static const char *const rows[] = { "1", "2", "3" };

START_TEST(test_not_ready_then_answers)
{
    struct table *t = table_new(&cfg, &fc);
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(table_lookup(t, "1", 1), TABLE_NOT_READY);
    ck_assert_int_eq(check_post(t, "x"), TABLE_INSERT_NOT_READY);
    struct table_posts pi;
    table_posts(t, &pi);
    ck_assert_uint_eq(pi.count, 0);     /* a refused POST journals nothing */

    load(t, rows, 3, monoclock_boot_ns());
    ck_assert_int_eq(table_lookup(t, "1", 1), TABLE_MAYBE);
    ck_assert_int_eq(table_lookup(t, "9", 1), TABLE_ABSENT);
    char pos[TABLE_POS_MAX];
    table_position(t, pos, sizeof pos);
    ck_assert_str_eq(pos, "pos-1");
    table_free(t);
}
END_TEST

START_TEST(test_a_batch_answers_as_one_by_one)
{
    /*
     * table_lookup_many begins each query LOOKAHEAD (8) ahead of its answer
     * in a ring: every batch length around it, keys on the stack and on
     * the heap (past ANSWER_KEY_STACK), present and absent, must answer
     * what table_lookup answers, in order.
     */
    enum { N = 400, LONG = 300 };
    struct table *t = table_new(&cfg, &fc);
    static char names[N][LONG + 16];
    const char *ids[N];
    size_t lens[N];
    for (unsigned i = 0; i < N; i++) {
        if (i % 5 == 4) {   /* long: POSTed where present (the load's keys are short) */
            memset(names[i], 'a' + (char)(i % 26), LONG);
            snprintf(names[i] + LONG, 16, "-%u", i);
        } else
            snprintf(names[i], sizeof names[i], "b-%u", i);
        ids[i] = names[i];
        lens[i] = strlen(names[i]);
    }
    /* Present or not by a scramble of i: no period a wrong ring's shift could match. */
    const char *loaded[N];
    bool in[N];
    size_t nl = 0, present = 0;
    for (unsigned i = 0; i < N; i++) {
        present += in[i] = (i * 2654435761u) >> 13 & 1;
        if (in[i] && i % 5 != 4)
            loaded[nl++] = ids[i];
    }
    load(t, loaded, nl, monoclock_boot_ns());
    for (unsigned i = 4; i < N; i += 5)
        if (in[i])
            ck_assert_int_eq(check_post(t, ids[i]), TABLE_INSERTED);
    enum table_answer one[N], many[N];
    size_t maybe = 0;
    for (unsigned i = 0; i < N; i++)
        maybe += (one[i] = table_lookup(t, ids[i], lens[i])) == TABLE_MAYBE;
    ck_assert_uint_ge(maybe, present);
    ck_assert_uint_lt(maybe, N);
    for (size_t n = 0; n <= 40; n++)
        for (size_t from = 0; from + n <= N; from += 37) {
            ck_assert(table_lookup_many(t, n, ids + from, lens + from, many));
            for (size_t i = 0; i < n; i++)
                ck_assert_msg(many[i] == one[from + i], "batch of %zu from %zu: id %zu answered %d, alone %d",
                              n, from, from + i, many[i], one[from + i]);
        }
    ck_assert(table_lookup_many(t, N, ids, lens, many));
    ck_assert(memcmp(many, one, sizeof one) == 0);
    table_free(t);
}
END_TEST

START_TEST(test_stale_horizon_is_degraded)
{
    struct table *t = table_new(&cfg, &fc);
    /* A COPY that started longer ago than max_staleness: an absent ID cannot be proven absent. */
    load(t, rows, 3, monoclock_boot_ns() - 2 * 60 * NS);
    ck_assert_int_eq(table_lookup(t, "9", 1), TABLE_DEGRADED);
    ck_assert_int_eq(table_lookup(t, "1", 1), TABLE_MAYBE);
    enum table_answer many[2];
    const char *ids[] = { "1", "9" };
    size_t lens[] = { 1, 1 };
    ck_assert(table_lookup_many(t, 2, ids, lens, many));
    ck_assert_int_eq(many[0], TABLE_MAYBE);
    ck_assert_int_eq(many[1], TABLE_DEGRADED);
    /* A proof in the covered epoch moves it: exact again. */
    ck_assert(table_advance(t, table_epoch(t), monoclock_boot_ns()));
    ck_assert_int_eq(table_lookup(t, "9", 1), TABLE_ABSENT);
    struct table_status st;
    table_status(t, &st);
    ck_assert(!st.degraded);
    ck_assert(st.degraded_seconds > 0);     /* the stale stretch was counted */
    table_free(t);
}
END_TEST

/*
 * The degraded time /stats and /metrics count is the time lookups answer
 * "maybe" for want of a horizon (answer_degraded_ns, the same rule): none
 * before a filter is loaded (that is "not ready"), all of it while a
 * restored snapshot has no horizon yet.
 */
START_TEST(test_degraded_time_follows_the_rule)
{
    struct table *t = table_new(&cfg, &fc);
    struct table_status st;
    usleep(20000);
    table_status(t, &st);
    ck_assert(!st.degraded);
    ck_assert(st.degraded_seconds == 0);    /* not ready is not degraded */
    /* What persist.c does with a snapshot: its filter put live by the table. */
    ck_assert(table_restore(t, filter_new(1000, 0.01, NULL), "", "snapshot", 0, 0.0,
                            &check_text_ident));
    ck_assert_int_eq(table_lookup(t, "9", 1), TABLE_DEGRADED);
    usleep(50000);
    table_status(t, &st);
    ck_assert(st.degraded);
    ck_assert(st.horizon_age < 0);
    ck_assert_msg(st.degraded_seconds >= 0.045 && st.degraded_seconds < 1,
                  "degraded %.3f s of a 50 ms wait without a horizon", st.degraded_seconds);
    /* A catch-up proves a horizon: the count stops there. */
    table_caught_up(t, table_epoch(t), monoclock_boot_ns(), "pos-2", 0);
    ck_assert_int_eq(table_lookup(t, "9", 1), TABLE_ABSENT);
    table_status(t, &st);
    double at = st.degraded_seconds;
    usleep(20000);
    table_status(t, &st);
    ck_assert(!st.degraded);
    ck_assert(st.degraded_seconds == at);
    table_free(t);
}
END_TEST

/* A hold for lost POSTs (table_hold_absent): absent answers are maybe until it passes. */
START_TEST(test_hold_for_lost_posts)
{
    struct table *t = table_new(&cfg, &fc);
    load(t, rows, 3, monoclock_boot_ns());
    ck_assert_int_eq(table_lookup(t, "9", 1), TABLE_ABSENT);
    table_hold_absent(t, monoclock_boot_ns() + 80 * 1000000);
    table_hold_absent(t, monoclock_boot_ns());              /* an earlier one changes nothing */
    ck_assert_int_eq(table_lookup(t, "9", 1), TABLE_DEGRADED);
    ck_assert_int_eq(table_lookup(t, "1", 1), TABLE_MAYBE);
    enum table_answer many[1];
    const char *ids[] = { "9" };
    size_t lens[] = { 1 };
    ck_assert(table_lookup_many(t, 1, ids, lens, many));
    ck_assert_int_eq(many[0], TABLE_DEGRADED);
    struct table_status st;
    table_status(t, &st);
    ck_assert(st.degraded);
    ck_assert(st.held_for > 0 && st.held_for <= 0.08);
    usleep(100000);
    ck_assert(table_advance(t, table_epoch(t), monoclock_boot_ns()));
    ck_assert_int_eq(table_lookup(t, "9", 1), TABLE_ABSENT);
    table_status(t, &st);
    ck_assert(!st.degraded);
    ck_assert(st.held_for == 0);
    ck_assert_msg(st.degraded_seconds >= 0.075 && st.degraded_seconds < 0.5,
                  "%.3f s degraded by an 80 ms hold", st.degraded_seconds);
    table_free(t);
}
END_TEST

START_TEST(test_gap_waits_for_a_load)
{
    struct table *t = table_new(&cfg, &fc);
    load(t, rows, 3, monoclock_boot_ns() - 2 * 60 * NS);
    uint64_t before = table_epoch(t);
    table_gap(t, WANT_RECONNECT);
    ck_assert_uint_eq(table_epoch(t), before + 1);
    /* Neither the old epoch's proof nor the new one's moves H: the filter does not cover it. */
    ck_assert(!table_advance(t, before, monoclock_boot_ns()));
    ck_assert(!table_advance(t, before + 1, monoclock_boot_ns()));
    ck_assert_int_eq(table_lookup(t, "9", 1), TABLE_DEGRADED);
    ck_assert(!table_covered(t));
    /* A load that started in the new epoch covers it. */
    load(t, rows, 3, monoclock_boot_ns());
    ck_assert(table_covered(t));
    ck_assert_int_eq(table_lookup(t, "9", 1), TABLE_ABSENT);
    /* A load that started before a gap does not cover the gap. */
    uint64_t e;
    struct table_load *l = check_load_begin(t, 100, &check_text_ident, &e);
    table_gap(t, WANT_NONE);
    ck_assert(table_load_commit(l, e, monoclock_boot_ns(), ""));
    ck_assert(!table_covered(t));
    table_free(t);
}
END_TEST

START_TEST(test_insert_journal_then_filter)
{
    fc.pending_limit = 2;
    struct table *t = table_new(&cfg, &fc);
    load(t, rows, 3, monoclock_boot_ns());
    const char *ids[] = { "p1", "p2", "p3" };
    size_t lens[] = { 2, 2, 2 }, added = 0;
    ck_assert_int_eq(table_insert(t, 2, ids, lens, &added, NULL), TABLE_INSERTED);
    ck_assert_uint_eq(added, 2);
    ck_assert_int_eq(table_lookup(t, "p1", 2), TABLE_MAYBE);
    /* The journal is full: refused whole, nothing added. */
    ck_assert_int_eq(table_insert(t, 1, ids + 2, lens + 2, &added, NULL), TABLE_INSERT_FULL_COUNT);
    ck_assert_uint_eq(added, 0);
    ck_assert_int_eq(table_lookup(t, "p3", 2), TABLE_ABSENT);
    /* A rebuild that does not have them in the table keeps them (the journal is replayed). */
    load(t, rows, 3, monoclock_boot_ns());
    ck_assert_int_eq(table_lookup(t, "p1", 2), TABLE_MAYBE);
    ck_assert_int_eq(table_lookup(t, "p2", 2), TABLE_MAYBE);
    table_free(t);
}
END_TEST

START_TEST(test_insert_during_load_reaches_new_filter)
{
    struct table *t = table_new(&cfg, &fc);
    load(t, rows, 3, monoclock_boot_ns());
    uint64_t e;
    struct table_load *l = check_load_begin(t, 1000, &check_text_ident, &e);
    const char *ids[] = { "during" };
    size_t lens[] = { 6 }, added;
    ck_assert_int_eq(table_insert(t, 1, ids, lens, &added, NULL), TABLE_INSERTED);
    ck_assert(table_add_row(t, "followed", 8));
    ck_assert(table_load_commit(l, e, monoclock_boot_ns(), ""));
    ck_assert_int_eq(table_lookup(t, "during", 6), TABLE_MAYBE);
    ck_assert_int_eq(table_lookup(t, "followed", 8), TABLE_MAYBE);
    /* Followed rows are not journalled: only a COPY or the ttl removes journal entries. */
    struct table_posts pi;
    table_posts(t, &pi);
    ck_assert_uint_eq(pi.count, 1);
    table_free(t);
}
END_TEST

/* The first job (the initial load) taken and done as the loader does it: rows[] copied, counted rows counted. */
static void first_load(struct table *t, uint64_t counted)
{
    struct table_job job;
    int64_t wait = NS;
    ck_assert(table_take_job(t, monoclock_boot_ns(), &job, &wait));
    ck_assert_int_eq(job.why, WANT_START);
    load(t, rows, 3, monoclock_boot_ns());
    table_job_done(t, &job, true, "copy", counted, 0.1, 0);
}

START_TEST(test_wants_and_jobs)
{
    struct table *t = table_new(&cfg, &fc);
    struct table_job job;
    int64_t wait = 10 * NS;
    /* The first load is taken at once. */
    ck_assert(table_take_job(t, monoclock_boot_ns(), &job, &wait));
    ck_assert_int_eq(job.why, WANT_START);
    ck_assert(job.first);
    ck_assert(!job.may_catch_up);       /* no position yet */
    load(t, rows, 3, monoclock_boot_ns());
    table_job_done(t, &job, true, "copy", 3, 0.1, 0);

    /* A reconnect may be a catch-up (the table has a position), and is not held back. */
    bool c;
    uint64_t id = table_want(t, WANT_RECONNECT, &c);
    ck_assert(!c);
    ck_assert(table_take_job(t, monoclock_boot_ns(), &job, &wait));
    ck_assert_uint_eq(job.id, id);
    ck_assert(job.may_catch_up);
    table_job_done(t, &job, true, "catchup", 0, 0.01, 0);

    /* A COPY is held back min_rebuild_interval after the last load. */
    table_want(t, WANT_API, &c);
    wait = 10 * NS;
    ck_assert(!table_take_job(t, monoclock_boot_ns(), &job, &wait));
    ck_assert(wait > 0 && wait <= 30 * NS);
    struct table_status st;
    table_status(t, &st);
    ck_assert(st.next_rebuild_in > 0);
    ck_assert(table_take_job(t, monoclock_boot_ns() + 31 * NS, &job, &wait));
    ck_assert(!job.may_catch_up);
    table_job_done(t, &job, true, "copy", 3, 0.1, 0);
    table_free(t);
}
END_TEST

/* POST /reload coalesced with a pending reconnect must still copy the table. */
START_TEST(test_reload_joining_a_catch_up_copies)
{
    struct table *t = table_new(&cfg, &fc);
    struct table_job job;
    int64_t wait = NS;
    first_load(t, 3);
    bool c1, c2;
    uint64_t a = table_want(t, WANT_RECONNECT, &c1);
    uint64_t b = table_want(t, WANT_API, &c2);
    ck_assert(!c1 && c2);
    ck_assert_uint_eq(a, b);            /* one job */
    ck_assert(table_take_job(t, monoclock_boot_ns() + 31 * NS, &job, &wait));
    ck_assert_int_eq(job.why, WANT_API);
    ck_assert(!job.may_catch_up);
    table_job_done(t, &job, true, "copy", 3, 0.1, 0);
    /* And the other way round: a catch-up joining a pending COPY leaves it a COPY. */
    table_want(t, WANT_SIGHUP, NULL);
    table_want(t, WANT_RECONNECT, &c2);
    ck_assert(c2);
    ck_assert(table_take_job(t, monoclock_boot_ns() + 62 * NS, &job, &wait));
    ck_assert_int_eq(job.why, WANT_SIGHUP);
    ck_assert(!job.may_catch_up);
    table_free(t);
}
END_TEST

START_TEST(test_failed_job_retries_after_backoff)
{
    struct table *t = table_new(&cfg, &fc);
    struct table_job job;
    int64_t wait = 10 * NS;
    int64_t now = monoclock_boot_ns();
    ck_assert(table_take_job(t, now, &job, &wait));
    table_job_done(t, &job, false, "copy", 0, 0, 2000);
    wait = 10 * NS;
    ck_assert(!table_take_job(t, monoclock_boot_ns(), &job, &wait));
    ck_assert(wait <= 2 * NS + NS / 10);
    ck_assert(table_take_job(t, monoclock_boot_ns() + 3 * NS, &job, &wait));
    ck_assert_int_eq(job.why, WANT_START);      /* still the first load */
    struct table_status st;
    table_status(t, &st);
    ck_assert_uint_eq(st.rebuilds_failed, 1);
    table_free(t);
}
END_TEST

START_TEST(test_deletes_want_a_copy)
{
    fc.rebuild_after_deletes = 10;
    struct table *t = table_new(&cfg, &fc);
    struct table_job job;
    int64_t wait = NS;
    first_load(t, 3);
    table_count_rows(t, 5, 9);
    ck_assert(!table_take_job(t, monoclock_boot_ns() + 31 * NS, &job, &wait));
    table_count_rows(t, 0, 1);
    ck_assert(table_take_job(t, monoclock_boot_ns() + 31 * NS, &job, &wait));
    ck_assert_int_eq(job.why, WANT_DELETES);
    table_job_done(t, &job, true, "copy", 3, 0.1, 0);
    table_note_truncate(t);
    ck_assert(table_take_job(t, monoclock_boot_ns() + 62 * NS, &job, &wait));
    ck_assert_int_eq(job.why, WANT_DELETES);
    table_free(t);
}
END_TEST

START_TEST(test_plan_items_never_below_what_is_held)
{
    struct table *t = table_new(&cfg, &fc);
    ck_assert_uint_eq(table_plan_items(t, 10), 1024);       /* the minimum */
    ck_assert_uint_eq(table_plan_items(t, 100000), 200000); /* rows times headroom */
    first_load(t, 50000);
    /* Stale statistics (0 rows) never size below the last load. */
    ck_assert_uint_eq(table_plan_items(t, 0), 100000);
    /* The sizing is the table's own copy: only table_set_sizing (a SIGHUP) changes it. */
    fc.expected_items = 500000;
    ck_assert_uint_eq(table_plan_items(t, 100000), 200000);
    table_set_sizing(t, &fc);
    ck_assert_uint_eq(table_plan_items(t, 100000), 500000);
    ck_assert_uint_eq(table_sizing(t).expected_items, 500000);
    table_free(t);
}
END_TEST

/* The live filter's figures (a filter is live). */
static struct filter_info live_info(struct table *t)
{
    struct filter_info fi;
    struct filter_layer_info li[FILTER_MAX_LAYERS];
    unsigned n;
    ck_assert(table_filter_info(t, &fi, li, FILTER_MAX_LAYERS, &n));
    return fi;
}

/* Take the pending job, whatever min_rebuild_interval says; its reason. */
static enum table_want take(struct table *t, struct table_job *job)
{
    int64_t wait = NS;
    ck_assert(table_take_job(t, monoclock_boot_ns() + 3600 * NS, job, &wait));
    return job->why;
}

/*
 * expected_items is a floor, not the size: a table that fits in it gets
 * exactly it, one past it rows x headroom (it used to get expected_items
 * and stack a layer for the last rows), "past" meaning by more than 2%:
 * an estimate a few rows over is ANALYZE's sampling, and doubled the
 * filter of a table sized exactly (issue 39); a load because the filter grew
 * takes rows x growth even with headroom 1, or the folded filter would grow
 * again at the next new ID.
 */
START_TEST(test_plan_items_floor_and_growth)
{
    fc.expected_items = 200000;
    fc.headroom = 1.0;
    struct table *t = table_new(&cfg, &fc);
    ck_assert_uint_eq(table_plan_items(t, 150000), 200000);     /* fits: the floor */
    ck_assert_uint_eq(table_plan_items(t, 200000), 200000);
    ck_assert_uint_eq(table_plan_items(t, 200005), 200000);     /* within 2%: the floor */
    ck_assert_uint_eq(table_plan_items(t, 204001), 204001);     /* past it: its rows */
    fc.headroom = 2.0;
    table_set_sizing(t, &fc);
    ck_assert_uint_eq(table_plan_items(t, 200000), 200000);
    ck_assert_uint_eq(table_plan_items(t, 200005), 200000);     /* not doubled */
    ck_assert_uint_eq(table_plan_items(t, 204000), 200000);
    ck_assert_uint_eq(table_plan_items(t, 204001), 408002);     /* rows x headroom */
    fc.headroom = 1.0;
    table_set_sizing(t, &fc);
    first_load(t, 3);
    struct table_job job;
    table_want(t, WANT_GROWTH, NULL);
    ck_assert_int_eq(take(t, &job), WANT_GROWTH);
    ck_assert_uint_eq(table_plan_items(t, 150000), 300000);     /* rows x growth */
    ck_assert_uint_eq(table_plan_items(t, 50000), 200000);      /* never below the floor */
    table_job_done(t, &job, true, "copy", 3, 0.1, 0);
    table_want(t, WANT_API, NULL);
    ck_assert_int_eq(take(t, &job), WANT_API);
    ck_assert_uint_eq(table_plan_items(t, 150000), 200000);     /* any other load: the floor */
    table_free(t);
}
END_TEST

/*
 * A COPY that outgrows its filter sizes again (loader_copy): the new filter
 * replaces the first and gets every insert made since the load began, so
 * the load goes live in one layer holding the rows, the POSTs and the
 * followed rows.
 */
START_TEST(test_load_resize_keeps_everything)
{
    struct table *t = table_new(&cfg, &fc);
    load(t, rows, 3, monoclock_boot_ns());
    enum filter_error fe;
    uint64_t e, items = 0;
    struct table_load *l = check_load_begin(t, 1000, &check_text_ident, &e);
    enum { N = 5000 };
    uint64_t *hs = malloc(N * sizeof *hs);
    char id[32];
    for (unsigned i = 0; i < N; i++)
        hs[i] = filter_hash(id, (size_t)snprintf(id, sizeof id, "r%u", i));
    filter_add_hashes_exclusive(table_load_filter(l), hs, N);
    ck_assert_uint_gt(filter_layers(table_load_filter(l)), 1);     /* outgrown */
    const char *ids[] = { "during" };
    size_t lens[] = { 6 }, added;
    ck_assert_int_eq(table_insert(t, 1, ids, lens, &added, NULL), TABLE_INSERTED);
    ck_assert(table_add_row(t, "followed", 8));
    struct filter *f = table_load_resize(l, N, &items, &fe);
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_eq(f, table_load_filter(l));
    ck_assert_uint_eq(items, 2 * N);                /* the count x headroom */
    ck_assert(table_add_row(t, "later", 5));        /* into the backlog still */
    filter_add_hashes_exclusive(f, hs, N);          /* the second pass */
    ck_assert(table_load_commit(l, e, monoclock_boot_ns(), ""));
    struct filter_info fi = live_info(t);
    ck_assert_uint_eq(fi.layers, 1);
    ck_assert_uint_eq(fi.capacity, 2 * N);
    for (unsigned i = 0; i < N; i++)
        ck_assert_int_eq(table_lookup(t, id, (size_t)snprintf(id, sizeof id, "r%u", i)),
                         TABLE_MAYBE);
    ck_assert_int_eq(table_lookup(t, "during", 6), TABLE_MAYBE);
    ck_assert_int_eq(table_lookup(t, "followed", 8), TABLE_MAYBE);
    ck_assert_int_eq(table_lookup(t, "later", 5), TABLE_MAYBE);
    free(hs);
    table_free(t);
}
END_TEST

/*
 * With [sync] auto_grow, a filter that grew layers is folded back into one
 * once no layer has been added for min_rebuild_interval (growth settled),
 * whatever expected_items (a floor now: it used to stop the fold).
 */
START_TEST(test_growth_folds_once_settled)
{
    cfg.min_rebuild_interval = 1;
    fc.auto_grow = true;
    fc.expected_items = 1000;
    struct table *t = table_new(&cfg, &fc);
    first_load(t, 3);
    struct table_job job;
    int64_t wait = NS;
    table_check_timers(t);
    ck_assert(!table_take_job(t, monoclock_boot_ns() + 3600 * NS, &job, &wait));  /* one layer */
    char id[32];
    for (unsigned i = 0; i < 5000; i++)
        ck_assert(table_add_row(t, id, (size_t)snprintf(id, sizeof id, "g%u", i)));
    ck_assert_uint_ge(live_info(t).layers, 2);
    table_check_timers(t);
    ck_assert(!table_take_job(t, monoclock_boot_ns() + 3600 * NS, &job, &wait));  /* still growing */
    struct timespec nap = { 1, 200000000 };
    nanosleep(&nap, NULL);
    table_check_timers(t);
    ck_assert_int_eq(take(t, &job), WANT_GROWTH);
    ck_assert_uint_ge(table_plan_items(t, 5003), 10006);        /* rows x growth */
    table_free(t);
}
END_TEST

/* Lookups, rows and POSTs by the column's spelling (spell.h), the same rule everywhere. */
START_TEST(test_spellings)
{
    struct table *t = table_new(&cfg, &fc);
    const struct table_ident int8 = { .relid = 7, .attnum = 1, .spell = SPELL_INT8,
                                      .type_name = "bigint" };
    const char *ids[] = { "5", "14" };
    load_as(t, &int8, ids, 2, monoclock_boot_ns());
    ck_assert_int_eq(table_spell(t), SPELL_INT8);
    ck_assert_int_eq(table_lookup(t, "0005", 4), TABLE_MAYBE);
    ck_assert_int_eq(table_lookup(t, "+14", 3), TABLE_MAYBE);
    ck_assert_int_eq(table_lookup(t, " 14 ", 4), TABLE_MAYBE);
    ck_assert_int_eq(table_lookup(t, "6", 1), TABLE_ABSENT);
    /* What the type cannot hold is no row: absent, and counted. */
    ck_assert_int_eq(table_lookup(t, "abc", 3), TABLE_ABSENT);
    ck_assert_int_eq(table_lookup(t, "99999999999999999999", 20), TABLE_ABSENT);
    struct table_status st;
    table_status(t, &st);
    ck_assert_uint_eq(st.not_a_value, 2);
    ck_assert_str_eq(st.ident.type_name, "bigint");
    /* A followed row, keyed the same way. */
    ck_assert(table_add_row(t, "7", 1));
    ck_assert_int_eq(table_lookup(t, "007", 3), TABLE_MAYBE);
    /* POSTs: a spelling is its row's key; what the type refuses is refused whole. */
    const char *posted[] = { "0008", "+9" };
    size_t lens[] = { 4, 2 }, n;
    int e;
    ck_assert_int_eq(table_insert(t, 2, posted, lens, &n, &e), TABLE_INSERTED);
    ck_assert_int_eq(table_lookup(t, "8", 1), TABLE_MAYBE);
    ck_assert_int_eq(table_lookup(t, "9", 1), TABLE_MAYBE);
    const char *bad[] = { "10", "x" };
    size_t blens[] = { 2, 1 };
    ck_assert_int_eq(table_insert(t, 2, bad, blens, &n, &e), TABLE_INSERT_NOT_A_VALUE);
    ck_assert_int_eq(e, 1);
    ck_assert_int_eq(table_lookup(t, "10", 2), TABLE_ABSENT);
    /* Batches by the same rule. */
    const char *many[] = { "05", "6", "zz" };
    size_t mlens[] = { 2, 1, 2 };
    enum table_answer ans[3];
    ck_assert(table_lookup_many(t, 3, many, mlens, ans));
    ck_assert_int_eq(ans[0], TABLE_MAYBE);
    ck_assert_int_eq(ans[1], TABLE_ABSENT);
    ck_assert_int_eq(ans[2], TABLE_ABSENT);
    /* A type whose spellings cannot be proven: never absent. */
    const struct table_ident other = { .relid = 7, .attnum = 1, .spell = SPELL_TIMESTAMPTZ };
    const char *f[] = { "2026-01-01 00:00:00+00" };
    load_as(t, &other, f, 1, monoclock_boot_ns());
    ck_assert_int_eq(table_lookup(t, "2026-01-01 00:00:00+00", 22), TABLE_MAYBE);
    /* Without an offset the service's TimeZone decides which instant it is. */
    ck_assert_int_eq(table_lookup(t, "2026-01-01 00:00:00", 19), TABLE_UNPROVABLE);
    /* A batch answers each ID as table_lookup does: the unprovable one too, not a bare "maybe". */
    const char *mixed[] = { "2026-01-01 00:00:00+00", "2026-01-01 00:00:00", "2027-01-01 00:00:00+00" };
    size_t xlens[] = { 22, 19, 22 };
    enum table_answer xans[3];
    ck_assert(table_lookup_many(t, 3, mixed, xlens, xans));
    for (int i = 0; i < 3; i++)
        ck_assert_msg(xans[i] == table_lookup(t, mixed[i], xlens[i]), "batch answer %d", i);
    ck_assert_int_eq(xans[1], TABLE_UNPROVABLE);
    table_free(t);
}
END_TEST

/* A durable log that answers from another thread, and one that fails. */
struct fake_log {
    int fail;                       /* errno to answer, 0 = ok */
    unsigned appends;
};

static int fake_append(void *arg, size_t n, const char *const *ids, const size_t *lens,
                       uint64_t ttl)
{
    struct fake_log *fl = arg;
    (void)n, (void)ids, (void)lens, (void)ttl;
    fl->appends++;
    return fl->fail;
}

struct fake_job {
    table_durable_done_fn done;
    void *arg;
    int err;
};

static void *fake_thread(void *arg)
{
    struct fake_job *j = arg;
    j->done(j->arg, j->err);
    return NULL;
}

static pthread_t fake_tid;
static struct fake_job fake_j;

static int fake_submit(void *arg, size_t n, const char *const *ids, const size_t *lens,
                       uint64_t ttl, table_durable_done_fn done, void *done_arg)
{
    struct fake_log *fl = arg;
    (void)n, (void)ids, (void)lens, (void)ttl;
    fl->appends++;
    fake_j = (struct fake_job){ done, done_arg, fl->fail };
    return pthread_create(&fake_tid, NULL, fake_thread, &fake_j);
}

struct later_result {
    enum table_insert_result r;
    size_t n;
    int err;
    bool called;
};

static void later_done(void *arg, enum table_insert_result r, size_t n, int err)
{
    struct later_result *lr = arg;
    *lr = (struct later_result){ r, n, err, true };
}

/* What table_posts_export gave: how many, and whether the acknowledged d1 and d3 were among them. */
struct exported {
    uint64_t n;
    bool has_d1, has_d3, has_other;
};

static bool count_exported(void *ctx, uint64_t n, uint64_t bytes)
{
    (void)bytes;
    ((struct exported *)ctx)->n = n;
    return true;
}

static bool add_exported(void *ctx, const char *id, size_t len, uint64_t ttl_left)
{
    struct exported *x = ctx;
    (void)ttl_left;
    if (len == 2 && memcmp(id, "d1", 2) == 0)
        x->has_d1 = true;
    else if (len == 2 && memcmp(id, "d3", 2) == 0)
        x->has_d3 = true;
    else
        x->has_other = true;
    return true;
}

/* One ID through table_insert_later, which must take it: what the callback got, once the log answered. */
static struct later_result insert_later(struct table *t, const char *id)
{
    struct later_result lr = { 0 };
    const char *ids[] = { id };
    size_t lens[] = { strlen(id) }, n;
    int e;
    ck_assert_int_eq(table_insert_later(t, 1, ids, lens, &n, &e, later_done, &lr), TABLE_INSERT_LATER);
    pthread_join(fake_tid, NULL);
    ck_assert_msg(lr.called, "%s: no callback", id);
    return lr;
}

START_TEST(test_durable_insert_waits_for_the_log)
{
    struct table *t = table_new(&cfg, &fc);
    load(t, rows, 3, monoclock_boot_ns());
    struct fake_log fl = { 0, 0 };
    table_set_durable(t, fake_append, fake_submit, &fl);
    ck_assert(table_durable(t));
    const char *ids[] = { "d1" };
    size_t lens[] = { 2 }, n;
    int e;
    /* Blocking: the log's answer decides (through submit, which is set: its thread joined). */
    ck_assert_int_eq(table_insert(t, 1, ids, lens, &n, &e), TABLE_INSERTED);
    pthread_join(fake_tid, NULL);
    ck_assert_uint_eq(fl.appends, 1);
    ck_assert_int_eq(table_lookup(t, "d1", 2), TABLE_MAYBE);
    fl.fail = 28;                   /* ENOSPC */
    const char *ids2[] = { "d2" };
    ck_assert_int_eq(table_insert(t, 1, ids2, lens, &n, &e), TABLE_INSERT_NOT_DURABLE);
    pthread_join(fake_tid, NULL);
    ck_assert_int_eq(e, 28);
    ck_assert_int_eq(table_lookup(t, "d2", 2), TABLE_ABSENT);   /* never acknowledged, never added */
    /* Later: the filter gets the IDs only once the log has them. */
    fl.fail = 0;
    struct later_result lr = insert_later(t, "d3");
    ck_assert_int_eq(lr.r, TABLE_INSERTED);
    ck_assert_uint_eq(lr.n, 1);
    ck_assert_int_eq(table_lookup(t, "d3", 2), TABLE_MAYBE);
    fl.fail = 5;                    /* EIO */
    lr = insert_later(t, "d4");
    ck_assert_int_eq(lr.r, TABLE_INSERT_NOT_DURABLE);
    ck_assert_int_eq(lr.err, 5);
    ck_assert_int_eq(table_lookup(t, "d4", 2), TABLE_ABSENT);
    /*
     * A refusal leaves no trace: the journal holds the two acknowledged IDs
     * only, so neither a rebuild (its replay) nor a snapshot or a rewritten
     * log (its export) brings a refused one back.
     */
    struct table_posts pi;
    table_posts(t, &pi);
    ck_assert_uint_eq(pi.count, 2);
    struct exported x = { 0 };
    ck_assert(table_posts_export(t, count_exported, add_exported, &x));
    ck_assert_uint_eq(x.n, 2);
    ck_assert(x.has_d1 && x.has_d3 && !x.has_other);
    load(t, rows, 3, monoclock_boot_ns());
    ck_assert_int_eq(table_lookup(t, "d1", 2), TABLE_MAYBE);
    ck_assert_int_eq(table_lookup(t, "d3", 2), TABLE_MAYBE);
    ck_assert_int_eq(table_lookup(t, "d2", 2), TABLE_ABSENT);
    ck_assert_int_eq(table_lookup(t, "d4", 2), TABLE_ABSENT);
    /* Refused again after being acknowledged: it stays as acknowledged. */
    fl.fail = 28;
    lr = insert_later(t, "d1");
    ck_assert_int_eq(lr.r, TABLE_INSERT_NOT_DURABLE);
    load(t, rows, 3, monoclock_boot_ns());
    ck_assert_int_eq(table_lookup(t, "d1", 2), TABLE_MAYBE);
    fl.fail = 0;
    /* A refusal of the journal comes at once: the callback is never called. */
    fc.pending_limit = 0;
    struct table *t0 = table_new(&cfg, &fc);
    load(t0, rows, 3, monoclock_boot_ns());
    table_set_durable(t0, fake_append, fake_submit, &fl);
    lr = (struct later_result){ 0 };
    ck_assert_int_eq(table_insert_later(t0, 1, ids, lens, &n, &e, later_done, &lr),
                     TABLE_INSERT_FULL_COUNT);
    ck_assert(!lr.called);
    table_free(t0);
    table_free(t);
}
END_TEST

/* ------------------------------------------------------------ threads -- */

struct race {
    struct table *t;
    atomic_bool stop;
    atomic_ulong wrong;
    atomic_ulong acked;
};

/* Insert ids "w<n>" and check each answers maybe at once and ever after. */
static void *inserter(void *arg)
{
    struct race *r = arg;
    char id[32];
    for (unsigned long n = 0; !atomic_load(&r->stop) && n < 20000; n++) {
        size_t len = (size_t)snprintf(id, sizeof id, "w%lu", n), added;
        const char *ids[] = { id };
        if (table_insert(r->t, 1, ids, &len, &added, NULL) != TABLE_INSERTED)
            continue;
        atomic_fetch_add(&r->acked, 1);
        if (table_lookup(r->t, id, len) == TABLE_ABSENT)
            atomic_fetch_add(&r->wrong, 1);
    }
    return NULL;
}

START_TEST(test_lookups_race_inserts_and_loads)
{
    fc.pending_limit = 100000;
    struct table *t = table_new(&cfg, &fc);
    load(t, rows, 3, monoclock_boot_ns());
    struct race r = { .t = t };
    atomic_init(&r.stop, false);
    atomic_init(&r.wrong, 0);
    atomic_init(&r.acked, 0);
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, inserter, &r), 0);
    for (int k = 0; k < 20; k++)
        load(t, rows, 3, monoclock_boot_ns());
    atomic_store(&r.stop, true);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    ck_assert_uint_eq(atomic_load(&r.wrong), 0);
    /* Every acknowledged id survived every swap. */
    char id[32];
    unsigned long missing = 0;
    for (unsigned long n = 0; n < 20000; n++) {
        size_t len = (size_t)snprintf(id, sizeof id, "w%lu", n);
        const char *ids[] = { id };
        (void)ids;
        missing += table_lookup(t, id, len) == TABLE_ABSENT && n < atomic_load(&r.acked) / 2;
    }
    ck_assert_uint_eq(missing, 0);
    table_free(t);
}
END_TEST

/* A load whose column reads as shape (the loader's LOADER_SHAPE_SQL), proven now: the job done. */
static void load_shaped(struct table *t, const char *shape)
{
    struct table_ident id = check_text_ident;
    struct table_job job;
    int64_t wait = INT64_MAX;
    bool took = table_take_job(t, monoclock_boot_ns() + 3600 * NS, &job, &wait);
    snprintf(id.shape, sizeof id.shape, "%s", shape);
    load_as(t, &id, rows, 3, monoclock_boot_ns());
    if (took)
        table_job_done(t, &job, true, "copy", 3, 0, 0);
}

/* A new table, loaded with its column shaped as shape (load_shaped). */
static struct table *shaped_table(const char *shape)
{
    struct table *t = table_new(&cfg, &fc);
    ck_assert_ptr_nonnull(t);
    load_shaped(t, shape);
    return t;
}

/* Why a load is wanted now (table_take_job's reason), WANT_NONE when none is. */
static enum table_want wanted(struct table *t)
{
    struct table_job job;
    int64_t wait = INT64_MAX;
    if (!table_take_job(t, monoclock_boot_ns() + 3600 * NS, &job, &wait))
        return WANT_NONE;
    table_job_done(t, &job, false, "copy", 0, 0, 0);    /* still wanted, as it was */
    ck_assert_int_ne(job.why, WANT_NONE);
    return job.why;
}

/* A check that finds the column changed (shape, or uncovered by a child): a gap, the epoch one on. */
static void assert_schema_gap(struct table *t, const char *shape, const char *uncovered)
{
    uint64_t e = table_epoch(t);
    ck_assert_int_eq(table_schema(t, shape, uncovered), TABLE_SCHEMA_CHANGED);
    ck_assert_uint_eq(table_epoch(t), e + 1);
}

START_TEST(test_schema_change_holds_proofs_until_a_copy)
{
    struct table *t = table_new(&cfg, &fc);
    /* Before the first load a check only remembers: nothing wanted, nothing held. */
    ck_assert_int_eq(table_schema(t, "s1", NULL), TABLE_SCHEMA_SAME);
    load_shaped(t, "s1");
    ck_assert_int_eq(wanted(t), WANT_NONE);
    ck_assert_int_eq(table_schema(t, "s1", NULL), TABLE_SCHEMA_SAME);
    ck_assert(table_advance(t, table_epoch(t), monoclock_boot_ns()));

    /* A rename (or any change of the column's catalog row): a gap that wants a COPY. */
    assert_schema_gap(t, "s2", NULL);
    uint64_t e = table_epoch(t);
    ck_assert_int_eq(wanted(t), WANT_SCHEMA);
    ck_assert_str_eq(table_want_name(WANT_SCHEMA), "schema");
    /* Seen again: no new gap, but no proof either, however current its epoch. */
    ck_assert_int_eq(table_schema(t, "s2", NULL), TABLE_SCHEMA_OFF);
    ck_assert_uint_eq(table_epoch(t), e);
    ck_assert(!table_advance(t, table_epoch(t), monoclock_boot_ns()));
    struct table_status st;
    table_status(t, &st);
    ck_assert_ptr_nonnull(strstr(st.schema_why, "changed since the filter's load"));
    /* A poll's proof is held back too, though it keeps its position. */
    table_polled(t, table_epoch(t), monoclock_boot_ns() + NS, "pos-2", 0);
    char pos[TABLE_POS_MAX];
    table_position(t, pos, sizeof pos);
    ck_assert_str_eq(pos, "pos-2");
    table_status(t, &st);
    ck_assert(st.horizon_age >= 0);     /* H did not move to the future start */

    /* The COPY of the new shape: proofs hold again, the reason is gone. */
    load_shaped(t, "s2");
    ck_assert_int_eq(table_schema(t, "s2", NULL), TABLE_SCHEMA_SAME);
    ck_assert(table_advance(t, table_epoch(t), monoclock_boot_ns()));
    table_status(t, &st);
    ck_assert_str_eq(st.schema_why, "");

    /* A rename and its undoing between two checks: another catalog row, another shape. */
    ck_assert_int_eq(table_schema(t, "s3", NULL), TABLE_SCHEMA_CHANGED);
    ck_assert_int_eq(table_schema(t, "", NULL), TABLE_SCHEMA_CHANGED);     /* then gone */
    table_status(t, &st);
    ck_assert_ptr_nonnull(strstr(st.schema_why, "is gone"));
    table_free(t);
}
END_TEST

START_TEST(test_schema_uncovered_and_covered_again)
{
    struct table *t = shaped_table("s1");
    ck_assert_int_eq(table_schema(t, "s1", NULL), TABLE_SCHEMA_SAME);
    /* A child table nothing follows: a gap, and proofs held back while it lasts. */
    assert_schema_gap(t, "s1", "child has no trigger");
    load_shaped(t, "s1");               /* a COPY meanwhile reads the child's rows so far */
    ck_assert_int_eq(table_schema(t, "s1", "child has no trigger"), TABLE_SCHEMA_OFF);
    ck_assert(!table_advance(t, table_epoch(t), monoclock_boot_ns()));
    struct table_status st;
    table_status(t, &st);
    ck_assert_str_eq(st.schema_why, "child has no trigger");
    /* Followed again (the shape stands): the rows written meanwhile were missed, a COPY wanted. */
    ck_assert_int_eq(wanted(t), WANT_NONE);
    assert_schema_gap(t, NULL, NULL);
    ck_assert_int_eq(wanted(t), WANT_SCHEMA);
    table_free(t);
}
END_TEST

START_TEST(test_schema_stale_load_wants_another)
{
    struct table *t = shaped_table("s1");
    ck_assert_int_eq(table_schema(t, "s2", NULL), TABLE_SCHEMA_CHANGED);
    /*
     * The COPY that gap wanted identified the column just before a second
     * change: it goes live with s2, the check sees s3 ... and a COPY that
     * identified s2 while the data was s3's must not leave the table held
     * back with nothing wanted.
     */
    struct table_job job;
    int64_t wait = INT64_MAX;
    struct table_ident s2 = check_text_ident;
    snprintf(s2.shape, sizeof s2.shape, "s2");
    ck_assert(table_take_job(t, monoclock_boot_ns() + 3600 * NS, &job, &wait));
    ck_assert_int_eq(table_schema(t, "s3", NULL), TABLE_SCHEMA_CHANGED);   /* during the COPY */
    load_as(t, &s2, rows, 3, monoclock_boot_ns());
    table_job_done(t, &job, true, "copy", 3, 0, 0);
    /* The commit took s2 as the last seen: s3 is a change, and a COPY is wanted again. */
    ck_assert_int_ne(table_schema(t, "s3", NULL), TABLE_SCHEMA_SAME);
    ck_assert_int_ne(wanted(t), WANT_NONE);
    ck_assert(!table_advance(t, table_epoch(t), monoclock_boot_ns()));
    /* A restored snapshot's filter has no shape: it adopts the first one checked. */
    struct table *r = table_new(&cfg, &fc);
    ck_assert(table_restore(r, filter_new(1000, 0.01, NULL), "pos", "snapshot", 3, 0,
                            &check_text_ident));
    ck_assert_int_eq(table_schema(r, "s9", NULL), TABLE_SCHEMA_SAME);
    table_free(r);
    table_free(t);
}
END_TEST


/* ------------------------------------------------------------- the tap -- */

/* What a replication ring would have been told. */
struct tapped {
    uint64_t hashes[64];
    uint32_t ttls[64];
    unsigned n, changed;
};

static void tap_added(void *ctx, const uint64_t *hs, size_t n, uint32_t ttl,
                      const struct table_at *at)
{
    struct tapped *tp = ctx;
    (void)at;
    for (size_t i = 0; i < n && tp->n < 64; i++) {
        tp->hashes[tp->n] = hs[i];
        tp->ttls[tp->n++] = ttl;
    }
}

static void tap_changed(void *ctx)
{
    ((struct tapped *)ctx)->changed++;
}

/*
 * Every key the live filter takes reaches the tap once, after the filter
 * holds it: rows with ttl 0, a POST's keys with the journal's ttl, hashes
 * from a replica's stream with theirs; nothing before there is a filter.
 * Gaps and loads say the epoch or generation moved, and table_proof reads
 * them with the horizon.
 */
START_TEST(test_tap_hears_every_add)
{
    struct table *t = table_new(&cfg, &fc);
    static struct tapped tp;
    memset(&tp, 0, sizeof tp);
    table_set_tap(t, &(struct table_tap){ &tp, tap_added, tap_changed, NULL });
    ck_assert(!table_add_row(t, "0", 1));
    uint64_t h0 = filter_hash("0", 1);
    ck_assert(!table_add_hashes(t, &h0, 1, 0, NULL));
    ck_assert_uint_eq(tp.n, 0);
    struct table_proof pr;
    table_proof(t, &pr);
    ck_assert(!pr.loaded && pr.generation == 0 && pr.horizon == 0);

    int64_t start = monoclock_boot_ns();
    load(t, rows, 3, start);
    ck_assert_uint_eq(tp.changed, 1);
    table_proof(t, &pr);
    ck_assert(pr.loaded && pr.generation == 1 && pr.covered == pr.epoch && pr.horizon == start);

    ck_assert(table_add_row(t, "7", 1));
    const char *posted[] = { "8", "9" };
    size_t lens[] = { 1, 1 }, added;
    ck_assert_int_eq(table_insert(t, 2, posted, lens, &added, NULL), TABLE_INSERTED);
    uint64_t hs[2] = { filter_hash("x", 1), filter_hash("y", 1) };
    ck_assert(table_add_hashes(t, hs, 2, 77, NULL));
    ck_assert_uint_eq(tp.n, 5);
    ck_assert(tp.hashes[0] == filter_hash("7", 1) && tp.ttls[0] == 0);
    ck_assert(tp.hashes[1] == filter_hash("8", 1) && tp.ttls[1] == fc.pending_ttl);
    ck_assert(tp.hashes[2] == filter_hash("9", 1) && tp.ttls[2] == fc.pending_ttl);
    ck_assert(tp.hashes[3] == hs[0] && tp.ttls[3] == 77 && tp.hashes[4] == hs[1]);
    ck_assert_int_eq(table_lookup(t, "x", 1), TABLE_MAYBE);

    table_gap(t, WANT_NONE);
    ck_assert_uint_eq(tp.changed, 2);
    table_proof(t, &pr);
    ck_assert(pr.epoch == pr.covered + 1 && pr.generation == 1);
    table_free(t);
}
END_TEST

/* table_with_live's callback: the filter's items, and that it was called. */
static void count_live(void *arg, const struct filter *f)
{
    struct filter_info fi;
    filter_info(f, &fi);
    ((uint64_t *)arg)[0] = fi.items;
    ((uint64_t *)arg)[1] = 1;
}

/*
 * A filter made elsewhere (a replica's snapshot) goes live through
 * table_load_adopt: inserts made meanwhile reach it, the journal is
 * replayed into it, the horizon moves to the start given; table_with_live
 * lends the live filter to a copier, and says when there is none.
 */
START_TEST(test_adopt_a_filter)
{
    struct table *t = table_new(&cfg, &fc);
    uint64_t got[2] = { 0, 0 };
    ck_assert(!table_with_live(t, count_live, got));
    load(t, rows, 3, monoclock_boot_ns());
    const char *posted[] = { "p" };
    size_t lens[] = { 1 }, added;
    ck_assert_int_eq(table_insert(t, 1, posted, lens, &added, NULL), TABLE_INSERTED);
    struct filter *f = filter_new(1000, 0.001, NULL);
    filter_add(f, "s", 1);
    uint64_t epoch = table_epoch(t);
    int64_t start = monoclock_boot_ns();
    struct table_load *l = table_load_adopt(t, f, &check_text_ident);
    ck_assert_ptr_nonnull(l);
    ck_assert(table_add_row(t, "during", 6));
    ck_assert(table_load_commit(l, epoch, start, "X:5"));
    ck_assert_int_eq(table_lookup(t, "s", 1), TABLE_MAYBE);
    ck_assert_int_eq(table_lookup(t, "during", 6), TABLE_MAYBE);
    ck_assert_int_eq(table_lookup(t, "p", 1), TABLE_MAYBE);      /* the journal, replayed */
    ck_assert_int_eq(table_lookup(t, "1", 1), TABLE_ABSENT);     /* the old filter is gone */
    struct table_proof pr;
    table_proof(t, &pr);
    ck_assert(pr.horizon == start && pr.generation == 2);
    ck_assert(table_with_live(t, count_live, got));
    ck_assert(got[0] == 3 && got[1] == 1);
    table_free(t);
}
END_TEST

/*
 * A snapshot restored at start (table_restore, as persist.c calls it):
 * the POSTs put back before it (the POST log's, table_posts_restore) are
 * added to its filter, which lacks them; a POST after it reaches the live
 * filter and the journal; the scheduler's thread may read the live filter
 * (table_live_filter).
 */
START_TEST(test_restore_replays_the_journal)
{
    struct table *t = table_new(&cfg, &fc);
    ck_assert_ptr_null(table_live_filter(t));
    ck_assert(table_posts_restore(t, "posted", 6, 60));
    struct filter *f = filter_new(1000, 0.001, NULL);
    filter_add(f, "snap", 4);
    ck_assert(table_restore(t, f, "X:1", "snapshot", 1, 0.0, &check_text_ident));
    ck_assert_int_eq(table_lookup(t, "snap", 4), TABLE_MAYBE);
    ck_assert_int_eq(table_lookup(t, "posted", 6), TABLE_MAYBE);    /* the journal, replayed */
    ck_assert_int_eq(table_lookup(t, "nope", 4), TABLE_DEGRADED);   /* no horizon yet */
    const char *later[] = { "later" };
    size_t lens[] = { 5 }, added;
    ck_assert_int_eq(table_insert(t, 1, later, lens, &added, NULL), TABLE_INSERTED);
    ck_assert_int_eq(table_lookup(t, "later", 5), TABLE_MAYBE);
    const struct filter *live = table_live_filter(t);
    ck_assert_ptr_nonnull(live);
    ck_assert(filter_contains(live, "posted", 6) && filter_contains(live, "later", 5));
    struct table_posts pi;
    table_posts(t, &pi);
    ck_assert_uint_eq(pi.count, 2);
    char pos[TABLE_POS_MAX];
    table_position(t, pos, sizeof pos);
    ck_assert_str_eq(pos, "X:1");
    table_free(t);
}
END_TEST

/* A peer's filter of ids[0..n) put live as persist.c does, on probation first (scheduler_store.c). */
static struct table *peer_restored(const char *const *ids, size_t n)
{
    struct table *t = table_new(&cfg, &fc);
    ck_assert_ptr_nonnull(t);
    table_vet_begin(t);
    struct filter *f = filter_new(1000, 0.001, NULL);
    ck_assert_ptr_nonnull(f);
    for (size_t i = 0; i < n; i++)
        filter_add(f, ids[i], strlen(ids[i]));
    ck_assert(table_restore(t, f, "pos-1", "peer", n, 0.0, &check_text_ident));
    return t;
}

/*
 * A zeroed peer's filter with max_staleness = 0 (where a horizon of 0
 * alone degrades nothing): "maybe" for every absent ID until checked; the
 * horizon a catch-up proves is held back; refused, it is copied at once,
 * never caught up, and the COPY ends the probation.
 */
START_TEST(test_peer_probation_refused)
{
    cfg.max_staleness = 0;
    struct table *t = peer_restored(NULL, 0);
    ck_assert_int_eq(table_lookup(t, "1", 1), TABLE_DEGRADED);
    struct table_status st;
    table_status(t, &st);
    ck_assert(st.degraded);
    ck_assert_str_eq(st.peer_check, "pending");
    /* The start's catch-up, from the snapshot's position. */
    struct table_job job;
    int64_t wait = NS;
    ck_assert(table_take_job(t, monoclock_boot_ns(), &job, &wait));
    ck_assert(job.may_catch_up);
    table_caught_up(t, table_epoch(t), monoclock_boot_ns(), "pos-2", 0);
    table_job_done(t, &job, true, "catchup", 0, 0.01, 0);
    ck_assert(table_advance(t, table_epoch(t), monoclock_boot_ns()));
    int64_t proved = 0;
    ck_assert_int_eq(table_vet(t, &proved), TABLE_VET_PENDING);
    ck_assert(proved > 0);
    ck_assert_int_eq(table_lookup(t, "1", 1), TABLE_DEGRADED);   /* proved, not published */

    table_vetted(t, false);
    ck_assert_int_eq(table_vet(t, NULL), TABLE_VET_REFUSED);
    char pos[TABLE_POS_MAX];
    table_position(t, pos, sizeof pos);
    ck_assert_str_eq(pos, "");
    ck_assert_int_eq(table_lookup(t, "1", 1), TABLE_DEGRADED);
    table_status(t, &st);
    ck_assert_str_eq(st.peer_check, "refused");
    /* A COPY at once (the catch-up just done does not hold it back), never a catch-up. */
    table_want(t, WANT_RECONNECT, NULL);
    ck_assert(table_take_job(t, monoclock_boot_ns(), &job, &wait));
    ck_assert(!job.may_catch_up);
    load(t, rows, 3, monoclock_boot_ns());
    table_job_done(t, &job, true, "copy", 3, 0.1, 0);
    ck_assert_int_eq(table_vet(t, NULL), TABLE_VET_NONE);
    ck_assert_int_eq(table_lookup(t, "1", 1), TABLE_MAYBE);
    ck_assert_int_eq(table_lookup(t, "9", 1), TABLE_ABSENT);
    table_free(t);
}
END_TEST

/* A good peer's filter: checked, the held-back horizon goes live, absent IDs are absent. */
START_TEST(test_peer_probation_passed)
{
    struct table *t = peer_restored(rows, 3);
    ck_assert_int_eq(table_lookup(t, "9", 1), TABLE_DEGRADED);
    ck_assert_int_eq(table_lookup(t, "1", 1), TABLE_MAYBE);
    table_caught_up(t, table_epoch(t), monoclock_boot_ns(), "pos-2", 0);
    ck_assert_int_eq(table_lookup(t, "9", 1), TABLE_DEGRADED);
    table_vetted(t, true);
    ck_assert_int_eq(table_vet(t, NULL), TABLE_VET_NONE);
    ck_assert_int_eq(table_lookup(t, "9", 1), TABLE_ABSENT);
    struct table_status st;
    table_status(t, &st);
    ck_assert(!st.degraded);
    ck_assert_str_eq(st.peer_check, "passed");
    char pos[TABLE_POS_MAX];
    table_position(t, pos, sizeof pos);
    ck_assert_str_eq(pos, "pos-2");
    table_free(t);
}
END_TEST

CHECK_SUITE("table",
    CHECK_CASE("core", .setup = setup, .timeout = 120),
    CHECK_TEST(test_tap_hears_every_add),
    CHECK_TEST(test_adopt_a_filter),
    CHECK_TEST(test_restore_replays_the_journal),
    CHECK_TEST(test_schema_change_holds_proofs_until_a_copy),
    CHECK_TEST(test_schema_uncovered_and_covered_again),
    CHECK_TEST(test_schema_stale_load_wants_another),
    CHECK_TEST(test_not_ready_then_answers),
    CHECK_TEST(test_stale_horizon_is_degraded),
    CHECK_TEST(test_a_batch_answers_as_one_by_one),
    CHECK_TEST(test_degraded_time_follows_the_rule),
    CHECK_TEST(test_hold_for_lost_posts),
    CHECK_TEST(test_gap_waits_for_a_load),
    CHECK_TEST(test_insert_journal_then_filter),
    CHECK_TEST(test_insert_during_load_reaches_new_filter),
    CHECK_TEST(test_wants_and_jobs),
    CHECK_TEST(test_reload_joining_a_catch_up_copies),
    CHECK_TEST(test_failed_job_retries_after_backoff),
    CHECK_TEST(test_deletes_want_a_copy),
    CHECK_TEST(test_plan_items_never_below_what_is_held),
    CHECK_TEST(test_plan_items_floor_and_growth),
    CHECK_TEST(test_load_resize_keeps_everything),
    CHECK_TEST(test_growth_folds_once_settled),
    CHECK_TEST(test_durable_insert_waits_for_the_log),
    CHECK_TEST(test_spellings),
    CHECK_TEST(test_peer_probation_refused),
    CHECK_TEST(test_peer_probation_passed),
    CHECK_TEST(test_lookups_race_inserts_and_loads),
)
