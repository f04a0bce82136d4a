/*
 * Method upstream: a table's load is its upstream's snapshot (GET
 * /replicate/NAME/snapshot, the snapshot format of snapshot.h, made fresh
 * for the request), put live where a COPY's filter would go, then the
 * stream resumes from the seq it is exact at.  A snapshot goes live only
 * if it loses nothing the table's horizon vouches for: the horizon it
 * proves (the time asked minus the upstream's horizon age in it) is no
 * older than the table's, and it covers the upstream's epoch.  Else the
 * load fails and is retried, while the old filter keeps answering.
 */
#include "upstream.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "persist.h"
#include "snapshot.h"
#include "spell.h"

/* A snapshot's body, gathered: at most its announced length. */
struct fetch {
    unsigned char *buf;
    uint64_t len, cap;
};

static bool on_head(void *arg, const struct httpc_head *h, char *why, size_t whylen)
{
    struct fetch *fb = arg;
    if (!h->has_length) {
        snprintf(why, whylen, "a snapshot without a Content-Length");
        return false;
    }
    if (h->length > SIZE_MAX || (fb->buf = malloc(h->length ? (size_t)h->length : 1)) == NULL) {
        snprintf(why, whylen, "no memory for a snapshot of %llu bytes",
                 (unsigned long long)h->length);
        return false;
    }
    fb->cap = h->length;
    return true;
}

static bool on_body(void *arg, const void *buf, size_t len)
{
    struct fetch *fb = arg;
    if (len > fb->cap - fb->len)
        return false;
    memcpy(fb->buf + fb->len, buf, len);
    fb->len += len;
    return true;
}

/* What the upstream says, in the snapshot's metadata, it is exact at. */
struct exact {
    uint64_t history, seq, epoch, covered, generation;
    int64_t age_ns;                 /* -1: no horizon */
};

static bool kv_u64(const struct snapshot *s, const char *key, int base, uint64_t *out)
{
    const char *v = snapshot_kv_get(s, key);
    char *end;
    if (v == NULL || *v == '\0')
        return false;
    *out = strtoull(v, &end, base);
    return *end == '\0';
}

static bool exact_of(const struct snapshot *s, struct exact *e)
{
    uint64_t age;
    const char *a = snapshot_kv_get(s, "fleet_horizon_age_ns");
    if (!kv_u64(s, "fleet_history", 16, &e->history) || !kv_u64(s, "fleet_seq", 10, &e->seq)
        || !kv_u64(s, "fleet_epoch", 10, &e->epoch)
        || !kv_u64(s, "fleet_covered", 10, &e->covered)
        || !kv_u64(s, "fleet_generation", 10, &e->generation) || a == NULL || e->history == 0)
        return false;
    e->age_ns = strcmp(a, "none") == 0 ? -1
              : kv_u64(s, "fleet_horizon_age_ns", 10, &age) && age < INT64_MAX / 2 ? (int64_t)age
              : -2;
    return e->age_ns >= -1;
}

/*
 * Fetch upstream url's snapshot of t into *s, and where it is exact; false
 * with err, *other when it is of another filter, table or column.
 */
static bool fetch(struct upstream *u, unsigned url, struct table *t, struct snapshot *s,
                  struct exact *e, bool *other, char *err, size_t errlen)
{
    char target[CONFIG_UPSTREAM_URL_MAX + 128], why[SNAPSHOT_WHY_LEN];
    const struct filter_config *fc = table_config(t);
    struct fetch fb = { NULL, 0, 0 };
    struct httpc_opts o = up_opts(u, "snapshot", 10000);
    /* As the peer bootstrap: 10 s for the head, then at least 1 MiB/s. */
    o.head_ms = 10000;
    o.min_rate = 1024 * 1024;
    if (!up_url(u, url, fc->name, "/snapshot", target, sizeof target)) {
        snprintf(err, errlen, "the URL is too long");
        return false;
    }
    struct httpc *c = httpc_new();
    char got[512] = "out of memory";
    enum httpc_status st = c ? httpc_get(c, target, &o, on_head, on_body, &fb, got, sizeof got)
                             : HTTPC_ERROR;
    httpc_free(c);
    /* The public part first (before a colon: /readyz shows it), the URL after. */
    if (st != HTTPC_OK) {
        snprintf(err, errlen, "cannot fetch the upstream's snapshot: %s", got);
        free(fb.buf);
        return false;
    }
    /* Its name, table and column, every length and both checksums (snapshot.h). */
    const struct snapshot_expect expect = { .name = fc->name, .table = fc->table,
                                            .column = fc->column };
    enum snapshot_status ss = snapshot_read_mem(fb.buf, (size_t)fb.len, &expect, s, why,
                                                sizeof why);
    free(fb.buf);
    *other = ss == SNAPSHOT_OTHER_NAME || ss == SNAPSHOT_OTHER_TABLE || ss == SNAPSHOT_OTHER_COLUMN;
    if (ss != SNAPSHOT_OK) {
        snprintf(err, errlen, "the upstream's snapshot is unusable (%s): %s: %s",
                 snapshot_strstatus(ss), target, why);
        return false;
    }
    if (!exact_of(s, e)) {
        snapshot_release(s);
        snprintf(err, errlen, "the upstream's snapshot does not say where it is exact: %s "
                 "(no replication metadata)", target);
        return false;
    }
    return true;
}

