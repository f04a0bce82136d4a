/*
 * spell_key: what PostgreSQL 15's input function of the guarded column's
 * type would read from an ID, reduced to one key per value (spell.h has the
 * per-type table).  This file maps a column's type to its reader and
 * dispatches; the readers are in spell_number.c and spell_time.c.  Each
 * follows the server function it names; where the server's answer depends
 * on something this process cannot see (its locale, encoding, DateStyle,
 * TimeZone, libc), the answer is MAYBE.
 */
#include "spell.h"
#include "spell_int.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

/* Type OIDs of PostgreSQL's catalog (pg_type.dat); stable across versions. */
enum {
    OID_BOOL = 16, OID_BYTEA = 17, OID_NAME = 19, OID_INT8 = 20, OID_INT2 = 21,
    OID_INT4 = 23, OID_TEXT = 25, OID_OID = 26, OID_FLOAT4 = 700,
    OID_FLOAT8 = 701, OID_BPCHAR = 1042, OID_VARCHAR = 1043, OID_DATE = 1082,
    OID_TIME = 1083, OID_TIMESTAMP = 1114, OID_TIMESTAMPTZ = 1184,
    OID_INTERVAL = 1186, OID_NUMERIC = 1700, OID_UUID = 2950
};

#define NAMEDATALEN 64

enum spell_type spell_type_of(uint32_t base_oid, int32_t typmod, bool deterministic)
{
    (void)typmod;
    switch (base_oid) {
    case OID_TEXT:
    case OID_VARCHAR:
        return deterministic ? SPELL_TEXT : SPELL_COLLATED;
    case OID_NAME:
        return deterministic ? SPELL_NAME : SPELL_COLLATED;
    case OID_BPCHAR:
        return deterministic ? SPELL_BPCHAR : SPELL_COLLATED;
    case OID_INT2: return SPELL_INT2;
    case OID_INT4: return SPELL_INT4;
    case OID_INT8: return SPELL_INT8;
    case OID_OID: return SPELL_OID;
    case OID_UUID: return SPELL_UUID;
    case OID_NUMERIC: return SPELL_NUMERIC;
    case OID_FLOAT4: return SPELL_FLOAT4;
    case OID_FLOAT8: return SPELL_FLOAT8;
    case OID_BOOL: return SPELL_BOOL;
    case OID_DATE: return SPELL_DATE;
    case OID_TIMESTAMP: return SPELL_TIMESTAMP;
    case OID_TIMESTAMPTZ: return SPELL_TIMESTAMPTZ;
    case OID_TIME: return SPELL_TIME;
    case OID_INTERVAL: return SPELL_INTERVAL;
    case OID_BYTEA: return SPELL_BYTEA;
    default: return SPELL_OTHER;
    }
}

static const char *const type_names[SPELL_NTYPES] = {
    [SPELL_TEXT] = "text", [SPELL_NAME] = "name", [SPELL_BPCHAR] = "bpchar",
    [SPELL_COLLATED] = "text_nondeterministic", [SPELL_INT2] = "int2",
    [SPELL_INT4] = "int4", [SPELL_INT8] = "int8", [SPELL_OID] = "oid",
    [SPELL_UUID] = "uuid", [SPELL_NUMERIC] = "numeric", [SPELL_FLOAT4] = "float4",
    [SPELL_FLOAT8] = "float8", [SPELL_BOOL] = "bool", [SPELL_DATE] = "date",
    [SPELL_TIMESTAMP] = "timestamp", [SPELL_TIMESTAMPTZ] = "timestamptz",
    [SPELL_TIME] = "time", [SPELL_INTERVAL] = "interval", [SPELL_BYTEA] = "bytea",
    [SPELL_OTHER] = "other",
};

const char *spell_type_name(enum spell_type t)
{
    return (unsigned)t < SPELL_NTYPES ? type_names[t] : "unknown";
}

const char *spell_verdict_name(enum spell_verdict v)
{
    switch (v) {
    case SPELL_KEY: return "key";
    case SPELL_NOT_A_VALUE: return "not_a_value";
    case SPELL_MAYBE: return "maybe";
    }
    return "unknown";
}

