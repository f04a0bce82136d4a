/*
 * The fast path's bytes (http_fast.c): which request heads it takes
 * (GETs, and POSTs with one Content-Length),
 * read strictly (anything else is libmicrohttpd's to read), and the head
 * of its answers, written as libmicrohttpd writes them, so that a client
 * cannot tell which of the two answered.
 */
#include "http_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

/*
 * The bytes a taken head may hold, by class: a request target's (RFC 3986
 * pchar and '/'; no '?', no '#'), a header name's (an RFC 9110 token), a
 * header value's (visible ASCII, space, tab: no obs-text, no controls).
 */
enum { C_TARGET = 1, C_TOKEN = 2, C_VALUE = 4 };
static unsigned char byte_class[256];

static void classes_init(void)
{
    for (unsigned c = 0; c < 256; c++) {
        bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        byte_class[c] = (unsigned char)(
            (alnum || (c != 0 && strchr("-._~!$&'()*+,;=:@%/", (int)c)) ? C_TARGET : 0)
            | (alnum || (c != 0 && strchr("!#$%&'*+-.^_`|~", (int)c)) ? C_TOKEN : 0)
            | ((c >= 0x20 && c < 0x7F) || c == '\t' ? C_VALUE : 0));
    }
}

#define IS(c, cls) ((byte_class[(unsigned char)(c)] & (cls)) != 0)

static bool name_is(const char *n, size_t len, const char *want)
{
    return strlen(want) == len && strncasecmp(n, want, len) == 0;
}

/*
 * Headers after which MHD's answer could differ from the fast one, or
 * that announce a body: the request goes to MHD.  "Connection: keep-alive"
 * changes nothing (MHD answers it as without).
 */
/*
 * A POST's (clen not NULL: SIZE_MAX until seen) one Content-Length, of at
 * most 9 digits, goes to *clen; a second one, or one in a GET, passes.
 */
static bool header_passes(const char *n, size_t nl, const char *v, size_t vl, size_t *clen)
{
    switch (n[0] | 0x20) {
    case 'c':
        if (name_is(n, nl, "Connection"))
            return vl == 10 && strncasecmp(v, "keep-alive", 10) == 0;
        if (!name_is(n, nl, "Content-Length"))
            return true;
        if (clen == NULL || *clen != SIZE_MAX || vl == 0 || vl > 9)
            return false;
        *clen = 0;
        for (size_t i = 0; i < vl; i++) {
            if (v[i] < '0' || v[i] > '9')
                return false;
            *clen = *clen * 10 + (size_t)(v[i] - '0');
        }
        return true;
    case 'e':
        return !name_is(n, nl, "Expect");
    case 't':
        return !name_is(n, nl, "Transfer-Encoding") && !name_is(n, nl, "TE")
               && !name_is(n, nl, "Trailer");
    case 'u':
        return !name_is(n, nl, "Upgrade");
    }
    return true;
}

