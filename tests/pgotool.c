/*
 * src/pg/pgoutput.c against a real walsender, for tests/pgoutput.test and for
 * capturing fuzz seeds: it follows a publication through a temporary
 * logical slot and prints one line per event, as the WAL follower would see
 * them.
 *
 *   pgotool -d CONNINFO -p PUBLICATIONS [-n COMMITS] [-t SECONDS] [-D DIR]
 *
 * CONNINFO is libpq's (replication=database is added).  Once the slot
 * exists it prints "slot NAME consistent_point LSN" (changes committed
 * after that are streamed), then one line per message, e.g.
 *   begin xid=740 final_lsn=0/1A2B3C8
 *   relation 16384 public.users ident=d cols=id:int8,email:text key=id
 *   insert 16384 id='42' email='a@b'
 *   update 16384 key: id='41' new: id='42' email=unchanged
 *   delete 16384 key: id='42' email=null
 *   truncate 16384,16390 cascade=0 restart_identity=1
 *   message transactional=1 lsn=0/1A2B3C8 prefix=bloomguard content='x'
 *   commit lsn=0/1A2B3C8 end_lsn=0/1A2B3F8
 *   keepalive walend=0/1A2B3F8 reply=0
 * Values are quoted; bytes below 0x20, 0x7f, \ and ' are written \xNN,
 * every other byte (UTF-8 included) as it is.  It answers keepalives that
 * ask for a reply, stops after COMMITS commits (default: never) or SECONDS
 * seconds (default 60; exit 3), and with -D writes each CopyData payload to
 * DIR/NNNN-w-X or DIR/NNNN-k (X the message type).  Exit 0 after COMMITS
 * commits, 1 on any error (a message the decoder refuses included), 2 on
 * bad usage.
 */
#include <errno.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

#include "pgoutput.h"

/* Type OIDs seen in 'Y' messages, for the relation lines. */
#define MAX_TYPES 64

struct tool {
    PGconn *conn;
    struct pgoutput_rels *rels;
    const char *dumpdir;
    unsigned dumped;
    uint64_t received;          /* the highest WAL end the server told us */
    uint64_t flushed;           /* the end of the last commit printed */
    long commits, want_commits;
    struct { uint32_t oid; char name[128]; } types[MAX_TYPES];
    unsigned ntypes;
};

static int usage(void)
{
    fprintf(stderr, "usage: pgotool -d CONNINFO -p PUBLICATIONS [-n COMMITS] [-t SECONDS] [-D DIR]\n");
    return 2;
}

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *lsn(uint64_t v, char *buf)
{
    pgoutput_lsn_format(v, buf);
    return buf;
}

static const char *type_name(const struct tool *t, uint32_t oid, char *buf, size_t len)
{
    static const struct { uint32_t oid; const char *name; } builtin[] = {
        { 16, "bool" }, { 17, "bytea" }, { 20, "int8" }, { 21, "int2" }, { 23, "int4" },
        { 25, "text" }, { 26, "oid" }, { 700, "float4" }, { 701, "float8" }, { 1043, "varchar" },
        { 1082, "date" }, { 1114, "timestamp" }, { 1184, "timestamptz" }, { 1186, "interval" },
        { 1700, "numeric" }, { 2950, "uuid" }, { 3802, "jsonb" },
    };
    for (size_t i = 0; i < sizeof builtin / sizeof builtin[0]; i++)
        if (builtin[i].oid == oid)
            return builtin[i].name;
    for (unsigned i = 0; i < t->ntypes; i++)
        if (t->types[i].oid == oid)
            return t->types[i].name;
    snprintf(buf, len, "%" PRIu32, oid);
    return buf;
}

static void put_bytes(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c < 0x20 || c == 0x7f || c == '\\' || c == '\'')
            printf("\\x%02x", c);
        else
            putchar(c);
    }
}