static void add_kept(void *arg, uint64_t h)
{
    filter_add_hash(arg, h);
}

struct keep_ctx {
    struct fleetjournal *j;
    uint64_t now;
};

static void keep_post(void *arg, const char *id, size_t len, uint64_t ttl_left)
{
    struct keep_ctx *k = arg;
    fleetjournal_add(k->j, filter_hash(id, len), ttl_left, k->now);
}

/* Whether a want only advises a fresh snapshot (deletes shed, a larger filter). */
static bool advisory(enum table_want w)
{
    return w == WANT_INTERVAL || w == WANT_GROWTH || w == WANT_DELETES || w == WANT_SIGHUP;
}

/* ------------------------------------------------------- the identity -- */

void up_ident_of(const struct fleetwire_ident *w, struct table_ident *out)
{
    memset(out, 0, sizeof *out);
    out->relid = w->relid;
    out->attnum = w->attnum;
    out->typid = w->typid;
    out->base_typid = w->base_typid;
    out->typmod = w->typmod;
    out->deterministic = w->deterministic;
    out->dboid = w->dboid;
    snprintf(out->sysid, sizeof out->sysid, "%s", w->sysid);
    snprintf(out->type_name, sizeof out->type_name, "%s", w->type_name);
    out->spell = SPELL_OTHER;
    for (int s = 0; s < SPELL_NTYPES; s++)
        if (strcmp(w->spell, spell_type_name((enum spell_type)s)) == 0)
            out->spell = (enum spell_type)s;
}

bool up_same_ident_locked(struct up_table *ut, const struct table_ident *id, const char *name,
                          const char *table, const char *column, char *why, size_t whylen)
{
    const struct filter_config *fc = table_config(ut->t);
    if (strcmp(name, fc->name) != 0 || strcmp(table, fc->table) != 0
        || strcmp(column, fc->column) != 0) {
        snprintf(why, whylen, "it serves filter %.40s of %.80s.%.40s, not %s of %s.%s", name,
                 table, column, fc->name, fc->table, fc->column);
        return false;
    }
    const struct table_ident *had = &ut->ident;
    if (!ut->pinned || (had->relid == id->relid && had->attnum == id->attnum
                        && had->typid == id->typid && had->base_typid == id->base_typid
                        && had->spell == id->spell && had->dboid == id->dboid
                        && strcmp(had->sysid, id->sysid) == 0))
        return true;
    snprintf(why, whylen, "it serves relation %u column %d (%s) of database %u in cluster %s, "
             "not relation %u column %d (%s) of database %u in cluster %s", id->relid,
             id->attnum, spell_type_name(id->spell), id->dboid, id->sysid, had->relid,
             had->attnum, spell_type_name(had->spell), had->dboid, had->sysid);
    return false;
}

/*
 * Put s live in t (ut->mu held): inserts reach it from now on, the
 * acknowledged POSTs kept (ours and the snapshot's) go into it, it goes
 * live with the horizon it proves, and the stream resumes from it.
 */
static bool install_locked(struct up_table *ut, struct snapshot *s, const struct exact *e,
                           const struct table_ident *ident, uint64_t epoch, int64_t proved,
                           uint64_t *items, char *err, size_t errlen)
{
    struct table *t = ut->t;
    struct filter *f = s->filter;
    struct filter_info fi;
    struct filter_growth g = table_growth(table_config(t));
    s->filter = NULL;
    filter_set_growth(f, &g);
    struct table_load *l = table_load_adopt(t, f, ident);
    if (l == NULL) {
        snprintf(err, errlen, "out of memory");
        return false;
    }
    /* The filter going live (a published table's is a copy of f in its file). */
    f = table_load_filter(l);
    uint64_t now = monoclock_boot_s();
    fleetjournal_each(ut->posts, now, add_kept, f);
    struct keep_ctx k = { ut->posts, now };
    snapshot_journal_each(s, keep_post, &k);
    filter_info(f, &fi);
    char pos[TABLE_POS_MAX];
    snprintf(pos, sizeof pos, "upstream %016" PRIx64 ":%" PRIu64, e->history, e->seq);
    /*
     * Adaptive (issue 35): the snapshot holds keys this replica never
     * applied one by one, so never killed entries with: it starts with an
     * empty verified set, which its next stream fills again
     * (table_adapt.h, "On a replica").
     */
    table_forget_verified(t);
    if (!table_load_commit(l, epoch, proved, pos)) {
        snprintf(err, errlen, "out of memory for the keys added during the load");
        return false;
    }
    ut->m = (struct up_mirror){ .have = true, .history = e->history, .seq = e->seq,
                                .covered = e->covered, .generation = e->generation,
                                .epoch = epoch, .version = ut->m.version + 1 };
    /*
     * A gap while it was fetched (the horizon thread heard another history
     * or epoch) is not covered by it: still lost, so that another is asked
     * for (else no proof could ever move the horizon again).
     */
    ut->lost = !table_covered(t);
    if (ut->lost)
        snprintf(ut->lost_why, sizeof ut->lost_why, "a gap while the snapshot was fetched");
    ut->n_proofs = 0;
    ut->pinned = true;
    ut->ident = *ident;
    ut->snapshots++;
    pthread_cond_broadcast(&ut->cv);
    *items = fi.items;
    return true;
}

