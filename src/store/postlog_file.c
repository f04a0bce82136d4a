/*
 * The POST log's file format: building records, and reading, checking and
 * repairing a file at open (contract in postlog_file.h).  The group commit
 * and rewrites, above it, are postlog.c.
 *
 * The file: a 16-byte header ("bgpostlg", u32 version, u32 seal word),
 * then records:
 *
 *   u32 body_len  u32 count  body  u64 XXH64(everything before it in the record)
 *   body = count x { u64 expires (unix seconds)  u32 len  len bytes of ID }
 *
 * little-endian.  Each append is one or more records; a record is never
 * acknowledged before an fdatasync that followed its write, so a record that
 * is bad at the end of the file is the remains of an append no one was told
 * about, while a bad one followed by good ones is damage.
 *
 * But a file cut by someone else after the fdatasync ends the same way: a
 * reader cannot tell a torn append from a cut acknowledged one by the
 * records alone.  So a clean close seals the file: it appends a seal
 * record (count 0, body { u64 its own offset, u64 hold }) and then sets the
 * seal word to the latest expiry of any entry in the file.  The open after
 * it finds a seal word that is not 0: the file must end with that seal,
 * else it was cut (or changed) while stopped and any entry up to the seal
 * word may be lost.  A file in use has the word 0, so a crash leaves what
 * it always did: a torn append, cut off as never acknowledged.  The word is
 * also the hold: while entries may be missing (a cut was found) it names
 * until when, in the file in use, so that a crash does not forget it, and
 * the seal carries it through a clean restart.  Older versions of the
 * format wrote 0 there, and read a seal as a torn append.
 *
 * The file in use is kept written with zeros ahead of its records
 * (postlog_opts.prealloc), so that an append overwrites blocks the file
 * has and its fdatasync need not write the inode: the end of the records
 * is not the file's size but the first record head that reads zero (a
 * record has count >= 1, so zeros are never one).  Zeros after the last
 * record are no torn append (torn_bytes counts the bytes up to the last
 * one that is not zero) and stay for the next appends; a seal is the
 * file's last bytes (the zeros are cut before it).  Readers before the
 * zeros read them as a torn append and cut them: no new version.
 */
#include "postlog_file.h"

#include "durable.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#define LOG_VERSION 1
#define SUM_SEED UINT64_C(0x62677073746c6f67)
/* The header's seal word, and the seal record a clean close appends. */
#define SEAL_WORD_AT 12
#define SEAL_BODY 16
#define SEAL_LEN (POSTLOG_REC_HEAD + SEAL_BODY + POSTLOG_REC_SUM)

static const unsigned char magic[8] = { 'b', 'g', 'p', 'o', 's', 't', 'l', 'g' };

/* ------------------------------------------------------------ encoding -- */

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint64_t get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

bool postlog_file_reserve(struct postlog_buf *b, size_t more)
{
    if (b->cap - b->len >= more)
        return true;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->len < more) {
        if (cap > SIZE_MAX / 2)
            return false;
        cap *= 2;
    }
    unsigned char *p = realloc(b->p, cap);
    if (p == NULL)
        return false;
    b->p = p;
    b->cap = cap;
    return true;
}

/* The seal word's value for hold (unix seconds), or the latest expiry: it fits 32 bits until 2106. */
static uint32_t seal_word(uint64_t t)
{
    return t > UINT32_MAX ? UINT32_MAX : (uint32_t)t;
}

void postlog_file_header(unsigned char *h, uint64_t hold)
{
    memcpy(h, magic, sizeof magic);
    put32(h + 8, LOG_VERSION);
    put32(h + SEAL_WORD_AT, seal_word(hold));
}

/* The seal record of a file whose records end at at, keeping hold. */
static void seal_record(unsigned char *s, uint64_t at, uint64_t hold)
{
    put32(s, SEAL_BODY);
    put32(s + 4, 0);
    put64(s + 8, at);
    put64(s + 16, hold);
    put64(s + POSTLOG_REC_HEAD + SEAL_BODY, XXH64(s, POSTLOG_REC_HEAD + SEAL_BODY, SUM_SEED));
}

