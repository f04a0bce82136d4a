/*
 * The two configuration types whose value spans several fields of struct
 * config: [server] listen (host and port) and [auth] uri_template (a list
 * that each occurrence appends to).  They implement the same interface as
 * the scalar types of config_types.c.
 */
#include "config_int.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uritmpl.h"

#define ERR_VALUE_MAX CONFIG_ERR_VALUE_MAX
#define errf config_errf

static void no_values(const struct config_key *k, char *buf, size_t len)
{
    (void)k;
    if (len > 0)
        buf[0] = '\0';
}

/* A port: 0..65535 in plain decimal digits. */
static bool parse_port(const char *p, unsigned *port)
{
    size_t len = strlen(p);
    unsigned long x = 0;

    if (len == 0 || len > 5 || strspn(p, "0123456789") != len)
        return false;
    x = strtoul(p, NULL, 10);
    if (x > 65535)
        return false;
    *port = (unsigned)x;
    return true;
}

/* --- [server] listen: host and port in struct config --- */

/* An IPv6 literal as written between brackets, with an optional %zone. */
static bool valid_ipv6(const char *s, size_t len)
{
    char addr[INET6_ADDRSTRLEN];
    struct in6_addr a6;
    const char *pct = memchr(s, '%', len);
    size_t alen = pct != NULL ? (size_t)(pct - s) : len;

    if (alen == 0 || alen >= sizeof addr)
        return false;
    memcpy(addr, s, alen);
    addr[alen] = '\0';
    if (inet_pton(AF_INET6, addr, &a6) != 1)
        return false;
    if (pct == NULL)
        return true;
    /* Interface names or numbers: eth0, enp3s0.100, 2. */
    size_t zlen = len - alen - 1;
    return zlen > 0 && zlen <= 64 &&
           strspn(pct + 1, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                           "0123456789_.-") >= zlen;
}

/*
 * Split "host:port" or "[v6addr]:port", or keep "unix:/path" whole.  Only
 * the shape is checked here; whether the name resolves is the listener's
 * business.
 */
static bool parse_listen(const char *v, char **host, unsigned *port, char *err, size_t errlen)
{
    const char *h, *hend, *p;
    unsigned x = 0;
    size_t hlen;

    /* "unix:/absolute/path": a unix socket (listen.h), kept whole as the host, port 0. */
    if (strncmp(v, "unix:", 5) == 0) {
        if (v[5] != '/' || strlen(v + 5) >= 108) {
            errf(err, errlen, "\"%.*s\": expected unix:/absolute/path (at most 107 bytes)",
                 ERR_VALUE_MAX, v);
            return false;
        }
        if ((*host = strdup(v)) == NULL) {
            errf(err, errlen, "out of memory");
            return false;
        }
        *port = 0;
        return true;
    }
    if (v[0] == '[') {
        h = v + 1;
        hend = strchr(h, ']');
        if (hend == NULL) {
            errf(err, errlen, "\"%.*s\" lacks the closing ']' of the IPv6 address",
                 ERR_VALUE_MAX, v);
            return false;
        }
        if (hend[1] != ':') {
            errf(err, errlen, "\"%.*s\" has no port (expected [address]:port)", ERR_VALUE_MAX, v);
            return false;
        }
        p = hend + 2;
        hlen = (size_t)(hend - h);
        if (!valid_ipv6(h, hlen)) {
            errf(err, errlen, "\"%.*s\" is not a valid IPv6 address", ERR_VALUE_MAX, v);
            return false;
        }
    } else {
        const char *colon = strrchr(v, ':');

        if (colon == NULL) {
            errf(err, errlen, "\"%.*s\" has no port (expected host:port)", ERR_VALUE_MAX, v);
            return false;
        }
        h = v;
        hend = colon;
        hlen = (size_t)(hend - h);
        p = colon + 1;
        if (memchr(h, ':', hlen) != NULL) {
            errf(err, errlen, "\"%.*s\": write IPv6 addresses in brackets, like [::1]:8080",
                 ERR_VALUE_MAX, v);
            return false;
        }
        if (hlen == 0) {
            errf(err, errlen, "\"%.*s\" has no host (use 0.0.0.0 or [::] for all addresses)",
                 ERR_VALUE_MAX, v);
            return false;
        }
        /* Host names (RFC 1123, at most 253 bytes) and IPv4 literals. */
        if (hlen > 253 || strspn(h, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                    "0123456789.-_") < hlen) {
            errf(err, errlen, "\"%.*s\": invalid host name or address",
                 ERR_VALUE_MAX, v);
            return false;
        }
    }
    if (*p == '\0') {
        errf(err, errlen, "\"%.*s\" has no port (expected host:port)", ERR_VALUE_MAX, v);
        return false;
    }
    if (!parse_port(p, &x)) {
        errf(err, errlen, "\"%.*s\": port %.*s is not a number in 0..65535", ERR_VALUE_MAX, v,
             ERR_VALUE_MAX, p);
        return false;
    }
    *host = strndup(h, hlen);
    if (*host == NULL) {
        errf(err, errlen, "out of memory");
        return false;
    }
    *port = x;
    return true;
}

