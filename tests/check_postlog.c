/*
 * Unit tests of the POST log (src/store/postlog.c): what is appended comes back
 * after a reopen until its wall-clock expiry; an incomplete last append is
 * cut off and damage in the middle is reported; a rewrite keeps exactly the
 * live entries plus what was appended while it ran; concurrent appenders
 * share fdatasyncs, and so do the submits of one thread that does not wait,
 * and appenders that each wait for their answer share one per round;
 * write and sync failures are reported, and a failed sync is repaired by a
 * rewrite.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check_main.h"
#include "check_util.h"
#include "postlog.h"

#define MAXE 4096

/* What a reopen gave back, in order. */
struct got {
    size_t n;
    char id[MAXE][40];
    uint64_t left[MAXE];
};

static bool collect(void *ctx, const char *id, size_t len, uint64_t ttl_left)
{
    struct got *g = ctx;
    ck_assert_uint_lt(g->n, MAXE);
    ck_assert_uint_lt(len, sizeof g->id[0]);
    memcpy(g->id[g->n], id, len);
    g->id[g->n][len] = '\0';
    g->left[g->n++] = ttl_left;
    return true;
}

static bool has(const struct got *g, const char *id)
{
    for (size_t i = 0; i < g->n; i++)
        if (strcmp(g->id[i], id) == 0)
            return true;
    return false;
}

static off_t file_size(const char *file)
{
    struct stat st;
    ck_assert_int_eq(stat(file, &st), 0);
    return st.st_size;
}

/* Where the open log's records end (its file runs on: the zeros written ahead). */
static off_t log_end(struct postlog *log)
{
    struct postlog_info pi;
    postlog_info(log, &pi);
    return (off_t)pi.bytes;
}

static int append1(struct postlog *log, const char *id, uint64_t ttl)
{
    size_t len = strlen(id);
    return postlog_append(log, 1, &id, &len, ttl);
}

/* A controllable wall clock. */
static _Atomic uint64_t clock_now = 1000000;
static uint64_t test_clock(void *ctx)
{
    (void)ctx;
    return atomic_load(&clock_now);
}

/*
 * Each test's scratch (the case's setup and teardown): a fresh directory
 * with the log's path in it, and what the last reopen gave back.
 */
static char *dir, *path;
static struct postlog_opened opened;
static struct got got;

static void setup(void)
{
    dir = check_tmpdir("check_postlog");
    path = check_join(dir, "x.posts");
}

static void teardown(void)
{
    check_scratch_free(dir, path);
}

/* The log at path opened with o, which must succeed; its entries in got, the rest in opened. */
static struct postlog *reopen(const struct postlog_opts *o)
{
    memset(&got, 0, sizeof got);
    struct postlog *log = postlog_open(path, o, collect, &got, &opened);
    ck_assert_msg(log != NULL, "open %s: %s", path, opened.why);
    return log;
}

START_TEST(test_round_trip)
{
    struct postlog_opts o = { .ttl = 3600, .clock = test_clock };
    struct postlog *log = reopen(&o);
    ck_assert(opened.created);
    ck_assert_uint_eq(got.n, 0);
    ck_assert_int_eq(postlog_append(log, 0, NULL, NULL, 60), 0);
    const char *ids[] = { "a", "", "ccc", "a" };    /* an empty id, and "a" again later */
    size_t lens[] = { 1, 0, 3, 1 };
    ck_assert_int_eq(postlog_append(log, 3, ids, lens, 60), 0);
    atomic_store(&clock_now, 1000010);
    ck_assert_int_eq(postlog_append(log, 1, ids + 3, lens + 3, 60), 0);
    struct postlog_info pi;
    postlog_info(log, &pi);
    ck_assert_uint_eq(pi.appends, 2);
    ck_assert_uint_eq(pi.ids, 4);
    ck_assert_uint_eq(pi.syncs, 2);
    /* Zeros written ahead (once, before the first batch), the appends inside them. */
    ck_assert_uint_eq(pi.prealloc_syncs, 1);
    ck_assert_uint_ge(pi.ahead, POSTLOG_PREALLOC - 4096);
    ck_assert_uint_eq(pi.bytes + pi.ahead, (uint64_t)file_size(path));
    postlog_close(log);
    ck_assert_uint_eq(pi.bytes + 32, (uint64_t)file_size(path));     /* cut, then sealed */

    log = reopen(&o);
    ck_assert(!opened.created && !opened.corrupt);
    ck_assert_uint_eq(opened.torn_bytes, 0);
    ck_assert_uint_eq(opened.entries, 4);
    ck_assert_uint_eq(got.n, 4);
    ck_assert_str_eq(got.id[0], "a");
    ck_assert_str_eq(got.id[1], "");
    ck_assert_str_eq(got.id[2], "ccc");
    ck_assert_str_eq(got.id[3], "a");
    ck_assert_uint_eq(got.left[0], 50);               /* appended at 1000000, read at 1000010 */
    ck_assert_uint_eq(got.left[3], 60);               /* the later append of "a" */
    postlog_close(log);
    postlog_close(NULL);
}
END_TEST

START_TEST(test_wall_clock_expiry)
{
    struct postlog_opts o = { .ttl = 100, .clock = test_clock };
    atomic_store(&clock_now, 2000000);
    struct postlog *log = reopen(&o);
    ck_assert_int_eq(append1(log, "short", 10), 0);
    ck_assert_int_eq(append1(log, "long", 100), 0);
    postlog_close(log);

    /* 50 s later (the machine rebooted, say): the short one is gone. */
    atomic_store(&clock_now, 2000050);
    log = reopen(&o);
    ck_assert_uint_eq(opened.entries, 1);
    ck_assert_uint_eq(opened.expired, 1);
    ck_assert_str_eq(got.id[0], "long");
    ck_assert_uint_eq(got.left[0], 50);
    postlog_close(log);

    /* At exactly its expiry an entry is gone. */
    atomic_store(&clock_now, 2000100);
    log = reopen(&o);
    ck_assert_uint_eq(opened.entries, 0);
    ck_assert_uint_eq(opened.expired, 2);
    postlog_close(log);

    /* The clock set back: never more than the configured ttl, nor a lowered one. */
    atomic_store(&clock_now, 1000000);
    log = reopen(&o);
    ck_assert_uint_eq(got.n, 2);
    ck_assert_uint_eq(got.left[0], 100);
    ck_assert_uint_eq(got.left[1], 100);
    postlog_close(log);
    o.ttl = 7;
    log = reopen(&o);
    ck_assert_uint_eq(got.left[1], 7);
    postlog_close(log);
}
END_TEST

