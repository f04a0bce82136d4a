/*
 * Snapshot policy: file names, restore at start, writes.  See persist.h.
 */
#include "persist.h"

#include <stdio.h>
#include <string.h>

bool persist_file(const struct config *cfg, const struct filter_config *fc, char *out,
                  size_t outlen)
{
    if (cfg->snapshot_path == NULL || cfg->snapshot_path[0] == '\0')
        return false;
    size_t len = strlen(cfg->snapshot_path);
    bool slash = cfg->snapshot_path[len - 1] == '/';
    int n = snprintf(out, outlen, "%s%s%s.snap", cfg->snapshot_path, slash ? "" : "/", fc->name);
    return n > 0 && (size_t)n < outlen;
}
