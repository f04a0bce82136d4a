/*
 * The COPY of one column (loader.h): its rows unescaped and read so that a
 * stop ends it, in a snapshot that sees the transactions it must, row by
 * row straight into a filter.  Nothing here logs or keeps state between
 * calls.
 */
#include "loader.h"

#include "monoclock.h"
#include "spell.h"
#include "xidsnap.h"

#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

size_t loader_unescape(char *s, size_t len)
{
    size_t i = 0, o = 0;
    while (i < len) {
        char ch = s[i++];
        if (ch != '\\' || i == len) {
            s[o++] = ch;
            continue;
        }
        char e = s[i++];
        switch (e) {
        case 'b': s[o++] = '\b'; break;
        case 'f': s[o++] = '\f'; break;
        case 'n': s[o++] = '\n'; break;
        case 'r': s[o++] = '\r'; break;
        case 't': s[o++] = '\t'; break;
        case 'v': s[o++] = '\v'; break;
        case 'x': {
            unsigned v = 0, d = 0;
            while (d < 2 && i < len && strchr("0123456789abcdefABCDEF", s[i]) && s[i]) {
                char h = s[i++];
                v = v * 16 + (unsigned)(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
                d++;
            }
            s[o++] = d ? (char)v : 'x';
            break;
        }
        default:
            if (e >= '0' && e <= '7') {
                unsigned v = (unsigned)(e - '0'), d = 1;
                while (d < 3 && i < len && s[i] >= '0' && s[i] <= '7') {
                    v = v * 8 + (unsigned)(s[i++] - '0');
                    d++;
                }
                s[o++] = (char)v;
            } else {
                s[o++] = e;         /* \\ and any other escaped char */
            }
        }
    }
    return o;
}

/* Whether any of x's bytes is a backslash (the exact zero-byte test of x ^ '\\'s). */
static inline bool word_has_backslash(uint64_t x)
{
    uint64_t y = x ^ UINT64_C(0x5c5c5c5c5c5c5c5c);
    return ((y - UINT64_C(0x0101010101010101)) & ~y & UINT64_C(0x8080808080808080)) != 0;
}

/*
 * Whether s[0, n) holds a backslash.  Most IDs are 4 to 16 bytes with
 * their newline: two overlapping words, in bounds, a dozen instructions
 * where a call of memchr took twice that (issue 39: a load's CPU per row).
 */
static inline bool has_backslash(const char *s, size_t n)
{
    if (n >= 8 && n <= 16) {
        uint64_t a, b;
        memcpy(&a, s, 8);
        memcpy(&b, s + n - 8, 8);
        return word_has_backslash(a) || word_has_backslash(b);
    }
    if (n >= 4 && n < 8) {
        uint32_t a, b;
        memcpy(&a, s, 4);
        memcpy(&b, s + n - 4, 4);
        /* Both halves in one word: a byte of either is a byte of it. */
        return word_has_backslash((uint64_t)a << 32 | b);
    }
    return memchr(s, '\\', n) != NULL;
}

/*
 * A row PQgetCopyData returned (n > 0), as loader_copy_row hands it out.
 * True when it is SQL NULL: COPY's text format spells NULL as a bare \N,
 * which no value can be (a value's backslash comes doubled).
 */
__attribute__((always_inline)) static inline bool copy_row_text(char *buf, int n, size_t *len)
{
    /* Text format: one row per message, ending in '\n'. */
    size_t l = (size_t)n;
    if (l > 0 && buf[l - 1] == '\n')
        l--;
    bool null = false;
    /*
     * Without a backslash a row is neither NULL nor escaped: most rows end
     * here.  Scanned with its newline (no backslash): a 7-digit ID is 8 bytes.
     */
    if (has_backslash(buf, (size_t)n)) {
        null = l == 2 && buf[0] == '\\' && buf[1] == 'N';
        l = loader_unescape(buf, l);
    }
    buf[l] = '\0';
    *len = l;
    return null;
}

int loader_copy_row(PGconn *conn, char **buf, size_t *len)
{
    int n = PQgetCopyData(conn, buf, 0);
    if (n == -1)
        return 0;
    if (n < 0)
        return -1;
    (void)copy_row_text(*buf, n, len);
    return 1;
}

static bool stopped(atomic_bool *stop)
{
    return stop != NULL && atomic_load_explicit(stop, memory_order_relaxed);
}

/*
 * Wait until conn's socket has bytes for libpq, at most LOADER_POLL_MS,
 * and read them in.  False when libpq cannot read (the connection is
 * broken: PQerrorMessage says why).
 */
static bool await_input(PGconn *conn)
{
    struct pollfd p = { .fd = PQsocket(conn), .events = POLLIN };
    if (p.fd < 0)
        return PQconsumeInput(conn) != 0;   /* no socket: let libpq say what is wrong */
    (void)poll(&p, 1, LOADER_POLL_MS);      /* EINTR or a timeout: consuming nothing is fine */
    return PQconsumeInput(conn) != 0;
}

/*
 * loader_copy_row without blocking for more than LOADER_POLL_MS at a time:
 * the server may take seconds per row (a slow view) or wait for a lock
 * before the first, and a stop must not wait with it.  -2 once *stop is
 * true; 2 for a NULL (*buf still to PQfreemem); otherwise as
 * loader_copy_row.
 */
static int copy_row_stoppable(PGconn *conn, char **buf, size_t *len, atomic_bool *stop)
{
    for (;;) {
        if (stopped(stop))
            return -2;
        int n = PQgetCopyData(conn, buf, 1);
        if (n > 0)
            return copy_row_text(*buf, n, len) ? 2 : 1;
        if (n == -1)
            return 0;
        if (n < -1 || !await_input(conn))
            return -1;
    }
}

/*
 * PQexec of one statement, waiting at most LOADER_POLL_MS at a time for its
 * answer so that a stop ends the wait.  Returns the first result (a COPY's
 * PGRES_COPY_OUT, or the statement's; the caller PQclears it), NULL with
 * *interrupted set when stop came first (the statement may still run: the
 * caller PQfinishes the connection), NULL when libpq failed.
 */
static PGresult *exec_stoppable(PGconn *conn, const char *sql, atomic_bool *stop,
                                bool *interrupted)
{
    *interrupted = false;
    if (!PQsendQuery(conn, sql))
        return NULL;
    while (PQisBusy(conn)) {
        if (stopped(stop)) {
            *interrupted = true;
            return NULL;
        }
        if (!await_input(conn))
            return NULL;
    }
    return PQgetResult(conn);
}

PGresult *loader_exec_stoppable(PGconn *conn, const char *sql, atomic_bool *stop,
                                bool *interrupted)
{
    PGresult *r = exec_stoppable(conn, sql, stop, interrupted);
    /* One statement: the rest (its end) drained, so the connection can run the next. */
    if (r != NULL)
        for (PGresult *x; (x = PQgetResult(conn)) != NULL;)
            PQclear(x);
    return r;
}


/* BEGIN REPEATABLE READ in an exported snapshot, for a COPY that must start exactly there. */
static bool in_snapshot(PGconn *conn, const char *snapshot, char *err, size_t errlen)
{
    char *lit = PQescapeLiteral(conn, snapshot, strlen(snapshot));
    if (lit == NULL) {
        loader_set_error(err, errlen, "cannot quote the snapshot name", conn);
        return false;
    }
    char sql[160];
    snprintf(sql, sizeof sql, "BEGIN ISOLATION LEVEL REPEATABLE READ; SET TRANSACTION SNAPSHOT %s",
             lit);
    PQfreemem(lit);
    return loader_command(conn, sql, PGRES_COMMAND_OK,
                          "cannot import the replication slot's snapshot", err, errlen);
}

/*
 * BEGIN REPEATABLE READ in a snapshot that sees must_see[0, n) finished:
 * they committed (the stream says so) but may still be leaving the proc
 * array, a moment on a busy server, or until a synchronous standby answers.
 */
static bool seeing(PGconn *conn, const uint32_t *must_see, size_t n, atomic_bool *stop,
                   char *err, size_t errlen)
{
    double until = monoclock_seconds() + LOADER_VISIBLE_WAIT_S;
    for (;;) {
        PGresult *r = PQexec(conn, "BEGIN ISOLATION LEVEL REPEATABLE READ; "
                                   "SELECT pg_catalog.pg_current_snapshot()::text");
        if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
            loader_set_result_error(err, errlen, "cannot take the COPY's snapshot", conn, r);
            PQclear(r);
            return false;
        }
        uint32_t first;
        bool all = xidsnap_sees_all(PQgetvalue(r, 0, 0), must_see, n, &first);
        PQclear(r);
        if (all)
            return true;
        if (!loader_command(conn, "ROLLBACK", PGRES_COMMAND_OK, "ROLLBACK failed", err, errlen))
            return false;
        if (first == 0) {
            snprintf(err, errlen, "cannot read the COPY's snapshot");
            return false;
        }
        if (stopped(stop)) {
            snprintf(err, errlen, "load interrupted");
            return false;
        }
        if (monoclock_seconds() > until) {
            snprintf(err, errlen, "transaction %" PRIu32 ", whose rows were streamed, is still "
                     "not visible after %d s (a synchronous standby that does not answer?)",
                     first, LOADER_VISIBLE_WAIT_S);
            return false;
        }
        struct timespec tick = { 0, LOADER_VISIBLE_TICK_MS * 1000000L };
        nanosleep(&tick, NULL);
    }
}

