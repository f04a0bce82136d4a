/*
 * The configuration as a whole: defaults, setting keys, [filter NAME]
 * inheritance and checks across keys, copies, and what a reload changes.
 * It sits on top of its parts and calls down into them: every value is
 * handled through its row's type (config_types.c), the rows are in
 * config_keys.c; conffile.c, above it, reads files through config_build.h.
 */
#include "config.h"
#include "config_build.h"
#include "config_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ERR_VALUE_MAX CONFIG_ERR_VALUE_MAX
#define errf config_errf

/* Each key's type, on the struct its value lives in. */
#define TYPE(k) ((k)->type)

/* Where key k's value lives in c: c itself, or for a per-filter key fc (NULL: the global base). */
static void *key_obj(struct config *c, struct filter_config *fc, const struct config_key *k)
{
    if (!k->per_filter)
        return c;
    return fc != NULL ? fc : &c->base;
}

/* --- [filter NAME] --- */

/* Release what a filter_config owns: its name and whatever its keys' types own. */
static void fc_free(struct filter_config *fc)
{
    free(fc->name);
    fc->name = NULL;
    for (size_t i = 0; i < config_nkeys; i++)
        if (config_keys[i].per_filter && TYPE(&config_keys[i])->free != NULL)
            TYPE(&config_keys[i])->free(&config_keys[i], fc);
}

/* dst (owning nothing: overwritten) becomes a deep copy of src; on failure dst is freed. */
static bool fc_copy(struct filter_config *dst, const struct filter_config *src)
{
    bool ok;

    memset(dst, 0, sizeof *dst);
    ok = config_copy_string(&dst->name, src->name);
    for (size_t i = 0; ok && i < config_nkeys; i++)
        if (config_keys[i].per_filter)
            ok = TYPE(&config_keys[i])->copy(&config_keys[i], dst, src);
    if (!ok)
        fc_free(dst);
    return ok;
}


int config_filter_find(const struct config *c, const char *name)
{
    for (unsigned i = 0; i < c->n_filters; i++)
        if (c->filters[i].name != NULL && strcmp(c->filters[i].name, name) == 0)
            return (int)i;
    return -1;
}

int config_filter_add(struct config *c, const char *name, char *err, size_t errlen)
{
    struct filter_config *fc;

    if (!config_filter_name_valid(name, err, errlen))
        return -1;
    if (!c->named_filters) {
        /* The first [filter NAME] replaces the filter the global keys made. */
        for (unsigned i = 0; i < c->n_filters; i++)
            fc_free(&c->filters[i]);
        c->n_filters = 0;
        c->named_filters = true;
    }
    if (config_filter_find(c, name) >= 0) {
        errf(err, errlen, "[filter %s] appears twice", name);
        return -1;
    }
    if (c->n_filters >= CONFIG_MAX_FILTERS) {
        errf(err, errlen, "too many [filter NAME] sections (at most %d)", CONFIG_MAX_FILTERS);
        return -1;
    }
    fc = &c->filters[c->n_filters];
    memset(fc, 0, sizeof *fc);
    if ((fc->name = strdup(name)) == NULL) {
        errf(err, errlen, "out of memory");
        return -1;
    }
    memset(c->filter_set[c->n_filters], 0, sizeof c->filter_set[c->n_filters]);
    return (int)c->n_filters++;
}

/* Each template's filter index from its name; false (blaming the template) for an unknown name. */
static bool resolve_templates(struct config *c, int *blame_template, char *err, size_t errlen)
{
    for (unsigned t = 0; t < c->n_uri_templates; t++) {
        int f = 0;
        if (c->uri_template_names[t] != NULL
            && (f = config_filter_find(c, c->uri_template_names[t])) < 0) {
            *blame_template = (int)t;
            errf(err, errlen, "[auth] uri_template: %s names the filter \"%s\", but there is no "
                 "[filter %s]", c->uri_templates[t], c->uri_template_names[t],
                 c->uri_template_names[t]);
            return false;
        }
        c->uri_template_filter[t] = (unsigned)f;
    }
    return true;
}

