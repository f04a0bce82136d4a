/*
 * The reader of published filters: libbloomguard's API (lib/bloomguard.h),
 * also linked into the daemon's tests.  It maps a generation read-only,
 * looks keys up with filter.c's own code through a view, spells them with
 * spell.c and degrades them with answer.c, in the order publish.h's proof
 * needs: flags, layers, horizon, bits.
 */
#include "bloomguard.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "answer.h"
#include "bigmap.h"
#include "errfmt.h"
#include "monoclock.h"
#include "filter.h"
#include "idcodec.h"
#include "pubfmt.h"
#include "rcu.h"
#include "spell.h"
#include "vset.h"

/* How often a handle looks at the path again (for a replaced or vanished file). */
#define RECHECK_NS NS_PER_S

/* One generation, mapped. */
struct view {
    int fd;
    dev_t dev;
    ino_t ino;
    const struct pubfmt_header *hdr;
    struct filter *f;                       /* a filter view over the layers below */
    void *map[PUBFMT_MAX_LAYERS];
    size_t map_len[PUBFMT_MAX_LAYERS];
    unsigned mapped;                        /* layers mapped (under the handle's mu) */
    enum spell_type spell;
    enum filter_kind kind;                  /* from blocks_scheme (pubfmt_check knew it) */
    int64_t max_stale_ns;
    uint32_t max_id_bytes;
    const struct vset *denied;              /* the run's verified-absent set; NULL: none */
    void *vmap;                             /* its file, mapped read-only */
    size_t vmap_len;
};

struct bloomguard {
    struct rcu rcu;                         /* readers of cur; first: 64-byte aligned */
    _Atomic(struct view *) cur;             /* NULL: not ready */
    _Atomic int64_t next_check;             /* CLOCK_MONOTONIC_COARSE ns */
    pthread_mutex_t mu;                     /* refreshes and growth */
    int error;                              /* under mu: why cur is NULL */
    char why[160];
    uint8_t boot_id[16];
    bool have_boot_id;
    char path[];
};

/* The why of an error: cut to fit, on purpose (errfmt.h). */
#define whyf errfmt

static void view_free(struct view *v)
{
    if (v == NULL)
        return;
    filter_free(v->f);
    for (unsigned i = 0; i < v->mapped; i++)
        munmap(v->map[i], v->map_len[i]);
    if (v->hdr != NULL)
        munmap((void *)v->hdr, PUBFMT_HEADER_BYTES);
    if (v->vmap != NULL)
        munmap(v->vmap, v->vmap_len);
    if (v->fd >= 0)
        close(v->fd);
    free(v);
}

/*
 * Map the layers the header announces up to n (caller: the only one
 * growing v).  False when one does not fit the file or cannot be mapped.
 */
static bool view_map_layers(struct view *v, unsigned n, int *err, char *why, size_t whylen)
{
    struct stat st;
    if (n > v->mapped && fstat(v->fd, &st) != 0) {
        *err = BLOOMGUARD_EIO;
        snprintf(why, whylen, "fstat: %s", strerror(errno));
        return false;
    }
    while (v->mapped < n) {
        unsigned i = v->mapped;
        const struct pubfmt_layer *l = &v->hdr->layer[i];
        size_t len = (size_t)(l->blocks * FILTER_BLOCK_BYTES);
        if (!pubfmt_layer_ok(l, (uint64_t)st.st_size)) {
            *err = BLOOMGUARD_EFORMAT;
            snprintf(why, whylen, "layer %u lies outside the file or has a geometry no filter has",
                     i);
            return false;
        }
        /*
         * As the daemon maps it (publish.c gen_alloc): address and offset
         * agree modulo 2 MiB, and the span it rounded the layer to, where
         * the file has it, so that its huge pages are huge here too.
         */
        size_t span = bigmap_span(len);
        if (span > len && (uint64_t)st.st_size - l->offset < span)
            span = len;
        void *m = bigmap_map_file(v->fd, l->offset, span, PROT_READ);
        if (m == NULL) {
            *err = errno == ENOMEM ? BLOOMGUARD_ENOMEM : BLOOMGUARD_EIO;
            snprintf(why, whylen, "mmap of layer %u: %s", i, strerror(errno));
            return false;
        }
        bool ok = i == 0 ? (v->f = filter_view_new(v->kind, v->hdr->target_fpp, l->blocks,
                                                   l->probes, m)) != NULL
                         : filter_view_add(v->f, l->blocks, l->probes, m);
        if (!ok) {
            munmap(m, span);
            *err = BLOOMGUARD_ENOMEM;
            snprintf(why, whylen, "no memory for layer %u", i);
            return false;
        }
        v->map[i] = m;
        v->map_len[i] = span;
        v->mapped = i + 1;
    }
    return true;
}

