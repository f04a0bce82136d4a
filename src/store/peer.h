/*
 * The peer bootstrap's HTTP client: one GET of another bloomguard's
 * /snapshot/NAME, read straight from the socket by snapshot_read_fd.  Not
 * a general HTTP client: plain http, one request per connection, a body
 * with a Content-Length and nothing else (what GET /snapshot answers).  No
 * logging, no globals; any number of threads may call it at once.
 */
#ifndef BLOOMGUARD_PEER_H
#define BLOOMGUARD_PEER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "snapshot.h"

struct addrinfo;

/* Longest head (status line and headers) peer_fetch_snapshot accepts. */
#define PEER_MAX_HEAD 16384

/*
 * The bounds of one fetch (struct peer_limits gives others, for tests):
 *   - PEER_TIMEOUT_MS: connecting to one address, and each wait for bytes
 *     (a peer silent this long is gone);
 *   - the whole fetch, from the call to the last byte: PEER_SETUP_MS (the
 *     name lookup, the connection, the request and the answer's head) plus
 *     the advertised Content-Length at PEER_MIN_RATE bytes per second.  A
 *     1 GiB snapshot may so take 10 s + 1024 s; a peer trickling a byte
 *     every few seconds, each wait well within PEER_TIMEOUT_MS, is given up
 *     there rather than after hours.  Until the head has arrived the
 *     deadline is PEER_SETUP_MS alone.
 * Every wait wakes at least every PEER_POLL_MS to look at the deadline and
 * the stop flag.
 */
#define PEER_TIMEOUT_MS 10000
#define PEER_SETUP_MS 10000
#define PEER_MIN_RATE (1024u * 1024u)
#define PEER_POLL_MS 100

/* getaddrinfo's signature; the result is freed with freeaddrinfo. */
typedef int (*peer_resolve_fn)(const char *host, const char *port, const struct addrinfo *hints,
                               struct addrinfo **res);

/* Each field 0 or NULL: the default. */
struct peer_limits {
    int timeout_ms;             /* PEER_TIMEOUT_MS */
    int setup_ms;               /* PEER_SETUP_MS */
    uint64_t min_rate;          /* PEER_MIN_RATE, bytes per second */
    /*
     * Once true (any thread may set it), the fetch ends within about
     * PEER_POLL_MS, whatever it is waiting for: the daemon is stopping.
     */
    atomic_bool *stop;
    /* The name lookup; NULL: getaddrinfo.  For tests (a lookup that hangs). */
    peer_resolve_fn resolve;
};

/*
 * Fetch filter name's snapshot from a peer bloomguard: GET <base>/snapshot/<name>
 * (base "http://host[:port]", port 80 by default; host a name, IPv4 or [IPv6]),
 * with "Authorization: Bearer <token>" when token is not NULL, and read it
 * with snapshot_read_fd (which checks everything against expect), within
 * the bounds of lim (NULL: the defaults above).  Returns SNAPSHOT_OK (out
 * filled) or the status and why: SNAPSHOT_IO for name resolution,
 * connection, a wait that timed out, the whole fetch past its deadline
 * ("too slow: ..."), the stop flag ("interrupted: ..."), a non-200 answer
 * (say the status and the JSON error code if any), a missing or unparsable
 * Content-Length, chunked encoding (refused).
 *
 * A name (not an IPv4 or IPv6 address) is looked up on a thread of its
 * own, which the fetch abandons at the deadline or the stop: the system
 * resolver's wait (resolv.conf's timeout and attempts) cannot be cut short,
 * so that thread ends when the resolver gives up, and frees what it holds.
 * Another thread watches the connection meanwhile and shuts it down at the
 * deadline or the stop, so a read blocked inside snapshot_read_fd returns.
 *
 * why (whylen bytes, SNAPSHOT_WHY_LEN is enough) names the URL and never
 * the token.  out is left empty on failure (snapshot_release is safe on it).
 */
enum snapshot_status peer_fetch_snapshot(const char *base, const char *name, const char *token,
                                         const struct snapshot_expect *expect,
                                         const struct peer_limits *lim, struct snapshot *out,
                                         char *why, size_t whylen);

#endif