/* The file's bytes into buf (cap bytes at most): its size. */
static size_t read_image(unsigned char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    ssize_t n = read(fd, buf, cap);
    close(fd);
    ck_assert_int_ge(n, 0);
    ck_assert_uint_lt((size_t)n, cap);
    return (size_t)n;
}

/* The file replaced in place by the first len bytes of buf (a cut, or a crash's leftovers). */
static void write_image(const unsigned char *buf, size_t len)
{
    int fd = open(path, O_WRONLY | O_TRUNC);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, buf, len), (ssize_t)len);
    close(fd);
}

/*
 * Close log as a crash would leave its file (kill -9: no seal): the file
 * as it is now is copied over what postlog_close leaves.
 */
static void log_close_unsealed(struct postlog *log)
{
    static unsigned char image[POSTLOG_PREALLOC * 2];
    size_t n = read_image(image, sizeof image);
    postlog_close(log);
    write_image(image, n);
}

/* len bytes of data appended to the file at p. */
static void fd_append(const char *p, const void *data, size_t len)
{
    int fd = open(p, O_WRONLY | O_APPEND);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
    close(fd);
}

/*
 * A crash in the middle of an append leaves a torn last record in a file
 * that no clean close sealed: cut off as never acknowledged, nothing held.
 */
START_TEST(test_torn_tail)
{
    /* A tight file, cut at each byte (the zeros written ahead: test_prealloc). */
    struct postlog_opts o = { .ttl = 3600, .clock = test_clock, .prealloc = POSTLOG_PREALLOC_NONE };
    atomic_store(&clock_now, 5000000);
    struct postlog *log = reopen(&o);
    ck_assert_int_eq(append1(log, "first", 60), 0);
    off_t good = file_size(path);
    ck_assert_int_eq(append1(log, "second", 60), 0);
    /* The file as a crash (kill -9, power loss) would leave it: in use, not sealed. */
    static unsigned char whole[4096];
    size_t full = read_image(whole, sizeof whole);
    postlog_close(log);

    /* Every cut inside the last record: it is dropped, the first stays. */
    for (off_t cut = good + 1; cut < (off_t)full; cut++) {
        write_image(whole, (size_t)cut);
        log = reopen(&o);
        ck_assert_msg(!opened.corrupt, "cut at %lld: %s", (long long)cut, opened.why);
        ck_assert(!opened.cut && !opened.sealed);
        ck_assert_uint_eq(opened.lost_until, 0);
        /* Up to its last byte that is not zero: trailing zeros read as zeros written ahead. */
        off_t torn = cut;
        while (torn > good && whole[torn - 1] == 0)
            torn--;
        ck_assert_uint_eq(opened.torn_bytes, (uint64_t)(torn - good));
        ck_assert_uint_eq(got.n, 1);
        ck_assert_str_eq(got.id[0], "first");
        ck_assert_int_eq(file_size(path), good);    /* cut off on disk */
        log_close_unsealed(log);
    }

    /*
     * Zeros after the last record (a file system that extended the size
     * first, or zeros written ahead): the end of the records, kept.
     */
    write_image(whole, (size_t)good);
    int fd = open(path, O_WRONLY | O_APPEND);
    ck_assert_int_ge(fd, 0);
    static const char zeros[5000];
    ck_assert_int_eq(write(fd, zeros, sizeof zeros), (ssize_t)sizeof zeros);
    close(fd);
    log = reopen(&o);
    ck_assert(!opened.corrupt && !opened.cut);
    ck_assert_uint_eq(opened.torn_bytes, 0);
    ck_assert_int_eq(log_end(log), good);
    ck_assert_int_eq(file_size(path), good + (off_t)sizeof zeros);
    ck_assert_int_eq(append1(log, "third", 60), 0);  /* goes where the zeros were */
    ck_assert_int_eq(file_size(path), good + (off_t)sizeof zeros);
    postlog_close(log);
    log = reopen(&o);
    ck_assert(opened.sealed && !opened.cut);
    ck_assert_uint_eq(opened.torn_bytes, 0);
    ck_assert_uint_eq(got.n, 2);
    ck_assert_str_eq(got.id[1], "third");
    postlog_close(log);

    /*
     * A header cut short, and an empty file: the log is created whole, so
     * this is a cut and what it held is unknown: held for a whole ttl.
     */
    for (off_t cut = 0; cut < 16; cut += 5) {
        ck_assert_int_eq(truncate(path, cut), 0);
        log = reopen(&o);
        ck_assert_uint_eq(got.n, 0);
        ck_assert(opened.cut);
        ck_assert_uint_eq(opened.lost_until, 5000000 + 3600);
        ck_assert_int_eq(file_size(path), 16);
        postlog_close(log);
    }
}
END_TEST

/*
 * The zeros written ahead (opts.prealloc): appends go inside them, the
 * file does not grow.  A crash leaves records, then zeros: the end of the
 * records (no torn append, nothing held), and they stay for the next run's
 * appends, which go in the middle of the file.  A torn record followed by
 * zeros is cut as ever; records that end exactly where the file does (an
 * append that filled the zeros) are read whole, and the next run writes
 * zeros ahead again.
 */
