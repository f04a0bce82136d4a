/*
 * Unit tests of the SQLSTATE hints: the table's answers, the codes read
 * from refused connections' FATAL lines, and the tag that carries a code
 * through error texts (none of it needs a PostgreSQL).
 */
#include <check.h>
#include <string.h>

#include "check_main.h"
#include "follow.h"
#include "pgerror.h"

START_TEST(hints_known_and_unknown)
{
    ck_assert_str_eq(pgerror_hint("3D000"), "the database does not exist");
    ck_assert_str_eq(pgerror_hint("42P01"), "the table does not exist");
    ck_assert_str_eq(pgerror_hint("28P01"), pgerror_hint("28000"));
    ck_assert_ptr_nonnull(strstr(pgerror_hint("42501"), "permission denied"));
    ck_assert_ptr_nonnull(pgerror_hint("53300"));
    ck_assert_ptr_nonnull(pgerror_hint("57P03"));
    ck_assert_ptr_nonnull(pgerror_hint("55000"));
    ck_assert_ptr_null(pgerror_hint("XX000"));
    ck_assert_ptr_null(pgerror_hint(""));
    ck_assert_ptr_null(pgerror_hint(NULL));
    ck_assert_ptr_null(pgerror_hint("3D0001"));
    ck_assert_ptr_null(pgerror_hint("3d000"));
}
END_TEST

START_TEST(connect_texts)
{
    ck_assert_str_eq(pgerror_guess_connect("connection to server on socket \"/tmp/x/.s.PGSQL.5433\" "
                                           "failed: FATAL:  database \"nosuch\" does not exist\n"),
                     "3D000");
    ck_assert_str_eq(pgerror_guess_connect("connection to server at \"db\" (10.0.0.1), port 5432 "
                                           "failed: FATAL:  password authentication failed for "
                                           "user \"bg\"\n"),
                     "28P01");
    ck_assert_str_eq(pgerror_guess_connect("failed: FATAL:  role \"bg\" does not exist\n"), "28000");
    ck_assert_str_eq(pgerror_guess_connect("failed: FATAL:  no pg_hba.conf entry for host "
                                           "\"[local]\", user \"bg\", database \"d\"\n"),
                     "28000");
    ck_assert_str_eq(pgerror_guess_connect("FATAL:  sorry, too many clients already\n"), "53300");
    ck_assert_str_eq(pgerror_guess_connect("FATAL:  the database system is starting up\n"), "57P03");
    ck_assert_str_eq(pgerror_guess_connect("FATAL:  permission denied for database \"d\"\n"
                                           "DETAIL:  User does not have CONNECT privilege.\n"),
                     "42501");
    /* A role or database named in another text is no missing object. */
    ck_assert_ptr_null(pgerror_guess_connect("FATAL:  database \"d\" is not currently accepting "
                                             "connections\nDETAIL: x does not exist\n"));
    /* Client-side failures have no server code. */
    ck_assert_ptr_null(pgerror_guess_connect("connection to server on socket \"/tmp/.s.PGSQL.1\" "
                                             "failed: No such file or directory\n"));
    ck_assert_ptr_null(pgerror_guess_connect("could not translate host name \"db\" to address"));
    ck_assert_ptr_null(pgerror_guess_connect(NULL));
    /* The text must be on the FATAL line itself. */
    ck_assert_ptr_null(pgerror_guess_connect("FATAL:  something else\nsorry, too many clients already"));
}
END_TEST

START_TEST(tag_round_trip)
{
    char err[64] = "cannot read the table: ERROR:  x";
    char code[PGERROR_SQLSTATE_LEN];
    ck_assert(!pgerror_find(err, code));
    ck_assert_str_eq(code, "");
    pgerror_tag(err, sizeof err, "42501");
    ck_assert_str_eq(err, "cannot read the table: ERROR:  x (SQLSTATE 42501)");
    ck_assert(pgerror_find(err, code));
    ck_assert_str_eq(code, "42501");

    /* Not valid codes: nothing appended. */
    pgerror_tag(err, sizeof err, NULL);
    pgerror_tag(err, sizeof err, "4250");
    pgerror_tag(err, sizeof err, "42501x");
    ck_assert_str_eq(err, "cannot read the table: ERROR:  x (SQLSTATE 42501)");

    /* Wrapped by an outer context, the last tag wins. */
    ck_assert(pgerror_find("load: a (SQLSTATE 08006) b (SQLSTATE 3D000)", code));
    ck_assert_str_eq(code, "3D000");
    /* A tag must be whole. */
    ck_assert(!pgerror_find("x (SQLSTATE 3D00", code));
    ck_assert(!pgerror_find("x (SQLSTATE 3d000)", code));

    /* No room for the whole tag: err stays as it was, never a cut tag. */
    char small[24] = "0123456789abcdef";
    pgerror_tag(small, sizeof small, "3D000");
    ck_assert_str_eq(small, "0123456789abcdef");
    char fits[40] = "0123456789abcdef";
    pgerror_tag(fits, sizeof fits, "3D000");
    ck_assert_str_eq(fits, "0123456789abcdef (SQLSTATE 3D000)");

    /* Taken off: the text before it stays. */
    ck_assert(pgerror_take(fits, code));
    ck_assert_str_eq(code, "3D000");
    ck_assert_str_eq(fits, "0123456789abcdef");
    ck_assert(!pgerror_take(fits, code));
    ck_assert_str_eq(code, "");
    ck_assert_str_eq(fits, "0123456789abcdef");
}
END_TEST

/* The public part keeps the code and drops libpq's detail (hosts, names). */
START_TEST(public_error_keeps_code)
{
    char pub[160];
    struct follow_status st = { 0 };
    follow_public_error(pub, sizeof pub, "cannot connect to PostgreSQL: connection to server on "
                        "socket \"/tmp/s/.s.PGSQL.5433\" failed: FATAL:  database \"secretdb\" "
                        "does not exist (SQLSTATE 3D000)");
    ck_assert_str_eq(pub, "cannot connect to PostgreSQL (SQLSTATE 3D000)");
    follow_status_set_error(&st, pub);
    ck_assert_str_eq(st.last_error, "cannot connect to PostgreSQL");
    ck_assert_str_eq(st.sqlstate, "3D000");
    follow_public_error(pub, sizeof pub, "COPY failed: server closed the connection");
    follow_status_set_error(&st, pub);
    ck_assert_str_eq(st.last_error, "COPY failed");
    ck_assert_str_eq(st.sqlstate, "");
}
END_TEST

CHECK_SUITE("pgerror",
    CHECK_CASE("core"),
    CHECK_TEST(hints_known_and_unknown),
    CHECK_TEST(connect_texts),
    CHECK_TEST(tag_round_trip),
    CHECK_TEST(public_error_keeps_code),
)
