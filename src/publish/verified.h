/*
 * The verified-absent set's published file (pubfmt.h, <name>.bgv): made
 * once per daemon run, when the table asks for its set's memory
 * (table_publisher.verified), mapped shared so that the set the table
 * writes is the set readers map; withdrawn at stop.  publish.c owns one per
 * published filter.
 */
#ifndef BLOOMGUARD_VERIFIED_H
#define BLOOMGUARD_VERIFIED_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "log.h"

struct verified;

/*
 * A new file of the set (bytes bytes after a header page) at <path>, made
 * under a temporary name in dir (O_EXCL, mode, group gid; (gid_t)-1:
 * the process's) and renamed over whatever was there: the header says
 * name, instance and boot_id.  NULL (logged: readers then deny nothing
 * from the set; the daemon still does) on failure.
 */
struct verified *verified_new(const char *dir, const char *path, const char *name,
                              uint64_t instance, const uint8_t boot_id[16], unsigned mode,
                              gid_t gid, size_t bytes, const struct log *lg);

/* The set's memory in the mapping (64-byte aligned, bytes long). */
void *verified_memory(struct verified *v);

/*
 * Unlink the file (if the path is still it) and unmap it.  Call it once
 * nothing reads or writes the set any more.  NULL: no-op.
 */
void verified_free(struct verified *v);

#endif
