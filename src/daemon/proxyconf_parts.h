/*
 * The lowest layer of the proxy configuration: the pieces both proxy
 * writers build from (which proxy, the placeholder addresses, a template's
 * parts and regexps, the address and keep-alive the proxy uses, the
 * header's common paragraphs), defined in proxyconf_parts.c.  It knows
 * neither the writers nor proxyconf.c; they include it, never the reverse.
 * Only enum proxyconf_kind and the PROXYCONF_* defaults are public (through
 * proxyconf.h); the functions are private to proxyconf*.c.
 */
#ifndef BLOOMGUARD_PROXYCONF_PARTS_H
#define BLOOMGUARD_PROXYCONF_PARTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "config.h"

/* Which proxy to write for. */
enum proxyconf_kind { PROXYCONF_NGINX, PROXYCONF_CADDY };

/*
 * The placeholder addresses of what bloomguard does not know (where the
 * proxy listens, the service behind it, Caddy's relay to bloomguard); the
 * written file says to adjust them.  bloomguard's own address is [server]
 * listen.
 */
#define PROXYCONF_LISTEN "127.0.0.1:8000"
#define PROXYCONF_SERVICE "127.0.0.1:8081"
#define PROXYCONF_RELAY "127.0.0.1:8082"
/* The unix socket a TCP configuration's output suggests as the alternative (bloomguard(8)). */
#define PROXYCONF_UNIX "/run/bloomguard/http.sock"

/* The ID an example in the header shows. */
#define EXAMPLE_ID "42"

/* A template split around "{id}": the literal text before and after it. */
struct proxyconf_tmpl_parts {
    const char *pre, *suf;
    size_t npre, nsuf;
};

struct proxyconf_tmpl_parts proxyconf_tmpl_split(const char *tmpl);

/*
 * Whether the proxy's decoded path can be compared with the template's
 * literals as they are: not when they hold a '%' (the raw URI must carry it
 * encoded, the decoded path holds the byte it stands for).  Such templates
 * get only the raw ID in the 404 body.
 */
bool proxyconf_tmpl_decodable(const char *tmpl);

/*
 * A proxy's regexp dialect for the map lines: how it escapes a literal and
 * the groups that take the ID.  seen takes the ID as the request line's URI
 * carries it and decoded the same ID in the decoded path after the space
 * (both only for templates proxyconf_tmpl_decodable accepts); raw takes the
 * URI's ID when the decoded one cannot be had.  seen and raw are patterns
 * of proxyconf_pattern ("$S": the bytes no raw ID holds).
 */
struct proxyconf_dialect {
    void (*literal)(FILE *f, const char *s, size_t n);
    const char *seen, *decoded, *raw;
};

/*
 * pattern to f, each "$S" written as the bytes no raw ID holds
 * (URITMPL_ID_STOPS) and each "$E" as the bytes that end a URI's path
 * (URITMPL_PATH_ENDS), "\xHH" each, for the inside of a class: the rule
 * uritmpl_match applies, in one place.  Hex, because the bytes are
 * punctuation to both proxies' class syntax and '#' would begin a comment
 * in a Caddyfile token.
 */
void proxyconf_pattern(FILE *f, const char *pattern);

/*
 * The part of template tmpl's map regexp both proxies share, to f:
 * PRE(?:SEEN SUF(?:\?\S*)?\x20 PRE DECODED SUF$|RAW SUF, the alternation
 * left open for the caller's tail; the first alternative only when tmpl is
 * decodable.
 */
void proxyconf_map_regexp(FILE *f, const char *tmpl, const struct proxyconf_dialect *d);

/* Whether ch stands for itself in both proxies' regexps (no escape needed). */
bool proxyconf_is_plain(unsigned char ch);

/*
 * bloomguard's address as the proxy of kind dials it: [server] listen, with
 * a wildcard host replaced by the loopback address of its family (the proxy
 * cannot connect to 0.0.0.0) and an IPv6 address in brackets; a unix socket
 * in the proxy's spelling (nginx "unix:/path", Caddy "unix//path").
 * Returns whether the host was a wildcard.
 */
bool proxyconf_addr(const struct config *c, enum proxyconf_kind kind, char *buf, size_t len);

/*
 * The proxy's idle keep-alive to bloomguard: shorter than bloomguard's own
 * connection_timeout, so that bloomguard never closes a connection the
 * proxy is about to reuse.
 */
void proxyconf_keepalive_time(const struct config *c, char *buf, size_t len);

/* Why proxyconf_keepalive_time is what it is, for the comment beside it. */
void proxyconf_keepalive_why(const struct config *c, char *buf, size_t len);

/*
 * What both writers work from: the headers the proxy passes the original
 * URI and method in ([auth] uri_source when it names one, else the kind's
 * own: nginx's X-Original-*, Caddy's X-Forwarded-*) and the uri_source value that names
 * them, bloomguard's address as the proxy dials it (proxyconf_addr) and the
 * proxy's keep-alive (proxyconf_keepalive_time, _why).
 */
struct proxyconf_common {
    const char *uri_hdr, *method_hdr;
    const char *uri_source;
    bool wildcard;
    char bg[300], ka[16], kawhy[128];
};

void proxyconf_common_init(struct proxyconf_common *pc, const struct config *c,
                           enum proxyconf_kind kind);

/*
 * The header's paragraph on where bloomguard is, the guarded paths and the
 * uri_source to pin: proxy is who dials bloomguard ("nginx", "Caddy"),
 * asker who sets the URI header ("nginx", "the relay").
 */
void proxyconf_where(FILE *f, const struct config *c, const struct proxyconf_common *pc,
                     const char *proxy, const char *asker);

/* The example request of the header: the first template with EXAMPLE_ID in it. */
void proxyconf_example_path(FILE *f, const struct config *c);

/* "#     TEMPLATE   FILTER" lines, aligned. */
void proxyconf_template_list(FILE *f, const struct config *c);

/* What the header says about [auth] uri_source: the value to pin, and why. */
void proxyconf_uri_source_text(FILE *f, const struct config *c, const char *proxy,
                               const char *value);

#endif /* BLOOMGUARD_PROXYCONF_PARTS_H */
