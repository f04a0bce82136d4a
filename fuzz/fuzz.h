/*
 * What every fuzz harness shares: the entry point, declared so that one
 * source serves two builds, and an assertion that aborts.
 *
 * scripts/fuzz compiles each fuzz/NAME.c alone with -DFUZZ_LIBFUZZER and
 * clang -fsanitize=fuzzer: FUZZ_TARGET(NAME) then defines libFuzzer's
 * LLVMFuzzerTestOneInput.  `make check` links all of them into fuzz/replay
 * (plain gcc), where FUZZ_TARGET(NAME) defines fuzz_NAME and the replayer
 * runs each committed corpus file through it: every crash a fuzzer ever
 * found stays a regression test of the normal build.
 */
#ifndef BLOOMGUARD_FUZZ_H
#define BLOOMGUARD_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef FUZZ_LIBFUZZER
#define FUZZ_TARGET(name)                                                   \
    static int fuzz_one(const uint8_t *data, size_t size);                  \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);           \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)            \
    {                                                                       \
        return fuzz_one(data, size);                                        \
    }                                                                       \
    static int fuzz_one(const uint8_t *data, size_t size)
#else
#define FUZZ_TARGET(name) int fuzz_##name(const uint8_t *data, size_t size)
#endif

/* The harnesses the replayer knows; keep in step with fuzz/replay.c. */
int fuzz_id_decode(const uint8_t *data, size_t size);
int fuzz_id_lines(const uint8_t *data, size_t size);
int fuzz_json_escape(const uint8_t *data, size_t size);
int fuzz_uritmpl(const uint8_t *data, size_t size);
int fuzz_body(const uint8_t *data, size_t size);
int fuzz_request(const uint8_t *data, size_t size);
int fuzz_config(const uint8_t *data, size_t size);
int fuzz_filter(const uint8_t *data, size_t size);
int fuzz_filter_keys(const uint8_t *data, size_t size);
int fuzz_snapshot(const uint8_t *data, size_t size);
int fuzz_spell(const uint8_t *data, size_t size);

/*
 * A broken invariant: say which and abort, so that libFuzzer keeps the input
 * as a crash and the replayer's test fails.  Unlike assert() it cannot be
 * compiled out by NDEBUG.
 */
#define FUZZ_CHECK(cond)                                                    \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "%s:%d: invariant violated: %s\n",              \
                    __FILE__, __LINE__, #cond);                             \
            abort();                                                        \
        }                                                                   \
    } while (0)

/*
 * For the harnesses that call the handlers (body, request): a loaded guard,
 * replaced by an empty one now and then so that "absent" answers stay
 * meaningful; not per input, as sizing a filter (filter_plan) costs more
 * than a thousand inputs.  One per harness (a static in each).
 */
#ifdef BLOOMGUARD_GUARD_H
static inline struct guard *fuzz_loaded_guard(void)
{
    static struct guard *g;
    struct filter_info fi;
    if (g != NULL && guard_info(g, &fi) && fi.items < 2000)
        return g;
    guard_free(g);
    g = guard_new();
    struct filter *f = filter_new(10000, 0.01, NULL);
    FUZZ_CHECK(g != NULL && f != NULL);
    guard_begin(g, f);
    guard_commit(g);
    return g;
}
#endif

#endif /* BLOOMGUARD_FUZZ_H */
