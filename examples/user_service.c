/*
 * user_service: a small PostgreSQL-backed service for bloomguard to guard.
 * GET /user/get/{id} runs one real SELECT on the users table, GET
 * /orders/{id}/items one on the orders table (an ID in the middle of the
 * path), and each answers the row as JSON (200) or {"id":...,"exists":false}
 * (404), so every request for an absent id that gets past the guard costs a
 * database round trip; GET /stats counts the queries sent.  Used by the
 * nginx and Caddy tests, the attack benchmark and `scripts/demo --nginx`.
 *
 *   user_service [--listen HOST:PORT] [--conninfo STR] [--threads N]
 *                [--pool N] [--query-delay USEC]
 *
 * By default each worker thread has its own PostgreSQL connection.  --pool
 * shares N connections among all workers instead, as a service with a
 * connection pool does, and --query-delay holds the connection that much
 * longer per query: the round trip to a database on another host, which
 * bench/attack uses to make the pool the bottleneck that a flood of absent
 * ids saturates.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "idcodec.h"
#include "listen.h"

#define USER_PREFIX "/user/get/"
#define STMT_NAME "user_by_id"
#define STMT_SQL "SELECT * FROM users WHERE id = $1"
#define ORDER_PREFIX "/orders/"
#define ORDER_SUFFIX "/items"
/*
 * Not prepared: where the service runs against a database without an
 * orders table (bench/attack's), a failed PREPARE at connect would take
 * the users route down with it.  The id is sent as text for PostgreSQL to
 * read as the column's type, as a real service hands it the path segment.
 */
#define ORDER_SQL "SELECT * FROM orders WHERE id = $1"
#define JSON_TYPE "application/json"
#define MAX_THREADS 256
#define MAX_POOL 1024
#define MAX_DELAY_US 1000000

struct service {
    const char *conninfo;
    pthread_key_t conn_key;                 /* without a pool: each MHD worker's own PGconn * slot */
    unsigned long delay_us;                 /* held per query, with the connection */
    /* With a pool: pool_size connection slots, the free ones' indexes on a stack. */
    unsigned long pool_size;
    PGconn **pool;
    unsigned *pool_free;
    unsigned pool_nfree;
    pthread_mutex_t pool_mu;
    pthread_cond_t pool_cv;
    atomic_uint_fast64_t pool_waits;        /* lookups that found every pooled connection busy */
    atomic_uint_fast64_t queries;           /* lookups PostgreSQL answered, rows or not */
    atomic_uint_fast64_t found;
    atomic_uint_fast64_t not_found;
    atomic_uint_fast64_t errors;            /* database unreachable or failing */
    atomic_uint_fast64_t connections;       /* made to PostgreSQL */
    atomic_uint_fast64_t http_connections;  /* accepted from clients: shows keep-alive at work */
    atomic_bool db_down;                    /* log connection trouble once, not per request */
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: user_service [--listen HOST:PORT] [--conninfo STR] [--threads N]\n"
            "                    [--pool N] [--query-delay USEC]\n"
            "\n"
            "  --listen HOST:PORT  address to serve on (default 127.0.0.1:8081; port 0 picks one)\n"
            "  --conninfo STR      libpq connection string (default \"\": PG* environment)\n"
            "  --threads N         worker threads, one PostgreSQL connection each\n"
            "                      (default: number of CPUs, at most %d)\n"
            "  --pool N            share N PostgreSQL connections among the workers\n"
            "                      instead (a lookup waits for a free one; 1..%d)\n"
            "  --query-delay USEC  hold the connection USEC microseconds longer per query,\n"
            "                      as a database on another host would (default 0)\n"
            "\n"
            "  GET /user/get/{id}  the users row as JSON, or 404\n"
            "  GET /orders/{id}/items  the orders row as JSON, or 404\n"
            "  GET /stats          {\"queries\":N,...}\n",
            MAX_THREADS, MAX_POOL);
}

static void slot_free(void *p)
{
    PGconn **slot = p;
    PQfinish(*slot);
    free(slot);
}

/*
 * The slot holding the connection this lookup may use: the worker thread's
 * own, or a pooled one taken until slot_release.  Either way no other thread
 * uses it meanwhile.  NULL when out of memory.
 */