/* A tuple's columns as name=value, names from the relation cache. */
static bool put_tuple(const struct pgoutput_rel *rel, const struct pgoutput_tuple *tup)
{
    struct pgoutput_iter it;
    struct pgoutput_col col;
    if (tup->ncols != rel->ncols) {
        fprintf(stderr, "pgotool: tuple of %u columns for relation %" PRIu32 " of %u\n",
                tup->ncols, rel->relid, rel->ncols);
        return false;
    }
    pgoutput_tuple_iter(tup, &it);
    for (unsigned i = 0; pgoutput_tuple_next(&it, &col); i++) {
        printf(" %s=", rel->cols[i].name);
        switch (col.kind) {
        case 'n': printf("null"); break;
        case 'u': printf("unchanged"); break;
        case 'b': printf("b'"); put_bytes(col.value, col.len); putchar('\''); break;
        default: putchar('\''); put_bytes(col.value, col.len); putchar('\''); break;
        }
    }
    return true;
}

static const struct pgoutput_rel *rel_of(const struct tool *t, uint32_t relid)
{
    const struct pgoutput_rel *rel = pgoutput_rels_get(t->rels, relid);
    if (rel == NULL)
        fprintf(stderr, "pgotool: a change of relation %" PRIu32 " before its Relation message\n", relid);
    return rel;
}

static bool print_relation(struct tool *t, const struct pgoutput_msg *m)
{
    enum pgoutput_error e = pgoutput_rels_put(t->rels, m);
    if (e != PGOUTPUT_OK) {
        fprintf(stderr, "pgotool: relation cache: %s\n", pgoutput_strerror(e));
        return false;
    }
    const struct pgoutput_rel *rel = pgoutput_rels_get(t->rels, m->relation.relid);
    char buf[16];
    printf("relation %" PRIu32 " %s.%s ident=%c cols=", rel->relid, rel->nspname, rel->relname,
           rel->replident);
    for (unsigned i = 0; i < rel->ncols; i++)
        printf("%s%s:%s", i ? "," : "", rel->cols[i].name,
               type_name(t, rel->cols[i].typid, buf, sizeof buf));
    printf(" key=");
    unsigned keys = 0;
    for (unsigned i = 0; i < rel->ncols; i++)
        if (rel->cols[i].flags & PGOUTPUT_ATTR_KEY)
            printf("%s%s", keys++ ? "," : "", rel->cols[i].name);
    if (keys == 0)
        printf("-");
    return true;
}

static bool print_msg(struct tool *t, const struct pgoutput_msg *m)
{
    char a[PGOUTPUT_LSN_BUFSIZE], b[PGOUTPUT_LSN_BUFSIZE];
    const struct pgoutput_rel *rel;
    bool ok = true;
    switch (m->type) {
    case PGOUTPUT_BEGIN:
        printf("begin xid=%" PRIu32 " final_lsn=%s", m->begin.xid, lsn(m->begin.final_lsn, a));
        break;
    case PGOUTPUT_COMMIT:
        printf("commit lsn=%s end_lsn=%s", lsn(m->commit.commit_lsn, a), lsn(m->commit.end_lsn, b));
        t->flushed = m->commit.end_lsn;
        t->commits++;
        break;
    case PGOUTPUT_ORIGIN:
        printf("origin name=%s lsn=%s", m->origin.name, lsn(m->origin.lsn, a));
        break;
    case PGOUTPUT_RELATION:
        ok = print_relation(t, m);
        break;
    case PGOUTPUT_TYPE:
        printf("type %" PRIu32 " %s.%s", m->pgtype.typid, m->pgtype.nspname, m->pgtype.typname);
        if (t->ntypes < MAX_TYPES) {
            t->types[t->ntypes].oid = m->pgtype.typid;
            snprintf(t->types[t->ntypes].name, sizeof t->types[0].name, "%s", m->pgtype.typname);
            t->ntypes++;
        }
        break;
    case PGOUTPUT_INSERT:
        ok = (rel = rel_of(t, m->insert.relid)) != NULL;
        if (ok) {
            printf("insert %" PRIu32, m->insert.relid);
            ok = put_tuple(rel, &m->insert.tuple);
        }
        break;
    case PGOUTPUT_UPDATE:
        ok = (rel = rel_of(t, m->update.relid)) != NULL;
        if (ok) {
            printf("update %" PRIu32, m->update.relid);
            if (m->update.old_kind != 0) {
                printf(" %s:", m->update.old_kind == 'K' ? "key" : "old");
                ok = put_tuple(rel, &m->update.old);
            }
            printf(" new:");
            ok = ok && put_tuple(rel, &m->update.tuple);
        }
        break;
    case PGOUTPUT_DELETE:
        ok = (rel = rel_of(t, m->delete.relid)) != NULL;
        if (ok) {
            printf("delete %" PRIu32 " %s:", m->delete.relid, m->delete.old_kind == 'K' ? "key" : "old");
            ok = put_tuple(rel, &m->delete.old);
        }
        break;
    case PGOUTPUT_TRUNCATE:
        printf("truncate ");
        for (uint32_t i = 0; i < m->truncate.nrelids; i++)
            printf("%s%" PRIu32, i ? "," : "", pgoutput_truncate_relid(m, i));
        printf(" cascade=%d restart_identity=%d", !!(m->truncate.options & PGOUTPUT_TRUNCATE_CASCADE),
               !!(m->truncate.options & PGOUTPUT_TRUNCATE_RESTART_IDENTITY));
        break;
    case PGOUTPUT_MESSAGE:
        printf("message transactional=%d lsn=%s prefix=%s content='",
               !!(m->message.flags & PGOUTPUT_MESSAGE_TRANSACTIONAL), lsn(m->message.lsn, a),
               m->message.prefix);
        put_bytes(m->message.content, m->message.content_len);
        putchar('\'');
        break;
    }
    putchar('\n');
    fflush(stdout);
    return ok;
}

