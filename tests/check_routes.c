/*
 * Unit tests of the route table (routes_table[] in src/http/routes.c) and of the
 * per-route request counters: which paths each row takes and what rest it
 * hands its handler, that no row hides another, the Allow header a row's
 * methods give, and that stats counts each route in its own slot.  The
 * HTTP behaviour around them (404, 405, admin, bodies) is tests/edge.test's.
 */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utime.h>

#include "check_main.h"
#include "routes.h"
#include "config.h"
#include "stats.h"
#include "table.h"

/*
 * path and method (API_* bit), the name of the route that takes them (NULL:
 * none), the rest it gets.  A route that takes the path but not the method
 * is returned too (for the 405): its name is listed.
 */
static const struct {
    const char *path;
    unsigned method;
    const char *name, *rest;
} finds[] = {
    { "/exists/abc", ROUTE_GET, "exists", "abc" },
    { "/exists/a%2Fb/c", ROUTE_GET, "exists", "a%2Fb/c" },
    { "/exists/users/42", ROUTE_HEAD, "exists", "users/42" },
    { "/exists/", ROUTE_GET, "exists", "" },
    { "/exists", ROUTE_POST, "exists_batch", "" },
    { "/exists/users", ROUTE_POST, "exists_batch", "/users" },
    { "/exists", ROUTE_GET, "exists_batch", "" },       /* 405: POST only */
    { "/existsx", ROUTE_GET, NULL, NULL },
    { "/exist", ROUTE_GET, NULL, NULL },
    { "/ids", ROUTE_POST, "ids", "" },
    { "/ids/", ROUTE_POST, "ids", "/" },
    { "/ids/orders", ROUTE_POST, "ids", "/orders" },
    { "/idsx", ROUTE_POST, NULL, NULL },
    { "/auth", ROUTE_GET, "auth", "" },
    { "/auth/", ROUTE_OTHER, "auth", "/" },
    { "/auth/user/get/1", ROUTE_GET, "auth", "/user/get/1" },
    { "/authx", ROUTE_GET, NULL, NULL },
    { "/auth%2F", ROUTE_GET, NULL, NULL },
    { "/healthz", ROUTE_GET, "healthz", "" },
    { "/healthz/", ROUTE_GET, NULL, NULL },
    { "/readyz", ROUTE_GET, "readyz", "" },
    { "/stats", ROUTE_GET, "stats", "" },
    { "/stats/x", ROUTE_GET, NULL, NULL },
    { "/metrics", ROUTE_GET, "metrics", "" },
    { "/reload", ROUTE_POST, "reload", "" },
    { "/reload/users", ROUTE_POST, "reload", "/users" },
    { "/snapshot", ROUTE_GET, "snapshot", "" },
    { "/snapshot/users", ROUTE_HEAD, "snapshot", "/users" },
    { "/snapshot", ROUTE_POST, "snapshot", "" },        /* 405: GET and HEAD only */
    { "/snapshots", ROUTE_GET, NULL, NULL },
    { "/", ROUTE_GET, NULL, NULL },
    { "", ROUTE_GET, NULL, NULL },
    { "/EXISTS/1", ROUTE_GET, NULL, NULL },
};

START_TEST(test_find)
{
    size_t off = 99;
    unsigned allowed;
    const struct route *r = routes_find(finds[_i].path, finds[_i].method, &off, &allowed);
    if (finds[_i].name == NULL) {
        ck_assert_msg(r == NULL, "%s: taken by %s", finds[_i].path, r ? r->name : "");
        return;
    }
    ck_assert_msg(r != NULL, "%s: no route", finds[_i].path);
    ck_assert_str_eq(r->name, finds[_i].name);
    ck_assert_str_eq(finds[_i].path + off, finds[_i].rest);
}
END_TEST

/* Every row takes its own path: no earlier row hides it. */
START_TEST(test_no_row_hidden)
{
    for (unsigned i = 0; i < routes_count; i++) {
        size_t off;
        unsigned allowed, m = routes_table[i].methods & -routes_table[i].methods;   /* its first method */
        const struct route *r = routes_find(routes_table[i].path, m, &off, &allowed);
        ck_assert_msg(r == &routes_table[i], "%s is taken by row %s", routes_table[i].path,
                      r ? r->name : "(none)");
    }
}
END_TEST

