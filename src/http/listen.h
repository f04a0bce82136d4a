/*
 * Opening the listening socket ourselves, before libmicrohttpd takes it, so
 * that errors name the address and port 0 can be reported back; a unix
 * socket for a proxy on the same host.
 */
#ifndef BLOOMGUARD_LISTEN_H
#define BLOOMGUARD_LISTEN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

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
 * [server] listen_group as chown takes it: "" (or NULL) leaves the group
 * the socket gets from the process, *gid = (gid_t)-1; all digits is that
 * gid, whether or not a group has it; anything else is a group name, looked
 * up (/etc/group, NSS).  Returns false with the reason in err for a name no
 * group has (e.g. "no group \"www-data\" on this system").  Thread-safe.
 */
bool listen_group_id(const char *group, gid_t *gid, char *err, size_t errlen);

/*
 * Bind a unix stream socket at path (a stale socket left there by a crash
 * is removed first; any other file is an error), give it group gid unless
 * gid is (gid_t)-1 and mode's permission bits (at most 0777), then listen:
 * until listen() a connect is refused, so no client ever reaches the socket
 * with other permissions.  A proxy needs write permission to connect
 * (nginx: proxy_pass http://unix:PATH:).  Returns the socket, or -1 with the
 * reason in err (the file is removed again then).  The caller closes it; the
 * file stays until the next start (or systemd's RuntimeDirectory= removal).
 */
int listen_unix(const char *path, unsigned mode, gid_t gid, char *err, size_t errlen);

/*
 * [server] listen as config.h keeps it: "unix:/path" goes to listen_unix
 * with unix_mode and unix_group (listen_group_id's text; *family AF_UNIX,
 * *bound_port 0), anything else to listen_tcp, which ignores both.
 */
int listen_open(const char *host, unsigned port, unsigned unix_mode, const char *unix_group,
                int *family, unsigned *bound_port, char *err, size_t errlen);

#endif
