/*
 * Snapshot files and streams (format in snapshot.h).  One generator makes
 * the bytes for a file and for a peer alike, reading the filter's bits
 * straight from the live filter, so a snapshot never needs a second copy of
 * the filter; one parser reads a file, a socket or memory, and trusts no
 * length before it has checked it against the size of its input.
 */
#include "snapshot.h"

#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

/* Bytes of a journal entry besides its id: ttl_left and id_len. */
#define ENTRY_HEAD 12u
/* The header checksum and the trailer. */
#define SUM_LEN 8u
/* Chunk size for copying the bulk between the filter and a file. */
#define CHUNK ((size_t)1 << 20)

/* Offsets of the fixed header fields (the table in snapshot.h): both versions, */
enum {
    OFF_MAGIC = 0, OFF_VERSION = 8, OFF_HEADER_LEN = 12, OFF_TOTAL_LEN = 16,
    OFF_HORIZON = 24, OFF_CREATED = 32, OFF_FPP = 48, OFF_FILTER_LEN = 80,
    OFF_JOURNAL_COUNT = 88, OFF_JOURNAL_LEN = 96,
    OFF_NAME_LEN = 104, OFF_TABLE_LEN = 106, OFF_COLUMN_LEN = 108, OFF_POSITION_LEN = 110
};
/* version 2 only, */
enum {
    OFF_EXPANSION = 40, OFF_TIGHTENING = 56, OFF_MAX_LAYERS = 64, OFF_LAYERS = 68,
    OFF_KV_COUNT = 70, OFF_KV_LEN = 72, OFF_RESERVED2 = 76
};
/* version 1 only, */
enum { OFF_CAPACITY = 40, OFF_BLOCKS = 56, OFF_PROBES = 64, OFF_RESERVED1 = 68, OFF_ITEMS = 72 };
/* and a layer's parameters, from the start of its 48 bytes. */
enum {
    LAY_CAPACITY = 0, LAY_FPP = 8, LAY_SHARE = 16, LAY_BLOCKS = 24, LAY_ITEMS = 32,
    LAY_PROBES = 40, LAY_RESERVED = 44
};
/* The head of a metadata pair: key_len and value_len. */
#define KV_HEAD 4u

/* The strings after the fixed header, in this order. */
enum { STR_NAME, STR_TABLE, STR_COLUMN, STR_POSITION, NSTR };
static const size_t str_max[NSTR] = { SNAPSHOT_MAX_STRING, SNAPSHOT_MAX_STRING,
                                      SNAPSHOT_MAX_STRING, SNAPSHOT_MAX_POSITION };

static void put16(unsigned char *p, uint16_t v) { v = htole16(v); memcpy(p, &v, 2); }
static void put32(unsigned char *p, uint32_t v) { v = htole32(v); memcpy(p, &v, 4); }
static void put64(unsigned char *p, uint64_t v) { v = htole64(v); memcpy(p, &v, 8); }
static uint16_t get16(const unsigned char *p) { uint16_t v; memcpy(&v, p, 2); return le16toh(v); }
static uint32_t get32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return le32toh(v); }
static uint64_t get64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return le64toh(v); }

static uint64_t fpp_bits(double p) { uint64_t v; memcpy(&v, &p, 8); return v; }
static double bits_fpp(uint64_t v) { double p; memcpy(&p, &v, 8); return p; }

const char *snapshot_strstatus(enum snapshot_status st)
{
    switch (st) {
    case SNAPSHOT_OK: return "ok";
    case SNAPSHOT_MISSING: return "missing";
    case SNAPSHOT_IO: return "unreadable";
    case SNAPSHOT_TRUNCATED: return "truncated";
    case SNAPSHOT_BAD_MAGIC: return "not a snapshot";
    case SNAPSHOT_OTHER_VERSION: return "other format version";
    case SNAPSHOT_BAD_CHECKSUM: return "checksum mismatch";
    case SNAPSHOT_CORRUPT: return "corrupt";
    case SNAPSHOT_OTHER_NAME: return "other filter name";
    case SNAPSHOT_OTHER_TABLE: return "other table";
    case SNAPSHOT_OTHER_COLUMN: return "other column";
    case SNAPSHOT_OTHER_PARAMS: return "other filter parameters";
    case SNAPSHOT_NOMEM: return "out of memory";
    }
    return "unknown snapshot status";
}

/* ================================================================ writing */

struct snapshot_stream {
    const struct filter *f;
    unsigned char *head;        /* the whole header */
    size_t head_len;
    uint64_t filter_len;
    unsigned layers;            /* as exported when the stream was made */
    uint64_t layer_end[FILTER_MAX_LAYERS];  /* end of each layer's image in the filter section */
    unsigned char *journal;     /* the journal section, serialised */
    size_t journal_len, journal_used;
    uint64_t journal_count;
    uint64_t pos, total;
    XXH64_state_t sum;          /* of every byte produced before the trailer */
    unsigned char trailer[SUM_LEN];
};

