/*
 * Unit tests of the guarded table's verified-absent IDs (table.h,
 * "Verified absent"; src/table/adapt.c, table_adapt.c), without
 * PostgreSQL: the verifier's side is played by the test.  A hot false
 * positive becomes a candidate and, verified absent, is denied; every add
 * of its ID (a followed row, a POST, a COPY's row) ends that; an add that
 * overtakes a verification (the insert committed after the query's
 * snapshot, delivered before its answer) wins; a POSTed ID is never
 * verified; degraded tables answer "maybe" for entries; rebuilds keep what
 * still holds; a new spelling forgets all; and under threads no lookup
 * denies an ID after its add returned; lookups follow the set where a
 * publisher moves it; with min_hits 1 (no door) the first "maybe" counts.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>

#include "check_main.h"
#include "adapt.h"                  /* ADAPT_LOG: how many entries a new stream sends */
#include "check_util.h"
#include "config.h"
#include "table.h"

#define NS INT64_C(1000000000)

static struct config cfg;
static struct filter_config fc;

static void setup(void)
{
    /* A high rate: false positives are easy to find. */
    check_filter_fixture(&cfg, &fc, "t", 0.05, 1000);
    cfg.adaptive_enabled = true;
    cfg.adaptive_min_hits = 2;
    cfg.adaptive_window = 10;
    cfg.adaptive_verify_rate = 20;
    cfg.adaptive_max_entries = 4096;
}

/* A COPY of rows row-0 .. row-(n-1), each row told to the table as the loader tells it. */
static void load_rows(struct table *t, const struct table_ident *ident, unsigned n,
                      const char *extra, int64_t start)
{
    uint64_t epoch;
    struct table_load *l = check_load_begin(t, 2000, ident, &epoch);
    char key[64];
    uint64_t *hs = malloc((n + 1) * sizeof *hs);
    size_t nh = 0;
    ck_assert_ptr_nonnull(hs);
    for (unsigned i = 0; i <= n; i++) {
        int len = i < n ? snprintf(key, sizeof key, "row-%u", i) : extra ? snprintf(key, sizeof key, "%s", extra) : -1;
        if (len < 0)
            break;
        uint64_t h = filter_hash(key, (size_t)len);
        filter_add_hash(table_load_filter(l), h);
        table_load_seen(l, key, (size_t)len, h);
        hs[nh++] = h;
    }
    /* In batches after the rows, as loader_copy.c: here one. */
    table_load_added(l, hs, nh);
    free(hs);
    ck_assert(table_load_commit(l, epoch, start, ""));
}

/* The first n absent IDs ("<prefix>-<i>") the filter answers "maybe" for. */
static unsigned false_positives_of(struct table *t, const char *prefix, char (*out)[32], unsigned n)
{
    unsigned found = 0;
    for (unsigned i = 0; found < n && i < 1000000; i++) {
        int len = snprintf(out[found], 32, "%s-%u", prefix, i);
        if (table_lookup(t, out[found], (size_t)len) == TABLE_MAYBE)
            found++;
    }
    ck_assert_uint_eq(found, n);
    return found;
}

static unsigned false_positives(struct table *t, char (*out)[32], unsigned n)
{
    return false_positives_of(t, "miss", out, n);
}

static enum table_answer ask(struct table *t, const char *id)
{
    return table_lookup(t, id, strlen(id));
}

/* Hot enough to be a candidate (min_hits = 2), then taken by the verifier: one candidate. */
static struct table_candidate take_hot(struct table *t, const char *id)
{
    ck_assert_int_eq(ask(t, id), TABLE_MAYBE);
    ck_assert_int_eq(ask(t, id), TABLE_MAYBE);
    struct table_candidate c[4];
    size_t n = table_candidates(t, c, 4);
    ck_assert_uint_eq(n, 1);
    ck_assert_uint_eq(c[0].klen, strlen(id));
    ck_assert(memcmp(c[0].key, id, c[0].klen) == 0);
    return c[0];
}

/* The table's adaptive figures now (table_adaptive_info). */
static struct table_adaptive adaptive(struct table *t)
{
    struct table_adaptive ai;
    table_adaptive_info(t, &ai);
    return ai;
}

static struct table *loaded(void)
{
    struct table *t = table_new(&cfg, &fc);
    ck_assert_ptr_nonnull(t);
    ck_assert(table_adaptive(t));
    load_rows(t, &check_text_ident, 1000, NULL, monoclock_boot_ns());
    return t;
}

