/*
 * The directory of published filters ([server] publish_dir): where it is,
 * and whether the daemon may put its filters there (publish.h says why the
 * rules matter: the files are the daemon's memory, and readers trust them).
 * Split from publish.c; publish.h includes it.
 */
#ifndef BLOOMGUARD_PUBLISH_DIR_H
#define BLOOMGUARD_PUBLISH_DIR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "config.h"

/*
 * The directory filters are published in: [server] publish_dir, "auto"
 * read from $RUNTIME_DIRECTORY (its first entry: systemd's
 * RuntimeDirectory=).  False when publishing is off (empty, or auto
 * without the variable) or the path does not fit outlen.
 */
bool publish_dir(const struct config *cfg, char *out, size_t outlen);

/*
 * Whether dir may hold published filters, which are the daemon's own
 * memory and which readers trust: the daemon's user owns it; neither other
 * users nor its group may write to it (its group may if it is
 * [server] publish_group); it lies where no other user could have made or
 * replaced it (pubfmt_dir_trusted, judged as any reader will judge it);
 * the daemon can write to it; [server] publish_group names a group the
 * daemon's user is in.  With create, a dir that is not there is made
 * (mode: the published files' read bits as search bits, group
 * publish_group) if its parent passes; without (bloomguard -t), a missing
 * dir whose parent passes is fine.  False with err (what is wrong, what to
 * do) otherwise.
 */
bool publish_dir_check(const struct config *cfg, const char *dir, bool create, char *err,
                       size_t errlen);

/*
 * [server] publish_group as the gid the daemon gives its files ((gid_t)-1:
 * none, the process's own), if the daemon's user may (root, or a member).
 * False with err otherwise.  Thread-safe.
 */
bool publish_group_gid(const struct config *cfg, gid_t *gid, char *err, size_t errlen);

#endif
