/*
 * Fuzz the raw request URIs of GET /exists/{id} and /auth through the real
 * handlers (ids_exists, ids_auth) with a real guard and the configured
 * templates.  Invariants: every answer is one the API documents, never a
 * 500; an ID in the filter is never answered 404 or denied, whatever its
 * percent-encoding; /auth denies only a URI that a template matches, with
 * a well-formed ID the filter says is absent (one that does not decode is
 * a bypass).
 *
 * Input: byte 0 picks the endpoint, whether the ID is added first and
 * whether the filter is loaded; the rest is the raw URI (for /exists, what
 * follows "/exists/").
 */
#include <stdbool.h>
#include <string.h>

#include "ids.h"
#include "routes.h"
#include "config.h"
#include "log.h"
#include "stats.h"
#include "table.h"
#include "fuzz.h"
#include "idcodec.h"
#include "uritmpl.h"

static struct fuzz_app h;
static struct app base;

static void setup(void)
{
    static const char *const overrides[] = {
        "auth.uri_template=/user/get/{id}", "auth.uri_template=/files/{id}.json",
        "auth.uri_template=/api/v1/orders/{id}/items", "server.max_id_bytes=64",
        "sync.max_staleness=0",     /* the tables below are never degraded */
    };
    fuzz_app_init(&h, overrides, sizeof overrides / sizeof overrides[0]);
    base = (struct app){ .cfg = &h.cfg, .lg = &h.lg, .stats = h.stats, .tables = &h.unready, .n_tables = 1 };
    FUZZ_CHECK(api_init(&base));
}

/* The first template that matches, and the ID it gives, decoded. */
static bool auth_id(const char *uri, size_t len, char *id, size_t *idlen, bool *matched)
{
    *matched = false;
    for (unsigned i = 0; i < h.cfg.n_uri_templates; i++) {
        const char *raw;
        size_t rl;
        if (uritmpl_match(h.cfg.uri_templates[i], uri, len, &raw, &rl)) {
            *matched = true;
            return id_decode(raw, rl, h.cfg.max_id_bytes, id, CONFIG_MAX_ID_BYTES + 1, idlen) == ID_OK;
        }
    }
    return false;
}

FUZZ_TARGET(request)
{
    struct table *tbl = fuzz_app_input(&h, setup, data, size);
    if (tbl == NULL)
        return 0;
    bool exists = data[0] & 1, add = data[0] & 2;
    bool ready = tbl != h.unready;
    const char *uri = (const char *)data + 1;
    size_t len = size - 1;
    struct app a = base;
    a.tables = &tbl;

    static char id[CONFIG_MAX_ID_BYTES + 1];
    size_t idlen = 0;
    bool matched = false, valid, unknown = false;
    if (exists) {
        /* "NAME/ID" names a filter: the only one here is h.fc's; "ID" alone is the default. */
        const char *raw = uri, *slash = memchr(uri, '/', len);
        size_t rawlen = len;
        if (slash != NULL) {
            size_t nl = (size_t)(slash - uri);
            unknown = nl != strlen(h.fc.name) || memcmp(uri, h.fc.name, nl) != 0;
            raw = slash + 1;
            rawlen = len - nl - 1;
        }
        /* A second literal '/' is a path built wrong (400 bad_path), never an ID. */
        valid = !unknown && memchr(raw, '/', rawlen) == NULL
                && id_decode(raw, rawlen, h.cfg.max_id_bytes, id, sizeof id, &idlen) == ID_OK;
    } else
        valid = auth_id(uri, len, id, &idlen, &matched);
    if (add && valid && ready)
        FUZZ_CHECK(table_add_row(tbl, id, idlen));

    /* No connection, so no headers: /auth takes the URI from the path (uri_source auto). */
    struct api_request rq = { .method = "GET", .path = "", .rest = uri, .rest_len = len };
    struct reply r = exists ? ids_exists(&a, &rq) : ids_auth(&a, &rq);
    FUZZ_CHECK(r.resp != NULL);         /* NULL means "answer 500" */
    const char *verdict = MHD_get_response_header(r.resp, "X-Bloomguard");
    if (exists) {
        FUZZ_CHECK(fuzz_reply_is_json(r.resp));
        if (unknown)
            FUZZ_CHECK(r.status == 400);        /* unknown_filter, whatever the ID: never 404 */
        else if (!valid)
            FUZZ_CHECK(r.status == 400 || r.status == 414);
        else if (!ready)
            FUZZ_CHECK(r.status == 503);
        else
            FUZZ_CHECK(r.status == 200 || (r.status == 404 && !add));
    } else {
        FUZZ_CHECK(verdict != NULL);
        FUZZ_CHECK(r.status == h.cfg.allow_status || r.status == h.cfg.deny_status);
        /*
         * A deny needs a template match, a loaded filter and a well-formed
         * ID it says is absent; one that does not decode is a bypass (the
         * service may read it its own way); not loaded: fail_open allows.
         */
        if (r.status == h.cfg.deny_status)
            FUZZ_CHECK(matched && valid && ready && !add && strcmp(verdict, "miss") == 0);
        if (!matched || (matched && !valid))
            FUZZ_CHECK(strcmp(verdict, "bypass") == 0);
    }
    if (!r.shared)
        MHD_destroy_response(r.resp);
    return 0;
}
