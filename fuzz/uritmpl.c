/*
 * Fuzz uritmpl_valid and uritmpl_match: the template comes from the
 * operator's config, the URI from the client (via the proxy's header).
 * A match must hand back a non-empty raw ID that lies inside the URI's path
 * between the template's literal prefix and suffix; a URI built from a valid
 * template must match with exactly the ID put in; and the config accepts
 * exactly the templates uritmpl_valid accepts (one rule, one place).
 *
 * Input: the template up to the first '\n', then the URI.
 */
#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "fuzz.h"
#include "uritmpl.h"

/* uritmpl.h's rules for a usable template, one by one. */
static bool ref_valid(const char *t)
{
    if (t[0] != '/')
        return false;
    const char *ph = strstr(t, "{id}");
    if (ph == NULL || strstr(ph + 4, "{id}") != NULL)
        return false;
    for (const char *p = t; *p != '\0'; p++) {
        unsigned char c = (unsigned char)*p;
        if (p >= ph && p < ph + 4)
            continue;
        if (c == '{' || c == '}' || c == '?' || c == '#' || c <= 0x20 || c == 0x7F)
            return false;
    }
    return true;
}

FUZZ_TARGET(uritmpl)
{
    const uint8_t *nl = memchr(data, '\n', size);
    size_t tl = nl ? (size_t)(nl - data) : size;
    char *tmpl = malloc(tl + 1);
    FUZZ_CHECK(tmpl != NULL);
    memcpy(tmpl, data, tl);
    tmpl[tl] = '\0';
    /* The URI in a buffer of its exact size, so ASan sees any read past it. */
    size_t ul = nl ? size - tl - 1 : 0;
    char *uri = malloc(ul ? ul : 1);
    FUZZ_CHECK(uri != NULL);
    if (ul)
        memcpy(uri, nl + 1, ul);

    const char *why = "unset";
    bool valid = uritmpl_valid(tmpl, &why);
    FUZZ_CHECK(valid == (why == NULL));
    FUZZ_CHECK(valid || (why != NULL && why[0] != '\0'));
    /* A template with a NUL byte is cut there, as a C string would be. */
    FUZZ_CHECK(valid == ref_valid(tmpl));

    /*
     * The config's uri_template key applies the same rule.  config_set trims
     * the value and drops quotes, so compare only templates it would not
     * change.
     */
    if (tl > 0 && strlen(tmpl) == tl && tmpl[0] != '"' && !isspace((unsigned char)tmpl[0])
        && !isspace((unsigned char)tmpl[tl - 1])) {
        struct config c;
        char err[256];
        FUZZ_CHECK(config_defaults(&c));
        bool loaded = config_set(&c, "auth", "uri_template", tmpl, err, sizeof err);
        FUZZ_CHECK(loaded == valid);
        config_free(&c);
    }

    const char *sentinel = "s", *id = sentinel;
    size_t idlen = 99;
    bool m = uritmpl_match(tmpl, ul ? uri : NULL, ul, &id, &idlen);
    if (!valid) {
        free(tmpl);
        free(uri);
        return 0;           /* any answer, but no bad read (ASan watches) */
    }
    const char *ph = strstr(tmpl, URITMPL_PLACEHOLDER);
    size_t pre = (size_t)(ph - tmpl), suf = strlen(ph + 4);
    size_t path = 0;
    while (path < ul && uri[path] != '?' && uri[path] != '#')
        path++;
    if (m) {
        FUZZ_CHECK(id >= uri && idlen >= 1 && id + idlen <= uri + ul);
        FUZZ_CHECK(memchr(id, '/', idlen) == NULL);
        FUZZ_CHECK(memchr(id, '?', idlen) == NULL && memchr(id, '#', idlen) == NULL);
        /* path == prefix + id + suffix */
        FUZZ_CHECK((size_t)(id - uri) == pre && pre + idlen + suf == path);
        FUZZ_CHECK(memcmp(uri, tmpl, pre) == 0);
        FUZZ_CHECK(memcmp(id + idlen, ph + 4, suf) == 0);
    } else {
        FUZZ_CHECK(id == sentinel && idlen == 99);
        /* No match means no prefix + id + suffix reading of the path. */
        FUZZ_CHECK(path < pre + suf + 1 || memcmp(uri, tmpl, pre) != 0
                   || memcmp(uri + path - suf, ph + 4, suf) != 0
                   || memchr(uri + pre, '/', path - pre - suf) != NULL);
    }

    /* Put an ID (the URI's bytes minus '/', '?', '#') into the template: it must come back. */
    char *want = malloc(ul + 1);
    FUZZ_CHECK(want != NULL);
    size_t wl = 0;
    for (size_t i = 0; i < ul; i++)
        if (uri[i] != '/' && uri[i] != '?' && uri[i] != '#')
            want[wl++] = uri[i];
    if (wl == 0)
        want[wl++] = 'x';
    size_t bl = pre + wl + suf + 3;
    char *built = malloc(bl);
    FUZZ_CHECK(built != NULL);
    memcpy(built, tmpl, pre);
    memcpy(built + pre, want, wl);
    memcpy(built + pre + wl, ph + 4, suf);
    memcpy(built + pre + wl + suf, "?/#", 3);   /* a query never matters */
    for (size_t cut = bl - 3; cut <= bl; cut++) {
        id = sentinel;
        idlen = 99;
        FUZZ_CHECK(uritmpl_match(tmpl, built, cut, &id, &idlen));
        FUZZ_CHECK(id == built + pre && idlen == wl && memcmp(id, want, wl) == 0);
    }
    free(built);
    free(want);
    free(tmpl);
    free(uri);
    return 0;
}
