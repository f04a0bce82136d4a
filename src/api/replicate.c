/*
 * The replication endpoints: GET /replicate/NAME and its /horizon and
 * /snapshot, handed to the hub (fleethub.c) that holds the rings and the
 * streams.
 */
#include "replicate.h"

#include <string.h>

#include "fleethub.h"

struct reply replicate_get(struct app *a, const struct api_request *rq)
{
    struct reply err;
    /* rest: "/NAME", "/NAME/horizon" or "/NAME/snapshot" ("" names no filter). */
    const char *rest = rq->rest_len > 0 ? rq->rest + 1 : rq->rest;
    size_t len = rq->rest_len > 0 ? rq->rest_len - 1 : 0;
    const char *slash = memchr(rest, '/', len);
    size_t name = slash ? (size_t)(slash - rest) : len;
    size_t what = slash ? len - name - 1 : 0;
    int t = api_table_named(a, rest, name, &err);
    if (t < 0)
        return err;
    if (a->fleet == NULL)
        return api_error(MHD_HTTP_SERVICE_UNAVAILABLE, "not_replicating",
                         "this daemon serves no replica");
    if (slash == NULL) {
        const char *from = rq->conn ? MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND,
                                                                  "from")
                                    : NULL;
        return fleethub_stream(a->fleet, (unsigned)t, from, rq->conn);
    }
    if (what == 7 && memcmp(slash + 1, "horizon", 7) == 0)
        return fleethub_horizon(a->fleet, (unsigned)t);
    if (what == 8 && memcmp(slash + 1, "snapshot", 8) == 0)
        return fleethub_snapshot(a->fleet, (unsigned)t);
    return api_error(MHD_HTTP_NOT_FOUND, "no_route", "no such endpoint: GET /replicate/%.*s/%.*s",
                     (int)(name > 64 ? 64 : name), rest, (int)(what > 32 ? 32 : what), slash + 1);
}
