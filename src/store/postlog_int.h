/*
 * The POST log's inside, shared by its files (postlog.c: open, the writer,
 * appends, rewrites; postlog_ahead.c: the zeros written ahead of its end)
 * and by nothing else: the rest of the tree sees only postlog.h.
 */
#ifndef BLOOMGUARD_POSTLOG_INT_H
#define BLOOMGUARD_POSTLOG_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "postlog.h"
#include "postlog_file.h"

/* An append waiting for its batch: done is called once it is on disk or failed. */
struct waiter {
    struct waiter *next;
    postlog_done_fn done;
    void *arg;
    bool heap;                  /* postlog_submit's: freed after done */
};

/* The log (opaque in postlog.h): its file, its threads and what they share. */
struct postlog {
    char *path, *dir;
    struct postlog_opts o;
    pthread_mutex_t mu;
    pthread_cond_t work;        /* the writer: a batch to write, the swap over, or stop */
    pthread_cond_t idle;        /* a rewrite: the writer between batches */
    pthread_cond_t cwork;       /* the rewriting thread: a rewrite wanted, or stop */
    pthread_mutex_t compact_mu; /* one rewrite at a time */
    /* Under mu. */
    int fd;
    uint64_t end;               /* bytes written and synced */
    uint64_t alloc_end;         /* zeros written and synced up to here (>= end: none ahead) */
    uint64_t prealloc_after;    /* a failed top-up: none until end passes this */
    struct postlog_buf fill;    /* the next batch's records */
    struct postlog_buf spare;   /* the last batch's buffer, reused */
    struct waiter *head, **tail;
    size_t queued;              /* the appends in fill */
    /*
     * The gather (writer_main): how many appends the last batch carried
     * and how long its write and fdatasync took; an append wakes the
     * writer only once queued reaches wake_at.
     */
    size_t last_appends, wake_at;
    uint64_t last_ns;
    bool writing;               /* the writer is between taking a batch and finishing it */
    bool notifying;             /* the writer is calling a finished batch's done callbacks */
    bool swap;                  /* a rewrite is swapping files: take no batch */
    bool compacting, compact_wanted;
    bool stop;
    uint64_t latest;            /* the latest expiry of any entry written (the seal's word) */
    uint64_t hold;              /* entries may be missing until then (opened.lost_until) */
    struct postlog_info info;
    pthread_t writer, compactor;
};

/* Wake the rewriting thread if the file has grown past its bound.  Caller locks. */
void postlog_maybe_compact(struct postlog *log);

/*
 * The zeros written ahead of the end (postlog_opts.prealloc), on the
 * writer thread.  postlog_ahead_due: whether to top them up now (less than
 * half left).  Caller locks.
 */
bool postlog_ahead_due(const struct postlog *log);

/*
 * Top them up: between batches, after the last one's done callbacks.
 * Caller locks; the lock is let go meanwhile (postlog_ahead.c).
 */
void postlog_ahead_top_up(struct postlog *log);

/*
 * Write zeros on fd over [from, to) and, if sync, fdatasync them.  0 or
 * an errno value; *sync_failed set when the fdatasync failed (what the
 * file holds is then unknown until it has been rewritten).  Without the
 * lock.
 */
int postlog_ahead_zeros(int fd, uint64_t from, uint64_t to, bool sync, bool *sync_failed);

#endif