static PGconn **slot_take(struct service *s)
{
    if (s->pool_size == 0) {
        PGconn **slot = pthread_getspecific(s->conn_key);
        if (slot == NULL && (slot = calloc(1, sizeof *slot)) != NULL &&
            pthread_setspecific(s->conn_key, slot) != 0) {
            free(slot);
            slot = NULL;
        }
        return slot;
    }
    pthread_mutex_lock(&s->pool_mu);
    if (s->pool_nfree == 0)
        atomic_fetch_add(&s->pool_waits, 1);
    while (s->pool_nfree == 0)
        pthread_cond_wait(&s->pool_cv, &s->pool_mu);
    PGconn **slot = &s->pool[s->pool_free[--s->pool_nfree]];
    pthread_mutex_unlock(&s->pool_mu);
    return slot;
}

static void slot_release(struct service *s, PGconn **slot)
{
    if (s->pool_size == 0)
        return;
    pthread_mutex_lock(&s->pool_mu);
    s->pool_free[s->pool_nfree++] = (unsigned)(slot - s->pool);
    pthread_cond_signal(&s->pool_cv);
    pthread_mutex_unlock(&s->pool_mu);
}

/*
 * The slot's connection with the lookup prepared on it, made on first use
 * and again after the server dropped it.
 */
static PGconn *slot_conn(struct service *s, PGconn **slot)
{
    PGconn *c = *slot;
    if (c != NULL && PQstatus(c) == CONNECTION_OK)
        return c;
    if (c != NULL) {
        PQfinish(c);
        *slot = NULL;
    }
    c = PQconnectdb(s->conninfo);
    if (PQstatus(c) != CONNECTION_OK) {
        if (!atomic_exchange(&s->db_down, true))
            fprintf(stderr, "user_service: cannot connect to PostgreSQL: %s", PQerrorMessage(c));
        PQfinish(c);
        return NULL;
    }
    PGresult *r = PQprepare(c, STMT_NAME, STMT_SQL, 1, NULL);
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok && !atomic_exchange(&s->db_down, true))
        fprintf(stderr, "user_service: cannot prepare \"%s\": %s", STMT_SQL, PQerrorMessage(c));
    PQclear(r);
    if (!ok) {
        PQfinish(c);
        return NULL;
    }
    if (atomic_exchange(&s->db_down, false))
        fprintf(stderr, "user_service: connected to PostgreSQL again\n");
    *slot = c;
    atomic_fetch_add(&s->connections, 1);
    return c;
}

/* Sleep the configured per-query delay (the time on the wire to a remote
 * database), holding whatever the caller holds. */
static void query_delay(const struct service *s)
{
    if (s->delay_us == 0)
        return;
    struct timespec ts = { (time_t)(s->delay_us / 1000000), (long)(s->delay_us % 1000000) * 1000 };
    while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR) {}
}

/*
 * Run the lookup for id on this thread's connection, or on a pooled one:
 * the prepared users query, or sql (ORDER_SQL) when not NULL.  A connection
 * the server has dropped (a restart, an idle timeout) is replaced and the
 * query sent once more.  Returns the result (the caller PQclears it; it may
 * hold an SQL error), or NULL when PostgreSQL cannot be reached.
 */
static PGresult *lookup(struct service *s, const char *sql, const char *id)
{
    const char *params[1] = { id };
    PGconn **slot = slot_take(s);
    PGresult *r = NULL;
    if (slot == NULL)
        return NULL;
    for (int attempt = 0; attempt < 2; attempt++) {
        PGconn *c = slot_conn(s, slot);
        if (c == NULL)
            break;
        query_delay(s);
        r = sql == NULL ? PQexecPrepared(c, STMT_NAME, 1, params, NULL, NULL, 0)
                        : PQexecParams(c, sql, 1, NULL, params, NULL, NULL, 0);
        if (PQstatus(c) == CONNECTION_OK) {
            atomic_fetch_add(&s->queries, 1);
            break;
        }
        fprintf(stderr, "user_service: connection lost: %s", PQerrorMessage(c));
        PQclear(r);
        r = NULL;
    }
    slot_release(s, slot);
    return r;
}

/* A JSON response that owns body (freed by MHD; also on failure here). */
static struct MHD_Response *json_response(char *body)
{
    if (body == NULL)
        return NULL;
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body,
                                                             MHD_RESPMEM_MUST_FREE);
    if (r == NULL)
        free(body);
    else
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, JSON_TYPE);
    return r;
}