/* A loaded() table, and its first n false positives in fp. */
static struct table *loaded_with(char (*fp)[32], unsigned n)
{
    struct table *t = loaded();
    false_positives(t, fp, n);
    return t;
}

/* The adds a denial must yield to: a followed row (how 0), a POST (1), a COPY's row (2). */
static void add_by(struct table *t, int how, const char *id)
{
    if (how == 0)
        ck_assert(table_add_row(t, id, strlen(id)));
    else if (how == 1)
        ck_assert_int_eq(check_post(t, id), TABLE_INSERTED);
    else
        load_rows(t, &check_text_ident, 1000, id, monoclock_boot_ns());
}

/* id made hot, taken by the verifier and found absent: an entry, denied from now on. */
static void deny(struct table *t, const char *id)
{
    struct table_candidate c = take_hot(t, id);
    ck_assert_int_eq(table_verified(t, &c, TABLE_VERIFIED_ABSENT), TABLE_ENTERED);
}

START_TEST(test_hot_false_positive_is_denied)
{
    char fp[1][32];
    struct table *t = loaded_with(fp, 1);
    deny(t, fp[0]);
    ck_assert_int_eq(ask(t, fp[0]), TABLE_ABSENT);
    ck_assert_int_eq(ask(t, "row-5"), TABLE_MAYBE);        /* rows are untouched */
    const char *ids[] = { fp[0], "row-5" };
    size_t lens[] = { strlen(fp[0]), 5 };
    enum table_answer many[2];
    ck_assert(table_lookup_many(t, 2, ids, lens, many));    /* batches by the same sequence */
    ck_assert_int_eq(many[0], TABLE_ABSENT);
    ck_assert_int_eq(many[1], TABLE_MAYBE);
    struct table_adaptive ai = adaptive(t);
    ck_assert_uint_eq(ai.entries, 1);
    ck_assert_uint_eq(ai.verified_absent, 1);
    ck_assert_uint_eq(ai.denied, 2);
    /* row-5, asked twice, is a candidate too: its lookup finds it (present), so it is settled. */
    ck_assert_uint_eq(ai.candidates, 2);
    struct table_candidate r5[2];
    ck_assert_uint_eq(table_candidates(t, r5, 2), 1);
    ck_assert(r5[0].klen == 5 && memcmp(r5[0].key, "row-5", 5) == 0);
    ck_assert_int_eq(table_verified(t, &r5[0], TABLE_VERIFIED_PRESENT), TABLE_SETTLED);
    /* A present one is settled: hot again, no candidate for a while. */
    char fp2[2][32];
    false_positives(t, fp2, 2);
    struct table_candidate p = take_hot(t, fp2[1]);
    ck_assert_int_eq(table_verified(t, &p, TABLE_VERIFIED_PRESENT), TABLE_SETTLED);
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(ask(t, fp2[1]), TABLE_MAYBE);
    struct table_candidate none[1];
    ck_assert_uint_eq(table_candidates(t, none, 1), 0);
    /* A failed one counts again at once. */
    struct table_candidate f = take_hot(t, fp2[0]);
    ck_assert_int_eq(table_verified(t, &f, TABLE_VERIFY_FAILED), TABLE_GIVEN_BACK);
    f = take_hot(t, fp2[0]);
    table_free(t);
}
END_TEST

START_TEST(test_every_add_ends_a_denial)
{
    char fp[3][32];
    struct table *t = loaded_with(fp, 3);
    for (int i = 0; i < 3; i++) {
        deny(t, fp[i]);
        ck_assert_int_eq(ask(t, fp[i]), TABLE_ABSENT);
    }
    /* A followed row, a POSTed ID. */
    for (int how = 0; how < 2; how++) {
        add_by(t, how, fp[how]);
        ck_assert_int_eq(ask(t, fp[how]), TABLE_MAYBE);
    }
    ck_assert_uint_eq(adaptive(t).invalidations, 2);
    /* A COPY's row: the rebuild reads it. */
    ck_assert_int_eq(ask(t, fp[2]), TABLE_ABSENT);
    load_rows(t, &check_text_ident, 1000, fp[2], monoclock_boot_ns());
    ck_assert_int_eq(ask(t, fp[2]), TABLE_MAYBE);
    struct table_adaptive ai = adaptive(t);
    ck_assert_uint_eq(ai.invalidations, 3);
    ck_assert_uint_eq(ai.entries, 0);
    table_free(t);
}
END_TEST

