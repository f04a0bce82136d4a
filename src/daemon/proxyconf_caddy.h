/*
 * The Caddy writer of the proxy configuration (proxyconf_caddy.c), one
 * layer above proxyconf_parts.h and below proxyconf.c, which calls it after
 * its checks.  Private to proxyconf*.c: the tree calls proxyconf_write.
 */
#ifndef BLOOMGUARD_PROXYCONF_CADDY_H
#define BLOOMGUARD_PROXYCONF_CADDY_H

#include <stdio.h>

#include "config.h"

/*
 * The Caddyfile of c to f.  c must have passed proxyconf_check for
 * PROXYCONF_CADDY (its templates are UTF-8); write errors are left in
 * ferror(f).  Thread-safe on a c no one writes.
 */
void proxyconf_caddy_write(FILE *f, const struct config *c);

#endif /* BLOOMGUARD_PROXYCONF_CADDY_H */