START_TEST(test_prealloc)
{
    struct postlog_opts o = { .ttl = 3600, .clock = test_clock, .prealloc = 8192 };
    atomic_store(&clock_now, 7000000);
    struct postlog *log = reopen(&o);
    ck_assert_int_eq(append1(log, "first", 60), 0);
    ck_assert_int_eq(append1(log, "second", 60), 0);
    struct postlog_info pi;
    postlog_info(log, &pi);
    off_t size = file_size(path);
    ck_assert_int_eq(size, 12288);                  /* 16 + 8192, rounded up to 4 KiB */
    ck_assert_uint_eq(pi.bytes + pi.ahead, (uint64_t)size);
    ck_assert_uint_eq(pi.prealloc_syncs, 1);
    off_t two = (off_t)pi.bytes;
    log_close_unsealed(log);                        /* a crash */

    /* The zeros are the end: nothing torn, nothing held, and they stay. */
    log = reopen(&o);
    ck_assert_msg(!opened.corrupt && !opened.cut && !opened.sealed, "%s", opened.why);
    ck_assert_uint_eq(opened.torn_bytes, 0);
    ck_assert_uint_eq(opened.lost_until, 0);
    ck_assert_uint_eq(got.n, 2);
    ck_assert_int_eq(log_end(log), two);
    ck_assert_int_eq(file_size(path), size);
    /* Appending in the middle of the file: it does not grow, and a crash keeps all three. */
    ck_assert_int_eq(append1(log, "third", 60), 0);
    off_t three = log_end(log);
    ck_assert_int_gt(three, two);
    ck_assert_int_eq(file_size(path), size);
    log_close_unsealed(log);
    log = reopen(&o);
    ck_assert(!opened.corrupt && !opened.cut);
    ck_assert_uint_eq(opened.torn_bytes, 0);
    ck_assert_uint_eq(got.n, 3);
    ck_assert_str_eq(got.id[2], "third");
    ck_assert_int_eq(append1(log, "fourth", 60), 0);
    off_t four = log_end(log);
    static unsigned char whole[12288 + 1];
    ck_assert_uint_eq(read_image(whole, sizeof whole), (size_t)size);
    log_close_unsealed(log);

    /*
     * A torn fourth record followed by zeros (its first k bytes reached
     * the disk): cut off, exactly at its start, and the file with it;
     * the next append goes there, and nothing after it is read.
     */
    for (off_t k = 1; k < four - three; k++) {
        static unsigned char torn[12288];
        memcpy(torn, whole, sizeof torn);
        memset(torn + three + k, 0, (size_t)(four - three - k));
        write_image(torn, (size_t)size);
        log = reopen(&o);
        ck_assert_msg(!opened.corrupt && !opened.cut, "k %lld: %s", (long long)k, opened.why);
        ck_assert_uint_ge(opened.torn_bytes, 1);
        ck_assert_uint_le(opened.torn_bytes, (uint64_t)k);
        ck_assert_uint_eq(opened.lost_until, 0);
        ck_assert_uint_eq(got.n, 3);
        ck_assert_int_eq(log_end(log), three);
        ck_assert_int_eq(append1(log, "fifth", 60), 0);
        log_close_unsealed(log);
        log = reopen(&o);
        ck_assert_msg(!opened.corrupt && opened.torn_bytes == 0, "k %lld: %s", (long long)k,
                      opened.why);
        ck_assert_uint_eq(got.n, 4);
        ck_assert_str_eq(got.id[3], "fifth");
        log_close_unsealed(log);
    }

    /*
     * Records that end exactly at a 4 KiB boundary, the file's end (an
     * append that filled the zeros): written tight, then read whole, and
     * zeros are written ahead again before the next append.
     */
    ck_assert_int_eq(unlink(path), 0);
    struct postlog_opts tight = o;
    tight.prealloc = POSTLOG_PREALLOC_NONE;
    log = reopen(&tight);
    size_t n = 0;
    for (off_t rem; (rem = 12288 - log_end(log)) > 0; n++) {
        char id[40];
        /* A record is 28 bytes and its ID; the last one fills what is left. */
        size_t len = rem <= 28 + 39 ? (size_t)(rem - 28) : rem < 28 + 58 ? 0 : 30;
        memset(id, 'a' + (int)(n % 26), len);
        id[len] = '\0';
        ck_assert_int_eq(append1(log, id, 60), 0);
    }
    ck_assert_int_eq(log_end(log), 12288);
    log_close_unsealed(log);
    ck_assert_int_eq(file_size(path), 12288);
    log = reopen(&o);
    ck_assert(!opened.corrupt && !opened.cut);
    ck_assert_uint_eq(opened.torn_bytes, 0);
    ck_assert_uint_eq(got.n, n);
    ck_assert_int_eq(log_end(log), 12288);
    ck_assert_int_eq(append1(log, "past-the-boundary", 60), 0);
    postlog_info(log, &pi);
    ck_assert_uint_eq(pi.prealloc_syncs, 1);
    ck_assert_int_eq(file_size(path), 12288 + 8192);
    log_close_unsealed(log);
    log = reopen(&o);
    ck_assert(!opened.corrupt && opened.torn_bytes == 0);
    ck_assert_uint_eq(got.n, n + 1);
    ck_assert_str_eq(got.id[n], "past-the-boundary");
    /* A clean close cuts the zeros before its seal: sealed, whole. */
    postlog_close(log);
    ck_assert_int_eq(file_size(path), 12288 + 17 + 28 + 32);
    log = reopen(&o);
    ck_assert(opened.sealed && !opened.cut);
    ck_assert_uint_eq(got.n, n + 1);
    postlog_close(log);
}
END_TEST

