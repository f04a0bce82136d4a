/*
 * The lock that makes a directory one daemon's (dirlock.h): an OFD lock,
 * because it belongs to the open file rather than to the process (no
 * close() of another descriptor of the same file elsewhere in the process
 * can drop it) and is still released by the kernel when the process dies.
 */
#include "dirlock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "durable.h"

struct dirlock {
    int fd;
    dev_t dev;
    ino_t ino;
    bool lost;                  /* the last check could not take it again (already said) */
    char *what;
    char *dir;
    char path[];
};

/* A lock file at path: a regular file, never through a symbolic link, never a FIFO's wait. */
static int open_lock(const char *path, int flags)
{
    int fd = open(path, flags | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0644);
    struct stat st;
    if (fd < 0)
        return -1;
    int e = fstat(fd, &st) != 0 ? errno : !S_ISREG(st.st_mode) ? EINVAL : 0;
    if (e != 0) {
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/*
 * The pid the holder wrote.  It writes it right after taking the lock, so a
 * daemon started in that instant may read the file before it does: a few
 * tries, 100 ms in all, then 0 (unknown).
 */
static long read_pid(int fd)
{
    for (int i = 0; i < 20; i++) {
        char buf[32];
        ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
        if (n > 0) {
            buf[n] = '\0';
            char *end;
            long pid = strtol(buf, &end, 10);
            if (end != buf && *end == '\n' && pid > 0)
                return pid;
        }
        nanosleep(&(struct timespec){ 0, 5000000L }, NULL);
    }
    return 0;
}

/* Whether another process holds the lock file at path (F_OFD_GETLK: never taking it). */
static bool dirlock_holder_of(const char *path, long *pid)
{
    *pid = 0;
    int fd = open_lock(path, O_RDONLY);
    if (fd < 0)
        return false;
    struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0 };
    bool held = fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
    if (held)
        *pid = read_pid(fd);
    close(fd);
    return held;
}

/*
 * Lock the file at path, made if missing, and write our pid into it.
 * 0 with *fd, *st; EAGAIN with *holder when another process holds it;
 * else an errno value.
 */
static int take_at(const char *path, int *fd, struct stat *st, long *holder)
{
    /* An operator removing the file between our open and our lock: lock the file at the name. */
    for (int tries = 0; tries < 10; tries++) {
        int f = open_lock(path, O_RDWR | O_CREAT);
        if (f < 0 && errno == EACCES) {
            /*
             * Another user's file (root ran the daemon by hand here once):
             * held, it is that daemon's; free, it is a stale file that
             * this user, owner of the directory, may replace.
             */
            if (dirlock_holder_of(path, holder))
                return EAGAIN;
            if (unlink(path) != 0 && errno != ENOENT)
                return EACCES;
            continue;
        }
        if (f < 0)
            return errno;
        struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0 };
        if (fcntl(f, F_OFD_SETLK, &fl) != 0) {
            int e = errno == EACCES || errno == EAGAIN ? EAGAIN : errno;
            if (e == EAGAIN)
                *holder = read_pid(f);
            close(f);
            return e;
        }
        struct stat at;
        if (fstat(f, st) != 0 || stat(path, &at) != 0 || at.st_dev != st->st_dev
            || at.st_ino != st->st_ino) {
            close(f);
            continue;
        }
        /*
         * The number first, then the length: a reader sees a whole number
         * ended by a newline at any moment (the old holder's, at worst,
         * for an instant).
         */
        char buf[32];
        int n = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
        int e = durable_write_all(f, buf, (size_t)n, 0);
        if (e == 0 && ftruncate(f, n) != 0)
            e = errno;
        if (e != 0) {
            close(f);
            return e;
        }
        *fd = f;
        return 0;
    }
    return EAGAIN;
}

static void say_held(char *out, size_t outlen, const char *what, const char *dir,
                     const char *path, long pid)
{
    char who[48] = "pid unknown";
    if (pid > 0)
        snprintf(who, sizeof who, "pid %ld", pid);
    snprintf(out, outlen, "%s %s is in use by another bloomguard (%s, which holds %s): a second "
             "daemon on the same directory would withdraw or overwrite the files the first one "
             "serves; stop that one first, or give this one directories of its own", what, dir,
             who, path);
}

struct dirlock *dirlock_take(const char *dir, const char *what, bool *held, char *err,
                             size_t errlen)
{
    size_t dlen = strlen(dir);
    while (dlen > 1 && dir[dlen - 1] == '/')
        dlen--;
    struct dirlock *l = calloc(1, sizeof *l + dlen + sizeof "/" DIRLOCK_NAME);
    if (held != NULL)
        *held = false;
    if (l == NULL || (l->what = strdup(what)) == NULL || (l->dir = strndup(dir, dlen)) == NULL) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    snprintf(l->path, dlen + sizeof "/" DIRLOCK_NAME, "%s/%s", l->dir, DIRLOCK_NAME);
    struct stat st;
    long pid = 0;
    int e = take_at(l->path, &l->fd, &st, &pid);
    if (e == EAGAIN) {
        if (held != NULL)
            *held = true;
        say_held(err, errlen, what, l->dir, l->path, pid);
        goto fail;
    }
    if (e != 0) {
        snprintf(err, errlen, "%s %s: cannot take its lock %s: %s (the daemon must own the "
                 "directory)", what, l->dir, l->path, strerror(e));
        goto fail;
    }
    l->dev = st.st_dev;
    l->ino = st.st_ino;
    return l;
fail:
    if (l != NULL) {
        free(l->what);
        free(l->dir);
    }
    free(l);
    return NULL;
}

bool dirlock_holder(const char *dir, long *pid)
{
    char path[4096];
    *pid = 0;
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, DIRLOCK_NAME) >= sizeof path)
        return false;
    return dirlock_holder_of(path, pid);
}

bool dirlock_check(struct dirlock *l, char *msg, size_t msglen)
{
    struct stat st;
    msg[0] = '\0';
    if (fstatat(AT_FDCWD, l->path, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_dev == l->dev
        && st.st_ino == l->ino)
        return true;
    int fd;
    long pid = 0;
    int e = take_at(l->path, &fd, &st, &pid);
    if (e == 0) {
        close(l->fd);
        l->fd = fd;
        l->dev = st.st_dev;
        l->ino = st.st_ino;
        l->lost = false;
        snprintf(msg, msglen, "%s %s: its lock file %s was removed or replaced (by hand, or the "
                 "directory was mounted anew): taken again", l->what, l->dir, l->path);
        return true;
    }
    if (!l->lost) {
        if (e == EAGAIN) {
            char who[48] = "pid unknown";
            if (pid > 0)
                snprintf(who, sizeof who, "pid %ld", pid);
            snprintf(msg, msglen, "%s %s: its lock file %s was removed or replaced, and another "
                     "bloomguard (%s) took the directory meanwhile: this daemon leaves it to that "
                     "one (stop one of the two)", l->what, l->dir, l->path, who);
        } else {
            snprintf(msg, msglen, "%s %s: its lock file %s was removed or replaced, and cannot "
                     "be taken again: %s", l->what, l->dir, l->path, strerror(e));
        }
    }
    l->lost = true;
    return false;
}

const char *dirlock_dir(const struct dirlock *l)
{
    return l->dir;
}

void dirlock_free(struct dirlock *l)
{
    if (l == NULL)
        return;
    close(l->fd);
    free(l->what);
    free(l->dir);
    free(l);
}
