/*
 * The POST log: every ID acknowledged by POST /ids, on disk before the 2xx,
 * so that a crash (kill -9, power loss) forgets none of them before its
 * journal entry would have expired.  One append-only file per filter,
 * kept written with zeros ahead of its end (opts.prealloc), written by one
 * writer thread that commits concurrent appends together
 * (one write and one fdatasync for all the POSTs that arrived meanwhile,
 * and for those still coming back from the last batch: see writer_main's
 * gather), and rewritten from the live entries when it has grown to twice
 * their size.
 */
#ifndef BLOOMGUARD_POSTLOG_H
#define BLOOMGUARD_POSTLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "postlog_types.h"      /* postlog_entry_fn, struct postlog_opened */

struct postlog;

/* How many entries and bytes of IDs the walk will give; false stops it. */
typedef bool (*postlog_count_fn)(void *ctx, uint64_t n, uint64_t bytes);
/*
 * The live entries, for a rewrite: call count(ctx, n, bytes) once, then
 * each(ctx, ...) for every entry that must survive, and return false if a
 * callback did (or the walk failed).  pending_export (pending.h) has this
 * shape.  Called on the log's own thread; each is cheap (a memcpy).
 */
typedef bool (*postlog_live_fn)(void *live_ctx, postlog_count_fn count, postlog_entry_fn each,
                                void *ctx);

#define POSTLOG_PREALLOC (UINT64_C(1) << 20)
#define POSTLOG_PREALLOC_NONE UINT64_MAX

/* Test hooks: where a fault is injected. */
enum postlog_io { POSTLOG_IO_WRITE, POSTLOG_IO_SYNC };

struct postlog_opts {
    /* The configured ttl: an entry read back never gets more seconds than this. */
    uint64_t ttl;
    /*
     * Where the live entries come from (NULL: the file is never rewritten
     * and only grows).  Rewriting drops what this walk leaves out, so it
     * must give every acknowledged entry that has not expired (and may
     * leave out those a COPY has shown in the table), and should leave out
     * what was refused.  A rewrite walks it only after the done callbacks
     * of every append already in the file have returned: a user may put
     * an ID where the walk finds it from its done callback, once the log
     * has it, rather than before the append (postlog_submit).
     */
    postlog_live_fn live;
    void *live_ctx;
    /* Rewrite once the file exceeds 2 x the live bytes + this (0: 1 MiB). */
    uint64_t compact_floor;
    /*
     * Bytes of zeros kept written and synced ahead of the end of the
     * records (0: POSTLOG_PREALLOC; POSTLOG_PREALLOC_NONE: none), topped up
     * by the writer thread between batches once less than half of it is
     * left.  A batch then overwrites blocks the file already has, so that
     * its fdatasync need not write the inode (a file that grows has a new
     * size to write: a second synchronous I/O per batch).  Zeros, not
     * fallocate: an allocated but unwritten extent must be converted at
     * its first write, which is the metadata write again.
     */
    uint64_t prealloc;
    /*
     * Tests only (NULL in the daemon).  fault(fault_ctx, op) runs on the
     * writer thread before each write and fdatasync of a batch, without
     * the log's lock; it may block, and returning an errno value makes
     * that step fail with it.  clock(clock_ctx) replaces the wall clock
     * (unix seconds).
     */
    int (*fault)(void *fault_ctx, enum postlog_io op);
    void *fault_ctx;
    uint64_t (*clock)(void *clock_ctx);
    void *clock_ctx;
};

/*
 * Open the log at path, creating it (atomically, with its directory
 * synced) if it does not exist, and read it back: each(ctx, id, len,
 * ttl_left) for every entry whose wall-clock expiry is still ahead, ttl_left
 * clamped to o->ttl (the wall clock may have been set back, the ttl
 * lowered), in the order they were appended (a later entry of the same ID
 * carries the later expiry).  Zeros after the last record (written ahead,
 * o->prealloc) end the records and stay, for the next appends.  An
 * incomplete record at the end (a crash during an append, which was never
 * acknowledged) is cut off, with the zeros after it; a bad record
 * with more after it is corruption: the entries before it are kept, the
 * file is rewritten with them, the damaged file is kept beside it as
 * path + ".corrupt", and *r says so (the caller logs it).  A file that a
 * clean close sealed (postlog_close) and that no longer ends with its seal
 * was cut or changed while stopped (r->cut), even where the cut looks like
 * a torn append.  Either way acknowledged entries may be missing:
 * r->lost_until says until when one of them could have been read back
 * (unix seconds, 0: none is missing), and the caller must not answer
 * "absent" before then; the log keeps that hold in its file, through
 * crashes, rewrites and clean restarts, until it has passed.  Then the
 * writer and rewriting threads start.
 *
 * Returns the log, or NULL with r->why filled and errno set: the file
 * cannot be created, read or written (EACCES, ENOENT for a missing
 * directory, ...), it is not a POST log or of another version (EINVAL), or
 * each returned false (ECANCELED).  r may not be NULL.  Not thread-safe
 * with other opens of the same path.
 */
