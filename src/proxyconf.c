/*
 * The nginx snippet and the Caddyfile bloomguard's configuration implies.
 * The hard part is the regexps: each one must take exactly the URIs and the
 * ID uritmpl_match takes, for any template uritmpl_valid accepts, so that
 * the 404 body a proxy writes names the ID bloomguard said no to.
 */
#include "proxyconf.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "idcodec.h"
#include "uritmpl.h"

/* The ID an example in the header shows. */
#define EXAMPLE_ID "42"

static void errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void errf(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    if (errlen == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

bool proxyconf_kind_parse(const char *name, enum proxyconf_kind *kind)
{
    if (strcmp(name, "nginx") == 0)
        *kind = PROXYCONF_NGINX;
    else if (strcmp(name, "caddy") == 0)
        *kind = PROXYCONF_CADDY;
    else
        return false;
    return true;
}

/* ------------------------------------------------------------ templates -- */

/* A template split around "{id}": the literal text before and after it. */
struct tmpl_parts {
    const char *pre, *suf;
    size_t npre, nsuf;
};

static struct tmpl_parts tmpl_split(const char *tmpl)
{
    const char *ph = strstr(tmpl, URITMPL_PLACEHOLDER);
    struct tmpl_parts p = { tmpl, "", 0, 0 };
    if (ph != NULL) {
        p.npre = (size_t)(ph - tmpl);
        p.suf = ph + strlen(URITMPL_PLACEHOLDER);
        p.nsuf = strlen(p.suf);
    }
    return p;
}

/*
 * Whether the proxy's decoded path can be compared with the template's
 * literals as they are: not when they hold a '%' (the raw URI must carry it
 * encoded, the decoded path holds the byte it stands for).  Such templates
 * get only the raw ID in the 404 body.
 */
static bool tmpl_decodable(const char *tmpl)
{
    return strchr(tmpl, '%') == NULL;
}

/* The filter a template asks, by name: its own or the default one's. */
static const char *tmpl_filter(const struct config *c, unsigned t)
{
    if (c->uri_template_names[t] != NULL)
        return c->uri_template_names[t];
    unsigned f = c->uri_template_filter[t];
    return f < c->n_filters && c->filters[f].name != NULL ? c->filters[f].name : "default";
}

/* ---------------------------------------------------- regexp literals -- */

static bool is_plain(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')
           || (ch != '\0' && strchr("/-_~%,;:=&@!'<>", ch) != NULL);
}

/*
 * Literal template text as a PCRE pattern inside an nginx double-quoted
 * string, matching the same bytes (nginx runs PCRE on bytes).  nginx's
 * parser turns \" \' \\ \t \r \n into other characters and keeps every
 * other backslash pair, so '\\' and '"' (and anything unusual) go out as
 * \xHH, and the metacharacters as \c.
 */
static void nginx_literal(FILE *f, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (is_plain(ch))
            fputc(ch, f);
        else if (ch != '\\' && ch != '\0' && strchr(".^$|()[]*+?{}", ch) != NULL)
            fprintf(f, "\\%c", ch);
        else
            fprintf(f, "\\x%02x", ch);
    }
}

/*
 * Literal template text as a Go regexp inside an unquoted Caddyfile token.
 * Go matches runes: ASCII goes out as itself, \c or \xHH, anything else as
 * the code point \x{H} (the text is well-formed UTF-8: proxyconf_check).
 * Caddy's lexer keeps a backslash and what follows it in an unquoted token,
 * except before '<' (never escaped here) and whitespace (never present).
 */
static void caddy_literal(FILE *f, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (is_plain(ch)) {
            fputc(ch, f);
        } else if (ch != '\0' && strchr(".^$|()[]*+?{}\\", ch) != NULL) {
            fprintf(f, "\\%c", ch);
        } else if (ch < 0x80) {
            fprintf(f, "\\x%02x", ch);
        } else {
            /* Well-formed UTF-8: the lead byte says how many follow. */
            unsigned len = ch >= 0xF0 ? 4 : ch >= 0xE0 ? 3 : 2;
            unsigned long cp = ch & (0x7F >> len);
            for (unsigned k = 1; k < len && i + 1 < n; k++)
                cp = (cp << 6) | ((unsigned char)s[++i] & 0x3F);
            fprintf(f, "\\x{%lx}", cp);
        }
    }
}

/* ------------------------------------------------------------ addresses -- */

/*
 * bloomguard's address as the proxy dials it: [server] listen, with a
 * wildcard host replaced by the loopback address of its family (the proxy
 * cannot connect to 0.0.0.0) and an IPv6 address in brackets.  Returns
 * whether the host was a wildcard.
 */
static bool bloomguard_addr(const struct config *c, char *buf, size_t len)
{
    const char *host = c->listen_host;
    unsigned char a[16];
    static const unsigned char any[16];
    bool v6 = strchr(host, ':') != NULL;
    bool wildcard = inet_pton(v6 ? AF_INET6 : AF_INET, host, a) == 1
                    && memcmp(a, any, v6 ? 16 : 4) == 0;
    if (wildcard)
        host = v6 ? "::1" : "127.0.0.1";
    snprintf(buf, len, "%s%s%s:%u", v6 ? "[" : "", host, v6 ? "]" : "", c->listen_port);
    return wildcard;
}

