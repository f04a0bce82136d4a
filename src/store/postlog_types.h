/*
 * What reading a POST log gives back, the two types that its contract
 * (postlog.h) and its file format (postlog_file.h) both speak of: kept apart
 * so that the format, below the log, needs nothing of the log above it.
 * postlog.h includes this file: the rest of the tree includes that one.
 */
#ifndef BLOOMGUARD_POSTLOG_TYPES_H
#define BLOOMGUARD_POSTLOG_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * One entry: an ID and the seconds it has left (>= 1).  Returning false
 * stops the walk that called it.
 */
typedef bool (*postlog_entry_fn)(void *ctx, const char *id, size_t len, uint64_t ttl_left);

/* What postlog_open found in the file. */
struct postlog_opened {
    uint64_t entries;           /* given to each (unexpired) */
    uint64_t expired;           /* entries read but expired: not given */
    uint64_t torn_bytes;        /* an incomplete last append (a crash mid-write), cut off */
    bool corrupt;               /* a bad record with records after it: see why */
    uint64_t corrupt_offset;    /* where it starts; everything from there is dropped */
    uint64_t lost_bytes;        /* bytes dropped from there to the end */
    bool created;               /* there was no file: an empty one was made */
    bool sealed;                /* the last run closed it cleanly, and it is whole */
    /*
     * It was sealed by a clean close (or held, below) and no longer ends
     * with its seal: it was cut or changed while bloomguard was stopped,
     * or it is shorter than its header.  See why.
     */
    bool cut;
    /*
     * Unix seconds until which an acknowledged entry may be missing from
     * what was given (a cut, damage, or a hold an earlier run kept: the
     * latest expiry any lost entry could have had, at most now + ttl);
     * 0 = nothing acknowledged can be missing.  The log keeps it (its
     * header, its seal) until then, through crashes and restarts.
     */
    uint64_t lost_until;
    char why[160];              /* the corruption or the cut, or why the open failed */
};

#endif