START_TEST(test_an_insert_after_the_snapshot_wins)
{
    char fp[3][32];
    struct table *t = loaded_with(fp, 3);
    /*
     * The ticket is taken, the query's snapshot does not see the row, committed
     * after it and delivered by the follower before the query answers; the
     * same for a POST that comes between the ticket and the answer, and for
     * a rebuild's COPY that reads the row meanwhile (counted by batch,
     * adapt_added_bulk: the ticket must see those counts too).
     */
    for (int how = 0; how < 3; how++) {
        struct table_candidate c = take_hot(t, fp[how]);
        add_by(t, how, fp[how]);
        ck_assert_int_eq(table_verified(t, &c, TABLE_VERIFIED_ABSENT), TABLE_RACED);
        ck_assert_int_eq(ask(t, fp[how]), TABLE_MAYBE);
    }
    struct table_adaptive ai = adaptive(t);
    ck_assert_uint_eq(ai.raced, 3);
    ck_assert_uint_eq(ai.entries, 0);
    table_free(t);
}
END_TEST

START_TEST(test_a_load_in_flight_ends_a_denial)
{
    /*
     * While a rebuild's COPY runs, the old filter still answers.  A row the
     * COPY has read exists: an entry of its ID dies with the batch that
     * counted it (table_load_added), and a verification whose ticket came
     * before that batch races, long before the load commits (a load of
     * 10^8 rows takes minutes).  Both held without the batch's kills only
     * at the commit: a 404 for a row the COPY had read meanwhile.
     */
    char fp[2][32];
    struct table *t = loaded_with(fp, 2);
    deny(t, fp[0]);
    struct table_candidate c = take_hot(t, fp[1]);
    uint64_t epoch;
    struct table_load *l = check_load_begin(t, 2000, &check_text_ident, &epoch);
    uint64_t hs[2];
    for (int i = 0; i < 2; i++) {
        hs[i] = filter_hash(fp[i], strlen(fp[i]));
        filter_add_hash(table_load_filter(l), hs[i]);
        table_load_seen(l, fp[i], strlen(fp[i]), hs[i]);
    }
    ck_assert_int_eq(ask(t, fp[0]), TABLE_ABSENT);      /* the batch not told yet */
    table_load_added(l, hs, 2);
    ck_assert_int_eq(ask(t, fp[0]), TABLE_MAYBE);
    ck_assert_int_eq(table_verified(t, &c, TABLE_VERIFIED_ABSENT), TABLE_RACED);
    ck_assert_int_eq(ask(t, fp[1]), TABLE_MAYBE);
    struct table_adaptive ai = adaptive(t);
    ck_assert_uint_eq(ai.entries, 0);
    ck_assert_uint_eq(ai.invalidations, 1);
    ck_assert(table_load_commit(l, epoch, monoclock_boot_ns(), ""));
    ck_assert_int_eq(ask(t, fp[0]), TABLE_MAYBE);
    ck_assert_int_eq(ask(t, fp[1]), TABLE_MAYBE);
    table_free(t);
}
END_TEST

START_TEST(test_a_posted_id_is_never_verified)
{
    char fp[1][32];
    struct table *t = loaded_with(fp, 1);
    /* POSTed: the service has acknowledged it, its row may not be committed yet. */
    ck_assert_int_eq(check_post(t, fp[0]), TABLE_INSERTED);
    ck_assert_int_eq(ask(t, fp[0]), TABLE_MAYBE);
    ck_assert_int_eq(ask(t, fp[0]), TABLE_MAYBE);          /* hot: a candidate */
    ck_assert_int_eq(table_report(t, fp[0], strlen(fp[0])), TABLE_REPORT_HELD);
    struct table_candidate c[2];
    ck_assert_uint_eq(table_candidates(t, c, 2), 0);
    ck_assert_uint_eq(adaptive(t).posted, 1);
    table_free(t);
}
END_TEST

