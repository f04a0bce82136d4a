/*
 * Unit tests of snapshots (src/store/snapshot.c) and of what they build on in the
 * filter (filter_bits_read/write, filter_new_from) and the journal
 * (pending_export/restore): round trips through files, memory and the pull
 * stream, of grown filters (several layers) and metadata pairs; version 1
 * files still read; every truncation and every flipped byte refused; the
 * reasons named; an old snapshot surviving failed writes; a copy taken
 * while other threads insert.
 */
#include <check.h>
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "check_main.h"
#include "check_util.h"
#include "filter.h"
#include "pending.h"
#include "snapshot.h"

static const struct snapshot_kv KV[] = {
    { "table_oid", "16384" }, { "system_identifier", "7301234567890123456" },
    { "follow", "feed" }, { "empty", "" },
};
static const struct snapshot_meta META = {
    .name = "users", .table = "public.users", .column = "id",
    .position = "734/7300000000000000000.1.1732200000", .horizon_ms = UINT64_C(1732199999123),
    .created = 1700000000, .kv = KV, .n_kv = sizeof KV / sizeof KV[0],
};
static const struct snapshot_expect EXPECT = {
    .name = "users", .table = "public.users", .column = "id", .target_fpp = 0.01,
};

static size_t key(char *buf, size_t cap, const char *prefix, uint64_t i)
{
    return (size_t)snprintf(buf, cap, "%s-%llu", prefix, (unsigned long long)i);
}

/* Adds the keys prefix+from .. prefix+(to - 1), as key() spells them, to f. */
static void add_keys(struct filter *f, const char *prefix, uint64_t from, uint64_t to)
{
    char k[64];
    for (uint64_t i = from; i < to; i++)
        filter_add(f, k, key(k, sizeof k, prefix, i));
}

/*
 * A filter read back grows on as the one written does: the keys "in"-from ..
 * "in"-(to - 1) added to both, they hold the same layers, bit for bit.
 */
static void grow_alike(struct filter *f, struct filter *read, uint64_t from, uint64_t to)
{
    add_keys(f, "in", from, to);
    add_keys(read, "in", from, to);
    check_same_layers(f, read);
}

