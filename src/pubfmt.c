/*
 * Checking a published filter's header (pubfmt.h), for every reader: a
 * file that passes may be mapped and looked up in without reading past its
 * end or trusting a geometry no filter has.
 */
#include "pubfmt.h"

#include <stdio.h>
#include <string.h>

#include "filter.h"
#include "spell.h"

static bool say(char *why, size_t whylen, const char *what)
{
    if (whylen > 0)
        snprintf(why, whylen, "%s", what);
    return false;
}

bool pubfmt_check(const struct pubfmt_header *hdr, uint64_t file_bytes, char *why, size_t whylen)
{
    if (file_bytes < PUBFMT_HEADER_BYTES || memcmp(hdr->magic, PUBFMT_MAGIC, 8) != 0)
        return say(why, whylen, "not a published bloomguard filter (no BGFILTER header)");
    if (hdr->version != PUBFMT_VERSION)
        return say(why, whylen, "a format version this build does not read");
    if (hdr->header_bytes != PUBFMT_HEADER_BYTES || hdr->byte_order != PUBFMT_BYTE_ORDER)
        return say(why, whylen, "written for another byte order or header size");
    enum filter_kind kind;
    if (hdr->hash != PUBFMT_HASH_XXH3_64)
        return say(why, whylen, "a hash this build does not use");
    if (!pubfmt_scheme_kind(hdr->blocks_scheme, &kind))
        return say(why, whylen, "a filter kind (block scheme) this build does not know");
    if (hdr->spell >= SPELL_NTYPES)
        return say(why, whylen, "a column type this build does not know");
    if (!(hdr->target_fpp > 0 && hdr->target_fpp < 1) || hdr->max_stale_ns < 0)
        return say(why, whylen, "a rate or max_staleness out of range");
    if (hdr->max_id_bytes < 1 || hdr->max_id_bytes > PUBFMT_MAX_ID_BYTES)
        return say(why, whylen, "an ID length limit (max_id_bytes) out of range");
    return true;
}

/* The scheme of each kind, by enum filter_kind: one per kind, checked below. */
static const uint32_t kind_schemes[] = {
    [FILTER_KIND_BLOCKED] = PUBFMT_BLOCKS_SPLIT512,
};
_Static_assert(sizeof kind_schemes / sizeof kind_schemes[0] == FILTER_KINDS,
               "each filter kind needs its blocks_scheme in kind_schemes[]");

uint32_t pubfmt_kind_scheme(enum filter_kind kind)
{
    return filter_kind_known(kind) ? kind_schemes[kind] : 0;
}

bool pubfmt_scheme_kind(uint32_t scheme, enum filter_kind *kind)
{
    for (unsigned k = 0; k < FILTER_KINDS; k++)
        if (scheme != 0 && kind_schemes[k] == scheme) {
            *kind = (enum filter_kind)k;
            return true;
        }
    return false;
}

bool pubfmt_layer_ok(const struct pubfmt_layer *l, uint64_t file_bytes)
{
    return l->offset % PUBFMT_ALIGN == 0 && l->offset >= PUBFMT_HEADER_BYTES
           && l->blocks >= 1 && l->blocks <= FILTER_MAX_BYTES / FILTER_BLOCK_BYTES
           && l->probes >= 1 && l->probes <= 16 && l->offset <= file_bytes
           && l->blocks * FILTER_BLOCK_BYTES <= file_bytes - l->offset;
}

bool pubfmt_boot_id(uint8_t out[16])
{
    char text[64];
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
    if (f == NULL)
        return false;
    bool ok = fgets(text, sizeof text, f) != NULL;
    fclose(f);
    unsigned n = 0;
    for (const char *p = text; ok && *p && n < 32; p++) {
        int v = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10
              : *p >= 'A' && *p <= 'F' ? *p - 'A' + 10 : -1;
        if (v < 0)
            continue;
        if (n % 2 == 0)
            out[n / 2] = (uint8_t)(v << 4);
        else
            out[n / 2] |= (uint8_t)v;
        n++;
    }
    return ok && n == 32;
}