START_TEST(test_reports)
{
    char fp[1][32];
    struct table *t = loaded_with(fp, 1);
    ck_assert_int_eq(table_report(t, fp[0], strlen(fp[0])), TABLE_REPORT_QUEUED);
    ck_assert_int_eq(table_report(t, fp[0], strlen(fp[0])), TABLE_REPORT_HELD);
    /* An ID the filter already denies needs nothing. */
    char absent[32];
    for (unsigned i = 0;; i++) {
        snprintf(absent, sizeof absent, "absent-%u", i);
        if (ask(t, absent) == TABLE_ABSENT)
            break;
    }
    ck_assert_int_eq(table_report(t, absent, strlen(absent)), TABLE_REPORT_ABSENT);
    struct table_candidate c[2];
    ck_assert_uint_eq(table_candidates(t, c, 2), 1);
    /* A report is never believed by itself: only the verdict makes an entry. */
    ck_assert_int_eq(ask(t, fp[0]), TABLE_MAYBE);
    ck_assert_int_eq(table_verified(t, &c[0], TABLE_VERIFIED_ABSENT), TABLE_ENTERED);
    ck_assert_int_eq(table_report(t, fp[0], strlen(fp[0])), TABLE_REPORT_ABSENT);
    ck_assert_uint_eq(adaptive(t).reported, 1);
    table_free(t);
}
END_TEST

START_TEST(test_degraded_answers_maybe)
{
    /* A load that started longer ago than max_staleness: the horizon is stale. */
    struct table *t = table_new(&cfg, &fc);
    load_rows(t, &check_text_ident, 1000, NULL, monoclock_boot_ns() - 2 * 60 * NS);
    char fp[1][32];
    unsigned found = 0;
    for (unsigned i = 0; !found; i++) {
        snprintf(fp[0], sizeof fp[0], "miss-%u", i);
        found = ask(t, fp[0]) == TABLE_MAYBE;
    }
    ck_assert_int_eq(table_report(t, fp[0], strlen(fp[0])), TABLE_REPORT_QUEUED);
    struct table_candidate c;
    ck_assert_uint_eq(table_candidates(t, &c, 1), 1);
    ck_assert_int_eq(table_verified(t, &c, TABLE_VERIFIED_ABSENT), TABLE_ENTERED);
    ck_assert_int_eq(ask(t, fp[0]), TABLE_DEGRADED);
    /* A fresh proof: denied again (nothing added it meanwhile). */
    ck_assert(table_advance(t, table_epoch(t), monoclock_boot_ns()));
    ck_assert_int_eq(ask(t, fp[0]), TABLE_ABSENT);
    table_free(t);
}
END_TEST

START_TEST(test_rebuilds_keep_what_holds)
{
    char fp[1][32];
    struct table *t = loaded_with(fp, 1);
    deny(t, fp[0]);
    /* The same rows into a filter of the same size: the same false positive, still denied. */
    load_rows(t, &check_text_ident, 1000, NULL, monoclock_boot_ns());
    ck_assert_int_eq(ask(t, fp[0]), TABLE_ABSENT);
    ck_assert_uint_eq(adaptive(t).entries, 1);
    /* A filter that answers it absent itself: the entry is dropped, the answer unchanged. */
    fc.false_positive_rate = 0.0001;
    table_set_sizing(t, &fc);
    load_rows(t, &check_text_ident, 1000, NULL, monoclock_boot_ns());
    if (table_lookup(t, fp[0], strlen(fp[0])) == TABLE_ABSENT) {
        ck_assert_uint_eq(adaptive(t).entries, 0);
    }
    /* A new spelling: every entry is forgotten, every verification in flight fails. */
    fc.false_positive_rate = 0.05;
    table_set_sizing(t, &fc);
    load_rows(t, &check_text_ident, 1000, NULL, monoclock_boot_ns());
    char fp2[2][32];
    false_positives_of(t, "other", fp2, 2);        /* never asked before: none is settled */
    deny(t, fp2[0]);
    struct table_candidate c = take_hot(t, fp2[1]);
    const struct table_ident other = { .relid = 1, .attnum = 1, .spell = SPELL_NAME };
    load_rows(t, &other, 1000, NULL, monoclock_boot_ns());
    ck_assert_uint_eq(adaptive(t).entries, 0);
    ck_assert_int_eq(table_verified(t, &c, TABLE_VERIFIED_ABSENT), TABLE_RACED);
    table_free(t);
}
END_TEST

START_TEST(test_off)
{
    cfg.adaptive_enabled = false;
    struct table *t = table_new(&cfg, &fc);
    ck_assert(!table_adaptive(t));
    load_rows(t, &check_text_ident, 100, NULL, monoclock_boot_ns());
    ck_assert_int_eq(table_report(t, "x", 1), TABLE_REPORT_OFF);
    struct table_candidate c[1];
    ck_assert_uint_eq(table_candidates(t, c, 1), 0);
    table_free(t);
}
END_TEST

