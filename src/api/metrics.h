/*
 * The Prometheus exposition of GET /metrics (metrics.c), rendered from the
 * status snapshot (status.h) through one table of metric families.
 */
#ifndef BLOOMGUARD_METRICS_H
#define BLOOMGUARD_METRICS_H

#include <stdio.h>

#include "api.h"

/* GET /metrics: 404 with [metrics] enabled = no; 500 (resp NULL) out of memory. */
struct reply metrics_serve(struct app *a, const struct api_request *rq);

/*
 * Write every metric family, one a line, "  bloomguard_NAME TYPE  HELP",
 * in the order of the exposition (for bloomguard -h and docs.test).
 */
void metrics_list(FILE *out);

#endif