static bool journal_count(void *ctx, uint64_t n, uint64_t bytes)
{
    struct snapshot_stream *s = ctx;
    /* Bounded by the journal's limits (10^8 entries, 16 GiB): no overflow. */
    uint64_t len = n * ENTRY_HEAD + bytes;
    if (len > SIZE_MAX)
        return false;
    s->journal = malloc(len ? (size_t)len : 1);
    s->journal_len = (size_t)len;
    s->journal_count = n;
    return s->journal != NULL;
}

static bool journal_entry(void *ctx, const char *id, size_t len, uint64_t ttl_left)
{
    struct snapshot_stream *s = ctx;
    /* An id longer than 4 GiB cannot be stored (the journal never holds one). */
    if (len > UINT32_MAX || s->journal_len - s->journal_used < ENTRY_HEAD + len)
        return false;
    unsigned char *p = s->journal + s->journal_used;
    put64(p, ttl_left);
    put32(p + 8, (uint32_t)len);
    memcpy(p + ENTRY_HEAD, id, len);
    s->journal_used += ENTRY_HEAD + len;
    return true;
}

/* Bytes of the metadata section, or 0 with errno EINVAL when it breaks the rules. */
static size_t kv_bytes(const struct snapshot_kv *kv, size_t n)
{
    size_t len = 0;
    if (n > SNAPSHOT_MAX_KV || (n > 0 && kv == NULL))
        goto bad;
    for (size_t i = 0; i < n; i++) {
        if (kv[i].key == NULL || kv[i].value == NULL)
            goto bad;
        size_t kl = strnlen(kv[i].key, SNAPSHOT_MAX_KV_KEY + 1);
        size_t vl = strnlen(kv[i].value, SNAPSHOT_MAX_KV_VALUE + 1);
        if (kl == 0 || kl > SNAPSHOT_MAX_KV_KEY || vl > SNAPSHOT_MAX_KV_VALUE)
            goto bad;
        for (size_t j = 0; j < i; j++)
            if (strcmp(kv[j].key, kv[i].key) == 0)
                goto bad;
        len += KV_HEAD + kl + vl;
    }
    if (len > SNAPSHOT_MAX_KV_BYTES)
        goto bad;
    return len;
bad:
    errno = EINVAL;
    return 0;
}

struct snapshot_stream *snapshot_stream_new(const struct snapshot_meta *m, const struct filter *f,
                                            struct pending *journal, uint64_t now)
{
    const char *str[NSTR] = { m->name ? m->name : "", m->table ? m->table : "",
                              m->column ? m->column : "", m->position ? m->position : "" };
    size_t len[NSTR], strings = 0;
    for (int i = 0; i < NSTR; i++) {
        /* A C string holds no NUL byte: only the length can be wrong. */
        len[i] = strnlen(str[i], str_max[i] + 1);
        if (len[i] > str_max[i]) {
            errno = EINVAL;
            return NULL;
        }
        strings += len[i];
    }
    errno = 0;
    size_t kv_len = kv_bytes(m->kv, m->n_kv);
    if (errno == EINVAL)
        return NULL;
    struct filter_params *fp = NULL;
    struct snapshot_stream *s = calloc(1, sizeof(*s));
    if (s == NULL)
        goto nomem;
    s->f = f;
    /*
     * The journal first, then (as the caller reads) the bits: an ID is in
     * the journal before it is in the filter (ids.c's order), and the reader
     * replays the journal into the filter, so an ID POSTed while the bits
     * are copied is either in both or in neither.
     */
    if (journal != NULL) {
        if (!pending_export(journal, now, journal_count, journal_entry, s)
            || s->journal_used != s->journal_len)
            goto nomem;
    } else if (!journal_count(s, 0, 0)) {
        goto nomem;
    }
    fp = malloc(sizeof(*fp));
    if (fp == NULL)
        goto nomem;
    filter_export(f, fp);
    s->layers = fp->layers;
    for (unsigned i = 0; i < fp->layers; i++) {
        s->filter_len += fp->layer[i].blocks * FILTER_BLOCK_BYTES;
        s->layer_end[i] = s->filter_len;
    }
    size_t layers_at = SNAPSHOT_FIXED_LEN + strings;
    size_t kv_at = layers_at + (size_t)SNAPSHOT_LAYER_LEN * fp->layers;
    s->head_len = kv_at + kv_len + SUM_LEN;
    s->head = calloc(1, s->head_len);
    if (s->head == NULL)
        goto nomem;
    s->total = s->head_len + s->filter_len + s->journal_len + SUM_LEN;

