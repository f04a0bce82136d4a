/*
 * What spell.c's dispatch and the per-type readers share (spell_number.c:
 * integers, uuid, numeric, float, bool, bytea; spell_time.c: dates, times,
 * intervals): the byte-level helpers, inline for the hot path, and each
 * reader's entry point.  Nothing outside them includes it, and it includes
 * no spell.h: the readers sit below the contract spell.c implements.
 */
#ifndef BLOOMGUARD_SPELL_INT_H
#define BLOOMGUARD_SPELL_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "hexdigit.h"
#include "spell_types.h"        /* enum spell_verdict, SPELL_SLACK */

static inline bool spell_is_space(unsigned char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

static inline bool spell_is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static inline unsigned char spell_lower(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? (unsigned char)(c + ('a' - 'A')) : c;
}

/*
 * Skip what the server's isspace() might skip from s[*i] on.  Bytes >= 0x80
 * are skipped too and flagged in *high: in the C and UTF-8 locales they are
 * no white space, so the server then stops there and refuses the input; a
 * single-byte locale may call one white space.  A parse that succeeds only
 * by skipping one is therefore MAYBE, and one that fails fails either way
 * (a non-space byte where white space or the end must be is a syntax error).
 */
static inline void spell_skip_space(const unsigned char *s, size_t len, size_t *i, bool *high)
{
    while (*i < len && (spell_is_space(s[*i]) || s[*i] >= 0x80)) {
        if (s[*i] >= 0x80)
            *high = true;
        (*i)++;
    }
}

/* The same from the end: the new end of s[start..*end). */
static inline void spell_trim_space(const unsigned char *s, size_t start, size_t *end, bool *high)
{
    while (*end > start && (spell_is_space(s[*end - 1]) || s[*end - 1] >= 0x80)) {
        if (s[*end - 1] >= 0x80)
            *high = true;
        (*end)--;
    }
}

/* pg_strncasecmp(s, word, strlen(word)) == 0 for s[0..len) not NUL-terminated. */
static inline bool spell_starts_with_ci(const unsigned char *s, size_t len, const char *word)
{
    size_t n = strlen(word);
    if (len < n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (spell_lower(s[i]) != (unsigned char)word[i])
            return false;
    return true;
}

/* Decimal digits of v into out (no sign); returns the length. */
static inline size_t spell_put_u64(char *out, uint64_t v)
{
    char tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    for (size_t i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    return n;
}

static inline enum spell_verdict spell_key_literal(const char *key, char *out, size_t *outlen)
{
    size_t n = strlen(key);
    memcpy(out, key, n);
    *outlen = n;
    return SPELL_KEY;
}

static inline enum spell_verdict spell_key_self(const unsigned char *s, size_t len, char *out,
                                                size_t *outlen)
{
    memcpy(out, s, len);
    *outlen = len;
    return SPELL_KEY;
}

/*
 * The readers spell_key dispatches to: s[0..len) is the ID, out has room
 * for spell_key_cap(t, len) bytes (spell_numeric is told cap), *outlen gets
 * the key's length when the verdict is SPELL_KEY.  Pure, thread-safe;
 * spell_float may change errno (spell_key restores it).
 */
enum spell_verdict spell_int(const unsigned char *s, size_t len, uint64_t posmax, char *out,
                             size_t *outlen);
enum spell_verdict spell_oid(const unsigned char *s, size_t len, char *out, size_t *outlen);
enum spell_verdict spell_uuid(const unsigned char *s, size_t len, char *out, size_t *outlen);
enum spell_verdict spell_numeric(const unsigned char *s, size_t len, char *out, size_t cap,
                                 size_t *outlen);
enum spell_verdict spell_float(const unsigned char *s, size_t len, bool single, char *out,
                               size_t *outlen);
enum spell_verdict spell_bool(const unsigned char *s, size_t len, char *out, size_t *outlen);
enum spell_verdict spell_bytea(const unsigned char *s, size_t len, char *out, size_t *outlen);
enum spell_verdict spell_date(const unsigned char *s, size_t len, char *out, size_t *outlen);
enum spell_verdict spell_timestamp(const unsigned char *s, size_t len, bool tz, char *out,
                                   size_t *outlen);
enum spell_verdict spell_time(const unsigned char *s, size_t len, char *out, size_t *outlen);
enum spell_verdict spell_interval(const unsigned char *s, size_t len, char *out, size_t *outlen);

#endif
