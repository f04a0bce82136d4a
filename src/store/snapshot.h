/*
 * Snapshots: the live filter, the POST journal and the change-feed position
 * in one file (or one HTTP body), so that a restart or a new sidecar loads
 * in a moment and reads from PostgreSQL only what changed since.  One format
 * for a file and for a stream to a peer; the daemon decides when to write
 * and what to do with a snapshot it read.  No logging, no globals.
 *
 * Format, version 2 (version 1, one layer and no metadata, is still read:
 * see below).  All integers little-endian; "xxh64" is XXH64 with seed 0;
 * rates are IEEE 754 binary64.  Lengths are in bytes.
 *
 *   offset  size  field
 *   ------  ----  -----------------------------------------------------
 *        0     8  magic "BGSNAP\r\n" (the CR LF catches text-mode mangling)
 *        8     4  format version (SNAPSHOT_VERSION)
 *       12     4  header_len: 112 + name_len + table_len + column_len
 *                 + position_len + 48 x layers + kv_len + 8
 *       16     8  total_len: the whole snapshot, trailer included
 *       24     8  horizon_ms: wall-clock Unix milliseconds of the writer's
 *                 horizon, every row committed before it being in the
 *                 filter as far as the writer knew; 0 = none.  For display
 *                 only: a reader does not check it
 *       32     8  created: wall-clock Unix seconds (for display only)
 *       40     8  expansion  (the filter's growth parameters,
 *       48     8  target_fpp  filter.h; target_fpp is the
 *       56     8  tightening  whole filter's rate)
 *       64     4  max_layers
 *       68     2  layers: 1 ..= FILTER_MAX_LAYERS
 *       70     2  kv_count: metadata pairs, at most SNAPSHOT_MAX_KV
 *       72     4  kv_len: bytes of the metadata section, at most
 *                 SNAPSHOT_MAX_KV_BYTES
 *       76     4  kind: the filter's (enum filter_kind, filter.h): 0 blocked.
 *                 Builds before the field refused any value but 0 as
 *                 corrupt, so an image of another kind is never read as
 *                 blocked, and a blocked image is the bytes it always was
 *       80     8  filter_len: the layers' blocks x 64, summed
 *       88     8  journal_count: entries in the journal section
 *       96     8  journal_len: bytes of the journal section
 *      104     2  name_len   (each at most SNAPSHOT_MAX_STRING,
 *      106     2  table_len   no NUL byte inside)
 *      108     2  column_len
 *      110     2  position_len: at most SNAPSHOT_MAX_POSITION, no NUL byte
 *      112     .  name, table, column, position: the bytes, no terminators;
 *                 position is the follower's (follow.h), opaque; none = ""
 *            .    layers: for each, oldest first, 48 bytes { capacity 8,
 *                 target_fpp 8, share_fpp 8, blocks 8, items 8, probes 4,
 *                 reserved 4 (0) } (struct filter_layer_params)
 *            .    metadata: kv_count times { key_len 2, value_len 2, key,
 *                 value }: keys of 1 ..= SNAPSHOT_MAX_KV_KEY bytes, values
 *                 of at most SNAPSHOT_MAX_KV_VALUE, no NUL byte in either,
 *                 no key twice
 * header_len-8 8  header checksum: xxh64 of bytes [0, header_len - 8)
 *   header_len .  filter: filter_len bytes, each layer's filter_bits_read
 *                 image (blocks x 64 bytes) in the order of the layers
 *            .    journal: journal_count times { ttl_left: 8 (seconds
 *                 the entry had left), id_len: 4, the id: id_len }
 * total_len-8  8  trailer: xxh64 of bytes [0, total_len - 8)
 *
 * Version 1 differs in the fixed header only: 40 capacity (8), 48
 * target_fpp, 56 blocks (8), 64 probes (4), 68 reserved (4), 72 items (8);
 * header_len is 112 + the strings + 8.  It is read as one blocked layer of
 * those parameters (its share as filter_new_from gives it) with the
 * default growth parameters and no metadata.
 *
 * The header checksum lets a reader trust the header (lengths, identity)
 * before it allocates anything or reads the bulk; the trailer covers every
 * byte.  A reader checks, in this order, and refuses with the first reason
 * that applies (enum snapshot_status):
 *   1. magic: bad magic (an input shorter than the magic that matches its
 *      start is truncated instead);
 *   2. version: a format version this build does not read (before the rest
 *      of the header, whose layout a later version may change);
 *   3. the string lengths, the layer count and the metadata's count and
 *      length are within their bounds and header_len agrees with them, else
 *      corrupt; the input holds the header, else truncated; header
 *      checksum, else bad checksum;
 *   4. a header with a good checksum whose kind this build does not know:
 *      other kind (before anything else of it is trusted: another kind's
 *      layers may mean other things); whose lengths do not add up to
 *      total_len (filter_len is the layers' images summed), whose reserved
 *      fields are set, whose position holds a NUL byte or whose metadata
 *      does not fill its section exactly by the rules above: corrupt;
 *      total_len beyond the input: truncated; bytes after total_len: corrupt;
 *   5. identity: other name, other table, other column;
 *   6. parameters: other kind when it is not the expected one, then other
 *      parameters (rate, then geometry, see below);
 *   7. the bulk: truncated if the input ends early (a file that shrank, a
 *      peer that hung up), then the trailer: bad checksum; then the journal
 *      entries must fill their section exactly, else corrupt.
 * So every proper prefix of a snapshot is "truncated", and no length is
 * used before it has been checked against the size of the input: nothing
 * is allocated beyond what that size justifies (the header, at most
 * SNAPSHOT_MAX_HEADER bytes; a filter of filter_len <= size bytes; a
 * journal of journal_len bytes).  snapshot_read says "missing" before all
 * this when there is no file.
 *
 * Which parameters must match (struct snapshot_expect): the kind and the
 * false-positive rate, when the caller gives them.  The capacity (and so
 * the geometry), the layers and the growth parameters may differ: the
 * daemon sizes a filter from the table's row count, which moves all the
 * time, and a snapshot sized for fewer rows is still exact (no false
 * negatives), only fuller or grown; a caller that wants its own growth
 * parameters sets them (filter_set_growth).  Each layer's geometry must still be the one
 * filter_plan gives for its stored capacity and rate, and the rates and
 * shares must fit in the whole's (filter_new_from), or the snapshot counts
 * as other parameters: it was sized by another sizing rule.
 *
 * The metadata: (key, value) strings the writer chose (the identity facts
 * a reader checks before trusting the snapshot, say).  This module gives
 * them no meaning: a reader keeps every pair, known to its caller or not,
 * and snapshot_kv_get finds one.
 */