bool up_load(struct follower *f, struct table *t, const struct table_job *job, uint64_t *rows,
             double *secs, char *err, size_t errlen)
{
    struct upstream *u = (struct upstream *)f;
    struct up_table *ut = up_table_of(u, t);
    int64_t t0 = monoclock_boot_ns();
    struct snapshot s = { 0 };
    struct exact e;
    struct table_ident ident;
    bool ok = false;
    *secs = 0;
    if (ut == NULL || u->token_err[0] != '\0') {
        snprintf(err, errlen, "%s", ut == NULL ? "the table's stream has not started"
                                               : u->token_err);
        return false;
    }
    pthread_mutex_lock(&ut->mu);
    bool nothing_new = ut->m.have && !ut->lost && advisory(job->why)
                       && ut->heard_history == ut->m.history
                       && ut->heard_generation <= ut->m.generation;
    pthread_mutex_unlock(&ut->mu);
    if (nothing_new) {
        struct table_status st;
        table_status(t, &st);
        *rows = st.last_rows;
        return true;
    }
    unsigned url = up_current(u);
    /* The load's epoch before the snapshot is made: a gap since is not covered by it. */
    uint64_t epoch = table_epoch(t);
    /*
     * The stream applies nothing while the snapshot is fetched, so that the
     * keys applied are all at or below the seq it is exact at (it is made
     * after this request arrives): of the same history, it then holds every
     * row the horizon vouches for.
     */
    pthread_mutex_lock(&ut->mu);
    ut->paused = true;
    pthread_mutex_unlock(&ut->mu);
    int64_t asked = monoclock_boot_ns();
    bool other = false, fetched = fetch(u, url, t, &s, &e, &other, err, errlen);
    pthread_mutex_lock(&ut->mu);
    if (!fetched) {
        ut->paused = false;
        pthread_cond_broadcast(&ut->cv);
        pthread_mutex_unlock(&ut->mu);
        up_report(u, url, other ? UP_MISMATCH : UP_FAILED, err);
        goto out;
    }
    persist_ident_from_kv(&s, &ident);
    int64_t proved = e.age_ns >= 0 ? asked - e.age_ns : 0;
    char why[320];
    struct table_proof have;
    table_proof(t, &have);
    bool same = ut->m.have && e.history == ut->m.history && e.seq >= ut->m.seq;
    const char *skip = NULL;
    if (!up_same_ident_locked(ut, &ident, table_name(t), table_config(t)->table,
                              table_config(t)->column, why, sizeof why)) {
        snprintf(err, errlen, "the upstream serves another table: %s: %s", u->urls[url], why);
        other = true;
    } else if (have.loaded && !same && have.horizon > 0
               && (e.age_ns < 0 || proved < have.horizon)) {
        /*
         * Of another history (a restart, another upstream), the snapshot
         * must prove at least the horizon the live filter vouches for: its
         * filter then holds every row the live one must.
         */
        skip = "the upstream's snapshot proves less than this replica's filter (its horizon is "
               "older), which is kept";
    } else if (have.loaded && e.covered != e.epoch) {
        skip = "the upstream has not loaded its own table since its gap (the filter is kept)";
    } else {
        ok = install_locked(ut, &s, &e, &ident, epoch, proved, rows, err, errlen);
    }
    ut->paused = false;
    pthread_cond_broadcast(&ut->cv);
    pthread_mutex_unlock(&ut->mu);
    if (other) {
        up_report(u, url, UP_MISMATCH, err + strlen("the upstream serves another table: "));
    } else if (skip != NULL && advisory(job->why)) {
        /* Only advised (a new generation, growth): nothing lost by not taking it now. */
        log_fields(f->lg, LOG_LVL_DEBUG, table_name(t), "upstream_snapshot",
                   "%s: snapshot of %s not taken: %s", table_name(t), u->urls[url], skip);
        struct table_status st;
        table_status(t, &st);
        *rows = st.last_rows;
        ok = true;
    } else if (skip != NULL) {
        snprintf(err, errlen, "%s: %s", skip, u->urls[url]);
    }
    if (ok && skip == NULL)
        log_fields(f->lg, LOG_LVL_INFO, table_name(t), "upstream_snapshot",
                   "%s: snapshot of %s live (%llu keys, exact at %016" PRIx64 ":%" PRIu64
                   ", upstream epoch %" PRIu64 "%s)", table_name(t), u->urls[url],
                   (unsigned long long)*rows, e.history, e.seq, e.epoch,
                   e.age_ns < 0 ? ", no horizon yet" : "");
out:
    snapshot_release(&s);
    *secs = (double)(monoclock_boot_ns() - t0) / 1e9;
    return ok;
}
