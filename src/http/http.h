/*
 * The HTTP server: libmicrohttpd with an epoll thread pool, request bodies
 * and limits, routing by routes.c's route table (which also holds what each
 * route needs: methods, admin token, body).
 */
#ifndef BLOOMGUARD_HTTP_H
#define BLOOMGUARD_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#include "app.h"

struct http;

/*
 * Bind [server] listen and start serving a.  Writes the reason to err and
 * returns NULL on failure (e.g. "127.0.0.1:8080: Address already in use").
 */
struct http *http_start(struct app *a, char *err, size_t errlen);

/* The bound port (useful with port 0). */
unsigned http_port(const struct http *h);

/* Stop accepting new connections (in-flight requests still finish). */
void http_quiesce(struct http *h);

/* Finish in-flight requests, close everything and free h.  NULL is a no-op. */
void http_stop(struct http *h);

#endif
