/*
 * The snapshot parser (format in snapshot.h): one reader for a file, a
 * socket or memory, which trusts no length before it has checked it against
 * the size of its input, and hands back a filter ready to swap in.
 */
#include "snapshot.h"
#include "snapshot_format.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "durable.h"

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
        size_t got;
        if (durable_read_all(in->fd, buf, len, &got) != 0)
            return SNAPSHOT_IO;
        if (got < len)
            return SNAPSHOT_TRUNCATED;
    }
    XXH64_update(&in->sum, buf, len);
    in->pos += len;
    return SNAPSHOT_OK;
}

static enum snapshot_status io_status(enum snapshot_status st, char *why, size_t whylen,
                                      const char *what, int err)
{
    if (st == SNAPSHOT_TRUNCATED)
        return snapshot_why(why, whylen, st, "the input ended inside the %s", what);
    return snapshot_why(why, whylen, st, "reading the %s: %s", what, strerror(err));
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
    p->kind = version == 1 ? FILTER_KIND_BLOCKED : (enum filter_kind)get32(head + OFF_KIND);
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
        return snapshot_why(why, whylen, SNAPSHOT_BAD_MAGIC, "not a bloomguard snapshot (bad magic)");
    if (have < SNAPSHOT_MAGIC_LEN || in->size < OFF_HEADER_LEN)
        return snapshot_why(why, whylen, SNAPSHOT_TRUNCATED, "%llu bytes: shorter than a header",
                   (unsigned long long)in->size);
    if ((st = take(in, fixed + OFF_VERSION, 4)) != SNAPSHOT_OK)
        return io_status(st, why, whylen, "version", errno);
    uint32_t version = get32(fixed + OFF_VERSION);
    if (version < SNAPSHOT_MIN_VERSION || version > SNAPSHOT_VERSION)
        return snapshot_why(why, whylen, SNAPSHOT_OTHER_VERSION,
                   "format version %u, this build reads %u to %u", version,
                   SNAPSHOT_MIN_VERSION, SNAPSHOT_VERSION);
    s.version = version;
    if (in->size < SNAPSHOT_FIXED_LEN)
        return snapshot_why(why, whylen, SNAPSHOT_TRUNCATED, "%llu bytes: shorter than a header",
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
        if (slen[i] > snapshot_str_max[i])
            return snapshot_why(why, whylen, SNAPSHOT_CORRUPT, "the header's lengths disagree");
        strings += slen[i];
    }
    if (layers < 1 || layers > FILTER_MAX_LAYERS || kv_count > SNAPSHOT_MAX_KV
        || kv_len > SNAPSHOT_MAX_KV_BYTES)
        return snapshot_why(why, whylen, SNAPSHOT_CORRUPT, "the header's lengths disagree");
    size_t layers_at = SNAPSHOT_FIXED_LEN + strings;
    size_t kv_at = layers_at + (version == 1 ? 0 : (size_t)SNAPSHOT_LAYER_LEN * layers);
    if (header_len != kv_at + kv_len + SUM_LEN)
        return snapshot_why(why, whylen, SNAPSHOT_CORRUPT, "the header's lengths disagree");
    if (header_len > in->size)
        return snapshot_why(why, whylen, SNAPSHOT_TRUNCATED, "%llu bytes: shorter than its %u-byte header",
                   (unsigned long long)in->size, header_len);
    head = malloc(header_len);          /* at most SNAPSHOT_MAX_HEADER */
    if (head == NULL)
        return snapshot_why(why, whylen, SNAPSHOT_NOMEM, "no memory for the header");
    memcpy(head, fixed, SNAPSHOT_FIXED_LEN);
    if ((st = take(in, head + SNAPSHOT_FIXED_LEN, header_len - SNAPSHOT_FIXED_LEN)) != SNAPSHOT_OK) {
        st = io_status(st, why, whylen, "header", errno);
        goto fail;
    }
    if (XXH64(head, header_len - SUM_LEN, 0) != get64(head + header_len - SUM_LEN)) {
        st = snapshot_why(why, whylen, SNAPSHOT_BAD_CHECKSUM, "header checksum mismatch");
        goto fail;
    }

    /* A header we can trust: first, is it of a kind we know (version 1: blocked)? */
    uint32_t kind = version == 1 ? FILTER_KIND_BLOCKED : get32(head + OFF_KIND);
    if (!filter_kind_known(kind)) {
        st = snapshot_why(why, whylen, SNAPSHOT_OTHER_KIND,
                          "a filter of kind %u, which this build does not know (written by a "
                          "newer bloomguard?)", kind);
        goto fail;
    }
    /* Do its lengths add up, and to the input's size? */
    uint64_t total = get64(head + OFF_TOTAL_LEN), blocks_sum = 0;
    uint64_t filter_len = get64(head + OFF_FILTER_LEN);
    uint64_t jcount = get64(head + OFF_JOURNAL_COUNT), jlen = get64(head + OFF_JOURNAL_LEN);
    bool reserved = version == 1 && get32(head + OFF_RESERVED1) != 0;
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
        st = snapshot_why(why, whylen, SNAPSHOT_CORRUPT, "the header's lengths disagree");
        goto fail;
    }
    /* The position: opaque, but a C string, as the change feed takes it. */
    const char *position = (const char *)head + SNAPSHOT_FIXED_LEN + slen[STR_NAME]
                           + slen[STR_TABLE] + slen[STR_COLUMN];
    if (memchr(position, '\0', slen[STR_POSITION]) != NULL) {
        st = snapshot_why(why, whylen, SNAPSHOT_CORRUPT, "a NUL byte in the change-feed position");
        goto fail;
    }
    if (!kv_walk(head + kv_at, kv_len, kv_count, NULL, NULL)) {
        st = snapshot_why(why, whylen, SNAPSHOT_CORRUPT, "the metadata section does not parse");
        goto fail;
    }
    if (total > in->size) {
        st = snapshot_why(why, whylen, SNAPSHOT_TRUNCATED, "%llu bytes of the %llu its header says",
                 (unsigned long long)in->size, (unsigned long long)total);
        goto fail;
    }
    if (total < in->size) {
        st = snapshot_why(why, whylen, SNAPSHOT_CORRUPT, "%llu bytes after the end its header says",
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
            st = snapshot_why(why, whylen, SNAPSHOT_CORRUPT, "a NUL byte in the %s name", what[i]);
            goto fail;
        }
        if (!same(want[i], str, slen[i])) {
            char shown[SNAPSHOT_MAX_STRING + 1];
            printable(shown, sizeof shown, str, slen[i]);
            st = snapshot_why(why, whylen, other[i], "snapshot of %s \"%s\", not \"%s\"", what[i],
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
        st = snapshot_why(why, whylen, SNAPSHOT_NOMEM, "no memory for the header");
        goto fail;
    }
    kv_walk(head + kv_at, kv_len, kv_count, s.kv, (char *)(s.kv + kv_count));
    s.n_kv = kv_count;

    header_params(head, version, head + layers_at, layers, &s.params);
    if (expect->kind != NULL && strcmp(expect->kind, filter_kind_name(s.params.kind)) != 0) {
        st = snapshot_why(why, whylen, SNAPSHOT_OTHER_KIND, "snapshot of a %s filter, not %s",
                          filter_kind_name(s.params.kind), expect->kind);
        goto fail;
    }
    if (expect->target_fpp != 0 && s.params.target_fpp != expect->target_fpp) {
        st = snapshot_why(why, whylen, SNAPSHOT_OTHER_PARAMS,
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
            ? snapshot_why(why, whylen, SNAPSHOT_NOMEM, "%s", filter_strerror(fe))
            : snapshot_why(why, whylen, SNAPSHOT_OTHER_PARAMS,
                  "rate %g, %u layer(s), the first of capacity %llu, %llu blocks, %u probes: %s",
                  s.params.target_fpp, layers, (unsigned long long)l0->capacity,
                  (unsigned long long)l0->blocks, l0->probes, filter_strerror(fe));
        goto fail;
    }

    /* The bulk: each layer's bits straight into the filter, then the journal. */
    if (in->fd >= 0 && (chunk = malloc(CHUNK)) == NULL) {
        st = snapshot_why(why, whylen, SNAPSHOT_NOMEM, "no memory for reading");
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
        st = snapshot_why(why, whylen, SNAPSHOT_NOMEM, "no memory for the journal");
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
        st = snapshot_why(why, whylen, SNAPSHOT_BAD_CHECKSUM, "checksum mismatch");
        goto fail;
    }
    if (!journal_walk(s.journal, jlen, jcount, NULL)) {
        st = snapshot_why(why, whylen, SNAPSHOT_CORRUPT, "the journal's entries do not fill its %llu bytes",
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
            ? snapshot_why(why, whylen, SNAPSHOT_MISSING, "%s: no such file", path)
            : snapshot_why(why, whylen, SNAPSHOT_IO, "%s: %s", path, strerror(errno));
    struct stat sb;
    enum snapshot_status st;
    if (fstat(fd, &sb) != 0)
        st = snapshot_why(why, whylen, SNAPSHOT_IO, "%s: %s", path, strerror(errno));
    else if (!S_ISREG(sb.st_mode))
        st = snapshot_why(why, whylen, SNAPSHOT_IO, "%s: not a regular file", path);
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

void snapshot_journal_each(const struct snapshot *s,
                           void (*fn)(void *arg, const char *id, size_t len, uint64_t ttl_left),
                           void *arg)
{
    uint64_t at = 0;
    /* snapshot_read checked that the entries fill the section exactly. */
    for (uint64_t i = 0; i < s->journal_count; i++) {
        const unsigned char *e = s->journal + at;
        uint32_t len = get32(e + 8);
        fn(arg, (const char *)e + ENTRY_HEAD, len, get64(e));
        at += ENTRY_HEAD + len;
    }
}
