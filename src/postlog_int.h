/*
 * What the POST log's two halves share (private to postlog.c, the group
 * commit and rewrites, and postlog_file.c, the file format and its repair
 * at open): the format's constants, the log's state and the record builder.
 */
#ifndef BLOOMGUARD_POSTLOG_INT_H
#define BLOOMGUARD_POSTLOG_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "postlog.h"

#define HEADER_LEN 16
#define REC_HEAD 8              /* body_len, count */
#define REC_SUM 8
#define ENTRY_HEAD 12           /* expires, len */
#define MAX_ID_LEN 65536        /* CONFIG_MAX_ID_BYTES: longer is damage */
#define REC_BODY_MAX (1u << 20) /* a record is closed once its body passes this */
#define SUM_SEED UINT64_C(0x62677073746c6f67)
#define DEFAULT_FLOOR (UINT64_C(1) << 20)
#define RETRY_SECONDS 1         /* between rewrites of a broken log */

#define LOG_VERSION 1

/* An append waiting for its batch: done is called once it is on disk or failed. */
struct waiter {
    struct waiter *next;
    postlog_done_fn done;
    void *arg;
    bool heap;                  /* postlog_submit's: freed after done */
};

struct buf {
    unsigned char *p;
    size_t len, cap;
};

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
    struct buf fill;            /* the next batch's records */
    struct buf spare;           /* the last batch's buffer, reused */
    struct waiter *head, **tail;
    bool writing;               /* the writer is between taking a batch and finishing it */
    bool swap;                  /* a rewrite is swapping files: take no batch */
    bool compacting, compact_wanted;
    bool stop;
    struct postlog_info info;
    pthread_t writer, compactor;
};


/*
 * Records being built at the end of a buffer: rec_add starts one when none
 * is open and closes it once its body passes REC_BODY_MAX, so that no
 * record grows without bound (a record is read back in one piece).
 */
struct postlog_rec {
    struct buf *b;
    size_t start;               /* of the open record; SIZE_MAX: none */
    uint32_t count;
};

/* Make room for more bytes at the end of b: false on no memory. */
bool postlog_reserve(struct buf *b, size_t more);

/* The file's HEADER_LEN-byte header into h. */
void postlog_header(unsigned char *h);

/* Close r's open record (if any): its lengths and checksum. */
void postlog_rec_close(struct postlog_rec *r);

/* Add an entry; false on no memory (the buffer then holds a partial record: drop it). */
bool postlog_rec_add(struct postlog_rec *r, const char *id, size_t len, uint64_t expires);

/* The log's clock: wall-clock Unix seconds, or the test clock of its options. */
uint64_t postlog_wall(const struct postlog *log);

/*
 * A new file beside path holding data, created (durable_temp_open's name,
 * in tmp), written and fsync'ed.  Its descriptor, or -1 with the errno
 * value in *err and nothing left behind.
 */
int postlog_temp_file(const char *path, const unsigned char *data, size_t len, char *tmp,
                      size_t tmplen, int *err);

/*
 * Read the file on fd (size bytes), give its entries to each, and repair
 * it: cut a torn tail, or set a damaged file aside and put its good prefix
 * in its place (then *fd is the new file's).  0, or an errno value with
 * r->why.  Called by postlog_open before the threads start.
 */
int postlog_load(struct postlog *log, int *fd, uint64_t size, postlog_entry_fn each, void *ctx,
                 struct postlog_opened *r);

#endif