/* Names key /stats requests_by_endpoint and label /metrics: unique, not "other". */
START_TEST(test_rows_well_formed)
{
    ck_assert_uint_ge(routes_count, 9);
    for (unsigned i = 0; i < routes_count; i++) {
        const struct route *r = &routes_table[i];
        ck_assert_msg(r->path[0] == '/', "row %u: path %s", i, r->path);
        ck_assert_ptr_nonnull(r->handler);
        ck_assert_uint_ne(r->methods, 0);
        ck_assert_str_ne(r->name, "other");
        ck_assert_str_eq(routes_slot_name(i), r->name);
        for (unsigned j = 0; j < i; j++)
            ck_assert_msg(strcmp(routes_table[j].name, r->name) != 0, "name %s twice", r->name);
        /*
         * Body routes are POST only: a GET must never read a body.  Admin
         * routes write (POST), but for those a replica's token opens too
         * (/snapshot, /replicate/): reads of a whole filter; and /absent,
         * a replica's hot IDs passed up (issue 35): a report only makes a
         * candidate, it writes nothing a lookup answers from.
         */
        if (r->body)
            ck_assert_uint_eq(r->methods, ROUTE_POST);
        if (r->admin == 1)
            ck_assert_uint_eq(r->methods, ROUTE_POST);
        ck_assert_msg(r->admin <= ROUTE_REPLICATION, "row %u: admin %u", i, r->admin);
        if (r->admin == ROUTE_REPLICATION && strcmp(r->name, "absent") != 0)
            ck_assert_msg(!(r->methods & ROUTE_POST), "row %u: a replica's token writes", i);
    }
    ck_assert_str_eq(routes_slot_name(routes_count), "other");
}
END_TEST

START_TEST(test_methods)
{
    char allow[32];
    ck_assert_uint_eq(routes_method_bit("GET"), ROUTE_GET);
    ck_assert_uint_eq(routes_method_bit("HEAD"), ROUTE_HEAD);
    ck_assert_uint_eq(routes_method_bit("POST"), ROUTE_POST);
    ck_assert_uint_eq(routes_method_bit("get"), ROUTE_OTHER);     /* methods are case-sensitive */
    ck_assert_uint_eq(routes_method_bit("PUT"), ROUTE_OTHER);
    routes_allow_header(ROUTE_READ, allow, sizeof allow);
    ck_assert_str_eq(allow, "GET, HEAD");
    routes_allow_header(ROUTE_POST, allow, sizeof allow);
    ck_assert_str_eq(allow, "POST");
    routes_allow_header(ROUTE_ANY, allow, sizeof allow);
    ck_assert_str_eq(allow, "GET, HEAD, POST");
    routes_allow_header(ROUTE_ANY, allow, 8);                     /* cut, but terminated */
    ck_assert_str_eq(allow, "GET");
}
END_TEST

START_TEST(test_stats_slots)
{
    ck_assert_ptr_null(stats_new(0, NULL));
    struct stats *s = stats_new(3, NULL);
    ck_assert_ptr_nonnull(s);
    stats_request(s, 0, 200, 1000);             /* 1 us */
    stats_request(s, 1, 404, 2000000000);       /* 2 s: past the last bound */
    stats_request(s, 1, 404, 0);                /* not timed */
    stats_request(s, 2, 999, 1);
    stats_request(s, 7, 200, 1);                /* out of range: the last slot */
    stats_add(s, ST_INSERTS, 5);
    struct stats_snapshot snap;
    ck_assert(stats_snapshot(s, &snap));
    ck_assert_uint_eq(snap.slots, 3);
    ck_assert_uint_eq(snap.counter[ST_INSERTS], 5);
    ck_assert_uint_eq(snap.route[0].requests[SS_200], 1);
    ck_assert_uint_eq(snap.route[0].latency_bucket[0], 1);
    ck_assert_uint_eq(snap.route[0].latency_sum_ns, 1000);
    ck_assert_uint_eq(snap.route[1].requests[SS_404], 2);
    ck_assert_uint_eq(snap.route[1].latency_bucket[STATS_BUCKETS], 1);
    ck_assert_uint_eq(snap.route[2].requests[SS_OTHER], 1);
    ck_assert_uint_eq(snap.route[2].requests[SS_200], 1);
    uint64_t c[ST_COUNT];
    stats_counters(s, c);
    ck_assert_uint_eq(c[ST_INSERTS], 5);
    stats_snapshot_free(&snap);
    ck_assert_ptr_null(snap.route);
    stats_free(s);

    s = routes_stats_new();
    ck_assert_ptr_nonnull(s);
    ck_assert(stats_snapshot(s, &snap));
    ck_assert_uint_eq(snap.slots, routes_count + 1);
    ck_assert_str_eq(stats_slot_name(&snap, 0), routes_table[0].name);
    ck_assert_str_eq(stats_slot_name(&snap, routes_count), "other");
    stats_snapshot_free(&snap);
    stats_free(s);
}
END_TEST

