/*
 * The snapshots an upstream makes for its replicas (GET
 * /replicate/NAME/snapshot): the live filter and the POST journal copied
 * into memory inside the table's read section (a commit waits for the
 * copy, never for a slow replica), served from there, and shared by the
 * requests that arrived before it was made, so that a fleet bootstrapping
 * at once costs one copy.  Its metadata says where it is exact (fleethub.h).
 */
#include "fleetsnap.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fleetring.h"
#include "monoclock.h"
#include "persist.h"
#include "snapshot.h"
#include "table.h"

/* A snapshot made for replicas, shared by the requests that arrived before it was made. */
struct blob {
    _Atomic unsigned refs;
    int64_t made;                   /* monoclock_boot_ns when it began to be made */
    size_t len;
    unsigned char *bytes;
};

struct fleetsnap {
    struct table *t;
    struct fleetring *ring;
    bool replica;
    fleetsnap_proof_fn *proof;
    void *ctx;
    pthread_mutex_t mu;             /* one making at a time */
    struct blob *latest;            /* under mu */
};


static void blob_unref(void *cls)
{
    struct blob *b = cls;
    if (b != NULL && atomic_fetch_sub(&b->refs, 1) == 1) {
        free(b->bytes);
        free(b);
    }
}

struct making {
    const struct snapshot_meta *meta;
    struct blob *b;
    int err;
};

/* Inside the table's read section: the live filter and the journal into memory. */
static void make_blob(void *arg, const struct filter *f, struct pending *journal)
{
    struct making *mk = arg;
    struct snapshot_stream *ss = snapshot_stream_new(mk->meta, f, journal, monoclock_boot_s());
    uint64_t size = ss ? snapshot_stream_size(ss) : 0;
    mk->err = ss == NULL ? errno : size > SIZE_MAX ? EFBIG : 0;
    if (mk->err == 0 && (mk->b->bytes = malloc((size_t)size)) == NULL)
        mk->err = ENOMEM;
    if (mk->err == 0)
        mk->b->len = snapshot_stream_read(ss, mk->b->bytes, (size_t)size);
    snapshot_stream_free(ss);
}

/*
 * A new snapshot of ht, begun at now: its proof read first, then the
 * ring's seq, then the bits (table_with_live), so every row older than its
 * horizon and every key up to its seq is in it (fleetring.h, table.h).
 */
static struct blob *make_snapshot(struct fleetsnap *fs, int64_t now, int *err)
{
    const struct filter_config *fc = table_config(fs->t);
    struct table_proof p;
    struct table_ident id;
    struct persist_ident_kv ikv;
    char fleet[7][32];
    static const char *const keys[7] = { "fleet_history", "fleet_seq", "fleet_epoch",
        "fleet_covered", "fleet_generation", "fleet_horizon_age_ns", "fleet_replica" };
    struct snapshot_kv kv[PERSIST_IDENT_KV + 7];
    *err = ENOMEM;
    if (!fleetring_enable(fs->ring))
        return NULL;
    uint64_t history, seq;
    fs->proof(fs->ctx, &p, &history, &seq);
    table_ident(fs->t, &id);
    persist_ident_to_kv(&id, &ikv);
    snprintf(fleet[0], sizeof fleet[0], "%016" PRIx64, history);
    snprintf(fleet[1], sizeof fleet[1], "%" PRIu64, seq);
    snprintf(fleet[2], sizeof fleet[2], "%" PRIu64, p.epoch);
    snprintf(fleet[3], sizeof fleet[3], "%" PRIu64, p.covered);
    snprintf(fleet[4], sizeof fleet[4], "%" PRIu64, p.generation);
    if (p.horizon > 0)
        snprintf(fleet[5], sizeof fleet[5], "%" PRId64, monoclock_boot_ns() - p.horizon);
    else
        snprintf(fleet[5], sizeof fleet[5], "none");
    snprintf(fleet[6], sizeof fleet[6], "%d", fs->replica ? 1 : 0);
    memcpy(kv, ikv.kv, sizeof ikv.kv);
    for (int k = 0; k < 7; k++)
        kv[PERSIST_IDENT_KV + k] = (struct snapshot_kv){ keys[k], fleet[k] };
    const struct snapshot_meta m = {
        .name = fc->name, .table = fc->table, .column = fc->column,
        .position = "", .created = (uint64_t)time(NULL), .kv = kv, .n_kv = PERSIST_IDENT_KV + 7,
    };
    struct blob *b = calloc(1, sizeof *b);
    if (b == NULL)
        return NULL;
    atomic_init(&b->refs, 1);
    b->made = now;
    struct making mk = { &m, b, 0 };
    if (!table_with_live(fs->t, make_blob, &mk))
        mk.err = EAGAIN;
    if (mk.err != 0) {
        *err = mk.err;
        blob_unref(b);
        return NULL;
    }
    return b;
}

struct fleetsnap *fleetsnap_new(struct table *t, struct fleetring *ring, bool replica,
                                fleetsnap_proof_fn *proof, void *ctx)
{
    struct fleetsnap *fs = calloc(1, sizeof *fs);
    if (fs == NULL)
        return NULL;
    fs->t = t;
    fs->ring = ring;
    fs->replica = replica;
    fs->proof = proof;
    fs->ctx = ctx;
    pthread_mutex_init(&fs->mu, NULL);
    return fs;
}

void fleetsnap_free(struct fleetsnap *fs)
{
    if (fs == NULL)
        return;
    blob_unref(fs->latest);
    pthread_mutex_destroy(&fs->mu);
    free(fs);
}

struct reply fleetsnap_serve(struct fleetsnap *fs, bool *made)
{
    int64_t asked = monoclock_boot_ns();
    int err = 0;
    *made = false;
    pthread_mutex_lock(&fs->mu);
    struct blob *b = fs->latest;
    /* Made after this request came: its horizon is one this request may be told. */
    if (b == NULL || b->made < asked) {
        struct blob *nb = make_snapshot(fs, monoclock_boot_ns(), &err);
        if (nb != NULL) {
            blob_unref(fs->latest);
            fs->latest = b = nb;
            *made = true;
        } else {
            b = NULL;
        }
    }
    if (b != NULL)
        atomic_fetch_add(&b->refs, 1);
    pthread_mutex_unlock(&fs->mu);
    if (b == NULL)
        return err == EAGAIN
            ? api_error(MHD_HTTP_SERVICE_UNAVAILABLE, "not_ready", "filter %s is not loaded yet",
                        table_name(fs->t))
            : api_error(MHD_HTTP_INTERNAL_SERVER_ERROR, "snapshot_failed",
                        "cannot make a snapshot of filter %s: %s", table_name(fs->t),
                        strerror(err));
    struct MHD_Response *r = MHD_create_response_from_buffer_with_free_callback_cls(
        b->len, b->bytes, blob_unref, b);
    if (r == NULL) {
        blob_unref(b);
        return (struct reply){ MHD_HTTP_INTERNAL_SERVER_ERROR, NULL, false };
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    return (struct reply){ MHD_HTTP_OK, r, false };
}