bool config_resolve(struct config *c, int *blame_filter, int *blame_template,
                    char *err, size_t errlen)
{
    *blame_filter = *blame_template = -1;
    if (!c->named_filters) {
        fc_free(&c->filters[0]);
        if (!fc_copy(&c->filters[0], &c->base) || !config_copy_string(&c->filters[0].name, "default"))
            goto oom;
        c->n_filters = 1;
        memset(c->filter_set[0], 0, sizeof c->filter_set[0]);
    }
    for (unsigned i = 0; c->named_filters && i < c->n_filters; i++) {
        struct filter_config *fc = &c->filters[i];
        for (size_t k = 0; k < config_nkeys; k++) {
            if (!config_keys[k].per_filter || (c->filter_set[i][k / 64] >> (k % 64) & 1) != 0)
                continue;
            /*
             * A filter is its table: one that names none would silently
             * guard the global default's table, never what was meant.
             */
            if (config_keys[k].offset == offsetof(struct filter_config, table)
                || config_keys[k].offset == offsetof(struct filter_config, column)) {
                *blame_filter = (int)i;
                errf(err, errlen, "[filter %s] sets no %s: each [filter NAME] section names its "
                     "own table and column", fc->name, config_keys[k].name);
                return false;
            }
            if (config_keys[k].offset == offsetof(struct filter_config, channel)) {
                /* Each filter its own channel: one trigger per table notifies only its filter. */
                char ch[256], msg[200];
                snprintf(ch, sizeof ch, "%s_%s", c->base.channel, fc->name);
                if (!config_check_channel(ch, msg, sizeof msg)) {
                    *blame_filter = (int)i;
                    errf(err, errlen, "[filter %s] channel: the default %s is too long: set channel",
                         fc->name, ch);
                    return false;
                }
                if (!config_copy_string(&fc->channel, ch))
                    goto oom;
            } else if (!config_keys[k].type->copy(&config_keys[k], fc, &c->base)) {
                goto oom;
            }
        }
    }
    for (unsigned i = 0; i < c->n_filters; i++) {
        const struct filter_config *a = &c->filters[i];
        for (unsigned j = 0; j < i; j++) {
            const struct filter_config *b = &c->filters[j];
            *blame_filter = (int)i;
            if (strcmp(a->table, b->table) == 0 && strcmp(a->column, b->column) == 0) {
                errf(err, errlen, "[filter %s] reads the same table and column as [filter %s] "
                     "(table %s, column %s)", a->name, b->name, a->table, a->column);
                return false;
            }
            if (strcmp(a->channel, b->channel) == 0) {
                errf(err, errlen, "[filter %s] listens on the same channel as [filter %s] (%s)",
                     a->name, b->name, a->channel);
                return false;
            }
        }
    }
    *blame_filter = -1;
    return resolve_templates(c, blame_template, err, errlen);

oom:
    errf(err, errlen, "out of memory");
    return false;
}

/* Store one already-unquoted value of key k in c, or for a per-filter key in fc (NULL: the global value). */
static bool key_set(struct config *c, struct filter_config *fc, const struct config_key *k,
                    const char *v, char *err, size_t errlen)
{
    return TYPE(k)->set(k, key_obj(c, fc, k), v, err, errlen);
}

bool config_key_apply(struct config *c, size_t i, const char *value, char *err, size_t errlen)
{
    if (i >= config_nkeys) {
        errf(err, errlen, "internal error: no key %zu", i);
        return false;
    }
    return key_set(c, NULL, &config_keys[i], value, err, errlen);
}

