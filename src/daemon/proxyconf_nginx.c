/*
 * The nginx snippet bloomguard's configuration implies: an auth_request
 * location per template, and a map whose regexps take exactly the URIs and
 * the ID uritmpl_match takes.
 */
#include "proxyconf_nginx.h"
#include "proxyconf_parts.h"

#include <stdlib.h>
#include <string.h>

#include "idcodec.h"
#include "uritmpl.h"

/* ------------------------------------------------------------------ nginx -- */

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
        if (proxyconf_is_plain(ch))
            fputc(ch, f);
        else if (ch != '\\' && ch != '\0' && strchr(".^$|()[]*+?{}", ch) != NULL)
            fprintf(f, "\\%c", ch);
        else
            fprintf(f, "\\x%02x", ch);
    }
}

/*
 * One line of the nginx map: template t's regexp and the value
 * "DECODED/RAW" (see the comment written above the map).
 */
static void nginx_map_line(FILE *f, const char *tmpl)
{
    static const struct proxyconf_dialect nginx = {
        .literal = nginx_literal,
        .seen = "(?<bloomguard_s>(?:[^$S%\\s]|%(?!2[fF]))+)",
        .decoded = "(?<bloomguard_d>[^/]+)",
        .raw = "(?<bloomguard_r>[^$S\\s]+)",
    };
    fputs("    \"~^", f);
    proxyconf_map_regexp(f, tmpl, &nginx);
    proxyconf_pattern(f, "(?:[$E]|\\x20))\"\n");
    fprintf(f, "        \"%s$bloomguard_r\";\n",
            proxyconf_tmpl_decodable(tmpl) ? "$bloomguard_d/$bloomguard_s" : "/");
}

void proxyconf_nginx_write(FILE *f, const struct config *c)
{
    bool auth_denies = c->deny_status == 401 || c->deny_status == 403;
    struct proxyconf_common pc;
    bool any_decodable = false;

    proxyconf_common_init(&pc, c, PROXYCONF_NGINX);
    for (unsigned t = 0; t < c->n_uri_templates; t++)
        any_decodable |= proxyconf_tmpl_decodable(c->uri_templates[t]);

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
    proxyconf_where(f, c, &pc, "nginx", "nginx");
    fputs("# It needs ngx_http_auth_request_module, which Debian's nginx-light, nginx-core,\n"
          "# nginx-full and nginx-extras all have:  nginx -V 2>&1 | grep -o http_auth_request\n"
          "#\n"
          "# What happens to GET ", f);
    proxyconf_example_path(f, c);
    fprintf(f, ":\n"
            "#   1. auth_request sends a body-less subrequest to bloomguard's /auth with the\n"
            "#      original request line's URI in %s and nothing else the\n"
            "#      client sent (no cookies, no client headers: see \"location =\n"
            "#      /_bloomguard\").\n"
            "#   2. bloomguard answers with an empty body and X-Bloomguard: hit|miss|bypass:\n"
            "#      %u when the id may exist (or the URI matches no template), %u\n"
            "#      ([auth] deny_status) when it surely does not.\n",
            pc.uri_hdr, c->allow_status, c->deny_status);
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
          "# bloomguard's admin routes (bloomguard -h lists them) need its admin token\n"
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
    fprintf(f, "    server %s;\n", pc.bg);
    if (strncmp(c->listen_host, "unix:", 5) == 0)
        fputs("    # nginx's user needs write permission on the socket: [server] listen_group\n"
              "    # = www-data with listen_mode = 0660 (bloomguard(8)).\n", f);
    else
        fputs("    # Or over a unix socket, with bloomguard's [server] listen =\n"
              "    # unix:" PROXYCONF_UNIX " and listen_group = www-data (bloomguard(8)):\n"
              "    #server unix:" PROXYCONF_UNIX ";\n", f);
    fprintf(f, "    keepalive 16;               # idle connections kept open, per worker\n"
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
            pc.ka, (int)(strlen(pc.ka) < 9 ? 9 - strlen(pc.ka) : 1), "", pc.kawhy);
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
            "        proxy_set_header %s $request_method;\n", pc.uri_hdr, pc.method_hdr);
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
