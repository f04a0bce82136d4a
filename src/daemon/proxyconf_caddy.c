/*
 * The Caddyfile bloomguard's configuration implies: a forward_auth per
 * template, and a map whose regexps (Go's, on runes) take exactly the URIs
 * and the ID uritmpl_match takes.
 */
#include "proxyconf_caddy.h"
#include "proxyconf_parts.h"

#include <stdlib.h>
#include <string.h>

#include "idcodec.h"
#include "uritmpl.h"

/* ------------------------------------------------------------------ Caddy -- */

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
        if (proxyconf_is_plain(ch)) {
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

/*
 * One line of the Caddy map: template t's regexp, whose three alternatives
 * give the id for the 404 body (see the comment written above the map).
 * Go's regexps match runes: an invalid UTF-8 byte is U+FFFD, which the
 * decoded id's class leaves out, so $1 is always well-formed.
 */
static void caddy_map_line(FILE *f, const char *tmpl)
{
    static const struct proxyconf_dialect caddy = {
        .literal = caddy_literal,
        .seen = "(?:[^$S%\\s]|%[^2$S\\s]|%2[^fF$S\\s])+",
        .decoded = "([^/\"\\\\\\x00-\\x1f\\x7f\\x{FFFD}]+)",
        /* Printable ASCII but for '"' and '\\' (the 404 body quotes it). */
        .raw = "([^\\x00-\\x20\\x22\\x5c\\x7f-\\x{10FFFF}$S]+)",
    };
    struct proxyconf_tmpl_parts p = proxyconf_tmpl_split(tmpl);
    bool dec = proxyconf_tmpl_decodable(tmpl);
    fputs("\t\t\t~^", f);
    proxyconf_map_regexp(f, tmpl, &caddy);
    proxyconf_pattern(f, "(?:[$E]|\\x20)|[^$S\\s]+");
    caddy_literal(f, p.suf, p.nsuf);
    proxyconf_pattern(f, dec ? "(?:[$E]|\\x20)) $1$2\n" : "(?:[$E]|\\x20)) $1\n");
}

void proxyconf_caddy_write(FILE *f, const struct config *c)
{
    const char *relay_port = strrchr(PROXYCONF_RELAY, ':') + 1;
    const char *listen_port = strrchr(PROXYCONF_LISTEN, ':') + 1;
    struct proxyconf_common pc;

    proxyconf_common_init(&pc, c, PROXYCONF_CADDY);

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
    proxyconf_where(f, c, &pc, "Caddy", "the relay");
    fputs("#\n"
          "# What happens to GET ", f);
    proxyconf_example_path(f, c);
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
            pc.uri_hdr, pc.method_hdr, c->allow_status, c->deny_status, EXAMPLE_ID, EXAMPLE_ID);
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
            relay_port, pc.bg, pc.uri_hdr, pc.method_hdr, pc.kawhy, pc.ka);
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