static int errno_error(int e)
{
    return e == ENOENT || e == ENOTDIR ? BLOOMGUARD_ENOENT
         : e == EACCES || e == EPERM ? BLOOMGUARD_EACCES
         : e == ENOMEM ? BLOOMGUARD_ENOMEM : BLOOMGUARD_EIO;
}

/*
 * The file at path opened as one only the daemon (or root) can have put
 * there, or -1 with *err and why: its real directory trusted
 * (pubfmt_dir_trusted, for this process's user), the file opened in that
 * very directory without following a link and without blocking (a FIFO
 * planted at the path would hang open(), and with it every nginx worker),
 * and itself trusted (pubfmt_file_trusted).  Anything else is
 * BLOOMGUARD_EUNSAFE: the handle fails open, it never reads such a file.
 */
static int open_trusted(const char *path, struct stat *st, int *err, char *why, size_t whylen)
{
    char *real = realpath(path, NULL);
    if (real == NULL) {
        *err = errno_error(errno);
        whyf(why, whylen, "%s: %s", path, strerror(errno));
        return -1;
    }
    char dir[PATH_MAX], w[512];
    const char *slash = strrchr(real, '/');
    snprintf(dir, sizeof dir, "%.*s", slash == real ? 1 : (int)(slash - real), real);
    struct stat dst, dnow;
    int fd = -1, dfd = -1;
    if (!pubfmt_dir_trusted(dir, geteuid(), &dst, w, sizeof w)) {
        *err = BLOOMGUARD_EUNSAFE;
        whyf(why, whylen, "not trusted: %s", w);
        goto out;
    }
    /* O_PATH: a directory a reader may only search (x) is opened too. */
    dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || fstat(dfd, &dnow) != 0) {
        *err = errno_error(errno);
        whyf(why, whylen, "%s: %s", dir, strerror(errno));
        goto out;
    }
    if (dnow.st_dev != dst.st_dev || dnow.st_ino != dst.st_ino) {
        *err = BLOOMGUARD_EUNSAFE;
        whyf(why, whylen, "not trusted: %s changed while it was checked", dir);
        goto out;
    }
    fd = openat(dfd, slash + 1, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW);
    if (fd < 0 || fstat(fd, st) != 0) {
        *err = errno == ELOOP ? BLOOMGUARD_EUNSAFE : errno_error(errno);
        whyf(why, whylen, "%s: %s", path, strerror(errno));
    } else if (!pubfmt_file_trusted(st, dst.st_uid, w, sizeof w)) {
        *err = BLOOMGUARD_EUNSAFE;
        whyf(why, whylen, "not trusted: %s", w);
    } else {
        goto out;
    }
    if (fd >= 0)
        close(fd);
    fd = -1;
out:
    if (dfd >= 0)
        close(dfd);
    free(real);
    return fd;
}

/*
 * The run's verified-absent set beside the filter at path (<name>.bgv for
 * <name>.bgf), when the generation says there is one: mapped read-only,
 * trusted as the filter is, of the generation's instance.  Without it the
 * view denies nothing from the set (a false "maybe" at worst): every
 * failure here is silent.
 */
