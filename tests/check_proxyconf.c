/*
 * Unit tests of the proxy configuration writer (src/daemon/proxyconf.c): what is
 * refused, how template text is escaped for nginx's PCRE and Caddy's Go
 * regexps, and how each configuration key shows in the written file.  That
 * the regexps take exactly bloomguard's URIs is tests/proxyconf.test's job;
 * that the files work, tests/nginx.test's and tests/caddy.test's.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "config.h"
#include "proxyconf.h"

/* A configuration: the defaults, listen 127.0.0.1:8080, then key=value pairs ("auth", "k", "v", ...). */
static void setup_config(struct config *c, const char *const *kv, size_t n)
{
    char err[256];
    ck_assert(config_defaults(c));
    ck_assert_msg(config_set(c, "server", "listen", "127.0.0.1:8080", err, sizeof err), "%s", err);
    for (size_t i = 0; i + 2 < n; i += 3)
        ck_assert_msg(config_set(c, kv[i], kv[i + 1], kv[i + 2], err, sizeof err), "%s: %s", kv[i + 1], err);
}

#define CONFIG(c, ...)                                                                          \
    do {                                                                                        \
        static const char *const kv_[] = { __VA_ARGS__ };                                       \
        setup_config((c), kv_, sizeof kv_ / sizeof kv_[0]);                                     \
    } while (0)

/* The file for c, which must be accepted; the caller frees it. */
static char *render_ok(const struct config *c, enum proxyconf_kind kind)
{
    char err[256] = "";
    char *s = proxyconf_render(c, kind, err, sizeof err);
    ck_assert_msg(s != NULL, "refused: %s", err);
    return s;
}

