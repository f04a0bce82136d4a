/*
 * A group as chown takes it, named in the configuration ([server]
 * listen_group, publish_group).
 */
#ifndef BLOOMGUARD_SYSGROUP_H
#define BLOOMGUARD_SYSGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/*
 * group as chown takes it: "" (or NULL) leaves the group a file gets from
 * the process, *gid = (gid_t)-1; all digits is that gid, whether or not a
 * group has it; anything else is a group name, looked up (/etc/group, NSS).
 * Returns false with the reason in err, naming key (e.g. "[server]
 * publish_group: no group \"www-data\" on this system").  Thread-safe.
 */
bool sysgroup_lookup(const char *key, const char *group, gid_t *gid, char *err, size_t errlen);

#endif
