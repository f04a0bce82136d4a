/*
 * The daemon's side of published filters (the rules and the proof are in
 * publish.h): one file per generation, its layers allocated in place for
 * filter.c, its header kept current from the table's hooks.
 */
#include "publish.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "answer.h"
#include "bigmap.h"
#include "filter.h"
#include "mapped.h"
#include "monoclock.h"
#include "pubfmt.h"
#include "verified.h"

_Static_assert(PUBFMT_MAX_ID_BYTES == CONFIG_MAX_ID_BYTES, "a header must hold any max_id_bytes");

/* One generation: a file, its header page mapped, its layers mapped by the filter. */
struct gen {
    atomic_int refs;            /* the filter (until done) and the publisher (building / cur) */
    int fd;
    struct pubfmt_header *hdr;  /* shared, read-write */
    uint64_t file_bytes;
    uint64_t generation;
    bool named;                 /* renamed to the path: no temporary to remove */
    bool twinned;               /* twin links the file too (while it lives) */
    atomic_bool broken;         /* a layer took private memory: never (again) to be read */
    dev_t dev;                  /* the file's identity, to recognise it at the path */
    ino_t ino;
    const struct log *lg;
    char *path;                 /* the publisher's path (for withdrawing a broken one) */
    char *twin;                 /* a second name of the file, to publish it again from */
    char tmp[];                 /* the temporary name (and, after it, twin's) */
};

struct publish {
    const struct config *cfg;
    const struct filter_config *fc;
    struct table *t;
    const struct log *lg;
    char *dir;
    char *path;                 /* <dir>/<name>.bgf */
    uint64_t instance;
    uint8_t boot_id[16];
    unsigned mode;              /* [server] publish_mode */
    gid_t gid;                  /* [server] publish_group; (gid_t)-1: the process's */
    uint64_t next_gen;
    /* The scheduler's thread sets these; the horizon hook reads cur under the table's lock. */
    struct gen *building;       /* made by begin, not live yet */
    struct gen *cur;            /* the one at path (or withdrawn) */
    /*
     * Who names a file at path: on_live (the table's lock held) and
     * publish_check (the main thread's tick), which also reads cur; the
     * horizon hooks need not take it.
     */
    pthread_mutex_t mu;
    uint64_t lost_gen;          /* publish_check asked a rebuild for it (0: none) */
    struct verified *vf;        /* the verified-absent set's file; NULL: not published */
    _Atomic uint64_t cur_generation, generations, withdrawn;
    /*
     * publish_status's page figures for generation pages_gen, read from
     * /proc/self/smaps at pages_ns (a read walks every mapping of the
     * process: tens of ms at 1 GiB in 4 KiB pages), so at most once per
     * PAGES_EVERY_NS and generation, however often /stats and /metrics ask.
     */
    pthread_mutex_t pages_mu;
    uint64_t pages_gen, pages_ns, pages_resident, pages_huge;
};

#define PAGES_EVERY_NS (10 * UINT64_C(1000000000))

static uint64_t round_up(uint64_t x, uint64_t to)
{
    return (x + to - 1) / to * to;
}

static void gen_unref(struct gen *g)
{
    if (g == NULL || atomic_fetch_sub(&g->refs, 1) != 1)
        return;
    if (g->hdr != NULL)
        munmap(g->hdr, PUBFMT_HEADER_BYTES);
    if (!g->named)
        unlink(g->tmp);
    if (g->twinned)
        unlink(g->twin);
    close(g->fd);
    free(g->path);
    free(g);
}

/* Readers must leave g: SUPERSEDED, and the name unlinked if it is still g's. */
static void gen_withdraw(struct gen *g)
{
    atomic_fetch_or_explicit(&g->hdr->flags, PUBFMT_SUPERSEDED, memory_order_release);
    struct stat at, mine;
    if (g->named && stat(g->path, &at) == 0 && fstat(g->fd, &mine) == 0
        && at.st_ino == mine.st_ino && at.st_dev == mine.st_dev)
        unlink(g->path);
}

/* ---------------------------------------------------- the filter's memory -- */

