/*
 * The oracle of the proxy regexps, for tests/proxyconf.test: which template
 * bloomguard's /auth matches a URI against (src/core/uritmpl.c, first match in
 * order, as api.c tries them) and the raw ID it takes, so that the maps
 * `bloomguard --print-nginx` and `--print-caddy` write can be checked
 * against it URI by URI.
 *
 *   uritool TEMPLATE... <URIS
 *
 * Reads one URI a line (any bytes but '\n'), prints one line per URI:
 * "N<TAB>ID", N the 1-based index of the first template that matches and ID
 * its raw, still percent-encoded ID, or "0<TAB>" when none does.  Exit 0,
 * 2 on bad usage (a template uritmpl_valid refuses).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uritmpl.h"

int main(int argc, char **argv)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;

    for (int i = 1; i < argc; i++) {
        const char *why;
        if (!uritmpl_valid(argv[i], &why)) {
            fprintf(stderr, "uritool: %s: %s\n", argv[i], why);
            return 2;
        }
    }
    while ((n = getline(&line, &cap, stdin)) >= 0) {
        size_t len = (size_t)n;
        if (len > 0 && line[len - 1] == '\n')
            len--;
        int hit = 0;
        const char *id = "";
        size_t idlen = 0;
        for (int i = 1; i < argc && hit == 0; i++)
            if (uritmpl_match(argv[i], line, len, &id, &idlen))
                hit = i;
        printf("%d\t%.*s\n", hit, (int)idlen, id);
    }
    free(line);
    return ferror(stdout) ? 1 : 0;
}