    unsigned char *h = s->head;
    memcpy(h + OFF_MAGIC, SNAPSHOT_MAGIC, SNAPSHOT_MAGIC_LEN);
    put32(h + OFF_VERSION, SNAPSHOT_VERSION);
    put32(h + OFF_HEADER_LEN, (uint32_t)s->head_len);
    put64(h + OFF_TOTAL_LEN, s->total);
    put64(h + OFF_HORIZON, m->horizon_ms);
    put64(h + OFF_CREATED, m->created);
    put64(h + OFF_EXPANSION, fpp_bits(fp->growth.expansion));
    put64(h + OFF_FPP, fpp_bits(fp->target_fpp));
    put64(h + OFF_TIGHTENING, fpp_bits(fp->growth.tightening));
    put32(h + OFF_MAX_LAYERS, fp->growth.max_layers);
    put16(h + OFF_LAYERS, (uint16_t)fp->layers);
    put16(h + OFF_KV_COUNT, (uint16_t)m->n_kv);
    put32(h + OFF_KV_LEN, (uint32_t)kv_len);
    put64(h + OFF_FILTER_LEN, s->filter_len);
    put64(h + OFF_JOURNAL_COUNT, s->journal_count);
    put64(h + OFF_JOURNAL_LEN, s->journal_len);
    put16(h + OFF_NAME_LEN, (uint16_t)len[STR_NAME]);
    put16(h + OFF_TABLE_LEN, (uint16_t)len[STR_TABLE]);
    put16(h + OFF_COLUMN_LEN, (uint16_t)len[STR_COLUMN]);
    put16(h + OFF_POSITION_LEN, (uint16_t)len[STR_POSITION]);
    size_t at = SNAPSHOT_FIXED_LEN;
    for (int i = 0; i < NSTR; i++) {
        memcpy(h + at, str[i], len[i]);
        at += len[i];
    }
    for (unsigned i = 0; i < fp->layers; i++, at += SNAPSHOT_LAYER_LEN) {
        const struct filter_layer_params *l = &fp->layer[i];
        put64(h + at + LAY_CAPACITY, l->capacity);
        put64(h + at + LAY_FPP, fpp_bits(l->target_fpp));
        put64(h + at + LAY_SHARE, fpp_bits(l->share_fpp));
        put64(h + at + LAY_BLOCKS, l->blocks);
        put64(h + at + LAY_ITEMS, l->items);
        put32(h + at + LAY_PROBES, l->probes);
    }
    for (size_t i = 0; i < m->n_kv; i++) {
        size_t kl = strlen(m->kv[i].key), vl = strlen(m->kv[i].value);
        put16(h + at, (uint16_t)kl);
        put16(h + at + 2, (uint16_t)vl);
        memcpy(h + at + KV_HEAD, m->kv[i].key, kl);
        memcpy(h + at + KV_HEAD + kl, m->kv[i].value, vl);
        at += KV_HEAD + kl + vl;
    }
    put64(h + at, XXH64(h, at, 0));
    XXH64_reset(&s->sum, 0);
    free(fp);
    return s;

nomem:
    free(fp);
    snapshot_stream_free(s);
    errno = ENOMEM;
    return NULL;
}

uint64_t snapshot_stream_size(const struct snapshot_stream *s)
{
    return s->total;
}

size_t snapshot_stream_read(struct snapshot_stream *s, void *buf, size_t cap)
{
    unsigned char *out = buf;
    size_t done = 0;
    uint64_t bits_end = s->head_len + s->filter_len;
    uint64_t journal_end = bits_end + s->journal_len;
    while (done < cap && s->pos < s->total) {
        size_t want = cap - done;
        uint64_t pos = s->pos, n;
        if (pos < s->head_len) {
            n = s->head_len - pos < want ? s->head_len - pos : want;
            memcpy(out + done, s->head + pos, (size_t)n);
        } else if (pos < bits_end) {
            /* The layer pos is in, and no further than its end. */
            uint64_t in = pos - s->head_len, start = 0;
            unsigned l = 0;
            while (in >= s->layer_end[l])
                start = s->layer_end[l++];
            n = s->layer_end[l] - in < want ? s->layer_end[l] - in : want;
            filter_bits_read(s->f, l, in - start, out + done, (size_t)n);
        } else if (pos < journal_end) {
            n = journal_end - pos < want ? journal_end - pos : want;
            memcpy(out + done, s->journal + (pos - bits_end), (size_t)n);
        } else {
            if (pos == journal_end)     /* every byte before it is summed */
                put64(s->trailer, XXH64_digest(&s->sum));
            n = s->total - pos < want ? s->total - pos : want;
            memcpy(out + done, s->trailer + (pos - journal_end), (size_t)n);
        }
        if (pos < journal_end)
            XXH64_update(&s->sum, out + done, (size_t)n);
        done += (size_t)n;
        s->pos += n;
    }
    return done;
}

void snapshot_stream_free(struct snapshot_stream *s)
{
    if (s == NULL)
        return;
    free(s->head);
    free(s->journal);
    free(s);
}

int snapshot_write_to(snapshot_write_fn write_fn, void *ctx, const struct snapshot_meta *m,
                      const struct filter *f, struct pending *journal, uint64_t now)
{
    int err = 0;
    unsigned char *buf = NULL;
    struct snapshot_stream *s = snapshot_stream_new(m, f, journal, now);
    if (s == NULL)
        return errno;
    buf = malloc(CHUNK);
    if (buf == NULL) {
        err = ENOMEM;
        goto out;
    }
    size_t n;
    while ((n = snapshot_stream_read(s, buf, CHUNK)) > 0) {
        errno = 0;
        if (!write_fn(ctx, buf, n)) {
            err = errno ? errno : EIO;
            goto out;
        }
    }
out:
    free(buf);
    snapshot_stream_free(s);
    return err;
}

