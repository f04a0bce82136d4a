/*
 * Unit tests of URI template validation and matching: which templates are
 * accepted, and for each template shape the URIs that match (with the raw ID
 * they yield) and the near misses that must not.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "uritmpl.h"

/* ---- uritmpl_valid ---- */

static const char *const good_templates[] = {
    "/user/get/{id}",
    "/{id}",
    "/api/v1/orders/{id}/items",
    "/files/{id}.json",
    "/u{id}",
    "/a/b{id}c/d",
    "/{id}/",
    "//{id}",
    "/a%20b/{id}",
    "/caf\xC3\xA9/{id}",
    "/a;b=c/{id}",
};

START_TEST(test_valid_good)
{
    const char *why = "unchanged";
    ck_assert_msg(uritmpl_valid(good_templates[_i], &why), "%s", good_templates[_i]);
    ck_assert_ptr_null(why);
    ck_assert(uritmpl_valid(good_templates[_i], NULL));
}
END_TEST

static const struct {
    const char *tmpl;
    const char *why;
} bad_templates[] = {
    { NULL, "must start with '/'" },
    { "", "must start with '/'" },
    { "user/{id}", "must start with '/'" },
    { "{id}", "must start with '/'" },
    { " /{id}", "must start with '/'" },
    { "/", "must contain {id} exactly once" },
    { "/user", "must contain {id} exactly once" },
    { "/{id}/{id}", "must contain {id} exactly once" },
    { "/{id}{id}", "must contain {id} exactly once" },
    { "/id", "must contain {id} exactly once" },
    { "/{ID}", "{id} is the only placeholder allowed" },
    { "/{name}/{id}", "{id} is the only placeholder allowed" },
    { "/{id", "{id} is the only placeholder allowed" },
    { "/id}", "{id} is the only placeholder allowed" },
    { "/{id}}", "{id} is the only placeholder allowed" },
    { "/{{id}", "{id} is the only placeholder allowed" },
    { "/{}/{id}", "{id} is the only placeholder allowed" },
    { "/{id}?x=1", "must not contain '?' or '#'" },
    { "/{id}?", "must not contain '?' or '#'" },
    { "/{id}#top", "must not contain '?' or '#'" },
    { "/a b/{id}", "must not contain whitespace or control characters" },
    { "/a\t/{id}", "must not contain whitespace or control characters" },
    { "/{id}\n", "must not contain whitespace or control characters" },
    { "/{id}\r", "must not contain whitespace or control characters" },
    { "/a\x01/{id}", "must not contain whitespace or control characters" },
    { "/a\x7f/{id}", "must not contain whitespace or control characters" },
};

START_TEST(test_valid_bad)
{
    const char *why = NULL;
    ck_assert_msg(!uritmpl_valid(bad_templates[_i].tmpl, &why), "case %d", _i);
    ck_assert_ptr_nonnull(why);
    ck_assert_str_eq(why, bad_templates[_i].why);
    ck_assert(!uritmpl_valid(bad_templates[_i].tmpl, NULL));
}
END_TEST

/* ---- uritmpl_match ---- */

struct match_case {
    const char *tmpl;
    const char *uri;
    const char *id;     /* expected raw ID, NULL: no match */
};