static bool commit(PGconn *conn, char *err, size_t errlen)
{
    return loader_command(conn, "COMMIT", PGRES_COMMAND_OK, "COMMIT failed", err, errlen);
}

/*
 * One pass of the COPY sql into l's filter: *rows counts them.  With
 * resize, a filter that outgrows its first layer (or its rate) takes no
 * more: the rest is counted only and *over set.
 */
static bool copy_pass(PGconn *conn, const char *sql, struct table_load *l,
                      const struct loader_copy_opts *o, bool resize, uint64_t *rows, bool *over,
                      char *err, size_t errlen)
{
    struct filter *f = table_load_filter(l);
    bool interrupted, ok = false;
    *rows = 0;
    *over = false;
    PGresult *r = exec_stoppable(conn, sql, o->stop, &interrupted);
    if (interrupted) {
        snprintf(err, errlen, "load interrupted");
        return false;                   /* PQfinish by the caller ends the statement */
    }
    if (PQresultStatus(r) != PGRES_COPY_OUT) {
        loader_set_result_error(err, errlen, "COPY failed", conn, r);
        goto done;
    }
    PQclear(r);
    r = NULL;

    /* Hashes wait in a small batch so the filter can prefetch their blocks. */
    uint64_t batch[256];
    /* Rows to the next progress call: a countdown, not a division a row. */
    uint64_t to_progress = LOADER_PROGRESS_ROWS;
    size_t nb = 0, keycap = 0;
    char *keybuf = NULL;
    for (;;) {
        char *buf = NULL;
        size_t idlen;
        int got = copy_row_stoppable(conn, &buf, &idlen, o->stop);
        if (got == 0)
            break;                              /* COPY done */
        if (got < 0) {
            if (got == -2)
                snprintf(err, errlen, "load interrupted");  /* PQfinish ends the COPY */
            else
                loader_set_error(err, errlen, "COPY failed", conn);
            free(keybuf);
            goto done;
        }
        if (got == 2) {                         /* NULL: no ID, not a row of the count */
            PQfreemem(buf);
            continue;
        }
        (*rows)++;
        if (*over) {                            /* counted only, for the next filter's size */
            PQfreemem(buf);
            continue;
        }
        /* The row by its key (spell.h); a value whose key cannot be known, as it is. */
        const char *key = buf;
        size_t klen = idlen;
        if (o->spell != SPELL_TEXT) {
            size_t cap = spell_key_cap(o->spell, idlen);
            if (cap > keycap) {
                char *nk = realloc(keybuf, cap);
                if (nk == NULL) {
                    snprintf(err, errlen, "out of memory");
                    PQfreemem(buf);
                    free(keybuf);
                    goto done;
                }
                keybuf = nk;
                keycap = cap;
            }
            if (spell_key(o->spell, buf, idlen, keybuf, keycap, &klen) == SPELL_KEY)
                key = keybuf;
            else
                klen = idlen;
        }
        uint64_t h = filter_hash(key, klen);
        batch[nb++] = h;
        if (nb == sizeof batch / sizeof batch[0]) {
            filter_add_hashes_exclusive(f, batch, nb);
            table_load_added(l, batch, nb);
            nb = 0;
            *over = resize && (filter_layers(f) > 1 || filter_saturated(f));
        }
        table_load_seen(l, key, klen, h);
        PQfreemem(buf);
        if (--to_progress == 0) {
            to_progress = LOADER_PROGRESS_ROWS;
            if (o->progress)
                o->progress(o->progress_arg, *rows);
        }
    }
    if (!*over)
        filter_add_hashes_exclusive(f, batch, nb);
    table_load_added(l, batch, nb);
    *over = resize && (filter_layers(f) > 1 || filter_saturated(f));
    free(keybuf);
    r = PQgetResult(conn);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
        loader_set_result_error(err, errlen, "COPY failed", conn, r);
        goto done;
    }
    ok = true;