/* Write the seal word (fdatasync'ed).  0 or an errno value. */
static int write_seal_word(int fd, uint32_t word)
{
    unsigned char w[4];
    put32(w, word);
    int err = durable_write_all(fd, w, sizeof w, SEAL_WORD_AT);
    if (err == 0 && fdatasync(fd) != 0)
        err = errno;
    return err;
}

int postlog_file_seal(int fd, uint64_t end, uint64_t hold, uint64_t latest)
{
    unsigned char s[SEAL_LEN];
    seal_record(s, end, hold);
    /* The zeros written ahead go first: a seal is the file's last bytes. */
    if (ftruncate(fd, (off_t)end) != 0)
        return errno;
    /* The seal first: a word that promises a seal the file lacks reads as a cut (a false alarm). */
    int err = durable_write_all(fd, s, sizeof s, end);
    if (err == 0 && fdatasync(fd) != 0)
        err = errno;
    if (err != 0) {
        if (ftruncate(fd, (off_t)end) != 0) {
            /* A torn seal at the end reads as a torn append: harmless. */
        }
        return err;
    }
    uint64_t word = latest > hold ? latest : hold;
    return write_seal_word(fd, word ? seal_word(word) : 1);
}


void postlog_file_rec_close(struct postlog_rec *r)
{
    if (r->start == SIZE_MAX)
        return;
    unsigned char *s = r->b->p + r->start;
    size_t body = r->b->len - r->start - POSTLOG_REC_HEAD;
    put32(s, (uint32_t)body);
    put32(s + 4, r->count);
    put64(r->b->p + r->b->len, XXH64(s, POSTLOG_REC_HEAD + body, SUM_SEED));
    r->b->len += POSTLOG_REC_SUM;
    r->start = SIZE_MAX;
}

/* False on no memory (the buffer then holds a partial record: drop it). */
bool postlog_file_rec_add(struct postlog_rec *r, const char *id, size_t len, uint64_t expires)
{
    if (!postlog_file_reserve(r->b, POSTLOG_REC_HEAD + POSTLOG_ENTRY_HEAD + len + POSTLOG_REC_SUM))
        return false;
    if (r->start == SIZE_MAX) {
        r->start = r->b->len;
        r->count = 0;
        r->b->len += POSTLOG_REC_HEAD;
    }
    unsigned char *e = r->b->p + r->b->len;
    put64(e, expires);
    put32(e + 8, (uint32_t)len);
    memcpy(e + POSTLOG_ENTRY_HEAD, id, len);
    r->b->len += POSTLOG_ENTRY_HEAD + len;
    r->count++;
    if (r->b->len - r->start - POSTLOG_REC_HEAD >= POSTLOG_REC_BODY_MAX) {
        /* The checksum's room was reserved above. */
        postlog_file_rec_close(r);
    }
    return true;
}

/*
 * The length of the well-formed record at off (its checksum right, its
 * entries filling its body exactly), or 0.
 */
static size_t record_at(const unsigned char *d, size_t size, size_t off)
{
    if (size - off < POSTLOG_REC_HEAD + POSTLOG_REC_SUM)
        return 0;
    uint32_t body = get32(d + off), count = get32(d + off + 4);
    if (count == 0 || body > size - off - POSTLOG_REC_HEAD - POSTLOG_REC_SUM
        || (uint64_t)count * POSTLOG_ENTRY_HEAD > body)
        return 0;
    size_t q = off + POSTLOG_REC_HEAD, end = q + body;
    for (uint32_t i = 0; i < count; i++) {
        if (end - q < POSTLOG_ENTRY_HEAD)
            return 0;
        uint32_t len = get32(d + q + 8);
        if (len > POSTLOG_MAX_ID_LEN || end - q - POSTLOG_ENTRY_HEAD < len)
            return 0;
        q += POSTLOG_ENTRY_HEAD + len;
    }
    if (q != end || XXH64(d + off, POSTLOG_REC_HEAD + body, SUM_SEED) != get64(d + end))
        return 0;
    return POSTLOG_REC_HEAD + body + POSTLOG_REC_SUM;
}

