/*
 * Reference models the harnesses compare the real code against.  They are
 * written differently on purpose (straight from Unicode's table 3-7 and the
 * header comments, slow and simple) so that one mistake is unlikely to be
 * made twice.
 */
#ifndef BLOOMGUARD_FUZZ_REF_H
#define BLOOMGUARD_FUZZ_REF_H

#include <stdbool.h>
#include <stddef.h>

/* Unicode 15 table 3-7: each lead byte range and the ranges of what follows. */
struct ref_utf8_row {
    unsigned char lead_lo, lead_hi;
    unsigned char n;                    /* bytes in the sequence */
    unsigned char lo[3], hi[3];         /* ranges of bytes 2..n */
};

static const struct ref_utf8_row ref_utf8_table[] = {
    { 0x00, 0x7F, 1, { 0 }, { 0 } },
    { 0xC2, 0xDF, 2, { 0x80 }, { 0xBF } },
    { 0xE0, 0xE0, 3, { 0xA0, 0x80 }, { 0xBF, 0xBF } },
    { 0xE1, 0xEC, 3, { 0x80, 0x80 }, { 0xBF, 0xBF } },
    { 0xED, 0xED, 3, { 0x80, 0x80 }, { 0x9F, 0xBF } },
    { 0xEE, 0xEF, 3, { 0x80, 0x80 }, { 0xBF, 0xBF } },
    { 0xF0, 0xF0, 4, { 0x90, 0x80, 0x80 }, { 0xBF, 0xBF, 0xBF } },
    { 0xF1, 0xF3, 4, { 0x80, 0x80, 0x80 }, { 0xBF, 0xBF, 0xBF } },
    { 0xF4, 0xF4, 4, { 0x80, 0x80, 0x80 }, { 0x8F, 0xBF, 0xBF } },
};

/*
 * Length of the well-formed sequence at p[0..n) (n >= 1), or 0; then *bad
 * is the length of the maximal subpart (>= 1): the longest prefix that
 * could still begin a well-formed sequence, or 1.
 */
static inline size_t ref_utf8_seq(const unsigned char *p, size_t n, size_t *bad)
{
    for (size_t r = 0; r < sizeof ref_utf8_table / sizeof ref_utf8_table[0]; r++) {
        const struct ref_utf8_row *row = &ref_utf8_table[r];
        if (p[0] < row->lead_lo || p[0] > row->lead_hi)
            continue;
        size_t k = 1;
        while (k < row->n && k < n && p[k] >= row->lo[k - 1] && p[k] <= row->hi[k - 1])
            k++;
        if (k == row->n)
            return k;
        *bad = k;
        return 0;
    }
    *bad = 1;
    return 0;
}

static inline bool ref_utf8_valid(const unsigned char *p, size_t n)
{
    size_t i = 0, bad;
    while (i < n) {
        size_t k = ref_utf8_seq(p + i, n - i, &bad);
        if (k == 0)
            return false;
        i += k;
    }
    return true;
}

#endif /* BLOOMGUARD_FUZZ_REF_H */
