/*
 * Unit tests of the unix listening socket (src/http/listen.c): the group text
 * [server] listen_group takes, and that the socket file has listen_mode and
 * the group before anyone can connect.  TCP is exercised by every
 * integration test.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check_main.h"
#include "listen.h"

START_TEST(test_group_id)
{
    gid_t gid = 12345;
    char err[256] = "";

    ck_assert(listen_group_id("", &gid, err, sizeof err));
    ck_assert(gid == (gid_t)-1);
    ck_assert(listen_group_id(NULL, &gid, err, sizeof err));
    ck_assert(gid == (gid_t)-1);
    ck_assert(listen_group_id("0", &gid, err, sizeof err));
    ck_assert_uint_eq(gid, 0);
    /* A number needs no group entry: chown takes any gid. */
    ck_assert(listen_group_id("4000000", &gid, err, sizeof err));
    ck_assert_uint_eq(gid, 4000000);
    ck_assert(listen_group_id("root", &gid, err, sizeof err));
    ck_assert_uint_eq(gid, 0);
    ck_assert(!listen_group_id("no-such-group-bg", &gid, err, sizeof err));
    ck_assert_msg(strstr(err, "[server] listen_group: no group \"no-such-group-bg\"") != NULL, "%s", err);
    ck_assert(!listen_group_id("99999999999999999999", &gid, err, sizeof err));
    ck_assert_msg(strstr(err, "out of range") != NULL, "%s", err);
}
END_TEST

/* A fresh directory in /tmp for a socket; the test removes both. */
static void tmpdir_sock(char *dir, size_t len, char *path, size_t plen)
{
    snprintf(dir, len, "/tmp/check_listen.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, plen, "%s/http.sock", dir);
}

START_TEST(test_mode_and_group)
{
    static const unsigned modes[] = { 0600, 0640, 0660, 0666, 0 };
    char dir[64], path[96], err[256] = "";
    struct stat st;

    tmpdir_sock(dir, sizeof dir, path, sizeof path);
    /* Our own group: a chown any user may make. */
    int fd = listen_unix(path, modes[_i], getegid(), err, sizeof err);
    ck_assert_msg(fd >= 0, "%s", err);
    ck_assert_int_eq(lstat(path, &st), 0);
    ck_assert(S_ISSOCK(st.st_mode));
    ck_assert_uint_eq(st.st_mode & 07777, modes[_i]);
    ck_assert_uint_eq(st.st_gid, getegid());
    close(fd);
    unlink(path);
    rmdir(dir);
}
END_TEST

/* A group that does not exist is found before the stale socket is touched. */
START_TEST(test_bad_group_binds_nothing)
{
    char dir[64], path[96], host[128], err[256] = "";
    struct stat before, after;
    int family = 0;
    unsigned port = 1;

    tmpdir_sock(dir, sizeof dir, path, sizeof path);
    int fd = listen_unix(path, 0600, (gid_t)-1, err, sizeof err);
    ck_assert_msg(fd >= 0, "%s", err);
    close(fd);
    ck_assert_int_eq(lstat(path, &before), 0);
    snprintf(host, sizeof host, "unix:%s", path);
    ck_assert_int_eq(listen_open(host, 0, 0660, "no-such-group-bg", &family, &port, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "cannot listen on unix:") != NULL && strstr(err, "no group") != NULL,
                  "%s", err);
    ck_assert_int_eq(lstat(path, &after), 0);
    ck_assert_uint_eq(before.st_ino, after.st_ino);
    ck_assert_uint_eq(after.st_mode & 0777, 0600);
    /* The same call with a good group replaces the stale socket. */
    fd = listen_open(host, 0, 0640, "", &family, &port, err, sizeof err);
    ck_assert_msg(fd >= 0, "%s", err);
    ck_assert_int_eq(family, AF_UNIX);
    ck_assert_uint_eq(port, 0);
    ck_assert_int_eq(lstat(path, &after), 0);
    ck_assert_uint_eq(after.st_mode & 0777, 0640);
    close(fd);
    unlink(path);
    rmdir(dir);
}
END_TEST

CHECK_SUITE("listen",
    CHECK_CASE("core"),
    CHECK_TEST(test_group_id),
    CHECK_LOOP(test_mode_and_group, 5),
    CHECK_TEST(test_bad_group_binds_nothing),
)