/*
 * The proxy's idle keep-alive to bloomguard: shorter than bloomguard's own
 * connection_timeout, so that bloomguard never closes a connection the
 * proxy is about to reuse.
 */
static void keepalive_time(const struct config *c, char *buf, size_t len)
{
    unsigned t = c->connection_timeout;
    if (t == 0 || t > 20)
        snprintf(buf, len, "20s");
    else if (t > 1)
        snprintf(buf, len, "%us", t - 1);
    else
        snprintf(buf, len, "500ms");
}

static void keepalive_why(const struct config *c, char *buf, size_t len)
{
    if (c->connection_timeout == 0)
        snprintf(buf, len, "bloomguard's connection_timeout is 0: it never closes them");
    else
        snprintf(buf, len, "shorter than bloomguard's connection_timeout (%u s)", c->connection_timeout);
}

/* --------------------------------------------------------------- checks -- */

bool proxyconf_check(const struct config *c, enum proxyconf_kind kind, char *err, size_t errlen)
{
    const char *proxy = kind == PROXYCONF_NGINX ? "nginx" : "Caddy";
    const char *want = kind == PROXYCONF_NGINX ? "x-original-uri" : "x-forwarded-uri";

    if (c->n_uri_templates == 0) {
        errf(err, errlen, "[auth] uri_template: none configured, so the proxy would have no path "
             "to guard; add one per guarded path (e.g. uri_template = /user/get/{id})");
        return false;
    }
    if (c->uri_source == URI_SOURCE_PATH) {
        errf(err, errlen, "[auth] uri_source = path: %s sends the URI to /auth in a header, never "
             "in the path; set uri_source = %s", proxy, want);
        return false;
    }
    if (c->listen_port == 0) {
        errf(err, errlen, "[server] listen: port 0 picks a free port at start, and %s needs "
             "bloomguard's real port; set it", proxy);
        return false;
    }
    for (unsigned t = 0; t < c->n_uri_templates; t++) {
        const char *why = NULL;
        if (!uritmpl_valid(c->uri_templates[t], &why)) {
            errf(err, errlen, "[auth] uri_template %s: %s", c->uri_templates[t], why);
            return false;
        }
        if (kind == PROXYCONF_CADDY && !id_utf8_valid(c->uri_templates[t], strlen(c->uri_templates[t]))) {
            errf(err, errlen, "[auth] uri_template %s: not UTF-8, which Caddy's regexps cannot "
                 "match byte for byte", c->uri_templates[t]);
            return false;
        }
    }
    return true;
}

/* ----------------------------------------------------------- the header -- */

/* The example request of the header: the first template with EXAMPLE_ID in it. */
static void example_path(FILE *f, const struct config *c)
{
    struct tmpl_parts p = tmpl_split(c->uri_templates[0]);
    fprintf(f, "%.*s%s%.*s", (int)p.npre, p.pre, EXAMPLE_ID, (int)p.nsuf, p.suf);
}

/* "#     TEMPLATE   FILTER" lines, aligned. */
static void template_list(FILE *f, const struct config *c)
{
    size_t w = 0;
    for (unsigned t = 0; t < c->n_uri_templates; t++)
        if (strlen(c->uri_templates[t]) > w)
            w = strlen(c->uri_templates[t]);
    for (unsigned t = 0; t < c->n_uri_templates; t++)
        fprintf(f, "#     %-*s  filter %s\n", (int)w, c->uri_templates[t], tmpl_filter(c, t));
}

/* What the header says about [auth] uri_source: the value to pin, and why. */
static void uri_source_text(FILE *f, const struct config *c, const char *proxy, const char *value)
{
    if (c->uri_source == URI_SOURCE_AUTO)
        fprintf(f,
                "# bloomguard's configuration has uri_source = auto, which this file serves (it\n"
                "# sets the header over any the client sent), but auto also reads the headers\n"
                "# other proxies set.  Pin it to the one header %s sets,\n"
                "# so that the verdict depends on that header alone:\n", proxy);
    else
        fprintf(f,
                "# bloomguard reads the URI from the one header %s sets, as its\n"
                "# configuration says (not \"auto\", which also reads the headers other\n"
                "# proxies set: pinned, the verdict depends on %s's header alone):\n",
                proxy, proxy);
    fprintf(f, "#     [auth]\n#     uri_source = %s\n", value);
}

/* ------------------------------------------------------------------ nginx -- */

/*
 * One line of the nginx map: template t's regexp and the value
 * "DECODED/RAW" (see the comment written above the map).
 */