static void *gen_alloc(void *ctx, unsigned layer, const struct filter_plan *plan, size_t bytes)
{
    struct gen *g = ctx;
    if (!atomic_load(&g->broken) && layer < PUBFMT_MAX_LAYERS) {
        /*
         * On a huge page boundary of the file (readers take any multiple of
         * PUBFMT_ALIGN; the hole before it costs tmpfs nothing), and as far
         * as bigmap_span rounds: on a tmpfs mounted huge=within_size every
         * 2 MiB of the layer is then one huge page, one TLB entry for the
         * lookups and the load's writes instead of 512.
         */
        size_t span = bigmap_span(bytes);
        uint64_t at = round_up(g->file_bytes, BIGMAP_HUGE);
        uint64_t end = at + round_up(span, PUBFMT_ALIGN);
        /*
         * Reserve the pages now: a write to a hole that tmpfs cannot fill
         * would be a SIGBUS in an insert, much later.
         */
        int e = posix_fallocate(g->fd, (off_t)at, (off_t)(end - at));
        void *mem = e == 0 ? bigmap_map_file(g->fd, at, span, PROT_READ | PROT_WRITE) : NULL;
        if (mem != NULL) {
            g->file_bytes = end;
            g->hdr->layer[layer] = (struct pubfmt_layer){
                .offset = at, .blocks = plan->blocks, .probes = plan->probes,
                .capacity = plan->capacity, .target_fpp = plan->target_fpp,
            };
            /* Announced before filter.c lets an insert reach the layer (publish.h, (a)). */
            atomic_store_explicit(&g->hdr->nlayers, layer + 1, memory_order_release);
            return mem;
        }
        if (e == 0)
            e = errno;
        log_warn(g->lg, "%s: cannot publish layer %u (%.1f MiB) in %s: %s; its readers answer "
                 "\"not ready\" (they let requests through) until a load fits", g->hdr->name,
                 layer, (double)bytes / 1048576.0, g->tmp, strerror(e));
        atomic_store(&g->broken, true);
        /* Before the layer takes its first key: no reader may go on trusting this file. */
        gen_withdraw(g);
    }
    /* Private memory of the same span, so that gen_free need not know which. */
    return bigmap_new(bytes);
}

static void gen_free(void *ctx, unsigned layer, void *mem, size_t bytes)
{
    (void)ctx;
    (void)layer;
    bigmap_free(mem, bytes);
}

static void gen_done(void *ctx)
{
    gen_unref(ctx);
}