bool config_key_apply_filter(struct config *c, unsigned f, size_t i, const char *value,
                             char *err, size_t errlen)
{
    if (i >= config_nkeys || !config_keys[i].per_filter || f >= c->n_filters) {
        errf(err, errlen, "internal error: no per-filter key %zu", i);
        return false;
    }
    if (!key_set(c, &c->filters[f], &config_keys[i], value, err, errlen))
        return false;
    c->filter_set[f][i / 64] |= UINT64_C(1) << (i % 64);
    return true;
}

bool config_set(struct config *c, const char *section, const char *key,
                const char *value, char *err, size_t errlen)
{
    const struct config_key *k = NULL;
    int f = -1, ki, bf, bt;
    char msg[256];
    char *v = NULL;
    struct config next;

    if (strncmp(section, "filter ", 7) == 0) {
        f = config_filter_find(c, section + 7);
        int i = config_filter_key_find(key);
        if (f < 0 || !c->named_filters) {
            errf(err, errlen, "unknown section [%s]", section);
            return false;
        }
        if (i < 0) {
            errf(err, errlen, "unknown key [%s] %s (a [filter NAME] takes only per-filter keys)",
                 section, key);
            return false;
        }
        k = &config_keys[i];
    } else if ((ki = config_key_find(section, key)) >= 0) {
        k = &config_keys[ki];
    } else {
        if (config_section_known(section))
            errf(err, errlen, "unknown key [%s] %s", section, key);
        else
            errf(err, errlen, "unknown section [%s]", section);
        return false;
    }
    v = config_value_normalize(value, false, msg, sizeof msg);
    if (v == NULL)
        goto fail;
    /* On a copy: a value that breaks the filters (two on one table) must leave *c unchanged. */
    if (!config_copy(&next, c)) {
        snprintf(msg, sizeof msg, "out of memory");
        goto fail;
    }
    if ((f >= 0 ? !config_key_apply_filter(&next, (unsigned)f, (size_t)(k - config_keys), v, msg, sizeof msg)
                : !key_set(&next, NULL, k, v, msg, sizeof msg))
        || !config_resolve(&next, &bf, &bt, msg, sizeof msg)) {
        config_free(&next);
        goto fail;
    }
    config_free(c);
    *c = next;
    free(v);
    return true;

fail:
    errf(err, errlen, "[%s] %s: %s", section, key, msg);
    free(v);
    return false;
}

bool config_override(struct config *c, const char *arg, char *err, size_t errlen)
{
    const char *eq = strchr(arg, '=');
    const char *dot = strchr(arg, '.');
    char *section = NULL;
    char *key = NULL;
    char msg[256];
    bool ok = false;

    if (eq == NULL || dot == NULL || dot > eq || dot == arg || dot + 1 == eq) {
        errf(err, errlen, "--%s: expected --section.key=value", arg);
        return false;
    }
    section = strndup(arg, (size_t)(dot - arg));
    key = strndup(dot + 1, (size_t)(eq - dot - 1));
    if (section == NULL || key == NULL) {
        errf(err, errlen, "--%s: out of memory", arg);
        goto fail;
    }
    ok = config_set(c, section, key, eq + 1, msg, sizeof msg);
    if (!ok)
        errf(err, errlen, "--%s: %s", arg, msg);
fail:
    free(section);
    free(key);
    return ok;
}

/* --- defaults, copies, cleanup --- */

bool config_defaults(struct config *c)
{
    int bf, bt;

    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < config_nkeys; i++) {
        if (config_keys[i].def == NULL)
            continue;           /* no templates by default */
        if (!key_set(c, NULL, &config_keys[i], config_keys[i].def, NULL, 0))
            return false;
    }
    return config_resolve(c, &bf, &bt, NULL, 0);
}

void config_free(struct config *c)
{
    if (c == NULL)
        return;
    for (size_t i = 0; i < config_nkeys; i++)
        if (!config_keys[i].per_filter && TYPE(&config_keys[i])->free != NULL)
            TYPE(&config_keys[i])->free(&config_keys[i], c);
    /* Every slot, not just n_filters, in case the count was reset. */
    fc_free(&c->base);
    for (size_t i = 0; i < CONFIG_MAX_FILTERS; i++)
        fc_free(&c->filters[i]);
    c->n_filters = 0;
}

