/*
 * Unit tests of the admin token: which files token_load accepts (and from
 * where: the configured file first, then systemd's credential directory),
 * and which Authorization headers token_check_bearer lets through.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check_main.h"
#include "token.h"

#define GOOD "0123456789abcdef-TOKEN"

static char dir[64];

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/check_token.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* Write len bytes of s to dir/name; returns the path (static buffer). */
static const char *put(const char *name, const char *s, size_t len)
{
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(s, 1, len, f), len);
    fclose(f);
    return path;
}

static enum token_result load(const char *file, const char *creds, char **tok, char *err)
{
    char from[256];
    return token_load(file, creds, tok, from, sizeof from, err, 256);
}

START_TEST(test_load_strips_trailing_space)
{
    static const char *const bodies[] = { GOOD, GOOD "\n", GOOD "\r\n", GOOD " \t\n\n\n" };
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        char *tok = NULL, err[256] = "";
        const char *p = put("t", bodies[i], strlen(bodies[i]));
        ck_assert_int_eq(load(p, NULL, &tok, err), TOKEN_LOADED);
        ck_assert_str_eq(tok, GOOD);
        token_free(tok);
    }
}
END_TEST

static const struct {
    const char *body;
    const char *why;
} bad_files[] = {
    { "", "empty" },
    { "\n\n", "empty" },
    { "0123456789abcde\n", "shorter than 16 bytes" },
    { GOOD "\nsecond\n", "more than one line" },
    { "0123456789 abcdef\n", "visible ASCII" },
    { "0123456789abcdef\xc3\xa9\n", "visible ASCII" },
    { " 0123456789abcdef\n", "visible ASCII" },
};

START_TEST(test_load_refuses)
{
    char *tok = (char *)"untouched", err[256] = "";
    const char *p = put("t", bad_files[_i].body, strlen(bad_files[_i].body));
    ck_assert_int_eq(load(p, NULL, &tok, err), TOKEN_ERROR);
    ck_assert_ptr_null(tok);
    ck_assert_msg(strstr(err, bad_files[_i].why) != NULL, "\"%s\" lacks \"%s\"", err, bad_files[_i].why);
    ck_assert_msg(strstr(err, dir) != NULL, "\"%s\" does not name the file", err);
}
END_TEST

START_TEST(test_load_too_long_and_missing)
{
    char *tok = NULL, err[256] = "";
    char *big = malloc(TOKEN_MAX_BYTES + 2);
    ck_assert_ptr_nonnull(big);
    memset(big, 'a', TOKEN_MAX_BYTES + 1);
    const char *p = put("long", big, TOKEN_MAX_BYTES + 1);
    ck_assert_int_eq(load(p, NULL, &tok, err), TOKEN_ERROR);
    ck_assert_ptr_nonnull(strstr(err, "longer than 4096"));
    p = put("max", big, TOKEN_MAX_BYTES);
    ck_assert_int_eq(load(p, NULL, &tok, err), TOKEN_LOADED);
    ck_assert_uint_eq(strlen(tok), TOKEN_MAX_BYTES);
    token_free(tok);
    free(big);
    char missing[128];
    snprintf(missing, sizeof missing, "%s/none", dir);
    ck_assert_int_eq(load(missing, NULL, &tok, err), TOKEN_ERROR);
    ck_assert_ptr_nonnull(strstr(err, "cannot read"));
}
END_TEST

START_TEST(test_load_sources)
{
    char *tok = NULL, err[256] = "", from[256] = "";
    /* Nothing configured, no credentials: no token. */
    ck_assert_int_eq(load("", NULL, &tok, err), TOKEN_NONE);
    ck_assert_int_eq(load(NULL, "", &tok, err), TOKEN_NONE);
    /* A credential directory without admin_token: no token either. */
    ck_assert_int_eq(load("", dir, &tok, err), TOKEN_NONE);
    ck_assert_ptr_null(tok);
    /* With one: that is the token, and from says where it came from. */
    put(TOKEN_CREDENTIAL, GOOD "-cred\n", strlen(GOOD "-cred\n"));
    ck_assert_int_eq(token_load("", dir, &tok, from, sizeof from, err, sizeof err), TOKEN_LOADED);
    ck_assert_str_eq(tok, GOOD "-cred");
    ck_assert_ptr_nonnull(strstr(from, TOKEN_CREDENTIAL));
    token_free(tok);
    /* An empty credential (the unit's fallback when no token file exists): no token. */
    put(TOKEN_CREDENTIAL, "\n", 1);
    ck_assert_int_eq(load("", dir, &tok, err), TOKEN_NONE);
    ck_assert_ptr_null(tok);
    /* ...but an empty file the admin named is a mistake. */
    const char *empty = put("empty", "\n", 1);
    ck_assert_int_eq(load(empty, NULL, &tok, err), TOKEN_ERROR);
    put(TOKEN_CREDENTIAL, GOOD "-cred\n", strlen(GOOD "-cred\n"));
    /* The configured file wins over the credential. */
    const char *p = put("file", GOOD "-file\n", strlen(GOOD "-file\n"));
    ck_assert_int_eq(load(p, dir, &tok, err), TOKEN_LOADED);
    ck_assert_str_eq(tok, GOOD "-file");
    token_free(tok);
    token_free(NULL);
}
END_TEST

static const struct {
    const char *header;
    bool ok;
} bearer_cases[] = {
    { "Bearer " GOOD, true },
    { "bearer " GOOD, true },
    { "BEARER " GOOD, true },
    { "Bearer   " GOOD, true },
    { "Bearer " GOOD " \t", true },
    { "Bearer " GOOD "x", false },
    { "Bearer " GOOD "\x01", false },
    { "Bearer 0123456789abcdef-TOKEX", false },
    { "Bearer 0123456789abcdef-TOKE", false },
    { "Bearer x" GOOD, false },
    { "Bearer ", false },
    { "Bearer", false },
    { "Basic " GOOD, false },
    { GOOD, false },
    { "", false },
    { "Bearer\t" GOOD, false },
};

START_TEST(test_bearer)
{
    ck_assert_msg(token_check_bearer(GOOD, bearer_cases[_i].header) == bearer_cases[_i].ok,
                  "\"%s\" should be %s", bearer_cases[_i].header,
                  bearer_cases[_i].ok ? "accepted" : "refused");
}
END_TEST

START_TEST(test_bearer_null)
{
    ck_assert(!token_check_bearer(GOOD, NULL));
    ck_assert(!token_check_bearer(NULL, "Bearer " GOOD));
}
END_TEST

CHECK_SUITE("token",
    CHECK_CASE("load", .setup = setup, .teardown = teardown),
    CHECK_TEST(test_load_strips_trailing_space),
    CHECK_EACH(test_load_refuses, bad_files),
    CHECK_TEST(test_load_too_long_and_missing),
    CHECK_TEST(test_load_sources),
    CHECK_CASE("bearer"),
    CHECK_EACH(test_bearer, bearer_cases),
    CHECK_TEST(test_bearer_null),
)