static const struct match_case match_cases[] = {
    { "/user/get/{id}", "/user/get/42", "42" },
    { "/user/get/{id}", "/user/get/42/", NULL },        /* trailing slash */
    { "/user/get/{id}", "/user/get/", NULL },           /* empty id */
    { "/user/get/{id}", "/user/get", NULL },
    { "/user/get/{id}", "/user/get/42/extra", NULL },   /* extra segment */
    { "/user/get/{id}", "/user/get//42", NULL },
    { "/user/get/{id}", "/user/get/a/b", NULL },
    { "/user/get/{id}", "/prefix/user/get/42", NULL },
    { "/user/get/{id}", "user/get/42", NULL },
    { "/user/get/{id}", "", NULL },
    { "/user/get/{id}", "/", NULL },
    { "/user/get/{id}", "/User/get/42", NULL },         /* case-sensitive */
    { "/user/get/{id}", "/user/GET/42", NULL },
    { "/user/get/{id}", "/user%2Fget/42", NULL },       /* literals not decoded */
    { "/user/get/{id}", "/user/get%2F42", NULL },
    { "/user/get/{id}", "/user/ge%74/42", NULL },
    { "/user/get/{id}", "/user/get/42?x=1", "42" },     /* query ignored */
    { "/user/get/{id}", "/user/get/42?", "42" },
    { "/user/get/{id}", "/user/get/42?x=/y/z", "42" },
    { "/user/get/{id}", "/user/get/42?next=/user/get/7", "42" },
    { "/user/get/{id}", "/user/get/42#frag", "42" },    /* fragment ignored */
    { "/user/get/{id}", "/user/get/42#a?b", "42" },
    { "/user/get/{id}", "/user/get/42?a#b", "42" },
    { "/user/get/{id}", "/user/get/?x=1", NULL },
    { "/user/get/{id}", "/user/get/#x", NULL },
    { "/user/get/{id}", "/user/get/42/?x=1", NULL },
    { "/user/get/{id}", "/user/get/a%2Fb", "a%2Fb" },   /* kept raw */
    { "/user/get/{id}", "/user/get/%2F", "%2F" },
    { "/user/get/{id}", "/user/get/%00", "%00" },
    { "/user/get/{id}", "/user/get/%zz", "%zz" },       /* decoding is the caller's */
    { "/user/get/{id}", "/user/get/%20", "%20" },
    { "/user/get/{id}", "/user/get/ spaced ", " spaced " },
    { "/user/get/{id}", "/user/get/a+b", "a+b" },
    { "/user/get/{id}", "/user/get/%C3%A9", "%C3%A9" },
    { "/user/get/{id}", "/user/get/caf\xC3\xA9", "caf\xC3\xA9" },
    { "/user/get/{id}", "/user/get/a.b;c=d", "a.b;c=d" },
    { "/user/get/{id}", "/user/get/{id}", "{id}" },
    /* inner segment */
    { "/api/v1/orders/{id}/items", "/api/v1/orders/7/items", "7" },
    { "/api/v1/orders/{id}/items", "/api/v1/orders/7/items?page=2", "7" },
    { "/api/v1/orders/{id}/items", "/api/v1/orders//items", NULL },
    { "/api/v1/orders/{id}/items", "/api/v1/orders/7/items/", NULL },
    { "/api/v1/orders/{id}/items", "/api/v1/orders/7/8/items", NULL },
    { "/api/v1/orders/{id}/items", "/api/v1/orders/7/itemsX", NULL },
    { "/api/v1/orders/{id}/items", "/api/v1/orders/7/item", NULL },
    { "/api/v1/orders/{id}/items", "/api/v1/orders/7", NULL },
    { "/api/v1/orders/{id}/items", "/api/v1/orders/items", NULL },
    { "/api/v1/orders/{id}/items", "/api/v1/orders/a%2Fb/items", "a%2Fb" },
    /* suffix within the segment */
    { "/files/{id}.json", "/files/a.json", "a" },
    { "/files/{id}.json", "/files/a.b.json", "a.b" },
    { "/files/{id}.json", "/files/x.json.json", "x.json" },
    { "/files/{id}.json", "/files/a.json?v=1", "a" },
    { "/files/{id}.json", "/files/.json", NULL },
    { "/files/{id}.json", "/files/json", NULL },
    { "/files/{id}.json", "/files/a/b.json", NULL },
    { "/files/{id}.json", "/files/a.JSON", NULL },
    { "/files/{id}.json", "/files/a.jsonx", NULL },
    { "/files/{id}.json", "/files/a.json/", NULL },
    { "/files/{id}.json", "/files/a.js?on", NULL },
    { "/files/{id}.json", "/files/a", NULL },
    /* prefix within the segment */
    { "/u{id}", "/uabc", "abc" },
    { "/u{id}", "/uu", "u" },
    { "/u{id}", "/u", NULL },
    { "/u{id}", "/xabc", NULL },
    { "/u{id}", "/uabc/", NULL },
    { "/a/b{id}c/d", "/a/bXc/d", "X" },
    { "/a/b{id}c/d", "/a/bcc/d", "c" },
    { "/a/b{id}c/d", "/a/bc/d", NULL },
    { "/a{id}a", "/aa", NULL },
    { "/a{id}a", "/aaa", "a" },
    /* whole path */
    { "/{id}", "/x", "x" },
    { "/{id}", "/", NULL },
    { "/{id}", "/x/", NULL },
    { "/{id}", "//", NULL },
    { "/{id}", "/x?y", "x" },
    { "/{id}", "/?y", NULL },
    { "/{id}/", "/x/", "x" },
    { "/{id}/", "/x", NULL },
};

