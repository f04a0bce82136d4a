/*
 * Fuzz the snapshot reader (snapshot_read_mem) with any bytes, as a damaged
 * file or a hostile peer may hand them over: it must never crash, leak or
 * read out of bounds, and it must accept only a snapshot that is whole, of
 * either format version: good checksums, lengths that add up to the
 * input's size, each layer of a geometry filter_plan_layer chooses, a
 * change-feed position that is the header's bytes as a C string, metadata
 * pairs that are the header's, keys unique, and a filter that holds every
 * bit of every layer's image and every journal id.
 *
 * Input: byte 0 is the mode, the rest the snapshot.  Mode bit 0: recompute
 * both checksums over the input first, so that the fuzzer explores what
 * lies behind them (a random input almost never gets past an xxh64).  Bit
 * 1: expect the identity and rate of the seeds (name "users", table
 * "public.users", column "id", rate 0.01) instead of anything.
 */
#include <endian.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "filter.h"
#include "fuzz.h"
#include "pending.h"
#include "snapshot.h"

static uint64_t le64_at(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return le64toh(v);
}

static uint16_t le16_at(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return le16toh(v);
}

static uint32_t le32_at(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return le32toh(v);
}

static void put_le64(uint8_t *p, uint64_t v)
{
    v = htole64(v);
    memcpy(p, &v, 8);
}

/* A journal entry back into a pending set (as persist.c does into a table's): any result but a crash. */
static void restore_entry(void *p, const char *id, size_t len, uint64_t ttl_left)
{
    enum pending_result pr = pending_restore(p, id, len, filter_hash(id, len), ttl_left, 0);
    FUZZ_CHECK(pr == PENDING_OK || pr == PENDING_NOMEM);
}

