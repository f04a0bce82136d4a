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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/*
 * The harnesses the replayer knows, in one list: X(NAME) for each, so that
 * the declarations below and fuzz/replay.c's table cannot drift apart.
 */
#define FUZZ_HARNESSES(X)                                                   \
    X(id_decode) X(id_lines) X(json_escape) X(uritmpl) X(body) X(request)   \
    X(config) X(filter) X(filter_keys) X(snapshot) X(pgoutput) X(spell)     \
    X(pubfile) X(fleetwire) X(relschema)

#define FUZZ_DECLARE_(name) int fuzz_##name(const uint8_t *data, size_t size);
FUZZ_HARNESSES(FUZZ_DECLARE_)
#undef FUZZ_DECLARE_

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
 * For the harnesses that call the handlers (body, request): a table whose
 * filter is loaded, replaced by a fresh one now and then so that "absent"
 * answers stay meaningful and its journal stays small; not per input, as
 * sizing a filter (filter_plan) costs more than a thousand inputs.  One per
 * harness (a static in each); cfg and fc must outlive it.
 */
#ifdef BLOOMGUARD_TABLE_H
static inline struct table *fuzz_loaded_table(const struct config *cfg,
                                              const struct filter_config *fc)
{
    static struct table *t;
    struct filter_info fi;
    struct table_posts pi;
    unsigned nl;
    if (t != NULL && table_filter_info(t, &fi, NULL, 0, &nl) && fi.items < 2000) {
        table_posts(t, &pi);
        if (pi.count < 500)
            return t;
    }
    table_free(t);
    t = table_new(cfg, fc);
    struct filter *f = filter_new(10000, 0.01, NULL);
    FUZZ_CHECK(t != NULL && f != NULL);
    static const struct table_ident none = { 0 };
    table_restore(t, f, "", "snapshot", 0, 0.0, &none);
    return t;
}
#endif

/*
 * What the handler harnesses (body, request) build once, as no input
 * changes it: the defaults with their overrides ("section.key=value"), a log
 * that keeps quiet, the counters, and the filter "default" on users(id)
 * with a table never loaded.  One static per harness.
 */
#if defined(BLOOMGUARD_TABLE_H) && defined(BLOOMGUARD_ROUTES_H) && defined(BLOOMGUARD_LOG_H)
struct fuzz_app {
    struct config cfg;
    struct log lg;
    struct stats *stats;                /* NULL until fuzz_app_init */
    struct table *unready;
    struct filter_config fc;
};

static inline void fuzz_app_init(struct fuzz_app *h, const char *const *overrides, size_t n)
{
    char err[256];
    FUZZ_CHECK(config_defaults(&h->cfg));
    for (size_t i = 0; i < n; i++)
        FUZZ_CHECK(config_override(&h->cfg, overrides[i], err, sizeof err));
    h->lg.level = LOG_LVL_ERROR;
    h->fc = (struct filter_config){ .name = "default", .table = "users", .column = "id",
                                    .channel = "bloomguard", .pending_limit = 1000,
                                    .pending_max_bytes = UINT64_MAX, .pending_ttl = 3600 };
    h->stats = routes_stats_new();
    h->unready = table_new(&h->cfg, &h->fc);
    FUZZ_CHECK(h->stats != NULL && h->unready != NULL);
}

/*
 * The table an input runs against, by bits 2-4 of its byte 0: loaded
 * (fuzz_loaded_table) unless they are all 0, in 1 input of 8, when it is
 * h's table never loaded.  Bits 0-1 are each harness's own.
 */
static inline struct table *fuzz_app_table(struct fuzz_app *h, uint8_t flags)
{
    return flags & 0x1C ? fuzz_loaded_table(&h->cfg, &h->fc) : h->unready;
}

/*
 * The start of a handler harness's input: h built by setup (which calls
 * fuzz_app_init) at the first input, then the table the input runs against
 * (fuzz_app_table of its byte 0); NULL for an empty input, which the
 * harness skips.
 */
static inline struct table *fuzz_app_input(struct fuzz_app *h, void (*setup)(void),
                                           const uint8_t *data, size_t size)
{
    if (h->stats == NULL)
        setup();
    return size < 1 ? NULL : fuzz_app_table(h, data[0]);
}

/* Whether a handler's reply says it is JSON, as every JSON answer of the API must. */
static inline bool fuzz_reply_is_json(struct MHD_Response *resp)
{
    const char *ct = MHD_get_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE);
    return ct != NULL && strcmp(ct, "application/json") == 0;
}
#endif

#endif /* BLOOMGUARD_FUZZ_H */