/* Whether s has a line that is exactly line. */
static bool has_line(const char *s, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = s; (p = strstr(p, line)) != NULL; p++)
        if ((p == s || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0'))
            return true;
    return false;
}

#define ASSERT_LINE(s, line) ck_assert_msg(has_line((s), (line)), "no line: %s", (line))
#define ASSERT_NO_LINE(s, line) ck_assert_msg(!has_line((s), (line)), "unexpected line: %s", (line))
#define ASSERT_HAS(s, sub) ck_assert_msg(strstr((s), (sub)) != NULL, "missing: %s", (sub))
#define ASSERT_HAS_NOT(s, sub) ck_assert_msg(strstr((s), (sub)) == NULL, "unexpected: %s", (sub))

/* One thing a written file must (or must not) hold. */
struct want {
    enum { WANT_LINE, WANT_NO_LINE, WANT_HAS, WANT_HAS_NOT } op;
    const char *text;
};
#define LINE(t) { WANT_LINE, (t) }
#define NO_LINE(t) { WANT_NO_LINE, (t) }
#define HAS(t) { WANT_HAS, (t) }
#define HAS_NOT(t) { WANT_HAS_NOT, (t) }

/*
 * Writes c's file of that kind and checks each of w[0..n) in it (n stops
 * early at a row with no text); a failure names the kind, label (the
 * table row's, or NULL) and the want.
 */
static void assert_file(const struct config *c, enum proxyconf_kind kind, const char *label,
                        const struct want *w, size_t n)
{
    const char *name = kind == PROXYCONF_NGINX ? "nginx" : "caddy";
    char *s = render_ok(c, kind);
    for (size_t i = 0; i < n && w[i].text != NULL; i++) {
        bool line = w[i].op == WANT_LINE || w[i].op == WANT_NO_LINE;
        bool want = w[i].op == WANT_LINE || w[i].op == WANT_HAS;
        bool found = line ? has_line(s, w[i].text) : strstr(s, w[i].text) != NULL;
        ck_assert_msg(found == want, "%s%s%s, want %zu: %s %s: %s", name, label ? ", " : "",
                      label ? label : "", i, want ? "no" : "unexpected", line ? "line" : "text",
                      w[i].text);
    }
    free(s);
}

/* EXPECT(&c, kind, LINE("..."), HAS_NOT("..."), ...): the file of that kind holds each. */
#define EXPECT(c, kind, ...)                                                                    \
    do {                                                                                        \
        const struct want w_[] = { __VA_ARGS__ };                                               \
        assert_file((c), (kind), NULL, w_, sizeof w_ / sizeof w_[0]);                           \
    } while (0)

START_TEST(test_kind_parse)
{
    enum proxyconf_kind k = PROXYCONF_CADDY;
    ck_assert(proxyconf_kind_parse("nginx", &k));
    ck_assert_int_eq(k, PROXYCONF_NGINX);
    ck_assert(proxyconf_kind_parse("caddy", &k));
    ck_assert_int_eq(k, PROXYCONF_CADDY);
    k = PROXYCONF_NGINX;
    ck_assert(!proxyconf_kind_parse("Caddy", &k));
    ck_assert(!proxyconf_kind_parse("", &k));
    ck_assert(!proxyconf_kind_parse("nginx ", &k));
    ck_assert_int_eq(k, PROXYCONF_NGINX);
}
END_TEST

/* A refused configuration: false, a reason naming the key, nothing written. */
static void assert_refused(const struct config *c, enum proxyconf_kind kind, const char *why)
{
    char err[256] = "", *buf = NULL;
    size_t len = 0;
    ck_assert(!proxyconf_check(c, kind, err, sizeof err));
    ck_assert_msg(strstr(err, why) != NULL, "\"%s\" lacks \"%s\"", err, why);
    FILE *f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    err[0] = '\0';
    ck_assert(!proxyconf_write(f, c, kind, err, sizeof err));
    ck_assert_msg(strstr(err, why) != NULL, "\"%s\" lacks \"%s\"", err, why);
    fclose(f);
    ck_assert_uint_eq(len, 0);
    free(buf);
    ck_assert_ptr_null(proxyconf_render(c, kind, err, sizeof err));
}

START_TEST(test_refusals)
{
    enum proxyconf_kind kind = _i ? PROXYCONF_CADDY : PROXYCONF_NGINX;
    struct config c;

    CONFIG(&c, "log", "level", "info");
    assert_refused(&c, kind, "uri_template: none configured");
    config_free(&c);

    CONFIG(&c, "auth", "uri_template", "/user/get/{id}", "auth", "uri_source", "path");
    assert_refused(&c, kind, kind == PROXYCONF_NGINX ? "set uri_source = x-original-uri"
                                                     : "set uri_source = x-forwarded-uri");
    config_free(&c);

    CONFIG(&c, "auth", "uri_template", "/user/get/{id}", "server", "listen", "127.0.0.1:0");
    assert_refused(&c, kind, "port 0");
    config_free(&c);

    /* Every other uri_source is served; the header says what to pin. */
    const char *sources[] = { "auto", "x-original-uri", "x-forwarded-uri" };
    for (size_t i = 0; i < 3; i++) {
        char err[256];
        CONFIG(&c, "auth", "uri_template", "/user/get/{id}");
        ck_assert(config_set(&c, "auth", "uri_source", sources[i], err, sizeof err));
        ck_assert_msg(proxyconf_check(&c, kind, err, sizeof err), "%s: %s", sources[i], err);
        config_free(&c);
    }
}
END_TEST

START_TEST(test_caddy_needs_utf8)
{
    struct config c;
    char err[256];
    CONFIG(&c, "auth", "uri_template", "/caf\xE9/{id}");
    ck_assert(proxyconf_check(&c, PROXYCONF_NGINX, err, sizeof err));
    assert_refused(&c, PROXYCONF_CADDY, "not UTF-8");
    config_free(&c);
}
END_TEST

/* The key triple of one [auth] uri_template. */
#define TMPL(t) "auth", "uri_template", (t)

/*
 * A configuration (the defaults, listen 127.0.0.1:8080, then key triples)
 * and what its nginx and its Caddy file hold and do not; what names the row
 * in a failure.
 */
static const struct file_case {
    const char *what;
    const char *kv[9];
    struct want nginx[6], caddy[4];     /* each up to its first row without text */
} file_cases[] = {
    /* One map line per template, the same shapes for any template. */
    { "map lines", { TMPL("/user/get/{id}"), TMPL("/api/v1/orders/{id}/items"), TMPL("/files/{id}.json") },
      { LINE("    \"~^/user/get/(?:(?<bloomguard_s>(?:[^\\x2f\\x3f\\x23%\\s]|%(?!2[fF]))+)(?:\\?\\S*)?\\x20"
             "/user/get/(?<bloomguard_d>[^/]+)$|(?<bloomguard_r>[^\\x2f\\x3f\\x23\\s]+)(?:[\\x3f\\x23]|\\x20))\""),
        LINE("    \"~^/api/v1/orders/(?:(?<bloomguard_s>(?:[^\\x2f\\x3f\\x23%\\s]|%(?!2[fF]))+)/items(?:\\?\\S*)?\\x20"
             "/api/v1/orders/(?<bloomguard_d>[^/]+)/items$|(?<bloomguard_r>[^\\x2f\\x3f\\x23\\s]+)/items(?:[\\x3f\\x23]|\\x20))\""),
        LINE("    \"~^/files/(?:(?<bloomguard_s>(?:[^\\x2f\\x3f\\x23%\\s]|%(?!2[fF]))+)\\.json(?:\\?\\S*)?\\x20"
             "/files/(?<bloomguard_d>[^/]+)\\.json$|(?<bloomguard_r>[^\\x2f\\x3f\\x23\\s]+)\\.json(?:[\\x3f\\x23]|\\x20))\""),
        LINE("        \"$bloomguard_d/$bloomguard_s$bloomguard_r\";") },
      { LINE("\t\t\t~^/user/get/(?:(?:[^\\x2f\\x3f\\x23%\\s]|%[^2\\x2f\\x3f\\x23\\s]|%2[^fF\\x2f\\x3f\\x23\\s])+(?:\\?\\S*)?\\x20"
             "/user/get/([^/\"\\\\\\x00-\\x1f\\x7f\\x{FFFD}]+)$"
             "|([^\\x00-\\x20\\x22\\x5c\\x7f-\\x{10FFFF}\\x2f\\x3f\\x23]+)(?:[\\x3f\\x23]|\\x20)"
             "|[^\\x2f\\x3f\\x23\\s]+(?:[\\x3f\\x23]|\\x20)) $1$2"),
        LINE("\t\t\t~^/api/v1/orders/(?:(?:[^\\x2f\\x3f\\x23%\\s]|%[^2\\x2f\\x3f\\x23\\s]|%2[^fF\\x2f\\x3f\\x23\\s])+/items(?:\\?\\S*)?\\x20"
             "/api/v1/orders/([^/\"\\\\\\x00-\\x1f\\x7f\\x{FFFD}]+)/items$"
             "|([^\\x00-\\x20\\x22\\x5c\\x7f-\\x{10FFFF}\\x2f\\x3f\\x23]+)/items(?:[\\x3f\\x23]|\\x20)"
             "|[^\\x2f\\x3f\\x23\\s]+/items(?:[\\x3f\\x23]|\\x20)) $1$2"),
        LINE("\t\t\t\trespond `{\"id\":\"{bloomguard_id}\",\"exists\":false}` 404") } },
    /*
     * Metacharacters and what each file format does to backslashes and
     * quotes: nginx keeps "\." but turns "\\" and "\"" into other things, so
     * those go out as \xHH; Caddy's lexer keeps every backslash pair in a
     * bare token.  The template list of the header shows them as they are.
     */
    { "escaping", { TMPL("/v1.0/a+b/(x)|[y]^*/{id}$"), TMPL("/q\\b\"/{id}'z"), TMPL("/caf\xC3\xA9/{id}") },
      { HAS("\"~^/v1\\.0/a\\+b/\\(x\\)\\|\\[y\\]\\^\\*/(?:"),
        HAS("(?<bloomguard_r>[^\\x2f\\x3f\\x23\\s]+)\\$(?:[\\x3f\\x23]|\\x20))\""),
        HAS("\"~^/q\\x5cb\\x22/(?:"),
        HAS("(?<bloomguard_r>[^\\x2f\\x3f\\x23\\s]+)'z(?:[\\x3f\\x23]|\\x20))\""),
        HAS("\"~^/caf\\xc3\\xa9/(?:"),
        HAS("#     /q\\b\"/{id}'z  ") },
      { HAS("\t~^/v1\\.0/a\\+b/\\(x\\)\\|\\[y\\]\\^\\*/(?:"),
        HAS("|[^\\x2f\\x3f\\x23\\s]+\\$(?:[\\x3f\\x23]|\\x20)) $1$2\n"),
        HAS("\t~^/q\\\\b\\x22/(?:"),
        HAS("\t~^/caf\\x{e9}/(?:") } },
    /*
     * A '%' in the template's text: the decoded path holds the byte it
     * stands for, so the map compares only the raw URI and gives the raw ID
     * (and nginx's id map has no line for a decoded one).
     */
    { "percent template", { TMPL("/a%20b/{id}") },
      { LINE("    \"~^/a%20b/(?:(?<bloomguard_r>[^\\x2f\\x3f\\x23\\s]+)(?:[\\x3f\\x23]|\\x20))\""),
        LINE("        \"/$bloomguard_r\";"),
        HAS_NOT("(?x)") },
      { LINE("\t\t\t~^/a%20b/(?:([^\\x00-\\x20\\x22\\x5c\\x7f-\\x{10FFFF}\\x2f\\x3f\\x23]+)(?:[\\x3f\\x23]|\\x20)"
             "|[^\\x2f\\x3f\\x23\\s]+(?:[\\x3f\\x23]|\\x20)) $1") } },
    /* fail_open: the default yes, then no. */
    { "fail open", { TMPL("/user/get/{id}") },
      { LINE("        proxy_pass http://service;"),
        LINE("        #     return 503 '{\"error\":\"guard_unavailable\",\"message\":\"bloomguard is not answering\"}';"),
        HAS("FAIL OPEN") },
      { LINE("\t\trespond 204") } },
    { "fail closed", { TMPL("/user/get/{id}"), "auth", "fail_open", "no" },
      { LINE("        return 503 '{\"error\":\"guard_unavailable\",\"message\":\"bloomguard is not answering\"}';"),
        LINE("        #     proxy_pass http://service;"),
        HAS("FAIL CLOSED") },
      { NO_LINE("\t\trespond 204"),
        LINE("\t\trespond `{\"error\":\"guard_unavailable\",\"message\":\"bloomguard is not answering\"}` 503") } },
    /* uri_source: the header each proxy sets; auto is each proxy's own, with the advice to pin it. */
    { "uri_source x-forwarded-uri", { TMPL("/user/get/{id}"), "auth", "uri_source", "x-forwarded-uri" },
      { LINE("        proxy_set_header X-Forwarded-Uri $request_uri;"),
        LINE("#     uri_source = x-forwarded-uri"),
        HAS_NOT("X-Original-URI $request_uri") },
      { LINE("\t\t\theader_up X-Forwarded-Uri {vars.bloomguard_uri}") } },
    { "uri_source x-original-uri", { TMPL("/user/get/{id}"), "auth", "uri_source", "x-original-uri" },
      { { 0 } },      /* nginx's own: the auto row */
      { LINE("\t\t\theader_up X-Original-URI {vars.bloomguard_uri}"),
        LINE("#     uri_source = x-original-uri") } },
    { "uri_source auto", { TMPL("/user/get/{id}") },
      { LINE("        proxy_set_header X-Original-URI $request_uri;"),
        LINE("#     uri_source = x-original-uri"),
        HAS("has uri_source = auto") },
      { LINE("#     uri_source = x-forwarded-uri") } },
};

START_TEST(test_file)
{
    const struct file_case *fc = &file_cases[_i];
    size_t n = 0;
    while (n < sizeof fc->kv / sizeof fc->kv[0] && fc->kv[n] != NULL)
        n++;
    struct config c;
    setup_config(&c, fc->kv, n);
    assert_file(&c, PROXYCONF_NGINX, fc->what, fc->nginx, sizeof fc->nginx / sizeof fc->nginx[0]);
    assert_file(&c, PROXYCONF_CADDY, fc->what, fc->caddy, sizeof fc->caddy / sizeof fc->caddy[0]);
    config_free(&c);
}
END_TEST

/* The map lines in the configured order: bloomguard's first match decides. */
START_TEST(test_map_order)
{
    struct config c;
    CONFIG(&c, TMPL("/user/get/{id}"), TMPL("/api/v1/orders/{id}/items"), TMPL("/files/{id}.json"));
    char *s = render_ok(&c, PROXYCONF_NGINX);
    ck_assert_ptr_nonnull(strstr(s, "\"~^/files/"));
    ck_assert(strstr(s, "\"~^/user/get/") < strstr(s, "\"~^/api/v1/orders/"));
    ck_assert(strstr(s, "\"~^/api/v1/orders/") < strstr(s, "\"~^/files/"));
    free(s);
    config_free(&c);
}
END_TEST

START_TEST(test_addresses)
{
    static const struct { const char *listen, *dial; } cases[] = {
        { "127.0.0.1:8080", "127.0.0.1:8080" },
        { "0.0.0.0:9000", "127.0.0.1:9000" },
        { "[::]:9000", "[::1]:9000" },
        { "[::1]:7", "[::1]:7" },
        { "10.1.2.3:80", "10.1.2.3:80" },
        { "localhost:8080", "localhost:8080" },
    };
    struct config c;
    char err[256], line[64];
    CONFIG(&c, "auth", "uri_template", "/user/get/{id}");
    ck_assert(config_set(&c, "server", "listen", cases[_i].listen, err, sizeof err));
    char *s = render_ok(&c, PROXYCONF_NGINX);
    snprintf(line, sizeof line, "    server %s;", cases[_i].dial);
    ASSERT_LINE(s, line);
    ASSERT_LINE(s, "    server " PROXYCONF_SERVICE ";");
    ASSERT_LINE(s, "    listen " PROXYCONF_LISTEN ";");
    ck_assert((strstr(s, "a wildcard address") != NULL) == (strcmp(cases[_i].listen, cases[_i].dial) != 0));
    free(s);
    s = render_ok(&c, PROXYCONF_CADDY);
    snprintf(line, sizeof line, "\t\treverse_proxy %s {", cases[_i].dial);
    ASSERT_LINE(s, line);
    ASSERT_LINE(s, "\t\tforward_auth " PROXYCONF_RELAY " {");
    free(s);
    config_free(&c);
}
END_TEST

/*
 * A unix socket: accepted though its port is 0, dialled in each proxy's
 * spelling; a TCP configuration shows the socket only as nginx's
 * commented-out alternative.
 */
START_TEST(test_unix_socket)
{
    struct config c;
    char err[256];
    CONFIG(&c, "auth", "uri_template", "/user/get/{id}");
    EXPECT(&c, PROXYCONF_NGINX,
           LINE("    #server unix:" PROXYCONF_UNIX ";"));
    ck_assert(config_set(&c, "server", "listen", "unix:/run/bg/x.sock", err, sizeof err));
    EXPECT(&c, PROXYCONF_NGINX,
           LINE("    server unix:/run/bg/x.sock;"),
           HAS_NOT("#server unix:"),
           HAS("listen_group"),
           HAS_NOT("a wildcard address"));
    EXPECT(&c, PROXYCONF_CADDY,
           LINE("\t\treverse_proxy unix//run/bg/x.sock {"));
    config_free(&c);
}
END_TEST

START_TEST(test_keepalive)
{
    static const struct { const char *timeout, *nginx, *caddy; } cases[] = {
        { "30", "    keepalive_timeout 20s;      # shorter than bloomguard's connection_timeout (30 s)",
          "\t\t\t\tkeepalive 20s" },
        { "5", "    keepalive_timeout 4s;       # shorter than bloomguard's connection_timeout (5 s)",
          "\t\t\t\tkeepalive 4s" },
        { "1", "    keepalive_timeout 500ms;    # shorter than bloomguard's connection_timeout (1 s)",
          "\t\t\t\tkeepalive 500ms" },
        { "0", "    keepalive_timeout 20s;      # bloomguard's connection_timeout is 0: it never closes them",
          "\t\t\t\tkeepalive 20s" },
    };
    struct config c;
    char err[256];
    CONFIG(&c, "auth", "uri_template", "/user/get/{id}");
    ck_assert(config_set(&c, "server", "connection_timeout", cases[_i].timeout, err, sizeof err));
    EXPECT(&c, PROXYCONF_NGINX,
           LINE(cases[_i].nginx));
    EXPECT(&c, PROXYCONF_CADDY,
           LINE(cases[_i].caddy));
    config_free(&c);
}
END_TEST

START_TEST(test_header)
{
    struct config c;
    char err[256];
    ck_assert(config_defaults(&c));
    ck_assert(config_load_string(&c, "t.conf",
                                 "[server]\nlisten = 127.0.0.1:8080\n"
                                 "[filter users]\ntable = users\ncolumn = id\n"
                                 "[filter orders]\ntable = orders\ncolumn = id\n"
                                 "[auth]\nuri_template = /orders/{id}/items orders\n"
                                 "uri_template = /user/get/{id}\ndeny_status = 410\n",
                                 err, sizeof err));
    char *s = render_ok(&c, PROXYCONF_NGINX);
    /* Every template with its filter, and the example from the first one. */
    ASSERT_LINE(s, "#     /orders/{id}/items  filter orders");
    ASSERT_LINE(s, "#     /user/get/{id}      filter users");
    ASSERT_LINE(s, "# What happens to GET /orders/42/items:");
    /* deny_status 410: nginx logs each miss as an error; the header says so. */
    ASSERT_HAS(s, "it logs each 410 as an");
    /* Nothing that changes between runs. */
    char *again = render_ok(&c, PROXYCONF_NGINX);
    ck_assert_str_eq(s, again);
    free(again);
    free(s);
    EXPECT(&c, PROXYCONF_CADDY,
           LINE("# What happens to GET /orders/42/items:"),
           LINE("#     /user/get/{id}      filter users"));
    config_free(&c);
}
END_TEST

CHECK_SUITE("proxyconf",
    CHECK_CASE("core"),
    CHECK_TEST(test_kind_parse),
    CHECK_LOOP(test_refusals, 2),
    CHECK_TEST(test_caddy_needs_utf8),
    CHECK_EACH(test_file, file_cases),
    CHECK_TEST(test_map_order),
    CHECK_LOOP(test_addresses, 6),
    CHECK_TEST(test_unix_socket),
    CHECK_LOOP(test_keepalive, 4),
    CHECK_TEST(test_header),
)