static void nginx_map_line(FILE *f, const char *tmpl)
{
    struct tmpl_parts p = tmpl_split(tmpl);
    fputs("    \"~^", f);
    nginx_literal(f, p.pre, p.npre);
    fputs("(?:", f);
    if (tmpl_decodable(tmpl)) {
        fputs("(?<bloomguard_s>(?:[^/?#%\\s]|%(?!2[fF]))+)", f);
        nginx_literal(f, p.suf, p.nsuf);
        fputs("(?:\\?\\S*)?\\x20", f);
        nginx_literal(f, p.pre, p.npre);
        fputs("(?<bloomguard_d>[^/]+)", f);
        nginx_literal(f, p.suf, p.nsuf);
        fputs("$|", f);
    }
    fputs("(?<bloomguard_r>[^/?#\\s]+)", f);
    nginx_literal(f, p.suf, p.nsuf);
    fprintf(f, "(?:[?#]|\\x20))\"\n        \"%s$bloomguard_r\";\n",
            tmpl_decodable(tmpl) ? "$bloomguard_d/$bloomguard_s" : "/");
}

static void nginx_write(FILE *f, const struct config *c)
{
    bool xfu = c->uri_source == URI_SOURCE_X_FORWARDED_URI;
    const char *uri_hdr = xfu ? "X-Forwarded-Uri" : "X-Original-URI";
    const char *method_hdr = xfu ? "X-Forwarded-Method" : "X-Original-Method";
    bool auth_denies = c->deny_status == 401 || c->deny_status == 403;
    char bg[300], ka[16], kawhy[128];
    bool any_decodable = false;

    bool wildcard = bloomguard_addr(c, bg, sizeof bg);
    keepalive_time(c, ka, sizeof ka);
    keepalive_why(c, kawhy, sizeof kawhy);
    for (unsigned t = 0; t < c->n_uri_templates; t++)
        any_decodable |= tmpl_decodable(c->uri_templates[t]);

    fputs("# nginx in front of a PostgreSQL-backed service, with bloomguard turning away\n"
          "# requests for ids that surely do not exist before they reach the service and\n"
          "# its database (cache penetration).\n"
          "#\n"
          "# Written by `bloomguard --print-nginx` from bloomguard's configuration.  The\n"
          "# map below has one line per [auth] uri_template: when the templates change,\n"
          "# write the file again rather than editing it:\n"
          "#     bloomguard -c /etc/bloomguard/bloomguard.conf --print-nginx >/etc/nginx/conf.d/bloomguard.conf\n"
          "# It goes inside the http {} block (on Debian, /etc/nginx/conf.d/ is included\n"
          "# there).  Adjust the two addresses bloomguard does not know:\n"
          "#     " PROXYCONF_LISTEN "   where nginx listens for clients\n"
          "#     " PROXYCONF_SERVICE "   the service\n", f);
    fprintf(f, "# bloomguard itself is at %s, its [server] listen%s.\n", bg,
            wildcard ? " (a wildcard address: nginx dials loopback)" : "");
    fputs("#\n"
          "# The guarded paths ([auth] uri_template) and the filter each one asks:\n", f);
    template_list(f, c);
    uri_source_text(f, c, "nginx", xfu ? "x-forwarded-uri" : "x-original-uri");
    fputs("# It needs ngx_http_auth_request_module, which Debian's nginx-light, nginx-core,\n"
          "# nginx-full and nginx-extras all have:  nginx -V 2>&1 | grep -o http_auth_request\n"
          "#\n"
          "# What happens to GET ", f);
    example_path(f, c);
    fprintf(f, ":\n"
            "#   1. auth_request sends a body-less subrequest to bloomguard's /auth with the\n"
            "#      original request line's URI in %s and nothing else the\n"
            "#      client sent (no cookies, no client headers: see \"location =\n"
            "#      /_bloomguard\").\n"
            "#   2. bloomguard answers with an empty body and X-Bloomguard: hit|miss|bypass:\n"
            "#      %u when the id may exist (or the URI matches no template), %u\n"
            "#      ([auth] deny_status) when it surely does not.\n",
            uri_hdr, c->allow_status, c->deny_status);
    if (!auth_denies)
        fprintf(f,
                "#      auth_request takes only 401 and 403 as a denial: it logs each %u as an\n"
                "#      error (\"auth request unexpected status\") before @bloomguard_error\n"
                "#      answers the miss all the same.  deny_status = 403 keeps the log quiet.\n",
                c->deny_status);
    fprintf(f, "#   3. 2xx: the request goes on to the service as if there were no guard.\n"
            "#      %u: nginx answers 404 {\"id\":\"%s\",\"exists\":false} itself, the shape of\n"
            "#      bloomguard's GET /exists/%s and of the service's own 404.\n",
            c->deny_status, EXAMPLE_ID, EXAMPLE_ID);
    if (c->fail_open)
        fputs("#   4. bloomguard down, refusing or slow (more than 1 s): FAIL OPEN, as [auth]\n"
              "#      fail_open = yes asks of bloomguard itself while no filter is loaded.\n"
              "#      The request goes to the service unguarded, exactly as without\n"
              "#      bloomguard, so an outage of the guard costs database load, never wrong\n"
              "#      answers (nginx does close the client's connection after each such\n"
              "#      request).  To fail closed instead, answer 503 in @bloomguard_error\n"
              "#      (see there), or set fail_open = no and write this file again.\n", f);
    else
        fputs("#   4. bloomguard down, refusing or slow (more than 1 s): FAIL CLOSED, as\n"
              "#      [auth] fail_open = no asks of bloomguard itself while no filter is\n"
              "#      loaded: nginx answers 503 guard_unavailable and the service is never\n"
              "#      asked.  To fail open instead, pass the request on in\n"
              "#      @bloomguard_error (see there), or set fail_open = yes and write this\n"
              "#      file again.\n", f);
    fputs("#\n"
          "# Every response carries X-Bloomguard with the verdict (\"bypass\" for paths no\n"
          "# template matches); there is none when bloomguard could not be asked.\n"
          "# Delete the add_header line if clients should not see it.\n"
          "#\n"
          "# bloomguard's writes (POST /ids, POST /reload) need its admin token\n"
          "# ([server] admin_token_file) and are never proxied here: clients only ever\n"
          "# reach /auth through the internal subrequest below.  If an admin path must\n"
          "# go through nginx, keep it off the public server and add the token on the\n"
          "# way, e.g. in a server on an internal address:\n"
          "#     location = /bloomguard/reload {\n"
          "#         proxy_pass http://bloomguard/reload;\n"
          "#         proxy_set_header Authorization \"Bearer <the token>\";\n"
          "#     }\n"
          "\n"
          "# The id of a denied request, for the 404 body.  One line per uri_template,\n"
          "# in bloomguard's order (the first template that matches decides, in\n"
          "# bloomguard as in a map), each matching exactly the URIs bloomguard matches:\n"
          "# up to the first '?' or '#', the template's text around an id of one or more\n"
          "# bytes other than '/'.  The value is \"DECODED/RAW\":\n"
          "#  - DECODED, the id as nginx decoded it into $uri, only when the raw id holds\n"
          "#    no \"%2F\" and the URI no '#' (nginx resolves \"../\" after decoding, so\n"
          "#    $uri may show another segment), else empty;\n"
          "#  - RAW, the id as sent, still percent-encoded, when DECODED is empty.\n"
          "# ($request_uri never holds a space: nginx refuses the request first.)\n"
          "map \"$request_uri $uri\" $bloomguard_segment {\n", f);
    for (unsigned t = 0; t < c->n_uri_templates; t++)
        nginx_map_line(f, c->uri_templates[t]);
    fputs("    default \"/\";\n"
          "}\n"
          "# The id in a form that is safe inside a JSON string:\n"
          "#  - DECODED, as bloomguard's /exists shows it, when it is well-formed UTF-8\n"
          "#    without '\"', '\\' or control characters;\n"
          "#  - else RAW when it is printable ASCII without '\"' or '\\';\n"
          "#  - else \"\".\n"
          "map $bloomguard_segment $bloomguard_id {\n", f);
    if (any_decodable)
        fputs("    \"~(?x) ^(?<bloomguard_i>(?:\n"
              "                 [\\x20\\x21\\x23-\\x2e\\x30-\\x5b\\x5d-\\x7e]\n"
              "               | [\\xc2-\\xdf][\\x80-\\xbf]\n"
              "               | \\xe0[\\xa0-\\xbf][\\x80-\\xbf]  | [\\xe1-\\xec\\xee\\xef][\\x80-\\xbf]{2}\n"
              "               | \\xed[\\x80-\\x9f][\\x80-\\xbf]  | \\xf0[\\x90-\\xbf][\\x80-\\xbf]{2}\n"
              "               | [\\xf1-\\xf3][\\x80-\\xbf]{3}   | \\xf4[\\x80-\\x8f][\\x80-\\xbf]{2}\n"
              "           )+)/\" $bloomguard_i;\n", f);
    fputs("    \"~/(?<bloomguard_i>[\\x21\\x23-\\x5b\\x5d-\\x7e]+)$\" $bloomguard_i;\n"
          "    default \"\";\n"
          "}\n"
          "\n"
          "upstream bloomguard {\n", f);
    fprintf(f, "    server %s;\n"
            "    keepalive 16;               # idle connections kept open, per worker\n"
            "    keepalive_timeout %s;%*s# %s\n"
            "}\n"
            "\n"
            "upstream service {\n"
            "    server " PROXYCONF_SERVICE ";\n"
            "    keepalive 32;\n"
            "    keepalive_timeout 20s;\n"
            "}\n"
            "\n"
            "server {\n"
            "    listen " PROXYCONF_LISTEN ";\n",
            bg, ka, (int)(strlen(ka) < 9 ? 9 - strlen(ka) : 1), "", kawhy);
    fputs("\n"
          "    # HTTP/1.1 without \"Connection: close\", so that the keepalive pools above\n"
          "    # are used.  Locations that set their own proxy_set_header repeat these.\n"
          "    proxy_http_version 1.1;\n"
          "    proxy_set_header Connection \"\";\n"
          "    proxy_set_header Host $host;\n"
          "\n"
          "    # Every request asks bloomguard, which answers \"bypass\" at once for a URI\n"
          "    # that matches no uri_template.  This is set for the whole server rather\n"
          "    # than in a location per template on purpose: nginx chooses locations by\n"
          "    # the decoded, normalised path (\"/user/get/%2E%2E\" is \"/user/\") while the\n"
          "    # service, like bloomguard, gets the URI as sent.\n"
          "    auth_request /_bloomguard;\n"
          "    # The verdict (hit, miss, bypass, not-ready; empty if bloomguard could\n"
          "    # not be asked), for add_header and the named locations below.\n"
          "    auth_request_set $bloomguard $upstream_http_x_bloomguard;\n"
          "    # auth_request passes on a 401 or 403 (deny_status 401 or 403) ...\n"
          "    error_page 401 403 = @bloomguard_miss;\n"
          "    # ... and turns any other answer, or none at all, into a 500.\n"
          "    error_page 500 = @bloomguard_error;\n"
          "    add_header X-Bloomguard $bloomguard always;\n"
          "\n"
          "    # No \"return\" in a guarded location: it would run before the auth phase.\n"
          "    location / {\n"
          "        proxy_pass http://service;\n"
          "    }\n"
          "\n"
          "    # The subrequest carries only what bloomguard reads: the client's URI\n"
          "    # and method, a fixed Host, no body.  Forwarding the client's headers\n"
          "    # would let a client choose the subrequest's size: an 8 KB Cookie, or\n"
          "    # 30 KB of headers, and bloomguard answers 431 or closes the connection,\n"
          "    # which lands in @bloomguard_error below and fails open, so an absent id\n"
          "    # would reach the service.  What is left is bounded by nginx itself: the\n"
          "    # request line is at most one large_client_header_buffers buffer (8 KB),\n"
          "    # or nginx answers 414 before asking anyone.  Nothing the client controls\n"
          "    # can turn bloomguard's deny into an error.\n"
          "    location = /_bloomguard {\n"
          "        internal;\n"
          "        auth_request off;\n"
          "        proxy_pass http://bloomguard/auth;\n"
          "        proxy_pass_request_headers off;\n"
          "        proxy_pass_request_body off;\n"
          "        proxy_set_header Content-Length \"\";\n", f);
    fprintf(f, "        proxy_set_header %s $request_uri;\n"
            "        proxy_set_header %s $request_method;\n", uri_hdr, method_hdr);
    fputs("        proxy_set_header Connection \"\";\n"
          "        # \"bloomguard\", the upstream's name: not the client's Host header,\n"
          "        # which could be 8 KB long.\n"
          "        proxy_set_header Host $proxy_host;\n"
          "        # bloomguard answers in microseconds; a hung one must not hold traffic.\n"
          "        proxy_connect_timeout 1s;\n"
          "        proxy_send_timeout 1s;\n"
          "        proxy_read_timeout 1s;\n"
          "    }\n"
          "\n"
          "    # Surely absent: the service is never asked.  (Named locations go through\n"
          "    # the access phase again, hence \"auth_request off\".)\n"
          "    location @bloomguard_miss {\n"
          "        auth_request off;\n"
          "        default_type application/json;\n"
          "        return 404 '{\"id\":\"$bloomguard_id\",\"exists\":false}';\n"
          "    }\n"
          "\n"
          "    # bloomguard could not be asked, or gave an answer auth_request does not\n"
          "    # understand ($bloomguard tells which).\n"
          "    location @bloomguard_error {\n"
          "        auth_request off;\n"
          "        default_type application/json;\n"
          "        # deny_status 404 or 410: still a miss.\n"
          "        if ($bloomguard = miss) {\n"
          "            return 404 '{\"id\":\"$bloomguard_id\",\"exists\":false}';\n"
          "        }\n"
          "        # [auth] fail_open = no and no filter loaded yet: bloomguard said 503.\n"
          "        if ($bloomguard = not-ready) {\n"
          "            return 503 '{\"error\":\"not_ready\",\"message\":\"the filter is still loading from PostgreSQL\"}';\n"
          "        }\n", f);
    if (c->fail_open)
        fputs("        # Unreachable: fail open ([auth] fail_open = yes).  To fail closed,\n"
              "        # replace this with\n"
              "        #     return 503 '{\"error\":\"guard_unavailable\",\"message\":\"bloomguard is not answering\"}';\n"
              "        proxy_pass http://service;\n", f);
    else
        fputs("        # Unreachable: fail closed ([auth] fail_open = no).  To fail open,\n"
              "        # replace this with\n"
              "        #     proxy_pass http://service;\n"
              "        return 503 '{\"error\":\"guard_unavailable\",\"message\":\"bloomguard is not answering\"}';\n", f);
    fputs("    }\n"
          "}\n", f);
}