/* Files in dir, "." and ".." aside. */
static int files_in(const char *dir)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
    closedir(d);
    return n;
}

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    unsigned char *buf = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static void spit(const char *path, const void *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(buf, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

/*
 * A journal as snapshot.h takes it (what persist_journal makes of a
 * table's): pending p exported at time now.
 */
struct walked {
    struct pending *p;
    uint64_t now;
};

static bool walk_pending(void *journal_ctx, snapshot_count_fn count, snapshot_entry_fn each,
                         void *ctx)
{
    struct walked *w = journal_ctx;
    return pending_export(w->p, w->now, count, each, ctx);
}

/* The entries of a snapshot's journal back into a pending set at time now (as persist.c does). */
struct restoring {
    struct pending *p;
    uint64_t now;
    enum pending_result first;
};

static void restore_entry(void *arg, const char *id, size_t len, uint64_t ttl_left)
{
    struct restoring *r = arg;
    enum pending_result pr = pending_restore(r->p, id, len, filter_hash(id, len), ttl_left, r->now);
    if (pr != PENDING_OK && r->first == PENDING_OK)
        r->first = pr;
}

static enum pending_result restore_journal(const struct snapshot *s, struct pending *p,
                                           uint64_t now)
{
    struct restoring r = { p, now, PENDING_OK };
    snapshot_journal_each(s, restore_entry, &r);
    return r.first;
}

/* A whole snapshot in memory, through the pull stream, cap bytes at a time. */
static unsigned char *stream_all(const struct snapshot_meta *m, const struct filter *f,
                                 struct pending *p, uint64_t now, size_t cap, size_t *len)
{
    struct walked w = { p, now };
    struct snapshot_stream *s = snapshot_stream_new(m, f, p ? walk_pending : NULL, &w);
    ck_assert_ptr_nonnull(s);
    uint64_t size = snapshot_stream_size(s);
    unsigned char *buf = malloc((size_t)size + 1);
    ck_assert_ptr_nonnull(buf);
    size_t at = 0, n;
    while ((n = snapshot_stream_read(s, buf + at, cap)) > 0) {
        ck_assert_uint_le(n, cap);
        at += n;
        ck_assert_uint_le(at, size);
    }
    ck_assert_uint_eq(at, size);
    ck_assert_uint_eq(snapshot_stream_read(s, buf, cap), 0);
    snapshot_stream_free(s);
    *len = at;
    return buf;
}

/*
 * A small snapshot (three layers of 1, 3 and 10 blocks, four metadata
 * pairs, three journal entries): cheap to mangle.
 */
static unsigned char *small_snapshot(size_t *len)
{
    char k[64];
    struct filter *f = filter_new(10, 0.01, NULL);
    struct pending *p = pending_new(100, 1 << 20, 3600);
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(p);
    add_keys(f, "small", 0, 160);
    struct filter_info fi;
    filter_info(f, &fi);
    ck_assert_uint_eq(fi.layers, 3);
    for (uint64_t i = 0; i < 3; i++) {
        size_t n = key(k, sizeof k, "posted", i);
        ck_assert_int_eq(pending_add(p, k, n, filter_hash(k, n), 50), PENDING_OK);
    }
    unsigned char *buf = stream_all(&META, f, p, 60, 1 << 16, len);
    pending_free(p);
    filter_free(f);
    return buf;
}

/*
 * The tests that mangle a small snapshot: its bytes, their length, and what
 * the last read of them gave (the result and its reason).  small_setup (a
 * checked fixture, or called by a test) builds it, small_teardown frees it.
 */
static struct {
    unsigned char *buf;
    size_t len;
    struct snapshot s;
    char why[SNAPSHOT_WHY_LEN];
} sm;

static void small_setup(void)
{
    memset(&sm, 0, sizeof sm);
    sm.buf = small_snapshot(&sm.len);
}

static void small_teardown(void)
{
    free(sm.buf);
}

/* n bytes at b (the small snapshot, a changed copy or part of one) read against e into sm. */
static enum snapshot_status read_mem(const unsigned char *b, size_t n,
                                     const struct snapshot_expect *e)
{
    return snapshot_read_mem(b, n, e, &sm.s, sm.why, sizeof sm.why);
}

/* Rewrite the header checksum after a test changed a header field. */
static void reseal_header(unsigned char *buf)
{
    uint32_t hl;
    memcpy(&hl, buf + 12, 4);
    hl = le32toh(hl);
    uint64_t h = htole64(XXH64(buf, hl - 8, 0));
    memcpy(buf + hl - 8, &h, 8);
}

static void put_le64(unsigned char *p, uint64_t v)
{
    v = htole64(v);
    memcpy(p, &v, 8);
}

static void put_le32(unsigned char *p, uint32_t v)
{
    v = htole32(v);
    memcpy(p, &v, 4);
}

static void put_le16(unsigned char *p, uint16_t v)
{
    v = htole16(v);
    memcpy(p, &v, 2);
}

static uint16_t le16_at(const unsigned char *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return le16toh(v);
}

static uint32_t le32_at(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return le32toh(v);
}

/* Where a version 2 header's layer table begins: after the strings. */
static size_t layers_at(const unsigned char *buf)
{
    size_t at = SNAPSHOT_FIXED_LEN;
    for (int i = 0; i < 4; i++)
        at += le16_at(buf + 104 + 2 * i);
    return at;
}

/* And its metadata section: after the layers. */
static size_t kv_at(const unsigned char *buf)
{
    return layers_at(buf) + SNAPSHOT_LAYER_LEN * le16_at(buf + 68);
}

/* Both checksums made right again after a test changed bytes under them. */
static void reseal(unsigned char *buf, size_t len)
{
    reseal_header(buf);
    put_le64(buf + len - 8, XXH64(buf, len - 8, 0));
}

/*
 * A version 1 snapshot of a one-layer filter, byte for byte as bloomguard
 * wrote them before layers (the layout is in snapshot.h), with one journal
 * entry ("v1-posted", 77 seconds left).
 */
static unsigned char *v1_snapshot(const struct snapshot_meta *m, const struct filter *f,
                                  size_t *len)
{
    struct filter_params fp;
    filter_export(f, &fp);
    ck_assert_uint_eq(fp.layers, 1);
    const char *str[4] = { m->name, m->table, m->column, m->position };
    size_t strings = 0;
    for (int i = 0; i < 4; i++)
        strings += strlen(str[i]);
    const char *id = "v1-posted";
    size_t hl = SNAPSHOT_FIXED_LEN + strings + 8, flen = fp.layer[0].blocks * FILTER_BLOCK_BYTES;
    size_t jlen = 12 + strlen(id), total = hl + flen + jlen + 8;
    unsigned char *b = calloc(1, total);
    ck_assert_ptr_nonnull(b);
    memcpy(b, SNAPSHOT_MAGIC, 8);
    put_le32(b + 8, 1);
    put_le32(b + 12, (uint32_t)hl);
    put_le64(b + 16, total);
    put_le64(b + 24, m->horizon_ms);
    put_le64(b + 32, m->created);
    put_le64(b + 40, fp.layer[0].capacity);
    memcpy(b + 48, &fp.target_fpp, 8);        /* binary64, little-endian here */
    put_le64(b + 56, fp.layer[0].blocks);
    put_le32(b + 64, fp.layer[0].probes);
    put_le64(b + 72, fp.layer[0].items);
    put_le64(b + 80, flen);
    put_le64(b + 88, 1);
    put_le64(b + 96, jlen);
    size_t at = SNAPSHOT_FIXED_LEN;
    for (int i = 0; i < 4; i++) {
        put_le16(b + 104 + 2 * i, (uint16_t)strlen(str[i]));
        memcpy(b + at, str[i], strlen(str[i]));
        at += strlen(str[i]);
    }
    put_le64(b + at, XXH64(b, at, 0));
    ck_assert(filter_bits_read(f, 0, 0, b + hl, flen));
    put_le64(b + hl + flen, 77);
    put_le32(b + hl + flen + 8, (uint32_t)strlen(id));
    memcpy(b + hl + flen + 12, id, strlen(id));
    put_le64(b + total - 8, XXH64(b, total - 8, 0));
    *len = total;
    return b;
}

/*
 * Every proper prefix of the snapshot buf[0..len) is truncated, each read
 * from an exact-size copy so that ASan catches a read past it.
 */
static void assert_prefixes_truncated(const unsigned char *buf, size_t len)
{
    struct snapshot s;
    char why[SNAPSHOT_WHY_LEN];
    for (size_t cut = 0; cut < len; cut++) {
        unsigned char *pre = malloc(cut ? cut : 1);
        memcpy(pre, buf, cut);
        enum snapshot_status st = snapshot_read_mem(pre, cut, &EXPECT, &s, why, sizeof why);
        ck_assert_msg(st == SNAPSHOT_TRUNCATED, "prefix of %zu/%zu bytes: %s (%s)", cut, len,
                      snapshot_strstatus(st), why);
        ck_assert_ptr_null(s.filter);
        free(pre);
    }
}

/* --------------------------------------------------------------- filter -- */

/* The length of the piece at offset at of size bytes cut in odd pieces of 1 .. most bytes. */
static size_t piece(uint64_t at, uint64_t size, unsigned most)
{
    uint64_t n = at % most + 1;
    return (size_t)(n < size - at ? n : size - at);
}

START_TEST(test_filter_image)
{
    char k[64];
    const struct filter_growth one_layer = { 2.0, 0.5, 1 };
    struct filter *f = filter_new_growing(1000, 0.01, &one_layer, NULL);
    ck_assert_ptr_nonnull(f);
    add_keys(f, "img", 0, 1000);
    struct filter_params fp;
    filter_export(f, &fp);
    struct filter_info fi;
    filter_info(f, &fi);
    ck_assert_uint_eq(fp.layers, 1);
    ck_assert_uint_eq(fp.layer[0].blocks * FILTER_BLOCK_BITS, fi.bits);
    ck_assert_uint_eq(fp.layer[0].items, fi.items);
    ck_assert_uint_eq(fp.layer[0].capacity, 1000);
    uint64_t size = fp.layer[0].blocks * FILTER_BLOCK_BYTES;

    /* Chunks of odd sizes at odd offsets read the same image as one read. */
    unsigned char *whole = malloc(size), *parts = malloc(size);
    ck_assert(filter_bits_read(f, 0, 0, whole, size));
    for (uint64_t at = 0; at < size; at += piece(at, size, 13))
        ck_assert(filter_bits_read(f, 0, at, parts + at, piece(at, size, 13)));
    ck_assert_mem_eq(whole, parts, size);
    ck_assert(!filter_bits_read(f, 0, size - 3, parts, 4));
    ck_assert(!filter_bits_read(f, 0, UINT64_MAX - 1, parts, 4));
    ck_assert(filter_bits_read(f, 0, size, parts, 0));
    ck_assert(!filter_bits_read(f, 1, 0, parts, 1));        /* no such layer */

    /* Written back in odd pieces: the same filter, the same figures. */
    enum filter_error e = FILTER_ENOMEM;
    struct filter *g = filter_new_from(&fp, &e);
    ck_assert_ptr_nonnull(g);
    ck_assert_int_eq(e, FILTER_OK);
    for (uint64_t at = 0; at < size; at += piece(at, size, 7))
        ck_assert(filter_bits_write(g, 0, at, whole + at, piece(at, size, 7)));
    ck_assert(!filter_bits_write(g, 0, size, whole, 1));
    ck_assert(!filter_bits_write(g, 1, 0, whole, 1));
    struct filter_info gi;
    filter_info(g, &gi);
    ck_assert_uint_eq(gi.bits_set, fi.bits_set);
    ck_assert_uint_eq(gi.items, fi.items);
    ck_assert_uint_eq(gi.probes, fi.probes);
    ck_assert(filter_bits_read(g, 0, 0, parts, size));
    ck_assert_mem_eq(whole, parts, size);
    for (uint64_t i = 0; i < 5000; i++) {
        size_t n = key(k, sizeof k, i < 1000 ? "img" : "other", i);
        ck_assert_int_eq(filter_contains(g, k, n), filter_contains(f, k, n));
    }
    /* Writing the same image again sets nothing new. */
    ck_assert(filter_bits_write(g, 0, 0, whole, size));
    filter_info(g, &gi);
    ck_assert_uint_eq(gi.bits_set, fi.bits_set);
    free(whole);
    free(parts);
    filter_free(g);
    filter_free(f);
}
END_TEST

START_TEST(test_filter_new_from_checks_geometry)
{
    struct filter_plan plan;
    ck_assert_int_eq(filter_plan(5000, 0.01, &plan), FILTER_OK);
    struct filter_params ok = {
        .target_fpp = plan.target_fpp, .growth = FILTER_GROWTH_DEFAULT, .layers = 1,
        .layer = { { .capacity = plan.capacity, .target_fpp = plan.target_fpp,
                     .blocks = plan.blocks, .probes = plan.probes, .items = 7 } },
    };
    enum filter_error e;
    struct filter *f = filter_new_from(&ok, &e);
    ck_assert_ptr_nonnull(f);
    struct filter_info fi;
    filter_info(f, &fi);
    ck_assert_uint_eq(fi.items, 7);
    ck_assert_uint_eq(fi.bits, plan.bits);
    filter_free(f);

    struct filter_params bad = ok;
    bad.layer[0].blocks++;
    check_refused_params(&bad, FILTER_EGEOMETRY, "layer[0].blocks++");
    bad = ok;
    bad.layer[0].probes++;
    check_refused_params(&bad, FILTER_EGEOMETRY, "layer[0].probes++");
    bad = ok;
    bad.layer[0].blocks = UINT64_MAX;
    check_refused_params(&bad, FILTER_EGEOMETRY, "layer[0].blocks = UINT64_MAX");
    bad = ok;
    bad.target_fpp = bad.layer[0].target_fpp = 0.7;
    check_refused_params(&bad, FILTER_EINVAL_FPP, "target_fpp = bad.layer[0].target_fpp = 0.7");
    bad = ok;
    bad.layer[0].capacity = FILTER_MAX_ITEMS + 1;
    check_refused_params(&bad, FILTER_ETOO_LARGE, "layer[0].capacity = FILTER_MAX_ITEMS + 1");
    /* The fuzzer's find: a count that the journal's replay would wrap round. */
    bad = ok;
    bad.layer[0].items = UINT64_MAX;
    check_refused_params(&bad, FILTER_ETOO_LARGE, "layer[0].items = UINT64_MAX");
    bad.layer[0].items = FILTER_MAX_ITEMS;
    f = filter_new_from(&bad, &e);
    ck_assert_ptr_nonnull(f);
    filter_free(f);
    ck_assert_str_eq(filter_strerror(FILTER_EGEOMETRY),
                     "filter geometry is not the one sized for its capacity and false-positive rate");
}
END_TEST

/* -------------------------------------------------------------- journal -- */

struct collected {
    uint64_t n, bytes, seen;
    char ids[8][32];
    uint64_t ttl[8];
};

static bool collect_count(void *ctx, uint64_t n, uint64_t bytes)
{
    struct collected *c = ctx;
    c->n = n;
    c->bytes = bytes;
    return true;
}

static bool collect_each(void *ctx, const char *id, size_t len, uint64_t ttl_left)
{
    struct collected *c = ctx;
    ck_assert_uint_lt(c->seen, 8);
    ck_assert_uint_lt(len, 32);
    memcpy(c->ids[c->seen], id, len);
    c->ids[c->seen][len] = '\0';
    c->ttl[c->seen++] = ttl_left;
    return true;
}

START_TEST(test_pending_export_restore)
{
    struct pending *p = pending_new(100, 1000, 100);
    ck_assert_int_eq(pending_add(p, "a", 1, filter_hash("a", 1), 10), PENDING_OK);   /* until 110 */
    ck_assert_int_eq(pending_add(p, "bb", 2, filter_hash("bb", 2), 50), PENDING_OK); /* until 150 */
    struct collected c = { 0 };
    ck_assert(pending_export(p, 60, collect_count, collect_each, &c));
    ck_assert_uint_eq(c.n, 2);
    ck_assert_uint_eq(c.bytes, 3);
    ck_assert_uint_eq(c.seen, 2);
    for (int i = 0; i < 2; i++)
        ck_assert_uint_eq(c.ttl[i], strcmp(c.ids[i], "a") == 0 ? 50 : 90);
    /* An entry whose time is up is not exported. */
    memset(&c, 0, sizeof c);
    ck_assert(pending_export(p, 110, collect_count, collect_each, &c));
    ck_assert_uint_eq(c.n, 1);
    ck_assert_str_eq(c.ids[0], "bb");
    ck_assert_uint_eq(c.ttl[0], 40);

    /* Restored on another clock: the seconds left, capped by this journal's ttl. */
    struct pending *q = pending_new(100, 1000, 30);
    ck_assert_int_eq(pending_restore(q, "a", 1, filter_hash("a", 1), 20, 1000), PENDING_OK);
    ck_assert_int_eq(pending_restore(q, "bb", 2, filter_hash("bb", 2), 500, 1000), PENDING_OK);
    /* Again with less time left: the later expiry stays. */
    ck_assert_int_eq(pending_restore(q, "a", 1, filter_hash("a", 1), 5, 1000), PENDING_OK);
    struct pending_info pi;
    pending_info(q, &pi);
    ck_assert_uint_eq(pi.count, 2);
    ck_assert_uint_eq(pi.bytes, 3);
    pending_expire(q, 1019);
    pending_info(q, &pi);
    ck_assert_uint_eq(pi.count, 2);
    pending_expire(q, 1020);
    pending_info(q, &pi);
    ck_assert_uint_eq(pi.count, 1);
    pending_expire(q, 1030);        /* 500 s were capped to 30 */
    pending_info(q, &pi);
    ck_assert_uint_eq(pi.count, 0);
    /* Restored entries were acknowledged once: kept past the limits, new ones refused. */
    struct pending *tiny = pending_new(1, 1000, 30);
    ck_assert_int_eq(pending_restore(tiny, "a", 1, filter_hash("a", 1), 20, 0), PENDING_OK);
    ck_assert_int_eq(pending_restore(tiny, "c", 1, filter_hash("c", 1), 20, 0), PENDING_OK);
    ck_assert_int_eq(pending_add(tiny, "d", 1, filter_hash("d", 1), 0), PENDING_FULL_COUNT);
    pending_free(tiny);
    pending_free(q);
    pending_free(p);
}
END_TEST

/* -------------------------------------------------------- the scratch -- */

/*
 * The "files" case's tests write into a directory of their own: setup makes
 * it (each test runs in its own process) and teardown removes it, whatever
 * the test left there.  spath is the snapshot's path in it.
 */
static char *sdir, *spath;

static void scratch_setup(void)
{
    sdir = check_tmpdir("check_snapshot");
    spath = check_join(sdir, "users.snap");
}

static void scratch_teardown(void)
{
    check_scratch_free(sdir, spath);
    sdir = spath = NULL;
}

/* ------------------------------------------------------------ round trip -- */

START_TEST(test_round_trip)
{
    char k[64];
    struct filter *f = filter_new(5000, 0.01, NULL);
    struct pending *p = pending_new(1000, 1 << 20, 3600);
    add_keys(f, "in", 0, 3000);
    /* Five POSTed ids, as api.c does it: journal, then filter. */
    for (uint64_t i = 0; i < 5; i++) {
        size_t n = key(k, sizeof k, "posted", i);
        ck_assert_int_eq(pending_add(p, k, n, filter_hash(k, n), 100), PENDING_OK);
        filter_add(f, k, n);
    }
    /* A sixth whose filter_add had not happened yet when the snapshot began. */
    ck_assert_int_eq(pending_add(p, "late", 4, filter_hash("late", 4), 100), PENDING_OK);
    ck_assert(!filter_contains(f, "late", 4));

    struct walked journal = { p, 1100 };
    ck_assert_int_eq(snapshot_write(spath, &META, f, walk_pending, &journal), 0);
    ck_assert_int_eq(files_in(sdir), 1);        /* no temporary file left */
    struct stat sb;
    ck_assert_int_eq(stat(spath, &sb), 0);
    ck_assert_uint_eq(sb.st_mode & 0777, 0600);

    struct snapshot s;
    char why[SNAPSHOT_WHY_LEN] = "";
    ck_assert_int_eq(snapshot_read(spath, &EXPECT, &s, why, sizeof why), SNAPSHOT_OK);
    ck_assert_ptr_nonnull(s.filter);
    ck_assert_str_eq(s.position, META.position);
    ck_assert_uint_eq(s.horizon_ms, META.horizon_ms);
    ck_assert_uint_eq(s.created, META.created);
    ck_assert_str_eq(s.name, "users");
    ck_assert_str_eq(s.table, "public.users");
    ck_assert_str_eq(s.column, "id");
    ck_assert_uint_eq(s.journal_count, 6);
    struct filter_params fp;
    filter_export(f, &fp);
    ck_assert_uint_eq(s.version, SNAPSHOT_VERSION);
    ck_assert_uint_eq(s.params.layers, 1);
    ck_assert_uint_eq(s.params.layer[0].capacity, fp.layer[0].capacity);
    ck_assert_uint_eq(s.params.layer[0].blocks, fp.layer[0].blocks);
    ck_assert_uint_eq(s.params.layer[0].probes, fp.layer[0].probes);
    ck_assert_uint_eq(s.params.layer[0].items, fp.layer[0].items);
    ck_assert(s.params.target_fpp == 0.01);
    ck_assert_uint_eq(s.n_kv, META.n_kv);
    ck_assert_str_eq(snapshot_kv_get(&s, "table_oid"), "16384");

    /* Lookups identical for present and absent keys. */
    for (uint64_t i = 0; i < 3000; i++) {
        size_t n = key(k, sizeof k, "in", i);
        ck_assert(filter_contains(s.filter, k, n));
    }
    uint64_t differ = 0, fp_count = 0;
    for (uint64_t i = 0; i < 20000; i++) {
        size_t n = key(k, sizeof k, "out", i);
        differ += filter_contains(s.filter, k, n) != filter_contains(f, k, n);
        fp_count += filter_contains(s.filter, k, n);
    }
    ck_assert_uint_eq(differ, 0);
    ck_assert_uint_lt(fp_count, 20000 / 50);
    /* The journal is replayed into the filter read back: "late" is in it. */
    ck_assert(filter_contains(s.filter, "late", 4));

    /* Journal entries survive, with the seconds they had left. */
    struct pending *q = pending_new(1000, 1 << 20, 3600);
    ck_assert_int_eq(restore_journal(&s, q, 7), PENDING_OK);
    struct pending_info pi;
    pending_info(q, &pi);
    ck_assert_uint_eq(pi.count, 6);
    ck_assert_uint_eq(pi.bytes, 5 * strlen("posted-0") + 4);
    pending_expire(q, 7 + 2599);               /* 3600 - (1100 - 100) = 2600 s left */
    pending_info(q, &pi);
    ck_assert_uint_eq(pi.count, 6);
    pending_seen(q, "late", 4, filter_hash("late", 4));
    for (uint64_t i = 0; i < 5; i++) {
        size_t n = key(k, sizeof k, "posted", i);
        pending_seen(q, k, n, filter_hash(k, n));
    }
    pending_info(q, &pi);
    ck_assert_uint_eq(pi.count, 0);            /* each one was there, under its own id */
    pending_free(q);
    snapshot_release(&s);
    ck_assert_ptr_null(s.filter);
    snapshot_release(&s);                      /* twice is harmless */

    /* The pull stream, read 7 bytes at a time, gives the file's bytes. */
    size_t flen, slen;
    unsigned char *file = slurp(spath, &flen);
    unsigned char *strm = stream_all(&META, f, p, 1100, 7, &slen);
    ck_assert_uint_eq(flen, slen);
    ck_assert_mem_eq(file, strm, flen);
    ck_assert_int_eq(snapshot_read_mem(strm, slen, &EXPECT, &s, NULL, 0), SNAPSHOT_OK);
    ck_assert(filter_contains(s.filter, "in-42", 5));
    snapshot_release(&s);

    /* From a descriptor (as from a socket): exactly size bytes. */
    int pfd[2];
    ck_assert_int_eq(pipe(pfd), 0);
    pid_t child = fork();
    if (child == 0) {
        close(pfd[0]);
        ssize_t w = write(pfd[1], file, flen);
        _exit(w == (ssize_t)flen ? 0 : 1);
    }
    close(pfd[1]);
    ck_assert_int_eq(snapshot_read_fd(pfd[0], flen, &EXPECT, &s, NULL, 0), SNAPSHOT_OK);
    ck_assert(filter_contains(s.filter, "in-7", 4));
    snapshot_release(&s);
    close(pfd[0]);
    free(file);
    free(strm);

    /* No journal at all; an expectation of NULL accepts any snapshot. */
    ck_assert_int_eq(snapshot_write(spath, &(struct snapshot_meta){ 0 }, f, NULL, NULL), 0);
    ck_assert_int_eq(snapshot_read(spath, NULL, &s, NULL, 0), SNAPSHOT_OK);
    ck_assert_uint_eq(s.journal_count, 0);
    ck_assert_str_eq(s.table, "");
    ck_assert_ptr_nonnull(s.position);
    ck_assert_str_eq(s.position, "");
    ck_assert_uint_eq(s.horizon_ms, 0);
    snapshot_release(&s);
    ck_assert_ptr_null(s.position);

    /* A position of the longest length, and "" for none, round-trip too. */
    char longest[SNAPSHOT_MAX_POSITION + 1];
    memset(longest, '7', SNAPSHOT_MAX_POSITION);
    longest[SNAPSHOT_MAX_POSITION] = '\0';
    struct snapshot_meta m = META;
    m.position = longest;
    ck_assert_int_eq(snapshot_write(spath, &m, f, NULL, NULL), 0);
    ck_assert_int_eq(snapshot_read(spath, &EXPECT, &s, NULL, 0), SNAPSHOT_OK);
    ck_assert_str_eq(s.position, longest);
    snapshot_release(&s);
    m.position = "";
    ck_assert_int_eq(snapshot_write(spath, &m, f, NULL, NULL), 0);
    ck_assert_int_eq(snapshot_read(spath, &EXPECT, &s, NULL, 0), SNAPSHOT_OK);
    ck_assert_str_eq(s.position, "");
    ck_assert_uint_eq(s.horizon_ms, META.horizon_ms);
    snapshot_release(&s);

    pending_free(p);
    filter_free(f);
}
END_TEST

/* -------------------------------------------------------------- refusals -- */

START_TEST(test_missing_and_not_a_snapshot)
{
    struct snapshot s;
    char why[SNAPSHOT_WHY_LEN];
    ck_assert_int_eq(snapshot_read(spath, &EXPECT, &s, why, sizeof why), SNAPSHOT_MISSING);
    ck_assert_ptr_nonnull(strstr(why, "no such file"));
    spit(spath, "[snapshot]\npath = x\n", 20);
    ck_assert_int_eq(snapshot_read(spath, &EXPECT, &s, why, sizeof why), SNAPSHOT_BAD_MAGIC);
    ck_assert_str_eq(snapshot_strstatus(SNAPSHOT_BAD_MAGIC), "not a snapshot");
    spit(spath, "BG", 2);                       /* a prefix of the magic: cut short */
    ck_assert_int_eq(snapshot_read(spath, &EXPECT, &s, why, sizeof why), SNAPSHOT_TRUNCATED);
    ck_assert_int_eq(snapshot_read(sdir, &EXPECT, &s, why, sizeof why), SNAPSHOT_IO);
    ck_assert_ptr_null(s.filter);
}
END_TEST

START_TEST(test_truncated_every_prefix)
{
    small_setup();
    ck_assert_int_eq(snapshot_read_mem(sm.buf, sm.len, &EXPECT, &sm.s, NULL, 0), SNAPSHOT_OK);
    snapshot_release(&sm.s);
    assert_prefixes_truncated(sm.buf, sm.len);
    for (size_t cut = 0; cut < sm.len; cut++) {
        spit(spath, sm.buf, cut);
        enum snapshot_status st = snapshot_read(spath, &EXPECT, &sm.s, sm.why, sizeof sm.why);
        ck_assert_msg(st == SNAPSHOT_TRUNCATED, "file of %zu/%zu bytes: %s (%s)", cut, sm.len,
                      snapshot_strstatus(st), sm.why);
    }
    /* One byte too many is not a snapshot this header describes either. */
    unsigned char *more = malloc(sm.len + 1);
    memcpy(more, sm.buf, sm.len);
    more[sm.len] = 0;
    ck_assert_int_eq(read_mem(more, sm.len + 1, &EXPECT), SNAPSHOT_CORRUPT);
    ck_assert_ptr_nonnull(strstr(sm.why, "1 bytes after the end"));
    free(more);
    small_teardown();
}
END_TEST

START_TEST(test_every_flipped_byte)
{
    uint32_t header_len;
    memcpy(&header_len, sm.buf + 12, 4);
    header_len = le32toh(header_len);
    int counts[SNAPSHOT_NOMEM + 1] = { 0 };
    for (size_t i = 0; i < sm.len; i++) {
        /*
         * The lowest and the highest bit of each header byte; one bit of the
         * bulk, each of whose flips costs a filter_plan (~20 ms).
         */
        for (int bit = 0; bit < (i < header_len ? 8 : 1); bit += 7) {
            sm.buf[i] ^= (unsigned char)(1u << bit);
            enum snapshot_status st = read_mem(sm.buf, sm.len, &EXPECT);
            sm.buf[i] ^= (unsigned char)(1u << bit);
            ck_assert_msg(st != SNAPSHOT_OK, "byte %zu bit %d flipped: accepted", i, bit);
            ck_assert_ptr_null(sm.s.filter);
            /* Which check catches it depends only on where the byte is. */
            if (i < 8)
                ck_assert_int_eq(st, SNAPSHOT_BAD_MAGIC);
            else if (i < 12)
                ck_assert_int_eq(st, SNAPSHOT_OTHER_VERSION);
            else if ((i >= 12 && i < 16) || (i >= 68 && i < 70) || (i >= 72 && i < 76)
                     || (i >= 104 && i < 112))      /* header, string, layer and kv lengths */
                ck_assert_msg(st == SNAPSHOT_CORRUPT || st == SNAPSHOT_TRUNCATED,
                              "byte %zu: %s", i, snapshot_strstatus(st));
            else if (i >= 70 && i < 72)             /* kv_count: only its bound is checked early */
                ck_assert_msg(st == SNAPSHOT_CORRUPT || st == SNAPSHOT_BAD_CHECKSUM,
                              "byte %zu: %s", i, snapshot_strstatus(st));
            else
                ck_assert_msg(st == SNAPSHOT_BAD_CHECKSUM, "byte %zu: %s (%s)", i,
                              snapshot_strstatus(st), sm.why);
            counts[st]++;
        }
    }
    ck_assert_int_gt(counts[SNAPSHOT_BAD_CHECKSUM], (int)sm.len);
    ck_assert_int_eq(snapshot_read_mem(sm.buf, sm.len, &EXPECT, &sm.s, NULL, 0), SNAPSHOT_OK);
    snapshot_release(&sm.s);
}
END_TEST

START_TEST(test_other_identity_and_params)
{
    struct snapshot_expect e = EXPECT;
    e.table = "public.accounts";
    ck_assert_int_eq(read_mem(sm.buf, sm.len, &e), SNAPSHOT_OTHER_TABLE);
    ck_assert_str_eq(sm.why, "snapshot of table \"public.users\", not \"public.accounts\"");
    e = EXPECT;
    e.column = "email";
    ck_assert_int_eq(read_mem(sm.buf, sm.len, &e), SNAPSHOT_OTHER_COLUMN);
    ck_assert_str_eq(sm.why, "snapshot of column \"id\", not \"email\"");
    e = EXPECT;
    e.name = "users2";
    ck_assert_int_eq(read_mem(sm.buf, sm.len, &e), SNAPSHOT_OTHER_NAME);
    ck_assert_str_eq(sm.why, "snapshot of filter \"users\", not \"users2\"");
    e = EXPECT;
    e.column = "";                             /* empty is a value, not "any" */
    ck_assert_int_eq(read_mem(sm.buf, sm.len, &e), SNAPSHOT_OTHER_COLUMN);
    e = EXPECT;
    e.target_fpp = 0.001;
    ck_assert_int_eq(read_mem(sm.buf, sm.len, &e), SNAPSHOT_OTHER_PARAMS);
    ck_assert_ptr_nonnull(strstr(sm.why, "false_positive_rate 0.01, not 0.001"));
    ck_assert_str_eq(snapshot_strstatus(SNAPSHOT_OTHER_TABLE), "other table");
    /* A name from the file is shown fit for a log line. */
    {
        struct filter *f = filter_new(10, 0.01, NULL);
        struct snapshot_meta m = META;
        m.table = "evil\n\"t\\";
        size_t elen;
        unsigned char *evil = stream_all(&m, f, NULL, 0, 4096, &elen);
        ck_assert_int_eq(read_mem(evil, elen, &EXPECT), SNAPSHOT_OTHER_TABLE);
        ck_assert_str_eq(sm.why, "snapshot of table \"evil??t?\", not \"public.users\"");
        free(evil);
        filter_free(f);
    }
    /* The capacity is not part of the expectation: any NULL/0 field accepts. */
    e = (struct snapshot_expect){ .table = "public.users" };
    ck_assert_int_eq(read_mem(sm.buf, sm.len, &e), SNAPSHOT_OK);
    snapshot_release(&sm.s);

    /* A geometry this build would not choose, under a good header checksum. */
    unsigned char *mod = malloc(sm.len);
    size_t lay = layers_at(sm.buf);
    for (unsigned l = 0; l < 3; l++) {
        memcpy(mod, sm.buf, sm.len);
        mod[lay + l * SNAPSHOT_LAYER_LEN + 40] ^= 1;      /* layer l's probes */
        reseal_header(mod);
        ck_assert_int_eq(read_mem(mod, sm.len, &EXPECT), SNAPSHOT_OTHER_PARAMS);
        ck_assert_ptr_nonnull(strstr(sm.why, "filter geometry"));
    }
    /* A share above the rate: not a filter this build makes. */
    memcpy(mod, sm.buf, sm.len);
    double share = 0.02;
    memcpy(mod + lay + SNAPSHOT_LAYER_LEN + 16, &share, 8);
    reseal_header(mod);
    ck_assert_int_eq(read_mem(mod, sm.len, &EXPECT), SNAPSHOT_OTHER_PARAMS);
    ck_assert_ptr_nonnull(strstr(sm.why, "3 layer(s)"));
    /* Growth parameters out of bounds. */
    memcpy(mod, sm.buf, sm.len);
    put_le32(mod + 64, 0);                     /* max_layers */
    reseal_header(mod);
    ck_assert_int_eq(read_mem(mod, sm.len, &EXPECT), SNAPSHOT_OTHER_PARAMS);
    ck_assert_ptr_nonnull(strstr(sm.why, "growth"));
    /* Lengths that disagree, under a good header checksum. */
    memcpy(mod, sm.buf, sm.len);
    put_le64(mod + 96, 1000);                  /* journal_len */
    reseal_header(mod);
    ck_assert_int_eq(read_mem(mod, sm.len, &EXPECT), SNAPSHOT_CORRUPT);
    /* A blocked image's kind is the 0 that builds before the field require of it. */
    ck_assert_uint_eq(le32_at(sm.buf + 76), 0);
    /* A kind this build does not know: refused, never read as blocked. */
    memcpy(mod, sm.buf, sm.len);
    put_le32(mod + 76, 200);
    reseal_header(mod);
    ck_assert_int_eq(read_mem(mod, sm.len, &EXPECT), SNAPSHOT_OTHER_KIND);
    ck_assert_str_eq(sm.why, "a filter of kind 200, which this build does not know (written by a "
                     "newer bloomguard?)");
    ck_assert_ptr_null(sm.s.filter);
    /* A kind it knows that is not the expected one. */
    e = EXPECT;
    e.kind = "counting";
    ck_assert_int_eq(read_mem(sm.buf, sm.len, &e), SNAPSHOT_OTHER_KIND);
    ck_assert_str_eq(sm.why, "snapshot of a blocked filter, not counting");
    /* A layer's reserved field set. */
    memcpy(mod, sm.buf, sm.len);
    mod[lay + 2 * SNAPSHOT_LAYER_LEN + 44] = 1;
    reseal_header(mod);
    ck_assert_int_eq(read_mem(mod, sm.len, &EXPECT), SNAPSHOT_CORRUPT);
    /* A layer's blocks that the filter section does not hold. */
    memcpy(mod, sm.buf, sm.len);
    put_le64(mod + lay + SNAPSHOT_LAYER_LEN + 24, 2);
    reseal_header(mod);
    ck_assert_int_eq(read_mem(mod, sm.len, &EXPECT), SNAPSHOT_CORRUPT);
    ck_assert_str_eq(sm.why, "the header's lengths disagree");
    /* A NUL byte inside the position, under good checksums. */
    memcpy(mod, sm.buf, sm.len);
    {
        size_t pos_at = SNAPSHOT_FIXED_LEN + strlen(META.name) + strlen(META.table)
                        + strlen(META.column);
        ck_assert_mem_eq(mod + pos_at, META.position, strlen(META.position));
        mod[pos_at + 3] = '\0';
        reseal_header(mod);
        put_le64(mod + sm.len - 8, XXH64(mod, sm.len - 8, 0));
    }
    ck_assert_int_eq(read_mem(mod, sm.len, &EXPECT), SNAPSHOT_CORRUPT);
    ck_assert_str_eq(sm.why, "a NUL byte in the change-feed position");
    ck_assert_ptr_null(sm.s.position);
    /* A header check (step 4): before the input's size is compared. */
    ck_assert_int_eq(read_mem(mod, sm.len - 1, &EXPECT), SNAPSHOT_CORRUPT);
    ck_assert_str_eq(sm.why, "a NUL byte in the change-feed position");
    /* A journal whose entries overrun it, under good checksums. */
    memcpy(mod, sm.buf, sm.len);
    {
        uint32_t hl;
        memcpy(&hl, mod + 12, 4);
        uint64_t flen;
        memcpy(&flen, mod + 80, 8);
        size_t j = le32toh(hl) + (size_t)le64toh(flen);   /* the first entry */
        mod[j + 8] = 0xff;                                  /* id_len */
        put_le64(mod + sm.len - 8, XXH64(mod, sm.len - 8, 0));
    }
    ck_assert_int_eq(read_mem(mod, sm.len, &EXPECT), SNAPSHOT_CORRUPT);
    ck_assert_ptr_nonnull(strstr(sm.why, "journal"));
    free(mod);
}
END_TEST

/*
 * A snapshot whose position is plen bytes of 'p' (written as the maximum
 * and grown in place when plen exceeds it), with every length and both
 * checksums consistent: only the limit on position_len can refuse it.
 */
static unsigned char *snapshot_with_position(size_t plen, size_t *len)
{
    char longest[SNAPSHOT_MAX_POSITION + 1];
    memset(longest, 'p', SNAPSHOT_MAX_POSITION);
    longest[SNAPSHOT_MAX_POSITION] = '\0';
    struct snapshot_meta m = META;
    m.position = longest;
    struct filter *f = filter_new(10, 0.01, NULL);
    size_t blen;
    unsigned char *base = stream_all(&m, f, NULL, 0, 4096, &blen);
    filter_free(f);
    ck_assert_uint_ge(plen, SNAPSHOT_MAX_POSITION);
    size_t grow = plen - SNAPSHOT_MAX_POSITION;
    uint32_t hl;
    memcpy(&hl, base + 12, 4);
    hl = le32toh(hl);
    unsigned char *out = malloc(blen + grow);
    ck_assert_ptr_nonnull(out);
    /* The header up to the end of the position, grow more 'p's, then the rest. */
    size_t end = layers_at(base);
    memcpy(out, base, end);
    memset(out + end, 'p', grow);
    memcpy(out + end + grow, base + end, blen - end);
    free(base);
    *len = blen + grow;
    uint32_t nhl = htole32((uint32_t)(hl + grow));
    memcpy(out + 12, &nhl, 4);
    put_le64(out + 16, *len);
    uint16_t pl = htole16((uint16_t)plen);
    memcpy(out + 110, &pl, 2);
    reseal_header(out);
    put_le64(out + *len - 8, XXH64(out, *len - 8, 0));
    return out;
}

/* The writer refuses m: no stream, errno EINVAL; what and row name the case. */
static void refused(const struct snapshot_meta *m, struct filter *f, const char *what, size_t row)
{
    errno = 0;
    struct snapshot_stream *st = snapshot_stream_new(m, f, NULL, NULL);
    int e = errno;
    snapshot_stream_free(st);
    ck_assert_msg(st == NULL && e == EINVAL, "%s (row %zu): not refused (errno %d)", what, row, e);
}

START_TEST(test_position_limits)
{
    struct snapshot s;
    char why[SNAPSHOT_WHY_LEN];
    size_t len;
    /* The longest allowed, as snapshot_with_position builds it: accepted. */
    unsigned char *buf = snapshot_with_position(SNAPSHOT_MAX_POSITION, &len);
    ck_assert_int_eq(snapshot_read_mem(buf, len, &EXPECT, &s, why, sizeof why), SNAPSHOT_OK);
    ck_assert_uint_eq(strlen(s.position), SNAPSHOT_MAX_POSITION);
    snapshot_release(&s);
    free(buf);
    /* One byte longer, every length and checksum agreeing: corrupt. */
    buf = snapshot_with_position(SNAPSHOT_MAX_POSITION + 1, &len);
    ck_assert_int_eq(snapshot_read_mem(buf, len, &EXPECT, &s, why, sizeof why), SNAPSHOT_CORRUPT);
    ck_assert_str_eq(why, "the header's lengths disagree");
    ck_assert_ptr_null(s.position);
    ck_assert_ptr_null(s.filter);
    free(buf);
    /* The largest a 16-bit length says, and nothing behind it: corrupt, not truncated. */
    buf = snapshot_with_position(SNAPSHOT_MAX_POSITION, &len);
    buf[110] = buf[111] = 0xff;
    ck_assert_int_eq(snapshot_read_mem(buf, SNAPSHOT_FIXED_LEN, &EXPECT, &s, why, sizeof why),
                     SNAPSHOT_CORRUPT);
    free(buf);

    /* The writer refuses a position it could not store. */
    char toolong[SNAPSHOT_MAX_POSITION + 2];
    memset(toolong, '1', SNAPSHOT_MAX_POSITION + 1);
    toolong[SNAPSHOT_MAX_POSITION + 1] = '\0';
    struct snapshot_meta m = META;
    m.position = toolong;
    struct filter *f = filter_new(10, 0.01, NULL);
    refused(&m, f, "a position too long", 0);
    filter_free(f);
}
END_TEST

START_TEST(test_other_version)
{
    sm.buf[8] = SNAPSHOT_VERSION + 1;
    reseal(sm.buf, sm.len);
    ck_assert_int_eq(read_mem(sm.buf, sm.len, &EXPECT), SNAPSHOT_OTHER_VERSION);
    ck_assert_str_eq(sm.why, "format version 3, this build reads 1 to 2");
    /* Even one too short to hold a header. */
    ck_assert_int_eq(read_mem(sm.buf, 20, &EXPECT), SNAPSHOT_OTHER_VERSION);
    sm.buf[8] = 0;
    reseal(sm.buf, sm.len);
    ck_assert_int_eq(read_mem(sm.buf, sm.len, &EXPECT), SNAPSHOT_OTHER_VERSION);
}
END_TEST

/* ------------------------------------------------- layers and metadata -- */

/*
 * A grown filter (several layers) and metadata pairs, through a file and the
 * pull stream: every layer back bit for bit, the pairs in their order, and
 * the filter read back growing on as the original does.
 */
START_TEST(test_layers_and_kv_round_trip)
{
    char k[64];
    struct filter *f = filter_new(2000, 0.01, NULL);
    ck_assert_ptr_nonnull(f);
    add_keys(f, "in", 0, 30000);
    struct filter_params fp;
    filter_export(f, &fp);
    ck_assert_uint_ge(fp.layers, 4);
    ck_assert_int_eq(snapshot_write(spath, &META, f, NULL, NULL), 0);

    struct snapshot s;
    char why[SNAPSHOT_WHY_LEN] = "";
    ck_assert_msg(snapshot_read(spath, &EXPECT, &s, why, sizeof why) == SNAPSHOT_OK, "%s", why);
    ck_assert_uint_eq(s.version, 2);
    ck_assert_int_eq(s.params.kind, FILTER_KIND_BLOCKED);      /* the kind round-trips */
    ck_assert_int_eq(filter_kind(s.filter), FILTER_KIND_BLOCKED);
    ck_assert_uint_eq(s.params.layers, fp.layers);
    ck_assert_mem_eq(&s.params.growth, &fp.growth, sizeof fp.growth);
    for (unsigned i = 0; i < fp.layers; i++) {
        ck_assert_uint_eq(s.params.layer[i].capacity, fp.layer[i].capacity);
        ck_assert(s.params.layer[i].target_fpp == fp.layer[i].target_fpp);
        ck_assert(s.params.layer[i].share_fpp == fp.layer[i].share_fpp);
        ck_assert_uint_eq(s.params.layer[i].blocks, fp.layer[i].blocks);
        ck_assert_uint_eq(s.params.layer[i].probes, fp.layer[i].probes);
        ck_assert_uint_eq(s.params.layer[i].items, fp.layer[i].items);
    }
    check_same_layers(f, s.filter);
    /* The pairs: in order, found by key, unknown ones kept, "" a value. */
    ck_assert_uint_eq(s.n_kv, 4);
    for (size_t i = 0; i < 4; i++) {
        ck_assert_str_eq(s.kv[i].key, KV[i].key);
        ck_assert_str_eq(s.kv[i].value, KV[i].value);
    }
    ck_assert_str_eq(snapshot_kv_get(&s, "system_identifier"), "7301234567890123456");
    ck_assert_str_eq(snapshot_kv_get(&s, "empty"), "");
    ck_assert_ptr_null(snapshot_kv_get(&s, "timeline"));
    ck_assert_ptr_null(snapshot_kv_get(&s, "table_oi"));
    /* Both go on the same way: the same layers added at the same keys. */
    grow_alike(f, s.filter, 30000, 100000);
    snapshot_release(&s);
    ck_assert_ptr_null(s.kv);

    /* The stream in odd pieces is the file, and a layer added meanwhile is not in it. */
    size_t flen, slen;
    unsigned char *file = slurp(spath, &flen);
    struct snapshot_stream *st = snapshot_stream_new(&META, f, NULL, NULL);
    ck_assert_ptr_nonnull(st);
    filter_export(f, &fp);
    unsigned before = fp.layers;
    add_keys(f, "in", 100000, 400000);          /* grows while streaming */
    filter_export(f, &fp);
    ck_assert_uint_gt(fp.layers, before);
    uint64_t size = snapshot_stream_size(st);
    unsigned char *strm = malloc((size_t)size);
    slen = 0;
    size_t n;
    while ((n = snapshot_stream_read(st, strm + slen, 13)) > 0)
        slen += n;
    snapshot_stream_free(st);
    ck_assert_uint_eq(slen, size);
    ck_assert_int_eq(snapshot_read_mem(strm, slen, &EXPECT, &s, why, sizeof why), SNAPSHOT_OK);
    ck_assert_uint_eq(s.params.layers, before);
    for (uint64_t i = 0; i < 100000; i++)
        ck_assert(filter_contains(s.filter, k, key(k, sizeof k, "in", i)));
    snapshot_release(&s);
    ck_assert_uint_lt(flen, slen);             /* the same layers, fuller */
    free(file);
    free(strm);

    /* No metadata at all is a section of 0 bytes. */
    struct snapshot_meta m = META;
    m.kv = NULL;
    m.n_kv = 0;
    ck_assert_int_eq(snapshot_write(spath, &m, f, NULL, NULL), 0);
    ck_assert_int_eq(snapshot_read(spath, &EXPECT, &s, NULL, 0), SNAPSHOT_OK);
    ck_assert_uint_eq(s.n_kv, 0);
    ck_assert_ptr_null(snapshot_kv_get(&s, "table_oid"));
    snapshot_release(&s);
    filter_free(f);
}
END_TEST

/* The writer refuses metadata it could not store, or a reader would refuse. */
START_TEST(test_kv_writer_limits)
{
    struct filter *f = filter_new(10, 0.01, NULL);
    struct snapshot_meta m = META;
    struct snapshot_kv kv[SNAPSHOT_MAX_KV + 1];
    char keys[SNAPSHOT_MAX_KV + 1][8];
    for (unsigned i = 0; i <= SNAPSHOT_MAX_KV; i++) {
        snprintf(keys[i], sizeof keys[i], "k%u", i);
        kv[i] = (struct snapshot_kv){ keys[i], "v" };
    }
    static char long_key[SNAPSHOT_MAX_KV_KEY + 2], long_value[SNAPSHOT_MAX_KV_VALUE + 2];
    memset(long_key, 'k', SNAPSHOT_MAX_KV_KEY + 1);
    memset(long_value, 'v', SNAPSHOT_MAX_KV_VALUE + 1);
    /* The most pairs, the longest key and value: accepted. */
    m.kv = kv;
    m.n_kv = SNAPSHOT_MAX_KV;
    struct snapshot_stream *st = snapshot_stream_new(&m, f, NULL, NULL);
    ck_assert_ptr_nonnull(st);
    snapshot_stream_free(st);
    struct snapshot_kv edge[2] = { { long_key + 1, long_value + 1 }, { "b", "" } };
    m.kv = edge;
    m.n_kv = 2;
    st = snapshot_stream_new(&m, f, NULL, NULL);
    ck_assert_ptr_nonnull(st);
    snapshot_stream_free(st);
    /* One past each bound, an empty key, a key twice, a NULL: EINVAL. */
    const struct snapshot_kv bad[][2] = {
        { { long_key, "v" }, { "b", "" } },
        { { "a", long_value }, { "b", "" } },
        { { "", "v" }, { "b", "" } },
        { { "a", "v" }, { "a", "w" } },
        { { "a", NULL }, { "b", "" } },
        { { NULL, "v" }, { "b", "" } },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        m.kv = bad[i];
        m.n_kv = 2;
        refused(&m, f, "a bad pair", i);
    }
    m.kv = kv;
    m.n_kv = SNAPSHOT_MAX_KV + 1;
    refused(&m, f, "one pair too many", 0);
    m.kv = NULL;
    m.n_kv = 1;
    ck_assert_ptr_null(snapshot_stream_new(&m, f, NULL, NULL));
    /* Pairs within their bounds whose section would exceed its own. */
    struct snapshot_kv big[SNAPSHOT_MAX_KV];
    for (unsigned i = 0; i < SNAPSHOT_MAX_KV; i++)
        big[i] = (struct snapshot_kv){ keys[i], long_value + 1 };
    m.kv = big;
    m.n_kv = SNAPSHOT_MAX_KV;
    refused(&m, f, "pairs over the section's bound", 0);
    filter_free(f);
}
END_TEST

/* A metadata section that breaks a rule, under good checksums: corrupt. */
START_TEST(test_corrupt_kv_refused)
{
    unsigned char *mod = malloc(sm.len + 1);
    size_t kv = kv_at(sm.buf);
    /* The first pair is "table_oid" = "16384": key at kv + 4, value at kv + 13. */
    ck_assert_mem_eq(sm.buf + kv + 4, "table_oid16384", 14);
    struct {
        size_t at;
        unsigned char to;
    } change[] = {
        { kv, 0 },                  /* an empty key */
        { kv, 10 },                 /* key_len overruns into the value: the pairs end off */
        { kv + 2, 6 },              /* value_len likewise */
        { kv + 4 + 3, '\0' },       /* a NUL byte in a key */
        { kv + 13 + 2, '\0' },      /* a NUL byte in a value */
        { kv + 1, 1 },              /* key_len 265: past SNAPSHOT_MAX_KV_KEY */
        { 70, 3 },                  /* one pair fewer than the section holds */
        { 70, 5 },                  /* one more than it holds */
    };
    for (size_t c = 0; c < sizeof change / sizeof change[0]; c++) {
        memcpy(mod, sm.buf, sm.len);
        mod[change[c].at] = change[c].to;
        reseal(mod, sm.len);
        enum snapshot_status st = read_mem(mod, sm.len, &EXPECT);
        ck_assert_msg(st == SNAPSHOT_CORRUPT, "change %zu: %s (%s)", c, snapshot_strstatus(st), sm.why);
        ck_assert_str_eq(sm.why, "the metadata section does not parse");
        ck_assert_ptr_null(sm.s.kv);
        ck_assert_ptr_null(sm.s.filter);
    }
    /* A key twice: the second pair's key made the first'sm.s. */
    memcpy(mod, sm.buf, sm.len);
    size_t second = kv + 4 + 9 + 5;
    ck_assert_uint_eq(le16_at(mod + second), strlen("system_identifier"));
    put_le16(mod + second, 9);
    memcpy(mod + second + 4, "table_oid", 9);
    put_le16(mod + second + 2, (uint16_t)(strlen("system_identifier") - 9
                                          + strlen("7301234567890123456")));
    reseal(mod, sm.len);
    ck_assert_int_eq(read_mem(mod, sm.len, &EXPECT), SNAPSHOT_CORRUPT);
    ck_assert_str_eq(sm.why, "the metadata section does not parse");
    /* kv_len past its bound: refused before the checksum, whatever it says. */
    memcpy(mod, sm.buf, sm.len);
    put_le32(mod + 72, SNAPSHOT_MAX_KV_BYTES + 1);
    ck_assert_int_eq(read_mem(mod, sm.len, &EXPECT), SNAPSHOT_CORRUPT);
    ck_assert_str_eq(sm.why, "the header's lengths disagree");
    /* A changed pair whose checksum was not redone: the checksum says so. */
    memcpy(mod, sm.buf, sm.len);
    mod[kv + 13] = '9';
    ck_assert_int_eq(read_mem(mod, sm.len, &EXPECT), SNAPSHOT_BAD_CHECKSUM);
    free(mod);
}
END_TEST

/* ------------------------------------------------------------ version 1 -- */

/*
 * A version 1 file (one filter, no metadata) is still read, as one layer
 * that grows by the defaults, with the checks it always had.
 */
START_TEST(test_version_1_still_read)
{
    char k[64];
    struct filter *f = filter_new(3000, 0.01, NULL);
    add_keys(f, "in", 0, 2000);
    size_t len;
    unsigned char *buf = v1_snapshot(&META, f, &len);
    struct snapshot s;
    char why[SNAPSHOT_WHY_LEN] = "";
    ck_assert_msg(snapshot_read_mem(buf, len, &EXPECT, &s, why, sizeof why) == SNAPSHOT_OK, "%s",
                  why);
    ck_assert_uint_eq(s.version, 1);
    ck_assert_int_eq(s.params.kind, FILTER_KIND_BLOCKED);       /* old images are blocked */
    ck_assert_int_eq(filter_kind(s.filter), FILTER_KIND_BLOCKED);
    ck_assert_uint_eq(s.n_kv, 0);
    ck_assert_str_eq(s.position, META.position);
    ck_assert_str_eq(s.table, "public.users");
    ck_assert_uint_eq(s.horizon_ms, META.horizon_ms);
    ck_assert_uint_eq(s.journal_count, 1);
    ck_assert(filter_contains(s.filter, "v1-posted", 9));
    ck_assert_uint_eq(s.params.layers, 1);
    struct filter_growth def = FILTER_GROWTH_DEFAULT;
    ck_assert_mem_eq(&s.params.growth, &def, sizeof def);
    struct filter_params fp;
    filter_export(f, &fp);
    ck_assert_uint_eq(s.params.layer[0].capacity, 3000);
    ck_assert_uint_eq(s.params.layer[0].items, fp.layer[0].items);
    /* Its share is the one filter_new gives: the same filter, grown alike. */
    struct filter_params sp;
    filter_export(s.filter, &sp);
    ck_assert(sp.layer[0].share_fpp == fp.layer[0].share_fpp);
    uint64_t differ = 0;
    for (uint64_t i = 0; i < 20000; i++) {
        size_t n = key(k, sizeof k, i < 2000 ? "in" : "out", i);
        differ += filter_contains(s.filter, k, n) != filter_contains(f, k, n);
    }
    ck_assert_uint_eq(differ, 0);
    filter_add(f, "v1-posted", 9);
    grow_alike(f, s.filter, 2000, 20000);
    snapshot_release(&s);

    /* Every proper prefix is truncated; one byte more is corrupt. */
    assert_prefixes_truncated(buf, len);
    unsigned char *mod = malloc(len + 1);
    memcpy(mod, buf, len);
    mod[len] = 0;
    ck_assert_int_eq(snapshot_read_mem(mod, len + 1, &EXPECT, &s, why, sizeof why), SNAPSHOT_CORRUPT);
    /* Its own checks: the header's bytes flipped, its geometry, its reserved field. */
    uint32_t hl = le32_at(buf + 12);
    for (size_t i = 0; i < hl; i++) {
        memcpy(mod, buf, len);
        mod[i] ^= 0x80;
        enum snapshot_status st = snapshot_read_mem(mod, len, &EXPECT, &s, why, sizeof why);
        ck_assert_msg(st != SNAPSHOT_OK, "byte %zu flipped: accepted", i);
        if (i >= 16 && i < 104)
            ck_assert_int_eq(st, SNAPSHOT_BAD_CHECKSUM);
    }
    memcpy(mod, buf, len);
    mod[64] ^= 1;                              /* probes */
    reseal(mod, len);
    ck_assert_int_eq(snapshot_read_mem(mod, len, &EXPECT, &s, why, sizeof why), SNAPSHOT_OTHER_PARAMS);
    ck_assert_ptr_nonnull(strstr(why, "filter geometry"));
    memcpy(mod, buf, len);
    mod[68] = 1;                               /* reserved */
    reseal(mod, len);
    ck_assert_int_eq(snapshot_read_mem(mod, len, &EXPECT, &s, why, sizeof why), SNAPSHOT_CORRUPT);
    memcpy(mod, buf, len);
    put_le64(mod + 56, le32_at(mod + 56) + 1);   /* blocks: the filter section disagrees */
    reseal(mod, len);
    ck_assert_int_eq(snapshot_read_mem(mod, len, &EXPECT, &s, why, sizeof why), SNAPSHOT_CORRUPT);
    struct snapshot_expect e = EXPECT;
    e.target_fpp = 0.001;
    ck_assert_int_eq(snapshot_read_mem(buf, len, &e, &s, why, sizeof why), SNAPSHOT_OTHER_PARAMS);
    free(mod);
    free(buf);
    filter_free(f);
}
END_TEST

/* ------------------------------------------------------- failed writes -- */

struct failing {
    size_t budget;      /* bytes accepted before the "disk" is full */
    size_t written;
};

static bool failing_write(void *ctx, const void *buf, size_t len)
{
    (void)buf;
    struct failing *w = ctx;
    if (w->written + len > w->budget) {
        errno = ENOSPC;
        return false;
    }
    w->written += len;
    return true;
}

/* Whether path still reads as the snapshot of "old-*" keys. */
static void assert_old_snapshot(const char *path)
{
    char k[64];
    struct snapshot s;
    char why[SNAPSHOT_WHY_LEN] = "";
    ck_assert_msg(snapshot_read(path, &EXPECT, &s, why, sizeof why) == SNAPSHOT_OK, "%s", why);
    for (uint64_t i = 0; i < 500; i++)
        ck_assert(filter_contains(s.filter, k, key(k, sizeof k, "old", i)));
    ck_assert_uint_eq(s.params.layer[0].capacity, 1000);
    snapshot_release(&s);
}

START_TEST(test_failed_writes_keep_the_old_snapshot)
{
    struct filter *old = filter_new(1000, 0.01, NULL), *f = filter_new(200000, 0.01, NULL);
    add_keys(old, "old", 0, 500);
    add_keys(f, "new", 0, 1000);
    ck_assert_int_eq(snapshot_write(spath, &META, old, NULL, NULL), 0);
    assert_old_snapshot(spath);

    /* A write callback that fails part way: its errno comes back. */
    struct failing w = { .budget = 5000 };
    ck_assert_int_eq(snapshot_write_to(failing_write, &w, &META, f, NULL, NULL), ENOSPC);
    ck_assert_uint_le(w.written, 5000);
    w = (struct failing){ .budget = SIZE_MAX };
    ck_assert_int_eq(snapshot_write_to(failing_write, &w, &META, f, NULL, NULL), 0);
    ck_assert_uint_gt(w.written, 200000 * 9 / 8);

    /*
     * A real failing write: a file size limit makes write() fail with EFBIG
     * part way, as a full disk fails it with ENOSPC.
     */
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit saved, lim;
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &saved), 0);
    lim = saved;
    lim.rlim_cur = 64 * 1024;
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    int err = snapshot_write(spath, &META, f, NULL, NULL);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &saved), 0);
    ck_assert_int_eq(err, EFBIG);
    ck_assert_int_eq(files_in(sdir), 1);        /* the temporary file is gone */
    assert_old_snapshot(spath);

    /* Strings too long for the format: refused before anything is written. */
    char *longname = malloc(SNAPSHOT_MAX_STRING + 2);
    memset(longname, 'x', SNAPSHOT_MAX_STRING + 1);
    longname[SNAPSHOT_MAX_STRING + 1] = '\0';
    struct snapshot_meta lm = META;
    lm.table = longname;
    ck_assert_int_eq(snapshot_write(spath, &lm, f, NULL, NULL), EINVAL);
    ck_assert_int_eq(files_in(sdir), 1);
    free(longname);
    assert_old_snapshot(spath);

    /* A read-only directory (not for root, whom permissions do not stop). */
    ck_assert_int_eq(chmod(sdir, 0555), 0);
    if (access(sdir, W_OK) != 0) {
        ck_assert_int_eq(snapshot_write(spath, &META, f, NULL, NULL), EACCES);
        assert_old_snapshot(spath);
    }
    ck_assert_int_eq(chmod(sdir, 0700), 0);

    /* The rename itself failing: the target is a non-empty directory. */
    char *blocker = check_join(sdir, "blocked.snap"), *inside = check_join(blocker, "x");
    ck_assert_int_eq(mkdir(blocker, 0700), 0);
    spit(inside, "x", 1);
    err = snapshot_write(blocker, &META, f, NULL, NULL);
    ck_assert(err == EISDIR || err == ENOTEMPTY || err == EEXIST);
    ck_assert_int_eq(files_in(sdir), 2);        /* users.snap and blocked.snap only */
    unlink(inside);
    rmdir(blocker);
    free(inside);
    free(blocker);

    /* And then a write that succeeds replaces it whole. */
    ck_assert_int_eq(snapshot_write(spath, &META, f, NULL, NULL), 0);
    struct snapshot s;
    ck_assert_int_eq(snapshot_read(spath, &EXPECT, &s, NULL, 0), SNAPSHOT_OK);
    ck_assert_uint_eq(s.params.layer[0].capacity, 200000);
    ck_assert(filter_contains(s.filter, "new-999", 7));
    snapshot_release(&s);

    filter_free(old);
    filter_free(f);
}
END_TEST

