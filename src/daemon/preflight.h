/*
 * What `bloomguard -t` checks beyond the configuration's syntax, as nginx -t
 * and pgbouncer do: what can be known offline (the conninfo parses, the
 * directories exist and are writable, secrets are not readable by others)
 * and, with --connect, what needs the server (each table and column exists
 * and may be read, and what its follower needs: docs/follow.md).
 */
#ifndef BLOOMGUARD_PREFLIGHT_H
#define BLOOMGUARD_PREFLIGHT_H

#include <stdbool.h>
#include <stdio.h>

#include "config.h"

/*
 * The offline checks of c, read from config_file (NULL: built-in defaults;
 * its permissions matter when the conninfo holds a password).  Each finding
 * is one line on out, "bloomguard: error: ..." or "bloomguard: warning:
 * ...", naming the key or file and the fix.  Returns the number of errors
 * (warnings do not count: a directory a running daemon holds, dirlock.h,
 * is a warning).  Reads the environment (STATE_DIRECTORY,
 * RUNTIME_DIRECTORY for the "auto" paths); otherwise thread-safe.
 */
unsigned preflight_offline(const struct config *c, const char *config_file, FILE *out);

/*
 * The unix socket's settings ([server] listen = unix:/path, listen_group,
 * listen_mode), checked by preflight_offline and again at start before
 * anything is opened.  Returns false with the error in err when
 * listen_group names no group; sets warn to a warning when listen_mode lets
 * every local user connect (o+w), else to "".  Always true, warn "", for a
 * TCP listen.  Thread-safe.
 */
bool preflight_listen(const struct config *c, char *err, size_t errlen, char *warn, size_t warnlen);

/*
 * Whether every filter of method upstream has an upstream to follow ([sync]
 * upstream): false with the error in err if not (checked by
 * preflight_offline and at start, once the file and the overrides are all
 * read).  *replica_only (may be NULL): every filter follows an upstream, so
 * the daemon needs no [postgres] section and never connects to PostgreSQL.
 * Thread-safe.
 */
bool preflight_upstream(const struct config *c, bool *replica_only, char *err, size_t errlen);

/*
 * The checks that need the server: connects as the daemon would, then for
 * each filter whether its table and column exist and may be read, and (with
 * [sync] enabled) what its follower needs of the server: the method the
 * daemon would choose (for auto a plain line says which and why; none is a
 * warning), and that method's prerequisites (an explicit method's are
 * errors).  Method logical also opens, and closes, a replication
 * connection; nothing is created on the server.  Findings and return value
 * as preflight_offline.
 */
unsigned preflight_connect(const struct config *c, FILE *out);

/*
 * What `bloomguard -t` and `--drop-slot`, run by hand, take from the
 * packaged unit, so that they see what its service sees: when PGPASSFILE
 * is not set, the password file beside the configuration file (the unit
 * hands <its directory>/pgpass to the service as PGPASSFILE) if it exists;
 * when [snapshot] path = auto and STATE_DIRECTORY is not set, the unit's
 * state directory (PREFLIGHT_UNIT_STATE_DIR) if it exists, where the
 * service keeps the name of its slot.  config_file NULL: the default
 * configuration's directory (dflt_dir).  Sets those variables (setenv:
 * call before other threads run); one line on out for each.
 */
#define PREFLIGHT_UNIT_STATE_DIR "/var/lib/bloomguard"
void preflight_unit_environment(const struct config *c, const char *config_file,
                                const char *dflt_dir, FILE *out);

/*
 * `bloomguard --drop-slot`: drop the permanent replication slot this
 * configuration's daemon keeps (method logical: [sync] slot, or the name
 * kept in <snapshot path>/logical-slot for slot = auto), so that a retired
 * daemon holds no WAL on the primary.  The daemon must be stopped: an active
 * slot is refused.  One line on out says what was done (with no slot
 * known, where it looked).  Returns 0 (dropped,
 * or there is no such slot) or 1 (no slot configured, cannot connect,
 * refused).
 */
int preflight_drop_slot(const struct config *c, FILE *out);

#endif
