/*
 * Fuzz the snapshot reader (snapshot_read_mem) with any bytes, as a damaged
 * file or a hostile peer may hand them over: it must never crash, leak or
 * read out of bounds, and it must accept only a snapshot that is whole:
 * good checksums, lengths that add up to the input's size, a geometry
 * filter_plan chooses, a change-feed position that is the header's bytes
 * as a C string, and a filter that holds every bit of the input's image
 * and every journal id.
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
    uint32_t hl = le32_at(buf + 12);
    FUZZ_CHECK(le64_at(buf + hl - 8) == XXH64(buf, hl - 8, 0));
    FUZZ_CHECK(le64_at(buf + 16) == n);
    FUZZ_CHECK(le64_at(buf + n - 8) == XXH64(buf, n - 8, 0));
    struct filter_plan plan;
    FUZZ_CHECK(filter_plan(s.params.capacity, s.params.target_fpp, &plan) == FILTER_OK);
    FUZZ_CHECK(plan.blocks == s.params.blocks && plan.probes == s.params.probes);
    struct filter_info fi;
    filter_info(s.filter, &fi);
    FUZZ_CHECK(fi.bits == s.params.blocks * FILTER_BLOCK_BITS && fi.items >= s.params.items);
    FUZZ_CHECK(hl + s.params.blocks * FILTER_BLOCK_BYTES + s.journal_len + 8 == n);
    if (mode & 2)
        FUZZ_CHECK(strcmp(s.table, "public.users") == 0 && s.params.target_fpp == 0.01);
    /* The position: the last of the strings, whole, without a NUL inside. */
    size_t plen = le16_at(buf + 110);
    FUZZ_CHECK(s.position != NULL && plen <= SNAPSHOT_MAX_POSITION && strlen(s.position) == plen);
    FUZZ_CHECK(memcmp(buf + hl - 8 - plen, s.position, plen) == 0);

    /* Every bit of the input's image is in the filter read back. */
    const uint8_t *image = buf + hl;
    uint8_t chunk[64];
    for (uint64_t at = 0; at < s.params.blocks * FILTER_BLOCK_BYTES; at += sizeof chunk) {
        FUZZ_CHECK(filter_bits_read(s.filter, at, chunk, sizeof chunk));
        for (size_t i = 0; i < sizeof chunk; i++)
            FUZZ_CHECK((image[at + i] & ~chunk[i]) == 0);
    }
    /* And every journal id, which goes back into a journal whole. */
    struct pending *p = pending_new(s.journal_count, s.journal_len, 3600);
    FUZZ_CHECK(p != NULL);
    enum pending_result pr = snapshot_restore_journal(&s, p, 0);
    FUZZ_CHECK(pr == PENDING_OK || pr == PENDING_NOMEM);
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