/* ------------------------------------------------------------------ Caddy -- */

/*
 * One line of the Caddy map: template t's regexp, whose three alternatives
 * give the id for the 404 body (see the comment written above the map).
 * Go's regexps match runes: an invalid UTF-8 byte is U+FFFD, which the
 * decoded id's class leaves out, so $1 is always well-formed.
 */
static void caddy_map_line(FILE *f, const char *tmpl)
{
    struct tmpl_parts p = tmpl_split(tmpl);
    bool dec = tmpl_decodable(tmpl);
    fputs("\t\t\t~^", f);
    caddy_literal(f, p.pre, p.npre);
    fputs("(?:", f);
    if (dec) {
        fputs("(?:[^/?#%\\s]|%[^2/?#\\s]|%2[^fF/?#\\s])+", f);
        caddy_literal(f, p.suf, p.nsuf);
        fputs("(?:\\?\\S*)?\\x20", f);
        caddy_literal(f, p.pre, p.npre);
        fputs("([^/\"\\\\\\x00-\\x1f\\x7f\\x{FFFD}]+)", f);
        caddy_literal(f, p.suf, p.nsuf);
        fputs("$|", f);
    }
    fputs("([\\x21\\x24-\\x2e\\x30-\\x3e\\x40-\\x5b\\x5d-\\x7e]+)", f);
    caddy_literal(f, p.suf, p.nsuf);
    fputs("(?:[?#]|\\x20)|[^/?#\\s]+", f);
    caddy_literal(f, p.suf, p.nsuf);
    fputs(dec ? "(?:[?#]|\\x20)) $1$2\n" : "(?:[?#]|\\x20)) $1\n", f);
}

