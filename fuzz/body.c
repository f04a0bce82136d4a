/*
 * Fuzz the request bodies of POST /ids and POST /exists through the real
 * handlers (ids_insert, ids_exists_batch) with a real guard, journal and
 * stats, the guard loaded or not.  Invariants: every answer is one the API documents, JSON, never a
 * 500; a JSON body jansson cannot read is refused; a refused body changes nothing; an ID the handler acknowledged is
 * never absent afterwards; the journal holds each distinct ID once; POST /ids's fast form
 * (ids_insert_fast) gives the handler's status, or leaves a body it refuses to the handler.
 *
 * Input: byte 0 picks the endpoint, the body type and whether the filter
 * is loaded yet; the rest is the body.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ids.h"
#include "routes.h"
#include "config.h"
#include "log.h"
#include "stats.h"
#include "table.h"
#include "fuzz.h"
#include "idcodec.h"

#define MAX_BATCH 64
#define MAX_ID 100
#define STR(x) STR_(x)
#define STR_(x) #x

/* Built once: the config and counters do not depend on the input. */
static struct fuzz_app h;

static void setup(void)
{
    /* Small limits, so that inputs of a few hundred bytes reach them. */
    static const char *const overrides[] = {
        "server.max_batch=" STR(MAX_BATCH), "server.max_id_bytes=" STR(MAX_ID), "sync.max_staleness=0",
    };
    fuzz_app_init(&h, overrides, sizeof overrides / sizeof overrides[0]);
}

/* The IDs of a body the handler accepted, found again without its help. */
static size_t ids_of(enum body_type t, const char *body, size_t len, json_t **doc,
                     const char **ids, size_t *lens)
{
    size_t n = 0;
    *doc = NULL;
    if (t == BODY_TEXT) {
        size_t pos = 0;
        while (n < MAX_BATCH && id_next_line(body, len, &pos, &ids[n], &lens[n]))
            n++;
        FUZZ_CHECK(!id_next_line(body, len, &pos, &ids[0], &lens[0]) || n == MAX_BATCH);
        return n;
    }
    *doc = json_loadb(body, len, JSON_ALLOW_NUL, NULL);
    FUZZ_CHECK(*doc != NULL);
    json_t *one = json_object_get(*doc, "id"), *arr = json_object_get(*doc, "ids");
    if (one != NULL) {
        ids[0] = json_string_value(one);
        lens[0] = json_string_length(one);
        FUZZ_CHECK(ids[0] != NULL);
        return 1;
    }
    FUZZ_CHECK(json_is_array(arr) && json_array_size(arr) <= MAX_BATCH);
    for (; n < json_array_size(arr); n++) {
        json_t *v = json_array_get(arr, n);
        ids[n] = json_string_value(v);
        lens[n] = json_string_length(v);
        FUZZ_CHECK(ids[n] != NULL);
    }
    return n;
}

static size_t distinct(size_t n, const char *const *ids, const size_t *lens)
{
    size_t d = 0;
    for (size_t i = 0; i < n; i++) {
        size_t j = 0;
        while (j < i && !(lens[j] == lens[i] && memcmp(ids[j], ids[i], lens[i]) == 0))
            j++;
        d += j == i;
    }
    return d;
}

