/*
 * The checks only one key needs (the key table, config_keys.c, names them
 * in its rows): PostgreSQL names, a peer's and the upstreams' URLs, a
 * group, a channel, a slot.
 */
#include "config_int.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "httpc.h"

#define ERR_VALUE_MAX CONFIG_ERR_VALUE_MAX
#define errf config_errf
/* PostgreSQL's NAMEDATALEN - 1. */
#define PG_IDENT_MAX 63
/* Deletes are notified on "<channel>_deleted", which must fit in 63 bytes too. */
#define CHANNEL_MAX (PG_IDENT_MAX - 8)

/*
 * The loader quotes names as identifiers, so any character but '"' and
 * control characters could work; refusing those keeps quoting trivial.
 */
static bool check_pg_name(const char *what, const char *v, size_t len, char *err, size_t errlen)
{
    if (len == 0 || len > PG_IDENT_MAX) {
        errf(err, errlen, "%s name must be 1..%d bytes", what, PG_IDENT_MAX);
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        if (v[i] == '"' || iscntrl((unsigned char)v[i])) {
            errf(err, errlen, "%s name must not contain '\"' or control characters", what);
            return false;
        }
    }
    return true;
}

bool config_check_table(const char *v, char *err, size_t errlen)
{
    const char *dot = strchr(v, '.');

    if (dot == NULL)
        return check_pg_name("table", v, strlen(v), err, errlen);
    if (strchr(dot + 1, '.') != NULL) {
        errf(err, errlen, "\"%.*s\" must be table or schema.table", ERR_VALUE_MAX, v);
        return false;
    }
    return check_pg_name("schema", v, (size_t)(dot - v), err, errlen) &&
           check_pg_name("table", dot + 1, strlen(dot + 1), err, errlen);
}

bool config_check_column(const char *v, char *err, size_t errlen)
{
    return check_pg_name("column", v, strlen(v), err, errlen);
}

/*
 * [sync] upstream: at most CONFIG_MAX_UPSTREAMS URLs, space-separated, each
 * as bootstrap_from's (config_check_peer: https, or plain http to a loopback host
 * only, so that the token never travels in clear).
 */
bool config_check_upstreams(const char *v, char *err, size_t errlen)
{
    unsigned n = 0;
    char url[CONFIG_UPSTREAM_URL_MAX + 1];
    for (const char *p = v + strspn(v, " \t"); *p != '\0'; p += strspn(p, " \t")) {
        size_t len = strcspn(p, " \t");
        if (++n > CONFIG_MAX_UPSTREAMS || len > CONFIG_UPSTREAM_URL_MAX) {
            errf(err, errlen, "more than %d upstreams, or one longer than %d bytes",
                 CONFIG_MAX_UPSTREAMS, CONFIG_UPSTREAM_URL_MAX);
            return false;
        }
        snprintf(url, sizeof url, "%.*s", (int)len, p);
        if (!config_check_peer(url, err, errlen))
            return false;
        p += len;
    }
    return true;
}

/*
 * [snapshot] bootstrap_from: https://host[:port], or http:// to a loopback
 * address, nothing after but a slash (peer.c adds the path).  Plain http
 * elsewhere is refused here rather than at the first start: the admin
 * token would travel in clear (httpc.h refuses to send it), and a peer on
 * another host refuses /snapshot without it.
 */
bool config_check_peer(const char *v, char *err, size_t errlen)
{
    size_t len = strlen(v);
    if (len == 0)
        return true;
    const char *rest = strncmp(v, "https://", 8) == 0 ? v + 8
                     : strncmp(v, "http://", 7) == 0 ? v + 7 : NULL;
    const char *slash = rest != NULL ? strchr(rest, '/') : NULL;
    bool tls = false, loopback = false;
    char why[200];
    if (rest == NULL || *rest == '\0' || len > 255 || strpbrk(rest, "?#@ \t") != NULL
        || (slash != NULL && slash[1] != '\0')
        || !httpc_url_check(v, &tls, &loopback, why, sizeof why)) {
        errf(err, errlen, "\"%.*s\" is not https://host[:port] or http://host[:port] (no path)",
             ERR_VALUE_MAX, v);
        return false;
    }
    if (!tls && !loopback) {
        errf(err, errlen, "\"%.*s\": plain http to a host that is not loopback would send the "
             "admin token in clear: use https:// (the peer's [server] tls_cert_file, this "
             "daemon's bootstrap_ca_file)", ERR_VALUE_MAX, v);
        return false;
    }
    return true;
}

/*
 * A group name or a gid, as chown takes it.  Only the spelling: whether the
 * group exists is the system's to say, at start and in -t (listen.h).
 */
bool config_check_group(const char *v, char *err, size_t errlen)
{
    size_t len = strlen(v);
    if (len > 64 || strpbrk(v, ": \t\n/") != NULL || v[0] == '-') {
        errf(err, errlen, "\"%.*s\" is not a group name or a numeric gid", ERR_VALUE_MAX, v);
        return false;
    }
    return true;
}

/*
 * A name PostgreSQL takes unquoted or bloomguard quotes as written: 1..max
 * bytes of rest, the first also one of first (when not NULL).  shape is the
 * rule as the error shows it.
 */
struct name_rule {
    const char *noun;
    int max;
    const char *first, *rest, *shape;
};

#define LOWER_NAME_CHARS "abcdefghijklmnopqrstuvwxyz0123456789_"

static bool check_name(const struct name_rule *r, const char *v, char *err, size_t errlen)
{
    size_t len = strlen(v);
    if (len == 0 || len > (size_t)r->max || strspn(v, r->rest) != len ||
        (r->first != NULL && strchr(r->first, v[0]) == NULL)) {
        errf(err, errlen, "\"%.*s\" is not %s of 1..%d characters %s", ERR_VALUE_MAX, v, r->noun,
             r->max, r->shape);
        return false;
    }
    return true;
}

bool config_check_channel(const char *v, char *err, size_t errlen)
{
    static const struct name_rule channel = {
        "an identifier", CHANNEL_MAX, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_",
        "ABCDEFGHIJKLMNOPQRSTUVWXYZ" LOWER_NAME_CHARS, "[A-Za-z_][A-Za-z0-9_]*"
    };
    return check_name(&channel, v, err, errlen);
}

/* A publication: an identifier PostgreSQL keeps as written (bloomguard quotes it). */
bool config_check_ident(const char *v, char *err, size_t errlen)
{
    static const struct name_rule ident = {
        "a name", PG_IDENT_MAX, "abcdefghijklmnopqrstuvwxyz_", LOWER_NAME_CHARS, "[a-z_][a-z0-9_]*"
    };
    return check_name(&ident, v, err, errlen);
}

/* A slot name as PostgreSQL allows it ([a-z0-9_], at most 63), or "auto". */
bool config_check_slot(const char *v, char *err, size_t errlen)
{
    static const struct name_rule slot = {
        "a replication slot name", PG_IDENT_MAX, NULL, LOWER_NAME_CHARS, "[a-z0-9_] (or auto)"
    };
    return check_name(&slot, v, err, errlen);
}

