/*
 * The server's TLS keys ([server] tls_cert_file, tls_key_file): read once
 * at start, handed to libmicrohttpd's GnuTLS, wiped when the server stops.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "http_int.h"

/* A PEM file's text, at most 1 MiB, NUL-terminated (free it); NULL with err. */
static char *read_pem(const char *key, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "re");
    char *buf = NULL;
    size_t n = 0;
    if (f == NULL) {
        snprintf(err, errlen, "[server] %s %s: %s", key, path, strerror(errno));
        return NULL;
    }
    buf = malloc((size_t)1 << 20);
    if (buf != NULL)
        n = fread(buf, 1, ((size_t)1 << 20) - 1, f);
    bool bad = buf == NULL || ferror(f) || !feof(f) || n == 0;
    fclose(f);
    if (bad) {
        snprintf(err, errlen, "[server] %s %s: %s", key, path,
                 buf == NULL ? "out of memory" : n == 0 ? "empty or unreadable" : "over 1 MiB");
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    return buf;
}

/*
 * [server] tls_cert_file and tls_key_file into h (both or neither): read
 * at start, so a key only root may read can be given to a daemon that
 * drops privileges later.  False with err.
 */
bool http_load_tls(struct http *h, const struct config *cfg, char *err, size_t errlen)
{
    bool cert = cfg->tls_cert_file[0] != '\0', key = cfg->tls_key_file[0] != '\0';
    if (!cert && !key)
        return true;
    if (cert != key) {
        snprintf(err, errlen, "[server] tls_cert_file and tls_key_file go together: %s is not set",
                 cert ? "tls_key_file" : "tls_cert_file");
        return false;
    }
    if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
        snprintf(err, errlen, "[server] tls_cert_file: this libmicrohttpd is built without TLS");
        return false;
    }
    if ((h->tls_cert = read_pem("tls_cert_file", cfg->tls_cert_file, err, errlen)) == NULL
        || (h->tls_key = read_pem("tls_key_file", cfg->tls_key_file, err, errlen)) == NULL)
        return false;
    return true;
}

void http_free_tls(struct http *h)
{
    free(h->tls_cert);
    if (h->tls_key != NULL) {
        /* A private key does not linger in freed memory. */
        explicit_bzero(h->tls_key, strlen(h->tls_key));
        free(h->tls_key);
    }
    h->tls_cert = h->tls_key = NULL;
}