#ifndef BLOOMGUARD_SNAPSHOT_H
#define BLOOMGUARD_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "errfmt.h"
#include "filter.h"

#define SNAPSHOT_MAGIC "BGSNAP\r\n"
#define SNAPSHOT_MAGIC_LEN 8
#define SNAPSHOT_VERSION 2u
/* The oldest format version still read. */
#define SNAPSHOT_MIN_VERSION 1u
/* Longest name, table or column stored. */
#define SNAPSHOT_MAX_STRING 1024u
/*
 * Longest follower's position stored (table.h's TABLE_POS_MAX - 1: a
 * logical position with a 63-byte slot name and a long publication entry
 * is over 300 bytes).  A reader older than this accepts 127 at most.
 */
#define SNAPSHOT_MAX_POSITION 383u
/* Bytes of the fixed part of the header, before the strings. */
#define SNAPSHOT_FIXED_LEN 112u
/* Bytes of a layer's parameters in the header. */
#define SNAPSHOT_LAYER_LEN 48u
/* Metadata bounds: pairs, key and value lengths, the section's bytes. */
#define SNAPSHOT_MAX_KV 64u
#define SNAPSHOT_MAX_KV_KEY 64u
#define SNAPSHOT_MAX_KV_VALUE 1024u
#define SNAPSHOT_MAX_KV_BYTES 16384u
/* The largest header a reader accepts (about 21 KiB). */
#define SNAPSHOT_MAX_HEADER (SNAPSHOT_FIXED_LEN + 3u * SNAPSHOT_MAX_STRING + SNAPSHOT_MAX_POSITION \
                             + SNAPSHOT_LAYER_LEN * FILTER_MAX_LAYERS + SNAPSHOT_MAX_KV_BYTES + 8u)
/* Room for a reason's text, as snapshot_read fills it. */
#define SNAPSHOT_WHY_LEN 512

/* A metadata pair: two C strings (bounds above). */
struct snapshot_kv {
    const char *key;
    const char *value;
};