START_TEST(test_clean_temps)
{
    const char *names[] = { "users.snap.tmp.123.0123456789abcdef", "users.snap.tmp.1.fedcba9876543210",
                            "users.snap.tmp.x.0123456789abcdef", "users.snap.tmp.1.0123",
                            "other.snap.tmp.1.0123456789abcdef", "users.snap" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char *p = check_join(sdir, names[i]);
        spit(p, "x", 1);
        free(p);
    }
    ck_assert_int_eq(snapshot_clean_temps(spath), 2);
    ck_assert_int_eq(files_in(sdir), 4);
    ck_assert_int_eq(snapshot_clean_temps(spath), 0);
    char *gone = check_join(sdir, "nodir/users.snap");
    ck_assert_int_eq(snapshot_clean_temps(gone), -1);
    free(gone);
}
END_TEST

/* ------------------------------------------------- concurrent inserts -- */

#define PRE_KEYS 200000u

struct inserter {
    struct filter *f;
    atomic_bool stop;
    _Atomic uint64_t done;      /* keys "during-0" .. "during-(done-1)" are in */
};

static void *insert_loop(void *arg)
{
    struct inserter *in = arg;
    char k[64];
    for (uint64_t i = 0; !atomic_load(&in->stop); i++) {
        filter_add(in->f, k, key(k, sizeof k, "during", i));
        atomic_store(&in->done, i + 1);
    }
    return NULL;
}