/* ---------------------------------------------------------- threads -- */

#define RACE_KEYS 1000

struct race {
    struct table *t;
    char (*keys)[32];
    _Atomic long taken_upto;        /* the verifier took key i's ticket (-1: none yet) */
    _Atomic long verified_upto;     /* ... and gave its verdict */
    _Atomic long added_upto;        /* key i's row was added, and the add returned */
    atomic_bool done;
    _Atomic long wrong, denied, entered, raced;
};

static void spin(unsigned n)
{
    for (volatile unsigned i = 0; i < n; i++)
        ;
}

/* The index of a candidate's key among r->keys. */
static long key_index(const struct race *r, const struct table_candidate *c)
{
    for (long i = 0; i < RACE_KEYS; i++)
        if (strlen(r->keys[i]) == c->klen && memcmp(r->keys[i], c->key, c->klen) == 0)
            return i;
    return -1;
}

/*
 * The verifier: each key reported, its ticket taken, and (as if its query
 * said so) found absent.  Every other key's row is added between its
 * ticket and its verdict (the insert committed after the query's snapshot
 * and followed before its answer); the others' after the verdict.
 */
static void *verifier(void *arg)
{
    struct race *r = arg;
    unsigned seed = 5;
    for (long i = 0; i < RACE_KEYS; i++) {
        table_report(r->t, r->keys[i], strlen(r->keys[i]));
        struct table_candidate c[8];
        size_t n = table_candidates(r->t, c, 8);
        /*
         * What the query would say: a key added before its ticket is
         * committed before the snapshot, so present (a key the sketch lost
         * and nominated again comes back late); any other may be absent.
         */
        bool absent[8];
        long added = atomic_load(&r->added_upto);
        for (size_t k = 0; k < n; k++)
            absent[k] = key_index(r, &c[k]) > added;
        atomic_store(&r->taken_upto, i);
        while (i % 2 == 0 && atomic_load(&r->added_upto) < i)
            ;
        spin((unsigned)rand_r(&seed) % 4000);
        for (size_t k = 0; k < n; k++) {
            enum table_verified v = table_verified(r->t, &c[k], absent[k] ? TABLE_VERIFIED_ABSENT
                                                                      : TABLE_VERIFIED_PRESENT);
            if (absent[k])
                atomic_fetch_add(v == TABLE_ENTERED ? &r->entered : &r->raced, 1);
        }
        atomic_store(&r->verified_upto, i);
    }
    return NULL;
}

/* The follower: key i's row arrives when its turn says, a moment later. */
static void *adder(void *arg)
{
    struct race *r = arg;
    unsigned seed = 9;
    long long waited_ns = 0;
    for (long i = 0; i < RACE_KEYS; i++) {
        while (atomic_load(i % 2 == 0 ? &r->taken_upto : &r->verified_upto) < i)
            ;
        spin((unsigned)rand_r(&seed) % 4000);
        /*
         * Until the askers have seen one denial, hold each add of a key
         * verified first (odd turns: its entry is live) a moment
         * (5 s in all at most): on a loaded machine they may otherwise
         * never run while an entry is live, and the race goes unobserved.
         */
        while (i % 2 == 1 && atomic_load(&r->denied) == 0 && waited_ns < 5000000000LL) {
            struct timespec ts = { 0, 100000 };
            nanosleep(&ts, NULL);
            waited_ns += 100000;
        }
        table_add_row(r->t, r->keys[i], strlen(r->keys[i]));
        atomic_store_explicit(&r->added_upto, i, memory_order_release);
    }
    atomic_store(&r->done, true);
    return NULL;
}

/* Requests about the keys in flight: one whose add returned must never be denied. */
static void *asker(void *arg)
{
    struct race *r = arg;
    unsigned seed = 11;
    while (!atomic_load(&r->done)) {
        long added = atomic_load_explicit(&r->added_upto, memory_order_acquire);
        long taken = atomic_load(&r->taken_upto);
        /* Not past the verifier: a hot key would be taken before its turn. */
        long i = added - 2 + (long)(rand_r(&seed) % 4);
        if (i < 0 || i > taken)
            continue;
        if (table_lookup(r->t, r->keys[i], strlen(r->keys[i])) == TABLE_ABSENT) {
            atomic_fetch_add(&r->denied, 1);
            if (i <= added)
                atomic_fetch_add(&r->wrong, 1);
        }
    }
    return NULL;
}