static bool write_fd(void *ctx, const void *buf, size_t len)
{
    int fd = *(const int *)ctx;
    const char *p = buf;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = ENOSPC;
            return false;
        }
        p += w;
        len -= (size_t)w;
    }
    return true;
}

/* The directory of path ("." for a bare name): malloc'ed, NULL on no memory. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (slash == NULL)
        return strdup(".");
    if (slash == path)
        return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

static uint64_t random64(void)
{
    uint64_t r;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) == (ssize_t)sizeof r)
        return r;
    /* Uniqueness, not secrecy: O_EXCL catches the rare collision. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_nsec * UINT64_C(0x9e3779b97f4a7c15) ^ (uint64_t)ts.tv_sec;
}

int snapshot_write(const char *path, const struct snapshot_meta *m, const struct filter *f,
                   struct pending *journal, uint64_t now)
{
    int err = 0, fd = -1;
    size_t tmplen = strlen(path) + 64;
    char *tmp = malloc(tmplen), *dir = dir_of(path);
    if (tmp == NULL || dir == NULL) {
        err = ENOMEM;
        goto out;
    }
    for (int tries = 0; fd < 0 && tries < 8; tries++) {
        snprintf(tmp, tmplen, "%s.tmp.%ld.%016llx", path, (long)getpid(),
                 (unsigned long long)random64());
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST) {
            err = errno;
            goto out;           /* nothing created */
        }
    }
    if (fd < 0) {
        err = EEXIST;
        goto out;
    }
    err = snapshot_write_to(write_fd, &fd, m, f, journal, now);
    /* The data must be on disk before the name points at it. */
    if (err == 0 && fsync(fd) != 0)
        err = errno;
    if (close(fd) != 0 && err == 0)
        err = errno;
    fd = -1;
    if (err == 0 && rename(tmp, path) != 0)
        err = errno;
    if (err != 0) {
        unlink(tmp);
        goto out;
    }
    /* And the rename on disk before we say the snapshot is written. */
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || fsync(dfd) != 0)
        err = errno;
    if (dfd >= 0)
        close(dfd);
out:
    free(tmp);
    free(dir);
    return err;
}

/* Whether name is base + ".tmp." + digits + "." + 16 hex digits. */
static bool is_temp_of(const char *name, const char *base)
{
    size_t bl = strlen(base);
    if (strncmp(name, base, bl) != 0 || strncmp(name + bl, ".tmp.", 5) != 0)
        return false;
    const char *p = name + bl + 5;
    if (*p < '0' || *p > '9')
        return false;
    while (*p >= '0' && *p <= '9')
        p++;
    if (*p++ != '.')
        return false;
    size_t hex = strspn(p, "0123456789abcdef");
    return hex == 16 && p[16] == '\0';
}

int snapshot_clean_temps(const char *path)
{
    char *dir = dir_of(path);
    if (dir == NULL) {
        errno = ENOMEM;
        return -1;
    }
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    DIR *d = opendir(dir);
    free(dir);
    if (d == NULL)
        return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (is_temp_of(de->d_name, base) && unlinkat(dirfd(d), de->d_name, 0) == 0)
            n++;
    closedir(d);
    return n;
}

/* ================================================================ reading */

/* An input of known size: a descriptor or memory. */
struct input {
    int fd;                     /* -1: memory */
    const unsigned char *mem;
    uint64_t size, pos;
    XXH64_state_t sum;          /* of every byte read so far */
};

/*
 * Read len bytes (the caller has checked that they lie within size) and sum
 * them.  TRUNCATED if the input ends first (a file that shrank, a peer that
 * hung up), IO on a read error.
 */
static enum snapshot_status take(struct input *in, void *buf, size_t len)
{
    if (len == 0)
        return SNAPSHOT_OK;
    if (in->fd < 0) {
        memcpy(buf, in->mem + in->pos, len);
    } else {
        size_t got = 0;
        while (got < len) {
            ssize_t r = read(in->fd, (char *)buf + got, len - got);
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0)
                return SNAPSHOT_IO;
            if (r == 0)
                return SNAPSHOT_TRUNCATED;
            got += (size_t)r;
        }
    }
    XXH64_update(&in->sum, buf, len);
    in->pos += len;
    return SNAPSHOT_OK;
}

static enum snapshot_status say(char *why, size_t whylen, enum snapshot_status st,
                                const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static enum snapshot_status say(char *why, size_t whylen, enum snapshot_status st,
                                const char *fmt, ...)
{
    if (why != NULL && whylen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, whylen, fmt, ap);
        va_end(ap);
    }
    return st;
}

static enum snapshot_status io_status(enum snapshot_status st, char *why, size_t whylen,
                                      const char *what, int err)
{
    if (st == SNAPSHOT_TRUNCATED)
        return say(why, whylen, st, "the input ended inside the %s", what);
    return say(why, whylen, st, "reading the %s: %s", what, strerror(err));
}

/*
 * A stored string fit for a log line: a peer's snapshot may hold any bytes,
 * so control characters, quotes and backslashes become '?'.
 */
