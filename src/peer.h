/*
 * The peer bootstrap's HTTP client: one blocking GET of another bloomguard's
 * /snapshot/NAME, read straight from the socket by snapshot_read_fd.  Not
 * a general HTTP client: plain http, one request per connection, a body
 * with a Content-Length and nothing else (what GET /snapshot answers).  No
 * logging, no globals; any number of threads may call it at once.
 */
#ifndef BLOOMGUARD_PEER_H
#define BLOOMGUARD_PEER_H

#include <stddef.h>

#include "snapshot.h"

/* Longest head (status line and headers) peer_fetch_snapshot accepts. */
#define PEER_MAX_HEAD 16384

/*
 * Fetch filter name's snapshot from a peer bloomguard: GET <base>/snapshot/<name>
 * (base "http://host[:port]", port 80 by default; host a name, IPv4 or [IPv6]),
 * with "Authorization: Bearer <token>" when token is not NULL, and read it
 * with snapshot_read_fd (which checks everything against expect).  timeout_ms
 * (at least 1) bounds connecting and each wait for bytes.  Returns SNAPSHOT_OK
 * (out filled) or the status and why: SNAPSHOT_IO for name resolution,
 * connection, timeout, a non-200 answer (say the status and the JSON error
 * code if any), a missing or unparsable Content-Length, chunked encoding
 * (refused).
 *
 * Name resolution (getaddrinfo) waits as long as the system resolver does
 * (resolv.conf's timeout and attempts), not timeout_ms: give an address to
 * bound it.
 *
 * why (whylen bytes, SNAPSHOT_WHY_LEN is enough) names the URL and never
 * the token.  out is left empty on failure (snapshot_release is safe on it).
 */
enum snapshot_status peer_fetch_snapshot(const char *base, const char *name, const char *token,
                                         const struct snapshot_expect *expect, int timeout_ms,
                                         struct snapshot *out, char *why, size_t whylen);

#endif
