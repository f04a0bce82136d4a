/*
 * Run every committed corpus file through its harness, without libFuzzer:
 * `make check` thereby keeps each seed and each reproducer of a bug the
 * fuzzers once found passing, in every build (gcc, distcheck, sanitizers).
 *   fuzz/replay [NAME [FILE...]]
 * With no argument it replays $top_srcdir/fuzz/corpus/<name>/ for every
 * harness and fails if any of those directories is missing or empty.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

static const struct {
    const char *name;
    int (*one)(const uint8_t *, size_t);
} targets[] = {
#define FUZZ_ROW_(name) { #name, fuzz_##name },
    FUZZ_HARNESSES(FUZZ_ROW_)
#undef FUZZ_ROW_
};
#define NTARGETS (sizeof targets / sizeof targets[0])

static int run_file(int (*one)(const uint8_t *, size_t), const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        perror(path);
        return 1;
    }
    size_t cap = 4096, len = 0, got;
    uint8_t *buf = malloc(cap);
    while (buf != NULL && (got = fread(buf + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap) {
            uint8_t *nb = realloc(buf, cap *= 2);
            if (nb == NULL)
                free(buf);
            buf = nb;
        }
    }
    fclose(f);
    if (buf == NULL) {
        fprintf(stderr, "%s: out of memory\n", path);
        return 1;
    }
    printf("# %s\n", path);    /* in the log, should the harness abort */
    fflush(stdout);
    /* An exact-size copy, as libFuzzer passes it, so ASan sees overreads. */
    uint8_t *exact = malloc(len ? len : 1);
    if (exact == NULL) {
        free(buf);
        return 1;
    }
    memcpy(exact, buf, len);
    free(buf);
    one(exact, len);            /* a broken invariant aborts */
    free(exact);
    return 0;
}

static int run_dir(size_t t, const char *top)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/fuzz/corpus/%s", top, targets[t].name);
    DIR *d = opendir(dir);
    if (d == NULL) {
        perror(dir);
        return 1;
    }
    struct dirent *de;
    int files = 0, bad = 0;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        bad |= run_file(targets[t].one, path);
        files++;
    }
    closedir(d);
    printf("%s %s: %d corpus files\n", bad || files == 0 ? "not ok -" : "ok -", targets[t].name, files);
    return bad || files == 0;
}

int main(int argc, char **argv)
{
    int status = 0;
    if (argc >= 2) {
        for (size_t t = 0; t < NTARGETS; t++)
            if (strcmp(argv[1], targets[t].name) == 0) {
                for (int i = 2; i < argc; i++)
                    status |= run_file(targets[t].one, argv[i]);
                return argc > 2 ? status : run_dir(t, getenv("top_srcdir") ? getenv("top_srcdir") : ".");
            }
        fprintf(stderr, "replay: no harness named %s\n", argv[1]);
        return 2;
    }
    const char *top = getenv("top_srcdir");
    for (size_t t = 0; t < NTARGETS; t++)
        status |= run_dir(t, top ? top : ".");
    return status;
}