START_TEST(test_concurrent_inserts_while_writing)
{
    char k[64];
    struct inserter in = { .f = filter_new(4 * 1000 * 1000, 0.01, NULL) };
    atomic_init(&in.stop, false);
    atomic_init(&in.done, 0);
    add_keys(in.f, "pre", 0, PRE_KEYS);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, insert_loop, &in), 0);
    while (atomic_load(&in.done) < 1000)
        ;                                       /* the inserter is running */
    uint64_t before = atomic_load(&in.done);
    ck_assert_int_eq(snapshot_write(spath, &META, in.f, NULL, NULL), 0);
    uint64_t after = atomic_load(&in.done);
    atomic_store(&in.stop, true);
    pthread_join(t, NULL);
    fprintf(stderr, "inserted %llu keys while the snapshot was written\n",
            (unsigned long long)(after - before));

    struct snapshot s;
    ck_assert_int_eq(snapshot_read(spath, &EXPECT, &s, NULL, 0), SNAPSHOT_OK);
    uint64_t missing = 0;
    for (uint64_t i = 0; i < PRE_KEYS; i++)
        missing += !filter_contains(s.filter, k, key(k, sizeof k, "pre", i));
    for (uint64_t i = 0; i < before; i++)
        missing += !filter_contains(s.filter, k, key(k, sizeof k, "during", i));
    ck_assert_uint_eq(missing, 0);
    /* Nothing the live filter lacks: the copy is a subset of its bits. */
    struct filter_info live, back;
    filter_info(in.f, &live);
    filter_info(s.filter, &back);
    ck_assert_uint_le(back.bits_set, live.bits_set);
    ck_assert_uint_ge(back.bits_set, 1);
    snapshot_release(&s);
    filter_free(in.f);
}
END_TEST

