/*
 * spell_key's readers of dates and times: date, timestamp(tz), time and
 * interval in the ISO forms the server reads whatever its DateStyle, each
 * following the server input function it names; the rest is MAYBE.
 */
#include "spell_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ----------------------------------------------------- dates and times -- */

/*
 * For these the key is the input itself when the input is exactly what the
 * column prints for some value, which PostgreSQL reads back as that value
 * under any DateStyle (a year of three or more digits comes first in every
 * field order).  The check reads the fields strictly and prints them again
 * the way the server does; the input must come back byte for byte.
 */

/* Read exactly n digits at s[*i]. */
static bool fixed_digits(const unsigned char *s, size_t len, size_t *i, int n, int *v)
{
    *v = 0;
    for (int k = 0; k < n; k++, (*i)++) {
        if (*i >= len || !spell_is_digit(s[*i]))
            return false;
        *v = *v * 10 + (s[*i] - '0');
    }
    return true;
}

static bool expect(const unsigned char *s, size_t len, size_t *i, const char *lit)
{
    size_t n = strlen(lit);
    if (len - *i < n || memcmp(s + *i, lit, n) != 0)
        return false;
    *i += n;
    return true;
}

static bool leap(long astro_year)
{
    return astro_year % 4 == 0 && (astro_year % 100 != 0 || astro_year % 400 == 0);
}