static char *error_body(const char *code, const char *message)
{
    json_t *o = json_pack("{s:s, s:s}", "error", code, "message", message);
    char *s = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}

/* Queue r and drop our reference; a NULL r (out of memory) closes the connection. */
static enum MHD_Result send_response(struct MHD_Connection *conn, unsigned status,
                                     struct MHD_Response *r)
{
    if (r == NULL)
        return MHD_NO;
    enum MHD_Result ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_pack(struct MHD_Connection *conn, unsigned status, json_t *o)
{
    char *s = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return send_response(conn, status, json_response(s));
}

static enum MHD_Result send_error(struct MHD_Connection *conn, unsigned status, const char *code,
                                  const char *message)
{
    return send_response(conn, status, json_response(error_body(code, message)));
}

/* The first row of r as {"column":"text value" or null, ...}. */
static json_t *row_json(const PGresult *r)
{
    json_t *o = json_object();
    for (int i = 0; o != NULL && i < PQnfields(r); i++) {
        json_t *v = PQgetisnull(r, 0, i) ? NULL : json_stringn(PQgetvalue(r, 0, i),
                                                               (size_t)PQgetlength(r, 0, i));
        json_object_set_new(o, PQfname(r, i), v != NULL ? v : json_null());
    }
    return o;
}

/* An error in the value sent (SQLSTATE class 22: "abc" as a bigint), not in the database. */
static bool is_data_exception(const PGresult *r)
{
    const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    return PQresultStatus(r) == PGRES_FATAL_ERROR && state != NULL && strncmp(state, "22", 2) == 0;
}

/*
 * The row of the id raw[0..rawlen) stands for, by the users query (sql
 * NULL) or ORDER_SQL.
 */
static enum MHD_Result get_row(struct service *s, struct MHD_Connection *conn, const char *sql,
                               const char *raw, size_t rawlen)
{
    size_t idlen;
    /* One path segment, as bloomguard's {id} is. */
    if (rawlen == 0 || memchr(raw, '/', rawlen) != NULL)
        return send_error(conn, MHD_HTTP_NOT_FOUND, "no_route", "no such endpoint");
    char *id = malloc(rawlen + 1);
    if (id == NULL)
        return MHD_NO;
    /* Decoded exactly as bloomguard decodes it (and UTF-8, as a text column holds). */
    enum id_error e = id_decode(raw, rawlen, rawlen, id, rawlen + 1, &idlen);
    if (e != ID_OK) {
        free(id);
        return send_error(conn, MHD_HTTP_BAD_REQUEST, id_error_code(e), id_strerror(e));
    }
    json_t *jid = json_stringn(id, idlen);
    if (jid == NULL) {
        free(id);
        return MHD_NO;
    }

    PGresult *r = lookup(s, sql, id);
    free(id);
    enum MHD_Result ret;
    if (r == NULL) {
        atomic_fetch_add(&s->errors, 1);
        json_decref(jid);
        return send_error(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "database_unavailable",
                          "PostgreSQL cannot be reached");
    }
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0) {
        atomic_fetch_add(&s->found, 1);
        json_decref(jid);
        ret = send_pack(conn, MHD_HTTP_OK, row_json(r));
    } else if (PQresultStatus(r) == PGRES_TUPLES_OK || is_data_exception(r)) {
        /* "abc" or 1e30 as a bigint: no such row either, as a real service would say. */
        atomic_fetch_add(&s->not_found, 1);
        /* The shape of bloomguard's /exists answer, so a 404 reads the same
         * whether the guard or the database said no. */
        ret = send_pack(conn, MHD_HTTP_NOT_FOUND, json_pack("{s:o, s:b}", "id", jid, "exists", 0));
    } else {
        atomic_fetch_add(&s->errors, 1);
        json_decref(jid);
        fprintf(stderr, "user_service: query failed: %s", PQresultErrorMessage(r));
        ret = send_error(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "database_error", "the query failed");
    }
    PQclear(r);
    return ret;
}

