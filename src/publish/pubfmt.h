/*
 * The format of a published filter (publish.h writes it, reader.c reads
 * it): one file per generation of a filter, a header page followed by each
 * layer's bits, mapped shared by the daemon and read-only by any process
 * on the host.  The why of each rule (who writes what when, and why a
 * reader never sees a wrong "absent") is in publish.h; docs/zerohop.md
 * describes the same for people.  Native byte order and CLOCK_BOOTTIME:
 * the file is for readers on the same host and boot, and says which.
 */
#ifndef BLOOMGUARD_PUBFMT_H
#define BLOOMGUARD_PUBFMT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "filter.h"

#define PUBFMT_MAGIC "BGFILTER"         /* 8 bytes, no terminator */
/*
 * 2: the header carries max_id_bytes, the daemon's ID length limit (a
 * reader of version 1 would answer "absent" for an ID the daemon never
 * follows: it refuses it, so it does not degrade for it).
 */
#define PUBFMT_VERSION 2u
/*
 * The header page; the layers start at multiples of PUBFMT_ALIGN after it
 * (the daemon puts them on 2 MiB boundaries, for huge pages: publish.c).
 */
#define PUBFMT_HEADER_BYTES 4096u
#define PUBFMT_ALIGN 4096u
#define PUBFMT_BYTE_ORDER UINT64_C(0x0102030405060708)
/* The key's hash: XXH3_64bits(key, len) with seed 0 (filter_hash). */
#define PUBFMT_HASH_XXH3_64 1u
/*
 * blocks_scheme says the filter's kind (filter.h), the layout of a layer's
 * bits, one value per kind (pubfmt_scheme_kind):
 *
 * PUBFMT_BLOCKS_SPLIT512, kind blocked: a layer is `blocks` 512-bit
 * blocks; the block is (hash * blocks) >> 64; the probes are dealt round
 * robin over the block's eight 64-bit words, their bit positions six-bit
 * fields of murmur3's fmix64 of the hash (and of hash ^ 0x9e3779b97f4a7c15
 * for a second bit per word beyond eight probes).  Words are native
 * uint64_t.
 *
 * A reader refuses a scheme it does not know (pubfmt_check): it never
 * looks keys up in a layout it would misread as another.
 */
#define PUBFMT_BLOCKS_SPLIT512 1u
#define PUBFMT_MAX_LAYERS 32u
/* The largest max_id_bytes a header may say (config_data.h's CONFIG_MAX_ID_BYTES). */
#define PUBFMT_MAX_ID_BYTES 65536u
/* Published files end in this; the path readers open is <dir>/<name>.bgf. */
#define PUBFMT_SUFFIX ".bgf"

/* flags: set by the daemon with release stores, read by readers with acquire loads. */
enum {
    /* Complete: every key it must hold is in it.  Set before the file gets its name. */
    PUBFMT_READY = 1u,
    /*
     * Stop using this generation: a newer one has the name (or the daemon
     * withdrew the filter).  Set before the daemon stops writing to it.
     */
    PUBFMT_SUPERSEDED = 2u,
    /*
     * The daemon vouches for no absence now, whatever the horizon (table.h
     * table_unsure: the filter can no longer keep its rate, a cut POST log
     * holds absent answers, a peer's filter is on probation): absent
     * answers are degraded.
     */
    PUBFMT_UNSURE = 4u,
    /*
     * The daemon denies verified-absent IDs (issue 35): their set is
     * published at <dir>/<name>.bgv, with this file's instance (below).
     * Set before READY.  A reader that does not know the bit only denies
     * less (a false "maybe"), so no version of this format changed for it.
     */
    PUBFMT_VERIFIED = 8u
};

/* Where one layer's bits are, and its geometry.  Written before nlayers covers it. */
struct pubfmt_layer {
    uint64_t offset;            /* from the start of the file; a multiple of PUBFMT_ALIGN */
    uint64_t blocks;            /* the bits: blocks * 64 bytes from offset */
    uint32_t probes;            /* bits per key, 1..16 */
    uint32_t reserved;
    uint64_t capacity;          /* items it was sized for (informational) */
    double target_fpp;          /* the rate it was sized for (informational) */
};

struct pubfmt_header {
    /* Fixed when the generation is made. */
    char magic[8];
    uint32_t version;
    uint32_t header_bytes;      /* PUBFMT_HEADER_BYTES */
    uint64_t byte_order;        /* PUBFMT_BYTE_ORDER as the writer stores it */
    uint32_t hash;              /* PUBFMT_HASH_XXH3_64 */
    uint32_t blocks_scheme;     /* the kind: PUBFMT_BLOCKS_SPLIT512 (blocked), ... */
    uint32_t spell;             /* enum spell_type of the keys (spell.h) */
    uint32_t pid;               /* the daemon's (informational) */
    uint64_t generation;        /* counts up per filter and daemon run, from 1 */
    uint64_t instance;          /* random per daemon run */
    uint8_t boot_id[16];        /* /proc/sys/kernel/random/boot_id: whose CLOCK_BOOTTIME */
    double target_fpp;          /* the whole's rate */
    int64_t max_stale_ns;       /* [sync] max_staleness; 0 = never degraded by age */
    int64_t created;            /* CLOCK_BOOTTIME ns */
    char name[64];              /* the filter's name, NUL-terminated */
    /*
     * [server] max_id_bytes: the daemon refuses a longer ID (414) and does
     * not follow rows whose ID is longer (follow_notify.c does not degrade
     * for them), so a reader must not answer "absent" for one either.
     */
    uint32_t max_id_bytes;
    uint32_t reserved;