FUZZ_TARGET(snapshot)
{
    if (size < 1)
        return 0;
    uint8_t mode = data[0];
    size_t n = size - 1;
    /* An exact-size copy: ASan sees any read past the end. */
    uint8_t *buf = malloc(n ? n : 1);
    FUZZ_CHECK(buf != NULL);
    memcpy(buf, data + 1, n);
    if ((mode & 1) && n >= SNAPSHOT_FIXED_LEN) {
        uint32_t hl = le32_at(buf + 12);
        if (hl >= 8 && hl <= n)
            put_le64(buf + hl - 8, XXH64(buf, hl - 8, 0));
        if (n >= 8)
            put_le64(buf + n - 8, XXH64(buf, n - 8, 0));
    }
    static const struct snapshot_expect seeds = {
        .name = "users", .table = "public.users", .column = "id", .target_fpp = 0.01,
    };
    struct snapshot s;
    memset(&s, 0x5A, sizeof s);
    char why[SNAPSHOT_WHY_LEN] = "";
    enum snapshot_status st = snapshot_read_mem(buf, n, (mode & 2) ? &seeds : NULL, &s,
                                                why, sizeof why);
    FUZZ_CHECK(snapshot_strstatus(st) != NULL);
    if (st != SNAPSHOT_OK) {
        FUZZ_CHECK(s.filter == NULL && s.journal == NULL && s.name == NULL
                   && s.position == NULL);
        FUZZ_CHECK(why[0] != '\0');
        snapshot_release(&s);
        free(buf);
        return 0;
    }

    /* Accepted: then it is whole, by every rule of the format. */
    FUZZ_CHECK(n >= SNAPSHOT_FIXED_LEN + 16 && memcmp(buf, SNAPSHOT_MAGIC, 8) == 0);
    uint32_t version = le32_at(buf + 8), hl = le32_at(buf + 12);
    FUZZ_CHECK(version == s.version && version >= SNAPSHOT_MIN_VERSION
               && version <= SNAPSHOT_VERSION);
    FUZZ_CHECK(le64_at(buf + hl - 8) == XXH64(buf, hl - 8, 0));
    FUZZ_CHECK(le64_at(buf + 16) == n);
    FUZZ_CHECK(le64_at(buf + n - 8) == XXH64(buf, n - 8, 0));
    FUZZ_CHECK(s.params.layers >= 1 && s.params.layers <= FILTER_MAX_LAYERS);
    FUZZ_CHECK(version > 1 || s.params.layers == 1);
    /* Of a kind this build knows, stored as read (version 1: blocked), and made so. */
    FUZZ_CHECK(filter_kind_known(s.params.kind) && filter_kind(s.filter) == s.params.kind);
    FUZZ_CHECK(s.params.kind == (version == 1 ? FILTER_KIND_BLOCKED : le32_at(buf + 76)));
    uint64_t blocks = 0, items = 0;
    for (unsigned l = 0; l < s.params.layers; l++) {
        const struct filter_layer_params *lp = &s.params.layer[l];
        struct filter_plan plan;
        FUZZ_CHECK(filter_plan_layer_kind(s.params.kind, lp->capacity, lp->target_fpp, &plan)
                   == FILTER_OK);
        FUZZ_CHECK(plan.blocks == lp->blocks && plan.probes == lp->probes);
        FUZZ_CHECK(lp->target_fpp <= s.params.target_fpp);
        blocks += lp->blocks;
        items += lp->items;
    }
    struct filter_info fi;
    filter_info(s.filter, &fi);
    /* The journal's replay may have added items, and layers. */
    FUZZ_CHECK(fi.layers >= s.params.layers && fi.items >= items);
    FUZZ_CHECK(hl + blocks * FILTER_BLOCK_BYTES + s.journal_len + 8 == n);
    if (mode & 2)
        FUZZ_CHECK(strcmp(s.table, "public.users") == 0 && s.params.target_fpp == 0.01);
    /* The position: the last of the strings, whole, without a NUL inside. */
    size_t plen = le16_at(buf + 110);
    size_t pat = SNAPSHOT_FIXED_LEN + le16_at(buf + 104) + le16_at(buf + 106) + le16_at(buf + 108);
    FUZZ_CHECK(s.position != NULL && plen <= SNAPSHOT_MAX_POSITION && strlen(s.position) == plen);
    FUZZ_CHECK(memcmp(buf + pat, s.position, plen) == 0);
    /* The pairs: as many as the header says, each found again by its key. */
    FUZZ_CHECK(s.n_kv == (version == 1 ? 0 : le16_at(buf + 70)));
    for (size_t i = 0; i < s.n_kv; i++) {
        size_t kl = strlen(s.kv[i].key), vl = strlen(s.kv[i].value);
        FUZZ_CHECK(kl >= 1 && kl <= SNAPSHOT_MAX_KV_KEY && vl <= SNAPSHOT_MAX_KV_VALUE);
        FUZZ_CHECK(snapshot_kv_get(&s, s.kv[i].key) == s.kv[i].value);
    }

    /* Every bit of each layer's image in the input is in the filter read back. */
    const uint8_t *image = buf + hl;
    uint8_t chunk[64];
    for (unsigned l = 0; l < s.params.layers; l++) {
        uint64_t bytes = s.params.layer[l].blocks * FILTER_BLOCK_BYTES;
        for (uint64_t at = 0; at < bytes; at += sizeof chunk) {
            FUZZ_CHECK(filter_bits_read(s.filter, l, at, chunk, sizeof chunk));
            for (size_t i = 0; i < sizeof chunk; i++)
                FUZZ_CHECK((image[at + i] & ~chunk[i]) == 0);
        }
        image += bytes;
    }
    /* And every journal id, which goes back into a journal whole. */
    struct pending *p = pending_new(s.journal_count, s.journal_len, 3600);
    FUZZ_CHECK(p != NULL);
    snapshot_journal_each(&s, restore_entry, p);
    uint64_t at = 0;
    for (uint64_t i = 0; i < s.journal_count; i++) {
        FUZZ_CHECK(s.journal_len - at >= 12);
        uint32_t len = le32_at(s.journal + at + 8);
        FUZZ_CHECK(s.journal_len - at - 12 >= len);
        FUZZ_CHECK(filter_contains(s.filter, s.journal + at + 12, len));
        at += 12 + (uint64_t)len;
    }
    FUZZ_CHECK(at == s.journal_len);
    pending_free(p);
    snapshot_release(&s);
    FUZZ_CHECK(s.filter == NULL);
    free(buf);
    return 0;
}