static void printable(char *dst, size_t cap, const char *src, size_t len)
{
    size_t n = len < cap - 1 ? len : cap - 1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)src[i];
        dst[i] = c < 0x20 || c == 0x7f || c == '"' || c == '\\' ? '?' : (char)c;
    }
    dst[n] = '\0';
}

/* Whether the stored string s[0..len) equals want (NULL: anything goes). */
static bool same(const char *want, const char *s, size_t len)
{
    return want == NULL || (strlen(want) == len && memcmp(want, s, len) == 0);
}

/*
 * Walk a journal section: every entry inside it, exactly journal_count of
 * them, nothing left over.  With f, add each id to f.
 */
static bool journal_walk(const unsigned char *j, uint64_t len, uint64_t count, struct filter *f)
{
    uint64_t at = 0;
    for (uint64_t i = 0; i < count; i++) {
        if (len - at < ENTRY_HEAD)
            return false;
        uint32_t idlen = get32(j + at + 8);
        if (len - at - ENTRY_HEAD < idlen)
            return false;
        if (f != NULL)
            filter_add(f, j + at + ENTRY_HEAD, idlen);
        at += ENTRY_HEAD + idlen;
    }
    return at == len;
}

/*
 * Check a metadata section of count pairs in len bytes by the rules of the
 * format; with out, also copy the pairs there, their strings into mem.
 */
static bool kv_walk(const unsigned char *p, size_t len, size_t count, struct snapshot_kv *out,
                    char *mem)
{
    size_t at = 0, key_at[SNAPSHOT_MAX_KV], key_len[SNAPSHOT_MAX_KV];
    if (count > SNAPSHOT_MAX_KV)
        return false;
    for (size_t i = 0; i < count; i++) {
        if (len - at < KV_HEAD)
            return false;
        size_t kl = get16(p + at), vl = get16(p + at + 2);
        const unsigned char *k = p + at + KV_HEAD, *v = k + kl;
        if (kl == 0 || kl > SNAPSHOT_MAX_KV_KEY || vl > SNAPSHOT_MAX_KV_VALUE
            || len - at - KV_HEAD < kl + vl || memchr(k, '\0', kl) != NULL
            || memchr(v, '\0', vl) != NULL)
            return false;
        for (size_t j = 0; j < i; j++)
            if (key_len[j] == kl && memcmp(p + key_at[j], k, kl) == 0)
                return false;
        key_at[i] = at + KV_HEAD;
        key_len[i] = kl;
        if (out != NULL) {
            memcpy(mem, k, kl);
            mem[kl] = '\0';
            out[i].key = mem;
            mem += kl + 1;
            memcpy(mem, v, vl);
            mem[vl] = '\0';
            out[i].value = mem;
            mem += vl + 1;
        }
        at += KV_HEAD + kl + vl;
    }
    return at == len;
}

/* The filter's parameters as the header (its checksum good) states them. */
static void header_params(const unsigned char *head, uint32_t version, const unsigned char *lay,
                          unsigned layers, struct filter_params *p)
{
    memset(p, 0, sizeof(*p));
    p->target_fpp = bits_fpp(get64(head + OFF_FPP));
    p->layers = layers;
    if (version == 1) {
        /* One layer whose share filter_new_from gives, growing by the defaults. */
        p->growth = FILTER_GROWTH_DEFAULT;
        p->layer[0] = (struct filter_layer_params){
            .capacity = get64(head + OFF_CAPACITY), .target_fpp = p->target_fpp,
            .blocks = get64(head + OFF_BLOCKS), .probes = get32(head + OFF_PROBES),
            .items = get64(head + OFF_ITEMS),
        };
        return;
    }
    p->growth = (struct filter_growth){
        .expansion = bits_fpp(get64(head + OFF_EXPANSION)),
        .tightening = bits_fpp(get64(head + OFF_TIGHTENING)),
        .max_layers = get32(head + OFF_MAX_LAYERS),
    };
    for (unsigned i = 0; i < layers; i++, lay += SNAPSHOT_LAYER_LEN)
        p->layer[i] = (struct filter_layer_params){
            .capacity = get64(lay + LAY_CAPACITY), .target_fpp = bits_fpp(get64(lay + LAY_FPP)),
            .share_fpp = bits_fpp(get64(lay + LAY_SHARE)), .blocks = get64(lay + LAY_BLOCKS),
            .probes = get32(lay + LAY_PROBES), .items = get64(lay + LAY_ITEMS),
        };
}

static enum snapshot_status read_input(struct input *in, const struct snapshot_expect *expect,
                                       struct snapshot *out, char *why, size_t whylen)
{
    static const struct snapshot_expect any;
    enum snapshot_status st;
    unsigned char fixed[SNAPSHOT_FIXED_LEN], *head = NULL, *chunk = NULL;
    struct snapshot s = { 0 };
    if (expect == NULL)
        expect = &any;
    memset(out, 0, sizeof(*out));
    XXH64_reset(&in->sum, 0);

