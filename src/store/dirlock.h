/*
 * A daemon's claim on a directory it writes (the state directory of its
 * snapshots and POST logs, the directory of its published filters): an
 * open-file-description lock (F_OFD_SETLK) on <dir>/bloomguard.lock, held
 * for the daemon's life.  Whatever the daemon removes or replaces in such a
 * directory belongs to a run that is over only if the lock could be taken:
 * a second daemon started on the same directories (a second unit instance,
 * a test, `bloomguard -c` by hand) finds it held and refuses to start
 * instead of withdrawing the live daemon's files.  The kernel releases the
 * lock when the holder dies, however (kill -9 included): there is never a
 * stale lock to clear by hand.  The holder writes its pid into the file so
 * that the refusal can name it (an OFD lock has no owner the kernel could
 * report).
 */
#ifndef BLOOMGUARD_DIRLOCK_H
#define BLOOMGUARD_DIRLOCK_H

#include <stdbool.h>
#include <stddef.h>

/* The lock file's name in each directory locked. */
#define DIRLOCK_NAME "bloomguard.lock"

struct dirlock;

/*
 * Take dir's lock without waiting: create <dir>/DIRLOCK_NAME if need be
 * (mode 0644: anyone may read whose pid holds it; O_NOFOLLOW), lock it and
 * write this process's pid into it.  what names the directory in messages
 * ("[snapshot] path").  NULL with err when another process holds it (err
 * names the directory and the holder's pid) or it cannot be taken (err says
 * why); *held (may be NULL) is true in the first case only.  The lock is
 * not inherited by programs the process runs (O_CLOEXEC).  Thread-safe.
 */
struct dirlock *dirlock_take(const char *dir, const char *what, bool *held, char *err,
                             size_t errlen);

/*
 * Whether another process holds dir's lock, without taking it (F_OFD_GETLK:
 * so that a probe never makes a daemon starting at the same moment find the
 * lock held).  *pid gets the pid the holder wrote (0 when unknown).  False
 * when nobody holds it, or there is no lock file to hold.  Thread-safe.
 */
bool dirlock_holder(const char *dir, long *pid);

/*
 * Whether l is still the lock at its name: an operator who removed the file,
 * or a tmpfs mounted anew over the directory, would let a second daemon
 * take a fresh lock at the same name while l still holds the old one.  If
 * the name is gone or is another file, the lock is taken again at the name
 * (and the old one released): true, with what happened in msg (else msg is
 * "").  False, with msg, when it cannot be: another process holds the new
 * file (msg names its pid), or it cannot be made; l then keeps the old lock
 * and the caller must leave the directory to the holder.  One fstatat when
 * nothing changed: cheap enough for every tick.  Not thread-safe for one l.
 */
bool dirlock_check(struct dirlock *l, char *msg, size_t msglen);

/* The directory of l. */
const char *dirlock_dir(const struct dirlock *l);

/*
 * Release the lock and free l (the file stays: removing it would race a
 * daemon taking it).  NULL: no-op.
 */
void dirlock_free(struct dirlock *l);

#endif
