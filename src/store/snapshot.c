/*
 * The snapshot generator (format in snapshot.h): one generator makes the
 * bytes for a file and for a peer alike, reading the filter's bits straight
 * from the live filter, so a snapshot never needs a second copy of the
 * filter; and the file write through durable.c.  The parser is
 * snapshot_read.c.
 */
#include "snapshot.h"
#include "snapshot_format.h"

#include "durable.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

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
    case SNAPSHOT_OTHER_KIND: return "other filter kind";
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
                                            snapshot_journal_fn journal, void *journal_ctx)
{
    const char *str[NSTR] = { m->name ? m->name : "", m->table ? m->table : "",
                              m->column ? m->column : "", m->position ? m->position : "" };
    size_t len[NSTR], strings = 0;
    for (int i = 0; i < NSTR; i++) {
        /* A C string holds no NUL byte: only the length can be wrong. */
        len[i] = strnlen(str[i], snapshot_str_max[i] + 1);
        if (len[i] > snapshot_str_max[i]) {
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
     * the journal before it is in the filter (table_insert's order), and
     * the reader replays the journal into the filter, so an ID POSTed while
     * the bits are copied is either in both or in neither.
     */
    if (journal != NULL) {
        if (!journal(journal_ctx, journal_count, journal_entry, s)
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
    put32(h + OFF_KIND, (uint32_t)fp->kind);
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
                      const struct filter *f, snapshot_journal_fn journal, void *journal_ctx)
{
    int err = 0;
    unsigned char *buf = NULL;
    struct snapshot_stream *s = snapshot_stream_new(m, f, journal, journal_ctx);
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

/* ================================================================ the file */

/* A file written front to back: snapshot_write_to's sink. */
struct file_sink {
    int fd;
    uint64_t off;
};

static bool write_file(void *ctx, const void *buf, size_t len)
{
    struct file_sink *fs = ctx;
    int err = durable_write_all(fs->fd, buf, len, fs->off);
    if (err != 0) {
        errno = err;
        return false;
    }
    fs->off += len;
    return true;
}

int snapshot_write(const char *path, const struct snapshot_meta *m, const struct filter *f,
                   snapshot_journal_fn journal, void *journal_ctx)
{
    int err = 0;
    size_t tmplen = strlen(path) + DURABLE_TEMP_EXTRA;
    char *tmp = malloc(tmplen), *dir = durable_dir_of(path);
    if (tmp == NULL || dir == NULL) {
        err = ENOMEM;
        goto out;
    }
    struct file_sink fs = { .fd = durable_temp_open(path, tmp, tmplen, &err) };
    if (fs.fd < 0)
        goto out;               /* nothing created */
    err = snapshot_write_to(write_file, &fs, m, f, journal, journal_ctx);
    /* The data must be on disk before the name points at it. */
    if (err == 0 && fsync(fs.fd) != 0)
        err = errno;
    if (close(fs.fd) != 0 && err == 0)
        err = errno;
    if (err != 0) {
        unlink(tmp);
        goto out;
    }
    /* And the rename on disk before we say the snapshot is written. */
    err = durable_install(tmp, path, dir);
out:
    free(tmp);
    free(dir);
    return err;
}

int snapshot_clean_temps(const char *path)
{
    return durable_clean_temps(path);
}
