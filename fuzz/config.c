/*
 * Fuzz the config file parser (config_load_string) and the command-line
 * overrides (config_override).  Invariants: whatever loads is within the
 * bounds config.h documents and agrees with the modules that own a rule
 * (uritmpl_valid, filter.h's rates); whatever loads from a file can be described
 * as a file again, which loads to the same values; a failed load says
 * where, in one line; a failed override changes nothing.
 *
 * Input: the file text up to the first NUL byte, then override arguments
 * (the text after "--"), one per line.
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "filter.h"
#include "fuzz.h"
#include "uritmpl.h"

#define NAME "fuzz.conf"

/*
 * A string value as a file line would carry it: bare if that reads back the
 * same, else in double quotes.  raw: as is (to compare, not to parse).
 * False if neither form can carry it.
 */
static bool put_string(FILE *o, const char *v, bool raw)
{
    size_t n = strlen(v);
    bool bare = n > 0 && !isspace((unsigned char)v[0]) && !isspace((unsigned char)v[n - 1])
                && v[0] != '"', quotable = strchr(v, '"') == NULL;
    for (size_t i = 0; i < n; i++) {
        bool after_space = i == 0 || isspace((unsigned char)v[i - 1]);
        if ((v[i] == '#' || v[i] == ';') && after_space)
            bare = false;
        if (v[i] == ';' && i > 0 && isspace((unsigned char)v[i - 1]))
            quotable = false;
    }
    if (raw || bare)
        fputs(v, o);
    else if (quotable)
        fprintf(o, "\"%s\"", v);
    else
        return false;
    return true;
}