START_TEST(test_no_denial_after_an_add_under_threads)
{
    cfg.adaptive_max_entries = RACE_KEYS;
    struct race *r = calloc(1, sizeof *r);
    atomic_init(&r->taken_upto, -1);
    atomic_init(&r->verified_upto, -1);
    atomic_init(&r->added_upto, -1);
    r->t = loaded();
    r->keys = calloc(RACE_KEYS, sizeof *r->keys);
    false_positives(r->t, r->keys, RACE_KEYS);
    /*
     * Asked once each: a key whose two door counters other keys raised
     * may be a candidate already (hot.h: the door's hits early, at most);
     * given back, so that every key is taken at its turn.
     */
    struct table_candidate early[8];
    size_t ne;
    while ((ne = table_candidates(r->t, early, 8)) > 0)
        for (size_t k = 0; k < ne; k++)
            table_verified(r->t, &early[k], TABLE_VERIFY_FAILED);
    pthread_t v, a, q[2];
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&q[i], NULL, asker, r), 0);
    ck_assert_int_eq(pthread_create(&v, NULL, verifier, r), 0);
    ck_assert_int_eq(pthread_create(&a, NULL, adder, r), 0);
    pthread_join(a, NULL);
    pthread_join(v, NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(q[i], NULL);
    long wrong = atomic_load(&r->wrong);
    printf("adapt race: %ld entered, %ld raced, %ld denials of keys in flight, %ld after the add\n",
           atomic_load(&r->entered), atomic_load(&r->raced), atomic_load(&r->denied), wrong);
    ck_assert_msg(wrong == 0, "%ld lookups denied a key after its row was added", wrong);
    /* The race was run, both ways, and denials were seen: not avoided. */
    ck_assert_int_ge(atomic_load(&r->entered), RACE_KEYS / 2);
    ck_assert_int_eq(atomic_load(&r->raced), RACE_KEYS / 2);
    ck_assert_int_gt(atomic_load(&r->denied), 0);
    /* Every key was added: none is denied any more. */
    for (unsigned i = 0; i < RACE_KEYS; i++)
        ck_assert_int_ne(table_lookup(r->t, r->keys[i], strlen(r->keys[i])), TABLE_ABSENT);
    table_free(r->t);
    free(r->keys);
    free(r);
}
END_TEST

/* An upstream's hub hears of each entry as it joins the set: its streams send it at once. */
static void count_wake(void *arg)
{
    (*(unsigned *)arg)++;
}

START_TEST(test_entries_wake_the_streams)
{
    char fp[3][32];
    struct table *t = loaded_with(fp, 3);
    unsigned wakes = 0;
    uint64_t cursor = 0;
    struct table_candidate out[16];
    table_set_verified_wake(t, count_wake, &wakes);
    ck_assert(!table_verified_ahead(t, cursor));
    deny(t, fp[0]);
    ck_assert_uint_eq(wakes, 1);
    ck_assert(table_verified_ahead(t, cursor));
    ck_assert_uint_eq(table_verified_log(t, &cursor, out, 16), 1);
    ck_assert(!table_verified_ahead(t, cursor));
    /* Sent again by a replica's upstream (a new stream): denied already and still logged: no echo. */
    ck_assert_int_eq(table_enter_verified(t, filter_hash(fp[0], strlen(fp[0])), fp[0],
                                          strlen(fp[0])), TABLE_ENTERED);
    ck_assert_uint_eq(wakes, 1);
    ck_assert(!table_verified_ahead(t, cursor));
    /* Overtaken by an add: not entered, nobody woken. */
    struct table_candidate c = take_hot(t, fp[1]);
    add_by(t, 0, fp[1]);
    ck_assert_int_eq(table_verified(t, &c, TABLE_VERIFIED_ABSENT), TABLE_RACED);
    ck_assert_uint_eq(wakes, 1);
    ck_assert(!table_verified_ahead(t, cursor));
    /* An upstream's entry (a replica that serves replicas) wakes them too. */
    ck_assert_int_eq(table_enter_verified(t, filter_hash(fp[2], strlen(fp[2])), fp[2],
                                          strlen(fp[2])), TABLE_ENTERED);
    ck_assert_uint_eq(wakes, 2);
    ck_assert(table_verified_ahead(t, cursor));
    /* Ended before the stream looked: the cursor moves past it, nothing is sent. */
    add_by(t, 0, fp[2]);
    ck_assert_uint_eq(table_verified_log(t, &cursor, out, 16), 0);
    ck_assert(!table_verified_ahead(t, cursor));
    table_set_verified_wake(t, NULL, NULL);
    table_free(t);
}
END_TEST

