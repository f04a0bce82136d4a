/*
 * The POST log's file format, below the log (postlog.h) and knowing nothing
 * of its threads: the constants of its records, building records in a
 * buffer, writing a new file, and reading, checking and repairing a file at
 * open.  postlog.c, the log, is its one user.
 */
#ifndef BLOOMGUARD_POSTLOG_FILE_H
#define BLOOMGUARD_POSTLOG_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "postlog_types.h"

#define POSTLOG_HEADER_LEN 16           /* "bgpostlg", version, seal word */
#define POSTLOG_REC_HEAD 8              /* body_len, count */
#define POSTLOG_REC_SUM 8               /* the record's checksum, after its body */
#define POSTLOG_ENTRY_HEAD 12           /* expires, len */
#define POSTLOG_MAX_ID_LEN 65536        /* CONFIG_MAX_ID_BYTES: longer is damage */
#define POSTLOG_REC_BODY_MAX (1u << 20) /* a record is closed once its body passes this */

/* A growing byte buffer: records being built, a batch, a file's contents. */
struct postlog_buf {
    unsigned char *p;
    size_t len, cap;
};

/* Make room for more bytes at the end of b: false on no memory (b unchanged). */
bool postlog_file_reserve(struct postlog_buf *b, size_t more);

/*
 * The file's POSTLOG_HEADER_LEN-byte header into h, its seal word saying
 * that acknowledged entries may be missing until hold (unix seconds; 0:
 * none, the word of a file in use without a hold).
 */
void postlog_file_header(unsigned char *h, uint64_t hold);

/*
 * Seal the file on fd, whose records end at end, at a clean close (no
 * append may follow): the file cut at end (the zeros written ahead), the
 * seal record at end, then the header's seal word
 * (the latest expiry of any entry it holds, latest, or hold if later),
 * each fdatasync'ed.  hold: as postlog_file_header's, kept through the
 * seal.  A reader then knows a cut while stopped from a torn append.
 * 0, or the errno value of the failure (the file is then as after a crash:
 * its records whole, not sealed).
 */
int postlog_file_seal(int fd, uint64_t end, uint64_t hold, uint64_t latest);

/*
 * Records being built at the end of a buffer: postlog_file_rec_add starts
 * one when none is open and closes it once its body passes
 * POSTLOG_REC_BODY_MAX, so that no record grows without bound (a record is
 * read back in one piece).  Start with { buf, SIZE_MAX, 0 }.
 */
struct postlog_rec {
    struct postlog_buf *b;
    size_t start;               /* of the open record; SIZE_MAX: none */
    uint32_t count;
};

/*
 * Add an entry expiring at the unix second expires (len <=
 * POSTLOG_MAX_ID_LEN); false on no memory (the buffer then holds a partial
 * record: drop it).
 */
bool postlog_file_rec_add(struct postlog_rec *r, const char *id, size_t len, uint64_t expires);

/* Close r's open record (if any): its lengths and checksum. */
void postlog_file_rec_close(struct postlog_rec *r);

/*
 * A new file beside path (path + ".tmp.<pid>.<16 hex>", durable_temp_open's
 * name, which snapshot_clean_temps removes after a crash) holding len bytes
 * of data: created, written and fsync'ed.  Returns its descriptor (its name
 * in tmp, tmplen >= strlen(path) + DURABLE_TEMP_EXTRA), or -1 with the errno
 * value in *err and nothing left behind.
 */
int postlog_file_temp(const char *path, const unsigned char *data, size_t len, char *tmp,
                      size_t tmplen, int *err);

/*
 * Bytes [from, to) of from_fd written durably at offset at of to_fd (a
 * rewrite carries the old file's tail over): 0, or the errno.
 */
int postlog_file_copy(int from_fd, int to_fd, uint64_t from, uint64_t to, uint64_t at);

/*
 * Read the log file at path (dir: its directory), open on *fd with size
 * bytes, as postlog_open describes (postlog.h): give each(ctx, ...) every
 * entry whose expiry is after now, its seconds left clamped to ttl, count
 * them in *r, tell a cut while stopped (r->cut, r->lost_until) from a torn
 * append, and repair the file: cut a torn tail or a seal, or set a damaged
 * file aside as path + ".corrupt" and install its good prefix in its place
 * (then *fd is the new file's, the old one closed); its seal word is then
 * r->lost_until (0 when none), ready for appends.  Zeros after the last
 * record (written ahead, postlog_opts.prealloc) are the end of the records,
 * not a torn append: they stay when nothing else follows the records, and
 * *end gets where the records end (the next append's offset; the file's
 * size unless zeros follow).  *live_bytes gets the size the live entries
 * would take in a rewrite (left alone when the file was shorter than a
 * header), *latest the latest expiry of any entry read (0: none).  Returns
 * 0, or an errno value with r->why filled.  Not thread-safe with anything
 * else using the file.
 */
int postlog_file_load(const char *path, const char *dir, int *fd, uint64_t size, uint64_t now,
                      uint64_t ttl, postlog_entry_fn each, void *ctx, struct postlog_opened *r,
                      uint64_t *live_bytes, uint64_t *latest, uint64_t *end);

#endif