/* What the writer stores beside the filter and the journal. */
struct snapshot_meta {
    const char *name;       /* the filter's name; NULL = "" */
    const char *table;      /* the table it was loaded from; NULL = "" */
    const char *column;     /* and the column; NULL = "" */
    const char *position;   /* change-feed position, NULL or "" = none (see below) */
    uint64_t horizon_ms;    /* wall-clock Unix ms of the horizon, 0 = none */
    uint64_t created;       /* wall-clock Unix seconds */
    const struct snapshot_kv *kv;   /* n_kv metadata pairs, stored in this order; */
    size_t n_kv;                    /* NULL and 0 = none */
};

/*
 * ------------------------------------------------------------- writing --
 * The POST journal a snapshot carries, as its writer walks it:
 * journal(journal_ctx, count, each, ctx) calls count(ctx, n, bytes) once,
 * with exactly the number of entries and bytes of IDs that follow, then
 * each(ctx, id, len, ttl_left) for every entry (ttl_left: the seconds it
 * has left, its owner's clock applied), and returns false if a callback
 * did or the walk failed.  table_posts_export has this shape (a table's
 * journal: persist_journal); NULL: no entries.
 */
typedef bool (*snapshot_count_fn)(void *ctx, uint64_t n, uint64_t bytes);
typedef bool (*snapshot_entry_fn)(void *ctx, const char *id, size_t len, uint64_t ttl_left);
typedef bool (*snapshot_journal_fn)(void *journal_ctx, snapshot_count_fn count,
                                    snapshot_entry_fn each, void *ctx);

/*
 * What a snapshot holds, given that inserts continue while it is written:
 *   - the journal as it was when the stream was created (it is copied then:
 *     at most pending_max_bytes + 12 bytes per entry, for the stream's
 *     life), and every entry of it is replayed into the filter on reading;
 *   - every bit of the filter that was set when the stream was created
 *     (filter_bits_read's contract): every key whose insert returned
 *     before;
 *   - the position as the caller gives it.  To be exact, take it before
 *     creating the stream: every change after the position is then either
 *     in the snapshot or read again by the feed on resume.
 * The filter must stay alive and unfreed for the stream's life (the caller
 * holds it, e.g. by keeping rebuilds from swapping it out); the journal
 * only during snapshot_stream_new.
 */
struct snapshot_stream;

/*
 * A snapshot as a stream of bytes, produced on demand: suited to a pull
 * API such as libmicrohttpd's content reader.  journal walks the entries
 * (journal_ctx its own), once, before this returns; NULL: none.  The layers
 * the filter has when the stream is created are the ones it holds.  NULL with errno ENOMEM, or
 * EINVAL when a name, table or column is longer than SNAPSHOT_MAX_STRING,
 * the position longer than SNAPSHOT_MAX_POSITION, or the metadata breaks
 * its rules (count, lengths, an empty or repeated key).  One thread at a
 * time per stream; any number of streams may read one filter.
 */
struct snapshot_stream *snapshot_stream_new(const struct snapshot_meta *m, const struct filter *f,
                                            snapshot_journal_fn journal, void *journal_ctx);
/* Bytes the whole stream produces (total_len): a Content-Length. */
uint64_t snapshot_stream_size(const struct snapshot_stream *s);
/* Fill buf with up to cap next bytes; returns how many, 0 at the end. */
size_t snapshot_stream_read(struct snapshot_stream *s, void *buf, size_t cap);
void snapshot_stream_free(struct snapshot_stream *s);

/*
 * Push form: the whole snapshot through write(ctx, buf, len), which returns
 * false on failure (with errno set).  Returns 0, or an errno value: that of
 * the failing write (EIO if it left errno 0), ENOMEM or EINVAL as above.
 */
typedef bool (*snapshot_write_fn)(void *ctx, const void *buf, size_t len);
int snapshot_write_to(snapshot_write_fn write, void *ctx, const struct snapshot_meta *m,
                      const struct filter *f, snapshot_journal_fn journal, void *journal_ctx);

/*
 * Write a snapshot to path atomically: into a new temporary file in the
 * same directory (path + ".tmp.<pid>.<random>", created O_EXCL, mode 0600),
 * fsync, rename over path, fsync the directory.  After a crash at any point
 * path holds the old snapshot or the new one, whole; on any error (ENOSPC,
 * EDQUOT, EACCES, ...) the temporary file is removed, path is untouched, and
 * the errno value is returned (0 on success).  A crash can leave a
 * temporary file behind: snapshot_clean_temps removes those.  Not meant for
 * two concurrent writers of one path (the later rename wins, whole).
 */
int snapshot_write(const char *path, const struct snapshot_meta *m, const struct filter *f,
                   snapshot_journal_fn journal, void *journal_ctx);