/* ------------------------------------------------------------- files -- */

/*
 * A new file beside path (path + ".tmp.<pid>.<16 hex>", the names
 * snapshot_clean_temps removes after a crash) holding data: created, written
 * and fsync'ed.  Returns its descriptor (the name in tmp), or -1 with the
 * errno value in *err and nothing left behind.
 */
int postlog_file_temp(const char *path, const unsigned char *data, size_t len, char *tmp,
                      size_t tmplen, int *err)
{
    int fd = durable_temp_open(path, tmp, tmplen, err);
    if (fd < 0)
        return -1;
    *err = durable_write_all(fd, data, len, 0);
    if (*err == 0 && fsync(fd) != 0)
        *err = errno;
    if (*err != 0) {
        close(fd);
        unlink(tmp);
        return -1;
    }
    return fd;
}

/* ------------------------------------------------------------ opening -- */

/*
 * Whether d (size bytes, size < POSTLOG_HEADER_LEN) is the start of a
 * header: what is left of a log cut shorter than its header.
 */
static bool header_prefix(const unsigned char *d, size_t size)
{
    unsigned char h[POSTLOG_HEADER_LEN];
    postlog_file_header(h, 0);
    return size == 0 || memcmp(d, h, size < SEAL_WORD_AT ? size : SEAL_WORD_AT) == 0;
}

/* Whether the file's last bytes, from off, are the seal of its records ending at off; *hold its hold. */
static bool seal_at(const unsigned char *d, size_t size, size_t off, uint64_t *hold)
{
    unsigned char s[SEAL_LEN];
    if (size - off != SEAL_LEN)
        return false;
    seal_record(s, off, get64(d + off + 16));
    if (memcmp(s, d + off, SEAL_LEN) != 0)
        return false;
    *hold = get64(d + off + 16);
    return true;
}

/*
 * Give the entries of the well-formed records in [POSTLOG_HEADER_LEN, end)
 * to each; *latest gets the latest expiry among all of them.
 */
static bool replay(const unsigned char *d, size_t end, uint64_t now, uint64_t ttl,
                   postlog_entry_fn each, void *ctx, struct postlog_opened *r, uint64_t *live,
                   uint64_t *latest)
{
    size_t off = POSTLOG_HEADER_LEN;
    while (off < end) {
        uint32_t body = get32(d + off), count = get32(d + off + 4);
        size_t q = off + POSTLOG_REC_HEAD;
        for (uint32_t i = 0; i < count; i++) {
            uint64_t expires = get64(d + q);
            uint32_t len = get32(d + q + 8);
            if (expires > *latest)
                *latest = expires;
            if (expires > now) {
                uint64_t left = expires - now;
                if (left > ttl)
                    left = ttl;
                if (!each(ctx, (const char *)d + q + POSTLOG_ENTRY_HEAD, len, left))
                    return false;
                r->entries++;
                *live += POSTLOG_ENTRY_HEAD + len;
            } else {
                r->expired++;
            }
            q += POSTLOG_ENTRY_HEAD + len;
        }
        off += POSTLOG_REC_HEAD + body + POSTLOG_REC_SUM;
    }
    return true;
}