START_TEST(test_match_table)
{
    const struct match_case *c = &match_cases[_i];
    size_t len = strlen(c->uri);
    /* Exact-size, unterminated copy: any read past uri_len shows in valgrind. */
    char *uri = malloc(len ? len : 1);
    const char *id = "sentinel";
    size_t idlen = 999;

    ck_assert_ptr_nonnull(uri);
    memcpy(uri, c->uri, len);
    ck_assert(uritmpl_valid(c->tmpl, NULL));
    bool m = uritmpl_match(c->tmpl, uri, len, &id, &idlen);
    ck_assert_msg(m == (c->id != NULL), "case %d: \"%s\" vs \"%s\": got %d", _i,
                  c->tmpl, c->uri, m);
    if (m) {
        ck_assert_uint_eq(idlen, strlen(c->id));
        ck_assert_mem_eq(id, c->id, idlen);
        ck_assert(id > uri && id + idlen <= uri + len);
    } else {
        ck_assert_str_eq(id, "sentinel");
        ck_assert_uint_eq(idlen, 999);
    }
    free(uri);
}
END_TEST

START_TEST(test_match_len)
{
    const char *uri = "/user/get/42/extra";
    const char *id;
    size_t idlen;

    /* uri_len, not the NUL, ends the URI. */
    ck_assert(uritmpl_match("/user/get/{id}", uri, 12, &id, &idlen));
    ck_assert_uint_eq(idlen, 2);
    ck_assert(id == uri + 10);
    ck_assert(uritmpl_match("/user/get/{id}", uri, 11, &id, &idlen));
    ck_assert_uint_eq(idlen, 1);
    ck_assert(!uritmpl_match("/user/get/{id}", uri, 10, &id, &idlen));
    ck_assert(!uritmpl_match("/user/get/{id}", uri, 0, &id, &idlen));
    ck_assert(!uritmpl_match("/user/get/{id}", NULL, 0, &id, &idlen));

    /* A NUL byte inside uri_len is just a byte. */
    const char nul[] = "/user/get/4\0" "2";
    ck_assert(uritmpl_match("/user/get/{id}", nul, sizeof nul - 1, &id, &idlen));
    ck_assert_uint_eq(idlen, 3);
    ck_assert_mem_eq(id, "4\0" "2", 3);

    /* A template without {id} never matches (invalid, but must be safe). */
    ck_assert(!uritmpl_match("/user/get/", "/user/get/", 10, &id, &idlen));

    /* Long ids are not truncated here; length limits are id_decode's job. */
    static char big[10 + 5000];
    memcpy(big, "/user/get/", 10);
    memset(big + 10, 'x', 5000);
    ck_assert(uritmpl_match("/user/get/{id}", big, sizeof big, &id, &idlen));
    ck_assert_uint_eq(idlen, 5000);
}
END_TEST

START_TEST(test_first_template_wins)
{
    /* The caller tries templates in order; a URI can match more than one. */
    static const char *const tmpls[] = { "/files/{id}.json", "/files/{id}" };
    const char *uri = "/files/a.json", *id;
    size_t idlen, i;

    for (i = 0; i < 2; i++)
        if (uritmpl_match(tmpls[i], uri, strlen(uri), &id, &idlen))
            break;
    ck_assert_uint_eq(i, 0);
    ck_assert_mem_eq(id, "a", idlen);
    ck_assert(uritmpl_match(tmpls[1], uri, strlen(uri), &id, &idlen));
    ck_assert_uint_eq(idlen, 6);
    ck_assert_mem_eq(id, "a.json", 6);
}
END_TEST

CHECK_SUITE("uritmpl",
    CHECK_CASE("valid"),
    CHECK_EACH(test_valid_good, good_templates),
    CHECK_EACH(test_valid_bad, bad_templates),

    CHECK_CASE("match"),
    CHECK_EACH(test_match_table, match_cases),
    CHECK_TEST(test_match_len),
    CHECK_TEST(test_first_template_wins),
)