static bool listen_set(const struct config_key *k, void *obj, const char *v, char *err, size_t errlen)
{
    struct config *c = obj;
    char *host = NULL;
    unsigned port = 0;

    (void)k;
    if (!parse_listen(v, &host, &port, err, errlen))
        return false;
    free(c->listen_host);
    c->listen_host = host;
    c->listen_port = port;
    return true;
}

static bool listen_copy(const struct config_key *k, void *dst, const void *src)
{
    struct config *d = dst;
    const struct config *s = src;

    (void)k;
    if (!config_copy_string(&d->listen_host, s->listen_host))
        return false;
    d->listen_port = s->listen_port;
    return true;
}

static void listen_free(const struct config_key *k, void *obj)
{
    struct config *c = obj;
    (void)k;
    free(c->listen_host);
    c->listen_host = NULL;
}

static bool listen_equal(const struct config_key *k, const void *a, const void *b)
{
    const struct config *x = a, *y = b;
    (void)k;
    return config_same_string(x->listen_host, y->listen_host) && x->listen_port == y->listen_port;
}

static void listen_format(const struct config_key *k, const void *obj, char *buf, size_t len)
{
    const struct config *c = obj;
    const char *h = c->listen_host != NULL ? c->listen_host : "";
    (void)k;
    snprintf(buf, len, strchr(h, ':') != NULL ? "[%s]:%u" : "%s:%u", h, c->listen_port);
}

const struct config_type config_type_listen = {
    listen_set, listen_copy, listen_free, listen_equal, listen_format, no_values
};

/* --- [auth] uri_template: a list in struct config, each set appends --- */

/* uritmpl owns the rule: a template it rejects could never match. */
static bool check_template(const char *v, char *err, size_t errlen)
{
    const char *why;

    if (!uritmpl_valid(v, &why)) {
        errf(err, errlen, "\"%.*s\" %s", ERR_VALUE_MAX, v, why);
        return false;
    }
    return true;
}

static bool template_set(const struct config_key *k, void *obj, const char *v,
                         char *err, size_t errlen)
{
    struct config *c = obj;
    /* "TEMPLATE [FILTER]": uritmpl_valid refuses whitespace, so the first blank splits. */
    size_t tlen = strcspn(v, " \t");
    const char *name = v + tlen;
    char *t = NULL, *n = NULL;

    (void)k;
    while (*name == ' ' || *name == '\t')
        name++;
    if ((t = strndup(v, tlen)) == NULL || (*name != '\0' && (n = strdup(name)) == NULL)) {
        errf(err, errlen, "out of memory");
        goto fail;
    }
    if (!check_template(t, err, errlen)
        || (n != NULL && !config_filter_name_valid(n, err, errlen)))
        goto fail;
    if (c->n_uri_templates >= CONFIG_MAX_TEMPLATES) {
        errf(err, errlen, "too many templates (at most %d)", CONFIG_MAX_TEMPLATES);
        goto fail;
    }
    c->uri_templates[c->n_uri_templates] = t;
    c->uri_template_names[c->n_uri_templates] = n;
    c->uri_template_filter[c->n_uri_templates++] = 0;    /* config_resolve sets it */
    return true;

fail:
    free(t);
    free(n);
    return false;
}

static void template_free(const struct config_key *k, void *obj)
{
    struct config *c = obj;

    (void)k;
    /* Every slot, not just n_uri_templates, in case the count was reset. */
    for (size_t i = 0; i < CONFIG_MAX_TEMPLATES; i++) {
        free(c->uri_templates[i]);
        free(c->uri_template_names[i]);
        c->uri_templates[i] = c->uri_template_names[i] = NULL;
    }
    c->n_uri_templates = 0;
}

static bool template_copy(const struct config_key *k, void *dst, const void *src)
{
    struct config *d = dst;
    const struct config *s = src;
    char *t[CONFIG_MAX_TEMPLATES] = { 0 }, *n[CONFIG_MAX_TEMPLATES] = { 0 };

    for (unsigned i = 0; i < s->n_uri_templates; i++)
        if (!config_copy_string(&t[i], s->uri_templates[i]) || !config_copy_string(&n[i], s->uri_template_names[i])) {
            for (unsigned j = 0; j <= i; j++) {
                free(t[j]);
                free(n[j]);
            }
            return false;
        }
    template_free(k, d);
    memcpy(d->uri_templates, t, sizeof t);
    memcpy(d->uri_template_names, n, sizeof n);
    memcpy(d->uri_template_filter, s->uri_template_filter, sizeof d->uri_template_filter);
    d->n_uri_templates = s->n_uri_templates;
    return true;
}

static bool template_equal(const struct config_key *k, const void *a, const void *b)
{
    const struct config *x = a, *y = b;

    (void)k;
    if (x->n_uri_templates != y->n_uri_templates)
        return false;
    for (unsigned i = 0; i < x->n_uri_templates; i++)
        if (!config_same_string(x->uri_templates[i], y->uri_templates[i])
            || !config_same_string(x->uri_template_names[i], y->uri_template_names[i]))
            return false;
    return true;
}

static void template_format(const struct config_key *k, const void *obj, char *buf, size_t len)
{
    const struct config *c = obj;
    (void)k;
    snprintf(buf, len, "%u template%s", c->n_uri_templates, c->n_uri_templates == 1 ? "" : "s");
}

const struct config_type config_type_template = {
    template_set, template_copy, template_free, template_equal, template_format, no_values
};
