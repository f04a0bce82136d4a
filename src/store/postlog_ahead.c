/*
 * The zeros the POST log keeps written ahead of its end (postlog_int.h,
 * postlog_opts.prealloc in postlog.h): a batch then overwrites blocks the
 * file has, and its fdatasync need not also write the file's new size.
 * On ext4 without a journal (a VM's disk) each fdatasync of a growing
 * file was three synchronous I/Os (the data, the inode, the cache flush);
 * inside the zeros it is the data and the flush, and the inode only when
 * the coarse clock has moved since the last write (its mtime).  Zeros,
 * not fallocate: an unwritten extent is converted at its first write,
 * which writes the metadata again (measured: 2.9 I/Os per fdatasync
 * against 2.2).  How the reader tells zeros from records: postlog_file.c.
 */
#include "postlog_int.h"

#include "durable.h"

#include <errno.h>
#include <unistd.h>

/*
 * Whether the writer should write zeros ahead now: less than half of
 * opts.prealloc left after the end.  Caller locks.
 */
bool postlog_ahead_due(const struct postlog *log)
{
    return log->o.prealloc != POSTLOG_PREALLOC_NONE && !log->stop && !log->swap
        && !log->info.broken && log->end >= log->prealloc_after
        && log->alloc_end - log->end < log->o.prealloc / 2;
}

/*
 * Write zeros on fd from `from` to `to` and, if sync, fdatasync them: that
 * fdatasync writes the new size, once per top-up rather than once per
 * batch.  0 or an errno value; *sync_failed as write_batch's.  Runs without
 * the lock.
 */
int postlog_ahead_zeros(int fd, uint64_t from, uint64_t to, bool sync, bool *sync_failed)
{
    static const unsigned char zeros[65536];
    while (from < to) {
        size_t n = to - from < sizeof zeros ? (size_t)(to - from) : sizeof zeros;
        int err = durable_write_all(fd, zeros, n, from);
        if (err != 0)
            return err;
        from += n;
    }
    if (sync && fdatasync(fd) != 0) {
        /* As a batch's: what the file holds is unknown until it has been rewritten. */
        *sync_failed = true;
        return errno;
    }
    return 0;
}

/*
 * Top the zeros ahead up to opts.prealloc past the end (rounded to 4 KiB,
 * a page): between batches, after the last one's done callbacks, so that
 * only the appends that arrive meanwhile wait for it (about one larger
 * write and fdatasync per prealloc / 2 bytes appended).  A failure (a full
 * disk) gives back what it wrote and is tried again once the end has
 * moved on by prealloc / 2: an append still goes past the zeros and grows
 * the file, as without them.  Caller locks; the lock is let go meanwhile,
 * with writing set so that a rewrite's swap waits for it.
 */
void postlog_ahead_top_up(struct postlog *log)
{
    int fd = log->fd;
    uint64_t from = log->alloc_end, to = (log->end + log->o.prealloc + 4095) & ~UINT64_C(4095);
    log->writing = true;
    pthread_mutex_unlock(&log->mu);
    bool sync_failed = false;
    int err = postlog_ahead_zeros(fd, from, to, true, &sync_failed);
    if (err != 0 && !sync_failed && ftruncate(fd, (off_t)from) != 0)
        sync_failed = true;     /* zeros may be left: harmless, but its state is not what we think */
    pthread_mutex_lock(&log->mu);
    log->writing = false;
    if (err == 0) {
        log->alloc_end = to;
        log->info.prealloc_syncs++;
    } else {
        log->info.prealloc_failures++;
        log->prealloc_after = log->end + log->o.prealloc / 2;
        if (sync_failed && log->info.broken == 0) {
            log->info.broken = err;
            postlog_maybe_compact(log);
        }
    }
    log->info.ahead = log->alloc_end - log->end;
    pthread_cond_broadcast(&log->idle);
}

