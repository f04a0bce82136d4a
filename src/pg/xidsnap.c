/*
 * The set of transactions a stream applied before snapshots may see them,
 * and the test of a snapshot against it (xidsnap.h says why).
 */
#include "xidsnap.h"

#include <stdlib.h>
#include <string.h>

#include "decimal.h"

void xidset_init(struct xidset *s)
{
    memset(s, 0, sizeof *s);
}

void xidset_free(struct xidset *s)
{
    free(s->v);
    xidset_init(s);
}

/* PostgreSQL's TransactionIdPrecedes for normal xids: a before b, modulo 2^32. */
static bool precedes(uint32_t a, uint32_t b)
{
    return (int32_t)(a - b) < 0;
}

bool xidset_add(struct xidset *s, uint32_t xid)
{
    if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 256;
        uint32_t *nv = nc <= XIDSNAP_MAX ? realloc(s->v, nc * sizeof *nv) : NULL;
        if (nv == NULL) {
            if (!s->overflowed || precedes(s->lost_last, xid))
                s->lost_last = xid;
            s->overflowed = true;
            return false;
        }
        s->v = nv;
        s->cap = nc;
    }
    s->v[s->n++] = xid;
    return true;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* One decimal xid8 at *p, then sep (or, when sep is 0, a comma or the end); false if not. */
static bool read_xid(const char **p, char sep, uint64_t *out)
{
    size_t n = strspn(*p, "0123456789");
    const char *end = *p + n;
    if (decimal_parse_u64n(*p, n, out) != DECIMAL_OK
        || (sep ? *end != sep : *end != '\0' && *end != ','))
        return false;
    *p = end;
    return true;
}

/* A parsed snapshot: xmin, xmax and the in-progress xids, low 32 bits, sorted. */
struct snap {
    uint32_t xmin, xmax;
    uint32_t *xip;
    size_t n;
};

static bool parse(const char *text, struct snap *sn)
{
    const char *p = text;
    uint64_t xmin, xmax, x;
    memset(sn, 0, sizeof *sn);
    if (!read_xid(&p, ':', &xmin) || *p++ != ':' || !read_xid(&p, ':', &xmax) || *p++ != ':'
        || xmin > xmax)
        return false;
    sn->xmin = (uint32_t)xmin;
    sn->xmax = (uint32_t)xmax;
    size_t cap = 0;
    while (*p != '\0') {
        if (!read_xid(&p, 0, &x) || x < xmin || x >= xmax || (*p == ',' && *++p == '\0'))
            goto bad;
        if (sn->n == cap) {
            cap = cap ? cap * 2 : 16;
            uint32_t *nx = realloc(sn->xip, cap * sizeof *nx);
            if (nx == NULL)
                goto bad;
            sn->xip = nx;
        }
        sn->xip[sn->n++] = (uint32_t)x;
    }
    if (sn->n > 1)                  /* qsort and bsearch take no NULL base, even for 0 */
        qsort(sn->xip, sn->n, sizeof *sn->xip, cmp_u32);
    return true;
bad:
    free(sn->xip);
    sn->xip = NULL;
    return false;
}

static bool in_progress(const struct snap *sn, uint32_t xid)
{
    return !precedes(xid, sn->xmax)
           || (sn->n > 0 && bsearch(&xid, sn->xip, sn->n, sizeof *sn->xip, cmp_u32) != NULL);
}

bool xidset_prune(struct xidset *s, const char *snapshot)
{
    struct snap sn;
    if (!parse(snapshot, &sn))
        return false;
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++)
        if (in_progress(&sn, s->v[i]))
            s->v[k++] = s->v[i];
    s->n = k;
    if (s->overflowed && precedes(s->lost_last, sn.xmin))
        s->overflowed = false;      /* every member lost is finished now */
    free(sn.xip);
    return true;
}

bool xidsnap_sees_all(const char *snapshot, const uint32_t *xids, size_t n, uint32_t *first)
{
    struct snap sn;
    if (first)
        *first = 0;
    if (!parse(snapshot, &sn))
        return false;
    bool all = true;
    for (size_t i = 0; i < n && all; i++) {
        if (in_progress(&sn, xids[i])) {
            all = false;
            if (first)
                *first = xids[i];
        }
    }
    free(sn.xip);
    return all;
}
