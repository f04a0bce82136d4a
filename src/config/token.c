/*
 * The admin token: one secret line in a file, compared without leaking
 * through timing where a guess first goes wrong.
 */
#include "token.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "durable.h"

/* Read at most cap bytes of path into buf; -1 with errno on failure. */
static ssize_t read_small(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return -1;
    size_t n;
    int e = durable_read_all(fd, buf, cap, &n);
    if (e != 0) {
        close(fd);
        errno = e;
        return -1;
    }
    close(fd);
    return (ssize_t)n;
}

static const char *token_problem(const char *t, size_t len, bool longer)
{
    if (longer || len > TOKEN_MAX_BYTES)
        return "the token is longer than 4096 bytes";
    if (len == 0)
        return "the file is empty (it must hold the token on one line)";
    if (memchr(t, '\n', len) != NULL)
        return "the file holds more than one line (it must hold the token alone)";
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)t[i] < 0x21 || (unsigned char)t[i] > 0x7E)
            return "the token holds a space, control or non-ASCII byte (use visible ASCII only)";
    if (len < TOKEN_MIN_BYTES)
        return "the token is shorter than 16 bytes";
    return NULL;
}

enum token_result token_load(const char *file, const char *credentials_dir, char **token,
                             char *from, size_t fromlen, char *err, size_t errlen)
{
    char path[4096];
    *token = NULL;
    if (file != NULL && *file != '\0') {
        snprintf(path, sizeof path, "%s", file);
    } else if (credentials_dir != NULL && *credentials_dir != '\0') {
        snprintf(path, sizeof path, "%s/%s", credentials_dir, TOKEN_CREDENTIAL);
        if (access(path, F_OK) != 0)
            return TOKEN_NONE;          /* the service got no such credential */
    } else {
        return TOKEN_NONE;
    }

    /* Room for the longest token, a line end and one byte to see more. */
    char *buf = malloc(TOKEN_MAX_BYTES + 8);
    if (buf == NULL) {
        snprintf(err, errlen, "%s: out of memory", path);
        return TOKEN_ERROR;
    }
    ssize_t n = read_small(path, buf, TOKEN_MAX_BYTES + 8);
    if (n < 0) {
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        free(buf);
        return TOKEN_ERROR;
    }
    size_t len = (size_t)n;
    bool longer = len == TOKEN_MAX_BYTES + 8;
    while (len > 0 && strchr(" \t\r\n\v\f", buf[len - 1]) != NULL)
        len--;
    /*
     * An empty credential is "no token": the unit falls back to one when
     * /etc/bloomguard/admin_token does not exist (systemd 252 fails a start
     * whose LoadCredential= source is missing).  An empty admin_token_file
     * the admin named is still a mistake.
     */
    bool credential = file == NULL || *file == '\0';
    if (credential && len == 0 && !longer) {
        free(buf);
        return TOKEN_NONE;
    }
    const char *why = token_problem(buf, len, longer);
    if (why != NULL) {
        snprintf(err, errlen, "%s: %s", path, why);
        explicit_bzero(buf, TOKEN_MAX_BYTES + 8);
        free(buf);
        return TOKEN_ERROR;
    }
    explicit_bzero(buf + len, TOKEN_MAX_BYTES + 8 - len);
    buf[len] = '\0';
    *token = buf;
    if (from != NULL && fromlen > 0)
        snprintf(from, fromlen, "%s", path);
    return TOKEN_LOADED;
}

bool token_check_bearer(const char *token, const char *authorization)
{
    if (token == NULL || authorization == NULL || strncasecmp(authorization, "Bearer ", 7) != 0)
        return false;
    const char *given = authorization + 7;
    while (*given == ' ')
        given++;
    size_t glen = strlen(given);
    while (glen > 0 && (given[glen - 1] == ' ' || given[glen - 1] == '\t'))
        glen--;
    /*
     * Walk the whole expected token whatever is given: the time depends on
     * the token's length only, never on how much of a guess was right.
     */
    size_t tlen = strlen(token);
    volatile unsigned char diff = (unsigned char)(glen != tlen);
    for (size_t i = 0; i < tlen; i++) {
        unsigned char g = i < glen ? (unsigned char)given[i] : 0;
        diff |= (unsigned char)(g ^ (unsigned char)token[i]);
    }
    return diff == 0;
}

void token_free(char *token)
{
    if (token == NULL)
        return;
    explicit_bzero(token, strlen(token));
    free(token);
}
