/*
 * The admin endpoints (admin.c): handlers of routes that need the admin
 * right, named by routes.c's table.
 */
#ifndef BLOOMGUARD_ADMIN_H
#define BLOOMGUARD_ADMIN_H

#include "api.h"

/* POST /reload rebuilds every table, POST /reload/NAME that one: 202 with the rebuild ids. */
struct reply admin_reload(struct app *a, const struct api_request *rq);

/* GET /snapshot[/NAME]: the table's snapshot file, streamed (404 snapshots off, 503 none yet). */
struct reply admin_snapshot(struct app *a, const struct api_request *rq);

#endif
