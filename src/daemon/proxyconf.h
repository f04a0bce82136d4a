/*
 * The reverse-proxy configuration bloomguard's own configuration implies:
 * the nginx snippet and the Caddyfile of `bloomguard --print-nginx` and
 * `--print-caddy`, whose ID-extracting maps hold one line per [auth]
 * uri_template, so an operator regenerates them instead of editing regexps
 * by hand.  Pure: reads a struct config, writes text, nothing else.
 */
#ifndef BLOOMGUARD_PROXYCONF_H
#define BLOOMGUARD_PROXYCONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "config.h"
/* enum proxyconf_kind and the PROXYCONF_* placeholder addresses. */
#include "proxyconf_parts.h"

/*
 * "nginx" -> PROXYCONF_NGINX, "caddy" -> PROXYCONF_CADDY: true and *kind
 * set; false for anything else (*kind untouched).
 */
bool proxyconf_kind_parse(const char *name, enum proxyconf_kind *kind);

/*
 * Whether the proxy can serve c.  False with one line in err (config.h's
 * convention: no newline, truncated to errlen) when it cannot:
 *   - no [auth] uri_template (nothing to guard);
 *   - [auth] uri_source = path (both proxies send the URI in a header:
 *     the message names the value to set);
 *   - [server] listen with port 0 (the proxy needs bloomguard's real port);
 *   - for Caddy, a template that is not UTF-8 (Go regexps match runes).
 * uri_source = auto is served (the proxy overwrites the header it sets) and
 * the written file asks for it to be pinned.  Thread-safe on a c no one
 * writes.
 */
bool proxyconf_check(const struct config *c, enum proxyconf_kind kind, char *err, size_t errlen);

/*
 * Write the configuration for kind to out: for nginx a file for the http {}
 * block (upstreams, maps, one server), for Caddy a whole Caddyfile (a site
 * and the relay site it asks).  What it takes from c: the templates and
 * their filters' names, [server] listen as bloomguard's address (a wildcard
 * host becomes the loopback address of its family), connection_timeout (the
 * proxy's idle keep-alive to bloomguard stays shorter), [auth] uri_source
 * (which header carries the URI), deny_status and fail_open (the error
 * handling: fail open, or answer 503 when bloomguard cannot be asked).  The
 * output depends on c alone (no dates, no version), so it can be compared
 * with a shipped copy.
 *
 * Checks c first (proxyconf_check) and writes nothing when it fails.
 * Returns false with err set on a refusal or when writing to out failed
 * (ferror; out is not flushed or closed here).
 */
bool proxyconf_write(FILE *out, const struct config *c, enum proxyconf_kind kind,
                     char *err, size_t errlen);

/*
 * proxyconf_write into a new NUL-terminated buffer, which the caller
 * frees; NULL with err set on a refusal or when memory runs out.
 */
char *proxyconf_render(const struct config *c, enum proxyconf_kind kind, char *err, size_t errlen);

#endif /* BLOOMGUARD_PROXYCONF_H */
