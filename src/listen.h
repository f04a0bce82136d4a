/*
 * Opening the listening socket ourselves, before libmicrohttpd takes it, so
 * that errors name the address and port 0 can be reported back.
 */
#ifndef BLOOMGUARD_LISTEN_H
#define BLOOMGUARD_LISTEN_H

#include <stddef.h>

/*
 * Resolve host (a name, an IPv4 or an IPv6 address), bind port (0 picks a
 * free one) with SO_REUSEADDR and listen.  Returns the socket and sets
 * *family (AF_INET or AF_INET6) and *bound_port, or returns -1 with the
 * reason in err (e.g. "cannot listen on 127.0.0.1:8080: Address already in
 * use").  The caller closes the socket.
 */
int listen_tcp(const char *host, unsigned port, int *family, unsigned *bound_port,
               char *err, size_t errlen);

#endif
