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

_Static_assert(SNAPSHOT_MAX_POSITION == TABLE_POS_MAX - 1, "a snapshot holds any table position");

bool persist_dir(const struct config *cfg, char *out, size_t outlen)
{
    return config_dir_resolve(cfg->snapshot_path, "STATE_DIRECTORY", out, outlen);
}

/* "<[snapshot] path>/<name><ext>"; false when snapshots are off or it does not fit. */
static bool state_file(const struct config *cfg, const struct filter_config *fc, const char *ext,
                       char *out, size_t outlen)
{
    char dir[PERSIST_PATH_MAX];
    if (!persist_dir(cfg, dir, sizeof dir))
        return false;
    size_t len = strlen(dir);
    int n = snprintf(out, outlen, "%s%s%s%s", dir, dir[len - 1] == '/' ? "" : "/", fc->name, ext);
    return n > 0 && (size_t)n < outlen;
}

bool persist_file(const struct config *cfg, const struct filter_config *fc, char *out,
                  size_t outlen)
{
    return state_file(cfg, fc, ".snap", out, outlen);
}

bool persist_postlog_file(const struct config *cfg, const struct filter_config *fc, char *out,
                          size_t outlen)
{
    return state_file(cfg, fc, ".posts", out, outlen);
}

/* A restore may leave the journal over limits that shrank: say what that means. */
static void warn_over_limits(struct table *t, const struct filter_config *fc,
                             const struct log *lg)
{
    struct table_posts pi;
    table_posts(t, &pi);
    if (pi.count > pi.limit || pi.bytes > pi.max_bytes)
        log_warn(lg, "%s: the restored POST journal holds %llu ids (%llu bytes), more than "
                 "pending_limit %llu or pending_max_bytes %llu: every one is kept, and new POSTs "
                 "are refused (507) until expiries and copies of the table have made room",
                 fc->name, (unsigned long long)pi.count, (unsigned long long)pi.bytes,
                 (unsigned long long)pi.limit, (unsigned long long)pi.max_bytes);
}

static bool journal_restore(void *t, const char *id, size_t len, uint64_t ttl_left)
{
    return table_posts_restore(t, id, len, ttl_left);
}

bool persist_journal(void *t, snapshot_count_fn count, snapshot_entry_fn each, void *ctx)
{
    return table_posts_export(t, count, each, ctx);
}

/* The table's durable step, blocking and not (table_set_durable), for the POST log. */
static int append_durably(void *log, size_t n, const char *const *ids, const size_t *lens,
                          uint64_t ttl)
{
    return postlog_append(log, n, ids, lens, ttl);
}

static int submit_durably(void *log, size_t n, const char *const *ids, const size_t *lens,
                          uint64_t ttl, table_durable_done_fn done, void *done_arg)
{
    return postlog_submit(log, n, ids, lens, ttl, done, done_arg);
}

/*
 * Acknowledged POSTs may be missing from what the log gave back: the
 * table must not answer 404 while one of them could still have been in
 * the journal (until r->lost_until), so every absent answer is "maybe"
 * until then.  The log keeps the hold in its file meanwhile.
 */
static void hold_lost(struct table *t, const struct postlog_opened *r,
                      const struct filter_config *fc, const char *path, const struct log *lg)
{
    time_t now = time(NULL);
    if (r->lost_until == 0 || (uint64_t)now >= r->lost_until) {
        if (r->cut || r->corrupt)
            log_warn(lg, "%s: POST log %s: every entry it could have lost has expired since: "
                     "nothing is held", fc->name, path);
        return;
    }
    int64_t left = (int64_t)(r->lost_until - (uint64_t)now);
    table_hold_absent(t, monoclock_boot_ns() + left * INT64_C(1000000000));
    char when[32] = "?";
    time_t until = (time_t)r->lost_until;
    struct tm tm;
    if (gmtime_r(&until, &tm) != NULL)
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    log_error(lg, "%s: POST log %s: POSTs acknowledged before this start may be lost: every "
              "absent id answers \"maybe\" (degraded) until %s (%lld s), when the last of them "
              "would have expired (pending_ttl)", fc->name, path, when, (long long)left);
}