START_TEST(test_damage_in_the_middle)
{
    char *aside = check_join(dir, "x.posts.corrupt");
    struct postlog_opts o = { .ttl = 3600 };
    struct postlog *log = reopen(&o);
    ck_assert_int_eq(append1(log, "one", 60), 0);
    off_t second = log_end(log);
    ck_assert_int_eq(append1(log, "two", 60), 0);
    ck_assert_int_eq(append1(log, "three", 60), 0);
    postlog_close(log);
    off_t full = file_size(path);

    /* A flipped byte in the ID of the second record. */
    int fd = open(path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    unsigned char c;
    ck_assert_int_eq(pread(fd, &c, 1, second + 8 + 12), 1);
    c ^= 0x20;
    ck_assert_int_eq(pwrite(fd, &c, 1, second + 8 + 12), 1);
    close(fd);

    log = reopen(&o);
    ck_assert(opened.corrupt);
    ck_assert_uint_eq(opened.corrupt_offset, (uint64_t)second);
    ck_assert_uint_eq(opened.lost_bytes, (uint64_t)(full - second));
    ck_assert_ptr_nonnull(strstr(opened.why, "damaged"));
    ck_assert_uint_eq(got.n, 1);
    ck_assert_str_eq(got.id[0], "one");
    ck_assert_int_eq(log_end(log), second);         /* repaired: the good prefix */
    ck_assert_int_eq(file_size(aside), full);       /* the damaged file kept aside */
    ck_assert_int_eq(append1(log, "four", 60), 0);
    postlog_close(log);
    log = reopen(&o);
    ck_assert(!opened.corrupt);
    ck_assert_uint_eq(got.n, 2);
    ck_assert_str_eq(got.id[1], "four");
    postlog_close(log);

    /* Not a POST log, another version: refused, nothing touched. */
    static const char text[] = "this is somebody else's file, not a log\n";
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    memset(&got, 0, sizeof got);
    errno = 0;
    ck_assert_ptr_null(postlog_open(path, &o, collect, &got, &opened));
    ck_assert_int_eq(errno, EINVAL);
    ck_assert_ptr_nonnull(strstr(opened.why, "not a bloomguard POST log"));
    ck_assert_int_eq(file_size(path), (off_t)strlen(text));
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fwrite("bgpostlg\x02\0\0\0\0\0\0\0", 1, 16, f);
    fclose(f);
    ck_assert_ptr_null(postlog_open(path, &o, collect, &got, &opened));
    ck_assert_int_eq(errno, EINVAL);
    ck_assert_ptr_nonnull(strstr(opened.why, "version 2"));

    /* A directory that does not exist. */
    char *nowhere = check_join(dir, "nowhere/x.posts");
    ck_assert_ptr_null(postlog_open(nowhere, &o, collect, &got, &opened));
    ck_assert_int_eq(errno, ENOENT);
    free(nowhere);
    free(aside);
}
END_TEST

/*
 * A journal for the rewrites: the live set a test controls.  While during
 * is set, the walk first appends that id to the log (a POST arriving in the
 * middle of a rewrite, and not in the walk).
 */
struct journal {
    pthread_mutex_t mu;
    size_t n;
    char id[MAXE][40];
    uint64_t left[MAXE];
    bool live[MAXE];
    struct postlog *log;
    const char *during;         /* appended during the next walk, during_n times (or once) */
    unsigned during_n;
    atomic_bool during_began;
    unsigned walks;
};

static void journal_add(struct journal *j, const char *id, uint64_t left)
{
    pthread_mutex_lock(&j->mu);
    ck_assert_uint_lt(j->n, MAXE);
    snprintf(j->id[j->n], sizeof j->id[0], "%s", id);
    j->left[j->n] = left;
    j->live[j->n++] = true;
    pthread_mutex_unlock(&j->mu);
}

static bool journal_walk(void *live_ctx, postlog_count_fn count, postlog_entry_fn each, void *ctx)
{
    struct journal *j = live_ctx;
    if (j->during != NULL) {
        atomic_store(&j->during_began, true);
        /* One batch (one fdatasync, quick on a loaded disk too). */
        size_t n = j->during_n ? j->during_n : 1, len = strlen(j->during);
        const char **ids = calloc(n, sizeof *ids);
        size_t *lens = calloc(n, sizeof *lens);
        ck_assert(ids != NULL && lens != NULL);
        for (size_t i = 0; i < n; i++) {
            ids[i] = j->during;
            lens[i] = len;
        }
        ck_assert_int_eq(postlog_append(j->log, n, ids, lens, 600), 0);
        free(ids);
        free(lens);
        j->during = NULL;
    }
    pthread_mutex_lock(&j->mu);
    j->walks++;
    uint64_t n = 0, bytes = 0;
    for (size_t i = 0; i < j->n; i++)
        if (j->live[i]) {
            n++;
            bytes += strlen(j->id[i]);
        }
    bool ok = count(ctx, n, bytes);
    for (size_t i = 0; ok && i < j->n; i++)
        if (j->live[i])
            ok = each(ctx, j->id[i], strlen(j->id[i]), j->left[i]);
    pthread_mutex_unlock(&j->mu);
    return ok;
}

/* A compaction floor no test reaches: only postlog_compact rewrites. */
#define NEVER (UINT64_C(1) << 40)

/*
 * Opens path as a log that rewrites itself from the journal j (emptied
 * first): o's ttl (3600 s), live set and floor are set here, the rest is
 * the caller's.
 */
static struct postlog *open_journaled(struct postlog_opts *o, struct journal *j, uint64_t floor)
{
    j->n = 0;
    o->ttl = 3600;
    o->live = journal_walk;
    o->live_ctx = j;
    o->compact_floor = floor;
    j->log = reopen(o);
    return j->log;
}

/* Up to 10 s for the log's own thread to finish a rewrite (and not be broken); *pi the last figures. */
static void wait_for_a_compaction(struct postlog *log, struct postlog_info *pi)
{
    for (int waited = 0; waited < 10000; waited++) {
        postlog_info(log, pi);
        if (pi->compactions > 0 && !pi->broken)
            break;
        usleep(1000);
    }
}

START_TEST(test_compaction_keeps_the_live)
{
    static struct journal j = { .mu = PTHREAD_MUTEX_INITIALIZER };
    struct postlog_opts o = { .clock = test_clock };
    atomic_store(&clock_now, 3000000);
    struct postlog *log = open_journaled(&o, &j, NEVER);
    char id[40];
    for (int i = 0; i < 1000; i++) {
        snprintf(id, sizeof id, "id-%d", i);
        journal_add(&j, id, 600);
        ck_assert_int_eq(append1(log, id, 600), 0);
    }
    /* Seen in the table or expired: the journal keeps only every 100th. */
    for (size_t i = 0; i < j.n; i++)
        j.live[i] = i % 100 == 0;
    off_t before = log_end(log);
    j.during = "arrived-during-the-rewrite";
    ck_assert_int_eq(postlog_compact(log), 0);
    struct postlog_info pi;
    postlog_info(log, &pi);
    ck_assert_uint_eq(pi.compactions, 1);
    ck_assert_int_lt((off_t)pi.bytes * 10, before);
    ck_assert_int_eq(append1(log, "after", 600), 0);
    postlog_close(log);

    atomic_store(&clock_now, 3000100);
    log = reopen(&o);
    ck_assert(!opened.corrupt);
    ck_assert_uint_eq(opened.torn_bytes, 0);
    ck_assert_uint_eq(got.n, 12);
    for (int i = 0; i < 1000; i += 100) {
        snprintf(id, sizeof id, "id-%d", i);
        ck_assert_msg(has(&got, id), "%s lost by the rewrite", id);
    }
    ck_assert_uint_eq(got.left[0], 500);              /* the expiry travels through the rewrite */
    ck_assert(has(&got, "arrived-during-the-rewrite"));
    ck_assert(has(&got, "after"));
    postlog_close(log);

    /* Without a walk there is no rewrite. */
    struct postlog_opts plain = { .ttl = 3600 };
    log = reopen(&plain);
    ck_assert_int_eq(postlog_compact(log), EINVAL);
    postlog_close(log);
}
END_TEST

/*
 * Appends racing a rewrite become its tail, copied as they are: the tail
 * may repeat what the file holds, so the log rewrites again by itself,
 * with no further append to wake it, until the file is near its floor.  It
 * once counted the tail as live and stood at several times the floor until
 * the file doubled again (seen as test_compaction_by_itself failing on a
 * loaded machine, whose appends had all landed during the first rewrite).
 */
START_TEST(test_compaction_of_a_racing_tail)
{
#define LONG_ID "again-and-again-an-id-of-39-bytes-01234"
    static struct journal j = { .mu = PTHREAD_MUTEX_INITIALIZER };
    struct postlog_opts o = { 0 };
    struct postlog *log = open_journaled(&o, &j, 4096);
    journal_add(&j, LONG_ID, 3600);
    j.during = LONG_ID;
    j.during_n = 1000;
    struct postlog_info pi;
    /* Past the floor: the first rewrite starts, and appends 1000 (50 KB) during its walk. */
    for (int i = 0; i < 1000 && !atomic_load(&j.during_began); i++)
        ck_assert_int_eq(append1(log, LONG_ID, 3600), 0);
    /* The first rewrite ends after its walk's appends. */
    for (int waited = 0; waited < 60000; waited++) {
        postlog_info(log, &pi);
        if (pi.compactions >= 1 && pi.bytes < 3 * 4096)
            break;
        usleep(1000);
    }
    ck_assert_uint_ge(pi.compactions, 1);
    ck_assert_msg(pi.bytes < 3 * 4096, "%" PRIu64 " bytes after %" PRIu64 " rewrites",
                  pi.bytes, pi.compactions);
    postlog_close(log);
    log = reopen(&o);
    ck_assert(has(&got, LONG_ID));
    postlog_close(log);
#undef LONG_ID
}
END_TEST

START_TEST(test_compaction_by_itself)
{
    static struct journal j = { .mu = PTHREAD_MUTEX_INITIALIZER };
    struct postlog_opts o = { 0 };
    struct postlog *log = open_journaled(&o, &j, 4096);
    /* The same 10 ids again and again: the file grows, the live set does not. */
    char id[40];
    for (int i = 0; i < 3000; i++) {
        snprintf(id, sizeof id, "again-%d", i % 10);
        if (i < 10)
            journal_add(&j, id, 3600);
        ck_assert_int_eq(append1(log, id, 3600), 0);
    }
    struct postlog_info pi;
    wait_for_a_compaction(log, &pi);
    ck_assert_uint_ge(pi.compactions, 1);
    ck_assert_uint_eq(pi.compact_failures, 0);
    /*
     * 3000 records of ~40 bytes would be 120 KB: the rewrites keep it near
     * the floor.  On a loaded machine the appends can all land during the
     * first rewrite, as its tail: the rewrites that follow by themselves,
     * with no further append to wake them, bring it down.
     */
    for (int waited = 0; waited < 10000 && log_end(log) >= 3 * 4096; waited++)
        usleep(1000);
    ck_assert_int_lt(log_end(log), 3 * 4096);
    postlog_close(log);
    log = reopen(&o);
    for (int i = 0; i < 10; i++) {
        snprintf(id, sizeof id, "again-%d", i);
        ck_assert(has(&got, id));
    }
    postlog_close(log);

    /* A file that is mostly expired entries is rewritten right after the open. */
    atomic_store(&clock_now, 4000000);
    struct postlog_opts oc = o, append_only = { .ttl = 3600, .clock = test_clock };
    oc.clock = test_clock;
    log = reopen(&append_only);
    for (int i = 0; i < 500; i++) {
        snprintf(id, sizeof id, "short-lived-%d", i);
        ck_assert_int_eq(append1(log, id, 5), 0);
    }
    postlog_close(log);
    off_t big = file_size(path);
    atomic_store(&clock_now, 4000010);
    j.n = 0;
    log = reopen(&oc);
    ck_assert_uint_eq(opened.expired, 500);
    wait_for_a_compaction(log, &pi);
    ck_assert_uint_eq(pi.compactions, 1);
    ck_assert_int_lt(log_end(log), big);
    postlog_close(log);
}
END_TEST

/* Group commit: the first batch's write waits until every appender has queued. */
struct gate {
    struct postlog *_Atomic log;
    uint64_t want;
    _Atomic int writes;
};

static int hold_first_write(void *ctx, enum postlog_io op)
{
    struct gate *gt = ctx;
    if (op != POSTLOG_IO_WRITE || atomic_fetch_add(&gt->writes, 1) > 0)
        return 0;
    for (;;) {
        struct postlog *log = atomic_load(&gt->log);
        struct postlog_info pi;
        if (log != NULL) {
            postlog_info(log, &pi);
            if (pi.appends >= gt->want)
                return 0;
        }
        usleep(1000);
    }
}

/*
 * The log at path with the gate armed for want appends: its options hold
 * the first write until they are all queued, and the gate watches the log.
 * Static in a test, as the gate outlives the log's threads.
 */
struct gated {
    struct gate gt;
    struct postlog_opts o;
    struct postlog *log;
};

static void open_gated(struct gated *x, uint64_t want)
{
    atomic_store(&x->gt.log, NULL);
    atomic_store(&x->gt.writes, 0);
    x->gt.want = want;
    x->o = (struct postlog_opts){ .ttl = 3600, .fault = hold_first_write, .fault_ctx = &x->gt };
    x->log = reopen(&x->o);
    atomic_store(&x->gt.log, x->log);
}

/* Close x's log and read path back: the reopened log must hold n ids (in got); then closed too. */
static void close_reopen_count(struct gated *x, size_t n)
{
    postlog_close(x->log);
    x->log = reopen(&x->o);
    ck_assert_uint_eq(got.n, n);
    postlog_close(x->log);
}

struct appender {
    struct postlog *log;
    int i;
    int rc;
};

static void *append_thread(void *arg)
{
    struct appender *a = arg;
    char id[40];
    snprintf(id, sizeof id, "concurrent-%d", a->i);
    a->rc = append1(a->log, id, 600);
    return NULL;
}

START_TEST(test_group_commit)
{
    enum { N = 64 };
    static struct gated x;
    open_gated(&x, N);
    pthread_t th[N];
    struct appender a[N];
    for (int i = 0; i < N; i++) {
        a[i] = (struct appender){ x.log, i, -1 };
        ck_assert_int_eq(pthread_create(&th[i], NULL, append_thread, &a[i]), 0);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(a[i].rc, 0);
    }
    struct postlog_info pi;
    postlog_info(x.log, &pi);
    ck_assert_uint_eq(pi.appends, N);
    /* The first batch (whoever came first), then all the others together. */
    ck_assert_uint_le(pi.batches, 2);
    ck_assert_uint_eq(pi.syncs, pi.batches);
    close_reopen_count(&x, N);
    for (int i = 0; i < N; i++) {
        char id[40];
        snprintf(id, sizeof id, "concurrent-%d", i);
        ck_assert(has(&got, id));
    }
}
END_TEST

/* postlog_submit: counts its callbacks. */
struct done_count {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned calls, errors;
};

static void count_done(void *arg, int err)
{
    struct done_count *dc = arg;
    pthread_mutex_lock(&dc->mu);
    dc->calls++;
    dc->errors += err != 0;
    pthread_cond_signal(&dc->cv);
    pthread_mutex_unlock(&dc->mu);
}

START_TEST(test_submit)
{
    enum { N = 300 };
    static struct gated x;
    static struct done_count dc = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 };
    open_gated(&x, N);
    char id[40];
    for (int i = 0; i < N; i++) {
        snprintf(id, sizeof id, "async-%d", i);
        const char *p = id;
        size_t len = strlen(id);
        ck_assert_int_eq(postlog_submit(x.log, 1, &p, &len, 600, count_done, &dc), 0);
    }
    ck_assert_int_eq(postlog_submit(x.log, 0, NULL, NULL, 600, count_done, &dc), EINVAL);
    pthread_mutex_lock(&dc.mu);
    while (dc.calls < N)
        pthread_cond_wait(&dc.cv, &dc.mu);
    pthread_mutex_unlock(&dc.mu);
    struct postlog_info pi;
    postlog_info(x.log, &pi);
    ck_assert_uint_eq(dc.calls, N);                 /* once each, the EINVAL one never */
    ck_assert_uint_eq(dc.errors, 0);
    ck_assert_uint_eq(pi.appends, N);
    /* The submitter did not wait: the first write, then all the others in one. */
    ck_assert_uint_le(pi.syncs, 2);
    close_reopen_count(&x, N);
}
END_TEST