/* A file shorter than its header (*fd, size bytes of d): a header again, with the hold. */
static int load_short(int fd, const unsigned char *d, uint64_t size, uint64_t now, uint64_t ttl,
                      struct postlog_opened *r)
{
    if (!header_prefix(d, (size_t)size)) {
        snprintf(r->why, sizeof r->why, "not a bloomguard POST log (%llu bytes, no header)",
                 (unsigned long long)size);
        return EINVAL;
    }
    /*
     * The log is created whole (a temporary file renamed into place), so
     * this is what is left of a cut: whatever it held is unknown.
     */
    r->cut = true;
    r->lost_until = now + ttl;
    r->torn_bytes = size;
    snprintf(r->why, sizeof r->why, "only %llu bytes, shorter than its header: it was cut, and "
             "what it held is unknown", (unsigned long long)size);
    unsigned char h[POSTLOG_HEADER_LEN];
    postlog_file_header(h, r->lost_until);
    int err = durable_write_all(fd, h, sizeof h, 0);
    if (err == 0 && fdatasync(fd) != 0)
        err = errno;
    if (err != 0)
        snprintf(r->why, sizeof r->why, "cannot write its header: %s", strerror(err));
    return err;
}

/*
 * Replace the damaged file at path by its first good bytes of d, under a
 * header with r->lost_until; the damaged one kept as path + ".corrupt".
 * *fd becomes the new file's.  0 or an errno value.
 */
static int set_aside(const char *path, const char *dir, int *fd, const unsigned char *d,
                     size_t good, struct postlog_opened *r)
{
    int err = 0;
    size_t tl = strlen(path) + DURABLE_TEMP_EXTRA;
    char *aside = malloc(tl), *tmp = malloc(tl);
    unsigned char *copy = malloc(good);
    if (aside == NULL || tmp == NULL || copy == NULL) {
        err = ENOMEM;
        goto out;
    }
    /* Kept for a post-mortem: a hard link, so it costs no copy. */
    snprintf(aside, tl, "%s.corrupt", path);
    unlink(aside);
    if (link(path, aside) != 0) {
        /* Best effort: a file system without hard links keeps no copy. */
    }
    memcpy(copy, d, good);
    postlog_file_header(copy, r->lost_until);
    int nfd = postlog_file_temp(path, copy, good, tmp, tl, &err);
    if (nfd >= 0 && (err = durable_install(tmp, path, dir)) == 0) {
        close(*fd);
        *fd = nfd;
    } else if (nfd >= 0) {
        close(nfd);
    }
out:
    free(aside);
    free(tmp);
    free(copy);
    return err;
}

/*
 * Read the file on fd (size bytes), give its entries to each, tell a cut
 * from a torn append, and repair it: cut a torn tail or the seal, or set a
 * damaged file aside and put its good prefix in its place (then *fd is the
 * new file's); the seal word then holds r->lost_until.  0, or an errno
 * value with r->why.
 */
