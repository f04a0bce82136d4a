/*
 * A forger of snapshots for tests/peer.test: "snaptool zero IN OUT" writes
 * IN with every bit of its filter cleared and the trailer's checksum
 * recomputed, so that every check of the format passes (the header is
 * untouched, so is its checksum) while the filter holds nothing: what a
 * fake or broken peer could serve.  Exit 0, or 1 with the reason.
 */
#include <endian.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "snapshot_format.h"

static int fail(const char *why)
{
    fprintf(stderr, "snaptool: %s\n", why);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 4 || strcmp(argv[1], "zero") != 0)
        return fail("usage: snaptool zero IN OUT");
    FILE *in = fopen(argv[2], "rb");
    if (in == NULL)
        return fail("cannot open IN");
    static unsigned char buf[64u << 20];
    size_t n = fread(buf, 1, sizeof buf, in);
    fclose(in);
    if (n < SNAPSHOT_FIXED_LEN || memcmp(buf, SNAPSHOT_MAGIC, SNAPSHOT_MAGIC_LEN) != 0)
        return fail("IN is not a snapshot (or over 64 MiB)");
    uint32_t header_len;
    uint64_t total, filter_len;
    memcpy(&header_len, buf + OFF_HEADER_LEN, 4);
    memcpy(&total, buf + OFF_TOTAL_LEN, 8);
    memcpy(&filter_len, buf + OFF_FILTER_LEN, 8);
    header_len = le32toh(header_len);
    total = le64toh(total);
    filter_len = le64toh(filter_len);
    if (total != n || (uint64_t)header_len + filter_len + SUM_LEN > total)
        return fail("IN's lengths do not add up");
    memset(buf + header_len, 0, filter_len);
    uint64_t sum = htole64(XXH64(buf, total - SUM_LEN, 0));
    memcpy(buf + total - SUM_LEN, &sum, SUM_LEN);
    FILE *out = fopen(argv[3], "wb");
    if (out == NULL || fwrite(buf, 1, n, out) != n || fclose(out) != 0)
        return fail("cannot write OUT");
    printf("zeroed %llu bytes of filter in a %llu-byte snapshot\n", (unsigned long long)filter_len,
           (unsigned long long)total);
    return 0;
}