/* A new generation's file under a temporary name, its fixed header written; NULL with errno. */
static struct gen *gen_new(struct publish *p)
{
    uint64_t number = ++p->next_gen;
    size_t len = strlen(p->dir) + strlen(p->fc->name) + 48;
    struct gen *g = calloc(1, sizeof *g + 2 * len);
    if (g == NULL || (g->path = strdup(p->path)) == NULL) {
        free(g);
        errno = ENOMEM;
        return NULL;
    }
    g->fd = -1;
    g->lg = p->lg;
    g->generation = number;
    atomic_init(&g->refs, 1);
    atomic_init(&g->broken, false);
    int e = 0;
    /*
     * A new file, never one that is there: the published file is the
     * filter's memory, so whoever opened it first could write the daemon's
     * own bits.  The name is random too, so that nobody can even take it
     * first (publish_dir_check keeps others out of the directory anyway).
     */
    uint64_t rnd[2];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        goto fail;
    snprintf(g->tmp, len, "%s/.%s.%016llx%016llx.tmp", p->dir, p->fc->name,
             (unsigned long long)rnd[0], (unsigned long long)rnd[1]);
    /* A temporary's name too: a start after a crash removes it (remove_temporaries). */
    g->twin = g->tmp + len;
    snprintf(g->twin, len, "%s/.%s.%016llx%016llx.keep.tmp", p->dir, p->fc->name,
             (unsigned long long)rnd[0], (unsigned long long)rnd[1]);
    /* A name that is taken (EEXIST) fails here, and is never unlinked below: not ours. */
    g->fd = open(g->tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    /* Readable as publish_mode says whatever the daemon's umask (the unit's is 0077). */
    struct stat st;
    if (g->fd < 0 || (p->gid != (gid_t)-1 && fchown(g->fd, (uid_t)-1, p->gid) != 0)
        || fchmod(g->fd, p->mode) != 0 || fstat(g->fd, &st) != 0
        || (e = posix_fallocate(g->fd, 0, PUBFMT_HEADER_BYTES)) != 0)
        goto fail;
    g->dev = st.st_dev;
    g->ino = st.st_ino;
    g->file_bytes = PUBFMT_HEADER_BYTES;
    void *h = mmap(NULL, PUBFMT_HEADER_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, g->fd, 0);
    if (h == MAP_FAILED)
        goto fail;
    g->hdr = h;
    struct pubfmt_header *hd = g->hdr;
    memcpy(hd->magic, PUBFMT_MAGIC, 8);
    hd->version = PUBFMT_VERSION;
    hd->header_bytes = PUBFMT_HEADER_BYTES;
    hd->byte_order = PUBFMT_BYTE_ORDER;
    hd->hash = PUBFMT_HASH_XXH3_64;
    hd->blocks_scheme = 0;              /* the filter's kind, at on_live */
    hd->spell = SPELL_TEXT;
    hd->pid = (uint32_t)getpid();
    hd->generation = number;
    hd->instance = p->instance;
    memcpy(hd->boot_id, p->boot_id, sizeof hd->boot_id);
    hd->target_fpp = table_sizing(p->t).false_positive_rate; /* a SIGHUP may have changed it */
    hd->max_stale_ns = (int64_t)(p->cfg->max_staleness * 1e9);
    hd->created = monoclock_boot_ns();
    snprintf(hd->name, sizeof hd->name, "%s", p->fc->name);
    hd->max_id_bytes = p->cfg->max_id_bytes;
    atomic_init(&hd->flags, p->vf != NULL ? PUBFMT_VERIFIED : 0);
    atomic_init(&hd->nlayers, 0);
    atomic_init(&hd->horizon, 0);
    atomic_init(&hd->updated, 0);
    return g;
fail:
    e = e ? e : errno;
    if (g->fd >= 0) {
        close(g->fd);
        unlink(g->tmp);
    }
    free(g->path);
    free(g);
    errno = e;
    return NULL;
}

/* -------------------------------------------------------- table's hooks -- */

static bool on_begin(void *ctx, struct filter_alloc *out)
{
    struct publish *p = ctx;
    gen_unref(p->building);             /* a load that never went live */
    p->building = gen_new(p);
    if (p->building == NULL) {
        log_warn(p->lg, "%s: cannot create a published filter in %s: %s; this load is not "
                 "published", p->fc->name, p->dir, strerror(errno));
        return false;
    }
    atomic_fetch_add(&p->building->refs, 1);        /* the filter's, until done */
    *out = (struct filter_alloc){ gen_alloc, gen_free, gen_done, p->building };
    return true;
}

static void set_unsure(struct gen *g, bool unsure)
{
    uint32_t f = atomic_load_explicit(&g->hdr->flags, memory_order_relaxed);
    if (unsure && !(f & PUBFMT_UNSURE))
        atomic_fetch_or_explicit(&g->hdr->flags, PUBFMT_UNSURE, memory_order_release);
    else if (!unsure && (f & PUBFMT_UNSURE))
        atomic_fetch_and_explicit(&g->hdr->flags, ~(uint32_t)PUBFMT_UNSURE,
                                  memory_order_release);
}

/* Under the table's lock: next (built in p->building) goes live right after this. */
static void on_live(void *ctx, const struct filter *next, enum spell_type spell, int64_t horizon)
{
    struct publish *p = ctx;
    struct gen *g = p->building, *old = p->cur;
    p->building = NULL;
    if (g != NULL && atomic_load(&g->broken))
        atomic_fetch_add(&p->withdrawn, 1);
    if (g == NULL || atomic_load(&g->broken)) {
        /* next is not (all) in a file: the old generation must not outlive its filter. */
        pthread_mutex_lock(&p->mu);
        if (old != NULL)
            gen_withdraw(old);
        pthread_mutex_unlock(&p->mu);
        gen_unref(g);
        return;
    }
    g->hdr->spell = (uint32_t)spell;
    g->hdr->blocks_scheme = pubfmt_kind_scheme(filter_kind(next));
    atomic_store_explicit(&g->hdr->horizon, horizon, memory_order_release);
    atomic_store_explicit(&g->hdr->updated, monoclock_boot_ns(), memory_order_relaxed);
    /* Readers degrade on the flag: a hold for lost POSTs (table_hold_absent) is one too. */
    set_unsure(g, filter_saturated(next) || table_unsure(p->t, monoclock_boot_ns()));
    atomic_fetch_or_explicit(&g->hdr->flags, PUBFMT_READY, memory_order_release);
    /*
     * A second name that no reader looks at, so that publish_check can put
     * the file back at the path if someone removes it there.  Without it
     * (a link refused), a removal costs a rebuild instead.
     */
    g->twinned = link(g->tmp, g->twin) == 0;
    pthread_mutex_lock(&p->mu);
    if (rename(g->tmp, p->path) != 0) {
        log_warn(p->lg, "%s: cannot publish %s: %s", p->fc->name, p->path, strerror(errno));
        if (old != NULL)
            gen_withdraw(old);
        pthread_mutex_unlock(&p->mu);
        gen_unref(g);
        return;
    }
    g->named = true;
    /* Only now: a reader that leaves old finds g (or newer) at the path. */
    if (old != NULL)
        atomic_fetch_or_explicit(&old->hdr->flags, PUBFMT_SUPERSEDED, memory_order_release);
    p->cur = g;
    pthread_mutex_unlock(&p->mu);
    gen_unref(old);
    atomic_store(&p->cur_generation, g->generation);
    atomic_fetch_add(&p->generations, 1);
    log_debug(p->lg, "%s: published generation %llu at %s", p->fc->name,
              (unsigned long long)g->generation, p->path);
}

/* Under the table's lock: the live filter, cur's, covers every row committed before h. */
static void on_horizon(void *ctx, int64_t h)
{
    struct publish *p = ctx;
    struct gen *g = p->cur;
    if (g == NULL || atomic_load(&g->broken))
        return;
    /* A hold of a cut POST log ends by the clock: readers learn it with the horizons. */
    set_unsure(g, table_unsure(p->t, monoclock_boot_ns()));
    atomic_store_explicit(&g->hdr->horizon, h, memory_order_release);
    atomic_store_explicit(&g->hdr->updated, monoclock_boot_ns(), memory_order_relaxed);
}

/*
 * Under the table's lock: the table began or stopped vouching for absences
 * whatever its horizon (table_unsure: saturated, a hold, a peer's filter on
 * probation); readers follow.
 */
static void on_unsure(void *ctx, bool unsure)
{
    struct publish *p = ctx;
    struct gen *g = p->cur;
    if (g != NULL && !atomic_load(&g->broken))
        set_unsure(g, unsure);
}

/* Once, from table_set_publisher: the set's memory, in <dir>/<name>.bgv. */
static void *on_verified(void *ctx, size_t bytes)
{
    struct publish *p = ctx;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s%s", p->dir, p->fc->name, PUBFMT_VSET_SUFFIX);
    p->vf = verified_new(p->dir, path, p->fc->name, p->instance, p->boot_id, p->mode, p->gid,
                         bytes, p->lg);
    return p->vf != NULL ? verified_memory(p->vf) : NULL;
}

/* ------------------------------------------------------------ lifetime -- */

/* Temporaries of fc's name an interrupted run left in dir. */
static void remove_temporaries(struct publish *p)
{
    DIR *d = opendir(p->dir);
    if (d == NULL)
        return;
    size_t nlen = strlen(p->fc->name);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *s = e->d_name;
        size_t len = strlen(s);
        if (s[0] == '.' && strncmp(s + 1, p->fc->name, nlen) == 0 && s[1 + nlen] == '.'
            && len > 4 && strcmp(s + len - 4, ".tmp") == 0)
            unlinkat(dirfd(d), s, 0);
    }
    closedir(d);
}

