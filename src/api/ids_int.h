/*
 * What the ID endpoints' files share (api/ids.c, api/ids_body.c): the IDs
 * of a request body, read and checked, and the reply to a refused ID.
 */
#ifndef BLOOMGUARD_IDS_INT_H
#define BLOOMGUARD_IDS_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "api.h"
#include "idcodec.h"

/*
 * The IDs of a request body, validated.  JSON ids point into the parsed
 * document (kept in doc) or, for a body of one plain ID, into the body;
 * text ids point into the body.  Not to be copied: ids may point into it.
 */
struct idlist {
    size_t n;
    const char **ids;
    size_t *lens;
    json_t *doc;
    /* A request of one ID (the commonest POST /ids) keeps it here: no allocation. */
    const char *one_id;
    size_t one_len;
};

/*
 * Read the IDs of body (len bytes, of type t) into l: every ID checked
 * (id_check, max_id_bytes), at most max_batch of them; {"id":"..."} taken
 * too when allow_single.  Returns a reply with status 0 when l holds them
 * (idlist_free it), else the error reply (l then holds nothing).
 */
struct reply parse_ids(struct app *a, enum body_type t, const char *body, size_t len,
                       bool allow_single, struct idlist *l);
void idlist_free(struct idlist *l);

/* The reply to an ID refused by id_decode or id_check; where: appended to the message. */
struct reply id_error_reply(enum id_error e, const char *where);

#endif