/* http_wire_head, and with clen not NULL http_wire_post: the method's line and clen's header. */
static inline enum wire_head wire_head(const char *b, size_t n, size_t *head_len,
                                       const char **target, size_t *target_len, size_t *clen)
{
    /*
     * Where the head ends: the first CRLF CRLF.  A lone CR or LF before it
     * (libmicrohttpd reads bare LFs) is libmicrohttpd's at once, rather
     * than waited on for a CRLF CRLF that may never come.
     */
    /*
     * LF by LF with memchr: this scan is most of the fast path's own work
     * per request.  A lone CR in a whole head needs no look here: no class
     * below reads a CR, and every line must end in CRLF.
     */
    size_t e = 0;
    for (const char *lf = memchr(b, '\n', n); lf != NULL;
         lf = memchr(lf + 1, '\n', n - (size_t)(lf + 1 - b))) {
        size_t j = (size_t)(lf - b);
        if (j == 0 || b[j - 1] != '\r')
            return WIRE_PASS;
        if (j >= 3 && b[j - 2] == '\n') {
            e = j + 1;
            break;
        }
    }
    if (e == 0) {
        for (const char *cr = memchr(b, '\r', n); cr != NULL;
             cr = memchr(cr + 1, '\r', n - (size_t)(cr + 1 - b)))
            if (cr + 1 < b + n && cr[1] != '\n')
                return WIRE_PASS;
        return n < WIRE_HEAD_MAX ? WIRE_MORE : WIRE_PASS;
    }
    n = e;
    size_t ml = clen != NULL ? 5 : 4;     /* "POST " or "GET " */
    if (n < 16 || memcmp(b, clen != NULL ? "POST /" : "GET /", ml + 1) != 0)
        return WIRE_PASS;
    /*
     * From here the scans need no bound: b[n - 2] is a CR, which no class
     * holds and which is neither space nor tab, so each stops there at the
     * latest (two instructions of seven a byte, on the whole head).
     */
    size_t i = ml;
    while (IS(b[i], C_TARGET))
        i++;
    *target = b + ml;
    *target_len = i - ml;
    if (n - i < 11 || memcmp(b + i, " HTTP/1.1\r\n", 11) != 0)
        return WIRE_PASS;
    i += 11;
    for (;;) {
        if (n - i < 2)
            return WIRE_PASS;
        if (b[i] == '\r' && b[i + 1] == '\n') {
            *head_len = i + 2;
            return i + 2 == n && (clen == NULL || *clen != SIZE_MAX) ? WIRE_TAKE : WIRE_PASS;
        }
        size_t ns = i;
        while (IS(b[i], C_TOKEN))
            i++;
        if (i == ns || b[i] != ':')
            return WIRE_PASS;
        size_t nl = i - ns;
        i++;
        while (b[i] == ' ' || b[i] == '\t')
            i++;
        size_t vs = i;
        while (IS(b[i], C_VALUE))
            i++;
        if (n - i < 2 || b[i] != '\r' || b[i + 1] != '\n')
            return WIRE_PASS;
        size_t ve = i;
        while (ve > vs && (b[ve - 1] == ' ' || b[ve - 1] == '\t'))
            ve--;
        if (!header_passes(b + ns, nl, b + vs, ve - vs, clen))
            return WIRE_PASS;
        i += 2;
    }
}

enum wire_head http_wire_head(const char *b, size_t n, size_t *head_len, const char **target,
                              size_t *target_len)
{
    return wire_head(b, n, head_len, target, target_len, NULL);
}

enum wire_head http_wire_post(const char *b, size_t n, size_t *head_len, const char **target,
                              size_t *target_len, size_t *body_len)
{
    *body_len = SIZE_MAX;
    return wire_head(b, n, head_len, target, target_len, body_len);
}

bool http_wire_header(const char *b, size_t head_len, const char *name, char *out, size_t cap)
{
    size_t nl = strlen(name);
    /* The request line first: a taken head's lines all end in CRLF (http_wire_head). */
    const char *p = memchr(b, '\n', head_len), *end = b + head_len;
    while (p != NULL && ++p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (eol == NULL || eol - p < 2)
            return false;           /* the empty line: no more headers */
        if ((size_t)(eol - p) > nl && p[nl] == ':' && strncasecmp(p, name, nl) == 0) {
            const char *v = p + nl + 1, *ve = eol - 1;  /* before the CR */
            while (v < ve && (*v == ' ' || *v == '\t'))
                v++;
            while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            if ((size_t)(ve - v) >= cap)
                return false;
            memcpy(out, v, (size_t)(ve - v));
            out[ve - v] = '\0';
            return true;
        }
        p = eol;
    }
    return false;
}

void http_wire_init(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, classes_init);
}

/* "Date: <IMF-fixdate>\r\n", as MHD writes it, formatted once a second. */
static void date_refresh(struct wire_date *d)
{
    time_t t = time(NULL);
    if (t == d->at)
        return;
    struct tm tm;
    gmtime_r(&t, &tm);
    static const char days[7][4] = { "Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat" };
    static const char months[12][4] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                        "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };
    int w = snprintf(d->text, sizeof d->text, "Date: %s, %02d %s %04d %02d:%02d:%02d GMT\r\n",
                     days[tm.tm_wday % 7], tm.tm_mday, months[tm.tm_mon % 12], tm.tm_year + 1900,
                     tm.tm_hour, tm.tm_min, tm.tm_sec);
    d->len = w > 0 && (size_t)w < sizeof d->text ? (size_t)w : 0;
    d->at = t;
}

