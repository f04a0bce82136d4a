/*
 * Snapshot policy: file names, restore at start, writes.  See persist.h.
 */
#include "persist.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "peer.h"
#include "snapshot.h"
#include "table.h"

/* How long a peer may take to connect and between bytes of its snapshot. */
#define PEER_TIMEOUT_MS 10000

bool persist_dir(const struct config *cfg, char *out, size_t outlen)
{
    const char *p = cfg->snapshot_path ? cfg->snapshot_path : "";
    size_t len = strlen(p);
    if (strcmp(p, "auto") == 0) {
        p = getenv("STATE_DIRECTORY");
        p = p ? p : "";
        len = strcspn(p, ":");
    }
    int n = snprintf(out, outlen, "%.*s", (int)len, p);
    return len > 0 && n > 0 && (size_t)n < outlen;
}

bool persist_file(const struct config *cfg, const struct filter_config *fc, char *out,
                  size_t outlen)
{
    char dir[PERSIST_PATH_MAX];
    if (!persist_dir(cfg, dir, sizeof dir))
        return false;
    size_t len = strlen(dir);
    int n = snprintf(out, outlen, "%s%s%s.snap", dir, dir[len - 1] == '/' ? "" : "/", fc->name);
    return n > 0 && (size_t)n < outlen;
}

static double mono_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Make s's filter live and its journal pending again; fills r. */
static void install(struct snapshot *s, struct guard *g, struct pending *p,
                    const struct filter_config *fc, const struct log *lg,
                    struct persist_restored *r)
{
    struct filter_info fi;
    /* The configured growth, not the writer's: this daemon's max_layers holds. */
    struct filter_growth growth = table_growth(fc);
    filter_set_growth(s->filter, &growth);
    filter_info(s->filter, &fi);
    enum pending_result pr = snapshot_restore_journal(s, p, pending_clock());
    if (pr != PENDING_OK)
        log_warn(lg, "%s: the snapshot's POST journal does not fit in this journal's limits: "
                 "the IDs it could not keep answer 200 until the next rebuild, then may not",
                 fc->name);
    guard_begin(g, s->filter);
    guard_commit(g);
    s->filter = NULL;
    r->items = fi.items;
    snprintf(r->position, sizeof r->position, "%s",
             s->position && strlen(s->position) < sizeof r->position ? s->position : "");
}

bool persist_restore(const struct config *cfg, const struct filter_config *fc, const char *token,
                     struct guard *g, struct pending *p, const struct log *lg,
                     struct persist_restored *r)
{
    char path[PERSIST_PATH_MAX], why[SNAPSHOT_WHY_LEN];
    struct snapshot s;
    const struct snapshot_expect expect = {
        .name = fc->name, .table = fc->table, .column = fc->column,
        .target_fpp = fc->false_positive_rate,
    };
    double t0 = mono_seconds();
    enum snapshot_status st = SNAPSHOT_MISSING;

    memset(r, 0, sizeof *r);
    memset(&s, 0, sizeof s);
    if (persist_file(cfg, fc, path, sizeof path)) {
        int removed = snapshot_clean_temps(path);
        if (removed > 0)
            log_info(lg, "%s: removed %d temporary snapshot file(s) an interrupted write left",
                     fc->name, removed);
        st = snapshot_read(path, &expect, &s, why, sizeof why);
        if (st == SNAPSHOT_OK)
            r->from = PERSIST_FILE;
        else if (st == SNAPSHOT_MISSING)
            log_info(lg, "%s: no snapshot at %s yet", fc->name, path);
        else
            log_warn(lg, "%s: snapshot %s ignored (%s): %s; loading the table", fc->name, path,
                     snapshot_strstatus(st), why);
    }
    if (st == SNAPSHOT_MISSING && cfg->bootstrap_from[0] != '\0') {
        snapshot_release(&s);
        memset(&s, 0, sizeof s);
        st = peer_fetch_snapshot(cfg->bootstrap_from, fc->name, token, &expect, PEER_TIMEOUT_MS,
                                 &s, why, sizeof why);
        if (st == SNAPSHOT_OK)
            r->from = PERSIST_PEER;
        else
            log_warn(lg, "%s: snapshot of peer %s ignored (%s): %s; loading the table", fc->name,
                     cfg->bootstrap_from, snapshot_strstatus(st), why);
    }
    if (st != SNAPSHOT_OK) {
        snapshot_release(&s);
        return false;
    }
    install(&s, g, p, fc, lg, r);
    r->seconds = mono_seconds() - t0;
    log_info(lg, "%s: serving the snapshot of %s (%llu items, feed position %s) after %.3f s; "
             "degraded until it has caught up with the table", fc->name,
             r->from == PERSIST_FILE ? path : cfg->bootstrap_from, (unsigned long long)r->items,
             r->position[0] ? r->position : "none", r->seconds);
    snapshot_release(&s);
    return true;
}

int persist_save(const struct config *cfg, const struct filter_config *fc, struct guard *g,
                 struct pending *p, const char *position, uint64_t horizon_ms,
                 const struct log *lg)
{
    char path[PERSIST_PATH_MAX];
    const struct filter *f = guard_live(g);
    if (!persist_file(cfg, fc, path, sizeof path) || f == NULL)
        return 0;
    const struct snapshot_meta m = {
        .name = fc->name, .table = fc->table, .column = fc->column,
        .position = position, .horizon_ms = horizon_ms, .created = (uint64_t)time(NULL),
    };
    double t0 = mono_seconds();
    int e = snapshot_write(path, &m, f, p, pending_clock());
    if (e != 0)
        log_error(lg, "%s: cannot write the snapshot %s: %s (the previous one, if any, stays)",
                  fc->name, path, strerror(e));
    else
        log_debug(lg, "%s: snapshot written to %s in %.3f s", fc->name, path,
                  mono_seconds() - t0);
    return e;
}
