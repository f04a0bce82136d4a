/*
 * The ID endpoints (ids.c): the handlers routes.c's table names for
 * /exists, /ids and /auth.
 */
#ifndef BLOOMGUARD_IDS_H
#define BLOOMGUARD_IDS_H

#include "api.h"

/*
 * The ID endpoints, exported for the fuzzers.  GET/HEAD /exists/{id}: rest
 * is the raw ID.  POST /exists and POST /ids: a body of ids, JSON
 * {"ids":[...]} (/ids also {"id":...}) or text/plain lines.  /auth: the
 * original URI from X-Original-URI, X-Forwarded-Uri or rest ([auth]
 * uri_source).
 */
struct reply ids_exists(struct app *a, const struct api_request *rq);
/* GET /exists/{id}'s fast form (api_fast_handler): 200 or 404 and the same body, or 0. */
unsigned ids_exists_fast(struct app *a, const char *rest, size_t rest_len, char *out, size_t cap,
                         size_t *len);
struct reply ids_exists_batch(struct app *a, const struct api_request *rq);
struct reply ids_insert(struct app *a, const struct api_request *rq);
/*
 * POST /ids's fast form (api_fast_body_handler): what ids_insert answers to
 * an insert it makes (200, or the insert's refusal), at once or, for a
 * durable table, later (API_LATER); 0 for every refusal before the insert
 * (the table's name, a replica's, the body's), which ids_insert gives.
 */
unsigned ids_insert_fast(struct app *a, const char *rest, size_t rest_len, enum body_type bt,
                         const char *body, size_t body_len, char *out, size_t cap, size_t *len,
                         struct api_fast_later *later);
struct reply ids_auth(struct app *a, const struct api_request *rq);
/* POST /absent[/{filter}]: ids as for POST /ids, each made a candidate to verify (table_report). */
struct reply ids_absent(struct app *a, const struct api_request *rq);

#endif
