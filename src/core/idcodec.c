/*
 * Turning raw request bytes into IDs and IDs back into JSON text.  Kept apart
 * from the HTTP layer so every byte-level rule can be tested exhaustively, and
 * free of allocation because it runs once or more per request.
 */
#include "idcodec.h"

#include <stdint.h>
#include <string.h>

#include "hexdigit.h"

/* Each error's text for people and its code for clients (the JSON "error"). */
static const struct {
    const char *text, *code;
} id_errors[] = {
    [ID_OK] = { "ok", "ok" },
    [ID_EMPTY] = { "id is empty", "empty_id" },
    [ID_BAD_PERCENT] = { "malformed percent-encoding in id", "bad_percent_encoding" },
    [ID_NUL] = { "id contains a NUL byte", "nul_byte" },
    [ID_TOO_LONG] = { "id is longer than max_id_bytes", "id_too_long" },
    [ID_BAD_UTF8] = { "id is not valid UTF-8", "bad_utf8" },
};
/* A value added after ID_BAD_UTF8 must get its row here (and move this check). */
_Static_assert(sizeof id_errors / sizeof id_errors[0] == ID_BAD_UTF8 + 1, "a row per id_error");

static bool id_error_known(enum id_error e)
{
    return (unsigned)e < sizeof id_errors / sizeof id_errors[0];
}

const char *id_strerror(enum id_error e)
{
    return id_error_known(e) ? id_errors[e].text : "unknown id error";
}

const char *id_error_code(enum id_error e)
{
    return id_error_known(e) ? id_errors[e].code : "unknown";
}

/*
 * The well-formed UTF-8 lead bytes (Unicode's Table 3-7): how long the
 * sequence is and the second byte's range, which is where overlongs (E0,
 * F0), surrogates (ED) and code points above U+10FFFF (F4) are shut out.
 * Later bytes are 80..BF.
 */
static const struct {
    unsigned char first, last;      /* the lead bytes of the row */
    unsigned char need;             /* the sequence's length */
    unsigned char lo, hi;           /* the second byte's range */
} utf8_leads[] = {
    { 0xC2, 0xDF, 2, 0x80, 0xBF },
    { 0xE0, 0xE0, 3, 0xA0, 0xBF },
    { 0xE1, 0xEC, 3, 0x80, 0xBF },
    { 0xED, 0xED, 3, 0x80, 0x9F },
    { 0xEE, 0xEF, 3, 0x80, 0xBF },
    { 0xF0, 0xF0, 4, 0x90, 0xBF },
    { 0xF1, 0xF3, 4, 0x80, 0xBF },
    { 0xF4, 0xF4, 4, 0x80, 0x8F },
};

/*
 * Length of the well-formed UTF-8 sequence at p[0..n), or 0 if there is none;
 * then *bad is the length of the maximal ill-formed subpart (1..3), the unit
 * that Unicode recommends replacing with one U+FFFD.
 */
static size_t utf8_seq(const unsigned char *p, size_t n, size_t *bad)
{
    unsigned char c = p[0];
    size_t r = 0, rows = sizeof utf8_leads / sizeof utf8_leads[0];

    if (c < 0x80)
        return 1;
    while (r < rows && c > utf8_leads[r].last)
        r++;
    /* A continuation byte, C0, C1 or F5..FF as lead. */
    if (r == rows || c < utf8_leads[r].first) {
        *bad = 1;
        return 0;
    }
    if (n < 2 || p[1] < utf8_leads[r].lo || p[1] > utf8_leads[r].hi) {
        *bad = 1;
        return 0;
    }
    for (size_t k = 2; k < utf8_leads[r].need; k++) {
        if (k >= n || p[k] < 0x80 || p[k] > 0xBF) {
            *bad = k;
            return 0;
        }
    }
    return utf8_leads[r].need;
}

bool id_utf8_valid(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0, bad;

    while (i < len) {
        /* IDs are mostly ASCII: skip it eight bytes at a time. */
        while (len - i >= 8) {
            uint64_t w;
            memcpy(&w, p + i, sizeof w);
            if (w & UINT64_C(0x8080808080808080))
                break;
            i += 8;
        }
        if (i >= len)
            break;
        /* The tail of a short ID: a byte at a time, without a call for ASCII. */
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        size_t n = utf8_seq(p + i, len - i, &bad);
        if (n == 0)
            return false;
        i += n;
    }
    return true;
}