static int month_days(long astro_year, int month)
{
    static const int days[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
    return month == 2 && leap(astro_year) ? 29 : days[month - 1];
}

struct stamp {
    long year;          /* as printed: 1.. */
    int month, day;
    bool bc;
};

/*
 * "YYYY-MM-DD" as EncodeDateOnly/EncodeDateTime print it: the year zero
 * padded to four digits (more digits without a leading zero), a real
 * calendar day.  " BC" is read by the caller, after the time and zone.
 */
static bool read_date(const unsigned char *s, size_t len, size_t *i, struct stamp *st)
{
    size_t start = *i;
    long year = 0;
    while (*i < len && spell_is_digit(s[*i]) && *i - start < 8)
        year = year * 10 + (s[(*i)++] - '0');
    size_t ylen = *i - start;
    if (ylen < 4 || (ylen > 4 && s[start] == '0') || year < 1)
        return false;
    st->year = year;
    return expect(s, len, i, "-") && fixed_digits(s, len, i, 2, &st->month)
           && expect(s, len, i, "-") && fixed_digits(s, len, i, 2, &st->day)
           && st->month >= 1 && st->month <= 12 && st->day >= 1;
}

/* The day's validity and the type's range, once " BC" is known. */
static bool date_valid(const struct stamp *st, long maxyear)
{
    long astro = st->bc ? 1 - st->year : st->year;
    if (st->day > month_days(astro, st->month))
        return false;
    if (st->bc)     /* the first day is 4713-11-24 BC for every type */
        return st->year < 4713
               || (st->year == 4713 && (st->month > 11 || (st->month == 11 && st->day >= 24)));
    return st->year <= maxyear;
}

/*
 * "HH:MM:SS" and a fraction of 1 to 6 digits without a trailing zero, as
 * AppendSeconds prints it.  hour_max is 23 (24:00:00 is the caller's).
 */
static bool read_time(const unsigned char *s, size_t len, size_t *i, int hour_max, int *hour)
{
    int min, sec;
    if (!fixed_digits(s, len, i, 2, hour) || !expect(s, len, i, ":")
        || !fixed_digits(s, len, i, 2, &min) || !expect(s, len, i, ":")
        || !fixed_digits(s, len, i, 2, &sec))
        return false;
    if (*hour > hour_max || min > 59 || sec > 59)
        return false;
    if (*i < len && s[*i] == '.') {
        size_t start = ++*i;
        while (*i < len && spell_is_digit(s[*i]) && *i - start < 7)
            (*i)++;
        size_t n = *i - start;
        if (n == 0 || n > 6 || s[*i - 1] == '0')
            return false;
    }
    return true;
}
static bool is_infinity(const unsigned char *s, size_t len)
{
    return (len == 8 && memcmp(s, "infinity", 8) == 0)
           || (len == 9 && memcmp(s, "-infinity", 9) == 0);
}

/* date: "YYYY-MM-DD[ BC]" within 4713-11-24 BC .. 5874897-12-31, or (-)infinity. */
enum spell_verdict spell_date(const unsigned char *s, size_t len, char *out,
                              size_t *outlen)
{
    if (is_infinity(s, len))
        return spell_key_self(s, len, out, outlen);
    size_t i = 0;
    struct stamp st;
    if (!read_date(s, len, &i, &st))
        return SPELL_MAYBE;
    st.bc = expect(s, len, &i, " BC");
    if (i != len || !date_valid(&st, 5874897))
        return SPELL_MAYBE;
    return spell_key_self(s, len, out, outlen);
}

/*
 * timestamp: "YYYY-MM-DD HH:MM:SS[.f][ BC]"; timestamptz the same with
 * "+00" (TimeZone UTC) before " BC", within 4713-11-24 BC .. 294276-12-31
 * 23:59:59.999999 (UTC).
 */
enum spell_verdict spell_timestamp(const unsigned char *s, size_t len, bool tz,
                                   char *out, size_t *outlen)
{
    if (is_infinity(s, len))
        return spell_key_self(s, len, out, outlen);
    size_t i = 0;
    int hour;
    struct stamp st;
    if (!read_date(s, len, &i, &st) || !expect(s, len, &i, " ")
        || !read_time(s, len, &i, 23, &hour))
        return SPELL_MAYBE;
    if (tz && !expect(s, len, &i, "+00"))
        return SPELL_MAYBE;
    st.bc = expect(s, len, &i, " BC");
    if (i != len || !date_valid(&st, 294276))
        return SPELL_MAYBE;
    return spell_key_self(s, len, out, outlen);
}

/* time: "HH:MM:SS[.f]" up to 23:59:59.999999, or exactly "24:00:00". */
enum spell_verdict spell_time(const unsigned char *s, size_t len, char *out,
                              size_t *outlen)
{
    size_t i = 0;
    int hour;
    if (len == 8 && memcmp(s, "24:00:00", 8) == 0)
        return spell_key_self(s, len, out, outlen);
    if (!read_time(s, len, &i, 23, &hour) || i != len)
        return SPELL_MAYBE;
    return spell_key_self(s, len, out, outlen);
}

/* ----------------------------------------------------------- interval -- */

#define USECS_PER_SEC INT64_C(1000000)
#define USECS_PER_MINUTE (60 * USECS_PER_SEC)
#define USECS_PER_HOUR (60 * USECS_PER_MINUTE)
#define USECS_PER_DAY (24 * USECS_PER_HOUR)

struct interval {
    int32_t month, day;
    int64_t time;       /* microseconds */
};

/* Decimal digits at s[*i] into *v, at most lim; false if none or more. */
static bool read_digits(const unsigned char *s, size_t len, size_t *i, uint64_t lim, uint64_t *v)
{
    if (*i >= len || !spell_is_digit(s[*i]))
        return false;
    uint64_t m = 0;
    for (; *i < len && spell_is_digit(s[*i]); (*i)++) {
        unsigned d = s[*i] - '0';
        if (m > (lim - d) / 10)
            return false;
        m = m * 10 + d;
    }
    *v = m;
    return true;
}

/* [+-] then digits, within the range of a signed type of that many bits. */
static bool read_signed(const unsigned char *s, size_t len, size_t *i, int bits, int64_t *v)
{
    bool neg = false;
    if (*i < len && (s[*i] == '-' || s[*i] == '+'))
        neg = s[(*i)++] == '-';
    uint64_t m, lim = (UINT64_C(1) << (bits - 1)) - (neg ? 0 : 1);
    if (!read_digits(s, len, i, lim, &m))
        return false;
    *v = neg ? (int64_t)(0 - m) : (int64_t)m;
    return true;
}

/*
 * Read the fields of a postgres-style interval loosely: "[+-]N year(s)",
 * "[+-]N mon(s)", "[+-]N day(s)", each at most once and in that order,
 * then "[+-]H:MM:SS[.f]", separated by single spaces.  Whether the text is
 * canonical is decided by printing the value again.
 */
static bool read_interval(const unsigned char *s, size_t len, struct interval *iv)
{
    static const char *const units[] = { "year", "mon", "day" };
    int64_t field[3] = { 0, 0, 0 };
    size_t i = 0;
    int next = 0;
    while (i < len) {
        size_t save = i;
        if (i > 0 && !expect(s, len, &i, " "))
            return false;
        int64_t v;
        if (!read_signed(s, len, &i, 32, &v) || !expect(s, len, &i, " ")) {
            i = save;           /* the time, or junk */
            break;
        }
        int u = next;
        while (u < 3 && !expect(s, len, &i, units[u]))
            u++;
        if (u == 3)
            return false;
        expect(s, len, &i, "s");
        field[u] = v;
        next = u + 1;
    }
    int64_t months = field[0] * 12 + field[1];
    if (months < INT32_MIN || months > INT32_MAX)
        return false;
    iv->month = (int32_t)months;
    iv->day = (int32_t)field[2];
    iv->time = 0;
    if (i == len)
        return true;
    if (i > 0 && !expect(s, len, &i, " "))
        return false;
    bool neg = false;
    if (i < len && (s[i] == '-' || s[i] == '+'))
        neg = s[i++] == '-';
    uint64_t hour, frac = 0;
    int min, sec;
    if (!read_digits(s, len, &i, INT64_MAX / USECS_PER_HOUR, &hour)
        || !expect(s, len, &i, ":") || !fixed_digits(s, len, &i, 2, &min)
        || !expect(s, len, &i, ":") || !fixed_digits(s, len, &i, 2, &sec))
        return false;
    if (i < len && s[i] == '.') {
        int nd = 0;
        for (i++; i < len && spell_is_digit(s[i]) && nd < 6; i++, nd++)
            frac = frac * 10 + (s[i] - '0');
        if (nd == 0)
            return false;
        for (; nd < 6; nd++)
            frac *= 10;
    }
    if (i != len || min > 59 || sec > 59)
        return false;
    /* The magnitude may be 2^63 when negative (INT64_MIN microseconds). */
    uint64_t mag = hour * (uint64_t)USECS_PER_HOUR + (uint64_t)min * USECS_PER_MINUTE
                   + (uint64_t)sec * USECS_PER_SEC + frac;
    if (mag > (uint64_t)INT64_MAX + (neg ? 1 : 0))
        return false;
    iv->time = neg ? (int64_t)(0 - mag) : (int64_t)mag;
    return true;
}

/* One nonzero field as AddPostgresIntPart prints it. */
static size_t put_part(char *out, int64_t value, const char *unit, bool *is_zero,
                       bool *is_before)
{
    if (value == 0)
        return 0;
    int n = sprintf(out, "%s%s%lld %s%s", *is_zero ? "" : " ",
                    *is_before && value > 0 ? "+" : "", (long long)value, unit,
                    value != 1 ? "s" : "");
    *is_before = value < 0;
    *is_zero = false;
    return (size_t)n;
}

/* EncodeInterval, IntervalStyle postgres (PostgreSQL 15's datetime.c). */
static size_t print_interval(const struct interval *iv, char *out)
{
    bool is_zero = true, is_before = false;
    size_t n = 0;
    int64_t t = iv->time;
    int64_t hour = t / USECS_PER_HOUR;
    t -= hour * USECS_PER_HOUR;
    int64_t min = t / USECS_PER_MINUTE;
    t -= min * USECS_PER_MINUTE;
    int64_t sec = t / USECS_PER_SEC;
    int64_t fsec = t - sec * USECS_PER_SEC;
    n += put_part(out + n, iv->month / 12, "year", &is_zero, &is_before);
    n += put_part(out + n, iv->month % 12, "mon", &is_zero, &is_before);
    n += put_part(out + n, iv->day, "day", &is_zero, &is_before);
    if (is_zero || hour != 0 || min != 0 || sec != 0 || fsec != 0) {
        bool minus = hour < 0 || min < 0 || sec < 0 || fsec < 0;
        n += (size_t)sprintf(out + n, "%s%s%02lld:%02lld:%02lld", is_zero ? "" : " ",
                             minus ? "-" : is_before ? "+" : "",
                             (long long)(hour < 0 ? -hour : hour),
                             (long long)(min < 0 ? -min : min),
                             (long long)(sec < 0 ? -sec : sec));
        if (fsec != 0) {
            char frac[24];
            snprintf(frac, sizeof frac, "%06lld", (long long)(fsec < 0 ? -fsec : fsec));
            int nd = 6;
            while (frac[nd - 1] == '0')
                nd--;
            out[n++] = '.';
            memcpy(out + n, frac, (size_t)nd);
            n += (size_t)nd;
        }
    }
    return n;
}

/* The longest postgres-style interval text, with room to spare. */
#define INTERVAL_TEXT_MAX 128

/* trunc(a / b) clamped to int32. */
static int32_t div_clamp32(__int128 a, int64_t b)
{
    __int128 q = a / b;
    return q > INT32_MAX ? INT32_MAX : q < INT32_MIN ? INT32_MIN : (int32_t)q;
}

/*
 * Intervals are equal when interval_cmp_value's span is (months of 30
 * days, days of 24 hours, then microseconds): "1 mon" = "30 days" =
 * "720:00:00".  The key is the text of one interval per span, taking whole
 * months first, then whole days, the rest as time ("30 days" and
 * "720:00:00" have the key "1 mon"), so a key is itself a canonical
 * interval text and spell_key gives it back.  The clamps keep it a valid
 * interval at the extremes of the range.
 */
enum spell_verdict spell_interval(const unsigned char *s, size_t len, char *out,
                                  size_t *outlen)
{
    struct interval iv, rep;
    char again[INTERVAL_TEXT_MAX];
    if (len >= INTERVAL_TEXT_MAX || !read_interval(s, len, &iv))
        return SPELL_MAYBE;
    size_t n = print_interval(&iv, again);
    if (n != len || memcmp(again, s, len) != 0)
        return SPELL_MAYBE;
    __int128 span = ((__int128)iv.month * 30 + iv.day) * USECS_PER_DAY + iv.time;
    rep.month = div_clamp32(span, 30 * USECS_PER_DAY);
    span -= (__int128)rep.month * 30 * USECS_PER_DAY;
    rep.day = div_clamp32(span, USECS_PER_DAY);
    span -= (__int128)rep.day * USECS_PER_DAY;
    rep.time = (int64_t)span;      /* fits: at most iv's own fields' worth */
    *outlen = print_interval(&rep, out);
    return SPELL_KEY;
}