bool config_copy(struct config *dst, const struct config *src)
{
    bool ok = true;

    /*
     * Built up from zero, so dst shares nothing with src: every field of
     * struct config is a key's (copied by its type) but for the filter
     * bookkeeping below.
     */
    memset(dst, 0, sizeof *dst);
    dst->n_filters = src->n_filters;
    dst->named_filters = src->named_filters;
    memcpy(dst->filter_set, src->filter_set, sizeof dst->filter_set);
    for (size_t i = 0; ok && i < config_nkeys; i++)
        if (!config_keys[i].per_filter)
            ok = TYPE(&config_keys[i])->copy(&config_keys[i], dst, src);
    ok = ok && fc_copy(&dst->base, &src->base);
    for (size_t f = 0; ok && f < src->n_filters; f++)
        ok = fc_copy(&dst->filters[f], &src->filters[f]);
    if (!ok)
        config_free(dst);
    return ok;
}

/* --- reloads --- */

/* A changed key, its values as text, to the report callback. */
static void report_change(void (*report)(void *arg, const struct config_change *ch), void *arg,
                          const char *section, const struct config_key *k, const void *old_obj,
                          const void *new_obj, enum config_reload reload)
{
    char o[256], n[256];
    struct config_change ch = { .section = section, .name = k->name, .old_value = o,
                                .new_value = n, .reload = reload };

    if (report == NULL)
        return;
    if (k->secret) {
        snprintf(o, sizeof o, "(changed)");
        snprintf(n, sizeof n, "(changed)");
    } else {
        TYPE(k)->format(k, old_obj, o, sizeof o);
        TYPE(k)->format(k, new_obj, n, sizeof n);
    }
    report(arg, &ch);
}

/* "a, b" from the names of c's filters. */
static void filter_names(const struct config *c, char *buf, size_t len)
{
    size_t off = 0;

    buf[0] = '\0';
    for (unsigned f = 0; f < c->n_filters && off < len; f++) {
        int w = snprintf(buf + off, len - off, "%s%s", f ? ", " : "",
                         c->named_filters ? c->filters[f].name : "(no [filter NAME])");
        if (w < 0)
            break;
        off += (size_t)w;
    }
}

/* Whether next's [filter NAME] sections are not cur's (added, removed, renamed); reports it. */
static bool sections_differ(const struct config *next, const struct config *cur,
                            void (*report)(void *arg, const struct config_change *ch), void *arg)
{
    bool sections = next->n_filters != cur->n_filters || next->named_filters != cur->named_filters;

    for (unsigned f = 0; !sections && f < cur->n_filters; f++)
        sections = strcmp(next->filters[f].name, cur->filters[f].name) != 0;
    if (sections && report != NULL) {
        char o[512], n[512];
        struct config_change ch = { .section = "filter NAME", .name = "sections", .old_value = o,
                                    .new_value = n, .reload = CONFIG_RESTART };
        filter_names(cur, o, sizeof o);
        filter_names(next, n, sizeof n);
        report(arg, &ch);
    }
    return sections;
}

/*
 * Same sections: report each per-filter key that differs, set the ones
 * that need a restart back to cur's (in the filter and in next's base) and
 * the filter's bit in *rebuild for the others.  False when memory runs out.
 */