/* A replica that joined after the newest ADAPT_LOG entries asks for an older one: sent again. */
START_TEST(test_a_report_of_a_denied_id_sends_it_again)
{
    char fp[1][32];
    struct table *t = loaded_with(fp, 1);
    unsigned wakes = 0;
    uint64_t cursor = 0;
    struct table_candidate out[16];
    table_set_verified_wake(t, count_wake, &wakes);
    deny(t, fp[0]);
    /* Still in the log: every stream sends it, a report changes nothing. */
    ck_assert_int_eq(table_report(t, fp[0], strlen(fp[0])), TABLE_REPORT_ABSENT);
    ck_assert_uint_eq(wakes, 1);
    char key[32];
    for (unsigned i = 0; i < ADAPT_LOG; i++) {
        int len = snprintf(key, sizeof key, "other-%u", i);
        ck_assert_int_eq(table_enter_verified(t, filter_hash(key, (size_t)len), key, (size_t)len),
                         TABLE_ENTERED);
    }
    /* A new stream: the newest ADAPT_LOG entries, not fp[0]. */
    size_t n, sent = 0;
    bool has = false;
    while ((n = table_verified_log(t, &cursor, out, 16)) > 0)
        for (size_t i = 0; i < n; i++, sent++)
            has |= out[i].klen == strlen(fp[0]) && memcmp(out[i].key, fp[0], out[i].klen) == 0;
    ck_assert_uint_eq(sent, ADAPT_LOG);
    ck_assert(!has);
    /* Asked for (a replica's report): logged again, the streams woken, sent. */
    wakes = 0;
    ck_assert_int_eq(table_report(t, fp[0], strlen(fp[0])), TABLE_REPORT_ABSENT);
    ck_assert_uint_eq(wakes, 1);
    ck_assert(table_verified_ahead(t, cursor));
    ck_assert_uint_eq(table_verified_log(t, &cursor, out, 16), 1);
    ck_assert(out[0].klen == strlen(fp[0]) && memcmp(out[0].key, fp[0], out[0].klen) == 0);
    /* On its way now: asked again, not logged twice. */
    ck_assert_int_eq(table_report(t, fp[0], strlen(fp[0])), TABLE_REPORT_ABSENT);
    ck_assert_uint_eq(wakes, 1);
    /* Ended by an add: a report finds it "maybe" again, a candidate, never sent. */
    add_by(t, 0, fp[0]);
    ck_assert(!table_verified_ahead(t, cursor));
    table_set_verified_wake(t, NULL, NULL);
    table_free(t);
}
END_TEST

/* The publisher's memory for the set (table_publish.h's verified hook), as publish.c maps it. */
struct shared_set {
    void *mem;
    size_t bytes;
};

static void *shared_set_memory(void *ctx, size_t bytes)
{
    struct shared_set *m = ctx;
    m->bytes = bytes;
    m->mem = aligned_alloc(64, (bytes + 63) / 64 * 64);
    return m->mem;
}

/*
 * A lookup keeps the set's place (table.c: no call a lookup to learn it)
 * and must follow it where it moves: into a publisher's memory, which a
 * reader of the published file sees too, and back into the table's own
 * (publish_free), empty, where an ID the shared memory still denies is
 * "maybe" again and a new entry is denied.
 */
