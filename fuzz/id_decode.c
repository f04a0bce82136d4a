/*
 * Fuzz id_decode, id_check and id_utf8_valid: the bytes of a request path
 * segment or a JSON/text ID, straight from the client.  Each answer is
 * compared with a model written from idcodec.h's contract, and every
 * decoded ID must survive a percent-encoding round trip.
 *
 * Input: byte 0 picks max_len, byte 1 the output buffer's size, the rest is
 * the raw ID.
 */
#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "fuzz.h"
#include "idcodec.h"
#include "ref.h"

/* The value of hex digit c, or -1 (found in a string, unlike idcodec.c's ranges). */
static int ref_hexval(unsigned char c)
{
    static const char digits[] = "0123456789abcdef";
    const char *p = c != 0 ? strchr(digits, tolower(c)) : NULL;
    return p != NULL ? (int)(p - digits) : -1;
}

/* id_decode as its header describes it: first problem left to right, then the whole. */
static enum id_error ref_decode(const unsigned char *s, size_t len, size_t max_len,
                                size_t outcap, unsigned char *out, size_t *outlen)
{
    size_t n = 0;
    *outlen = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned c = s[i];
        if (c == '%') {
            if (i + 2 >= len || ref_hexval(s[i + 1]) < 0 || ref_hexval(s[i + 2]) < 0)
                return ID_BAD_PERCENT;
            c = (unsigned)(ref_hexval(s[i + 1]) * 16 + ref_hexval(s[i + 2]));
            i += 2;
        }
        if (c == 0)
            return ID_NUL;
        if (n + 1 > max_len || n + 1 > outcap)
            return ID_TOO_LONG;
        out[n++] = (unsigned char)c;
    }
    if (n == 0)
        return ID_EMPTY;
    if (!ref_utf8_valid(out, n))
        return ID_BAD_UTF8;
    *outlen = n;
    return ID_OK;
}

static enum id_error ref_check(const unsigned char *s, size_t len, size_t max_len)
{
    if (len == 0)
        return ID_EMPTY;
    if (len > max_len)
        return ID_TOO_LONG;
    if (memchr(s, 0, len) != NULL)
        return ID_NUL;
    return ref_utf8_valid(s, len) ? ID_OK : ID_BAD_UTF8;
}

/* Percent-encode id[0..len) into out: every byte if all, else only '%'. */
static size_t encode(const unsigned char *id, size_t len, bool all, bool upper, char *out)
{
    const char *hex = upper ? "0123456789ABCDEF" : "0123456789abcdef";
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        if (all || id[i] == '%') {
            out[o++] = '%';
            out[o++] = hex[id[i] >> 4];
            out[o++] = hex[id[i] & 15];
        } else {
            out[o++] = (char)id[i];
        }
    }
    return o;
}

FUZZ_TARGET(id_decode)
{
    if (size < 2)
        return 0;
    /* Small limits hit the length checks often; one real limit. */
    size_t max_len = data[0] < 200 ? (size_t)data[0] % 40 + 1 : CONFIG_MAX_ID_BYTES;
    size_t outcap = data[1] < 128 ? max_len + 1 : (size_t)data[1] % 48;
    const unsigned char *src = data + 2;
    size_t len = size - 2;

    /* Exactly outcap bytes, so ASan sees any write past the end. */
    char *out = outcap ? malloc(outcap) : NULL;
    unsigned char *ref = malloc(len + 1);
    FUZZ_CHECK(ref != NULL && (outcap == 0 || out != NULL));
    size_t outlen = 12345, reflen;
    enum id_error e = id_decode((const char *)src, len, max_len, out, outcap, &outlen);
    enum id_error re = ref_decode(src, len, max_len, outcap, ref, &reflen);
    FUZZ_CHECK(e == re);
    if (e != ID_OK) {
        FUZZ_CHECK(outlen == 0);
        FUZZ_CHECK(outcap == 0 || out[0] == 0);
    } else {
        FUZZ_CHECK(outlen == reflen && outlen >= 1 && outlen <= max_len && outlen <= outcap);
        FUZZ_CHECK(memcmp(out, ref, outlen) == 0);
        FUZZ_CHECK(outlen == outcap || out[outlen] == 0);
        /* What decodes is a valid ID. */
        FUZZ_CHECK(id_check(out, outlen, max_len) == ID_OK);

        /* Encoded again, fully or minimally, in either case, it decodes to the same bytes. */
        char *enc = malloc(3 * outlen);
        char *back = malloc(outlen + 1);
        FUZZ_CHECK(enc != NULL && back != NULL);
        for (int mode = 0; mode < 3; mode++) {
            size_t el = encode((const unsigned char *)out, outlen, mode != 2, mode == 1, enc);
            size_t bl = 0;
            FUZZ_CHECK(id_decode(enc, el, max_len, back, outlen + 1, &bl) == ID_OK);
            FUZZ_CHECK(bl == outlen && memcmp(back, out, outlen) == 0 && back[bl] == 0);
        }
        free(enc);
        free(back);
    }

    /* Decoding in place gives what decoding elsewhere gives. */
    char *inplace = malloc(len + 1), *apart = malloc(len + 1);
    FUZZ_CHECK(inplace != NULL && apart != NULL);
    memcpy(inplace, src, len);
    size_t l1 = 0, l2 = 0;
    enum id_error e1 = id_decode(inplace, len, max_len, inplace, len + 1, &l1);
    enum id_error e2 = id_decode((const char *)src, len, max_len, apart, len + 1, &l2);
    FUZZ_CHECK(e1 == e2 && l1 == l2 && memcmp(inplace, apart, l1) == 0);
    free(inplace);
    free(apart);

    /* The same bytes as an already-decoded ID (JSON, text/plain). */
    FUZZ_CHECK(id_check((const char *)src, len, max_len) == ref_check(src, len, max_len));
    FUZZ_CHECK(id_utf8_valid((const char *)src, len) == ref_utf8_valid(src, len));
    FUZZ_CHECK(id_strerror(e) != NULL && id_error_code(e) != NULL);

    free(out);
    free(ref);
    return 0;
}
