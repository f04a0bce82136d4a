/*
 * Template matching for request paths.  Literals are compared on the raw,
 * still-encoded path so that an encoded '/' inside an ID can never shift the
 * segment boundaries; the ID is handed back undecoded for id_decode.
 */
#include "uritmpl.h"

#include <string.h>

#define PLACEHOLDER_LEN (sizeof URITMPL_PLACEHOLDER - 1)

bool uritmpl_valid(const char *tmpl, const char **why)
{
    const char *reason = NULL;
    unsigned ids = 0;

    if (tmpl == NULL || tmpl[0] != '/') {
        reason = "must start with '/'";
        goto out;
    }
    for (const char *p = tmpl; *p != '\0'; p++) {
        unsigned char c = (unsigned char)*p;
        if (strncmp(p, URITMPL_PLACEHOLDER, PLACEHOLDER_LEN) == 0) {
            ids++;
            p += PLACEHOLDER_LEN - 1;
        } else if (c == '{' || c == '}') {
            reason = "{id} is the only placeholder allowed";
            goto out;
        } else if (c != '\0' && strchr(URITMPL_PATH_ENDS, c) != NULL) {
            reason = "must not contain '?' or '#'";
            goto out;
        } else if (c <= 0x20 || c == 0x7F) {
            reason = "must not contain whitespace or control characters";
            goto out;
        }
    }
    if (ids != 1)
        reason = "must contain {id} exactly once";
out:
    if (why != NULL)
        *why = reason;
    return reason == NULL;
}

bool uritmpl_match(const char *tmpl, const char *uri, size_t uri_len,
                   const char **id_start, size_t *id_len)
{
    const char *ph = strstr(tmpl, URITMPL_PLACEHOLDER);
    size_t path_len = 0;

    if (ph == NULL)
        return false;
    while (path_len < uri_len
           && (uri[path_len] == '\0' || strchr(URITMPL_PATH_ENDS, uri[path_len]) == NULL))
        path_len++;

    const char *suffix = ph + PLACEHOLDER_LEN;
    size_t pre = (size_t)(ph - tmpl), suf = strlen(suffix);

    /* The suffix is anchored at the end of the path, which fixes the ID. */
    if (path_len < pre + suf + 1)
        return false;
    if (memcmp(uri, tmpl, pre) != 0 || memcmp(uri + path_len - suf, suffix, suf) != 0)
        return false;

    const char *id = uri + pre;
    size_t n = path_len - pre - suf;
    for (size_t i = 0; i < n; i++)
        if (id[i] != '\0' && strchr(URITMPL_ID_STOPS, id[i]) != NULL)
            return false;
    *id_start = id;
    *id_len = n;
    return true;
}