START_TEST(test_lookups_follow_the_set)
{
    char fp[2][32];
    struct table *t = table_new(&cfg, &fc);
    ck_assert_ptr_nonnull(t);
    struct shared_set m = { 0 };
    const struct table_publisher pub = { .ctx = &m, .verified = shared_set_memory };
    table_set_publisher(t, &pub);
    ck_assert_ptr_nonnull(m.mem);
    load_rows(t, &check_text_ident, 1000, NULL, monoclock_boot_ns());
    false_positives(t, fp, 2);
    deny(t, fp[0]);
    ck_assert_int_eq(ask(t, fp[0]), TABLE_ABSENT);
    const struct vset *v = vset_view(m.mem, m.bytes);
    ck_assert_ptr_nonnull(v);
    ck_assert(vset_has(v, filter_hash(fp[0], strlen(fp[0])), fp[0], strlen(fp[0])));
    const struct table_publisher none = { 0 };
    table_set_publisher(t, &none);
    ck_assert(vset_has(v, filter_hash(fp[0], strlen(fp[0])), fp[0], strlen(fp[0])));
    ck_assert_int_eq(ask(t, fp[0]), TABLE_MAYBE);
    deny(t, fp[1]);
    ck_assert_int_eq(ask(t, fp[1]), TABLE_ABSENT);
    ck_assert_uint_eq(adaptive(t).entries, 1);
    table_free(t);
    free(m.mem);
}
END_TEST

/*
 * With min_hits 1 the sketch has no door (hot.h): the lookup, which takes
 * the door inline, hands every "maybe" on, and the first is a candidate.
 */
START_TEST(test_no_door_with_min_hits_one)
{
    cfg.adaptive_min_hits = 1;
    char fp[1][32];
    struct table *t = loaded_with(fp, 1);           /* asked once: a candidate */
    struct table_candidate c[2];
    ck_assert_uint_eq(table_candidates(t, c, 2), 1);
    ck_assert(c[0].klen == strlen(fp[0]) && memcmp(c[0].key, fp[0], c[0].klen) == 0);
    ck_assert_int_eq(table_verified(t, &c[0], TABLE_VERIFIED_ABSENT), TABLE_ENTERED);
    ck_assert_int_eq(ask(t, fp[0]), TABLE_ABSENT);
    table_free(t);
}
END_TEST

/*
 * The set's tag filter (adapt.h) gates every lookup's question to the
 * set: each of 300 entries is denied through it (its bit set before its
 * stage, read at the same place), none survives a new spelling's reset,
 * and after it the bits are set again for new entries.
 */
START_TEST(test_every_entry_passes_the_tag_filter)
{
    enum { N = 300 };
    static char fp[N + 1][32];
    struct table *t = loaded_with(fp, N + 1);
    struct table_candidate c[N];
    for (int round = 0; round < 2; round++) {
        unsigned n = round == 0 ? N : 1;
        for (unsigned i = 0; i < n; i++) {
            const char *id = round == 0 ? fp[i] : fp[N];
            ask(t, id);                     /* the 2nd "maybe" (min_hits 2): a candidate */
        }
        ck_assert_uint_eq(table_candidates(t, c, N), n);
        for (unsigned i = 0; i < n; i++)
            ck_assert_int_eq(table_verified(t, &c[i], TABLE_VERIFIED_ABSENT), TABLE_ENTERED);
        for (unsigned i = 0; i < n; i++)
            ck_assert_msg(ask(t, round == 0 ? fp[i] : fp[N]) == TABLE_ABSENT, "entry %u", i);
        if (round == 0) {
            ck_assert_uint_eq(adaptive(t).entries, N);
            table_forget_verified(t);
            for (unsigned i = 0; i < N; i++)
                ck_assert_int_eq(ask(t, fp[i]), TABLE_MAYBE);
        }
    }
    ck_assert_uint_eq(adaptive(t).entries, 1);
    table_free(t);
}
END_TEST

CHECK_SUITE("adapt",
    CHECK_CASE("core", .setup = setup, .timeout = 120),
    CHECK_TEST(test_hot_false_positive_is_denied),
    CHECK_TEST(test_every_add_ends_a_denial),
    CHECK_TEST(test_an_insert_after_the_snapshot_wins),
    CHECK_TEST(test_a_load_in_flight_ends_a_denial),
    CHECK_TEST(test_a_posted_id_is_never_verified),
    CHECK_TEST(test_reports),
    CHECK_TEST(test_degraded_answers_maybe),
    CHECK_TEST(test_rebuilds_keep_what_holds),
    CHECK_TEST(test_off),
    CHECK_TEST(test_no_denial_after_an_add_under_threads),
    CHECK_TEST(test_entries_wake_the_streams),
    CHECK_TEST(test_a_report_of_a_denied_id_sends_it_again),
    CHECK_TEST(test_lookups_follow_the_set),
    CHECK_TEST(test_no_door_with_min_hits_one),
    CHECK_TEST(test_every_entry_passes_the_tag_filter),
)
