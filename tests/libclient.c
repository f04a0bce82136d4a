/*
 * A client of libbloomguard as a user builds one (cc libclient.c
 * $(pkg-config --cflags --libs bloomguard)), for tests/zerohop.test and
 * bench/run: answers IDs from stdin, one a line, as the library sees them.
 *   libclient PATH            one answer a line: absent, maybe, degraded, not_ready
 *   libclient PATH info       the handle's figures
 *   libclient PATH bench [S]  lookups of the stdin IDs over and over for S seconds
 *                             (default 1): ns per lookup
 */
#include <bloomguard.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: libclient PATH [info | bench [SECONDS]]\n");
        return 2;
    }
    int err;
    bloomguard *bg = bloomguard_open(argv[1], BLOOMGUARD_OPEN_MISSING_OK, &err);
    if (bg == NULL) {
        fprintf(stderr, "libclient: %s: %s\n", argv[1], bloomguard_strerror(err));
        return 1;
    }
    const char *mode = argc > 2 ? argv[2] : "answer";
    if (strcmp(mode, "info") == 0) {
        struct bloomguard_info in;
        int e = bloomguard_info(bg, &in);
        printf("error=%s generation=%llu layers=%u spelling=%s horizon_age=%.3f "
               "max_staleness=%.3f degraded=%d saturated=%d why=%s\n",
               e ? bloomguard_strerror(e) : "none", (unsigned long long)in.generation, in.layers,
               in.spelling, in.horizon_age, in.max_staleness, in.degraded, in.saturated, in.why);
        bloomguard_close(bg);
        return e != 0;
    }
    char *line = NULL;
    size_t cap = 0, n = 0, room = 0;
    ssize_t len;
    char **ids = NULL;
    size_t *lens = NULL;
    while ((len = getline(&line, &cap, stdin)) >= 0) {
        if (len > 0 && line[len - 1] == '\n')
            line[--len] = '\0';
        if (strcmp(mode, "bench") != 0) {
            puts(bloomguard_answer_name(bloomguard_lookup(bg, line, (size_t)len)));
            continue;
        }
        if (n == room) {
            room = room ? 2 * room : 1024;
            ids = realloc(ids, room * sizeof *ids);
            lens = realloc(lens, room * sizeof *lens);
            if (ids == NULL || lens == NULL)
                return 1;
        }
        ids[n] = strdup(line);
        lens[n++] = (size_t)len;
    }
    if (strcmp(mode, "bench") == 0 && n > 0) {
        double secs = argc > 3 ? atof(argv[3]) : 1.0, t0 = now(), t;
        unsigned long long looks = 0, absent = 0;
        do {
            for (size_t i = 0; i < n; i++)
                absent += bloomguard_lookup(bg, ids[i], lens[i]) == BLOOMGUARD_ABSENT;
            looks += n;
        } while ((t = now()) - t0 < secs);
        printf("%.1f ns per lookup (%llu lookups, %llu absent)\n", (t - t0) * 1e9 / (double)looks,
               looks, absent);
    }
    for (size_t i = 0; i < n; i++)
        free(ids[i]);
    free(ids);
    free(lens);
    free(line);
    bloomguard_close(bg);
    return 0;
}