    /* Magic and version, each only as far as the input goes. */
    size_t have = in->size < SNAPSHOT_MAGIC_LEN ? (size_t)in->size : SNAPSHOT_MAGIC_LEN;
    if ((st = take(in, fixed, have)) != SNAPSHOT_OK)
        return io_status(st, why, whylen, "magic", errno);
    if (memcmp(fixed, SNAPSHOT_MAGIC, have) != 0)
        return say(why, whylen, SNAPSHOT_BAD_MAGIC, "not a bloomguard snapshot (bad magic)");
    if (have < SNAPSHOT_MAGIC_LEN || in->size < OFF_HEADER_LEN)
        return say(why, whylen, SNAPSHOT_TRUNCATED, "%llu bytes: shorter than a header",
                   (unsigned long long)in->size);
    if ((st = take(in, fixed + OFF_VERSION, 4)) != SNAPSHOT_OK)
        return io_status(st, why, whylen, "version", errno);
    uint32_t version = get32(fixed + OFF_VERSION);
    if (version < SNAPSHOT_MIN_VERSION || version > SNAPSHOT_VERSION)
        return say(why, whylen, SNAPSHOT_OTHER_VERSION,
                   "format version %u, this build reads %u to %u", version,
                   SNAPSHOT_MIN_VERSION, SNAPSHOT_VERSION);
    s.version = version;
    if (in->size < SNAPSHOT_FIXED_LEN)
        return say(why, whylen, SNAPSHOT_TRUNCATED, "%llu bytes: shorter than a header",
                   (unsigned long long)in->size);
    if ((st = take(in, fixed + OFF_HEADER_LEN, SNAPSHOT_FIXED_LEN - OFF_HEADER_LEN)) != SNAPSHOT_OK)
        return io_status(st, why, whylen, "header", errno);

    /* The header's own length follows from the lengths it holds. */
    size_t slen[NSTR] = { get16(fixed + OFF_NAME_LEN), get16(fixed + OFF_TABLE_LEN),
                          get16(fixed + OFF_COLUMN_LEN), get16(fixed + OFF_POSITION_LEN) };
    uint32_t header_len = get32(fixed + OFF_HEADER_LEN);
    unsigned layers = version == 1 ? 1 : get16(fixed + OFF_LAYERS);
    size_t kv_count = version == 1 ? 0 : get16(fixed + OFF_KV_COUNT);
    size_t kv_len = version == 1 ? 0 : get32(fixed + OFF_KV_LEN);
    size_t strings = 0;
    for (int i = 0; i < NSTR; i++) {
        if (slen[i] > str_max[i])
            return say(why, whylen, SNAPSHOT_CORRUPT, "the header's lengths disagree");
        strings += slen[i];
    }
    if (layers < 1 || layers > FILTER_MAX_LAYERS || kv_count > SNAPSHOT_MAX_KV
        || kv_len > SNAPSHOT_MAX_KV_BYTES)
        return say(why, whylen, SNAPSHOT_CORRUPT, "the header's lengths disagree");
    size_t layers_at = SNAPSHOT_FIXED_LEN + strings;
    size_t kv_at = layers_at + (version == 1 ? 0 : (size_t)SNAPSHOT_LAYER_LEN * layers);
    if (header_len != kv_at + kv_len + SUM_LEN)
        return say(why, whylen, SNAPSHOT_CORRUPT, "the header's lengths disagree");
    if (header_len > in->size)
        return say(why, whylen, SNAPSHOT_TRUNCATED, "%llu bytes: shorter than its %u-byte header",
                   (unsigned long long)in->size, header_len);
    head = malloc(header_len);          /* at most SNAPSHOT_MAX_HEADER */
    if (head == NULL)
        return say(why, whylen, SNAPSHOT_NOMEM, "no memory for the header");
    memcpy(head, fixed, SNAPSHOT_FIXED_LEN);
    if ((st = take(in, head + SNAPSHOT_FIXED_LEN, header_len - SNAPSHOT_FIXED_LEN)) != SNAPSHOT_OK) {
        st = io_status(st, why, whylen, "header", errno);
        goto fail;
    }
    if (XXH64(head, header_len - SUM_LEN, 0) != get64(head + header_len - SUM_LEN)) {
        st = say(why, whylen, SNAPSHOT_BAD_CHECKSUM, "header checksum mismatch");
        goto fail;
    }

