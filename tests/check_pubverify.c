/*
 * Unit tests of the verified-absent set published beside the bits
 * (src/publish/verified.c, pubfmt.h, reader.c; publish.h's (d)): readers
 * of the published filter (libbloomguard, so the nginx module too) deny
 * what the daemon denies, keep doing so across a rebuild's swap, stop the
 * moment an add returns, pair the set only with their own run's
 * generations, and lose nothing but denials when the file is missing; and
 * under threads no reader denies an ID after its add returned.
 */
#include <check.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include "bloomguard.h"
#include "check_main.h"
#include "check_util.h"
#include "config.h"
#include "pubfmt.h"
#include "publish.h"
#include "table.h"

static struct config cfg;
static struct filter_config fc;
static struct log lg;
static char dir[PATH_MAX], path[PATH_MAX + 16], vpath[PATH_MAX + 16];

static void setup(void)
{
    check_filter_fixture(&cfg, &fc, "users", 0.05, 1000);
    cfg.max_id_bytes = 512;
    cfg.publish_mode = 0644;
    cfg.publish_group = (char *)"";
    cfg.adaptive_enabled = true;
    cfg.adaptive_min_hits = 2;
    cfg.adaptive_window = 10;
    cfg.adaptive_verify_rate = 20;
    cfg.adaptive_max_entries = 2048;
    log_init(&lg, LOG_LVL_ERROR);
    char tmpl[] = "check_pubverify.XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(tmpl));
    ck_assert_ptr_nonnull(realpath(tmpl, dir));
    snprintf(path, sizeof path, "%s/users.bgf", dir);
    snprintf(vpath, sizeof vpath, "%s/users.bgv", dir);
}

