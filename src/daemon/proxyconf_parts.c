/*
 * The pieces both proxy writers build from (proxyconf_parts.h): templates
 * split and turned into regexps, literals, the upstream address, keepalive
 * and the header's lines.  The hard part is the regexps: each one must
 * take exactly the URIs and the ID uritmpl_match takes, for any template
 * uritmpl_valid accepts, so that the 404 body a proxy writes names the ID
 * bloomguard said no to.
 */
#include "proxyconf_parts.h"

#include <arpa/inet.h>
#include <string.h>

#include "uritmpl.h"

/* ------------------------------------------------------------ templates -- */

struct proxyconf_tmpl_parts proxyconf_tmpl_split(const char *tmpl)
{
    const char *ph = strstr(tmpl, URITMPL_PLACEHOLDER);
    struct proxyconf_tmpl_parts p = { tmpl, "", 0, 0 };
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
bool proxyconf_tmpl_decodable(const char *tmpl)
{
    return strchr(tmpl, '%') == NULL;
}

void proxyconf_pattern(FILE *f, const char *pattern)
{
    for (const char *p = pattern; *p != '\0'; p++) {
        const char *set = p[0] != '$' ? NULL
                          : p[1] == 'S' ? URITMPL_ID_STOPS : p[1] == 'E' ? URITMPL_PATH_ENDS : NULL;
        if (set == NULL) {
            fputc(*p, f);
            continue;
        }
        for (const char *s = set; *s != '\0'; s++)
            fprintf(f, "\\x%02x", (unsigned char)*s);
        p++;
    }
}

void proxyconf_map_regexp(FILE *f, const char *tmpl, const struct proxyconf_dialect *d)
{
    struct proxyconf_tmpl_parts p = proxyconf_tmpl_split(tmpl);
    d->literal(f, p.pre, p.npre);
    fputs("(?:", f);
    if (proxyconf_tmpl_decodable(tmpl)) {
        proxyconf_pattern(f, d->seen);
        d->literal(f, p.suf, p.nsuf);
        fputs("(?:\\?\\S*)?\\x20", f);
        d->literal(f, p.pre, p.npre);
        fputs(d->decoded, f);
        d->literal(f, p.suf, p.nsuf);
        fputs("$|", f);
    }
    proxyconf_pattern(f, d->raw);
    d->literal(f, p.suf, p.nsuf);
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

bool proxyconf_is_plain(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')
           || (ch != '\0' && strchr("/-_~%,;:=&@!'<>", ch) != NULL);
}



/* ------------------------------------------------------------ addresses -- */

/*
 * bloomguard's address as the proxy dials it: [server] listen, with a
 * wildcard host replaced by the loopback address of its family (the proxy
 * cannot connect to 0.0.0.0) and an IPv6 address in brackets.  Returns
 * whether the host was a wildcard.
 */
bool proxyconf_addr(const struct config *c, enum proxyconf_kind kind, char *buf, size_t len)
{
    const char *host = c->listen_host;
    if (strncmp(host, "unix:", 5) == 0) {
        snprintf(buf, len, "%s%s", kind == PROXYCONF_NGINX ? "unix:" : "unix/", host + 5);
        return false;
    }
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
void proxyconf_keepalive_time(const struct config *c, char *buf, size_t len)
{
    unsigned t = c->connection_timeout;
    if (t == 0 || t > 20)
        snprintf(buf, len, "20s");
    else if (t > 1)
        snprintf(buf, len, "%us", t - 1);
    else
        snprintf(buf, len, "500ms");
}

void proxyconf_keepalive_why(const struct config *c, char *buf, size_t len)
{
    if (c->connection_timeout == 0)
        snprintf(buf, len, "bloomguard's connection_timeout is 0: it never closes them");
    else
        snprintf(buf, len, "shorter than bloomguard's connection_timeout (%u s)", c->connection_timeout);
}

/* ----------------------------------------------------------- the header -- */

void proxyconf_common_init(struct proxyconf_common *pc, const struct config *c,
                           enum proxyconf_kind kind)
{
    bool original = c->uri_source == URI_SOURCE_X_ORIGINAL_URI ? true
                    : c->uri_source == URI_SOURCE_X_FORWARDED_URI ? false
                    : kind == PROXYCONF_NGINX;
    pc->uri_hdr = original ? "X-Original-URI" : "X-Forwarded-Uri";
    pc->method_hdr = original ? "X-Original-Method" : "X-Forwarded-Method";
    pc->uri_source = original ? "x-original-uri" : "x-forwarded-uri";
    pc->wildcard = proxyconf_addr(c, kind, pc->bg, sizeof pc->bg);
    proxyconf_keepalive_time(c, pc->ka, sizeof pc->ka);
    proxyconf_keepalive_why(c, pc->kawhy, sizeof pc->kawhy);
}

void proxyconf_where(FILE *f, const struct config *c, const struct proxyconf_common *pc,
                     const char *proxy, const char *asker)
{
    fprintf(f, "# bloomguard itself is at %s, its [server] listen%s%s%s.\n", pc->bg,
            pc->wildcard ? " (a wildcard address: " : "", pc->wildcard ? proxy : "",
            pc->wildcard ? " dials loopback)" : "");
    fputs("#\n"
          "# The guarded paths ([auth] uri_template) and the filter each one asks:\n", f);
    proxyconf_template_list(f, c);
    proxyconf_uri_source_text(f, c, asker, pc->uri_source);
}

/* The example request of the header: the first template with EXAMPLE_ID in it. */
void proxyconf_example_path(FILE *f, const struct config *c)
{
    struct proxyconf_tmpl_parts p = proxyconf_tmpl_split(c->uri_templates[0]);
    fprintf(f, "%.*s%s%.*s", (int)p.npre, p.pre, EXAMPLE_ID, (int)p.nsuf, p.suf);
}

/* "#     TEMPLATE   FILTER" lines, aligned. */
void proxyconf_template_list(FILE *f, const struct config *c)
{
    size_t w = 0;
    for (unsigned t = 0; t < c->n_uri_templates; t++)
        if (strlen(c->uri_templates[t]) > w)
            w = strlen(c->uri_templates[t]);
    for (unsigned t = 0; t < c->n_uri_templates; t++)
        fprintf(f, "#     %-*s  filter %s\n", (int)w, c->uri_templates[t], tmpl_filter(c, t));
}

/* What the header says about [auth] uri_source: the value to pin, and why. */
void proxyconf_uri_source_text(FILE *f, const struct config *c, const char *proxy,
                               const char *value)
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
