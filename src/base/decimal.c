/*
 * Plain decimal numbers (contract in decimal.h), parsed by hand rather than
 * with strtoull, which takes leading space, '+' and a '-' that negates, and
 * saturates on overflow unless every caller remembers to check ERANGE.
 */
#include "decimal.h"

#include <string.h>

enum decimal_status decimal_parse_u64n(const char *s, size_t n, uint64_t *out)
{
    uint64_t v = 0;
    if (s == NULL || n == 0)
        return DECIMAL_INVALID;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return DECIMAL_INVALID;
    for (size_t i = 0; i < n; i++) {
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return DECIMAL_RANGE;
        v = v * 10 + d;
    }
    *out = v;
    return DECIMAL_OK;
}

enum decimal_status decimal_parse_u64(const char *s, uint64_t *out)
{
    return s == NULL ? DECIMAL_INVALID : decimal_parse_u64n(s, strlen(s), out);
}