bool persist_postlog_open(const struct config *cfg, const struct filter_config *fc,
                          struct table *t, const struct log *lg, struct postlog **log)
{
    char path[PERSIST_PATH_MAX];
    struct postlog_opened r;
    *log = NULL;
    if (!persist_postlog_file(cfg, fc, path, sizeof path))
        return true;
    int removed = snapshot_clean_temps(path);
    if (removed > 0)
        log_info(lg, "%s: removed %d temporary POST log file(s) an interrupted rewrite left",
                 fc->name, removed);
    const struct postlog_opts o = { .ttl = fc->pending_ttl, .live = persist_journal,
                                    .live_ctx = t };
    *log = postlog_open(path, &o, journal_restore, t, &r);
    if (*log == NULL) {
        log_error(lg, "%s: POST log %s: %s", fc->name, path, r.why);
        return false;
    }
    if (r.corrupt)
        log_error(lg, "%s: POST log %s: %s (kept as %s.corrupt); the ids acknowledged in them "
                  "are lost unless a copy of the table has them", fc->name, path, r.why, path);
    else if (r.cut && r.lost_until > 0)
        log_error(lg, "%s: POST log %s: %s; the ids acknowledged in what was cut are lost "
                  "unless a copy of the table has them", fc->name, path, r.why);
    else if (r.cut)
        log_warn(lg, "%s: POST log %s: %s", fc->name, path, r.why);
    else if (r.torn_bytes > 0)
        log_warn(lg, "%s: POST log %s: cut off %llu bytes of an append a crash interrupted "
                 "(never acknowledged)", fc->name, path, (unsigned long long)r.torn_bytes);
    hold_lost(t, &r, fc, path, lg);
    if (r.created)
        log_info(lg, "%s: POST log %s created", fc->name, path);
    else
        log_info(lg, "%s: POST log %s: %llu acknowledged ids back in the journal (%llu expired)",
                 fc->name, path, (unsigned long long)r.entries, (unsigned long long)r.expired);
    warn_over_limits(t, fc, lg);
    table_set_durable(t, append_durably, submit_durably, *log);
    return true;
}

/*
 * The identity of a filter's column as snapshot metadata pairs, and back.
 * A snapshot without them (written before they existed) reads as all
 * zeros, which no database's identity matches: its position is not
 * trusted, and the table is copied.
 */
_Static_assert(PERSIST_IDENT_KV == 10, "the ten pairs below");

void persist_ident_to_kv(const struct table_ident *id, struct persist_ident_kv *o)
{
    static const char *const keys[PERSIST_IDENT_KV] = { "relid", "attnum", "typid",
        "base_typid", "typmod", "deterministic", "spell", "dboid", "sysid", "type" };
    snprintf(o->val[0], sizeof o->val[0], "%u", id->relid);
    snprintf(o->val[1], sizeof o->val[1], "%d", id->attnum);
    snprintf(o->val[2], sizeof o->val[2], "%u", id->typid);
    snprintf(o->val[3], sizeof o->val[3], "%u", id->base_typid);
    snprintf(o->val[4], sizeof o->val[4], "%d", id->typmod);
    snprintf(o->val[5], sizeof o->val[5], "%d", id->deterministic ? 1 : 0);
    snprintf(o->val[6], sizeof o->val[6], "%s", spell_type_name(id->spell));
    snprintf(o->val[7], sizeof o->val[7], "%u", id->dboid);
    snprintf(o->val[8], sizeof o->val[8], "%s", id->sysid);
    snprintf(o->val[9], sizeof o->val[9], "%s", id->type_name[0] ? id->type_name : "-");
    for (int i = 0; i < PERSIST_IDENT_KV; i++)
        o->kv[i] = (struct snapshot_kv){ keys[i], o->val[i] };
}

static unsigned long kv_num(const struct snapshot *s, const char *key)
{
    const char *v = snapshot_kv_get(s, key);
    return v ? strtoul(v, NULL, 10) : 0;
}

void persist_ident_from_kv(const struct snapshot *s, struct table_ident *id)
{
    memset(id, 0, sizeof *id);
    id->relid = (uint32_t)kv_num(s, "relid");
    id->attnum = (int)kv_num(s, "attnum");
    id->typid = (uint32_t)kv_num(s, "typid");
    id->base_typid = (uint32_t)kv_num(s, "base_typid");
    const char *tm = snapshot_kv_get(s, "typmod");
    id->typmod = tm ? (int32_t)strtol(tm, NULL, 10) : -1;
    id->deterministic = kv_num(s, "deterministic") != 0;
    id->dboid = (uint32_t)kv_num(s, "dboid");
    const char *v = snapshot_kv_get(s, "sysid");
    snprintf(id->sysid, sizeof id->sysid, "%s", v ? v : "");
    v = snapshot_kv_get(s, "type");
    snprintf(id->type_name, sizeof id->type_name, "%s", v && strcmp(v, "-") != 0 ? v : "");
    /* The spelling its keys were made with: what lookups must apply until the next load. */
    id->spell = SPELL_OTHER;
    v = snapshot_kv_get(s, "spell");
    for (int t = 0; v != NULL && t < SPELL_NTYPES; t++)
        if (strcmp(v, spell_type_name((enum spell_type)t)) == 0)
            id->spell = (enum spell_type)t;
}

/* A snapshot's journal entry back into its table's; lost counts those out of memory lost. */
struct journal_back {
    struct table *t;
    uint64_t lost;
};

