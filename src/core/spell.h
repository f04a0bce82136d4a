/*
 * How an ID is looked up, by the type of the guarded column.  The service
 * behind bloomguard hands the ID to PostgreSQL (`WHERE col = $1`), whose
 * input function accepts many spellings of one value ("0005", " 5", "+5");
 * comparing the request's bytes with the column's text form would deny
 * those.  spell_key maps a request and a row alike to the bytes to hash, so
 * that equal values give equal keys, or says that no key can be trusted.
 * Pure: no I/O, no allocation, no globals; every function is reentrant.
 */
#ifndef BLOOMGUARD_SPELL_H
#define BLOOMGUARD_SPELL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spell_types.h"        /* enum spell_verdict, SPELL_SLACK */

/*
 * What is known of a column's type, for spelling.  What each does is the
 * table in spell_key's comment.
 */
enum spell_type {
    SPELL_TEXT = 0,     /* text, varchar (deterministic collation) */
    SPELL_NAME,         /* name (truncated to 63 bytes on input) */
    SPELL_BPCHAR,       /* char(n): trailing spaces do not count */
    SPELL_COLLATED,     /* text-like under a nondeterministic collation */
    SPELL_INT2,
    SPELL_INT4,
    SPELL_INT8,
    SPELL_OID,
    SPELL_UUID,
    SPELL_NUMERIC,
    SPELL_FLOAT4,
    SPELL_FLOAT8,
    SPELL_BOOL,
    SPELL_DATE,
    SPELL_TIMESTAMP,
    SPELL_TIMESTAMPTZ,
    SPELL_TIME,
    SPELL_INTERVAL,
    SPELL_BYTEA,
    SPELL_OTHER         /* any other type: never denied */
};
#define SPELL_NTYPES (SPELL_OTHER + 1)

/*
 * The spelling of a column from the catalog: base_oid is the OID of the
 * column's type, or for a domain that of its base type (resolved through
 * domains over domains); typmod its atttypmod (unused today: the service's
 * `col = $1` gives the parameter typmod -1, so char(n), numeric(p,s) and
 * timestamp(p) compare the request unrounded and untruncated);
 * deterministic is false when the column's collation is nondeterministic
 * (pg_collation.collisdeterministic), which only matters for text-like
 * types: an ICU case- or accent-insensitive collation makes "ABC" equal
 * "abc", which no byte comparison can know, so such a column is
 * SPELL_COLLATED and every lookup is MAYBE.  Unknown OIDs (citext, inet,
 * jsonb, enums, arrays, ...) are SPELL_OTHER.
 */
enum spell_type spell_type_of(uint32_t base_oid, int32_t typmod, bool deterministic);

/*
 * Stable names for /stats and logs: "text", "name", "bpchar",
 * "text_nondeterministic", "int2", "int4", "int8", "oid", "uuid", "numeric",
 * "float4", "float8", "bool", "date", "timestamp", "timestamptz", "time",
 * "interval", "bytea", "other" ("unknown" outside the enum); static storage.
 */
const char *spell_type_name(enum spell_type t);

/* "key", "not_a_value", "maybe" ("unknown" outside the enum); static storage. */
const char *spell_verdict_name(enum spell_verdict v);

/*
 * The output capacity spell_key needs for an input of len bytes of type t:
 * 2 * len + 2 for bytea (the escape format "ab" becomes "\x6162"),
 * len + 4 * SPELL_SLACK for interval, len + SPELL_SLACK for every other
 * type.  Never more than 2 * len + 4 * SPELL_SLACK.
 */
size_t spell_key_cap(enum spell_type t, size_t len);