/* A disk whose fdatasync takes SLOW_SYNC_US (the writes are the real ones). */
#define SLOW_SYNC_US 20000
static int slow_sync(void *ctx, enum postlog_io op)
{
    (void)ctx;
    if (op == POSTLOG_IO_SYNC)
        usleep(SLOW_SYNC_US);
    return 0;
}

/* A client that sends again as soon as it has its answer: ROUNDS appends in a row. */
enum { GATHER_ROUNDS = 12 };
static void *closed_loop(void *arg)
{
    struct appender *a = arg;
    char id[40];
    for (int r = 0; r < GATHER_ROUNDS && a->rc == 0; r++) {
        snprintf(id, sizeof id, "loop-%d-%d", a->i, r);
        a->rc = append1(a->log, id, 600);
    }
    return NULL;
}

static uint64_t elapsed_us(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (uint64_t)(t1.tv_sec - t0->tv_sec) * 1000000 + (uint64_t)(t1.tv_nsec / 1000)
        - (uint64_t)(t0->tv_nsec / 1000);
}

/*
 * Closed-loop appenders (each waits for its answer, then appends again, as
 * a connection's POSTs do) share one fdatasync per round: without the
 * gather they split into two groups that alternate, N/2 appends per batch
 * and two fdatasyncs per append.  A lone appender after them waits at
 * most about one fdatasync longer, once.
 */