static void teardown(void)
{
    char cmd[PATH_MAX + 32];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

struct cast {
    struct table *t;
    struct publish *p;
    bloomguard *bg;
};

/* A COPY of row-0 .. row-999, each row told to the table as the loader tells it. */
static void load(struct table *t)
{
    uint64_t epoch;
    struct table_load *l = check_load_begin(t, 2000, &check_text_ident, &epoch);
    char k[32];
    for (unsigned i = 0; i < 1000; i++) {
        int n = snprintf(k, sizeof k, "row-%u", i);
        uint64_t h = filter_hash(k, (size_t)n);
        filter_add_hash(table_load_filter(l), h);
        table_load_seen(l, k, (size_t)n, h);
        table_load_added(l, &h, 1);
    }
    ck_assert(table_load_commit(l, epoch, monoclock_boot_ns(), ""));
}

static void cast_open(struct cast *c)
{
    char err[256];
    c->t = table_new(&cfg, &fc);
    ck_assert_ptr_nonnull(c->t);
    c->p = publish_new(&cfg, &fc, c->t, dir, &lg, err, sizeof err);
    ck_assert_msg(c->p != NULL, "%s", err);
    load(c->t);
    c->bg = bloomguard_open(path, 0, NULL);
    ck_assert_ptr_nonnull(c->bg);
}

static void cast_close(struct cast *c)
{
    bloomguard_close(c->bg);
    publish_free(c->p);
    table_free(c->t);
}

static enum bloomguard_answer look(bloomguard *bg, const char *id)
{
    return bloomguard_lookup(bg, id, strlen(id));
}

/* n absent IDs "<prefix>-<i>" the filter answers "maybe" for (by the reader). */
static void false_positives(bloomguard *bg, const char *prefix, char (*out)[32], unsigned n)
{
    unsigned found = 0;
    for (unsigned i = 0; found < n && i < 1000000; i++) {
        snprintf(out[found], 32, "%s-%u", prefix, i);
        found += look(bg, out[found]) == BLOOMGUARD_MAYBE;
    }
    ck_assert_uint_eq(found, n);
}

/* Reported, taken and found absent (as the verifier's lookup would say): denied. */
static void deny(struct table *t, const char *id)
{
    ck_assert_int_eq(table_report(t, id, strlen(id)), TABLE_REPORT_QUEUED);
    struct table_candidate c;
    ck_assert_uint_eq(table_candidates(t, &c, 1), 1);
    ck_assert_int_eq(table_verified(t, &c, TABLE_VERIFIED_ABSENT), TABLE_ENTERED);
}

/* c opened, and fp[0]: a false positive of its reader, denied by the table. */
static void cast_open_denied(struct cast *c, char (*fp)[32])
{
    cast_open(c);
    false_positives(c->bg, "miss", fp, 1);
    deny(c->t, fp[0]);
}

START_TEST(test_readers_deny_what_the_daemon_denies)
{
    struct cast c;
    cast_open(&c);
    struct stat st, vst;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(stat(vpath, &vst), 0);
    ck_assert_uint_eq(vst.st_mode & 07777, st.st_mode & 07777);    /* publish_mode, as the filter */
    char fp[3][32];
    false_positives(c.bg, "miss", fp, 3);
    deny(c.t, fp[0]);
    deny(c.t, fp[1]);
    ck_assert_int_eq(table_lookup(c.t, fp[0], strlen(fp[0])), TABLE_ABSENT);
    ck_assert_int_eq(look(c.bg, fp[0]), BLOOMGUARD_ABSENT);
    ck_assert_int_eq(look(c.bg, fp[2]), BLOOMGUARD_MAYBE);     /* not verified: maybe */
    ck_assert_int_eq(look(c.bg, "row-7"), BLOOMGUARD_MAYBE);
    /* Another reader opened afterwards finds the same set. */
    bloomguard *other = bloomguard_open(path, 0, NULL);
    ck_assert_int_eq(look(other, fp[1]), BLOOMGUARD_ABSENT);
    bloomguard_close(other);
    /* A followed row and a POST end the denial for readers the moment they return. */
    ck_assert(table_add_row(c.t, fp[0], strlen(fp[0])));
    ck_assert_int_eq(look(c.bg, fp[0]), BLOOMGUARD_MAYBE);
    ck_assert_int_eq(check_post(c.t, fp[1]), TABLE_INSERTED);
    ck_assert_int_eq(look(c.bg, fp[1]), BLOOMGUARD_MAYBE);
    deny(c.t, fp[2]);
    ck_assert_int_eq(look(c.bg, fp[2]), BLOOMGUARD_ABSENT);
    cast_close(&c);
    /* Withdrawn with the filter at stop. */
    ck_assert_int_ne(stat(vpath, &vst), 0);
}
END_TEST

START_TEST(test_the_set_outlives_a_rebuild_swap)
{
    struct cast c;
    char fp[1][32];
    cast_open_denied(&c, fp);
    struct bloomguard_info in;
    ck_assert_int_eq(bloomguard_info(c.bg, &in), BLOOMGUARD_OK);
    uint64_t gen = in.generation;
    /* The same rows into a filter of the same size: a new generation, the same false positive. */
    load(c.t);
    ck_assert_int_eq(look(c.bg, fp[0]), BLOOMGUARD_ABSENT);
    ck_assert_int_eq(bloomguard_info(c.bg, &in), BLOOMGUARD_OK);
    ck_assert_uint_eq(in.generation, gen + 1);
    cast_close(&c);
}
END_TEST

START_TEST(test_a_set_pairs_only_with_its_run)
{
    struct cast c;
    char fp[1][32];
    cast_open_denied(&c, fp);
    ck_assert_int_eq(look(c.bg, fp[0]), BLOOMGUARD_ABSENT);
    /* Another run's set at the path (an instance of its own): never read with this filter. */
    int fd = open(vpath, O_RDWR);
    ck_assert_int_ge(fd, 0);
    struct pubfmt_vset_header *h = mmap(NULL, PUBFMT_HEADER_BYTES, PROT_READ | PROT_WRITE,
                                        MAP_SHARED, fd, 0);
    ck_assert_ptr_ne(h, MAP_FAILED);
    h->instance ^= 1;
    bloomguard *other = bloomguard_open(path, 0, NULL);
    ck_assert_int_eq(look(other, fp[0]), BLOOMGUARD_MAYBE);
    bloomguard_close(other);
    h->instance ^= 1;
    munmap(h, PUBFMT_HEADER_BYTES);
    close(fd);
    /* No set file at all: the filter still answers, it only denies less. */
    ck_assert_int_eq(unlink(vpath), 0);
    other = bloomguard_open(path, 0, NULL);
    ck_assert_ptr_nonnull(other);
    ck_assert_int_eq(look(other, fp[0]), BLOOMGUARD_MAYBE);
    ck_assert_int_eq(look(other, "row-3"), BLOOMGUARD_MAYBE);
    bloomguard_close(other);
    cast_close(&c);
}
END_TEST

/* ---------------------------------------------------------- threads -- */

#define RACE_KEYS 500

struct race {
    struct cast c;
    char (*keys)[32];
    _Atomic long added_upto;
    atomic_bool done;
    _Atomic long wrong, denied;
};

/* Each key denied, then its row added: readers must stop denying it when the add returns. */
static void *follower(void *arg)
{
    struct race *r = arg;
    for (long i = 0; i < RACE_KEYS; i++) {
        deny(r->c.t, r->keys[i]);
        for (volatile int spin = 0; spin < 30000; spin++)
            ;
        table_add_row(r->c.t, r->keys[i], strlen(r->keys[i]));
        atomic_store_explicit(&r->added_upto, i, memory_order_release);
    }
    atomic_store(&r->done, true);
    return NULL;
}

static void *asker(void *arg)
{
    struct race *r = arg;
    bloomguard *bg = bloomguard_open(path, 0, NULL);
    ck_assert_ptr_nonnull(bg);
    unsigned seed = 3;
    while (!atomic_load(&r->done)) {
        long added = atomic_load_explicit(&r->added_upto, memory_order_acquire);
        /* The key in flight (denied, its add to come) or the last ones added. */
        long i = added + 1 - (long)(rand_r(&seed) % 3);
        if (i < 0 || i >= RACE_KEYS)
            continue;
        if (look(bg, r->keys[i]) == BLOOMGUARD_ABSENT) {
            atomic_fetch_add(&r->denied, 1);
            if (i <= added)
                atomic_fetch_add(&r->wrong, 1);
        }
    }
    bloomguard_close(bg);
    return NULL;
}

START_TEST(test_readers_never_deny_after_an_add)
{
    struct race *r = calloc(1, sizeof *r);
    atomic_init(&r->added_upto, -1);
    cast_open(&r->c);
    r->keys = calloc(RACE_KEYS, sizeof *r->keys);
    false_positives(r->c.bg, "race", r->keys, RACE_KEYS);
    pthread_t f, a[2];
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&a[i], NULL, asker, r), 0);
    ck_assert_int_eq(pthread_create(&f, NULL, follower, r), 0);
    pthread_join(f, NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(a[i], NULL);
    long wrong = atomic_load(&r->wrong), denied = atomic_load(&r->denied);
    fprintf(stderr, "published set race: %ld denials of keys not yet added, %ld after the add\n",
            denied - wrong, wrong);
    ck_assert_msg(wrong == 0, "%ld reader lookups denied a key after its add returned", wrong);
    ck_assert_int_gt(denied, 0);
    cast_close(&r->c);
    free(r->keys);
    free(r);
}
END_TEST

CHECK_SUITE("pubverify",
    CHECK_CASE("published set", .setup = setup, .teardown = teardown, .timeout = 120),
    CHECK_TEST(test_readers_deny_what_the_daemon_denies),
    CHECK_TEST(test_the_set_outlives_a_rebuild_swap),
    CHECK_TEST(test_a_set_pairs_only_with_its_run),
    CHECK_TEST(test_readers_never_deny_after_an_add),
)
