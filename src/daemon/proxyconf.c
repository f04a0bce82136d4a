/*
 * The nginx snippet and the Caddyfile bloomguard's configuration implies:
 * the checks a configuration must pass for a proxy, and the entry points
 * that hand it to the proxy's writer (proxyconf_nginx.c, proxyconf_caddy.c),
 * which build it from the pieces in proxyconf_parts.c.
 */
#include "proxyconf.h"
#include "errfmt.h"
#include "proxyconf_caddy.h"
#include "proxyconf_nginx.h"

#include <stdlib.h>
#include <string.h>

#include "idcodec.h"
#include "uritmpl.h"

#define errf errfmt

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