static void view_map_denied(struct view *v, const char *path)
{
    char vpath[PATH_MAX], why[256];
    /* Beside the file itself, wherever the caller's path (a link?) led. */
    char *real = realpath(path, NULL);
    size_t len = real ? strlen(real) : 0, sl = strlen(PUBFMT_SUFFIX);
    if (len <= sl || strcmp(real + len - sl, PUBFMT_SUFFIX) != 0
        || len - sl + strlen(PUBFMT_VSET_SUFFIX) >= sizeof vpath) {
        free(real);
        return;
    }
    snprintf(vpath, sizeof vpath, "%.*s%s", (int)(len - sl), real, PUBFMT_VSET_SUFFIX);
    free(real);
    struct stat st;
    int err, fd = open_trusted(vpath, &st, &err, why, sizeof why);
    if (fd < 0)
        return;
    void *m = (uint64_t)st.st_size >= PUBFMT_HEADER_BYTES
              ? mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
    close(fd);
    if (m == MAP_FAILED)
        return;
    const struct pubfmt_vset_header *h = m;
    const struct vset *s = NULL;
    if (pubfmt_vset_check(h, (uint64_t)st.st_size, v->hdr->instance, why, sizeof why)
        && memcmp(h->boot_id, v->hdr->boot_id, 16) == 0)
        s = vset_view((const char *)m + h->set_offset, (size_t)h->set_bytes);
    if (s == NULL) {
        munmap(m, (size_t)st.st_size);
        return;
    }
    v->vmap = m;
    v->vmap_len = (size_t)st.st_size;
    v->denied = s;
}

/* The generation at bg's path, ready and whole; NULL with *err and why. */
static struct view *view_open(const struct bloomguard *bg, int *err, char *why, size_t whylen)
{
    struct view *v = calloc(1, sizeof *v);
    struct stat st;
    if (v == NULL) {
        *err = BLOOMGUARD_ENOMEM;
        snprintf(why, whylen, "no memory");
        return NULL;
    }
    if ((v->fd = open_trusted(bg->path, &st, err, why, whylen)) < 0)
        goto fail;
    if ((uint64_t)st.st_size < PUBFMT_HEADER_BYTES) {
        *err = BLOOMGUARD_EFORMAT;
        snprintf(why, whylen, "%s: not a published bloomguard filter (too short)", bg->path);
        goto fail;
    }
    v->dev = st.st_dev;
    v->ino = st.st_ino;
    void *h = mmap(NULL, PUBFMT_HEADER_BYTES, PROT_READ, MAP_SHARED, v->fd, 0);
    if (h == MAP_FAILED) {
        *err = errno_error(errno);
        snprintf(why, whylen, "%s: mmap: %s", bg->path, strerror(errno));
        goto fail;
    }
    v->hdr = h;
    char bad[128];
    if (!pubfmt_check(v->hdr, (uint64_t)st.st_size, bad, sizeof bad)) {
        *err = BLOOMGUARD_EFORMAT;
        snprintf(why, whylen, "%s: %s", bg->path, bad);
        goto fail;
    }
    static const uint8_t zero[16];
    if (bg->have_boot_id && memcmp(v->hdr->boot_id, zero, 16) != 0
        && memcmp(v->hdr->boot_id, bg->boot_id, 16) != 0) {
        *err = BLOOMGUARD_ESTALE;
        snprintf(why, whylen, "%s: written before the last boot", bg->path);
        goto fail;
    }
    uint32_t flags = atomic_load_explicit(&((struct pubfmt_header *)v->hdr)->flags,
                                          memory_order_acquire);
    if (!(flags & PUBFMT_READY) || (flags & PUBFMT_SUPERSEDED)) {
        *err = BLOOMGUARD_ESTALE;
        snprintf(why, whylen, "%s: withdrawn by the daemon", bg->path);
        goto fail;
    }
    v->spell = (enum spell_type)v->hdr->spell;
    /* Read once more, as the view will use it: a kind it does not know is never read as another. */
    if (!pubfmt_scheme_kind(v->hdr->blocks_scheme, &v->kind)) {
        *err = BLOOMGUARD_EFORMAT;
        snprintf(why, whylen, "%s: a filter kind (block scheme) this build does not know",
                 bg->path);
        goto fail;
    }
    v->max_stale_ns = v->hdr->max_stale_ns;
    v->max_id_bytes = v->hdr->max_id_bytes;
    unsigned n = atomic_load_explicit(&((struct pubfmt_header *)v->hdr)->nlayers,
                                      memory_order_acquire);
    if (n < 1 || n > PUBFMT_MAX_LAYERS) {
        *err = BLOOMGUARD_EFORMAT;
        snprintf(why, whylen, "%s: a layer count out of range", bg->path);
        goto fail;
    }
    char w[128];
    if (!view_map_layers(v, n, err, w, sizeof w)) {
        snprintf(why, whylen, "%s: %s", bg->path, w);
        goto fail;
    }
    if (flags & PUBFMT_VERIFIED)
        view_map_denied(v, bg->path);
    return v;
fail:
    view_free(v);
    return NULL;
}