/*
 * Whatever is at the path from an earlier run (or anyone else): readers
 * must not trust it any longer.  A file of the daemon's own is marked
 * SUPERSEDED first (its readers leave at once); anything else is only
 * removed, never opened for writing.  False with err when it cannot be
 * removed: its readers would go on reading it.
 */
static bool withdraw_leftover(struct publish *p, char *err, size_t errlen)
{
    /* O_NONBLOCK: a FIFO planted there must not hang the start. */
    int fd = open(p->path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid()
        && st.st_size >= PUBFMT_HEADER_BYTES) {
        struct pubfmt_header *h = mmap(NULL, PUBFMT_HEADER_BYTES, PROT_READ | PROT_WRITE,
                                       MAP_SHARED, fd, 0);
        if (h != MAP_FAILED) {
            if (memcmp(h->magic, PUBFMT_MAGIC, 8) == 0)
                atomic_fetch_or_explicit(&h->flags, PUBFMT_SUPERSEDED, memory_order_release);
            munmap(h, PUBFMT_HEADER_BYTES);
        }
    }
    if (fd >= 0)
        close(fd);
    if (unlink(p->path) != 0 && errno != ENOENT) {
        snprintf(err, errlen, "%s: cannot remove %s, left by an earlier run or by someone else: "
                 "%s; its readers would go on trusting it", p->fc->name, p->path, strerror(errno));
        return false;
    }
    log_info(p->lg, "%s: withdrew the published filter an earlier run left at %s", p->fc->name,
             p->path);
    return true;
}

