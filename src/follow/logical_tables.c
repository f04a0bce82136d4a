/*
 * What method logical's tables can be heard with: each table's relations
 * (its members: the table, its inheritance children and partitions), their
 * oids, names and columns as the probe's arrays, the probe's answer split
 * per table, and at an epoch's start which tables the publication lets the
 * stream hear (logical_hear_tables).
 */
#include "logical.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader.h"

static int cmp_member(const void *a, const void *b)
{
    uint32_t x = ((const struct logical_member *)a)->relid;
    uint32_t y = ((const struct logical_member *)b)->relid;
    return x < y ? -1 : x > y;
}

struct logical_member *logical_member(struct logical *l, unsigned i, uint32_t relid)
{
    struct logical_member key = { .relid = relid };
    if (l->nmembers[i] == 1)
        return l->members[i][0].relid == relid ? &l->members[i][0] : NULL;
    return l->nmembers[i] == 0 ? NULL
        : bsearch(&key, l->members[i], l->nmembers[i], sizeof key, cmp_member);
}

/*
 * Table i's members from list (comma-separated oids), keeping the column
 * each still-listed one was followed at (a re-read between Relation
 * messages must not forget a column's type).
 */
static void set_members(struct logical *l, unsigned i, const char *list)
{
    unsigned n = 0;
    for (const char *p = list; *p; p++)
        n += *p == ',';
    n = list[0] ? n + 1 : 0;
    if (n > MEMBERS_MAX)
        n = MEMBERS_MAX;            /* the rest unheard: hear_tables' check fails for them */
    struct logical_member *m = n ? calloc(n, sizeof *m) : NULL;
    unsigned k = 0;
    for (const char *p = list; m != NULL && *p && k < n; k++) {
        char *end;
        m[k].relid = (uint32_t)strtoul(p, &end, 10);
        const struct logical_member *old = logical_member(l, i, m[k].relid);
        if (old != NULL)
            m[k].track = old->track;
        p = *end == ',' ? end + 1 : end;
    }
    if (m != NULL)
        qsort(m, k, sizeof *m, cmp_member);
    free(l->members[i]);
    l->members[i] = m;
    l->nmembers[i] = m != NULL ? k : 0;
}

bool logical_prepare_probe(PGconn *probe, char *err, size_t errlen)
{
    if (!loader_command(probe, "SET plan_cache_mode = force_generic_plan", PGRES_COMMAND_OK,
                        "cannot set the probe's plan cache mode", err, errlen))
        return false;
    return loader_prepare(probe, PROBE_NAME, PROBE_SQL, 5, "cannot prepare the probe", err, errlen)
           && loader_prepare(probe, PROBE_FLUSH_NAME, PROBE_SQL ", txid_current()::text", 5,
                             "cannot prepare the probe", err, errlen);
}

/* Each table's oid (OIDs, not names: the stream names relations by oid). */
void logical_read_relids(struct logical *l, PGconn *probe, unsigned from, unsigned to)
{
    for (unsigned i = from; i < to; i++) {
        const struct filter_config *fc = table_config(l->base.tables[i]);
        char *qtbl = NULL, *qcol = NULL;
        l->relid[i] = 0;
        if (!loader_quote_table(probe, fc->table, fc->column, &qtbl, &qcol, NULL, 0))
            continue;
        const char *params[1] = { qtbl };
        PGresult *r = logical_exec(probe, "SELECT to_regclass($1)::oid", 1, params);
        if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 && !PQgetisnull(r, 0, 0))
            l->relid[i] = (uint32_t)strtoul(PQgetvalue(r, 0, 0), NULL, 10);
        PQclear(r);
        free(qtbl);
        free(qcol);
    }
}

/*
 * The relations the stream carries table i's rows under, read after the
 * check that found them all published: one published since is only one
 * more, and one left out since changes the entry the next probe compares.
 * False when they cannot be read (none kept: the table is not heard).
 */
static bool read_members(struct logical *l, PGconn *probe, unsigned i)
{
    const struct filter_config *fc = table_config(l->base.tables[i]);
    char rel[16];
    snprintf(rel, sizeof rel, "%" PRIu32, l->relid[i]);
    const char *params[3] = { rel, fc->column, l->base.cfg->publication };
    PGresult *r = logical_exec(probe, "SELECT " FOLLOW_MEMBERS_SQL("$1::oid", "$2", "$3"),
                              3, params);
    bool ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 && !PQgetisnull(r, 0, 0);
    set_members(l, i, ok ? PQgetvalue(r, 0, 0) : "");
    PQclear(r);
    return ok;
}