done:
    PQclear(r);
    /* Drain to the end so the connection can run the next command. */
    while (ok && (r = PQgetResult(conn)) != NULL)
        PQclear(r);
    return ok;
}

bool loader_copy(PGconn *conn, const struct filter_config *fc, struct table_load *l,
                 const struct loader_copy_opts *o, struct load_result *res, char *err,
                 size_t errlen)
{
    const struct loader_copy_opts none = { 0 };
    if (o == NULL)
        o = &none;
    char *tbl = NULL, *col = NULL, *sql = NULL;
    bool ok = false, over = true;
    uint64_t rows = 0;
    double t0 = monoclock_seconds();

    if (!loader_quote_names(conn, fc, &tbl, &col, err, errlen))
        return false;
    size_t len = strlen(tbl) + 2 * strlen(col) + 96;
    sql = malloc(len);
    if (sql == NULL) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    /*
     * No WHERE col IS NOT NULL: PostgreSQL 15 tests it on every row even
     * for a NOT NULL column (a key's), a tenth of a plain scan's time on
     * the server, which paces the load.  copy_pass skips NULLs instead,
     * by their text form (\N), as cheaply.
     */
    snprintf(sql, len, "COPY (SELECT %s::text FROM %s) TO STDOUT", col, tbl);
    /* A transaction always: a second pass (a resize) reads the very rows of the first. */
    if (o->snapshot && o->snapshot[0] ? !in_snapshot(conn, o->snapshot, err, errlen)
        : o->n_must_see > 0 ? !seeing(conn, o->must_see, o->n_must_see, o->stop, err, errlen)
        : !loader_command(conn, "BEGIN ISOLATION LEVEL REPEATABLE READ", PGRES_COMMAND_OK,
                          "BEGIN failed", err, errlen))
        goto done;
    res->resized = 0;
    for (int pass = 0; over; pass++) {
        if (!copy_pass(conn, sql, l, o, pass == 0, &rows, &over, err, errlen))
            goto done;
        enum filter_error fe;
        if (over && table_load_resize(l, rows, &res->resized, &fe) == NULL) {
            snprintf(err, errlen, "the table holds %llu rows, more than its estimate: cannot "
                     "create a filter for %llu items: %s", (unsigned long long)rows,
                     (unsigned long long)res->resized, filter_strerror(fe));
            goto done;
        }
    }
    if (!commit(conn, err, errlen))
        goto done;
    res->rows = rows;
    res->seconds = monoclock_seconds() - t0;
    ok = true;
done:
    free(sql);
    free(tbl);
    free(col);
    return ok;
}
