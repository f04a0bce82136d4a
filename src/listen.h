/*
 * Opening the listening socket ourselves, before libmicrohttpd takes it, so
 * that errors name the address and port 0 can be reported back; a unix
 * socket for a proxy on the same host.
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

/*
 * Bind a unix stream socket at path (a stale socket left there by a crash
 * is removed first; any other file is an error), make it mode 0660 so a
 * proxy in the daemon's group can connect (nginx: proxy_pass
 * http://unix:PATH:), and listen.  Returns the socket, or -1 with the
 * reason in err.  The caller closes it; the file stays until the next start
 * (or systemd's RuntimeDirectory= removal).
 */
int listen_unix(const char *path, char *err, size_t errlen);

/*
 * [server] listen as config.h keeps it: "unix:/path" goes to listen_unix
 * (*family AF_UNIX, *bound_port 0), anything else to listen_tcp.
 */
int listen_open(const char *host, unsigned port, int *family, unsigned *bound_port,
                char *err, size_t errlen);

#endif