/*
 * Each filter kind (_i), grown to several layers, through a snapshot: read
 * back as that kind, every key in it, and refused where another kind is
 * expected.
 */
START_TEST(test_each_kind_round_trips)
{
    enum filter_kind kind = (enum filter_kind)_i;
    enum filter_error fe;
    struct filter *f = filter_new_with(kind, 2000, 0.01, NULL, NULL, &fe);
    ck_assert_msg(f != NULL, "%s", filter_strerror(fe));
    add_keys(f, "in", 0, 10000);
    size_t len;
    unsigned char *buf = stream_all(&META, f, NULL, 0, 4096, &len);
    ck_assert_uint_eq(le32_at(buf + 76), kind);
    struct snapshot s;
    char why[SNAPSHOT_WHY_LEN] = "";
    struct snapshot_expect e = EXPECT;
    e.kind = filter_kind_name(kind);
    ck_assert_msg(snapshot_read_mem(buf, len, &e, &s, why, sizeof why) == SNAPSHOT_OK, "%s", why);
    ck_assert_int_eq(s.params.kind, kind);
    ck_assert_int_eq(filter_kind(s.filter), kind);
    ck_assert_uint_ge(s.params.layers, 2);
    char k[64];
    for (uint64_t i = 0; i < 10000; i++)
        ck_assert(filter_contains(s.filter, k, key(k, sizeof k, "in", i)));
    snapshot_release(&s);
    e.kind = filter_kind_name((enum filter_kind)((kind + 1) % FILTER_KINDS));
    if (FILTER_KINDS > 1)
        ck_assert_int_eq(snapshot_read_mem(buf, len, &e, &s, why, sizeof why), SNAPSHOT_OTHER_KIND);
    free(buf);
    filter_free(f);
}
END_TEST

