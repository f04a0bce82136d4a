/*
 * TCP and unix listening sockets for the daemon (and the example service).
 */
#include "listen.h"

#include "sysgroup.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

int listen_tcp(const char *host, unsigned port, int *family, unsigned *bound_port,
               char *err, size_t errlen)
{
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE }, *ai = NULL;
    char portstr[8];
    snprintf(portstr, sizeof portstr, "%u", port);
    int rc = getaddrinfo(host, portstr, &hints, &ai);
    if (rc != 0) {
        snprintf(err, errlen, "listen %s: %s", host, gai_strerror(rc));
        return -1;
    }
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0
        || bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
        snprintf(err, errlen, "cannot listen on %s:%u: %s", host, port, strerror(errno));
        if (fd >= 0)
            close(fd);
        freeaddrinfo(ai);
        return -1;
    }
    *family = ai->ai_family;
    freeaddrinfo(ai);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    *bound_port = port;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
        *bound_port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                     : ((struct sockaddr_in *)&ss)->sin_port);
    return fd;
}

bool listen_group_id(const char *group, gid_t *gid, char *err, size_t errlen)
{
    return sysgroup_lookup("[server] listen_group", group, gid, err, errlen);
}

int listen_unix(const char *path, unsigned mode, gid_t gid, char *err, size_t errlen)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    struct stat st;
    if (strlen(path) >= sizeof sa.sun_path) {
        snprintf(err, errlen, "cannot listen on unix:%s: path too long", path);
        return -1;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    /* A previous run's socket (a crash, a kill -9); never another kind of file. */
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            snprintf(err, errlen, "cannot listen on unix:%s: a file that is not a socket is there",
                     path);
            return -1;
        }
        unlink(path);
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        snprintf(err, errlen, "cannot listen on unix:%s: %s", path, strerror(errno));
        goto fail;
    }
    /*
     * Group and mode between bind and listen: bind made the file under the
     * umask, but nothing can connect before listen, so no client ever sees
     * other permissions.  lchown, so a symlink swapped in meanwhile is not
     * followed.
     */
    if (gid != (gid_t)-1 && lchown(path, (uid_t)-1, gid) != 0) {
        int e = errno;
        snprintf(err, errlen, "cannot listen on unix:%s: cannot give it group %lu ([server] "
                 "listen_group): %s%s", path, (unsigned long)gid, strerror(e),
                 e == EPERM ? " (the daemon's user must be a member of the group)"
                 : e == EINVAL ? " (the group is not mapped in this user namespace: systemd's "
                                 "PrivateUsers=)" : "");
        goto unbind;
    }
    if (chmod(path, mode & 0777) != 0 || listen(fd, 1024) != 0) {
        snprintf(err, errlen, "cannot listen on unix:%s: %s", path, strerror(errno));
        goto unbind;
    }
    return fd;

unbind:
    unlink(path);
fail:
    if (fd >= 0)
        close(fd);
    return -1;
}

int listen_open(const char *host, unsigned port, unsigned unix_mode, const char *unix_group,
                int *family, unsigned *bound_port, char *err, size_t errlen)
{
    if (strncmp(host, "unix:", 5) != 0)
        return listen_tcp(host, port, family, bound_port, err, errlen);
    *family = AF_UNIX;
    *bound_port = 0;
    gid_t gid;
    char why[256];
    /* Before anything is bound or removed: a bad group leaves the path as it was. */
    if (!listen_group_id(unix_group, &gid, why, sizeof why)) {
        snprintf(err, errlen, "cannot listen on %s: %s", host, why);
        return -1;
    }
    return listen_unix(host + 5, unix_mode, gid, err, errlen);
}