START_TEST(test_gather)
{
    enum { N = 8 };
    struct postlog_opts o = { .ttl = 3600, .fault = slow_sync };
    struct postlog *log = reopen(&o);
    pthread_t th[N];
    struct appender a[N];
    for (int i = 0; i < N; i++) {
        a[i] = (struct appender){ log, i, 0 };
        ck_assert_int_eq(pthread_create(&th[i], NULL, closed_loop, &a[i]), 0);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(a[i].rc, 0);
    }
    struct postlog_info pi;
    postlog_info(log, &pi);
    ck_assert_uint_eq(pi.appends, N * GATHER_ROUNDS);
    /* Split: exactly N/2 per batch.  Gathered: all N but a round or two's stragglers. */
    ck_assert_msg(pi.appends * 4 >= pi.batches * N * 3, "%llu appends in %llu batches",
                  (unsigned long long)pi.appends, (unsigned long long)pi.batches);

    /* Now one appender alone: the first gather waits for 7 more, the next none. */
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ck_assert_int_eq(append1(log, "alone-1", 600), 0);
    uint64_t first = elapsed_us(&t0);
    ck_assert_uint_lt(first, 2 * SLOW_SYNC_US + 200000);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ck_assert_int_eq(append1(log, "alone-2", 600), 0);
    ck_assert_uint_lt(elapsed_us(&t0), SLOW_SYNC_US + 200000);
    postlog_close(log);
    log = reopen(&o);
    ck_assert_uint_eq(got.n, N * GATHER_ROUNDS + 2);
    postlog_close(log);
}
END_TEST