CHECK_SUITE("snapshot",
    CHECK_CASE("core", .timeout = 120),
    CHECK_TEST(test_filter_image),
    CHECK_TEST(test_filter_new_from_checks_geometry),
    CHECK_TEST(test_pending_export_restore),
    CHECK_TEST(test_position_limits),
    CHECK_LOOP(test_each_kind_round_trips, FILTER_KINDS),
    CHECK_TEST(test_kv_writer_limits),
    CHECK_TEST(test_version_1_still_read),
    CHECK_CASE("mangled", .timeout = 120, .setup = small_setup, .teardown = small_teardown),
    CHECK_TEST(test_every_flipped_byte),
    CHECK_TEST(test_other_identity_and_params),
    CHECK_TEST(test_other_version),
    CHECK_TEST(test_corrupt_kv_refused),
    CHECK_CASE("files", .timeout = 120, .setup = scratch_setup, .teardown = scratch_teardown),
    CHECK_TEST(test_round_trip),
    CHECK_TEST(test_missing_and_not_a_snapshot),
    CHECK_TEST(test_truncated_every_prefix),
    CHECK_TEST(test_layers_and_kv_round_trip),
    CHECK_TEST(test_failed_writes_keep_the_old_snapshot),
    CHECK_TEST(test_clean_temps),
    CHECK_TEST(test_concurrent_inserts_while_writing),
)
