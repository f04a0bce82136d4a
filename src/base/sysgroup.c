/*
 * A group as chown takes it, named in the configuration: the one lookup
 * that the unix socket's group (listen.c) and the published files' group
 * (publish.c) share.
 */
#include "sysgroup.h"

#include <errno.h>
#include <grp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decimal.h"

bool sysgroup_lookup(const char *key, const char *group, gid_t *gid, char *err, size_t errlen)
{
    if (group == NULL || group[0] == '\0') {
        *gid = (gid_t)-1;
        return true;
    }
    uint64_t n;
    enum decimal_status ds = decimal_parse_u64(group, &n);
    if (ds != DECIMAL_INVALID) {
        if (ds == DECIMAL_RANGE || n >= (uint64_t)(gid_t)-1) {
            snprintf(err, errlen, "%s: gid %s is out of range", key, group);
            return false;
        }
        *gid = (gid_t)n;
        return true;
    }
    /* getgrnam_r's buffer: a group with many members needs more than the usual 1 KB. */
    struct group gr, *found = NULL;
    size_t cap = 1024;
    char *buf = NULL;
    int rc;
    do {
        cap *= 4;
        char *nb = realloc(buf, cap);
        if (nb == NULL) {
            rc = ENOMEM;
            break;
        }
        buf = nb;
        rc = getgrnam_r(group, &gr, buf, cap, &found);
    } while (rc == ERANGE && cap < (1u << 22));
    if (found != NULL)
        *gid = gr.gr_gid;
    free(buf);
    if (found != NULL)
        return true;
    if (rc == 0 || rc == ENOENT || rc == ESRCH)
        snprintf(err, errlen, "%s: no group \"%s\" on this system (getent group %s)", key, group,
                 group);
    else
        snprintf(err, errlen, "%s: cannot look up group \"%s\": %s", key, group, strerror(rc));
    return false;
}