/*
 * Remove the temporary files a crashed snapshot_write of path left in its
 * directory.  Call it when no writer of path runs (e.g. at start).  Returns
 * how many it removed, or -1 with errno when the directory cannot be read.
 */
int snapshot_clean_temps(const char *path);

/* ------------------------------------------------------------- reading -- */
enum snapshot_status {
    SNAPSHOT_OK = 0,
    SNAPSHOT_MISSING,        /* no such file */
    SNAPSHOT_IO,             /* the input could not be read (errno in the text) */
    SNAPSHOT_TRUNCATED,      /* shorter than its header (or a header) says */
    SNAPSHOT_BAD_MAGIC,      /* not a snapshot */
    SNAPSHOT_OTHER_VERSION,  /* a snapshot of a format version this build does not read */
    SNAPSHOT_BAD_CHECKSUM,   /* header or trailer checksum mismatch */
    SNAPSHOT_CORRUPT,        /* checksums fine, contents inconsistent */
    SNAPSHOT_OTHER_NAME,     /* of another filter name */
    SNAPSHOT_OTHER_TABLE,    /* of another table */
    SNAPSHOT_OTHER_COLUMN,   /* of another column */
    SNAPSHOT_OTHER_PARAMS,   /* another false-positive rate, or a geometry this build
                                would not choose */
    SNAPSHOT_OTHER_KIND,     /* a filter kind this build does not know, or not the expected one */
    SNAPSHOT_NOMEM           /* no memory for the filter or the journal */
};
/* A short name for a status ("truncated", "other table", ...): static. */
const char *snapshot_strstatus(enum snapshot_status st);
/*
 * Write the printf-style sentence into why (whylen bytes, when why is not
 * NULL and whylen > 0) and return st: the one way readers and fetchers of
 * snapshots report a failure.  Thread-safe.
 */
#define snapshot_why(why, whylen, st, ...) \
    __extension__({ errfmt((why), (whylen), __VA_ARGS__); (enum snapshot_status)(st); })

/* What the caller requires of a snapshot; NULL or 0 fields accept any. */
struct snapshot_expect {
    const char *name, *table, *column;
    double target_fpp;      /* 0: any */
    const char *kind;       /* filter_kind_name of the kind; NULL: any */
};

/* A snapshot read back.  The caller owns it: snapshot_release. */
struct snapshot {
    uint32_t version;       /* of the format it was read from */
    struct filter *filter;  /* holds every journal entry too; take it and set NULL */
    struct filter_params params;
    struct snapshot_kv *kv; /* the metadata pairs in stored order (strings owned */
    size_t n_kv;            /* by the snapshot); version 1: none */
    char *position;         /* the change-feed position, NUL-terminated; "" = none */
    uint64_t horizon_ms, created;
    char *name, *table, *column;
    uint64_t journal_count;
    /* The journal section, checked: see snapshot_journal_each. */
    unsigned char *journal;
    uint64_t journal_len;
};
void snapshot_release(struct snapshot *s);
/* The value stored under key, or NULL when there is none. */
const char *snapshot_kv_get(const struct snapshot *s, const char *key);

/*
 * Read the snapshot at path.  SNAPSHOT_OK fills *out; any other status
 * leaves *out empty (snapshot_release is still safe on it) and, when why is
 * not NULL, writes a sentence naming the reason into why (whylen bytes,
 * SNAPSHOT_WHY_LEN is enough), e.g. 'snapshot of table "a", not "b"'.
 */
enum snapshot_status snapshot_read(const char *path, const struct snapshot_expect *expect,
                                   struct snapshot *out, char *why, size_t whylen);
/*
 * The same from an open descriptor (a socket: reads exactly size bytes,
 * e.g. the Content-Length, and no more), and from memory.
 */
enum snapshot_status snapshot_read_fd(int fd, uint64_t size, const struct snapshot_expect *expect,
                                      struct snapshot *out, char *why, size_t whylen);
enum snapshot_status snapshot_read_mem(const void *buf, size_t size,
                                       const struct snapshot_expect *expect,
                                       struct snapshot *out, char *why, size_t whylen);

/*
 * fn(arg, id, len, ttl_left) for each entry of s's journal, in order: how
 * a reader puts the journal back (every entry is in s->filter too, but a
 * rebuild keeps only what a journal holds).
 */
void snapshot_journal_each(const struct snapshot *s,
                           void (*fn)(void *arg, const char *id, size_t len, uint64_t ttl_left),
                           void *arg);

#endif