void logical_relid_array(struct logical *l, unsigned n, char *out, size_t cap)
{
    size_t used = (size_t)snprintf(out, cap, "{");
    for (unsigned i = 0; i < n && used < cap; i++)
        used += (size_t)snprintf(out + used, cap - used, "%s%" PRIu32, i ? "," : "", l->relid[i]);
    if (used < cap)
        snprintf(out + used, cap - used, "}");
}

/*
 * The tables' names as the loader quotes them, as an array literal: each
 * element double-quoted, with '"' and '\' escaped.  False when they do not
 * fit in cap.
 */
/* An array literal of strings: each double-quoted, '"' and '\\' escaped; false if cap is short. */
static bool put_array_item(char *out, size_t cap, size_t *used, const char *item, bool first)
{
    if (*used + 2 * strlen(item) + 4 >= cap)
        return false;
    if (!first)
        out[(*used)++] = ',';
    out[(*used)++] = '"';
    for (const char *p = item; *p; p++) {
        if (*p == '"' || *p == '\\')
            out[(*used)++] = '\\';
        out[(*used)++] = *p;
    }
    out[(*used)++] = '"';
    return true;
}

bool logical_name_array(struct logical *l, PGconn *conn, unsigned n, char *out, size_t cap)
{
    size_t used = 0;
    out[used++] = '{';
    for (unsigned i = 0; i < n; i++) {
        const struct filter_config *fc = table_config(l->base.tables[i]);
        char *qtbl = NULL, *qcol = NULL;
        if (!loader_quote_table(conn, fc->table, fc->column, &qtbl, &qcol, NULL, 0))
            return false;
        bool fits = put_array_item(out, cap, &used, qtbl, i == 0);
        free(qtbl);
        free(qcol);
        if (!fits)
            return false;
    }
    out[used++] = '}';
    out[used] = '\0';
    return used < cap;
}

bool logical_column_array(struct logical *l, unsigned n, char *out, size_t cap)
{
    size_t used = 0;
    out[used++] = '{';
    for (unsigned i = 0; i < n; i++)
        if (!put_array_item(out, cap, &used, table_config(l->base.tables[i])->column, i == 0))
            return false;
    out[used++] = '}';
    out[used] = '\0';
    return used < cap;
}

bool logical_probe_lists(const PGresult *r, unsigned n, char fps[][FP_MAX], char shapes[][FP_MAX])
{
    char (*digest)[FP_MAX] = malloc(CONFIG_MAX_FILTERS * sizeof *digest);
    bool ok = digest != NULL && logical_split_fps(PQgetvalue(r, 0, 3), n, fps)
              && logical_split_fps(PQgetvalue(r, 0, 6), n, digest)
              && logical_split_fps(PQgetvalue(r, 0, 7), n, shapes);
    for (unsigned i = 0; ok && i < n; i++) {
        size_t len = strlen(fps[i]);
        ok = len + 1 + strlen(digest[i]) < FP_MAX;
        if (ok)
            snprintf(fps[i] + len, FP_MAX - len, "~%s", digest[i]);
    }
    free(digest);
    return ok;
}

/* Split the probe's list of entries into fps[0..n); false if it does not have n of them. */
bool logical_split_fps(const char *list, unsigned n, char fps[][FP_MAX])
{
    const char *p = list;
    for (unsigned i = 0; i < n; i++) {
        size_t len = strcspn(p, ",");
        if (len >= FP_MAX || (p[len] == '\0' && i + 1 < n))
            return false;
        memcpy(fps[i], p, len);
        fps[i][len] = '\0';
        p += len + (p[len] != '\0');
    }
    return true;
}

/* Whether an entry says the table is published (not "", not ending in "-", before its "~"). */
static bool published_fp(const char *fp)
{
    size_t n = strcspn(fp, "~");
    return n > 0 && fp[n - 1] != '-';
}

/*
 * What the tables [from, to) can be heard with, at the start of an epoch
 * (a connection, an attach): their publication entries, and for those
 * published, that the column is in the column list (pg_publication_tables
 * knows both ways of listing).  A table that is not heard is degraded until
 * it is; the log says why and what to do.
 */
