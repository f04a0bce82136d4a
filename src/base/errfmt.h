/*
 * The text of an error, for the (char *err, size_t errlen) pair that most
 * fallible functions of bloomguard take: formatted into the caller's
 * buffer, cut to fit on purpose (an error's text is for a person: its head
 * says what, the cut tail never matters), nothing written when the caller
 * passed no buffer (NULL or 0).  One function, so that no module writes its
 * own va_list wrapper.
 */
#ifndef BLOOMGUARD_ERRFMT_H
#define BLOOMGUARD_ERRFMT_H

#include <stddef.h>

void errfmt(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