/*
 * Replace bg's view, if it is still was (the one the caller saw; NULL:
 * none), by the file at the path now (reopen) or by none.  Readers never
 * wait: the old view is freed after a grace period.  Must not be called
 * inside a read section.
 */
static void replace(struct bloomguard *bg, struct view *was, bool reopen)
{
    pthread_mutex_lock(&bg->mu);
    struct view *old = atomic_load_explicit(&bg->cur, memory_order_relaxed);
    if (old != was) {                       /* another thread did it */
        pthread_mutex_unlock(&bg->mu);
        return;
    }
    struct view *v = NULL;
    /* A file superseded as it is opened (rebuilds back to back): the next one is there. */
    for (int i = 0; reopen && i < 3 && v == NULL; i++) {
        int err = BLOOMGUARD_EIO;
        v = view_open(bg, &err, bg->why, sizeof bg->why);
        bg->error = v ? BLOOMGUARD_OK : err;
        if (err != BLOOMGUARD_ESTALE)
            break;
    }
    atomic_store_explicit(&bg->cur, v, memory_order_release);
    atomic_store_explicit(&bg->next_check, monoclock_coarse_ns() + RECHECK_NS,
                          memory_order_relaxed);
    pthread_mutex_unlock(&bg->mu);
    if (old != NULL) {
        rcu_synchronize(&bg->rcu);
        view_free(old);
    }
}

/* The daemon added layers: map them (the view only grows; lookups go on meanwhile). */
static void grow(struct bloomguard *bg, struct view *v, unsigned n)
{
    pthread_mutex_lock(&bg->mu);
    bool failed = false;
    if (atomic_load_explicit(&bg->cur, memory_order_relaxed) == v && v->mapped < n) {
        int err = BLOOMGUARD_EIO;
        if ((failed = !view_map_layers(v, n, &err, bg->why, sizeof bg->why)))
            bg->error = err;
    }
    pthread_mutex_unlock(&bg->mu);
    /* A view that cannot hold every layer must not answer: none (retried in a second). */
    if (failed)
        replace(bg, v, false);
}

/*
 * At most once per RECHECK_NS per handle: whether the path still names
 * the mapped file (a restarted daemon's new file, a withdrawn one that
 * vanished), or now names one when none is mapped.
 */
static void recheck(struct bloomguard *bg)
{
    int64_t now = monoclock_coarse_ns();
    int64_t due = atomic_load_explicit(&bg->next_check, memory_order_relaxed);
    if (now < due || !atomic_compare_exchange_strong(&bg->next_check, &due, now + RECHECK_NS))
        return;
    struct rcu_read r = rcu_read_enter(&bg->rcu);
    struct view *v = atomic_load_explicit(&bg->cur, memory_order_acquire);
    struct stat st;
    bool same = v != NULL && stat(bg->path, &st) == 0 && st.st_ino == v->ino
                && st.st_dev == v->dev;
    rcu_read_exit(r);
    if (!same)
        replace(bg, v, true);
}

/* What the daemon's staleness rule says of a generation's horizon (answer.h's callback). */
struct reader_stale {
    int64_t hz;
    int64_t max_stale_ns;
    bool unsure;
};

static bool reader_stale(void *ctx)
{
    const struct reader_stale *st = ctx;
    return answer_degraded(monoclock_boot_ns(), st->hz, st->max_stale_ns, st->unsure);
}

