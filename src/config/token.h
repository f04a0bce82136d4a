/*
 * The admin token that guards the admin routes (routes_table[] marks them):
 * reading it from [server] admin_token_file or from systemd's credential
 * directory, and checking an "Authorization: Bearer ..." header against it
 * in constant time.  Pure apart from token_load's file reads: no logging,
 * no globals; every function is reentrant.
 */
#ifndef BLOOMGUARD_TOKEN_H
#define BLOOMGUARD_TOKEN_H

#include <stdbool.h>
#include <stddef.h>

/* A token shorter than this is refused: it could be guessed. */
#define TOKEN_MIN_BYTES 16
/* Longer tokens are refused too (they must fit one request header). */
#define TOKEN_MAX_BYTES 4096

/* The credential name systemd's LoadCredential= gives the token. */
#define TOKEN_CREDENTIAL "admin_token"

enum token_result {
    TOKEN_NONE,     /* no token configured: *token is NULL */
    TOKEN_LOADED,   /* *token is set (heap, free with token_free) */
    TOKEN_ERROR     /* err holds the reason, e.g. "/etc/x: token is shorter than 16 bytes" */
};

/*
 * Read the token from file when it is not empty; otherwise, when
 * credentials_dir (systemd's $CREDENTIALS_DIRECTORY, may be NULL or empty)
 * holds a file named TOKEN_CREDENTIAL, from that file; otherwise
 * TOKEN_NONE; an empty credential is TOKEN_NONE too (the systemd unit's
 * fallback when no token file exists).  The file holds one line; trailing whitespace (the newline
 * included) is stripped; what is left must be TOKEN_MIN_BYTES ..
 * TOKEN_MAX_BYTES of visible ASCII (0x21..0x7E), the characters a Bearer
 * token can carry in a header.  On TOKEN_LOADED, *from (if not NULL) gets
 * the path read, truncated to fromlen.
 */
enum token_result token_load(const char *file, const char *credentials_dir, char **token,
                             char *from, size_t fromlen, char *err, size_t errlen);

/*
 * True if authorization (a request's Authorization header value, may be
 * NULL) is "Bearer <token>": the scheme in any case, one or more spaces,
 * the token, optional trailing spaces or tabs.  The comparison takes the
 * same time wherever the first difference is.
 */
bool token_check_bearer(const char *token, const char *authorization);

/* Wipe and free a token from token_load.  NULL is a no-op. */
void token_free(char *token);

#endif