    /* What changes, on a cache line of its own. */
    _Alignas(64) _Atomic uint32_t flags;
    _Atomic uint32_t nlayers;   /* layer[0 .. nlayers) are valid; only grows */
    _Atomic int64_t horizon;    /* table.h's H, CLOCK_BOOTTIME ns; 0 = none yet */
    _Atomic int64_t updated;    /* CLOCK_BOOTTIME ns of the daemon's last horizon store */

    _Alignas(64) struct pubfmt_layer layer[PUBFMT_MAX_LAYERS];
};

_Static_assert(sizeof(struct pubfmt_header) <= PUBFMT_HEADER_BYTES, "header page overflows");

/*
 * The verified-absent set's file, <dir>/<name>.bgv: one per daemon run,
 * shared by every generation of that run (it holds what PostgreSQL said,
 * not what a filter holds): a header page, then the set at set_offset,
 * laid out as vset.h says (a reader in another language follows it
 * there), which the daemon writes in place.  A reader pairs it with a
 * generation whose flags have PUBFMT_VERIFIED and whose instance and boot
 * id are the same, maps it read-only, and after the filter's bits reads
 * the set: an ID whose key it holds is absent, subject to the horizon like
 * any absent answer.  Why that is safe is publish.h's (d).
 */
#define PUBFMT_VSET_MAGIC "BGVERIFY"    /* 8 bytes, no terminator */
#define PUBFMT_VSET_VERSION 1u
#define PUBFMT_VSET_SUFFIX ".bgv"

struct pubfmt_vset_header {
    char magic[8];
    uint32_t version;
    uint32_t header_bytes;      /* PUBFMT_HEADER_BYTES */
    uint64_t byte_order;        /* PUBFMT_BYTE_ORDER */
    uint64_t instance;          /* the run's: as each generation's header says */
    uint8_t boot_id[16];
    uint64_t set_offset;        /* a multiple of PUBFMT_ALIGN */
    uint64_t set_bytes;
    uint32_t pid;
    uint32_t reserved;
    char name[64];
};
_Static_assert(sizeof(struct pubfmt_vset_header) <= PUBFMT_HEADER_BYTES, "set header page");

/*
 * Whether hdr (the first page of a file of file_bytes bytes) is a
 * verified-absent set this build reads, of the run instance: magic,
 * version, sizes, byte order, where the set lies.  False with why.
 */
bool pubfmt_vset_check(const struct pubfmt_vset_header *hdr, uint64_t file_bytes,
                       uint64_t instance, char *why, size_t whylen);

/*
 * Whether hdr (the first PUBFMT_HEADER_BYTES of a file of file_bytes
 * bytes) is a published filter this build reads: magic, version, sizes,
 * byte order, hash and block scheme, spelling, rate, ID length limit.  False with why (a
 * phrase) otherwise.  The layers are checked one by one (pubfmt_layer_ok)
 * as a reader maps them: a daemon may add some meanwhile.
 */
bool pubfmt_check(const struct pubfmt_header *hdr, uint64_t file_bytes, char *why, size_t whylen);

/* The blocks_scheme of a kind; the kind of a scheme (false: none this build knows). */
uint32_t pubfmt_kind_scheme(enum filter_kind kind);
bool pubfmt_scheme_kind(uint32_t scheme, enum filter_kind *kind);

/* Whether layer l lies inside a file of file_bytes bytes with a geometry a filter can have. */
bool pubfmt_layer_ok(const struct pubfmt_layer *l, uint64_t file_bytes);

/* The 16 bytes of this boot's id (false when /proc does not say). */
bool pubfmt_boot_id(uint8_t out[16]);

/*
 * Who may be trusted to have written a published file: the rules the
 * daemon applies to its publish_dir at start (publish.h) and every reader
 * to a file before it maps it (reader.c), so that no other local user can
 * put a filter of their own, or a FIFO, where a reader looks.
 *
 * pubfmt_dir_trusted: whether the directory dir (any path; its real path is
 * walked, and *st gets the directory's own lstat) lies where only root,
 * the directory's owner and the asking process (self; pass 0 to ask for
 * any reader, as the daemon does) can have made or replaced it: every
 * directory above it, from /, is owned by one of them, and one that others
 * may write to is sticky with the entry on the way down owned by root or
 * self (in /tmp or /dev/shm anyone can make a directory first, under a
 * name a reader would take for the daemon's).  The directory's own mode is
 * not judged here: a file in it is, by pubfmt_file_trusted.  False with
 * why (a sentence naming the path) otherwise.
 *
 * pubfmt_file_trusted: whether st (fstat of a file opened in a directory
 * owned by dir_uid) may be read as a published filter: a regular file,
 * owned by dir_uid or root, that no group or other user may write.
 */
bool pubfmt_dir_trusted(const char *dir, uid_t self, struct stat *st, char *why, size_t whylen);
bool pubfmt_file_trusted(const struct stat *st, uid_t dir_uid, char *why, size_t whylen);

#endif
