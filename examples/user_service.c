/*
 * user_service: a small PostgreSQL-backed service for bloomguard to guard.
 * GET /user/get/{id} runs one real SELECT on the users table and answers the
 * row as JSON (200) or {"id":...,"exists":false} (404), so every request for
 * an absent id that gets past the guard costs a database round trip; GET
 * /stats counts the queries sent.  Used by the nginx tests, the nginx
 * benchmark and `scripts/demo --nginx`.
 *
 *   user_service [--listen HOST:PORT] [--conninfo STR] [--threads N]
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
#include <unistd.h>

#include "idcodec.h"
#include "listen.h"

#define USER_PREFIX "/user/get/"
#define STMT_NAME "user_by_id"
#define STMT_SQL "SELECT * FROM users WHERE id = $1"
#define JSON_TYPE "application/json"
#define MAX_THREADS 256

struct service {
    const char *conninfo;
    pthread_key_t conn_key;                 /* each MHD worker's own PGconn */
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
            "\n"
            "  --listen HOST:PORT  address to serve on (default 127.0.0.1:8081; port 0 picks one)\n"
            "  --conninfo STR      libpq connection string (default \"\": PG* environment)\n"
            "  --threads N         worker threads, one PostgreSQL connection each\n"
            "                      (default: number of CPUs, at most %d)\n"
            "\n"
            "  GET /user/get/{id}  the users row as JSON, or 404\n"
            "  GET /stats          {\"queries\":N,...}\n",
            MAX_THREADS);
}

static void conn_free(void *p)
{
    PQfinish(p);
}

/*
 * The calling worker thread's connection with the lookup prepared on it,
 * made on first use and again after the server dropped it.  Each MHD worker
 * serves its own clients, so a connection is never shared between threads.
 */
static PGconn *worker_conn(struct service *s)
{
    PGconn *c = pthread_getspecific(s->conn_key);
    if (c != NULL && PQstatus(c) == CONNECTION_OK)
        return c;
    if (c != NULL) {
        PQfinish(c);
        pthread_setspecific(s->conn_key, NULL);
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
    pthread_setspecific(s->conn_key, c);
    atomic_fetch_add(&s->connections, 1);
    return c;
}

/*
 * Run the lookup for id on this thread's connection.  A connection the
 * server has dropped (a restart, an idle timeout) is replaced and the query
 * sent once more.  Returns the result (the caller PQclears it; it may hold
 * an SQL error), or NULL when PostgreSQL cannot be reached.
 */
static PGresult *lookup(struct service *s, const char *id)
{
    const char *params[1] = { id };
    for (int attempt = 0; attempt < 2; attempt++) {
        PGconn *c = worker_conn(s);
        if (c == NULL)
            return NULL;
        PGresult *r = PQexecPrepared(c, STMT_NAME, 1, params, NULL, NULL, 0);
        if (PQstatus(c) == CONNECTION_OK) {
            atomic_fetch_add(&s->queries, 1);
            return r;
        }
        fprintf(stderr, "user_service: connection lost: %s", PQerrorMessage(c));
        PQclear(r);
    }
    return NULL;
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

static enum MHD_Result get_user(struct service *s, struct MHD_Connection *conn, const char *raw)
{
    size_t rawlen = strlen(raw), idlen;
    /* One path segment, like bloomguard's "/user/get/{id}" template. */
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

    PGresult *r = lookup(s, id);
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
    } else if (PQresultStatus(r) == PGRES_TUPLES_OK) {
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
             "\"connections\":%llu,\"http_connections\":%llu}",
             (unsigned long long)atomic_load(&s->queries), (unsigned long long)atomic_load(&s->found),
             (unsigned long long)atomic_load(&s->not_found), (unsigned long long)atomic_load(&s->errors),
             (unsigned long long)atomic_load(&s->connections),
             (unsigned long long)atomic_load(&s->http_connections));
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
    if (strncmp(url, USER_PREFIX, strlen(USER_PREFIX)) == 0)
        return get_user(s, conn, url + strlen(USER_PREFIX));
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

    while ((opt = getopt_long(argc, argv, "l:c:t:h", opts, NULL)) != -1) {
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
    if (pthread_key_create(&s.conn_key, conn_free) != 0) {
        fprintf(stderr, "user_service: pthread_key_create failed\n");
        return 1;
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
    fprintf(stderr, "user_service: listening on http://%s%s%s:%u (threads: %lu)\n",
            v6 ? "[" : "", host, v6 ? "]" : "", port, threads);

    int sig;
    sigwait(&stop, &sig);
    fprintf(stderr, "user_service: stopping (%s)\n", strsignal(sig));
    /* Joins the workers, whose key destructor closes their PostgreSQL connections. */
    MHD_stop_daemon(d);
    pthread_key_delete(s.conn_key);
    return 0;
}
