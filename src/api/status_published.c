/*
 * A table's published file in /stats (status.h): apart from status.c,
 * which holds every other section, so that the figures of issue 39 (is
 * the filter in huge pages?) need no room there.
 */
#include "status.h"

#include <jansson.h>

struct json_t *status_published_json(const struct status_filter *f)
{
    if (!f->published)
        return json_null();
    return json_pack("{s:s, s:I, s:I, s:I, s:I, s:I}", "path", f->pub.path,
                     "generation", (json_int_t)f->pub.generation,
                     "generations", (json_int_t)f->pub.generations,
                     "withdrawn", (json_int_t)f->pub.withdrawn,
                     "resident_bytes", (json_int_t)f->pub.resident_bytes,
                     "huge_bytes", (json_int_t)f->pub.huge_bytes);
}
