/*
 * The nginx snippet and the Caddyfile bloomguard's configuration implies:
 * the checks, the entry points and what both writers share.  The hard part
 * is the regexps: each one must take exactly the URIs and the ID
 * uritmpl_match takes, for any template uritmpl_valid accepts, so that the
 * 404 body a proxy writes names the ID bloomguard said no to.
 */
#include "proxyconf.h"
#include "proxyconf_int.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "idcodec.h"
#include "uritmpl.h"

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

void proxyconf_map_regexp(FILE *f, const char *tmpl, const struct proxyconf_dialect *d)
{
    struct proxyconf_tmpl_parts p = proxyconf_tmpl_split(tmpl);
    d->literal(f, p.pre, p.npre);
    fputs("(?:", f);
    if (proxyconf_tmpl_decodable(tmpl)) {
        fputs(d->seen, f);
        d->literal(f, p.suf, p.nsuf);
        fputs("(?:\\?\\S*)?\\x20", f);
        d->literal(f, p.pre, p.npre);
        fputs(d->decoded, f);
        d->literal(f, p.suf, p.nsuf);
        fputs("$|", f);
    }
    fputs(d->raw, f);
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
    if (c->listen_port == 0 && strncmp(c->listen_host, "unix:", 5) != 0) {
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

/* ----------------------------------------------------------------- entry -- */

bool proxyconf_write(FILE *out, const struct config *c, enum proxyconf_kind kind,
                     char *err, size_t errlen)
{
    if (!proxyconf_check(c, kind, err, errlen))
        return false;
    if (kind == PROXYCONF_NGINX)
        proxyconf_nginx_write(out, c);
    else
        proxyconf_caddy_write(out, c);
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
