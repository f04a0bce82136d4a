/*
 * The one parser of plain unsigned decimal numbers (configuration values,
 * HTTP Content-Length, numbers PostgreSQL returns as text): digits only, no
 * sign, no space, no base prefix, and a value too large for 64 bits is an
 * error, never a saturated or wrapped number.  Pure; thread-safe.
 */
#ifndef BLOOMGUARD_DECIMAL_H
#define BLOOMGUARD_DECIMAL_H

#include <stddef.h>
#include <stdint.h>

enum decimal_status {
    DECIMAL_OK = 0,
    DECIMAL_INVALID,            /* empty, or a byte that is not a digit */
    DECIMAL_RANGE               /* digits, but more than UINT64_MAX */
};

/*
 * Parse the n bytes at s (need not be NUL-terminated) as a decimal number
 * into *out.  *out is written only on DECIMAL_OK.
 */
enum decimal_status decimal_parse_u64n(const char *s, size_t n, uint64_t *out);

/* The same for the NUL-terminated string s; NULL is DECIMAL_INVALID. */
enum decimal_status decimal_parse_u64(const char *s, uint64_t *out);

#endif