static void journal_back(void *arg, const char *id, size_t len, uint64_t ttl_left)
{
    struct journal_back *jb = arg;
    if (!table_posts_restore(jb->t, id, len, ttl_left))
        jb->lost++;
}

/*
 * Put s's journal back into t's and its filter live in t (taken from s);
 * fills r.  seconds: what reading it took (t0 on monoclock_seconds), for
 * /stats.
 */
static void install(struct snapshot *s, struct table *t, const struct filter_config *fc,
                    const struct log *lg, double t0, struct persist_restored *r)
{
    struct filter_info fi;
    /* The configured growth, not the writer's: this daemon's max_layers holds. */
    struct filter_growth growth = table_growth(fc);
    filter_set_growth(s->filter, &growth);
    filter_info(s->filter, &fi);
    struct journal_back jb = { t, 0 };
    snapshot_journal_each(s, journal_back, &jb);
    if (jb.lost > 0)
        log_warn(lg, "%s: out of memory restoring the snapshot's POST journal: the IDs it could "
                 "not keep answer 200 until the next rebuild, then may not", fc->name);
    warn_over_limits(t, fc, lg);
    r->items = fi.items;
    snprintf(r->position, sizeof r->position, "%s",
             s->position && strlen(s->position) < sizeof r->position ? s->position : "");
    persist_ident_from_kv(s, &r->ident);
    r->seconds = monoclock_seconds() - t0;
    /* The POST log's entries (persist_postlog_open) may be newer than the snapshot: all go in. */
    struct filter *f = s->filter;
    s->filter = NULL;
    if (!table_restore(t, f, r->position, r->from == PERSIST_PEER ? "peer" : "snapshot",
                       r->items, r->seconds, &r->ident))
        log_warn(lg, "%s: cannot copy the snapshot's filter into a published file: it is "
                 "served unpublished until the next load publishes one", fc->name);
}

bool persist_restore(const struct config *cfg, const struct filter_config *fc, const char *token,
                     atomic_bool *stop, struct table *t, const struct log *lg,
                     struct persist_restored *r)
{
    char path[PERSIST_PATH_MAX], why[SNAPSHOT_WHY_LEN];
    struct snapshot s;
    const struct snapshot_expect expect = {
        .name = fc->name, .table = fc->table, .column = fc->column,
        .target_fpp = fc->false_positive_rate,
        .kind = filter_kind_name((enum filter_kind)fc->kind),
    };
    double t0 = monoclock_seconds();
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
        /* The defaults of peer.h: a deadline from the size the peer announces. */
        const struct peer_limits lim = { .stop = stop };
        st = peer_fetch_snapshot(cfg->bootstrap_from, fc->name, token, cfg->bootstrap_ca_file,
                                 &expect, &lim, &s, why, sizeof why);
        if (st == SNAPSHOT_OK)
            r->from = PERSIST_PEER;
        else if (stop != NULL && atomic_load(stop))
            log_info(lg, "%s: fetching the snapshot of peer %s: %s", fc->name,
                     cfg->bootstrap_from, why);
        else
            log_warn(lg, "%s: snapshot of peer %s ignored (%s): %s; loading the table", fc->name,
                     cfg->bootstrap_from, snapshot_strstatus(st), why);
    }
    if (st != SNAPSHOT_OK) {
        snapshot_release(&s);
        return false;
    }
    install(&s, t, fc, lg, t0, r);
    log_info(lg, "%s: serving the snapshot of %s (%llu items, position %s) after %.3f s; "
             "degraded until it has caught up with the table", fc->name,
             r->from == PERSIST_FILE ? path : cfg->bootstrap_from, (unsigned long long)r->items,
             r->position[0] ? r->position : "none", r->seconds);
    snapshot_release(&s);
    return true;
}

int persist_save(const struct config *cfg, const struct filter_config *fc, struct table *t,
                 const char *position, uint64_t horizon_ms, const struct table_ident *ident,
                 const struct log *lg)
{
    char path[PERSIST_PATH_MAX];
    const struct filter *f = table_live_filter(t);
    if (!persist_file(cfg, fc, path, sizeof path) || f == NULL)
        return 0;
    struct persist_ident_kv ikv;
    persist_ident_to_kv(ident, &ikv);
    const struct snapshot_meta m = {
        .name = fc->name, .table = fc->table, .column = fc->column,
        .position = position, .horizon_ms = horizon_ms, .created = (uint64_t)time(NULL),
        .kv = ikv.kv, .n_kv = PERSIST_IDENT_KV,
    };
    double t0 = monoclock_seconds();
    int e = snapshot_write(path, &m, f, persist_journal, t);
    if (e != 0)
        log_error(lg, "%s: cannot write the snapshot %s: %s (the previous one, if any, stays)",
                  fc->name, path, strerror(e));
    else
        log_debug(lg, "%s: snapshot written to %s in %.3f s", fc->name, path,
                  monoclock_seconds() - t0);
    return e;
}
