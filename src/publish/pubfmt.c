/*
 * Checking a published filter's header (pubfmt.h), for every reader: a
 * file that passes may be mapped and looked up in without reading past its
 * end or trusting a geometry no filter has.
 */
#include "pubfmt.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
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

bool pubfmt_vset_check(const struct pubfmt_vset_header *hdr, uint64_t file_bytes,
                       uint64_t instance, char *why, size_t whylen)
{
    if (file_bytes < PUBFMT_HEADER_BYTES || memcmp(hdr->magic, PUBFMT_VSET_MAGIC, 8) != 0)
        return say(why, whylen, "not a published verified-absent set (no BGVERIFY header)");
    if (hdr->version != PUBFMT_VSET_VERSION)
        return say(why, whylen, "a set format version this build does not read");
    if (hdr->header_bytes != PUBFMT_HEADER_BYTES || hdr->byte_order != PUBFMT_BYTE_ORDER)
        return say(why, whylen, "written for another byte order or header size");
    if (hdr->instance != instance)
        return say(why, whylen, "of another run of the daemon than the filter");
    if (hdr->set_offset % PUBFMT_ALIGN != 0 || hdr->set_offset < PUBFMT_HEADER_BYTES
        || hdr->set_offset > file_bytes || hdr->set_bytes > file_bytes - hdr->set_offset)
        return say(why, whylen, "a set that lies outside the file");
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

/* ------------------------------------------------------------- trust -- */

static bool mode_writable_by_others(mode_t m)
{
    return (m & (S_IWGRP | S_IWOTH)) != 0;
}

bool pubfmt_dir_trusted(const char *dir, uid_t self, struct stat *st, char *why, size_t whylen)
{
    char *real = realpath(dir, NULL);
    bool ok = false;
    if (real == NULL) {
        snprintf(why, whylen, "%s: %s", dir, strerror(errno));
        return false;
    }
    if (lstat(real, st) != 0) {
        snprintf(why, whylen, "%s: %s", real, strerror(errno));
        goto out;
    }
    if (!S_ISDIR(st->st_mode)) {
        snprintf(why, whylen, "%s: not a directory", real);
        goto out;
    }
    /*
     * From / down to dir: each directory is root's, self's or dir's
     * owner's, so nobody else could rename what lies below it; one that
     * others may write to (sticky, or anyone could move its entries) must
     * hold the next step as root's or self's, never merely dir's owner's:
     * that owner may be whoever made the name first.
     */
    size_t len = strlen(real);
    struct stat up, below;
    if (lstat("/", &up) != 0) {
        snprintf(why, whylen, "/: %s", strerror(errno));
        goto out;
    }
    for (size_t at = 1; at <= len; at++) {
        if (at < len && real[at] != '/')
            continue;
        char step[PATH_MAX];
        snprintf(step, sizeof step, "%.*s", (int)at, real);
        const char *parent_end = strrchr(step, '/');
        int plen = parent_end == step ? 1 : (int)(parent_end - step);
        if (lstat(step, &below) != 0) {
            snprintf(why, whylen, "%s: %s", step, strerror(errno));
            goto out;
        }
        if (up.st_uid != 0 && up.st_uid != self && up.st_uid != st->st_uid) {
            snprintf(why, whylen, "%.*s is owned by uid %lu, who could replace what is in it",
                     plen, step, (unsigned long)up.st_uid);
            goto out;
        }
        if (mode_writable_by_others(up.st_mode)
            && (!(up.st_mode & S_ISVTX) || (below.st_uid != 0 && below.st_uid != self))) {
            snprintf(why, whylen, "%.*s is writable by others (mode %04o): anyone could "
                     "have made %s (uid %lu)", plen, step, (unsigned)(up.st_mode & 07777), step,
                     (unsigned long)below.st_uid);
            goto out;
        }
        up = below;
    }
    ok = true;
out:
    free(real);
    return ok;
}

bool pubfmt_file_trusted(const struct stat *st, uid_t dir_uid, char *why, size_t whylen)
{
    if (!S_ISREG(st->st_mode))
        snprintf(why, whylen, "not a regular file");
    else if (st->st_uid != dir_uid && st->st_uid != 0)
        snprintf(why, whylen, "owned by uid %lu, neither the directory's owner (uid %lu) nor "
                 "root", (unsigned long)st->st_uid, (unsigned long)dir_uid);
    else if (mode_writable_by_others(st->st_mode))
        snprintf(why, whylen, "writable by others than its owner (mode %04o)",
                 (unsigned)(st->st_mode & 07777));
    else
        return true;
    return false;
}
