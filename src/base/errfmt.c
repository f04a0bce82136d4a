/* The text of an error into the caller's buffer (errfmt.h). */
#include "errfmt.h"

#include <stdarg.h>
#include <stdio.h>

void errfmt(char *err, size_t errlen, const char *fmt, ...)
{
    if (err == NULL || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}