FUZZ_TARGET(body)
{
    /* Its horizon only matters to lookups, with max_staleness 0 (setup). */
    struct table *tbl = fuzz_app_input(&h, setup, data, size);
    if (tbl == NULL)
        return 0;
    bool insert = data[0] & 1;
    enum body_type t = data[0] & 2 ? BODY_TEXT : BODY_JSON;
    bool ready = tbl != h.unready;
    const char *body = (const char *)data + 1;
    size_t len = size - 1;

    struct app a = { .cfg = &h.cfg, .lg = &h.lg, .stats = h.stats, .tables = &tbl, .n_tables = 1 };
    struct filter_info fi = { 0 };
    struct table_posts pi;
    unsigned nl;
    FUZZ_CHECK(table_filter_info(tbl, &fi, NULL, 0, &nl) == ready);
    table_posts(tbl, &pi);
    uint64_t items_before = fi.items, journal_before = pi.count;

    struct api_request rq = { .method = "POST", .path = "", .rest = "", .body_type = t,
                              .body = body, .body_len = len };
    struct reply r = insert ? ids_insert(&a, &rq) : ids_exists_batch(&a, &rq);
    FUZZ_CHECK(r.resp != NULL);         /* NULL means "answer 500" */
    FUZZ_CHECK(r.status == 200 || r.status == 400 || r.status == 413 || r.status == 414
               || r.status == 503 || r.status == 507);
    FUZZ_CHECK(fuzz_reply_is_json(r.resp));
    if (!r.shared)
        MHD_destroy_response(r.resp);
    FUZZ_CHECK(ready || insert || r.status != 200);   /* an empty insert may say 200 */
    if (t == BODY_JSON) {
        /*
         * What jansson cannot read is refused, whoever read it: ids.c reads
         * a body of one plain ID ({"id":"..."}) without jansson.
         */
        json_t *d = json_loadb(body, len, JSON_ALLOW_NUL, NULL);
        FUZZ_CHECK(d != NULL || r.status == 400);
        json_decref(d);
    }

    FUZZ_CHECK(table_filter_info(tbl, &fi, NULL, 0, &nl) == ready);
    uint64_t added = fi.items - items_before;
    table_posts(tbl, &pi);
    uint64_t journalled = pi.count - journal_before;
    if (!insert || r.status != 200) {
        /* Lookups and refused bodies write nothing. */
        FUZZ_CHECK(added == 0 && journalled == 0);
    } else {
        const char *ids[MAX_BATCH];
        size_t lens[MAX_BATCH];
        json_t *doc;
        size_t n = ids_of(t, body, len, &doc, ids, lens);
        for (size_t i = 0; i < n; i++) {
            /* An acknowledged insert is never answered "absent". */
            FUZZ_CHECK(id_check(ids[i], lens[i], MAX_ID) == ID_OK);
            FUZZ_CHECK(table_lookup(tbl, ids[i], lens[i]) == TABLE_MAYBE);
        }
        /* items counts keys that set a new bit: never more than the distinct ids. */
        FUZZ_CHECK(added <= distinct(n, ids, lens));
        /* The journal keeps each ID once (some may be there from earlier inputs). */
        FUZZ_CHECK(journalled <= distinct(n, ids, lens));
        json_decref(doc);
    }
    if (insert) {
        /*
         * The fast form (http_fast.c's POST /ids), on the same body: the
         * handler's status and a JSON answer; or 0, for a refusal of the
         * body, which changes nothing (the handler then answers it).  The
         * IDs are in already: a journal the handler just filled may refuse.
         */
        char out[API_ERROR_JSON_MAX];
        size_t olen = 0;
        table_filter_info(tbl, &fi, NULL, 0, &nl);
        table_posts(tbl, &pi);
        items_before = fi.items;
        journal_before = pi.count;
        unsigned fs = ids_insert_fast(&a, "", 0, t, body, len, out, sizeof out, &olen, NULL);
        table_filter_info(tbl, &fi, NULL, 0, &nl);
        table_posts(tbl, &pi);
        if (fs == 0) {
            FUZZ_CHECK(r.status == 400 || r.status == 413 || r.status == 414);
            FUZZ_CHECK(fi.items == items_before && pi.count == journal_before);
        } else {
            FUZZ_CHECK(fs == r.status || (r.status == 200 && fs == 507));
            json_t *d = json_loadb(out, olen, 0, NULL);
            FUZZ_CHECK(d != NULL && (fs == 200) == (json_object_get(d, "inserted") != NULL));
            json_decref(d);
        }
    }
    return 0;
}