/* The keys describe() knows how to write. */
static bool known(const char *key)
{
    static const char *const keys[] = {
        "server.listen", "server.threads", "server.max_connections", "server.connection_timeout",
        "server.max_body_bytes", "server.max_batch", "server.max_id_bytes",
        "postgres.conninfo", "postgres.table", "postgres.column", "postgres.retry_max_seconds",
        "filter.expected_items", "filter.false_positive_rate", "filter.headroom",
        "sync.enabled", "sync.channel", "sync.rebuild_interval", "sync.rebuild_after_deletes",
        "sync.auto_grow", "sync.pending_limit",
        "auth.uri_template", "auth.deny_status", "auth.allow_status", "auth.fail_open",
        "auth.uri_source", "metrics.enabled", "log.level",
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (strcmp(keys[i], key) == 0)
            return true;
    return false;
}

static const char *yesno(bool b)
{
    return b ? "yes" : "no";
}

/*
 * Every key config_key_at lists, as "key=value" lines under "[section]"s.
 * Keys this harness does not know yet (added since) are left out: they keep
 * their defaults on both sides of a comparison.
 */
static char *describe(const struct config *c, bool raw)
{
    static const char *const sources[] = { "auto", "x-original-uri", "x-forwarded-uri", "path" };
    char *text = NULL;
    size_t len = 0;
    FILE *o = open_memstream(&text, &len);
    const char *last = "", *sec, *name;
    bool ok = true;
    FUZZ_CHECK(o != NULL);
    for (size_t i = 0; config_key_at(i, &sec, &name, NULL, NULL); i++) {
        if (strcmp(sec, last) != 0)
            fprintf(o, "[%s]\n", sec);
        last = sec;
        char k[64];
        snprintf(k, sizeof k, "%s.%s", sec, name);
#define IS(key) (strcmp(k, key) == 0)
        if (IS("auth.uri_template")) {
            for (unsigned t = 0; t < c->n_uri_templates; t++) {
                fprintf(o, "%s=", name);
                ok &= put_string(o, c->uri_templates[t], raw);
                fputc('\n', o);
            }
            continue;
        }
        if (!known(k))
            continue;       /* a newer key: see above */
        fprintf(o, "%s=", name);
        if (IS("server.listen"))
            fprintf(o, strchr(c->listen_host, ':') ? "[%s]:%u" : "%s:%u", c->listen_host, c->listen_port);
        else if (IS("server.threads"))
            fprintf(o, "%u", c->threads);
        else if (IS("server.max_connections"))
            fprintf(o, "%u", c->max_connections);
        else if (IS("server.connection_timeout"))
            fprintf(o, "%u", c->connection_timeout);
        else if (IS("server.max_body_bytes"))
            fprintf(o, "%" PRIu64, c->max_body_bytes);
        else if (IS("server.max_batch"))
            fprintf(o, "%u", c->max_batch);
        else if (IS("server.max_id_bytes"))
            fprintf(o, "%u", c->max_id_bytes);
        else if (IS("postgres.conninfo"))
            ok &= put_string(o, c->conninfo, raw);
        else if (IS("postgres.table"))
            ok &= put_string(o, c->filters[0].table, raw);
        else if (IS("postgres.column"))
            ok &= put_string(o, c->filters[0].column, raw);
        else if (IS("postgres.retry_max_seconds"))
            fprintf(o, "%u", c->retry_max_seconds);
        else if (IS("filter.expected_items"))
            fprintf(o, "%" PRIu64, c->filters[0].expected_items);
        else if (IS("filter.false_positive_rate"))
            fprintf(o, "%.17g", c->filters[0].false_positive_rate);
        else if (IS("filter.headroom"))
            fprintf(o, "%.17g", c->filters[0].headroom);
        else if (IS("sync.enabled"))
            fputs(yesno(c->sync_enabled), o);
        else if (IS("sync.channel"))
            ok &= put_string(o, c->filters[0].channel, raw);
        else if (IS("sync.rebuild_interval"))
            fprintf(o, "%u", c->filters[0].rebuild_interval);
        else if (IS("sync.rebuild_after_deletes"))
            fprintf(o, "%" PRIu64, c->filters[0].rebuild_after_deletes);
        else if (IS("sync.auto_grow"))
            fputs(yesno(c->filters[0].auto_grow), o);
        else if (IS("sync.pending_limit"))
            fprintf(o, "%" PRIu64, c->filters[0].pending_limit);
        else if (IS("auth.deny_status"))
            fprintf(o, "%u", c->deny_status);
        else if (IS("auth.allow_status"))
            fprintf(o, "%u", c->allow_status);
        else if (IS("auth.fail_open"))
            fputs(yesno(c->fail_open), o);
        else if (IS("auth.uri_source"))
            fputs((unsigned)c->uri_source < 4 ? sources[c->uri_source] : "?", o);
        else if (IS("metrics.enabled"))
            fputs(yesno(c->metrics_enabled), o);
        else if (IS("log.level"))
            fputs(config_log_level_name(c->log_level), o);
        fputc('\n', o);
#undef IS
    }
    FUZZ_CHECK(fclose(o) == 0);
    if (!ok) {
        free(text);
        return NULL;
    }
    return text;
}

/* config.h's documented bounds, and the owners of shared rules agree. */
static void check_bounds(const struct config *c)
{
    FUZZ_CHECK(c->listen_host != NULL && c->listen_port <= 65535);
    FUZZ_CHECK(c->threads <= 256);
    FUZZ_CHECK(c->max_connections >= 1 && c->max_connections <= 1000000);
    FUZZ_CHECK(c->connection_timeout <= 86400);
    FUZZ_CHECK(c->max_body_bytes >= 1 && c->max_body_bytes <= 1073741824);
    FUZZ_CHECK(c->max_batch >= 1 && c->max_batch <= 10000000);
    FUZZ_CHECK(c->max_id_bytes >= 1 && c->max_id_bytes <= CONFIG_MAX_ID_BYTES);
    FUZZ_CHECK(c->conninfo != NULL && c->filters[0].table != NULL && c->filters[0].column != NULL && c->filters[0].channel != NULL);
    FUZZ_CHECK(strlen(c->filters[0].column) >= 1 && strlen(c->filters[0].column) <= 63);
    FUZZ_CHECK(strlen(c->filters[0].channel) >= 1 && strlen(c->filters[0].channel) <= 55);
    FUZZ_CHECK(c->retry_max_seconds >= 1 && c->retry_max_seconds <= 3600);
    FUZZ_CHECK(c->filters[0].expected_items <= FILTER_MAX_ITEMS);
    FUZZ_CHECK(c->filters[0].false_positive_rate > 0 && c->filters[0].false_positive_rate < 0.5);
    FUZZ_CHECK(c->filters[0].headroom >= 1.0 && c->filters[0].headroom <= 100.0);
    FUZZ_CHECK(c->filters[0].pending_limit <= 100000000);
    FUZZ_CHECK(c->deny_status == 401 || c->deny_status == 403 || c->deny_status == 404
               || c->deny_status == 410);
    FUZZ_CHECK(c->allow_status == 200 || c->allow_status == 204);
    FUZZ_CHECK((unsigned)c->uri_source <= URI_SOURCE_PATH);
    FUZZ_CHECK((unsigned)c->log_level <= LOG_LVL_DEBUG);
    FUZZ_CHECK(c->n_uri_templates <= CONFIG_MAX_TEMPLATES);
    for (unsigned t = 0; t < c->n_uri_templates; t++)
        FUZZ_CHECK(uritmpl_valid(c->uri_templates[t], NULL));
    /*
     * The filter takes any rate the config takes: the range filter.h
     * promises (fuzz/filter holds filter_plan to it; calling filter_plan
     * here would cost more than the rest of an input).
     */
    FUZZ_CHECK(c->filters[0].false_positive_rate > FILTER_MIN_FPP && c->filters[0].false_positive_rate < FILTER_MAX_FPP);
}

static void check_error(const char *err, const char *prefix)
{
    FUZZ_CHECK(err[0] != '\0' && strchr(err, '\n') == NULL);
    FUZZ_CHECK(strncmp(err, prefix, strlen(prefix)) == 0);
}

FUZZ_TARGET(config)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t tl = nul ? (size_t)(nul - data) : size;
    char *text = malloc(tl + 1), err[256];
    FUZZ_CHECK(text != NULL);
    memcpy(text, data, tl);
    text[tl] = '\0';

    struct config c;
    FUZZ_CHECK(config_defaults(&c));
    check_bounds(&c);
    memset(err, 'x', sizeof err);
    if (!config_load_string(&c, NAME, text, err, sizeof err)) {
        check_error(err, NAME ":");
        goto out;
    }
    check_bounds(&c);

    /* Described as a file, it loads again, to the same description. */
    char *desc = describe(&c, false);
    FUZZ_CHECK(desc != NULL);
    struct config again;
    FUZZ_CHECK(config_defaults(&again));
    if (!config_load_string(&again, NAME, desc, err, sizeof err)) {
        fprintf(stderr, "%s\n--- described as:\n%s", err, desc);
        FUZZ_CHECK(!"a loaded config described as a file loads again");
    }
    char *desc2 = describe(&again, false);
    FUZZ_CHECK(desc2 != NULL && strcmp(desc, desc2) == 0);
    free(desc2);
    free(desc);
    config_free(&again);

    /* Overrides, one per line: each applies entirely or not at all. */
    const char *p = nul ? (const char *)nul + 1 : NULL, *end = (const char *)data + size;
    while (p != NULL && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t al = nl ? (size_t)(nl - p) : (size_t)(end - p);
        char *arg = strndup(p, al);     /* argv strings end at a NUL too */
        FUZZ_CHECK(arg != NULL);
        char *before = describe(&c, true);
        FUZZ_CHECK(before != NULL);
        if (config_override(&c, arg, err, sizeof err)) {
            check_bounds(&c);
        } else {
            check_error(err, "--");
            char *after = describe(&c, true);
            FUZZ_CHECK(after != NULL && strcmp(before, after) == 0);
            free(after);
        }
        free(before);
        free(arg);
        p += al + 1;
    }
out:
    config_free(&c);
    free(text);
    return 0;
}
