/*
 * The admin endpoints, those that need the admin right (routes.c marks
 * them; http.c checks the token): POST /reload asks for rebuilds and GET
 * /snapshot hands a peer the whole filter.  POST /ids, an admin route too,
 * is an ID endpoint (ids.c).
 */
#include "admin.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "persist.h"
#include "source.h"
#include "table.h"


/* POST /reload rebuilds every table; POST /reload/NAME that one. */
struct reply admin_reload(struct app *a, const struct api_request *rq)
{
    struct reply err;
    int t = api_table_of_rest(a, rq, &err);
    if (t < 0)
        return err;
    unsigned from = rq->rest_len ? (unsigned)t : 0, to = rq->rest_len ? (unsigned)t + 1 : a->n_tables;
    /* A replica reloads from its upstream's snapshots, never from the table. */
    while (from < to && api_replica(a, from))
        from++;
    if (from == to)
        return api_read_only(a, (unsigned)t);
    bool coalesced = false;
    uint64_t id = 0;
    double starts_in = 0;
    json_t *filters = json_object();
    for (unsigned i = from; i < to; i++) {
        bool c = false;
        if (api_replica(a, i))
            continue;
        uint64_t one = source_request_rebuild(a->source, i, WANT_API, &c);
        struct table_status ts;
        table_status(a->tables[i], &ts);
        if (i == from) {
            id = one;
            coalesced = c;
            starts_in = ts.next_rebuild_in;
        }
        json_object_set_new(filters, table_name(a->tables[i]),
                            json_pack("{s:I, s:b, s:f}", "rebuild_id", (json_int_t)one,
                                      "coalesced", c, "starts_in_seconds", ts.next_rebuild_in));
    }
    /*
     * Coalesced into the next rebuild min_rebuild_interval allows: never one
     * COPY per request.  The top-level figures are the first table's.
     */
    json_t *o = json_pack("{s:s, s:I, s:b, s:f, s:o}", "status", "accepted", "rebuild_id",
                          (json_int_t)id, "coalesced", coalesced, "starts_in_seconds", starts_in,
                          "filters", filters);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return api_json_take(MHD_HTTP_ACCEPTED, s);
}

/*
 * GET /snapshot streams the default filter's snapshot file, GET
 * /snapshot/NAME that filter's: what a new peer bootstraps from
 * ([snapshot] bootstrap_from).  The file, not a fresh snapshot: the daemon
 * replaces it whole with rename, so the descriptor opened here reads one
 * consistent snapshot however long the transfer takes, and a peer costs
 * neither a copy of the filter nor the rebuild thread's time.  Admin only:
 * the filter tells which IDs are absent, as much as the table itself.
 */
struct reply admin_snapshot(struct app *a, const struct api_request *rq)
{
    struct reply err;
    int t = api_table_of_rest(a, rq, &err);
    if (t < 0)
        return err;
    const char *name = table_name(a->tables[t]);
    char path[PERSIST_PATH_MAX];
    if (!persist_file(a->cfg, table_config(a->tables[t]), path, sizeof path))
        return api_error(MHD_HTTP_BAD_REQUEST, "snapshots_off", "snapshots are off: set [snapshot] path");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)
        return api_error(MHD_HTTP_SERVICE_UNAVAILABLE, "no_snapshot",
                         "no snapshot written yet for filter %s", name);
    struct stat st;
    char ebuf[128];
    const char *why = NULL;
    if (fd < 0 || fstat(fd, &st) != 0)
        why = strerror_r(errno, ebuf, sizeof ebuf);     /* GNU: thread-safe, returns the text */
    else if (!S_ISREG(st.st_mode))
        why = "not a regular file";
    if (why != NULL) {
        if (fd >= 0)
            close(fd);
        /* The path stays in the daemon's configuration: clients learn only why. */
        return api_error(MHD_HTTP_INTERNAL_SERVER_ERROR, "snapshot_unreadable",
                         "the snapshot of filter %s cannot be read: %s", name, why);
    }
    /* MHD owns fd from here, and closes it when the response is destroyed. */
    struct MHD_Response *r = MHD_create_response_from_fd64((uint64_t)st.st_size, fd);
    if (r == NULL) {
        close(fd);
        return (struct reply){ 500, NULL, false };
    }
    char created[24];
    snprintf(created, sizeof created, "%" PRId64, (int64_t)st.st_mtime);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
    MHD_add_response_header(r, "X-Bloomguard-Snapshot-Created", created);
    return (struct reply){ MHD_HTTP_OK, r, false };
}