enum bloomguard_answer bloomguard_lookup(bloomguard *bg, const void *id, size_t len)
{
    recheck(bg);
    for (int attempt = 0; attempt < 3; attempt++) {
        struct rcu_read r = rcu_read_enter(&bg->rcu);
        struct view *v = atomic_load_explicit(&bg->cur, memory_order_acquire);
        if (v == NULL) {
            rcu_read_exit(r);
            return BLOOMGUARD_NOT_READY;
        }
        /*
         * What GET /exists refuses (idcodec.h: empty, longer than the
         * daemon's max_id_bytes, a NUL, not UTF-8) is not a question the
         * filter answers: the daemon follows no row with an ID longer than
         * a request may carry (it does not degrade for one), so "absent"
         * could be wrong.
         */
        if (id_check(id, len, v->max_id_bytes) != ID_OK) {
            rcu_read_exit(r);
            return BLOOMGUARD_INVALID;
        }
        struct pubfmt_header *h = (struct pubfmt_header *)v->hdr;
        /* The order publish.h's proof needs: flags, layers, horizon, bits. */
        uint32_t flags = atomic_load_explicit(&h->flags, memory_order_acquire);
        if (flags & PUBFMT_SUPERSEDED) {
            rcu_read_exit(r);
            replace(bg, v, true);
            continue;
        }
        unsigned n = atomic_load_explicit(&h->nlayers, memory_order_acquire);
        if (n > filter_layers(v->f)) {
            rcu_read_exit(r);
            grow(bg, v, n);
            continue;
        }
        struct reader_stale st = {
            .hz = atomic_load_explicit(&h->horizon, memory_order_acquire),
            .max_stale_ns = v->max_stale_ns,
            .unsure = (flags & PUBFMT_UNSURE) != 0,
        };
        struct answer_query q;
        answer_query_begin(&q, v->spell, id, len);
        /* The set after the bits, as the daemon reads them (publish.h, (d)). */
        enum answer a = answer_lookup(&q, v->f, v->denied, reader_stale, &st);
        answer_query_end(&q);
        rcu_read_exit(r);
        _Static_assert((int)BLOOMGUARD_ABSENT == (int)ANSWER_ABSENT
                       && (int)BLOOMGUARD_MAYBE == (int)ANSWER_MAYBE
                       && (int)BLOOMGUARD_DEGRADED == (int)ANSWER_DEGRADED,
                       "bloomguard.h's answers are answer.h's");
        /* The library has no answer of its own for an unprovable spelling: it is a "maybe". */
        return a == ANSWER_UNPROVABLE ? BLOOMGUARD_MAYBE : (enum bloomguard_answer)a;
    }
    return BLOOMGUARD_NOT_READY;
}

bloomguard *bloomguard_open(const char *path, unsigned flags, int *err)
{
    int dummy;
    err = err ? err : &dummy;
    *err = BLOOMGUARD_OK;
    if (path == NULL || path[0] != '/' || (flags & ~BLOOMGUARD_OPEN_MISSING_OK) != 0) {
        *err = BLOOMGUARD_EINVAL;
        return NULL;
    }
    size_t len = strlen(path) + 1;
    size_t size = (sizeof(struct bloomguard) + len + 63) / 64 * 64;
    bloomguard *bg = aligned_alloc(64, size);
    if (bg == NULL) {
        *err = BLOOMGUARD_ENOMEM;
        return NULL;
    }
    memset(bg, 0, sizeof *bg);
    memcpy(bg->path, path, len);
    if (!rcu_init(&bg->rcu)) {
        free(bg);
        *err = BLOOMGUARD_ENOMEM;
        return NULL;
    }
    pthread_mutex_init(&bg->mu, NULL);
    atomic_init(&bg->cur, NULL);
    atomic_init(&bg->next_check, monoclock_coarse_ns() + RECHECK_NS);
    bg->have_boot_id = pubfmt_boot_id(bg->boot_id);
    int e = BLOOMGUARD_EIO;
    struct view *v = view_open(bg, &e, bg->why, sizeof bg->why);
    if (v == NULL && (e == BLOOMGUARD_EFORMAT || !(flags & BLOOMGUARD_OPEN_MISSING_OK))) {
        *err = e;
        bloomguard_close(bg);
        return NULL;
    }
    bg->error = v ? BLOOMGUARD_OK : e;
    atomic_store(&bg->cur, v);
    return bg;
}