static enum MHD_Result get_stats(struct service *s, struct MHD_Connection *conn)
{
    char buf[256];
    snprintf(buf, sizeof buf,
             "{\"queries\":%llu,\"found\":%llu,\"not_found\":%llu,\"errors\":%llu,"
             "\"connections\":%llu,\"http_connections\":%llu,\"pool_waits\":%llu}",
             (unsigned long long)atomic_load(&s->queries), (unsigned long long)atomic_load(&s->found),
             (unsigned long long)atomic_load(&s->not_found), (unsigned long long)atomic_load(&s->errors),
             (unsigned long long)atomic_load(&s->connections),
             (unsigned long long)atomic_load(&s->http_connections),
             (unsigned long long)atomic_load(&s->pool_waits));
    return send_response(conn, MHD_HTTP_OK, json_response(strdup(buf)));
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **req_cls)
{
    static char seen;
    struct service *s = cls;
    (void)version;
    (void)upload_data;

    /* Answering on the first call would make MHD close keep-alive connections. */
    if (*req_cls == NULL) {
        *req_cls = &seen;
        return MHD_YES;
    }
    if (*upload_data_size != 0) {
        *upload_data_size = 0;      /* no endpoint takes a body */
        return MHD_YES;
    }
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
        struct MHD_Response *r = json_response(error_body("method_not_allowed", "use GET or HEAD"));
        if (r != NULL)
            MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
        return send_response(conn, MHD_HTTP_METHOD_NOT_ALLOWED, r);
    }
    size_t len = strlen(url), pre = strlen(ORDER_PREFIX), suf = strlen(ORDER_SUFFIX);
    if (strncmp(url, USER_PREFIX, strlen(USER_PREFIX)) == 0)
        return get_row(s, conn, NULL, url + strlen(USER_PREFIX), len - strlen(USER_PREFIX));
    /* bloomguard's "/orders/{id}/items": the id is what lies between. */
    if (len > pre + suf && strncmp(url, ORDER_PREFIX, pre) == 0
        && strcmp(url + len - suf, ORDER_SUFFIX) == 0)
        return get_row(s, conn, ORDER_SQL, url + pre, len - pre - suf);
    if (strcmp(url, "/stats") == 0)
        return get_stats(s, conn);
    return send_error(conn, MHD_HTTP_NOT_FOUND, "no_route", "no such endpoint");
}

/*
 * Route on the path exactly as it came off the request line, as bloomguard
 * matches it: were "/user%2Fget/7" decoded before routing, it would reach
 * the database while the guard saw no "/user/get/{id}" and let it by.
 */
static size_t no_unescape(void *cls, struct MHD_Connection *c, char *s)
{
    (void)cls;
    (void)c;
    return strlen(s);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    struct service *s = cls;
    (void)c;
    (void)socket_context;
    if (code == MHD_CONNECTION_NOTIFY_STARTED)
        atomic_fetch_add(&s->http_connections, 1);
}

