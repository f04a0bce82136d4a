/*
 * The directory published filters live in (publish_dir.h): where it is, and
 * the rules it must pass before the daemon puts its memory there.
 */
#include "publish_dir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pubfmt.h"
#include "sysgroup.h"

bool publish_dir(const struct config *cfg, char *out, size_t outlen)
{
    return config_dir_resolve(cfg->publish_dir, "RUNTIME_DIRECTORY", out, outlen);
}

/* The search (and read) bits of the directory the daemon makes: those of the files' readers. */
static mode_t dir_mode(unsigned file_mode)
{
    return 0700 | ((file_mode & 0040) ? 0050 : 0) | ((file_mode & 0004) ? 0005 : 0);
}

/*
 * Whether gid has a number in this process's user namespace.  Outside the
 * map (systemd's PrivateUsers=yes maps only the service's own ids) a
 * supplementary group shows as the overflow gid and no file can be given
 * it: that, not membership, is then what to fix.  True when the map cannot
 * be read.
 */
static bool gid_mapped(gid_t gid)
{
    FILE *f = fopen("/proc/self/gid_map", "re");
    if (f == NULL)
        return true;
    unsigned long inside, outside, count;
    bool mapped = false;
    while (!mapped && fscanf(f, "%lu %lu %lu", &inside, &outside, &count) == 3)
        mapped = gid >= inside && gid - inside < count;
    fclose(f);
    return mapped;
}

/*
 * Whether a file in dir can be given gid, tried on a nameless one: a
 * system call filter (systemd's SystemCallFilter=~@privileged holds chown)
 * would otherwise let the start pass and every load fail to publish.
 */
static bool chown_works(const struct config *cfg, const char *dir, gid_t gid, char *err,
                        size_t errlen)
{
    if (gid == (gid_t)-1)
        return true;
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0)
        return true;                /* no O_TMPFILE here: the first load says it */
    int e = fchown(fd, (uid_t)-1, gid) == 0 ? 0 : errno;
    close(fd);
    if (e != 0)
        snprintf(err, errlen, "[server] publish_group %s: cannot give a file in %s this group: "
                 "%s%s", cfg->publish_group, dir, strerror(e), e != EPERM ? ""
                 : " (under systemd, the unit's SystemCallFilter=~@privileged refuses chown: "
                 "add SystemCallFilter=@chown beside SupplementaryGroups=)");
    return e == 0;
}

bool publish_group_gid(const struct config *cfg, gid_t *gid, char *err, size_t errlen)
{
    if (!sysgroup_lookup("[server] publish_group", cfg->publish_group, gid, err, errlen))
        return false;
    if (*gid == (gid_t)-1 || geteuid() == 0 || *gid == getegid())
        return true;
    int n = getgroups(0, NULL);
    gid_t *groups = n > 0 ? calloc((size_t)n, sizeof *groups) : NULL;
    bool member = false;
    if (groups != NULL && (n = getgroups(n, groups)) > 0)
        for (int i = 0; i < n && !member; i++)
            member = groups[i] == *gid;
    free(groups);
    if (!member && !gid_mapped(*gid))
        snprintf(err, errlen, "[server] publish_group %s: gid %lu is not mapped into the "
                 "daemon's user namespace, where it cannot be given to a file (systemd's "
                 "PrivateUsers=yes maps only the service's own user and group: set "
                 "PrivateUsers=no beside SupplementaryGroups=)", cfg->publish_group,
                 (unsigned long)*gid);
    else if (!member)
        snprintf(err, errlen, "[server] publish_group %s: the daemon's user is not a member of "
                 "it, and a user may only give its files a group it belongs to "
                 "(SupplementaryGroups= under systemd)", cfg->publish_group);
    return member;
}

bool publish_dir_check(const struct config *cfg, const char *dir, bool create, char *err,
                       size_t errlen)
{
    char why[512];
    struct stat st;
    gid_t gid;
    if (!publish_group_gid(cfg, &gid, err, errlen))
        return false;
    if (stat(dir, &st) != 0 && errno == ENOENT) {
        /* Made where only root or the daemon's user could have made it, or not at all. */
        char parent[4096];
        const char *slash = strrchr(dir, '/');
        snprintf(parent, sizeof parent, "%.*s", slash == NULL ? 1 : slash == dir ? 1
                 : (int)(slash - dir), slash == NULL ? "." : dir);
        if (!pubfmt_dir_trusted(parent, 0, &st, why, sizeof why)) {
            snprintf(err, errlen, "[server] publish_dir %s is not there, and cannot be made "
                     "safely: %s", dir, why);
            return false;
        }
        if (!create)
            return true;            /* bloomguard -t: the start makes it */
        if (mkdir(dir, 0700) != 0
            || (gid != (gid_t)-1 && chown(dir, (uid_t)-1, gid) != 0)
            || chmod(dir, dir_mode(cfg->publish_mode)) != 0) {
            snprintf(err, errlen, "[server] publish_dir %s: cannot create it: %s", dir,
                     strerror(errno));
            return false;
        }
    }
    if (!pubfmt_dir_trusted(dir, 0, &st, why, sizeof why)) {
        snprintf(err, errlen, "[server] publish_dir %s: %s; another local user could put a "
                 "filter of their own where readers look (use a directory only root can "
                 "create, such as /run/bloomguard)", dir, why);
        return false;
    }
    if (st.st_uid != geteuid()) {
        snprintf(err, errlen, "[server] publish_dir %s is owned by uid %lu, not by the daemon's "
                 "user (uid %lu): its owner could replace the published filters (chown it, or "
                 "name a directory bloomguard may create)", dir, (unsigned long)st.st_uid,
                 (unsigned long)geteuid());
        return false;
    }
    if (st.st_mode & S_IWOTH) {
        snprintf(err, errlen, "[server] publish_dir %s may be written by every local user "
                 "(mode %04o): anyone could put a filter of their own where readers look, or "
                 "take the name of the daemon's next file; use a directory of the daemon's own, "
                 "such as /run/bloomguard (bloomguard creates a missing one)", dir,
                 (unsigned)(st.st_mode & 07777));
        return false;
    }
    if ((st.st_mode & S_IWGRP) && (gid == (gid_t)-1 || st.st_gid != gid)) {
        snprintf(err, errlen, "[server] publish_dir %s may be written by its group (gid %lu, "
                 "mode %04o): its members could remove or replace the published filters; "
                 "chmod g-w %s, or name that group in [server] publish_group", dir,
                 (unsigned long)st.st_gid, (unsigned)(st.st_mode & 07777), dir);
        return false;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        snprintf(err, errlen, "[server] publish_dir %s is not writable by the daemon's user: %s",
                 dir, strerror(errno));
        return false;
    }
    return !create || chown_works(cfg, dir, gid, err, errlen);
}
