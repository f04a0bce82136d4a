/*
 * Turning raw request bytes into IDs: percent-decoding of path segments,
 * validation of IDs that arrive decoded (JSON, text/plain), splitting of
 * text/plain bodies into lines, and a JSON string escaper for responses.
 * Pure: no I/O, no logging, no globals, no allocation; every function is
 * reentrant and safe to call from any thread.
 */
#ifndef BLOOMGUARD_IDCODEC_H
#define BLOOMGUARD_IDCODEC_H

#include <stdbool.h>
#include <stddef.h>

/* Why an ID was rejected. */
enum id_error {
    ID_OK = 0,
    ID_EMPTY,        /* zero bytes long (after decoding) */
    ID_BAD_PERCENT,  /* '%' not followed by two hex digits */
    ID_NUL,          /* contains a 0 byte (e.g. "%00") */
    ID_TOO_LONG,     /* longer than max_len bytes (after decoding) */
    ID_BAD_UTF8      /* not well-formed UTF-8 */
};

/*
 * Short human text for e, e.g. "id is empty" (static storage, never NULL;
 * "unknown id error" for a value outside the enum).
 */
const char *id_strerror(enum id_error e);

/*
 * Stable machine code for e, for the JSON "error" member: "ok", "empty_id",
 * "bad_percent_encoding", "nul_byte", "id_too_long", "bad_utf8" (static
 * storage, never NULL; "unknown" for a value outside the enum).
 */
const char *id_error_code(enum id_error e);

/*
 * Percent-decode src[0..len) (src need not be NUL-terminated) into
 * out[0..outcap) and validate the result as an ID.
 *
 * '+' is NOT a space (path semantics).  '%' must be followed by two hex
 * digits in either case.  Every other byte is copied as is.
 *
 * The input is scanned left to right and the first problem found is
 * returned:
 *   ID_BAD_PERCENT  a '%' without two hex digits after it ("%zz", "%4", "%")
 *   ID_NUL          a decoded 0 byte ("%00", or a raw 0 byte in src)
 *   ID_TOO_LONG     the decoded ID would exceed max_len bytes, or would not
 *                   fit in outcap bytes; decoding stops there, so out is
 *                   never written past out[outcap - 1]
 * after which, on the complete result:
 *   ID_EMPTY        len == 0
 *   ID_BAD_UTF8     the decoded bytes are not well-formed UTF-8 (overlong
 *                   forms, surrogates U+D800..DFFF and code points above
 *                   U+10FFFF are rejected, as are truncated sequences)
 *
 * On ID_OK, out[0..*outlen) holds the decoded ID and out[*outlen] is 0 if
 * *outlen < outcap.  Pass outcap >= max_len + 1 to always get the
 * terminator.  On any error *outlen is 0, out[0] is 0 if outcap > 0, and
 * the rest of out[0..outcap) is unspecified.  outlen must not be NULL; out
 * may be NULL only if outcap is 0.  src may alias out (decoding never
 * lengthens), so a buffer can be decoded in place.
 */
enum id_error id_decode(const char *src, size_t len, size_t max_len,
                        char *out, size_t outcap, size_t *outlen);

/*
 * Validate an already-decoded ID id[0..len) (from JSON or text/plain): the
 * same rules as id_decode minus percent decoding, checked in this order:
 * ID_EMPTY, ID_TOO_LONG (len > max_len), ID_NUL, ID_BAD_UTF8.  '%' has no
 * special meaning here.
 */
enum id_error id_check(const char *id, size_t len, size_t max_len);

/*
 * True if s[0..len) is well-formed UTF-8 (Unicode 15, table 3-7): no
 * overlong forms, no surrogates, nothing above U+10FFFF, no truncated
 * sequence.  0 bytes are valid here (id_check rejects them separately).
 * The empty string is valid.
 */
bool id_utf8_valid(const char *s, size_t len);

/*
 * Iterate the IDs in a text/plain body body[0..len): one ID per line; a
 * line ends with "\n" or "\r\n" (only a '\r' directly before '\n' is
 * stripped; a '\r' anywhere else, including at the very end of a body
 * without a final newline, is part of the ID).  A final line without a
 * newline counts.  Empty lines, including "\r\n" alone and the "line" after
 * a trailing newline, are skipped.  Spaces and tabs are NOT trimmed.
 *
 * Start with *pos = 0.  Each call returning true sets *id to point into
 * body (not NUL-terminated, never empty) and *idlen to its length, and
 * advances *pos past the line.  Returns false, leaving *id and *idlen
 * untouched, once the body is exhausted (also if *pos >= len).  The IDs are
 * not validated: pass each to id_check.
 */
bool id_next_line(const char *body, size_t len, size_t *pos,
                  const char **id, size_t *idlen);

/*
 * Append s[0..len) as the body of a JSON string (without the surrounding
 * quotes) to out[*used..cap).
 *
 * '"' and '\\' are backslash-escaped; control bytes below 0x20 become
 * \n \r \t \b \f or \u00XX (lower-case hex); well-formed UTF-8 (including
 * 0x7F) is copied as is; each maximal ill-formed subsequence (as defined
 * by Unicode, e.g. a lone 0xFF or a truncated sequence) becomes U+FFFD
 * (bytes EF BF BD), so the output is always valid JSON and valid UTF-8.
 *
 * Returns true and advances *used by the bytes written if everything fits
 * (an exact fit, *used == cap afterwards, is fine).  Otherwise returns
 * false with *used unchanged; bytes at out[*used..cap) may have been
 * overwritten.  No NUL terminator is written.  Also returns false if
 * *used > cap.
 */
bool json_escape_append(char *out, size_t cap, size_t *used,
                        const char *s, size_t len);

#endif /* BLOOMGUARD_IDCODEC_H */