bool logical_hear_tables(struct logical *l, PGconn *probe, unsigned from, unsigned to,
                         char *err, size_t errlen)
{
    struct follower *f = &l->base;
    char arr[CONFIG_MAX_FILTERS * 12 + 4], fps[CONFIG_MAX_FILTERS][FP_MAX];
    char shapes[CONFIG_MAX_FILTERS][FP_MAX], names[NAMES_MAX], cols[NAMES_MAX];
    logical_relid_array(l, to, arr, sizeof arr);
    if (!logical_name_array(l, probe, to, names, sizeof names)
        || !logical_column_array(l, to, cols, sizeof cols)) {
        snprintf(err, errlen, "the tables' names do not fit in a probe");
        return false;
    }
    const char *params[5] = { l->slot, f->cfg->publication, arr, names, cols };
    PGresult *r = PQexecPrepared(probe, PROBE_NAME, 5, params, NULL, NULL, 0);
    bool ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1
              && PQnfields(r) == PROBE_FIELDS && logical_probe_lists(r, to, fps, shapes);
    if (!ok)
        loader_set_error(err, errlen, "cannot read the publication", probe);
    PQclear(r);
    if (!ok)
        return false;
    for (unsigned i = from; i < to; i++) {
        struct table *t = f->tables[i];
        const struct filter_config *fc = table_config(t);
        struct follow_table_offer offer;
        char perr[256];
        bool was = l->heard[i];
        char before[sizeof l->unheard[i]];
        snprintf(before, sizeof before, "%s", l->unheard[i]);
        bool offered = l->relid[i] != 0 && published_fp(fps[i])
                       && follow_probe_table(probe, f->cfg, fc, &offer, perr, sizeof perr);
        bool now = offered && offer.published && read_members(l, probe, i);
        if (now)
            l->unheard[i][0] = '\0';
        else if (l->relid[i] == 0)
            snprintf(l->unheard[i], sizeof l->unheard[i], "%s does not exist", fc->table);
        else if (offered && offer.unpublished[0] != '\0')
            snprintf(l->unheard[i], sizeof l->unheard[i], "%.80s (under %.40s) is not in "
                     "publication %.40s with %.40s", offer.unpublished, fc->table,
                     f->cfg->publication, fc->column);
        else
            snprintf(l->unheard[i], sizeof l->unheard[i], "%.60s is not in publication %.40s "
                     "with %.40s", fc->table, f->cfg->publication, fc->column);
        /*
         * Heard again (back in the publication, a new table under the name),
         * or its entry changed while the stream was away (a reconnect: out of
         * the publication and back meanwhile): the rows written while it was
         * not published were not streamed, and a COPY that started before
         * now would not have been followed.
         */
        bool again = !was, changed = was && strcmp(l->fp[i], fps[i]) != 0;
        bool gap = i < l->known && now && table_loaded(t) && (again || changed);
        /* Before heard: the gap it may start comes before any COPY heard allows. */
        table_schema(t, shapes[i], now ? NULL : l->unheard[i]);
        pthread_mutex_lock(&l->base.mu);
        l->heard[i] = now;
        pthread_mutex_unlock(&l->base.mu);
        if (gap) {
            if (again)
                log_fields(f->lg, LOG_LVL_WARN, fc->name, "degraded",
                           "%s: the replication stream hears %s.%s again: degraded until "
                           "a COPY",
                           fc->name, fc->table, fc->column);
            else
                log_fields(f->lg, LOG_LVL_WARN, fc->name, "degraded",
                           "%s: its publication entry changed while the stream was away "
                           "(%s -> %s): degraded until a COPY",
                           fc->name, l->fp[i], fps[i]);
        }
        snprintf(l->fp[i], sizeof l->fp[i], "%s", fps[i]);
        if (gap) {
            table_gap(t, WANT_POSITION);
            follow_wake(f);
        }
        if (!l->heard[i] && (was || i >= l->known || strcmp(before, l->unheard[i]) != 0))
            log_fields(f->lg, LOG_LVL_WARN, fc->name, "degraded",
                       "%s: the replication stream cannot hear %s.%s: %s; degraded until "
                       "SELECT bloomguard_watch('%s', '%s', method => 'logical')",
                       fc->name, fc->table, fc->column, l->unheard[i], fc->table, fc->column);
    }
    return true;
}
