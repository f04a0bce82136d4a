/*
 * The IDs of a request body (POST /ids, /exists, /absent): text, one per
 * line, or JSON through jansson; and a POST /ids of one plain ID read
 * without jansson, the common case, which a document of its own cost more
 * than the rest of the request's parsing.
 */
#include "ids_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

struct reply id_error_reply(enum id_error e, const char *where)
{
    unsigned status = e == ID_TOO_LONG ? MHD_HTTP_URI_TOO_LONG : MHD_HTTP_BAD_REQUEST;
    return api_error(status, id_error_code(e), "%s%s", id_strerror(e), where);
}

void idlist_free(struct idlist *l)
{
    if (l->ids != &l->one_id) {
        free(l->ids);
        free(l->lens);
    }
    json_decref(l->doc);
    memset(l, 0, sizeof(*l));
}

/* l (empty) holds the one ID id, len bytes, where it points. */
static void idlist_one(struct idlist *l, const char *id, size_t len)
{
    l->one_id = id;
    l->one_len = len;
    l->ids = &l->one_id;
    l->lens = &l->one_len;
    l->n = 1;
}

static bool json_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/*
 * A JSON body {"id":"ID"} that jansson would read the same way without
 * being asked: JSON whitespace around its tokens, the ID printable ASCII
 * without '"' or '\\' (no escape to decode, no UTF-8 to check).  True
 * with the ID (in body) in *id, *len.  False for anything else, which
 * jansson then reads, so that every other body, and every error, gets
 * jansson's verdict and message as before.  One ID per POST is the common
 * case of POST /ids, and jansson's document (a hash table, its strings)
 * cost it more than the rest of its parsing.
 */
static bool json_single_plain(const char *body, size_t len, const char **id, size_t *idlen)
{
    static const char key[] = "\"id\"";
    size_t i = 0;
    while (i < len && json_space(body[i]))
        i++;
    if (i == len || body[i++] != '{')
        return false;
    while (i < len && json_space(body[i]))
        i++;
    if (len - i < sizeof key - 1 || memcmp(body + i, key, sizeof key - 1) != 0)
        return false;
    i += sizeof key - 1;
    while (i < len && json_space(body[i]))
        i++;
    if (i == len || body[i++] != ':')
        return false;
    while (i < len && json_space(body[i]))
        i++;
    if (i == len || body[i++] != '"')
        return false;
    size_t start = i;
    while (i < len && body[i] != '"') {
        unsigned char c = (unsigned char)body[i];
        if (c < 0x20 || c > 0x7e || c == '\\')
            return false;
        i++;
    }
    if (i == len)
        return false;
    size_t end = i++;
    while (i < len && json_space(body[i]))
        i++;
    if (i == len || body[i++] != '}')
        return false;
    while (i < len && json_space(body[i]))
        i++;
    if (i != len)
        return false;
    *id = body + start;
    *idlen = end - start;
    return true;
}

static bool idlist_push(struct idlist *l, size_t *cap, const char *id, size_t len)
{
    if (l->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        const char **ni = realloc(l->ids, nc * sizeof(*ni));
        if (ni == NULL)
            return false;
        l->ids = ni;
        size_t *nl = realloc(l->lens, nc * sizeof(*nl));
        if (nl == NULL)
            return false;
        l->lens = nl;
        *cap = nc;
    }
    l->ids[l->n] = id;
    l->lens[l->n] = len;
    l->n++;
    return true;
}

struct reply parse_ids(struct app *a, enum body_type t, const char *body, size_t len,
                              bool allow_single, struct idlist *l)
{
    size_t cap = 0, max_batch = a->cfg->max_batch;
    memset(l, 0, sizeof(*l));

    if (t == BODY_TEXT) {
        size_t pos = 0;
        const char *id;
        size_t idlen;
        while (id_next_line(body, len, &pos, &id, &idlen)) {
            if (l->n >= max_batch)
                goto too_many;
            enum id_error e = id_check(id, idlen, a->cfg->max_id_bytes);
            if (e != ID_OK) {
                char where[48];
                snprintf(where, sizeof where, " (line %zu)", l->n + 1);
                idlist_free(l);
                return id_error_reply(e, where);
            }
            if (!idlist_push(l, &cap, id, idlen))
                goto oom;
        }
        return (struct reply){ 0, NULL, false };
    }

    const char *plain;
    size_t plain_len;
    if (allow_single && json_single_plain(body, len, &plain, &plain_len)) {
        enum id_error e = id_check(plain, plain_len, a->cfg->max_id_bytes);
        if (e != ID_OK)
            return id_error_reply(e, "");
        idlist_one(l, plain, plain_len);
        return (struct reply){ 0, NULL, false };
    }
    json_error_t jerr;
    l->doc = json_loadb(body, len, JSON_ALLOW_NUL, &jerr);
    if (l->doc == NULL) {
        struct reply r = api_error(MHD_HTTP_BAD_REQUEST, "invalid_json", "invalid JSON at line %d column %d: %s",
                                   jerr.line, jerr.column, jerr.text);
        idlist_free(l);
        return r;
    }
    json_t *one = allow_single ? json_object_get(l->doc, "id") : NULL;
    json_t *arr = json_object_get(l->doc, "ids");
    const char *shape = allow_single ? "expected {\"id\":\"...\"} or {\"ids\":[\"...\", ...]}"
                                     : "expected {\"ids\":[\"...\", ...]}";
    if (!json_is_object(l->doc) || (one == NULL) == (arr == NULL) || (one && !json_is_string(one))
        || (arr && !json_is_array(arr)) || json_object_size(l->doc) != 1) {
        idlist_free(l);
        return api_error(MHD_HTTP_BAD_REQUEST, "bad_shape", "%s", shape);
    }
    if (one != NULL) {
        enum id_error e = id_check(json_string_value(one), json_string_length(one), a->cfg->max_id_bytes);
        if (e != ID_OK) {
            idlist_free(l);
            return id_error_reply(e, "");
        }
        idlist_one(l, json_string_value(one), json_string_length(one));
        return (struct reply){ 0, NULL, false };
    }
    if (json_array_size(arr) > max_batch)
        goto too_many;
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) {
        if (!json_is_string(v)) {
            idlist_free(l);
            return api_error(MHD_HTTP_BAD_REQUEST, "bad_shape", "ids[%zu] is not a string; %s", i, shape);
        }
        enum id_error e = id_check(json_string_value(v), json_string_length(v), a->cfg->max_id_bytes);
        if (e != ID_OK) {
            char where[48];
            snprintf(where, sizeof where, " (ids[%zu])", i);
            idlist_free(l);
            return id_error_reply(e, where);
        }
        if (!idlist_push(l, &cap, json_string_value(v), json_string_length(v)))
            goto oom;
    }
    return (struct reply){ 0, NULL, false };   /* an empty list is a valid, empty batch */

too_many:
    idlist_free(l);
    return api_error(MHD_HTTP_CONTENT_TOO_LARGE, "batch_too_large",
                     "more than max_batch (%zu) ids in one request", max_batch);
oom:
    idlist_free(l);
    return (struct reply){ 500, NULL, false };
}