struct postlog *postlog_open(const char *path, const struct postlog_opts *o, postlog_entry_fn each,
                             void *ctx, struct postlog_opened *r);

/*
 * Append n IDs (lens[i] bytes each), expiring ttl seconds from now on the
 * wall clock, and return 0 once they are on disk (written and fdatasync'ed,
 * together with whatever other threads appended meanwhile), or the errno
 * value of the failure: ENOSPC, EDQUOT, EIO, ENOMEM, or the error a failed
 * fdatasync left behind (after one, the file's state is unknown: every
 * append fails with that value until the log has been rewritten from the
 * live entries, which its thread retries every second).  On failure the
 * IDs may or may not be in the file: never acknowledge them.  n = 0
 * returns 0 at once.  Blocks for about one fdatasync (two at most, after
 * a larger batch whose other appenders do not come back), so, on a server
 * whose threads each serve many connections, it holds those up: see
 * postlog_submit.  Thread-safe.
 */
int postlog_append(struct postlog *log, size_t n, const char *const *ids, const size_t *lens,
                   uint64_t ttl);

/*
 * The same without waiting, for a server that suspends the request
 * meanwhile: queue the IDs (copied before it returns) and return 0, then
 * done(arg, err) is called exactly once, on the log's writer thread and
 * without its lock, with 0 once they are on disk or the errno value of the
 * failure (as postlog_append's).  It must be quick and may not call into
 * this log; a rewrite waits for it before it walks the live entries
 * (postlog_opts.live).  Returns an errno value at once, done never called, when they
 * cannot be queued: the log is broken, ENOMEM, EINVAL (n = 0, an ID longer
 * than 65536 bytes).  Thread-safe.
 */
typedef void (*postlog_done_fn)(void *arg, int err);
int postlog_submit(struct postlog *log, size_t n, const char *const *ids, const size_t *lens,
                   uint64_t ttl, postlog_done_fn done, void *arg);

/*
 * Rewrite the log now from the live entries (a temporary file, fsync,
 * rename, directory fsync), whatever its size, and return 0 or the errno
 * value of the failure (the old file then stays in use).  Appends go on
 * meanwhile and wait only for the final swap.  EINVAL without opts.live.
 * Thread-safe; one rewrite at a time (a second caller waits).
 */
int postlog_compact(struct postlog *log);

/* Figures for /stats and tests; read under the log's lock.  Thread-safe. */
struct postlog_info {
    uint64_t appends;           /* postlog_append calls queued (n > 0) */
    uint64_t ids;               /* IDs in them */
    uint64_t batches;           /* write + fdatasync attempts (group commits) */
    uint64_t syncs;             /* fdatasyncs that succeeded */
    uint64_t failures;          /* appends and submits answered with an error */
    uint64_t compactions;       /* rewrites done */
    uint64_t compact_failures;
    uint64_t bytes;             /* the end of its records (what is on disk) */
    uint64_t ahead;             /* zeros written and synced after them (opts.prealloc) */
    uint64_t prealloc_syncs;    /* fdatasyncs of those zeros (one per top-up) */
    uint64_t prealloc_failures; /* top-ups that failed (a full disk: retried later) */
    uint64_t live_bytes;        /* what the last rewrite (or the read at open) found live */
    int broken;                 /* errno of a failed fdatasync not yet repaired, 0 = none */
};
void postlog_info(struct postlog *log, struct postlog_info *out);

/*
 * Finish the appends already queued, stop the threads, seal the file (a
 * seal record and the header's seal word, postlog_file.h; not a log whose
 * last fdatasync failed) and close it.  No postlog_append may run or start
 * once it is called.  NULL is a no-op.
 */
void postlog_close(struct postlog *log);

#endif