enum id_error id_decode(const char *src, size_t len, size_t max_len,
                        char *out, size_t outcap, size_t *outlen)
{
    const unsigned char *s = (const unsigned char *)src;
    /* The stricter of the two bounds; neither may ever be crossed. */
    size_t limit = max_len < outcap ? max_len : outcap;
    size_t n = 0;
    enum id_error err;

    if (len == 0) {
        err = ID_EMPTY;
        goto fail;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = s[i];
        if (c == '%') {
            int h, l;
            if (len - i < 3 || (h = hexdigit_value(s[i + 1])) < 0 ||
                (l = hexdigit_value(s[i + 2])) < 0) {
                err = ID_BAD_PERCENT;
                goto fail;
            }
            c = (unsigned char)(h << 4 | l);
            i += 2;
        }
        if (c == 0) {
            err = ID_NUL;
            goto fail;
        }
        if (n >= limit) {
            err = ID_TOO_LONG;
            goto fail;
        }
        out[n++] = (char)c;
    }
    if (!id_utf8_valid(out, n)) {
        err = ID_BAD_UTF8;
        goto fail;
    }
    if (n < outcap)
        out[n] = '\0';
    *outlen = n;
    return ID_OK;

fail:
    if (outcap > 0)
        out[0] = '\0';
    *outlen = 0;
    return err;
}

enum id_error id_check(const char *id, size_t len, size_t max_len)
{
    if (len == 0)
        return ID_EMPTY;
    if (len > max_len)
        return ID_TOO_LONG;
    if (memchr(id, '\0', len) != NULL)
        return ID_NUL;
    if (!id_utf8_valid(id, len))
        return ID_BAD_UTF8;
    return ID_OK;
}

bool id_next_line(const char *body, size_t len, size_t *pos,
                  const char **id, size_t *idlen)
{
    size_t p = *pos;

    while (p < len) {
        const char *start = body + p;
        const char *nl = memchr(start, '\n', len - p);
        size_t n = nl != NULL ? (size_t)(nl - start) : len - p;

        p += n + (nl != NULL);
        if (nl != NULL && n > 0 && start[n - 1] == '\r')
            n--;
        if (n > 0) {
            *pos = p;
            *id = start;
            *idlen = n;
            return true;
        }
    }
    *pos = p;
    return false;
}

bool json_escape_append(char *out, size_t cap, size_t *used,
                        const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    size_t o = *used, i = 0;

    if (o > cap)
        return false;
    while (i < len) {
        unsigned char c = p[i];
        char esc[6];
        const char *put = esc;
        size_t n, bad;

        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
            /* Copy the whole run of plain ASCII at once. */
            size_t j = i + 1;
            while (j < len && p[j] >= 0x20 && p[j] < 0x80 && p[j] != '"' && p[j] != '\\')
                j++;
            n = j - i;
            put = s + i;
            i = j;
        } else if (c >= 0x80) {
            n = utf8_seq(p + i, len - i, &bad);
            if (n > 0) {
                put = s + i;
                i += n;
            } else {
                put = "\xEF\xBF\xBD";
                n = 3;
                i += bad;
            }
        } else {
            esc[0] = '\\';
            n = 2;
            switch (c) {
            case '"':  esc[1] = '"'; break;
            case '\\': esc[1] = '\\'; break;
            case '\n': esc[1] = 'n'; break;
            case '\r': esc[1] = 'r'; break;
            case '\t': esc[1] = 't'; break;
            case '\b': esc[1] = 'b'; break;
            case '\f': esc[1] = 'f'; break;
            default:
                esc[1] = 'u';
                esc[2] = '0';
                esc[3] = '0';
                esc[4] = hex[c >> 4];
                esc[5] = hex[c & 0xF];
                n = 6;
                break;
            }
            i++;
        }
        if (cap - o < n)
            return false;
        memcpy(out + o, put, n);
        o += n;
    }
    *used = o;
    return true;
}