/*
 * A clean close seals the file; cut while stopped at any byte of its last
 * record or of the seal, it says so (never "torn, never acknowledged"),
 * and holds until the latest expiry any lost entry could have had.  The
 * hold survives a crash, a rewrite and a clean restart, until it passes.
 */
START_TEST(test_cut_while_stopped)
{
    static struct journal j = { .mu = PTHREAD_MUTEX_INITIALIZER };
    struct postlog_opts o = { .clock = test_clock };
    atomic_store(&clock_now, 6000000);
    struct postlog *log = open_journaled(&o, &j, NEVER);
    ck_assert_int_eq(append1(log, "first", 600), 0);
    off_t good = log_end(log);
    atomic_store(&clock_now, 6000010);
    ck_assert_int_eq(append1(log, "second", 900), 0);   /* expires at 6000910 */
    off_t records = log_end(log);
    postlog_close(log);
    static unsigned char sealed[4096];
    size_t full = read_image(sealed, sizeof sealed);
    ck_assert_uint_eq(full, (size_t)records + 32);      /* the seal */

    /* Whole: sealed, both back, nothing held; the open takes the seal off. */
    log = open_journaled(&o, &j, NEVER);
    ck_assert(opened.sealed && !opened.cut && !opened.corrupt);
    ck_assert_uint_eq(opened.lost_until, 0);
    ck_assert_uint_eq(opened.torn_bytes, 0);
    ck_assert_uint_eq(got.n, 2);
    ck_assert_int_eq(log_end(log), records);
    log_close_unsealed(log);

    atomic_store(&clock_now, 6000100);
    for (off_t cut = good; cut < (off_t)full; cut++) {
        write_image(sealed, (size_t)cut);
        log = open_journaled(&o, &j, NEVER);
        ck_assert_msg(opened.cut && !opened.sealed, "cut at %lld of %zu: not seen", (long long)cut,
                      full);
        ck_assert_ptr_nonnull(strstr(opened.why, "cut or changed while bloomguard was stopped"));
        ck_assert_uint_eq(opened.lost_until, 6000910);
        ck_assert_uint_eq(got.n, cut >= records ? 2 : 1);
        ck_assert_str_eq(got.id[0], "first");
        log_close_unsealed(log);
    }
    /* Changed rather than cut: bytes after the seal. */
    write_image(sealed, full);
    fd_append(path, "junk", 4);
    log = open_journaled(&o, &j, NEVER);
    ck_assert(opened.cut);
    ck_assert_uint_eq(opened.lost_until, 6000910);
    ck_assert_uint_eq(got.n, 2);
    log_close_unsealed(log);

    /* The hold lives in the file in use: a crash (no seal) keeps it. */
    write_image(sealed, (size_t)good + 3);
    log = open_journaled(&o, &j, NEVER);
    ck_assert_uint_eq(opened.lost_until, 6000910);
    journal_add(&j, "first", 500);
    ck_assert_int_eq(append1(log, "third", 300), 0);
    journal_add(&j, "third", 300);
    log_close_unsealed(log);                        /* a crash */
    log = open_journaled(&o, &j, NEVER);
    ck_assert(opened.cut);
    ck_assert_uint_eq(opened.lost_until, 6000910);
    /* ... and a rewrite, and a clean restart. */
    journal_add(&j, "first", 500);
    journal_add(&j, "third", 300);
    ck_assert_int_eq(postlog_compact(log), 0);
    log_close_unsealed(log);
    log = open_journaled(&o, &j, NEVER);
    ck_assert_uint_eq(opened.lost_until, 6000910);
    postlog_close(log);
    log = open_journaled(&o, &j, NEVER);
    ck_assert(opened.sealed && !opened.cut);
    ck_assert_uint_eq(opened.lost_until, 6000910);
    ck_assert(has(&got, "first") && has(&got, "third"));
    postlog_close(log);
    /* Once it has passed, nothing is held, and the file says so. */
    atomic_store(&clock_now, 6000910);
    log = open_journaled(&o, &j, NEVER);
    ck_assert(opened.sealed);
    ck_assert_uint_eq(opened.lost_until, 0);
    log_close_unsealed(log);
    log = open_journaled(&o, &j, NEVER);
    ck_assert(!opened.cut && !opened.sealed);
    ck_assert_uint_eq(opened.lost_until, 0);
    postlog_close(log);

    /* A ttl lowered since: no entry is read back for longer, nor held. */
    write_image(sealed, (size_t)good + 1);
    atomic_store(&clock_now, 6000100);
    o.ttl = 60;
    memset(&got, 0, sizeof got);
    log = postlog_open(path, &o, collect, &got, &opened);
    ck_assert_ptr_nonnull(log);
    ck_assert_uint_eq(opened.lost_until, 6000160);
    postlog_close(log);
}
END_TEST

/*
 * A done callback that puts its ID in the journal (as table.c does: an ID
 * joins the journal once the log has it), once the test lets it go on.
 */
struct slow_done {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct journal *j;
    const char *id;
    bool entered, go;
};

static void slow_done_fn(void *arg, int err)
{
    struct slow_done *sd = arg;
    pthread_mutex_lock(&sd->mu);
    sd->entered = true;
    pthread_cond_broadcast(&sd->cv);
    while (!sd->go)
        pthread_cond_wait(&sd->cv, &sd->mu);
    pthread_mutex_unlock(&sd->mu);
    if (err == 0)
        journal_add(sd->j, sd->id, 600);
}