struct publish *publish_new(const struct config *cfg, const struct filter_config *fc,
                            struct table *t, const char *dir, const struct log *lg, char *err,
                            size_t errlen)
{
    gid_t gid;
    if (!publish_dir_check(cfg, dir, true, err, errlen) || !publish_group_gid(cfg, &gid, err, errlen))
        return NULL;
    struct publish *p = calloc(1, sizeof *p);
    size_t len = strlen(dir) + strlen(fc->name) + sizeof "/" PUBFMT_SUFFIX;
    if (p == NULL || (p->dir = strdup(dir)) == NULL || (p->path = malloc(len)) == NULL) {
        if (p)
            free(p->dir);
        free(p);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    snprintf(p->path, len, "%s/%s%s", dir, fc->name, PUBFMT_SUFFIX);
    p->cfg = cfg;
    p->fc = fc;
    p->t = t;
    p->lg = lg;
    p->mode = cfg->publish_mode;
    p->gid = gid;
    pthread_mutex_init(&p->mu, NULL);
    pthread_mutex_init(&p->pages_mu, NULL);
    if (getrandom(&p->instance, sizeof p->instance, 0) != (ssize_t)sizeof p->instance)
        p->instance = (uint64_t)monoclock_boot_ns() ^ (uint64_t)getpid() << 32;
    /* Unreadable where /proc/sys is hidden (ProcSubset=pid): zeros, which readers skip. */
    if (!pubfmt_boot_id(p->boot_id))
        memset(p->boot_id, 0, sizeof p->boot_id);
    remove_temporaries(p);
    struct stat st;
    if (lstat(p->path, &st) == 0 && !withdraw_leftover(p, err, errlen)) {
        pthread_mutex_destroy(&p->mu);
        pthread_mutex_destroy(&p->pages_mu);
        free(p->dir);
        free(p->path);
        free(p);
        return NULL;
    }
    const struct table_publisher hooks = { p, on_begin, on_live, on_horizon, on_unsure,
                                           on_verified };
    table_set_publisher(t, &hooks);
    /* No set this run ([adaptive] off): an earlier run's is not left beside the filter. */
    if (p->vf == NULL) {
        char vpath[4096];
        snprintf(vpath, sizeof vpath, "%s/%s%s", p->dir, fc->name, PUBFMT_VSET_SUFFIX);
        unlink(vpath);
    }
    return p;
}

void publish_free(struct publish *p)
{
    if (p == NULL)
        return;
    if (p->cur != NULL)
        gen_withdraw(p->cur);
    gen_unref(p->cur);
    gen_unref(p->building);
    const struct table_publisher none = { 0 };
    table_set_publisher(p->t, &none);
    pthread_mutex_destroy(&p->mu);
    /* After the generations: their readers have left, and nothing writes the set any more. */
    verified_free(p->vf);
    free(p->dir);
    free(p->path);
    free(p);
}

/* Put g back at the path from its twin (p->mu held): true if done. */
static bool relink(struct publish *p, struct gen *g)
{
    struct stat st;
    if (!g->twinned || lstat(g->twin, &st) != 0 || st.st_dev != g->dev || st.st_ino != g->ino)
        return false;
    /* A third name, renamed over the path: whatever another hand put there goes in one step. */
    char tmp[4096 + 64];
    snprintf(tmp, sizeof tmp, "%.*s.again.tmp", (int)(strlen(g->twin) - 4), g->twin);
    if (link(g->twin, tmp) != 0)
        return false;
    if (rename(tmp, p->path) != 0) {
        unlink(tmp);
        return false;
    }
    return true;
}

enum publish_check publish_check(struct publish *p)
{
    enum publish_check r = PUBLISH_IN_PLACE;
    struct stat st;
    pthread_mutex_lock(&p->mu);
    struct gen *g = p->cur;
    /* Nothing published yet, or withdrawn on purpose (a layer that did not fit). */
    if (g == NULL || atomic_load(&g->broken)
        || (atomic_load_explicit(&g->hdr->flags, memory_order_relaxed) & PUBFMT_SUPERSEDED))
        goto out;
    bool there = fstatat(AT_FDCWD, p->path, &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (there && st.st_dev == g->dev && st.st_ino == g->ino)
        goto out;
    const char *what = there ? "replaced by another file"
                             : "removed (by hand, or its directory was mounted anew)";
    if (relink(p, g)) {
        log_warn(p->lg, "%s: the published filter %s was %s: published generation %llu there "
                 "again", p->fc->name, p->path, what, (unsigned long long)g->generation);
        r = PUBLISH_RESTORED;
    } else if (p->lost_gen != g->generation) {
        p->lost_gen = g->generation;
        log_warn(p->lg, "%s: the published filter %s was %s, and this run's other name for it "
                 "too: a rebuild publishes it again; its readers answer \"not ready\" (they let "
                 "requests through) until then", p->fc->name, p->path, what);
        r = PUBLISH_LOST;
    }
out:
    pthread_mutex_unlock(&p->mu);
    return r;
}

bool publish_status(struct publish *p, struct publish_status *out)
{
    memset(out, 0, sizeof *out);
    if (p == NULL)
        return false;
    snprintf(out->path, sizeof out->path, "%s", p->path);
    out->generation = atomic_load(&p->cur_generation);
    out->generations = atomic_load(&p->generations);
    out->withdrawn = atomic_load(&p->withdrawn);
    pthread_mutex_lock(&p->pages_mu);
    uint64_t now = (uint64_t)monoclock_ns();
    if (p->pages_ns == 0 || p->pages_gen != out->generation || now - p->pages_ns >= PAGES_EVERY_NS) {
        dev_t dev = 0;
        ino_t ino = 0;
        pthread_mutex_lock(&p->mu);
        bool have = p->cur != NULL && p->cur->named;
        if (have) {
            dev = p->cur->dev;
            ino = p->cur->ino;
        }
        pthread_mutex_unlock(&p->mu);
        p->pages_resident = p->pages_huge = 0;
        if (have)
            mapped_file_pages(dev, ino, &p->pages_resident, &p->pages_huge);
        p->pages_gen = out->generation;
        p->pages_ns = now;
    }
    out->resident_bytes = p->pages_resident;
    out->huge_bytes = p->pages_huge;
    pthread_mutex_unlock(&p->pages_mu);
    return true;
}
