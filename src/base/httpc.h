/*
 * bloomguard's HTTP client: libcurl, for a peer's snapshot (one bounded GET
 * whose body is handed on as it arrives) and for a long-lived streaming GET
 * (a replica following an upstream bloomguard): TLS verified against a CA
 * file, the admin token as a Bearer header, connect, stall and whole-transfer
 * bounds, a stop flag another thread sets, keep-alive between the requests
 * of one client, proxies from the environment (http_proxy, https_proxy,
 * no_proxy, as libcurl reads them), chunked bodies.  No logging, no globals;
 * curl_global_init is main.c's, before any thread starts.
 */
#ifndef BLOOMGUARD_HTTPC_H
#define BLOOMGUARD_HTTPC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Default bounds (struct httpc_opts gives others). */
#define HTTPC_CONNECT_MS 10000  /* the name lookup, TCP and the TLS handshake, together */
#define HTTPC_STALL_MS 10000    /* once connected: no byte of the answer for this long */
/* The stop flag and the deadlines are looked at least this often. */
#define HTTPC_POLL_MS 100
/* Bytes of a refusal's body read to name its JSON error code. */
#define HTTPC_ERROR_BODY 4096

/* One request's options; every field 0 or NULL: the default. */
struct httpc_opts {
    /*
     * PEM file of the CAs an https server's certificate must chain to (the
     * host name or address must match it too); NULL or "": the system's.
     */
    const char *ca_file;
    /*
     * Sent as "Authorization: Bearer <token>", but only over https or to a
     * loopback address (checked on the address connected to, so a name
     * or a proxy elsewhere is caught too); anything else is refused
     * before a byte of the request is sent (HTTPC_REFUSED).  NULL: none.
     */
    const char *token;
    const char *accept;         /* an Accept header; NULL: none */
    /* A body to POST (application/json, post_len bytes); NULL: the request is a GET. */
    const char *post;
    size_t post_len;
    const char *what;           /* what the body is, in reasons ("snapshot"); NULL: "body" */
    int connect_ms;             /* HTTPC_CONNECT_MS */
    int stall_ms;               /* HTTPC_STALL_MS */
    /* The answer's head must be in this long after the call; 0: no bound. */
    int head_ms;
    /*
     * With a Content-Length, the whole transfer must be over by head_ms
     * plus that length at min_rate bytes per second (a peer trickling a
     * byte a second, each within stall_ms, is given up there, not after
     * hours); 0: no bound but the stall.
     */
    uint64_t min_rate;
    /* Once true (any thread may set it) the request ends within HTTPC_POLL_MS. */
    atomic_bool *stop;
};

/* A 2xx answer's head, for the head callback. */
struct httpc_head {
    long status;
    bool has_length;            /* a Content-Length, not chunked */
    uint64_t length;
    bool chunked;
};

/*
 * Called once a 2xx answer's head is in, before any of its body: false
 * refuses the answer (HTTPC_HEAD), why (whylen bytes) saying why.
 */
typedef bool (*httpc_head_fn)(void *arg, const struct httpc_head *h, char *why, size_t whylen);
/* Each piece of a 2xx body, in order, chunked encoding undone: false ends it (HTTPC_BODY). */
typedef bool (*httpc_body_fn)(void *arg, const void *buf, size_t len);

enum httpc_status {
    HTTPC_OK = 0,
    HTTPC_BAD_URL,              /* not http:// or https://, user info in it, or not parsable */
    HTTPC_REFUSED,              /* the token would travel in clear (above) */
    HTTPC_CONNECT,              /* the name lookup or the connection failed or took too long */
    HTTPC_TLS,                  /* the handshake failed, or the certificate was not trusted */
    HTTPC_TIMEOUT,              /* a stall, the head's or the whole transfer's deadline */
    HTTPC_STOPPED,              /* the stop flag */
    HTTPC_STATUS,               /* a non-2xx answer */
    HTTPC_HEAD,                 /* the head callback refused the answer */
    HTTPC_BODY,                 /* the body callback ended it */
    HTTPC_TRUNCATED,            /* the connection ended inside the body */
    HTTPC_PROTOCOL,             /* the answer is not HTTP, or its framing is unusable */
    HTTPC_ERROR                 /* anything else: out of memory, a read error, ... */
};

/* A short name for a status ("timeout", "tls", ...): static. */
const char *httpc_strstatus(enum httpc_status st);

/*
 * One client: a libcurl handle and its connection cache, so that requests
 * made one after another to one server reuse the connection.  One thread
 * at a time; any number of clients in any number of threads.  NULL when
 * libcurl cannot make a handle.
 */
struct httpc *httpc_new(void);
/* NULL: no-op. */
void httpc_free(struct httpc *c);

/*
 * GET url (POST, when o->post is set).  A 2xx answer's head goes to head (NULL: accepted), its body to
 * body (NULL: dropped); arg is theirs.  A non-2xx answer is HTTPC_STATUS,
 * and why names its status and, for bloomguard's JSON errors, the error
 * code and message ("answered 401 unauthorized (...)").  Redirects are
 * not followed.  Returns HTTPC_OK when the whole body was delivered, else
 * the status and, in why (whylen bytes, 512 is enough), "<url>: <reason>":
 * the URL never holds the token, and neither does a reason.  On a return
 * other than HTTPC_OK the body callback may have had part of the body.
 */
enum httpc_status httpc_get(struct httpc *c, const char *url, const struct httpc_opts *o,
                            httpc_head_fn head, httpc_body_fn body, void *arg, char *why,
                            size_t whylen);

/*
 * Whether url is one httpc_get would try: http:// or https://, a host, no
 * user info.  *tls: https; *loopback: the host is 127.0.0.0/8, [::1] or
 * localhost (which libcurl resolves to those without asking DNS).  False
 * with why (whylen bytes) otherwise.  For configuration checks.
 */
bool httpc_url_check(const char *url, bool *tls, bool *loopback, char *why, size_t whylen);

/*
 * Whether ip (an address as text, as libcurl reports the one connected
 * to) is this host's loopback: 127.0.0.0/8, ::1, or ::ffff:127.x.y.z.  The
 * token's rule above asks this of the connection, never of the URL.
 */
bool httpc_addr_loopback(const char *ip);

#endif