    /* A header we can trust; do its lengths add up, and to the input's size? */
    uint64_t total = get64(head + OFF_TOTAL_LEN), blocks_sum = 0;
    uint64_t filter_len = get64(head + OFF_FILTER_LEN);
    uint64_t jcount = get64(head + OFF_JOURNAL_COUNT), jlen = get64(head + OFF_JOURNAL_LEN);
    bool reserved = version == 1 ? get32(head + OFF_RESERVED1) != 0
                                 : get32(head + OFF_RESERVED2) != 0;
    bool too_big = false;
    for (unsigned i = 0; i < layers; i++) {
        const unsigned char *lay = head + layers_at + (size_t)i * SNAPSHOT_LAYER_LEN;
        uint64_t blocks = version == 1 ? get64(head + OFF_BLOCKS) : get64(lay + LAY_BLOCKS);
        if (version > 1)
            reserved = reserved || get32(lay + LAY_RESERVED) != 0;
        too_big = too_big || blocks > FILTER_MAX_BYTES / FILTER_BLOCK_BYTES;
        blocks_sum += too_big ? 0 : blocks;      /* at most 32 x 2^40: no overflow */
    }
    if (reserved || too_big || filter_len != blocks_sum * FILTER_BLOCK_BYTES
        || jcount > jlen / ENTRY_HEAD || jlen > UINT64_MAX / 2 || filter_len > UINT64_MAX / 4
        || total != header_len + filter_len + jlen + SUM_LEN) {
        st = say(why, whylen, SNAPSHOT_CORRUPT, "the header's lengths disagree");
        goto fail;
    }
    /* The position: opaque, but a C string, as the change feed takes it. */
    const char *position = (const char *)head + SNAPSHOT_FIXED_LEN + slen[STR_NAME]
                           + slen[STR_TABLE] + slen[STR_COLUMN];
    if (memchr(position, '\0', slen[STR_POSITION]) != NULL) {
        st = say(why, whylen, SNAPSHOT_CORRUPT, "a NUL byte in the change-feed position");
        goto fail;
    }
    if (!kv_walk(head + kv_at, kv_len, kv_count, NULL, NULL)) {
        st = say(why, whylen, SNAPSHOT_CORRUPT, "the metadata section does not parse");
        goto fail;
    }
    if (total > in->size) {
        st = say(why, whylen, SNAPSHOT_TRUNCATED, "%llu bytes of the %llu its header says",
                 (unsigned long long)in->size, (unsigned long long)total);
        goto fail;
    }
    if (total < in->size) {
        st = say(why, whylen, SNAPSHOT_CORRUPT, "%llu bytes after the end its header says",
                 (unsigned long long)(in->size - total));
        goto fail;
    }

    /* Whose snapshot is it? */
    const char *str = (const char *)head + SNAPSHOT_FIXED_LEN;
    const char *want[3] = { expect->name, expect->table, expect->column };
    static const char *const what[3] = { "filter", "table", "column" };
    static const enum snapshot_status other[3] = { SNAPSHOT_OTHER_NAME, SNAPSHOT_OTHER_TABLE,
                                                   SNAPSHOT_OTHER_COLUMN };
    char *copy[NSTR] = { NULL, NULL, NULL, NULL };
    for (int i = 0; i < 3; i++) {
        if (memchr(str, '\0', slen[i]) != NULL) {
            st = say(why, whylen, SNAPSHOT_CORRUPT, "a NUL byte in the %s name", what[i]);
            goto fail;
        }
        if (!same(want[i], str, slen[i])) {
            char shown[SNAPSHOT_MAX_STRING + 1];
            printable(shown, sizeof shown, str, slen[i]);
            st = say(why, whylen, other[i], "snapshot of %s \"%s\", not \"%s\"", what[i],
                     shown, want[i]);
            goto fail;
        }
        str += slen[i];
    }
    str = (const char *)head + SNAPSHOT_FIXED_LEN;
    for (int i = 0; i < NSTR; i++) {
        copy[i] = strndup(str, slen[i]);
        str += slen[i];
    }
    s.name = copy[STR_NAME];
    s.table = copy[STR_TABLE];
    s.column = copy[STR_COLUMN];
    s.position = copy[STR_POSITION];
    /* The pairs and their strings in one block: kv_len bounds it. */
    s.kv = malloc(kv_count * sizeof(*s.kv) + kv_len + 1);
    if (s.name == NULL || s.table == NULL || s.column == NULL || s.position == NULL
        || s.kv == NULL) {
        st = say(why, whylen, SNAPSHOT_NOMEM, "no memory for the header");
        goto fail;
    }
    kv_walk(head + kv_at, kv_len, kv_count, s.kv, (char *)(s.kv + kv_count));
    s.n_kv = kv_count;

    header_params(head, version, head + layers_at, layers, &s.params);
    if (expect->target_fpp != 0 && s.params.target_fpp != expect->target_fpp) {
        st = say(why, whylen, SNAPSHOT_OTHER_PARAMS,
                 "snapshot of a filter for false_positive_rate %g, not %g",
                 s.params.target_fpp, expect->target_fpp);
        goto fail;
    }
    /* filter_len <= total == size: this allocation is what the input justifies. */
    enum filter_error fe;
    s.filter = filter_new_from(&s.params, &fe);
    if (s.filter == NULL) {
        const struct filter_layer_params *l0 = &s.params.layer[0];
        st = fe == FILTER_ENOMEM
            ? say(why, whylen, SNAPSHOT_NOMEM, "%s", filter_strerror(fe))
            : say(why, whylen, SNAPSHOT_OTHER_PARAMS,
                  "rate %g, %u layer(s), the first of capacity %llu, %llu blocks, %u probes: %s",
                  s.params.target_fpp, layers, (unsigned long long)l0->capacity,
                  (unsigned long long)l0->blocks, l0->probes, filter_strerror(fe));
        goto fail;
    }