static bool send_status(struct tool *t)
{
    unsigned char buf[PGOUTPUT_STATUS_SIZE];
    size_t n = pgoutput_status_encode(buf, sizeof buf, t->received, t->flushed, t->flushed,
                                      pgoutput_time_from_unix_us(now_us()), false);
    if (PQputCopyData(t->conn, (const char *)buf, (int)n) != 1 || PQflush(t->conn) != 0) {
        fprintf(stderr, "pgotool: sending the status update: %s", PQerrorMessage(t->conn));
        return false;
    }
    return true;
}

static void dump(struct tool *t, const char *p, size_t n)
{
    char path[4096];
    if (t->dumpdir == NULL)
        return;
    if (n >= 26 && p[0] == 'w')
        snprintf(path, sizeof path, "%s/%04u-w-%c", t->dumpdir, t->dumped++, p[25]);
    else
        snprintf(path, sizeof path, "%s/%04u-%c", t->dumpdir, t->dumped++, n ? p[0] : '0');
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(p, 1, n, f) != n || fclose(f) != 0)
        fprintf(stderr, "pgotool: writing %s: %s\n", path, strerror(errno));
}

static void hexdump(const char *p, size_t n)
{
    fprintf(stderr, "pgotool: payload (%zu bytes):", n);
    for (size_t i = 0; i < n && i < 256; i++)
        fprintf(stderr, " %02x", (unsigned char)p[i]);
    fprintf(stderr, "\n");
}

/* One CopyData payload: false on anything the decoder refuses. */
static bool handle(struct tool *t, const char *p, size_t n)
{
    struct pgoutput_frame f;
    struct pgoutput_msg m;
    char a[PGOUTPUT_LSN_BUFSIZE];
    enum pgoutput_error e;

    dump(t, p, n);
    if ((e = pgoutput_frame_decode(p, n, &f)) != PGOUTPUT_OK) {
        fprintf(stderr, "pgotool: frame: %s\n", pgoutput_strerror(e));
        hexdump(p, n);
        return false;
    }
    if (f.wal_end > t->received)
        t->received = f.wal_end;
    if (f.type == PGOUTPUT_KEEPALIVE) {
        printf("keepalive walend=%s reply=%u\n", lsn(f.wal_end, a), f.reply_requested);
        fflush(stdout);
        return !f.reply_requested || send_status(t);
    }
    if ((e = pgoutput_decode(f.data, f.len, &m)) != PGOUTPUT_OK) {
        fprintf(stderr, "pgotool: message: %s\n", pgoutput_strerror(e));
        hexdump(p, n);
        return false;
    }
    return print_msg(t, &m);
}

static PGresult *exec_want(PGconn *conn, const char *sql, ExecStatusType want)
{
    PGresult *r = PQexec(conn, sql);
    if (PQresultStatus(r) != want) {
        fprintf(stderr, "pgotool: %s: %s", sql, PQerrorMessage(conn));
        PQclear(r);
        return NULL;
    }
    return r;
}

