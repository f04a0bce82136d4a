/*
 * Fuzz id_next_line, which splits a text/plain body of POST /ids or POST
 * /exists into IDs: its answers must be exactly the lines a simple model
 * finds, pointing into the body.
 */
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "idcodec.h"

FUZZ_TARGET(id_lines)
{
    const char *body = (const char *)data;
    size_t pos = 0, start = 0;

    /* The model: split at '\n'; a '\r' right before it goes; empty lines are skipped. */
    while (start < size) {
        const char *nl = memchr(body + start, '\n', size - start);
        size_t end = nl ? (size_t)(nl - body) : size;
        size_t want = end - start;
        if (nl != NULL && want > 0 && body[end - 1] == '\r')
            want--;
        if (want > 0) {
            const char *id = NULL;
            size_t idlen = 0, before = pos;
            FUZZ_CHECK(id_next_line(body, size, &pos, &id, &idlen));
            FUZZ_CHECK(id == body + start && idlen == want);
            FUZZ_CHECK(pos > before && pos <= size);
            FUZZ_CHECK(memchr(id, '\n', idlen) == NULL);
        }
        start = end + 1;
    }
    /* Exhausted: false, and the out-parameters untouched. */
    const char *sentinel = "x", *id = sentinel;
    size_t idlen = 777;
    FUZZ_CHECK(!id_next_line(body, size, &pos, &id, &idlen));
    FUZZ_CHECK(id == sentinel && idlen == 777);
    size_t past = size + 1;
    FUZZ_CHECK(!id_next_line(body, size, &past, &id, &idlen));
    FUZZ_CHECK(id == sentinel && idlen == 777);
    return 0;
}
