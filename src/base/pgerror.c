/*
 * The one table of PostgreSQL codes the daemon explains to operators, and
 * the "(SQLSTATE xxxxx)" tag that carries a code through error texts from
 * libpq to the table's status.
 */
#include "pgerror.h"

#include <stdio.h>
#include <string.h>

#define TAG_OPEN " (SQLSTATE "

/* A SQLSTATE and a text about it: both tables below are made of these. */
struct code_text {
    const char *code;
    const char *text;
};

/* The hint for each code pgerror_hint knows. */
static const struct code_text hints[] = {
    { "28P01", "authentication failed: check the password file or pg_hba.conf" },
    { "28000", "authentication failed: check the password file or pg_hba.conf" },
    { "3D000", "the database does not exist" },
    { "42P01", "the table does not exist" },
    { "42703", "the column does not exist" },
    { "3F000", "the schema does not exist" },
    { "42501", "permission denied: GRANT USAGE on the schema and SELECT on the table "
               "(and the method's rights, docs/follow.md)" },
    { "53300", "too many connections" },
    { "57P01", "the server was shut down or the connection terminated by an administrator" },
    { "57P03", "the server is starting up or shutting down" },
    { "55000", "object not in prerequisite state: check wal_level = logical and the "
               "replication slot (docs/follow.md)" },
    { "55006", "the replication slot is in use by another process" },
    { "53400", "the server's configured limit is reached (e.g. max_replication_slots)" },
    { "42704", "an object does not exist (e.g. the publication or the slot)" },
    { "25006", "the server is a read-only standby: the follower needs the primary" },
};

/* Server FATAL texts of a refused connection (PostgreSQL's English wording). */
static const struct code_text connect_texts[] = {
    { "28P01", "password authentication failed" },
    { "28000", "no pg_hba.conf entry" },
    { "28000", "pg_hba.conf rejects connection" },
    { "28000", "role \"" },                 /* role "x" does not exist */
    { "3D000", "database \"" },             /* database "x" does not exist */
    { "42501", "permission denied for database" },
    { "53300", "sorry, too many clients already" },
    { "53300", "remaining connection slots are reserved" },
    { "53300", "too many connections for" },
    { "57P03", "the database system is starting up" },
    { "57P03", "the database system is shutting down" },
    { "57P03", "the database system is in recovery mode" },
    { "57P03", "the database system is not yet accepting connections" },
    { "57P01", "terminating connection due to administrator command" },
};

static bool valid_code(const char *s)
{
    if (s == NULL)
        return false;
    for (int i = 0; i < 5; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'A' && s[i] <= 'Z')))
            return false;
    return true;
}

const char *pgerror_hint(const char *sqlstate)
{
    if (!valid_code(sqlstate) || sqlstate[5] != '\0')
        return NULL;
    for (size_t i = 0; i < sizeof hints / sizeof hints[0]; i++)
        if (strcmp(hints[i].code, sqlstate) == 0)
            return hints[i].text;
    return NULL;
}

const char *pgerror_guess_connect(const char *msg)
{
    /* Only the server's own refusal: libpq's client-side texts carry no code. */
    const char *fatal = msg ? strstr(msg, "FATAL:") : NULL;
    if (fatal == NULL)
        return NULL;
    fatal += strlen("FATAL:");
    while (*fatal == ' ')
        fatal++;
    size_t line = strcspn(fatal, "\n");
    for (size_t i = 0; i < sizeof connect_texts / sizeof connect_texts[0]; i++) {
        const char *t = connect_texts[i].text;
        const char *at = strstr(fatal, t);
        if (at == NULL || (size_t)(at - fatal) >= line)
            continue;
        /* "role"/"database" name a missing object: the line must say so. */
        if (t[strlen(t) - 1] == '"' && (at != fatal || strstr(fatal, "does not exist") == NULL
                                        || (size_t)(strstr(fatal, "does not exist") - fatal) >= line))
            continue;
        return connect_texts[i].code;
    }
    return NULL;
}

void pgerror_tag(char *err, size_t errlen, const char *sqlstate)
{
    if (!valid_code(sqlstate) || sqlstate[5] != '\0')
        return;
    size_t n = strlen(err);
    if (n + strlen(TAG_OPEN) + 5 + 1 + 1 > errlen)
        return;
    snprintf(err + n, errlen - n, TAG_OPEN "%s)", sqlstate);
}

/* The last whole tag's code in err, or NULL. */
static const char *last_tag(const char *err)
{
    const char *found = NULL;
    for (const char *p = err; (p = strstr(p, TAG_OPEN)) != NULL; p++) {
        const char *c = p + strlen(TAG_OPEN);
        if (valid_code(c) && c[5] == ')')
            found = c;
    }
    return found;
}

bool pgerror_find(const char *err, char out[PGERROR_SQLSTATE_LEN])
{
    const char *found = last_tag(err);
    out[0] = '\0';
    if (found == NULL)
        return false;
    memcpy(out, found, 5);
    out[5] = '\0';
    return true;
}

bool pgerror_take(char *err, char out[PGERROR_SQLSTATE_LEN])
{
    if (!pgerror_find(err, out))
        return false;
    err[last_tag(err) - err - strlen(TAG_OPEN)] = '\0';
    return true;
}
