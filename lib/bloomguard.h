/*
 * libbloomguard: check an ID against a bloomguard filter in your own
 * process, with no request to the daemon.  The daemon publishes each
 * filter as a file ([server] publish_dir, /run/bloomguard/<name>.bgf under
 * systemd); this library maps it read-only and answers as the daemon's
 * GET /exists would at that moment: with the same hash and bits, the same
 * spelling rules for the column's type and the same staleness rule (the
 * very source files the daemon is built from).
 *
 *     #include <bloomguard.h>
 *     int err;
 *     bloomguard *bg = bloomguard_open("/run/bloomguard/default.bgf",
 *                                      BLOOMGUARD_OPEN_MISSING_OK, &err);
 *     if (bg == NULL) { fprintf(stderr, "%s\n", bloomguard_strerror(err)); ... }
 *     if (bloomguard_lookup(bg, id, strlen(id)) == BLOOMGUARD_ABSENT)
 *         return not_found();        // surely not in the table
 *     ...                            // anything else: ask the database
 *     bloomguard_close(bg);
 *
 * Build with `pkg-config --cflags --libs bloomguard`.
 */
#ifndef BLOOMGUARD_H
#define BLOOMGUARD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One published filter, opened by path.  Opaque. */
typedef struct bloomguard bloomguard;

/* What a lookup says; only BLOOMGUARD_ABSENT may turn a request away. */
enum bloomguard_answer {
    /*
     * No filter to ask: the file is not there (the daemon is not running,
     * or has not finished its first load), was withdrawn, or cannot be
     * read.  Let the request through.
     */
    BLOOMGUARD_NOT_READY = -1,
    BLOOMGUARD_ABSENT = 0,      /* surely not in the table: the daemon's 404 */
    BLOOMGUARD_MAYBE = 1,       /* maybe in the table: the daemon's 200 */
    /*
     * The filter says absent, but the daemon cannot show it is up to date
     * (its horizon is older than max_staleness: it stopped, or lost
     * PostgreSQL) or it can no longer keep its false-positive rate: as the
     * daemon's degraded 200, treat it as "maybe".
     */
    BLOOMGUARD_DEGRADED = 2,
    /*
     * Not an ID the daemon answers for: GET /exists would refuse it (400
     * or 414) because it is empty, longer than the daemon's
     * [server] max_id_bytes, holds a NUL byte or is not UTF-8.  The daemon
     * does not follow rows with such IDs, so the filter cannot say
     * "absent": let the request through (the service decides).
     */
    BLOOMGUARD_INVALID = 3
};

/* Why bloomguard_open failed (*err), or why a handle is not ready (bloomguard_info). */
enum bloomguard_error {
    BLOOMGUARD_OK = 0,
    BLOOMGUARD_ENOENT,          /* no file at the path */
    BLOOMGUARD_EACCES,          /* the file or its directory may not be read */
    BLOOMGUARD_EFORMAT,         /* not a published filter this library reads */
    BLOOMGUARD_ESTALE,          /* withdrawn, or from another boot: waiting for a new one */
    BLOOMGUARD_ENOMEM,
    BLOOMGUARD_EINVAL,          /* a NULL or relative path, or unknown flags */
    BLOOMGUARD_EIO,             /* any other system error */
    /*
     * Not trusted: the file, or a directory above it, may have been put
     * there by someone other than root and the daemon's user (owned by
     * another user, writable by others, under a directory anyone could
     * have made first), or it is not a regular file (a FIFO, a socket).
     * Never read; like a missing file, it is not ready.
     */
    BLOOMGUARD_EUNSAFE
};

/* bloomguard_open's flags. */
#define BLOOMGUARD_OPEN_MISSING_OK 1u   /* a path without a usable file yet is not an error */

/*
 * Open the filter published at path (absolute).  The file is mapped
 * read-only; the handle follows the daemon by itself: new generations
 * (each rebuild), new layers (growth), a restarted daemon's new file, and
 * a file that goes away (checked at most once a second, during lookups).
 * Only a file the daemon's user (or root) can have put there is read
 * (BLOOMGUARD_EUNSAFE: docs/zerohop.md's rules), and opening never blocks
 * (a FIFO at the path is refused, not waited on).
 * Returns NULL and sets *err (may be NULL) on failure; with
 * BLOOMGUARD_OPEN_MISSING_OK, a missing, withdrawn, unreadable or
 * untrusted file still gives a handle, whose lookups say
 * BLOOMGUARD_NOT_READY until a trusted file is there (EFORMAT and EINVAL
 * still fail).  The caller owns the
 * handle and releases it with bloomguard_close.
 */
bloomguard *bloomguard_open(const char *path, unsigned flags, int *err);

/*
 * Look up an ID: len bytes (the text the service would hand PostgreSQL
 * for the guarded column, decoded).  An ID GET /exists would refuse is
 * BLOOMGUARD_INVALID, checked against the daemon's own limit, which the
 * published file carries.  Thread-safe: any number of threads
 * may look up on one handle at once.  Never blocks on the daemon and
 * takes no lock on the fast path (about a hundred nanoseconds); it makes a
 * system call at most once a second per handle (to see whether the file
 * changed) and maps the file again when the daemon published a new
 * generation.  A handle inherited across fork() works in the child if the
 * parent had no lookup running at the fork.
 */
enum bloomguard_answer bloomguard_lookup(bloomguard *bg, const void *id, size_t len);

/*
 * Close the handle and unmap its file; NULL is a no-op.  No lookup on it
 * may be running or start afterwards.
 */
void bloomguard_close(bloomguard *bg);

/* What a handle shows now. */
struct bloomguard_info {
    int error;                  /* enum bloomguard_error: BLOOMGUARD_OK when a filter is mapped */
    char why[160];              /* when error: what is wrong, for logs */
    char name[64];              /* the filter's name ("" when none is mapped) */
    char spelling[32];          /* the column type's spelling rule ("text", "int8", ...) */
    uint64_t generation;        /* counts up with each rebuild of one daemon run */
    unsigned layers;            /* layers mapped */
    double target_fpp;          /* the false-positive rate the filter keeps */
    double horizon_age;         /* seconds since the horizon; negative: none yet */
    double max_staleness;       /* seconds; 0 = never degraded by age */
    int degraded;               /* absent answers are degraded now */
    int saturated;              /* every absent is degraded whatever the horizon: the filter
                                   cannot keep its rate, or the daemon vouches for no absence
                                   yet (a peer's snapshot on probation, a cut POST log) */
    uint32_t pid;               /* the publishing daemon's process id */
};
/* Fill *out; returns out->error.  Thread-safe like bloomguard_lookup. */
int bloomguard_info(bloomguard *bg, struct bloomguard_info *out);

/* "not_ready", "absent", "maybe", "degraded", "invalid" ("unknown" otherwise); static storage. */
const char *bloomguard_answer_name(int answer);
/* Text of an enum bloomguard_error; static storage. */
const char *bloomguard_strerror(int err);
/* The library's version, e.g. "0.1.0"; static storage. */
const char *bloomguard_version(void);

#ifdef __cplusplus
}
#endif

#endif /* BLOOMGUARD_H */
