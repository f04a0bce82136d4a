/*
 * Large zeroed memory on 2 MiB boundaries (contract in bigmap.h).  An
 * anonymous mmap is 4 KiB-aligned: a layer of 28 MiB had 13 huge pages of
 * a possible 14, and every layer under 4 MiB none, so the lookups of a
 * filter grown to four layers spent part of their time in page walks.
 * Over-map by one huge page and trim the ends, so that every 2 MiB
 * stretch of the layer can be one huge page.
 */
#include "bigmap.h"

#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

size_t bigmap_span(size_t bytes)
{
    if (bytes < BIGMAP_HUGE)
        return bytes;
    size_t up = (bytes + BIGMAP_HUGE - 1) & ~(BIGMAP_HUGE - 1);
    /* The tail's huge page would hold up to 2 MiB of nothing: only where that is little. */
    return up - bytes <= bytes / 16 ? up : bytes;
}

/*
 * A reservation raw of bytes + BIGMAP_HUGE (page-aligned, as mmap gives)
 * cut down to the bytes at mem inside it, advised for huge pages.  The
 * tail is unmapped from the page after mem + bytes: munmap takes only a
 * page-aligned start (EINVAL otherwise, leaving the rest mapped for good),
 * and a mapping's length is rounded up to pages.
 */
static void *keep_middle(char *raw, char *mem, size_t bytes)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t head = (size_t)(mem - raw), tail = BIGMAP_HUGE - head;
    if (head > 0)
        munmap(raw, head);
    if (tail > 0)
        munmap(mem + (bytes + page - 1) / page * page, tail);
#ifdef MADV_HUGEPAGE
    /* Refused where THP is off (4 KiB pages, as before); a tmpfs mounted huge=within_size needs none. */
    (void)madvise(mem, bytes, MADV_HUGEPAGE);
#endif
    return mem;
}

void *bigmap_new(size_t bytes)
{
    const int prot = PROT_READ | PROT_WRITE, flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    if (bytes < BIGMAP_HUGE) {
        void *mem = mmap(NULL, bytes, prot, flags, -1, 0);
        return mem == MAP_FAILED ? NULL : mem;
    }
    size_t span = bigmap_span(bytes);
    if (span > SIZE_MAX - BIGMAP_HUGE)
        return NULL;
    char *raw = mmap(NULL, span + BIGMAP_HUGE, prot, flags, -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
    char *mem = (char *)(((uintptr_t)raw + BIGMAP_HUGE - 1) & ~(uintptr_t)(BIGMAP_HUGE - 1));
    return keep_middle(raw, mem, span);
}

void *bigmap_map_file(int fd, unsigned long long off, size_t bytes, int prot)
{
    if (bytes < BIGMAP_HUGE || bytes > SIZE_MAX - BIGMAP_HUGE) {
        void *mem = mmap(NULL, bytes, prot, MAP_SHARED, fd, (off_t)off);
        return mem == MAP_FAILED ? NULL : mem;
    }
    /*
     * Reserve the span and a huge page more with no access, then put the
     * file over the part that starts where the offset says: nothing else
     * can take the address meanwhile, as it could between an munmap and a
     * second mmap.
     */
    char *raw = mmap(NULL, bytes + BIGMAP_HUGE, PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
    uintptr_t base = ((uintptr_t)raw + BIGMAP_HUGE - 1) & ~(uintptr_t)(BIGMAP_HUGE - 1);
    char *mem = (char *)(base + (uintptr_t)(off & (BIGMAP_HUGE - 1)));
    if (mem >= raw + BIGMAP_HUGE)
        mem -= BIGMAP_HUGE;
    if (mmap(mem, bytes, prot, MAP_SHARED | MAP_FIXED, fd, (off_t)off) == MAP_FAILED) {
        int e = errno;
        munmap(raw, bytes + BIGMAP_HUGE);
        errno = e;
        return NULL;
    }
    return keep_middle(raw, mem, bytes);
}

void bigmap_free(void *mem, size_t bytes)
{
    if (mem != NULL)
        munmap(mem, bigmap_span(bytes));
}
