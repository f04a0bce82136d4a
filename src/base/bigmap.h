/*
 * Large zeroed memory on 2 MiB boundaries, for the Bloom filter's layers
 * and for anything measured against them (bench/filter_bench's floor).  A
 * layer's lookups land anywhere in it, so each 4 KiB page is a TLB entry
 * and, under virtualisation, a two-level page walk; transparent huge pages
 * (THP "madvise", Debian's default) back only the 2 MiB-aligned stretches
 * that lie wholly inside a mapping, and mmap aligns to 4 KiB only.
 * Thread-safe; no logging, no globals.
 */
#ifndef BLOOMGUARD_BIGMAP_H
#define BLOOMGUARD_BIGMAP_H

#include <stddef.h>

/* The huge page size bigmap aligns to (x86-64's and arm64's usual). */
#define BIGMAP_HUGE ((size_t)2 << 20)

/*
 * bytes of private, anonymous, zeroed memory, reserved lazily (pages are
 * taken on first touch), or NULL with errno.  From BIGMAP_HUGE bytes up it
 * starts on a BIGMAP_HUGE boundary and is advised for huge pages; its
 * span is rounded up to the next boundary when that adds at most a
 * sixteenth (bigmap_span), so that the last stretch is huge too.  Free it
 * with bigmap_free and the same bytes.
 */
void *bigmap_new(size_t bytes);

/* The bytes a bigmap_new(bytes) maps, and may fill once touched: bytes or a little more. */
size_t bigmap_span(size_t bytes);

/* Unmaps a bigmap_new(bytes); NULL is a no-op. */
void bigmap_free(void *mem, size_t bytes);

/*
 * bytes of the file fd from offset off, mapped MAP_SHARED with prot, or
 * NULL with errno.  From BIGMAP_HUGE bytes up its address is congruent to
 * off modulo BIGMAP_HUGE and it is advised for huge pages: a huge page of
 * the page cache (a published filter on a tmpfs mounted huge=within_size)
 * is mapped by one page table entry only where address and file offset
 * agree, and mmap need not see to it (a tmpfs mounted huge=within_size
 * does; one mounted otherwise, or another file system, need not).  Unmap
 * it with munmap(mem, bytes).
 */
void *bigmap_map_file(int fd, unsigned long long off, size_t bytes, int prot);

#endif