size_t spell_key_cap(enum spell_type t, size_t len)
{
    switch (t) {
    case SPELL_BYTEA: return 2 * len + 2;
    case SPELL_INTERVAL: return len + 4 * SPELL_SLACK;
    default: return len + SPELL_SLACK;
    }
}
/* --------------------------------------------------------------- text -- */

static enum spell_verdict spell_name(const unsigned char *s, size_t len, char *out,
                                     size_t *outlen)
{
    if (len < NAMEDATALEN)
        return spell_key_self(s, len, out, outlen);
    /* namein clips to 63 bytes at a character boundary of the server encoding. */
    for (size_t i = 0; i < len; i++)
        if (s[i] >= 0x80)
            return SPELL_MAYBE;
    return spell_key_self(s, NAMEDATALEN - 1, out, outlen);
}

static enum spell_verdict spell_bpchar(const unsigned char *s, size_t len, char *out,
                                       size_t *outlen)
{
    while (len > 0 && s[len - 1] == ' ')
        len--;
    return spell_key_self(s, len, out, outlen);
}

/* ---------------------------------------------------------- spell_key -- */

enum spell_verdict spell_key(enum spell_type t, const char *in, size_t len, char *out,
                             size_t cap, size_t *outlen)
{
    const unsigned char *s = (const unsigned char *)in;
    int saved_errno = errno;    /* strtod sets it; callers need not know */
    *outlen = 0;
    if (cap < spell_key_cap(t, len))
        return SPELL_MAYBE;
    enum spell_verdict v;
    switch (t) {
    case SPELL_TEXT: v = spell_key_self(s, len, out, outlen); break;
    case SPELL_NAME: v = spell_name(s, len, out, outlen); break;
    case SPELL_BPCHAR: v = spell_bpchar(s, len, out, outlen); break;
    case SPELL_INT2: v = spell_int(s, len, INT16_MAX, out, outlen); break;
    case SPELL_INT4: v = spell_int(s, len, INT32_MAX, out, outlen); break;
    case SPELL_INT8: v = spell_int(s, len, INT64_MAX, out, outlen); break;
    case SPELL_OID: v = spell_oid(s, len, out, outlen); break;
    case SPELL_UUID: v = spell_uuid(s, len, out, outlen); break;
    case SPELL_NUMERIC: v = spell_numeric(s, len, out, cap, outlen); break;
    case SPELL_FLOAT4: v = spell_float(s, len, true, out, outlen); break;
    case SPELL_FLOAT8: v = spell_float(s, len, false, out, outlen); break;
    case SPELL_BOOL: v = spell_bool(s, len, out, outlen); break;
    case SPELL_DATE: v = spell_date(s, len, out, outlen); break;
    case SPELL_TIMESTAMP: v = spell_timestamp(s, len, false, out, outlen); break;
    case SPELL_TIMESTAMPTZ: v = spell_timestamp(s, len, true, out, outlen); break;
    case SPELL_TIME: v = spell_time(s, len, out, outlen); break;
    case SPELL_INTERVAL: v = spell_interval(s, len, out, outlen); break;
    case SPELL_BYTEA: v = spell_bytea(s, len, out, outlen); break;
    case SPELL_COLLATED:
    case SPELL_OTHER:
    default: v = SPELL_MAYBE; break;
    }
    if (v != SPELL_KEY)
        *outlen = 0;
    errno = saved_errno;
    return v;
}

enum spell_verdict spell_key_buf(enum spell_type t, const char *in, size_t len, char *buf,
                                 size_t bufcap, char **heap, const char **key, size_t *klen)
{
    *heap = NULL;
    if (t == SPELL_TEXT) {
        *key = in;
        *klen = len;
        return SPELL_KEY;
    }
    size_t cap = spell_key_cap(t, len);
    char *out = buf;
    if (cap > bufcap && (out = *heap = malloc(cap)) == NULL)
        return SPELL_MAYBE;
    *key = out;
    return spell_key(t, in, len, out, cap, klen);
}