/*
 * The one rule, used on both sides: for a request's ID and for each row's
 * `col::text` (under LOADER_SESSION_SETTINGS).  in[0..len) need not be
 * NUL-terminated and must not overlap out[0..cap).  Returns:
 *
 *   SPELL_KEY          out[0..*outlen) is the key: a request and a row of
 *                      equal value (by the column type's `=`) give equal
 *                      keys, and unequal values different keys.  The key
 *                      is the text `col::text` gives for the value, or for
 *                      numeric, float and interval, whose equal values
 *                      print differently ("1.50" = "1.5", "-0" = "0",
 *                      "1 mon" = "30 days"), one text per class (below).  A KEY is a fixed
 *                      point: spell_key of it gives it back.
 *   SPELL_NOT_A_VALUE  PostgreSQL's input function refuses the input
 *                      (syntax, or out of the type's range), so `col = $1`
 *                      fails and the service cannot find a row by it: the
 *                      deny is right whatever the table holds.
 *   SPELL_MAYBE        the module cannot prove what value the server would
 *                      read: the caller must answer "maybe", never deny.
 * *outlen is 0 unless SPELL_KEY; out past *outlen is unspecified.
 *
 * cap must be at least spell_key_cap(t, len); a smaller cap gets
 * SPELL_MAYBE (the safe answer to a caller's mistake).
 *
 * Per type (PostgreSQL 15's input functions; "ws" is what the server's
 * isspace() accepts, taken as the C locale's ' ' \t \n \v \f \r; a byte
 * >= 0x80 where the server would ask isspace() makes a would-be KEY a
 * MAYBE, since a server locale may call it white space):
 *   text, varchar   KEY = the input, byte for byte.
 *   name            KEY = the input cut to 63 bytes as namein cuts it;
 *                   MAYBE when a longer input is not ASCII (the cut
 *                   depends on the server encoding).
 *   bpchar          KEY = the input without trailing spaces (bpchareq
 *                   ignores them and char(n)::text strips them).
 *   text_nondeterministic, other
 *                   always MAYBE (rows too: such a column needs no filter).
 *   int2/int4/int8  ws, an optional sign, digits, ws (no '_', no 0x: those
 *                   came in PostgreSQL 16): KEY = the decimal value ("-0",
 *                   "+0005", " 7 " become "0", "5", "7"); anything else,
 *                   and values out of the type's range, NOT_A_VALUE.
 *   oid             as oidin (strtoul, then kept if it equals its 32-bit
 *                   value after unsigned or signed extension): also
 *                   -2147483648..-1, read as 2^32 + value, and the 64-bit
 *                   wrap-arounds ("18446744073709551615" is 4294967295);
 *                   KEY = the unsigned decimal value.
 *   uuid            every form uuid_in takes (any case, braces, a hyphen
 *                   after any group of four hex digits): KEY = lower-case
 *                   8-4-4-4-12; anything else NOT_A_VALUE.
 *   numeric         KEY = the value in plain notation without redundant
 *                   zeros ("1.50", "+01.5", "15e-1", " .15E1 " all give
 *                   "1.5"; zero is "0"), or "NaN", "Infinity",
 *                   "-Infinity" (every spelling numeric_in takes); MAYBE
 *                   when that text would exceed len + SPELL_SLACK bytes
 *                   ("1e100000"); NOT_A_VALUE for syntax errors and what
 *                   numeric_in refuses: |exponent| >= INT_MAX/2, a scale
 *                   above 16383 ("0e-16384"), 10^131072 and up.
 *   float4/float8   the value as strtof/strtod reads it (as float4in and
 *                   float8in do): KEY = the shortest text that reads back
 *                   as that value, in PostgreSQL's extra_float_digits=1
 *                   format ("1e+20", "0.0001", "1.5"); -0 is "0" (equal
 *                   to 0), every NaN "NaN", "Infinity", "-Infinity";
 *                   overflow and underflow to zero NOT_A_VALUE, as the
 *                   server refuses them; an input longer than 127 bytes
 *                   MAYBE.  Needs LC_NUMERIC "C" in this process (bloomguard
 *                   never calls setlocale).
 *   bool            every spelling boolin takes (t, TRUE, ye, on, 1, ...):
 *                   KEY = "true" or "false" (what bool::text prints, as
 *                   the loader reads it); anything else NOT_A_VALUE.
 *   bytea           hex ("\x" and pairs of hex digits in either case, with
 *                   ' ', \t, \n, \r between pairs) and escape format ("\\", "\ooo", other
 *                   ASCII bytes as themselves): KEY = "\x" and lower-case
 *                   hex of the bytes; an invalid input NOT_A_VALUE; escape
 *                   format with bytes >= 0x80 MAYBE (their bytes depend on
 *                   the server encoding).
 *   date, timestamp, timestamptz, time
 *                   KEY = the input when it is exactly what the column
 *                   prints for a value in range (DateStyle ISO, TimeZone
 *                   UTC: "2024-02-29", "0044-03-15 12:00:00.5 BC",
 *                   "2024-01-05 10:00:00+00", "24:00:00", "infinity"),
 *                   which every DateStyle reads as that value; anything
 *                   else MAYBE: other styles depend on the service's
 *                   DateStyle, and a timestamptz without "+00" on its
 *                   TimeZone.
 *   interval        an input that is exactly what the column prints
 *                   (IntervalStyle postgres, e.g. "1 year 2 mons -3 days
 *                   +04:05:06.5"): KEY = the text of one representative of
 *                   its equality class, since interval_cmp counts a month
 *                   as 30 days and a day as 24 hours ("1 mon", "30 days"
 *                   and "720:00:00" are equal and all have the key
 *                   "1 mon": whole months first, then days, then time);
 *                   anything else MAYBE.
 * A NUL byte is a character no typed column accepts (NOT_A_VALUE; a text
 * column's KEY then matches no row).  The server never sees one: the
 * daemon refuses such IDs before they get here.
 *
 * The assumption behind KEY and NOT_A_VALUE is that the service compares
 * `col = $1` with the parameter read as the column's type (an untyped
 * parameter, or a cast to that type), as the oracle does.
 * Work is linear in len with no allocation; int, uuid and text do one pass
 * (about 20-50 ns).  errno is left as it was.
 */
enum spell_verdict spell_key(enum spell_type t, const char *in, size_t len, char *out,
                             size_t cap, size_t *outlen);

/*
 * spell_key with the output found for the caller: *key is in itself for
 * text (nothing copied), else buf (bufcap bytes) when the key fits there,
 * else a malloc'ed *heap the caller frees (*heap is NULL otherwise).  The
 * verdict of spell_key; no memory for *heap is SPELL_MAYBE, never a wrong
 * key.  *key is valid only with SPELL_KEY.
 */
enum spell_verdict spell_key_buf(enum spell_type t, const char *in, size_t len, char *buf,
                                 size_t bufcap, char **heap, const char **key, size_t *klen);

#endif /* BLOOMGUARD_SPELL_H */