/* GET /snapshot[/NAME] through its row's handler, as http.c calls it. */
static struct reply get_snapshot(struct app *a, const char *path)
{
    size_t off;
    unsigned allowed;
    const struct route *r = routes_find(path, ROUTE_GET, &off, &allowed);
    ck_assert_ptr_nonnull(r);
    ck_assert_str_eq(r->name, "snapshot");
    ck_assert(r->admin);
    struct api_request rq = { .method = "GET", .path = path, .rest = path + off,
                              .rest_len = strlen(path + off), .body_type = BODY_NONE };
    return r->handler(a, &rq);
}

static unsigned snapshot_answer(struct app *a, const char *path)
{
    struct reply rp = get_snapshot(a, path);
    ck_assert_ptr_nonnull(rp.resp);
    ck_assert(!rp.shared);
    const char *ct = MHD_get_response_header(rp.resp, MHD_HTTP_HEADER_CONTENT_TYPE);
    ck_assert_str_eq(ct, rp.status == 200 ? "application/octet-stream" : "application/json");
    MHD_destroy_response(rp.resp);
    return rp.status;
}

START_TEST(test_snapshot_handler)
{
    char dir[] = "/tmp/check_routes.XXXXXX", file[64];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    struct config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.snapshot_path = (char *)"";
    struct filter_config fc[2];
    memset(fc, 0, sizeof fc);
    fc[0].name = (char *)"default";
    fc[1].name = (char *)"users";
    struct table *tables[2] = { table_new(&cfg, &fc[0]), table_new(&cfg, &fc[1]) };
    ck_assert(tables[0] != NULL && tables[1] != NULL);
    struct app a = { .cfg = &cfg, .tables = tables, .n_tables = 2 };

    ck_assert_uint_eq(snapshot_answer(&a, "/snapshot"), 400);           /* snapshots_off */
    cfg.snapshot_path = dir;
    ck_assert_uint_eq(snapshot_answer(&a, "/snapshot"), 503);           /* no_snapshot */
    ck_assert_uint_eq(snapshot_answer(&a, "/snapshot/users"), 503);
    ck_assert_uint_eq(snapshot_answer(&a, "/snapshot/nobody"), 400);    /* unknown_filter */
    ck_assert_uint_eq(snapshot_answer(&a, "/snapshot/"), 400);          /* the name "" */

    /* The default filter's file, with a known mtime: 200, its age in a header. */
    snprintf(file, sizeof file, "%s/default.snap", dir);
    FILE *f = fopen(file, "w");
    ck_assert_ptr_nonnull(f);
    fputs("not checked here: any bytes", f);
    fclose(f);
    struct utimbuf ut = { 1234567890, 1234567890 };
    ck_assert_int_eq(utime(file, &ut), 0);
    struct reply rp = get_snapshot(&a, "/snapshot");
    ck_assert_uint_eq(rp.status, 200);
    ck_assert_ptr_nonnull(rp.resp);
    ck_assert_str_eq(MHD_get_response_header(rp.resp, MHD_HTTP_HEADER_CONTENT_TYPE),
                     "application/octet-stream");
    ck_assert_str_eq(MHD_get_response_header(rp.resp, "X-Bloomguard-Snapshot-Created"),
                     "1234567890");
    MHD_destroy_response(rp.resp);      /* closes the descriptor */
    ck_assert_uint_eq(snapshot_answer(&a, "/snapshot/users"), 503);     /* still none of its own */

    /* Something there that is not a file: 500, not a stream of a directory. */
    char sub[64];
    snprintf(sub, sizeof sub, "%s/users.snap", dir);
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    ck_assert_uint_eq(snapshot_answer(&a, "/snapshot/users"), 500);     /* snapshot_unreadable */
    ck_assert_int_eq(rmdir(sub), 0);
    ck_assert_int_eq(unlink(file), 0);
    ck_assert_int_eq(rmdir(dir), 0);
    table_free(tables[0]);
    table_free(tables[1]);
}
END_TEST

CHECK_SUITE("routes",
    CHECK_CASE("table"),
    CHECK_EACH(test_find, finds),
    CHECK_TEST(test_no_row_hidden),
    CHECK_TEST(test_rows_well_formed),
    CHECK_TEST(test_methods),
    CHECK_CASE("snapshot"),
    CHECK_TEST(test_snapshot_handler),
    CHECK_CASE("stats"),
    CHECK_TEST(test_stats_slots),
)