/* p's bytes, backwards, ending at end: the start. */
static char *put_before(char *end, const char *p, size_t n)
{
    return memcpy(end - n, p, n);
}

/*
 * "HTTP/1.1 404 " reason CRLF, the date, the Content-Type line and
 * "Content-Length: " into slot, for status in the second d holds; false
 * when it does not fit (then no answer is made here).
 */
static bool head_refresh(struct wire_date *d, unsigned slot, unsigned status)
{
    static const char ct[] = "Content-Type: application/json\r\nContent-Length: ";
    const char *reason = MHD_get_reason_phrase_for(status);
    size_t rl = strlen(reason);
    char *t = d->head[slot].text;
    d->head[slot].status = 0;
    if (status < 100 || status > 999 || 13 + rl + 2 + d->len + sizeof ct - 1 > sizeof d->head[slot].text)
        return false;
    memcpy(t, "HTTP/1.1 000 ", 13);
    t[9] = (char)('0' + status / 100);
    t[10] = (char)('0' + status / 10 % 10);
    t[11] = (char)('0' + status % 10);
    size_t n = 13;
    memcpy(t + n, reason, rl);
    n += rl;
    memcpy(t + n, "\r\n", 2);
    n += 2;
    memcpy(t + n, d->text, d->len);
    n += d->len;
    memcpy(t + n, ct, sizeof ct - 1);
    n += sizeof ct - 1;
    d->head[slot].len = n;
    d->head[slot].at = d->at;
    d->head[slot].status = status;
    return true;
}

char *http_wire_answer_head(struct wire_date *d, char *end, size_t room, unsigned status,
                            size_t blen)
{
    /*
     * All but the length is the same for every answer of a status within a
     * second: made once then (head_refresh), copied here.  Formatting it
     * per answer (the reason looked up, measured, five pieces copied) was a
     * tenth of the fast path's own instructions.
     */
    date_refresh(d);
    unsigned slot = status == 200 ? 0 : 1;
    if ((d->head[slot].status != status || d->head[slot].at != d->at) && !head_refresh(d, slot, status))
        return NULL;
    /* The head, at most 20 digits, CRLF CRLF. */
    if (d->head[slot].len + 20 + 4 > room)
        return NULL;
    char *p = put_before(end, "\r\n\r\n", 4);
    do {
        *--p = (char)('0' + blen % 10);
        blen /= 10;
    } while (blen > 0);
    return put_before(p, d->head[slot].text, d->head[slot].len);
}

/*
 * The fast path's system calls without libc's wrappers: in a process with
 * threads, recv, send and epoll_wait (cancellation points) switch
 * asynchronous cancellation on and off around the call, about 90
 * instructions a request on the fast path, and no thread of this daemon is
 * ever cancelled (they stop on an eventfd).
 */
ssize_t http_wire_recv(int fd, void *buf, size_t len, int flags)
{
    return syscall(SYS_recvfrom, fd, buf, len, flags, NULL, NULL);
}

int http_wire_epoll_wait(int ep, struct epoll_event *evs, int max, int timeout_ms)
{
    /* epoll_pwait with no mask is epoll_wait (which arm64 does not have). */
    return (int)syscall(SYS_epoll_pwait, ep, evs, max, timeout_ms, NULL, (size_t)8);
}

bool http_wire_send(int fd, const char *buf, size_t len, size_t *off)
{
    while (*off < len) {
        ssize_t s = syscall(SYS_sendto, fd, buf + *off, len - *off, MSG_NOSIGNAL, NULL, 0);
        if (s > 0)
            *off += (size_t)s;
        else if (s < 0 && errno == EINTR)
            continue;
        else
            return s < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    }
    return true;
}
