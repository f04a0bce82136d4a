/*
 * What this process maps of one file, from /proc/self/smaps (contract in
 * mapped.h).
 */
#include "mapped.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/sysmacros.h>

/*
 * The mappings of the file dev/ino in /proc/self/smaps: their Rss, and
 * their ShmemPmdMapped and FilePmdMapped (tmpfs pages count as the first;
 * the second is for a file system whose page cache takes huge pages).
 * Known by the device and inode of each mapping's first line, not by its
 * name: the kernel prints the path it resolved (not a symlinked or
 * relative publish_dir) and "(deleted)" once a name was put back.
 */
void mapped_file_pages(dev_t dev, ino_t ino, uint64_t *resident, uint64_t *huge)
{
    FILE *f = fopen("/proc/self/smaps", "re");
    if (f == NULL)
        return;
    bool ours = false;
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        unsigned long long kb, start, end, off, inode;
        unsigned maj, min;
        /* A mapping's first line: "start-end perms offset major:minor inode   pathname". */
        if (sscanf(line, "%llx-%llx %*s %llx %x:%x %llu", &start, &end, &off, &maj, &min, &inode) == 6)
            ours = inode == (unsigned long long)ino && maj == major(dev) && min == minor(dev);
        else if (ours && sscanf(line, "Rss: %llu kB", &kb) == 1)
            *resident += kb * 1024;
        else if (ours && (sscanf(line, "ShmemPmdMapped: %llu kB", &kb) == 1
                          || sscanf(line, "FilePmdMapped: %llu kB", &kb) == 1))
            *huge += kb * 1024;
    }
    free(line);
    fclose(f);
}
