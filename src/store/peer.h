/*
 * The peer bootstrap's fetch: one GET of another bloomguard's
 * /snapshot/NAME over http (loopback only) or https, through httpc.h, its
 * body handed as it arrives to snapshot_read_fd on another thread.  No
 * logging, no globals; any number of threads may call it at once.
 */
#ifndef BLOOMGUARD_PEER_H
#define BLOOMGUARD_PEER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "snapshot.h"

/*
 * The bounds of one fetch (struct peer_limits gives others, for tests):
 *   - PEER_TIMEOUT_MS: connecting (the name lookup, TCP and TLS), and,
 *     once connected, any wait for bytes (a peer silent this long is gone);
 *   - the whole fetch, from the call to the last byte: PEER_SETUP_MS (the
 *     connection, the request and the answer's head) plus the advertised
 *     Content-Length at PEER_MIN_RATE bytes per second.  A 1 GiB snapshot
 *     may so take 10 s + 1024 s; a peer trickling a byte every few seconds,
 *     each wait well within PEER_TIMEOUT_MS, is given up there rather than
 *     after hours.  Until the head has arrived the deadline is PEER_SETUP_MS
 *     alone.
 * The stop flag and the deadlines are looked at every HTTPC_POLL_MS (100 ms).
 */
#define PEER_TIMEOUT_MS 10000
#define PEER_SETUP_MS 10000
#define PEER_MIN_RATE (1024u * 1024u)

/* Each field 0 or NULL: the default. */
struct peer_limits {
    int timeout_ms;             /* PEER_TIMEOUT_MS */
    int setup_ms;               /* PEER_SETUP_MS */
    uint64_t min_rate;          /* PEER_MIN_RATE, bytes per second */
    /*
     * Once true (any thread may set it), the fetch ends within about
     * HTTPC_POLL_MS, whatever it is waiting for: the daemon is stopping.
     */
    atomic_bool *stop;
};

/*
 * Fetch filter name's snapshot from a peer bloomguard: GET <base>/snapshot/<name>
 * (base "http://host[:port]" or "https://host[:port]", a trailing slash
 * allowed), with "Authorization: Bearer <token>" when token is not NULL
 * (httpc's rule: only over https or to a loopback address), an https
 * peer's certificate checked against ca_file (NULL or "": the system's
 * CAs), and read it with snapshot_read_fd (which checks everything against
 * expect), within the bounds of lim (NULL: the defaults above).  Returns
 * SNAPSHOT_OK (out filled) or the status and why: what snapshot_read_fd
 * says of the body (SNAPSHOT_TRUNCATED when the peer hung up inside it),
 * else SNAPSHOT_IO for the URL, the connection, TLS, a wait that timed out,
 * the whole fetch past its deadline ("too slow: ..."), the stop flag
 * ("interrupted: ..."), a non-2xx answer (its status and JSON error code
 * if any), an answer without a Content-Length (chunked: refused, since
 * the reader must know the size before it trusts a length in the header).
 *
 * why (whylen bytes, SNAPSHOT_WHY_LEN is enough) names the URL and never
 * the token.  out is left empty on failure (snapshot_release is safe on it).
 */
enum snapshot_status peer_fetch_snapshot(const char *base, const char *name, const char *token,
                                         const char *ca_file,
                                         const struct snapshot_expect *expect,
                                         const struct peer_limits *lim, struct snapshot *out,
                                         char *why, size_t whylen);

#endif
