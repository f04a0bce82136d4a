/* TEMP stub until the peer branch lands */
#ifndef BLOOMGUARD_PEER_H
#define BLOOMGUARD_PEER_H
#include "snapshot.h"
enum snapshot_status peer_fetch_snapshot(const char *base, const char *name, const char *token,
                                         const struct snapshot_expect *expect, int timeout_ms,
                                         struct snapshot *out, char *why, size_t whylen);
#endif