/* Split "host:port" or "[v6]:port"; host points into buf. */
static bool parse_listen(const char *arg, char *buf, size_t cap, const char **host, unsigned *port)
{
    const char *colon = strrchr(arg, ':');
    if (colon == NULL || strlen(arg) >= cap)
        return false;
    char *end;
    errno = 0;
    unsigned long p = strtoul(colon + 1, &end, 10);
    if (colon[1] == '\0' || *end != '\0' || errno != 0 || p > 65535)
        return false;
    size_t hl = (size_t)(colon - arg);
    memcpy(buf, arg, hl);
    buf[hl] = '\0';
    if (hl >= 2 && buf[0] == '[' && buf[hl - 1] == ']') {
        buf[hl - 1] = '\0';
        buf++;
    }
    *host = buf;
    *port = (unsigned)p;
    return **host != '\0';
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "listen", required_argument, NULL, 'l' },
        { "conninfo", required_argument, NULL, 'c' },
        { "threads", required_argument, NULL, 't' },
        { "pool", required_argument, NULL, 'p' },
        { "query-delay", required_argument, NULL, 'd' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    struct service s = { .conninfo = "" };
    const char *listen_arg = "127.0.0.1:8081", *host;
    char hostbuf[256];
    unsigned port;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned long threads = ncpu > 0 ? (unsigned long)ncpu : 1;
    int opt;

    while ((opt = getopt_long(argc, argv, "l:c:t:p:d:h", opts, NULL)) != -1) {
        char *end;
        switch (opt) {
        case 'l':
            listen_arg = optarg;
            break;
        case 'c':
            s.conninfo = optarg;
            break;
        case 't':
            threads = strtoul(optarg, &end, 10);
            if (*optarg == '\0' || *end != '\0' || threads < 1 || threads > MAX_THREADS) {
                fprintf(stderr, "user_service: --threads must be 1..%d\n", MAX_THREADS);
                return 1;
            }
            break;
        case 'p':
            s.pool_size = strtoul(optarg, &end, 10);
            if (*optarg == '\0' || *end != '\0' || s.pool_size < 1 || s.pool_size > MAX_POOL) {
                fprintf(stderr, "user_service: --pool must be 1..%d\n", MAX_POOL);
                return 1;
            }
            break;
        case 'd':
            s.delay_us = strtoul(optarg, &end, 10);
            if (*optarg == '\0' || *end != '\0' || s.delay_us > MAX_DELAY_US) {
                fprintf(stderr, "user_service: --query-delay must be 0..%d microseconds\n", MAX_DELAY_US);
                return 1;
            }
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 1;
        }
    }
    if (optind != argc) {
        usage(stderr);
        return 1;
    }
    if (threads > MAX_THREADS)
        threads = MAX_THREADS;
    if (!parse_listen(listen_arg, hostbuf, sizeof hostbuf, &host, &port)) {
        fprintf(stderr, "user_service: --listen wants HOST:PORT, got \"%s\"\n", listen_arg);
        return 1;
    }
    int family = 0;
    char err[256];
    int fd = listen_tcp(host, port, &family, &port, err, sizeof err);
    if (fd < 0) {
        fprintf(stderr, "user_service: %s\n", err);
        return 1;
    }
    bool v6 = family == AF_INET6;

    /* Workers inherit this mask, so only sigwait below sees the signals. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (pthread_key_create(&s.conn_key, slot_free) != 0) {
        fprintf(stderr, "user_service: pthread_key_create failed\n");
        return 1;
    }
    if (s.pool_size > 0) {
        s.pool = calloc(s.pool_size, sizeof *s.pool);
        s.pool_free = calloc(s.pool_size, sizeof *s.pool_free);
        if (s.pool == NULL || s.pool_free == NULL) {
            fprintf(stderr, "user_service: out of memory\n");
            return 1;
        }
        for (unsigned i = 0; i < s.pool_size; i++)
            s.pool_free[s.pool_nfree++] = i;
        pthread_mutex_init(&s.pool_mu, NULL);
        pthread_cond_init(&s.pool_cv, NULL);
    }

    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG | (v6 ? MHD_USE_IPv6 : 0);
    /* One thread is MHD's internal thread alone: MHD warns about a pool of 1 (or 0). */
    struct MHD_OptionItem pool[] = {
        { threads > 1 ? MHD_OPTION_THREAD_POOL_SIZE : MHD_OPTION_END, (intptr_t)threads, NULL },
        { MHD_OPTION_END, 0, NULL },
    };
    struct MHD_Daemon *d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, &s,
                                            MHD_OPTION_LISTEN_SOCKET, fd,
                                            MHD_OPTION_ARRAY, pool,
                                            MHD_OPTION_CONNECTION_LIMIT, 4096u,
                                            MHD_OPTION_CONNECTION_TIMEOUT, 30u,
                                            MHD_OPTION_UNESCAPE_CALLBACK, no_unescape, NULL,
                                            MHD_OPTION_NOTIFY_CONNECTION, on_connection, &s,
                                            MHD_OPTION_END);
    if (d == NULL) {
        fprintf(stderr, "user_service: cannot start the HTTP server\n");
        close(fd);
        return 1;
    }
    fprintf(stderr, "user_service: listening on http://%s%s%s:%u (threads: %lu", v6 ? "[" : "",
            host, v6 ? "]" : "", port, threads);
    if (s.pool_size > 0)
        fprintf(stderr, ", pool: %lu connections", s.pool_size);
    if (s.delay_us > 0)
        fprintf(stderr, ", query delay: %lu us", s.delay_us);
    fprintf(stderr, ")\n");

    int sig;
    sigwait(&stop, &sig);
    fprintf(stderr, "user_service: stopping (%s)\n", strsignal(sig));
    /* Joins the workers, whose key destructor closes their PostgreSQL connections. */
    MHD_stop_daemon(d);
    pthread_key_delete(s.conn_key);
    for (unsigned long i = 0; i < s.pool_size; i++)
        PQfinish(s.pool[i]);
    free(s.pool);
    free(s.pool_free);
    return 0;
}