static void caddy_write(FILE *f, const struct config *c)
{
    bool xou = c->uri_source == URI_SOURCE_X_ORIGINAL_URI;
    const char *uri_hdr = xou ? "X-Original-URI" : "X-Forwarded-Uri";
    const char *method_hdr = xou ? "X-Original-Method" : "X-Forwarded-Method";
    const char *relay_port = strrchr(PROXYCONF_RELAY, ':') + 1;
    const char *listen_port = strrchr(PROXYCONF_LISTEN, ':') + 1;
    char bg[300], ka[16], kawhy[128];

    bool wildcard = bloomguard_addr(c, bg, sizeof bg);
    keepalive_time(c, ka, sizeof ka);
    keepalive_why(c, kawhy, sizeof kawhy);

    fputs("# Caddy in front of a PostgreSQL-backed service, with bloomguard turning away\n"
          "# requests for ids that surely do not exist before they reach the service and\n"
          "# its database (cache penetration): the Caddy twin of\n"
          "# `bloomguard --print-nginx`.\n"
          "#\n"
          "# Written by `bloomguard --print-caddy` from bloomguard's configuration.  The\n"
          "# map below has one line per [auth] uri_template: when the templates change,\n"
          "# write the file again rather than editing it:\n"
          "#     bloomguard -c /etc/bloomguard/bloomguard.conf --print-caddy >/etc/caddy/Caddyfile\n"
          "# For Debian 12's caddy package (2.6): this is a whole Caddyfile, or copy its\n"
          "# two site blocks into yours.  Adjust the addresses bloomguard does not know:\n", f);
    fprintf(f, "#     http://:%s, bind 127.0.0.1   where Caddy listens for clients\n"
            "#     http://:%s, bind 127.0.0.1   Caddy's relay to bloomguard (loopback\n"
            "#         only, see below), and %s where forward_auth asks it\n"
            "#     %s   the service\n",
            listen_port, relay_port, PROXYCONF_RELAY, PROXYCONF_SERVICE);
    fprintf(f, "# bloomguard itself is at %s, its [server] listen%s.\n", bg,
            wildcard ? " (a wildcard address: Caddy dials loopback)" : "");
    fputs("#\n"
          "# The guarded paths ([auth] uri_template) and the filter each one asks:\n", f);
    template_list(f, c);
    uri_source_text(f, c, "the relay", xou ? "x-original-uri" : "x-forwarded-uri");
    fputs("#\n"
          "# What happens to GET ", f);
    example_path(f, c);
    fprintf(f, ":\n"
            "#   1. forward_auth asks the relay (the second site below), which asks\n"
            "#      bloomguard's /auth with the URI in %s and the method in\n"
            "#      %s, and nothing else the client sent.\n"
            "#   2. bloomguard answers with an empty body and X-Bloomguard: hit|miss|bypass:\n"
            "#      %u when the id may exist (or the URI matches no template), %u\n"
            "#      ([auth] deny_status; any status does) when it surely does not.\n"
            "#   3. 2xx: the request goes on to the service as if there were no guard.\n"
            "#      miss: Caddy answers 404 {\"id\":\"%s\",\"exists\":false} itself, the shape of\n"
            "#      bloomguard's GET /exists/%s and of the service's own 404.\n",
            uri_hdr, method_hdr, c->allow_status, c->deny_status, EXAMPLE_ID, EXAMPLE_ID);
    if (c->fail_open)
        fputs("#   4. bloomguard down, refusing or slow (more than 1 s): FAIL OPEN, as [auth]\n"
              "#      fail_open = yes asks of bloomguard itself while no filter is loaded:\n"
              "#      the relay answers 204 itself and the request goes to the service\n"
              "#      unguarded, so an outage of the guard costs database load, never wrong\n"
              "#      answers.  To fail closed instead, make the relay's handle_errors\n"
              "#      answer 503, or set fail_open = no and write this file again.\n", f);
    else
        fputs("#   4. bloomguard down, refusing or slow (more than 1 s): FAIL CLOSED, as\n"
              "#      [auth] fail_open = no asks of bloomguard itself while no filter is\n"
              "#      loaded: the relay answers 503 guard_unavailable, which forward_auth\n"
              "#      hands to the client, and the service is never asked.  To fail open\n"
              "#      instead, make the relay's handle_errors answer 204, or set\n"
              "#      fail_open = yes and write this file again.\n", f);
    fputs("#      Any other answer from bloomguard (an error of its own: what a client\n"
          "#      sends cannot cause one) goes back to the client as it is, failing\n"
          "#      closed.\n"
          "#   5. URIs over 8 KB are refused with 414 before anyone is asked, as nginx\n"
          "#      refuses request lines over its 8 KB buffers: so nothing a client sends\n"
          "#      can make bloomguard's answer an error.\n"
          "#\n"
          "# Every response carries X-Bloomguard with the verdict (empty when bloomguard\n"
          "# could not be asked).  Delete the \"header X-Bloomguard\" line if clients\n"
          "# should not see it.\n"
          "{\n"
          "\t# Nothing but the two sites below: no admin API, no certificates.\n"
          "\tadmin off\n"
          "\tauto_https off\n"
          "}\n"
          "\n", f);
    fprintf(f, "http://:%s {\n"
            "\tbind 127.0.0.1\n"
            "\n", listen_port);
    fputs("\troute {\n"
          "\t\t# Go's server takes request lines up to 1 MB; bloomguard reads the URI\n"
          "\t\t# from a header and has no reason to be sent more than nginx would.\n"
          "\t\t@uri_too_long expression `{http.request.uri}.size() > 8192`\n"
          "\t\trespond @uri_too_long `{\"error\":\"uri_too_long\",\"message\":\"the URI is longer than 8192 bytes\"}` 414\n"
          "\n"
          "\t\t# The verdict reaches the service as a request header; never the\n"
          "\t\t# client's own.\n"
          "\t\trequest_header -X-Bloomguard\n"
          "\n"
          "\t\t# The id of a denied request, for the 404 body (evaluated only there), in\n"
          "\t\t# a form that is safe inside a JSON string.  One line per uri_template, in\n"
          "\t\t# bloomguard's order (the first template that matches decides, in\n"
          "\t\t# bloomguard as in a map), each matching exactly the URIs bloomguard\n"
          "\t\t# matches: up to the first '?' or '#', the template's text around an id\n"
          "\t\t# of one or more bytes other than '/'.  The first of its alternatives that\n"
          "\t\t# matches gives the id:\n"
          "\t\t#  - the id as Caddy decoded the path, as bloomguard's /exists shows it,\n"
          "\t\t#    when the raw id holds no \"%2F\" and the URI no '#', and the decoded\n"
          "\t\t#    id is well-formed UTF-8 without '\"', '\\' or control characters;\n"
          "\t\t#  - else the id as sent, still percent-encoded, when it is printable\n"
          "\t\t#    ASCII without '\"' or '\\';\n"
          "\t\t#  - else \"\".\n"
          "\t\t# (The URI never holds a space: Go's server refuses the request first.)\n"
          "\t\tmap \"{http.request.uri} {http.request.uri.path}\" {bloomguard_id} {\n", f);
    for (unsigned t = 0; t < c->n_uri_templates; t++)
        caddy_map_line(f, c->uri_templates[t]);
    fputs("\t\t\tdefault \"\"\n"
          "\t\t}\n"
          "\n"
          "\t\t# forward_auth sets X-Forwarded-Uri and X-Forwarded-Method over any\n"
          "\t\t# the client sent, but passes every other client header on, and in\n"
          "\t\t# Caddy 2.6 a reverse_proxy cannot drop them and keep those two (its\n"
          "\t\t# header_up deletions run after its sets; \"-*\" panics): the relay\n"
          "\t\t# drops them.  An 8 KB Cookie would otherwise make bloomguard answer\n"
          "\t\t# 431 to a request for an id that exists.\n", f);
    fprintf(f, "\t\tforward_auth %s {\n", PROXYCONF_RELAY);
    fputs("\t\t\t# \"?\": without it the client's query string stays on the auth\n"
          "\t\t\t# request too, doubling what a long URI costs bloomguard.\n"
          "\t\t\turi /auth?\n"
          "\t\t\tcopy_headers X-Bloomguard\n"
          "\n"
          "\t\t\t# Surely absent: the service is never asked.\n"
          "\t\t\t@miss header X-Bloomguard miss\n"
          "\t\t\thandle_response @miss {\n"
          "\t\t\t\theader Content-Type application/json\n"
          "\t\t\t\theader X-Bloomguard miss\n"
          "\t\t\t\trespond `{\"id\":\"{bloomguard_id}\",\"exists\":false}` 404\n"
          "\t\t\t}\n"
          "\n"
          "\t\t\t# [auth] fail_open = no and no filter loaded yet: bloomguard said 503.\n"
          "\t\t\t@not_ready header X-Bloomguard not-ready\n"
          "\t\t\thandle_response @not_ready {\n"
          "\t\t\t\theader Content-Type application/json\n"
          "\t\t\t\theader X-Bloomguard not-ready\n"
          "\t\t\t\trespond `{\"error\":\"not_ready\",\"message\":\"the filter is still loading from PostgreSQL\"}` 503\n"
          "\t\t\t}\n"
          "\t\t}\n"
          "\n"
          "\t\theader X-Bloomguard {http.request.header.X-Bloomguard}\n", f);
    fprintf(f, "\t\treverse_proxy %s\n"
            "\t}\n"
            "}\n"
            "\n", PROXYCONF_SERVICE);
    fputs("# The relay: receives forward_auth's request with all the client's headers,\n"
          "# keeps the URI and method Caddy set, drops everything else (the Host too,\n"
          "# hence no host name in this site's address: handle_errors would not match),\n"
          "# and asks bloomguard.  Listens on loopback only.\n", f);
    fprintf(f, "http://:%s {\n"
            "\tbind 127.0.0.1\n"
            "\n"
            "\troute {\n"
            "\t\tvars bloomguard_uri {http.request.header.X-Forwarded-Uri}\n"
            "\t\tvars bloomguard_method {http.request.header.X-Forwarded-Method}\n"
            "\t\trequest_header -**\n"
            "\t\treverse_proxy %s {\n"
            "\t\t\theader_up Host bloomguard\n"
            "\t\t\theader_up %s {vars.bloomguard_uri}\n"
            "\t\t\theader_up %s {vars.bloomguard_method}\n"
            "\t\t\t# bloomguard answers in microseconds; a hung one must not hold traffic.\n"
            "\t\t\ttransport http {\n"
            "\t\t\t\tdial_timeout 1s\n"
            "\t\t\t\tresponse_header_timeout 1s\n"
            "\t\t\t\t# Idle connections: %s.\n"
            "\t\t\t\tkeepalive %s\n"
            "\t\t\t}\n"
            "\t\t}\n"
            "\t}\n"
            "\n",
            relay_port, bg, uri_hdr, method_hdr, kawhy, ka);
    if (c->fail_open)
        fputs("\t# bloomguard could not be asked: fail open ([auth] fail_open = yes; see 4.\n"
              "\t# above).  The empty verdict is sent on purpose: forward_auth (2.6) copies\n"
              "\t# X-Bloomguard into the request, and without one it would copy its own\n"
              "\t# placeholder.\n"
              "\thandle_errors {\n"
              "\t\theader X-Bloomguard \"\"\n"
              "\t\trespond 204\n"
              "\t}\n"
              "}\n", f);
    else
        fputs("\t# bloomguard could not be asked: fail closed ([auth] fail_open = no; see\n"
              "\t# 4. above).  forward_auth hands this answer to the client as it is; the\n"
              "\t# empty verdict keeps its own placeholder out of X-Bloomguard.\n"
              "\thandle_errors {\n"
              "\t\theader X-Bloomguard \"\"\n"
              "\t\theader Content-Type application/json\n"
              "\t\trespond `{\"error\":\"guard_unavailable\",\"message\":\"bloomguard is not answering\"}` 503\n"
              "\t}\n"
              "}\n", f);
}

/* ----------------------------------------------------------------- entry -- */

bool proxyconf_write(FILE *out, const struct config *c, enum proxyconf_kind kind,
                     char *err, size_t errlen)
{
    if (!proxyconf_check(c, kind, err, errlen))
        return false;
    if (kind == PROXYCONF_NGINX)
        nginx_write(out, c);
    else
        caddy_write(out, c);
    if (ferror(out)) {
        errf(err, errlen, "cannot write the %s configuration", kind == PROXYCONF_NGINX ? "nginx" : "Caddy");
        return false;
    }
    return true;
}

char *proxyconf_render(const struct config *c, enum proxyconf_kind kind, char *err, size_t errlen)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (f == NULL) {
        errf(err, errlen, "out of memory");
        return NULL;
    }
    bool ok = proxyconf_write(f, c, kind, err, errlen);
    if (fclose(f) != 0 && ok) {
        errf(err, errlen, "out of memory");
        ok = false;
    }
    if (!ok) {
        free(buf);
        return NULL;
    }
    return buf;
}
