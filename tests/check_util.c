/*
 * Helpers the Check unit tests share (see check_util.h), so that a test
 * file holds its tests and not another copy of the scratch-directory code.
 */
#define _XOPEN_SOURCE 700
#include "check_util.h"

#include <check.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

char *check_tmpdir(const char *prefix)
{
    char *d = malloc(strlen(prefix) + 16);
    ck_assert_ptr_nonnull(d);
    sprintf(d, "/tmp/%s.XXXXXX", prefix);
    ck_assert_ptr_nonnull(mkdtemp(d));
    return d;
}

char *check_join(const char *dir, const char *name)
{
    char *p = malloc(strlen(dir) + strlen(name) + 2);
    ck_assert_ptr_nonnull(p);
    sprintf(p, "%s/%s", dir, name);
    return p;
}

static int remove_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void check_rm_rf(const char *dir)
{
    /* A test may have made it read-only to provoke a failed write. */
    chmod(dir, 0700);
    nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

void check_scratch_free(char *dir, char *path)
{
    check_rm_rf(dir);
    free(path);
    free(dir);
}

void check_same_layers(const struct filter *f, const struct filter *g)
{
    struct filter_params fp, gp;
    filter_export(f, &fp);
    filter_export(g, &gp);
    ck_assert_uint_eq(fp.layers, gp.layers);
    for (unsigned i = 0; i < fp.layers; i++) {
        const struct filter_layer_params *a = &fp.layer[i], *b = &gp.layer[i];
        ck_assert_msg(a->capacity == b->capacity, "layer %u: capacity %llu, not %llu", i,
                      (unsigned long long)b->capacity, (unsigned long long)a->capacity);
        ck_assert_msg(a->target_fpp == b->target_fpp, "layer %u: target %g, not %g", i, b->target_fpp,
                      a->target_fpp);
        ck_assert_msg(a->blocks == b->blocks, "layer %u: %llu blocks, not %llu", i,
                      (unsigned long long)b->blocks, (unsigned long long)a->blocks);
        ck_assert_msg(a->probes == b->probes, "layer %u: %u probes, not %u", i, b->probes, a->probes);
        size_t size = (size_t)(a->blocks * FILTER_BLOCK_BYTES);
        unsigned char *x = malloc(size), *y = malloc(size);
        ck_assert(x != NULL && y != NULL);
        ck_assert(filter_bits_read(f, i, 0, x, size));
        ck_assert(filter_bits_read(g, i, 0, y, size));
        ck_assert_msg(memcmp(x, y, size) == 0, "layer %u: the bits differ", i);
        free(x);
        free(y);
    }
}

void check_filter_fixture(struct config *cfg, struct filter_config *fc, const char *name,
                          double fpp, uint64_t pending_limit)
{
    memset(cfg, 0, sizeof *cfg);
    memset(fc, 0, sizeof *fc);
    cfg->max_staleness = 60;
    cfg->min_rebuild_interval = 30;
    fc->name = (char *)name;
    fc->false_positive_rate = fpp;
    fc->headroom = 2.0;
    fc->growth = 2.0;
    fc->max_layers = 8;
    fc->pending_limit = pending_limit;
    fc->pending_max_bytes = 1 << 20;
    fc->pending_ttl = 3600;
}

void check_refused_params(const struct filter_params *p, enum filter_error want, const char *what)
{
    enum filter_error e = FILTER_OK;
    struct filter *f = filter_new_from(p, &e);
    bool made = f != NULL;
    filter_free(f);
    ck_assert_msg(!made && e == want, "%s: %s (error %d, want %d)", what,
                  made ? "a filter was made" : "refused for another reason", (int)e, (int)want);
}

enum table_insert_result check_post(struct table *t, const char *id)
{
    size_t added;
    const char *one[] = { id };
    size_t len[] = { strlen(id) };
    return table_insert(t, 1, one, len, &added, NULL);
}

const struct table_ident check_text_ident = { .relid = 1, .attnum = 1, .spell = SPELL_TEXT };

struct table_load *check_load_begin(struct table *t, uint64_t items,
                                    const struct table_ident *ident, uint64_t *epoch)
{
    enum filter_error fe;
    *epoch = table_epoch(t);
    struct table_load *l = table_load_begin(t, items, ident, &fe);
    ck_assert_msg(l != NULL, "table_load_begin: filter error %d", (int)fe);
    return l;
}