static bool filters_diff(struct config *next, const struct config *cur,
                         void (*report)(void *arg, const struct config_change *ch), void *arg,
                         uint64_t *rebuild)
{
    for (size_t i = 0; i < config_nkeys; i++) {
        const struct config_key *k = &config_keys[i];
        if (k->per_filter && k->reload == CONFIG_RESTART && !TYPE(k)->copy(k, &next->base, &cur->base))
            return false;
    }
    for (unsigned f = 0; f < cur->n_filters; f++) {
        char section[CONFIG_FILTER_NAME_MAX + 16];
        snprintf(section, sizeof section, "filter %s", cur->filters[f].name);
        for (size_t i = 0; i < config_nkeys; i++) {
            const struct config_key *k = &config_keys[i];
            if (!k->per_filter || TYPE(k)->equal(k, &next->filters[f], &cur->filters[f]))
                continue;
            report_change(report, arg, cur->named_filters ? section : k->section, k,
                          &cur->filters[f], &next->filters[f], k->reload);
            if (k->reload == CONFIG_REBUILD)
                *rebuild |= UINT64_C(1) << f;
            else if (k->reload == CONFIG_RESTART
                     && !TYPE(k)->copy(k, &next->filters[f], &cur->filters[f]))
                return false;
        }
    }
    return true;
}

bool config_reload_diff(struct config *next, const struct config *cur,
                        void (*report)(void *arg, const struct config_change *ch),
                        void *arg, uint64_t *rebuild, char *err, size_t errlen)
{
    uint64_t all = cur->n_filters >= 64 ? UINT64_MAX : (UINT64_C(1) << cur->n_filters) - 1;
    uint64_t want = 0;
    int bt = -1;

    if (rebuild != NULL)
        *rebuild = 0;
    for (size_t i = 0; i < config_nkeys; i++) {
        const struct config_key *k = &config_keys[i];

        if (k->per_filter || TYPE(k)->equal(k, next, cur))
            continue;
        report_change(report, arg, k->section, k, cur, next, k->reload);
        if (k->reload == CONFIG_REBUILD)
            want = all;
        if (k->reload == CONFIG_RESTART && !TYPE(k)->copy(k, next, cur))
            goto oom;
    }
    if (!sections_differ(next, cur, report, arg)) {
        if (!filters_diff(next, cur, report, arg, &want))
            goto oom;
    } else {
        /* Other sections need a restart: the filters are cur's, wholesale. */
        fc_free(&next->base);
        for (unsigned f = 0; f < CONFIG_MAX_FILTERS; f++)
            fc_free(&next->filters[f]);
        next->n_filters = 0;
        if (!fc_copy(&next->base, &cur->base))
            goto oom;
        for (unsigned f = 0; f < cur->n_filters; f++) {
            if (!fc_copy(&next->filters[f], &cur->filters[f]))
                goto oom;
            next->n_filters = f + 1;
        }
        memcpy(next->filter_set, cur->filter_set, sizeof next->filter_set);
        next->named_filters = cur->named_filters;
        if (!resolve_templates(next, &bt, err, errlen)) {
            size_t len = err != NULL ? strlen(err) : 0;
            if (err != NULL && len < errlen)
                snprintf(err + len, errlen - len, " in force (filters need a restart)");
            return false;
        }
    }
    if (rebuild != NULL)
        *rebuild = want;
    return true;

oom:
    errf(err, errlen, "out of memory");
    return false;
}

void config_apply_reload(const struct config *now, const struct config *prev,
                         const struct config_reload_ctx *ctx)
{
    for (size_t i = 0; i < config_nkeys; i++) {
        const struct config_key *k = &config_keys[i];
        if (k->apply != NULL && !k->per_filter && !TYPE(k)->equal(k, now, prev))
            k->apply(now, ctx);
    }
}

bool config_dir_resolve(const char *value, const char *env, char *out, size_t outlen)
{
    const char *d = value != NULL ? value : "";
    size_t len = strlen(d);

    if (strcmp(d, "auto") == 0) {
        d = getenv(env);
        d = d != NULL ? d : "";
        len = strcspn(d, ":");
    }
    while (len > 1 && d[len - 1] == '/')
        len--;
    int n = snprintf(out, outlen, "%.*s", (int)len, d);
    return len > 0 && n > 0 && (size_t)n < outlen;
}
