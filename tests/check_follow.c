/*
 * Unit tests of the common part of the followers (src/follow/follow.c): the
 * names of states and methods, the connection's state and status a method
 * reports through, the server check and the probe's deadline, and method
 * logical's positions (their longest fits a snapshot), without
 * PostgreSQL or a thread.
 */
#include <string.h>

#include "check_main.h"
#include "follow.h"
#include "logical.h"
#include "snapshot.h"

START_TEST(names_from_tables)
{
    ck_assert_str_eq(follow_state_name(FOLLOW_CONNECTING), "connecting");
    ck_assert_str_eq(follow_state_name(FOLLOW_RECONNECTING), "reconnecting");
    ck_assert_str_eq(follow_state_name((enum follow_state)42), "unknown");
    ck_assert_str_eq(sync_method_name(SYNC_FEED), "feed");
    ck_assert_str_eq(sync_method_name(SYNC_NONE), "none");
    ck_assert_str_eq(sync_method_name((enum sync_method)42), "?");
    ck_assert_ptr_eq(follow_method_ops(SYNC_LOGICAL), &follow_logical_ops);
    ck_assert_ptr_null(follow_method_ops(SYNC_NONE));
    ck_assert_ptr_null(follow_method_ops((enum sync_method)42));
    /* Every row of SYNC_METHOD_LIST has its ops, and they say their row. */
#define METHOD_HAS_OPS(id, name) \
    ck_assert_ptr_nonnull(follow_method_ops(id)); \
    ck_assert_int_eq(follow_method_ops(id)->method, id); \
    ck_assert_str_eq(sync_method_name(id), name);
    SYNC_METHOD_LIST(METHOD_HAS_OPS)
#undef METHOD_HAS_OPS
}
END_TEST

struct fake {
    struct follower base;
    int inits;
};

static void fake_init(struct follower *f)
{
    ((struct fake *)f)->inits++;
}

static void fake_status_locked(struct follower *f, struct follow_status *out)
{
    snprintf(out->slot, sizeof out->slot, "%s", f->listening ? "up" : "down");
}

static const struct follow_ops fake_ops = {
    .method = SYNC_FEED,
    .size = sizeof(struct fake),
    .init = fake_init,
    .status_locked = fake_status_locked,
};

START_TEST(state_and_status)
{
    struct follower *f = follow_new(&fake_ops, NULL, NULL, NULL, NULL);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(((struct fake *)f)->inits, 1);
    struct follow_status st;
    follow_status(f, &st);
    ck_assert_int_eq(st.state, FOLLOW_CONNECTING);
    ck_assert(!st.listening);
    ck_assert_int_eq(st.slot_lag_bytes, -1);
    ck_assert_str_eq(st.slot, "down");

    follow_set_state(f, FOLLOW_RECONNECTING, "cannot connect: host db1 refused (SQLSTATE 08006)");
    follow_status(f, &st);
    ck_assert_int_eq(st.state, FOLLOW_RECONNECTING);
    ck_assert_str_eq(st.last_error, "cannot connect");
    ck_assert_str_eq(st.sqlstate, "08006");

    f->since = 1;                   /* the same state again keeps its since */
    follow_set_state(f, FOLLOW_RECONNECTING, "again");
    ck_assert_int_eq(f->since, 1);
    follow_set_state(f, FOLLOW_CONNECTED, NULL);
    ck_assert_int_ne(f->since, 1);
    follow_status(f, &st);
    ck_assert(st.listening);
    ck_assert_str_eq(st.last_error, "");
    ck_assert_str_eq(st.slot, "up");
    follow_free(f);
}
END_TEST

START_TEST(same_server)
{
    struct follower *f = follow_new(&fake_ops, NULL, NULL, NULL, NULL);
    char err[512] = "";
    ck_assert(!follow_same_server_locked(f, "a", err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "[a] against [none]"));
    snprintf(f->server_id, sizeof f->server_id, "a");
    ck_assert(follow_same_server_locked(f, "a", err, sizeof err));
    ck_assert(!follow_same_server_locked(f, "b", err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "[b] against [a]"));
    follow_free(f);
}
END_TEST

START_TEST(probe_deadline)
{
    const int64_t s = 1000000000;
    char err[128] = "";
    ck_assert(!follow_probe_dead(5 * s, 5 * s + 15 * s, 15, err, sizeof err));
    ck_assert_str_eq(err, "");
    ck_assert(follow_probe_dead(5 * s, 5 * s + 15 * s + 1, 15, err, sizeof err));
    ck_assert_str_eq(err, "connection lost: no answer to a probe in 15 s");
    ck_assert(!follow_probe_dead(5 * s, 5 * s + 3 * s, 3, err, sizeof err));
    ck_assert(follow_probe_dead(5 * s, 5 * s + 3 * s + 1, 3, err, sizeof err));
    ck_assert_str_eq(err, "connection lost: no answer to a probe in 3 s");
}
END_TEST

/* A logical position at its longest fits a snapshot and reads back; an old one (no tli) is not one. */
START_TEST(logical_positions)
{
    struct logical_pos p = { .lsn = UINT64_C(0xFFFFFFFFFFFFFFFE) }, q;
    memset(p.tli, '9', sizeof p.tli - 1);
    memset(p.slot, 's', sizeof p.slot - 1);
    memset(p.sysid, '7', sizeof p.sysid - 1);
    memset(p.db, '4', sizeof p.db - 1);
    memset(p.fp, '1', sizeof p.fp - 1);
    char out[TABLE_POS_MAX];
    logical_format_pos(out, sizeof out, &p);
    ck_assert_uint_lt(strlen(out), sizeof out - 1);         /* not cut short */
    ck_assert_uint_le(strlen(out), SNAPSHOT_MAX_POSITION);
    ck_assert(logical_parse_pos(out, &q));
    ck_assert_uint_eq(q.lsn, p.lsn);
    ck_assert_str_eq(q.tli, p.tli);
    ck_assert_str_eq(q.slot, p.slot);
    ck_assert_str_eq(q.sysid, p.sysid);
    ck_assert_str_eq(q.db, p.db);
    ck_assert_str_eq(q.fp, p.fp);
    ck_assert(!logical_parse_pos("wal:0/1DFC6F8 slot=bloomguard_580ad3eae03c sysid=7 db=5 pub=1.2", &q));
    ck_assert(!logical_parse_pos("feed:12/abc/5", &q));
}
END_TEST

CHECK_SUITE("follow",
    CHECK_CASE("common"),
    CHECK_TEST(names_from_tables),
    CHECK_TEST(state_and_status),
    CHECK_TEST(same_server),
    CHECK_TEST(probe_deadline),
    CHECK_CASE("logical positions"),
    CHECK_TEST(logical_positions),
)