/* Stream until the commits are in or the time is up: 0, 1 (error) or 3 (timeout). */
static int stream(struct tool *t, double seconds)
{
    double deadline = mono() + seconds, next_status = mono() + 10;
    for (;;) {
        char *buf;
        int n = PQgetCopyData(t->conn, &buf, 1);
        if (n > 0) {
            bool ok = handle(t, buf, (size_t)n);
            PQfreemem(buf);
            if (!ok)
                return 1;
            if (t->want_commits > 0 && t->commits >= t->want_commits) {
                printf("done commits=%ld\n", t->commits);
                return send_status(t) ? 0 : 1;
            }
            continue;
        }
        if (n == -1) {
            PGresult *r = PQgetResult(t->conn);
            fprintf(stderr, "pgotool: the server ended the stream: %s", PQresultErrorMessage(r));
            PQclear(r);
            return 1;
        }
        if (n == -2) {
            fprintf(stderr, "pgotool: %s", PQerrorMessage(t->conn));
            return 1;
        }
        double now = mono();
        if (now >= deadline) {
            fprintf(stderr, "pgotool: timeout after %.0f s, %ld commits\n", seconds, t->commits);
            return 3;
        }
        /* Report progress now and then, as a follower must within wal_sender_timeout. */
        if (now >= next_status) {
            if (!send_status(t))
                return 1;
            next_status = now + 10;
        }
        double wait = deadline - now < next_status - now ? deadline - now : next_status - now;
        fd_set fds;
        FD_ZERO(&fds);
        FD_SET(PQsocket(t->conn), &fds);
        struct timeval tv = { (time_t)wait, (suseconds_t)((wait - (double)(time_t)wait) * 1e6) };
        if (select(PQsocket(t->conn) + 1, &fds, NULL, NULL, &tv) < 0 && errno != EINTR) {
            perror("pgotool: select");
            return 1;
        }
        if (!PQconsumeInput(t->conn)) {
            fprintf(stderr, "pgotool: %s", PQerrorMessage(t->conn));
            return 1;
        }
    }
}

int main(int argc, char **argv)
{
    const char *conninfo = NULL, *pubs = NULL;
    double seconds = 60;
    struct tool t = { .want_commits = 0 };
    int opt, rc = 1;

    while ((opt = getopt(argc, argv, "d:p:n:t:D:")) != -1) {
        switch (opt) {
        case 'd': conninfo = optarg; break;
        case 'p': pubs = optarg; break;
        case 'n': t.want_commits = strtol(optarg, NULL, 10); break;
        case 't': seconds = strtod(optarg, NULL); break;
        case 'D': t.dumpdir = optarg; break;
        default: return usage();
        }
    }
    if (conninfo == NULL || pubs == NULL || optind != argc || !(seconds > 0))
        return usage();

    t.rels = pgoutput_rels_new(1000, 16 << 20);
    const char *keys[] = { "dbname", "replication", NULL };
    const char *vals[] = { conninfo, "database", NULL };
    t.conn = PQconnectdbParams(keys, vals, 1);
    if (t.rels == NULL || PQstatus(t.conn) != CONNECTION_OK) {
        fprintf(stderr, "pgotool: cannot connect: %s", PQerrorMessage(t.conn));
        goto out;
    }

    char slot[64], sql[1024];
    snprintf(slot, sizeof slot, "pgotool_%ld", (long)getpid());
    snprintf(sql, sizeof sql, "CREATE_REPLICATION_SLOT %s TEMPORARY LOGICAL pgoutput (SNAPSHOT 'nothing')", slot);
    PGresult *r = exec_want(t.conn, sql, PGRES_TUPLES_OK);
    if (r == NULL)
        goto out;
    printf("slot %s consistent_point %s\n", PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1));
    fflush(stdout);
    PQclear(r);

    char *lit = PQescapeLiteral(t.conn, pubs, strlen(pubs));
    if (lit == NULL) {
        fprintf(stderr, "pgotool: %s", PQerrorMessage(t.conn));
        goto out;
    }
    snprintf(sql, sizeof sql, "START_REPLICATION SLOT %s LOGICAL 0/0 (proto_version '1', "
             "publication_names %s, messages 'true')", slot, lit);
    PQfreemem(lit);
    r = exec_want(t.conn, sql, PGRES_COPY_BOTH);
    if (r == NULL)
        goto out;
    PQclear(r);
    rc = stream(&t, seconds);
out:
    PQfinish(t.conn);
    pgoutput_rels_free(t.rels);
    return rc;
}
