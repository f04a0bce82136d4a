/*
 * Crash-safe file replacement, shared by the snapshot and the POST log: a
 * temporary file beside the target, written and fsync'ed, renamed over the
 * target and the directory fsync'ed, so a crash leaves the old file or the
 * new one, never half of one; the sweep of the temporaries a crash left; and
 * the loops that read or write a whole buffer through short counts and EINTR.
 * No logging, no globals; every function is thread-safe.
 */
#ifndef BLOOMGUARD_DURABLE_H
#define BLOOMGUARD_DURABLE_H

#include <stddef.h>
#include <stdint.h>

/* Room a temporary's name needs besides the target's path. */
#define DURABLE_TEMP_EXTRA 64

/*
 * The directory of path ("." for a bare name, "/" for one in the root):
 * malloc'ed (the caller frees it), NULL on no memory.
 */
char *durable_dir_of(const char *path);

/* Write all len bytes at offset off (pwrite, EINTR retried): 0 or an errno value. */
int durable_write_all(int fd, const void *buf, size_t len, uint64_t off);

/*
 * Read len bytes from fd's position into buf (read, EINTR retried), fewer
 * only at end of file: 0 or an errno value, and *got the bytes read (also
 * on error).
 */
int durable_read_all(int fd, void *buf, size_t len, size_t *got);

/* fsync the directory dir, so a rename in it lasts: 0 or an errno value. */
int durable_sync_dir(const char *dir);

/*
 * Create a new empty file beside path, named path + ".tmp.<pid>.<16 hex>"
 * (the name goes to tmp, tmplen >= strlen(path) + DURABLE_TEMP_EXTRA),
 * open for reading and writing.  Returns its descriptor, or -1 with the
 * errno value in *err and nothing created.
 */
int durable_temp_open(const char *path, char *tmp, size_t tmplen, int *err);

/*
 * Put the written and fsync'ed temporary tmp in path's place for good:
 * rename, then fsync dir (path's directory).  On a failed rename tmp is
 * removed.  0 or an errno value.
 */
int durable_install(const char *tmp, const char *path, const char *dir);

/*
 * Remove the temporaries of path (durable_temp_open's names) that a crash
 * left behind.  Returns how many were removed, or -1 with errno.
 */
int durable_clean_temps(const char *path);

#endif
