/*
 * One daemon per directory (rundirs.h): the locks of a run's directories,
 * taken at start and checked, with its published filters, on each tick.
 */
#include "rundirs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dirlock.h"
#include "persist.h"

struct rundirs {
    struct dirlock *state, *publish;    /* publish NULL: none, or state's directory */
    char pubdir[4096];                  /* "" when publishing is off */
};

struct rundirs *rundirs_take(const struct config *cfg, const struct log *lg)
{
    char dir[4096], err[1024];
    struct stat st, pst;
    struct rundirs *d = calloc(1, sizeof *d);
    if (d == NULL) {
        log_error(lg, "out of memory");
        return NULL;
    }
    bool state = persist_dir(cfg, dir, sizeof dir) && stat(dir, &st) == 0;
    if (state && (d->state = dirlock_take(dir, "[snapshot] path", NULL, err, sizeof err)) == NULL)
        goto fail;
    if (!publish_dir(cfg, d->pubdir, sizeof d->pubdir)) {
        d->pubdir[0] = '\0';
        if (strcmp(cfg->publish_dir, "auto") == 0)
            log_info(lg, "[server] publish_dir = auto, but RUNTIME_DIRECTORY is not set: the "
                     "filters are not published");
        return d;
    }
    /* Made (if missing) under publish.c's rules before a lock file goes into it. */
    if (!publish_dir_check(cfg, d->pubdir, true, err, sizeof err))
        goto fail;
    /* One directory for both: one lock (a second OFD lock of the same file would conflict). */
    if (state && stat(d->pubdir, &pst) == 0 && pst.st_dev == st.st_dev && pst.st_ino == st.st_ino)
        return d;
    if ((d->publish = dirlock_take(d->pubdir, "[server] publish_dir", NULL, err,
                                   sizeof err)) == NULL)
        goto fail;
    return d;
fail:
    log_error(lg, "%s", err);
    rundirs_free(d);
    return NULL;
}

const char *rundirs_publish_dir(const struct rundirs *d)
{
    return d->pubdir;
}

/* Check l (NULL: none); a message only when something changed.  False: another holds it. */
static bool check_lock(struct dirlock *l, const struct log *lg)
{
    char msg[1024];
    if (l == NULL)
        return true;
    bool mine = dirlock_check(l, msg, sizeof msg);
    if (msg[0] != '\0')
        mine ? log_warn(lg, "%s", msg) : log_error(lg, "%s", msg);
    return mine;
}

void rundirs_check(struct rundirs *d, const struct config *cfg, struct publish **pubs,
                   struct source *src, const struct log *lg)
{
    char err[1024];
    struct stat st;
    bool state_mine = check_lock(d->state, lg);
    if (d->pubdir[0] == '\0')
        return;
    /* A removed directory is made again, as at the start, so that lock and files can return. */
    if (stat(d->pubdir, &st) != 0 && errno == ENOENT) {
        if (publish_dir_check(cfg, d->pubdir, true, err, sizeof err))
            log_warn(lg, "[server] publish_dir %s was removed: made again", d->pubdir);
        else
            log_error(lg, "%s", err);
    }
    /*
     * The path is this run's only while it holds the directory: a daemon
     * that took it meanwhile (the lock file was removed) publishes there now.
     */
    bool mine = d->publish != NULL ? check_lock(d->publish, lg) : state_mine;
    for (unsigned t = 0; mine && t < cfg->n_filters; t++)
        if (pubs[t] != NULL && publish_check(pubs[t]) == PUBLISH_LOST)
            source_request_rebuild(src, t, WANT_REPUBLISH, NULL);
}

void rundirs_free(struct rundirs *d)
{
    if (d == NULL)
        return;
    dirlock_free(d->publish);
    dirlock_free(d->state);
    free(d);
}