int postlog_file_load(const char *path, const char *dir, int *fd, uint64_t size, uint64_t now,
                      uint64_t ttl, postlog_entry_fn each, void *ctx, struct postlog_opened *r,
                      uint64_t *live_bytes, uint64_t *latest, uint64_t *end)
{
    int err = 0;
    unsigned char *d = NULL;
    uint64_t live = POSTLOG_HEADER_LEN, hold = 0;
    *latest = 0;
    if (size > SIZE_MAX) {
        snprintf(r->why, sizeof r->why, "too large to read (%llu bytes)", (unsigned long long)size);
        return EFBIG;
    }
    if (size > 0) {
        d = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, *fd, 0);
        if (d == MAP_FAILED) {
            err = errno;
            snprintf(r->why, sizeof r->why, "cannot read it: %s", strerror(err));
            return err;
        }
    }
    if (size < POSTLOG_HEADER_LEN) {
        if ((err = load_short(*fd, d, size, now, ttl, r)) == 0)
            *end = POSTLOG_HEADER_LEN;
        goto out;
    }
    if (memcmp(d, magic, sizeof magic) != 0) {
        snprintf(r->why, sizeof r->why, "not a bloomguard POST log (no \"bgpostlg\" header)");
        err = EINVAL;
        goto out;
    }
    if (get32(d + 8) != LOG_VERSION) {
        snprintf(r->why, sizeof r->why, "a POST log of format version %u (this bloomguard reads %u)",
                 get32(d + 8), LOG_VERSION);
        err = EINVAL;
        goto out;
    }
    uint32_t word = get32(d + SEAL_WORD_AT);
    size_t off = POSTLOG_HEADER_LEN, n;
    while (off < size && (n = record_at(d, (size_t)size, off)) > 0)
        off += n;
    size_t good = off, used = (size_t)size;
    /* A seal is the file's last bytes (its checksum may end in a zero byte). */
    r->sealed = good < size && seal_at(d, (size_t)size, good, &hold);
    /*
     * The zeros written ahead (postlog_file.h) are not a torn append, and
     * stay.  (A torn append's own last zero bytes cannot be told from
     * them: not counted in torn_bytes either, a figure for the log line.)
     */
    while (!r->sealed && used > good && d[used - 1] == 0)
        used--;
    /* Is there a good record after the bad one?  Then it is damage, not a torn append. */
    for (size_t p = good + 1; !r->sealed && good < used
         && p + POSTLOG_REC_HEAD + POSTLOG_REC_SUM <= size && p < used && !r->corrupt; p++)
        if (record_at(d, (size_t)size, p) > 0)
            r->corrupt = true;
    if (!replay(d, good, now, ttl, each, ctx, r, &live, latest)) {
        snprintf(r->why, sizeof r->why, "the caller refused an entry");
        err = ECANCELED;
        goto out;
    }
    /* A lost entry would have been read back for at most ttl: no need to wait longer. */
    uint64_t lost = 0, cap = now + ttl;
    if (r->sealed) {
        lost = hold < cap ? hold : cap;     /* a hold the last run kept (a cut before it) */
    } else if (word != 0) {
        r->cut = true;
        lost = word < cap ? word : cap;
        snprintf(r->why, sizeof r->why, "sealed at a clean stop (or holding), but %llu bytes "
                 "long without its seal: it was cut or changed while bloomguard was stopped",
                 (unsigned long long)size);
    }
    if (r->corrupt) {
        lost = cap;
        r->corrupt_offset = good;
        r->lost_bytes = used - good;     /* not the zeros written ahead after the records */
        snprintf(r->why, sizeof r->why, "a damaged record at byte %zu of %llu, with good ones "
                 "after it: %llu bytes from there are dropped", good, (unsigned long long)size,
                 (unsigned long long)r->lost_bytes);
    }
    r->lost_until = lost > now ? lost : 0;
    if (r->corrupt) {
        if ((err = set_aside(path, dir, fd, d, good, r)) != 0)
            snprintf(r->why, sizeof r->why, "a damaged record at byte %zu, and the repaired "
                     "file cannot be written: %s", good, strerror(err));
        goto done;
    }
    if (good < used) {
        if (!r->sealed)
            r->torn_bytes = used - good;
        /*
         * The tail first: a crash before the word below reads as a cut, a
         * false alarm.  The zeros after it go too (a torn append is rare):
         * the writer writes them again.
         */
        if (ftruncate(*fd, (off_t)good) != 0 || fdatasync(*fd) != 0) {
            err = errno;
            snprintf(r->why, sizeof r->why, "cannot cut off %s: %s",
                     r->sealed ? "its seal" : "an incomplete last append", strerror(err));
            goto out;
        }
    }
    uint32_t want = seal_word(r->lost_until);
    if (word != want && (err = write_seal_word(*fd, want)) != 0)
        snprintf(r->why, sizeof r->why, "cannot write its header: %s", strerror(err));
done:
    *live_bytes = live;
    *end = good;
out:
    if (d != NULL)
        munmap(d, (size_t)size);
    return err;
}

int postlog_file_copy(int from_fd, int to_fd, uint64_t from, uint64_t to, uint64_t at)
{
    unsigned char chunk[65536];
    while (from < to) {
        size_t want = to - from < sizeof chunk ? (size_t)(to - from) : sizeof chunk;
        ssize_t got = pread(from_fd, chunk, want, (off_t)from);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return got < 0 ? errno : EIO;
        int err = durable_write_all(to_fd, chunk, (size_t)got, at);
        if (err != 0)
            return err;
        from += (uint64_t)got;
        at += (uint64_t)got;
    }
    return 0;
}
