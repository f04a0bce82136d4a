/*
 * What this process maps of one file: for figures (/stats), not a hot
 * path.
 */
#ifndef BLOOMGUARD_MAPPED_H
#define BLOOMGUARD_MAPPED_H

#include <stdint.h>
#include <sys/types.h>

/*
 * Adds to *resident the bytes resident in this process's mappings of the
 * file dev/ino, and to *huge those of them mapped by huge pages (one page
 * table entry for 2 MiB).  Nothing where /proc is not mounted.  Reads
 * /proc/self/smaps, which walks every mapping of the process under its
 * memory map's lock: tens of ms at 1 GiB in 4 KiB pages.
 */
void mapped_file_pages(dev_t dev, ino_t ino, uint64_t *resident, uint64_t *huge);

#endif