void bloomguard_close(bloomguard *bg)
{
    if (bg == NULL)
        return;
    view_free(atomic_load(&bg->cur));
    pthread_mutex_destroy(&bg->mu);
    rcu_destroy(&bg->rcu);
    free(bg);
}

int bloomguard_info(bloomguard *bg, struct bloomguard_info *out)
{
    memset(out, 0, sizeof *out);
    recheck(bg);
    /*
     * What a lookup would answer from: a superseded generation is left
     * first, as bloomguard_lookup leaves it (recheck's stat runs only every
     * RECHECK_NS, so it alone could describe the generation before).
     */
    struct rcu_read r = rcu_read_enter(&bg->rcu);
    struct view *was = atomic_load_explicit(&bg->cur, memory_order_acquire);
    bool superseded = was != NULL
                      && (atomic_load_explicit(&((struct pubfmt_header *)was->hdr)->flags,
                                               memory_order_acquire) & PUBFMT_SUPERSEDED);
    rcu_read_exit(r);
    if (superseded)
        replace(bg, was, true);
    pthread_mutex_lock(&bg->mu);
    struct view *v = atomic_load(&bg->cur);
    if (v == NULL) {
        out->error = bg->error ? bg->error : BLOOMGUARD_EIO;
        snprintf(out->why, sizeof out->why, "%s", bg->why);
        out->horizon_age = -1;
        pthread_mutex_unlock(&bg->mu);
        return out->error;
    }
    struct pubfmt_header *h = (struct pubfmt_header *)v->hdr;
    int64_t now = monoclock_boot_ns();
    int64_t hz = atomic_load_explicit(&h->horizon, memory_order_acquire);
    uint32_t flags = atomic_load_explicit(&h->flags, memory_order_acquire);
    snprintf(out->name, sizeof out->name, "%.*s", (int)sizeof h->name, h->name);
    snprintf(out->spelling, sizeof out->spelling, "%s", spell_type_name(v->spell));
    out->generation = h->generation;
    out->layers = v->mapped;
    out->target_fpp = h->target_fpp;
    out->horizon_age = hz > 0 ? (double)answer_age(now, hz) / 1e9 : -1;
    out->max_staleness = (double)v->max_stale_ns / 1e9;
    out->saturated = (flags & PUBFMT_UNSURE) != 0;
    out->degraded = answer_degraded(now, hz, v->max_stale_ns, out->saturated);
    out->pid = h->pid;
    pthread_mutex_unlock(&bg->mu);
    return BLOOMGUARD_OK;
}

const char *bloomguard_answer_name(int answer)
{
    switch (answer) {
    case BLOOMGUARD_NOT_READY: return "not_ready";
    case BLOOMGUARD_ABSENT: return "absent";
    case BLOOMGUARD_MAYBE: return "maybe";
    case BLOOMGUARD_DEGRADED: return "degraded";
    case BLOOMGUARD_INVALID: return "invalid";
    }
    return "unknown";
}

const char *bloomguard_strerror(int err)
{
    switch (err) {
    case BLOOMGUARD_OK: return "success";
    case BLOOMGUARD_ENOENT: return "no published filter at that path (is bloomguard running "
                                   "with publish_dir?)";
    case BLOOMGUARD_EACCES: return "permission denied";
    case BLOOMGUARD_EFORMAT: return "not a published bloomguard filter this library reads";
    case BLOOMGUARD_ESTALE: return "the published filter was withdrawn or is from another boot";
    case BLOOMGUARD_ENOMEM: return "out of memory";
    case BLOOMGUARD_EINVAL: return "invalid argument (the path must be absolute)";
    case BLOOMGUARD_EIO: return "system error";
    case BLOOMGUARD_EUNSAFE: return "not trusted: the file, or a directory above it, is not the "
                                    "daemon's alone (another user's, writable by others, or not "
                                    "a regular file)";
    }
    return "unknown error";
}

const char *bloomguard_version(void)
{
    return PACKAGE_VERSION;
}
