/*
 * Fuzz json_escape_append, which puts client bytes (an ID) into JSON
 * answers: whatever the bytes, the output must parse back with jansson, to
 * the same bytes when they were UTF-8 and to U+FFFD per maximal ill-formed
 * subpart otherwise; the buffer bounds must hold exactly.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "idcodec.h"
#include "ref.h"

/* The text jansson should read back: ill-formed subparts become U+FFFD. */
static size_t ref_replace(const unsigned char *s, size_t len, unsigned char *out)
{
    size_t i = 0, o = 0, bad = 0;
    while (i < len) {
        size_t k = ref_utf8_seq(s + i, len - i, &bad);
        if (k > 0) {
            memcpy(out + o, s + i, k);
            o += k;
            i += k;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i += bad;
        }
    }
    return o;
}

#define PREFIX "{\"id\":\""

FUZZ_TARGET(json_escape)
{
    const char *s = (const char *)data;
    /* 6 output bytes per input byte is the worst case (\u00XX). */
    size_t cap = sizeof PREFIX - 1 + 6 * size + 2;
    char *out = malloc(cap);
    unsigned char *want = malloc(3 * size + 1);
    FUZZ_CHECK(out != NULL && want != NULL);

    /* Appends after what is there, leaving it alone. */
    memcpy(out, PREFIX, sizeof PREFIX - 1);
    size_t used = sizeof PREFIX - 1;
    FUZZ_CHECK(json_escape_append(out, cap - 2, &used, s, size));
    FUZZ_CHECK(used >= sizeof PREFIX - 1 + size && used <= cap - 2);
    FUZZ_CHECK(memcmp(out, PREFIX, sizeof PREFIX - 1) == 0);
    size_t body = used - (sizeof PREFIX - 1);
    const char *esc = out + sizeof PREFIX - 1;

    /* Valid UTF-8, no raw control bytes: safe in any JSON text. */
    FUZZ_CHECK(ref_utf8_valid((const unsigned char *)esc, body));
    for (size_t i = 0; i < body; i++)
        FUZZ_CHECK((unsigned char)esc[i] >= 0x20);

    /* jansson reads back the input, with U+FFFD for ill-formed bytes. */
    memcpy(out + used, "\"}", 2);
    json_error_t jerr;
    json_t *doc = json_loadb(out, used + 2, JSON_ALLOW_NUL, &jerr);
    FUZZ_CHECK(doc != NULL);
    json_t *v = json_object_get(doc, "id");
    FUZZ_CHECK(json_is_string(v));
    size_t wl = ref_replace(data, size, want);
    FUZZ_CHECK(json_string_length(v) == wl);
    FUZZ_CHECK(memcmp(json_string_value(v), want, wl) == 0);
    if (id_utf8_valid(s, size))
        FUZZ_CHECK(wl == size && memcmp(want, data, size) == 0);
    json_decref(doc);

    /* An exact fit succeeds; one byte less fails and leaves *used alone. */
    char *exact = malloc(body ? body : 1);
    FUZZ_CHECK(exact != NULL);
    size_t u = 0;
    FUZZ_CHECK(json_escape_append(exact, body, &u, s, size));
    FUZZ_CHECK(u == body && memcmp(exact, esc, body) == 0);
    if (body > 0) {
        u = 0;
        FUZZ_CHECK(!json_escape_append(exact, body - 1, &u, s, size));
        FUZZ_CHECK(u == 0);
    }
    u = 5;
    FUZZ_CHECK(!json_escape_append(exact, 4, &u, s, size) && u == 5);
    free(exact);
    free(out);
    free(want);
    return 0;
}
