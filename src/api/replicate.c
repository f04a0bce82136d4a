/*
 * The replication endpoints: GET /replicate/NAME and its /horizon and
 * /snapshot, handed to the hub (fleethub.c) that holds the rings and the
 * streams.
 */
#include "replicate.h"

#include <stdlib.h>
#include <string.h>

#include "fleethub.h"
#include "fleetwire.h"
#include "table.h"

/* "HISTORY:SEQ" (16 hex digits, a decimal): false if it is not that. */
static bool parse_from(const char *from, struct fleethub_where *w)
{
    char *end;
    if (strlen(from) < 18 || from[16] != ':')
        return false;
    w->history = strtoull(from, &end, 16);
    if (end != from + 16)
        return false;
    w->seq = strtoull(from + 17, &end, 10);
    return *end == '\0' && from[17] >= '0' && from[17] <= '9';
}

/* "TLI:LSN" (decimal, 16 hex digits): a commit position (fleetwire.h); false if not that. */
static bool parse_commit(const char *commit, struct fleethub_where *w)
{
    char *end;
    if (commit[0] < '0' || commit[0] > '9')
        return false;
    unsigned long tli = strtoul(commit, &end, 10);
    if (*end != ':' || tli == 0 || tli > UINT32_MAX || strlen(end + 1) != 16)
        return false;
    const char *l = end + 1;
    w->tli = (uint32_t)tli;
    w->lsn = strtoull(l, &end, 16);
    return *end == '\0' && w->lsn != 0 && l[0] != '-' && l[0] != '+' && l[0] != ' ';
}

/* "MS" within FLEETWIRE_BEAT_MIN_MS .. FLEETWIRE_BEAT_MAX_MS; NULL: the default. */
static bool parse_beat(const char *beat, unsigned *ms)
{
    char *end;
    if (beat == NULL) {
        *ms = FLEETWIRE_BEAT_DEFAULT_MS;
        return true;
    }
    if (beat[0] < '0' || beat[0] > '9')
        return false;
    unsigned long v = strtoul(beat, &end, 10);
    *ms = (unsigned)v;
    return *end == '\0' && v >= FLEETWIRE_BEAT_MIN_MS && v <= FLEETWIRE_BEAT_MAX_MS;
}

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
        const char *from = NULL, *beat = NULL, *commit = NULL, *horizon = NULL;
        struct fleethub_where where = { 0, 0, 0, 0 };
        unsigned beat_ms;
        if (rq->conn != NULL) {
            from = MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND, "from");
            beat = MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND, "beat");
            commit = MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND, "commit");
            horizon = MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND, "horizon");
        }
        if (from != NULL && !parse_from(from, &where))
            return api_error(MHD_HTTP_BAD_REQUEST, "bad_position",
                             "from must be HISTORY:SEQ (16 hex digits, a colon, a number)");
        if (commit != NULL && (from == NULL || !parse_commit(commit, &where)))
            return api_error(MHD_HTTP_BAD_REQUEST, "bad_commit_position",
                             "commit must be TLI:LSN (a timeline, a colon, 16 hex digits), "
                             "beside from");
        if (!parse_beat(beat, &beat_ms))
            return api_error(MHD_HTTP_BAD_REQUEST, "bad_beat",
                             "beat must be the milliseconds between heartbeats, %u to %u",
                             FLEETWIRE_BEAT_MIN_MS, FLEETWIRE_BEAT_MAX_MS);
        if (horizon != NULL && strcmp(horizon, "1") != 0 && strcmp(horizon, "0") != 0)
            return api_error(MHD_HTTP_BAD_REQUEST, "bad_horizon", "horizon must be 1 or 0");
        return fleethub_stream(a->fleet, (unsigned)t, from != NULL ? &where : NULL, beat_ms,
                               horizon != NULL && horizon[0] == '1', rq->conn);
    }
    if (what == 7 && memcmp(slash + 1, "horizon", 7) == 0)
        return fleethub_horizon(a->fleet, (unsigned)t);
    if (what == 8 && memcmp(slash + 1, "snapshot", 8) == 0)
        return fleethub_snapshot(a->fleet, (unsigned)t);
    return api_error(MHD_HTTP_NOT_FOUND, "no_route", "no such endpoint: GET /replicate/%.*s/%.*s",
                     (int)(name > 64 ? 64 : name), rest, (int)(what > 32 ? 32 : what), slash + 1);
}

unsigned replicate_get_fast(struct app *a, const char *rest, size_t rest_len, char *out,
                            size_t cap, size_t *len)
{
    /* rest: "/NAME/horizon", the replicas' round trips; the rest is the handler's. */
    static const char suffix[] = "/horizon";
    size_t sl = sizeof suffix - 1;
    if (a->fleet == NULL || rest_len <= sl + 1 || rest[0] != '/'
        || memcmp(rest + rest_len - sl, suffix, sl) != 0)
        return 0;
    const char *name = rest + 1;
    size_t nlen = rest_len - 1 - sl;
    for (unsigned i = 0; i < a->n_tables; i++) {
        const char *n = table_name(a->tables[i]);
        if (strlen(n) == nlen && memcmp(n, name, nlen) == 0) {
            *len = fleethub_horizon_text(a->fleet, i, out, cap);
            return *len > 0 ? MHD_HTTP_OK : 0;
        }
    }
    return 0;
}
