/*
 * The one reading of a hexadecimal digit, for everything that takes hex
 * from text: %XX in an ID, a PostgreSQL LSN, a uuid or a bytea.  Header
 * only, a table lookup, because the spellings read it once per byte on the
 * hot path.  Pure; thread-safe.
 */
#ifndef BLOOMGUARD_HEXDIGIT_H
#define BLOOMGUARD_HEXDIGIT_H

/* Digit values plus one, so that the zero fill means "not a hex digit". */
static const signed char hexdigit_table[256] = {
    ['0'] = 1, ['1'] = 2, ['2'] = 3, ['3'] = 4, ['4'] = 5, ['5'] = 6, ['6'] = 7, ['7'] = 8,
    ['8'] = 9, ['9'] = 10, ['a'] = 11, ['b'] = 12, ['c'] = 13, ['d'] = 14, ['e'] = 15,
    ['f'] = 16, ['A'] = 11, ['B'] = 12, ['C'] = 13, ['D'] = 14, ['E'] = 15, ['F'] = 16,
};

/* The value (0..15) of c as a hex digit (0-9, a-f, A-F), or -1 for any other byte. */
static inline int hexdigit_value(unsigned char c)
{
    return hexdigit_table[c] - 1;
}

#endif