static void *compact_thread(void *arg)
{
    return (void *)(intptr_t)postlog_compact(arg);
}

/*
 * A rewrite that starts while an append's done callback runs waits for it:
 * the record is before the rewrite's mark, so only the walk can keep its
 * ID, and the ID is there only once the callback has returned.
 */
START_TEST(test_compaction_waits_for_done_callbacks)
{
    static struct journal j = { .mu = PTHREAD_MUTEX_INITIALIZER };
    static struct slow_done sd = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };
    struct postlog_opts o = { .clock = test_clock };
    struct postlog *log = open_journaled(&o, &j, NEVER);
    sd.j = &j;
    sd.id = "acknowledged-in-its-callback";
    const char *p = sd.id;
    size_t len = strlen(p);
    ck_assert_int_eq(postlog_submit(log, 1, &p, &len, 600, slow_done_fn, &sd), 0);
    pthread_mutex_lock(&sd.mu);
    while (!sd.entered)
        pthread_cond_wait(&sd.cv, &sd.mu);
    pthread_mutex_unlock(&sd.mu);
    /* The record is on disk, its callback not done: a rewrite now. */
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, compact_thread, log), 0);
    usleep(200000);
    pthread_mutex_lock(&j.mu);
    unsigned walks = j.walks;
    pthread_mutex_unlock(&j.mu);
    ck_assert_uint_eq(walks, 0);                    /* the rewrite waits for the callback */
    pthread_mutex_lock(&sd.mu);
    sd.go = true;
    pthread_cond_broadcast(&sd.cv);
    pthread_mutex_unlock(&sd.mu);
    void *rc;
    pthread_join(th, &rc);
    ck_assert_int_eq((int)(intptr_t)rc, 0);
    struct postlog_info pi;
    postlog_info(log, &pi);
    ck_assert_uint_eq(pi.compactions, 1);
    postlog_close(log);
    log = reopen(&o);
    ck_assert_msg(has(&got, sd.id), "an acknowledged id lost by a rewrite");
    postlog_close(log);
}
END_TEST

/* Faults: the next write or sync fails with the errno set here. */
static _Atomic int fail_write, fail_sync;
static int inject(void *ctx, enum postlog_io op)
{
    (void)ctx;
    return atomic_exchange(op == POSTLOG_IO_WRITE ? &fail_write : &fail_sync, 0);
}

START_TEST(test_failures)
{
    static struct journal j = { .mu = PTHREAD_MUTEX_INITIALIZER };
    struct postlog_opts o = { .fault = inject };
    struct postlog *log = open_journaled(&o, &j, NEVER);
    journal_add(&j, "kept", 3600);
    ck_assert_int_eq(append1(log, "kept", 3600), 0);

    /* A full disk: that append fails, the next one works. */
    atomic_store(&fail_write, ENOSPC);
    ck_assert_int_eq(append1(log, "refused", 3600), ENOSPC);
    struct postlog_info pi;
    postlog_info(log, &pi);
    ck_assert_int_eq(pi.broken, 0);
    ck_assert_uint_eq(pi.failures, 1);
    ck_assert_int_eq(append1(log, "next", 3600), 0);
    journal_add(&j, "next", 3600);

    /* A failed fdatasync: refused until a rewrite from the journal has repaired the file. */
    atomic_store(&fail_sync, EIO);
    ck_assert_int_eq(append1(log, "unsynced", 3600), EIO);
    for (int waited = 0; waited < 10000; waited++) {
        postlog_info(log, &pi);
        if (pi.broken == 0)
            break;
        usleep(1000);
    }
    ck_assert_int_eq(pi.broken, 0);
    ck_assert_uint_ge(pi.compactions, 1);
    ck_assert_int_eq(append1(log, "repaired", 3600), 0);
    postlog_close(log);

    log = reopen(&o);
    ck_assert(!opened.corrupt);
    ck_assert(has(&got, "kept"));
    ck_assert(has(&got, "next"));
    ck_assert(has(&got, "repaired"));
    ck_assert(!has(&got, "refused"));
    ck_assert(!has(&got, "unsynced"));
    postlog_close(log);

    /* A broken log answers at once, before the rewrite, with the sync's error. */
    struct postlog_opts o2 = { .ttl = 3600, .fault = inject };   /* no walk: stays broken */
    log = reopen(&o2);
    atomic_store(&fail_sync, EIO);
    ck_assert_int_eq(append1(log, "x", 3600), EIO);
    ck_assert_int_eq(append1(log, "y", 3600), EIO);
    static struct done_count never = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 };
    const char *z = "z";
    size_t zl = 1;
    ck_assert_int_eq(postlog_submit(log, 1, &z, &zl, 3600, count_done, &never), EIO);
    postlog_info(log, &pi);
    ck_assert_int_eq(pi.broken, EIO);
    ck_assert_uint_eq(pi.batches, 1);               /* the later ones never reached the disk */
    ck_assert_uint_eq(pi.failures, 3);
    ck_assert_uint_eq(never.calls, 0);
    postlog_close(log);
}
END_TEST

CHECK_SUITE("postlog",
    CHECK_CASE("core", .setup = setup, .teardown = teardown, .timeout = 120),
    CHECK_TEST(test_round_trip),
    CHECK_TEST(test_wall_clock_expiry),
    CHECK_TEST(test_torn_tail),
    CHECK_TEST(test_prealloc),
    CHECK_TEST(test_cut_while_stopped),
    CHECK_TEST(test_damage_in_the_middle),
    CHECK_TEST(test_compaction_keeps_the_live),
    CHECK_TEST(test_compaction_by_itself),
    CHECK_TEST(test_compaction_of_a_racing_tail),
    CHECK_TEST(test_group_commit),
    CHECK_TEST(test_submit),
    CHECK_TEST(test_gather),
    CHECK_TEST(test_compaction_waits_for_done_callbacks),
    CHECK_TEST(test_failures),
)