    /* The bulk: each layer's bits straight into the filter, then the journal. */
    if (in->fd >= 0 && (chunk = malloc(CHUNK)) == NULL) {
        st = say(why, whylen, SNAPSHOT_NOMEM, "no memory for reading");
        goto fail;
    }
    for (unsigned l = 0; l < layers; l++) {
        uint64_t len = s.params.layer[l].blocks * FILTER_BLOCK_BYTES;
        if (in->fd < 0) {
            filter_bits_write(s.filter, l, 0, in->mem + in->pos, (size_t)len);
            XXH64_update(&in->sum, in->mem + in->pos, (size_t)len);
            in->pos += len;
            continue;
        }
        for (uint64_t at = 0; at < len;) {
            size_t n = len - at < CHUNK ? (size_t)(len - at) : CHUNK;
            if ((st = take(in, chunk, n)) != SNAPSHOT_OK) {
                st = io_status(st, why, whylen, "filter", errno);
                goto fail;
            }
            filter_bits_write(s.filter, l, at, chunk, n);
            at += n;
        }
    }
    s.journal_count = jcount;
    s.journal_len = jlen;
    s.journal = malloc(jlen ? (size_t)jlen : 1);          /* jlen < total == size */
    if (s.journal == NULL) {
        st = say(why, whylen, SNAPSHOT_NOMEM, "no memory for the journal");
        goto fail;
    }
    if ((st = take(in, s.journal, (size_t)jlen)) != SNAPSHOT_OK) {
        st = io_status(st, why, whylen, "journal", errno);
        goto fail;
    }
    uint64_t sum = XXH64_digest(&in->sum);
    unsigned char trailer[SUM_LEN];
    if ((st = take(in, trailer, SUM_LEN)) != SNAPSHOT_OK) {
        st = io_status(st, why, whylen, "trailer", errno);
        goto fail;
    }
    if (get64(trailer) != sum) {
        st = say(why, whylen, SNAPSHOT_BAD_CHECKSUM, "checksum mismatch");
        goto fail;
    }
    if (!journal_walk(s.journal, jlen, jcount, NULL)) {
        st = say(why, whylen, SNAPSHOT_CORRUPT, "the journal's entries do not fill its %llu bytes",
                 (unsigned long long)jlen);
        goto fail;
    }
    /* An ID POSTed while the bits were copied is in the journal: add it. */
    journal_walk(s.journal, jlen, jcount, s.filter);
    s.horizon_ms = get64(head + OFF_HORIZON);
    s.created = get64(head + OFF_CREATED);
    free(head);
    free(chunk);
    *out = s;
    return SNAPSHOT_OK;

fail:
    free(head);
    free(chunk);
    snapshot_release(&s);
    return st;
}

enum snapshot_status snapshot_read_fd(int fd, uint64_t size, const struct snapshot_expect *expect,
                                      struct snapshot *out, char *why, size_t whylen)
{
    struct input in = { .fd = fd, .size = size };
    return read_input(&in, expect, out, why, whylen);
}

enum snapshot_status snapshot_read_mem(const void *buf, size_t size,
                                       const struct snapshot_expect *expect,
                                       struct snapshot *out, char *why, size_t whylen)
{
    struct input in = { .fd = -1, .mem = buf, .size = size };
    return read_input(&in, expect, out, why, whylen);
}

enum snapshot_status snapshot_read(const char *path, const struct snapshot_expect *expect,
                                   struct snapshot *out, char *why, size_t whylen)
{
    memset(out, 0, sizeof(*out));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT
            ? say(why, whylen, SNAPSHOT_MISSING, "%s: no such file", path)
            : say(why, whylen, SNAPSHOT_IO, "%s: %s", path, strerror(errno));
    struct stat sb;
    enum snapshot_status st;
    if (fstat(fd, &sb) != 0)
        st = say(why, whylen, SNAPSHOT_IO, "%s: %s", path, strerror(errno));
    else if (!S_ISREG(sb.st_mode))
        st = say(why, whylen, SNAPSHOT_IO, "%s: not a regular file", path);
    else
        st = snapshot_read_fd(fd, (uint64_t)sb.st_size, expect, out, why, whylen);
    close(fd);
    return st;
}

void snapshot_release(struct snapshot *s)
{
    if (s == NULL)
        return;
    filter_free(s->filter);
    free(s->name);
    free(s->table);
    free(s->column);
    free(s->position);
    free(s->journal);
    free(s->kv);
    memset(s, 0, sizeof(*s));
}

const char *snapshot_kv_get(const struct snapshot *s, const char *key)
{
    for (size_t i = 0; i < s->n_kv; i++)
        if (strcmp(s->kv[i].key, key) == 0)
            return s->kv[i].value;
    return NULL;
}

enum pending_result snapshot_restore_journal(const struct snapshot *s, struct pending *p,
                                             uint64_t now)
{
    enum pending_result first = PENDING_OK;
    uint64_t at = 0;
    /* snapshot_read checked that the entries fill the section exactly. */
    for (uint64_t i = 0; i < s->journal_count; i++) {
        const unsigned char *e = s->journal + at;
        uint32_t len = get32(e + 8);
        const char *id = (const char *)e + ENTRY_HEAD;
        enum pending_result r = pending_restore(p, id, len, filter_hash(id, len), get64(e), now);
        if (r != PENDING_OK && first == PENDING_OK)
            first = r;
        at += ENTRY_HEAD + len;
    }
    return first;
}
