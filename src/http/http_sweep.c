/*
 * What the server does about clients over time rather than per request:
 * a sweeper thread closes connections whose request headers are overdue,
 * and per-connection warnings are rate-limited so that clients cannot
 * flood the log.
 */
#include "http_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "config.h"
#include "log.h"
#include "monoclock.h"

/* ------------------------------------------------------------ warnings -- */

/* Close the window if it is over; a summary line says what was held back. */
static void warn_roll_locked(struct http *h, uint64_t now)
{
    if (now < h->warn_window || now - h->warn_window < WARN_WINDOW_S * (uint64_t)NS_PER_S)
        return;
    if (h->warn_suppressed > 0)
        log_warn(h->a->lg, "http: %lu more warnings in the last %u s not logged (at most %u per %u s)",
                 h->warn_suppressed, WARN_WINDOW_S, WARN_BURST, WARN_WINDOW_S);
    h->warn_window = now;
    h->warn_shown = 0;
    h->warn_suppressed = 0;
}

/*
 * A warning about one connection or request: clients decide how many there
 * are, so at most WARN_BURST reach the log per window.
 */
void http_warn(struct http *h, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t n = strlen(msg);
    while (n > 0 && msg[n - 1] == '\n')
        msg[--n] = '\0';
    pthread_mutex_lock(&h->warn_lock);
    warn_roll_locked(h, (uint64_t)monoclock_coarse_ns());
    if (h->warn_shown < WARN_BURST) {
        h->warn_shown++;
        log_warn(h->a->lg, "http: %s", msg);
    } else {
        h->warn_suppressed++;
    }
    pthread_mutex_unlock(&h->warn_lock);
}

void http_mhd_log(void *cls, const char *fmt, va_list ap)
{
    struct http *h = cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    http_warn(h, "%s", msg);
}

/*
 * Close the connections whose request headers are overdue.  MHD's own
 * timeout only measures silence, so a client sending a byte now and then
 * would hold its connection forever.  shutdown() (not close: the socket
 * stays MHD's) makes MHD see the end of the stream and clean up; the
 * deadline is claimed first so that MHD, if the headers complete at that
 * moment, drops the request instead of answering over our 408.
 */
static void sweep(struct http *h)
{
    uint64_t now = (uint64_t)monoclock_coarse_ns();
    unsigned timed_out = 0, batch;
    /*
     * In batches, letting go of the lock in between: opening and closing
     * connections need it, and a well-behaved client must not wait while
     * thousands of slow ones are shut down.
     */
    do {
        batch = 0;
        pthread_mutex_lock(&h->conns_lock);
        for (struct request *rq = h->conns; rq != NULL && batch < 64; rq = rq->next) {
            uint64_t d = atomic_load_explicit(&rq->deadline, memory_order_relaxed);
            if (d == 0 || d == DEADLINE_HIT || d > now)
                continue;
            if (!atomic_compare_exchange_strong(&rq->deadline, &d, DEADLINE_HIT))
                continue;
            /* Plain bytes inside a TLS session would be garbage to the client: just close. */
            if (h->tls_cert == NULL) {
                ssize_t w = send(rq->fd, h->timeout_reply, h->timeout_len,
                                 MSG_DONTWAIT | MSG_NOSIGNAL);
                (void)w;
            }
            shutdown(rq->fd, SHUT_RDWR);
            batch++;
        }
        pthread_mutex_unlock(&h->conns_lock);
        timed_out += batch;
    } while (batch == 64);
    h->report_timed_out += timed_out;
    h->report_refused += atomic_exchange(&h->refused, 0);
    /* One line per window at most, whatever the clients do; the first one at once. */
    if ((h->report_timed_out > 0 || h->report_refused > 0)
        && (h->report_last == 0 || now - h->report_last >= WARN_WINDOW_S * (uint64_t)NS_PER_S)) {
        if (h->report_timed_out > 0)
            log_warn(h->a->lg, "http: closed %lu connection%s that sent no complete request "
                     "headers within header_timeout (%u s)", h->report_timed_out,
                     h->report_timed_out == 1 ? "" : "s", h->a->cfg->header_timeout);
        if (h->report_refused > 0)
            log_warn(h->a->lg, "http: closed %lu new connection%s at once: max_connections (%u) "
                     "were open", h->report_refused, h->report_refused == 1 ? "" : "s", h->max_live);
        h->report_timed_out = h->report_refused = 0;
        h->report_last = now;
    }
    pthread_mutex_lock(&h->warn_lock);
    warn_roll_locked(h, (uint64_t)monoclock_coarse_ns());
    pthread_mutex_unlock(&h->warn_lock);
}

void *http_sweeper_main(void *arg)
{
    struct http *h = arg;
    pthread_mutex_lock(&h->stop_lock);
    while (!h->stopping) {
        struct timespec ts = monoclock_after_ms(SWEEP_EVERY_MS);
        pthread_cond_timedwait(&h->stop_cond, &h->stop_lock, &ts);
        if (h->stopping)
            break;
        pthread_mutex_unlock(&h->stop_lock);
        sweep(h);
        pthread_mutex_lock(&h->stop_lock);
    }
    pthread_mutex_unlock(&h->stop_lock);
    return NULL;
}
