/*
 * The insides of the guarded table, shared by its three files: table.c
 * (the table, its answers and inserts), table_follow.c (what followers
 * report, the wants and the jobs they drive) and table_load.c (loads and
 * their commit, restored positions, the figures).  Nothing outside them
 * includes it; table.h is the contract.
 */
#ifndef BLOOMGUARD_TABLE_INT_H
#define BLOOMGUARD_TABLE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "adapt.h"
#include "guard.h"
#include "pending.h"
#include "table.h"

struct table {
    const struct filter_config *fc;
    struct guard *g;
    struct pending *pending;
    int64_t max_stale_ns;           /* 0: never degraded */
    unsigned min_interval;          /* [sync] min_rebuild_interval, seconds */
    void (*wake)(void *arg);
    void *wake_arg;
    table_durable_fn durable;
    table_durable_submit_fn durable_submit;
    void *durable_arg;
    struct table_publisher pub;     /* hooks all NULL: not published */
    struct table_tap tap;           /* hooks all NULL: no replication ring */
    struct adapt *ad;               /* the verified-absent set and its sketch; NULL: [adaptive] off */
    const struct vset *verified;    /* adapt_set(ad) (NULL: off), kept where the set moves: no call a lookup */
    const struct hot_door *door;    /* adapt_door(ad): the sketch's first step, inline (NULL: none) */
    const _Atomic uint64_t *vtags;  /* adapt_tags(ad): the set's tag filter (NULL: off) */

    /* Every row committed before it is in the live filter; 0 = none. */
    _Atomic int64_t horizon;
    /*
     * The live filter can no longer keep its advertised rate (filter.h:
     * saturated): absent answers are "maybe" until a COPY replaces it.
     * Refreshed after inserts and on the scheduler's ticks.
     */
    atomic_bool saturated;
    /*
     * Until then (monoclock_boot_ns's clock; 0: never) absent answers are "maybe":
     * POSTs acknowledged before this start may be missing from the journal
     * (table_hold_absent).
     */
    _Atomic int64_t held_until;
    atomic_ulong not_a_value;       /* IDs the column's type refused */
    _Atomic int spell;              /* enum spell_type of the live filter's keys */
    _Atomic int vet;                /* enum table_vet: a peer's filter on probation */

    pthread_mutex_t mu;
    /* Everything below is guarded by mu. */
    struct table_sizing size;       /* [filter] sizing of the next load (table_set_sizing) */
    uint64_t epoch;                 /* bumped by table_gap */
    uint64_t covered;               /* the epoch the live filter's load started in */
    uint64_t generation;            /* live filters so far (loads and restores) */
    bool loaded;
    /* wants */
    uint64_t wanted;                /* newest requested load id */
    uint64_t started;               /* id of the load running or last started */
    enum table_want want;           /* the strongest reason among the pending ones */
    enum table_want job_why;        /* the reason of the load running or last taken */
    unsigned layers_seen;           /* the live filter's layers at the last tick; 0: look again */
    int64_t layers_since;           /* monoclock_boot_ns when that count was first seen */
    int64_t last_end;               /* monoclock_boot_ns of the last load's end; 0: none */
    int64_t retry_at;               /* a failed load is not retried before */
    char position[TABLE_POS_MAX];   /* "" = none: the next load copies */
    int64_t degraded_ns, accounted; /* time spent degraded, counted up to accounted */
    struct table_ident ident;       /* of the live filter's load */
    /* What the last table_schema found, and whether it holds proofs back. */
    bool schema_seen_set;
    char schema_seen[sizeof ((struct table_ident *)0)->shape];
    char schema_uncovered[320];     /* "" = every table heard */
    bool schema_off;
    int64_t vet_horizon;            /* the horizon proved while on probation (table_vet) */
    struct table_status st;
};

/* Room on the stack for a key; a longer one goes to the heap. */
#define KEY_STACK 256

/* The tap's changed hook, if any (call it under no lock of the table). */
void table_tap_changed(struct table *t);
/*
 * After a POST's n keys went into the filter (inserted of them): the
 * saturation check, and the tap hears them when all went in (ttl: the
 * journal's, pending_ttl >= 1: replicas keep them as long).
 */
void table_posted(struct table *t, const uint64_t *hs, size_t n, size_t inserted);

/*
 * Whether an answer resting on horizon h is degraded at now (monoclock_boot_ns):
 * answer_degraded, the one rule, with what the table knows besides.
 */
bool table_stale(struct table *t, int64_t h, int64_t now);

/*
 * A key (hash h) went into the table's filters: the adaptive part counts it
 * and kills its entries (table_adapt.h, step 3).
 */
static inline void table_added(struct table *t, uint64_t h)
{
    if (t->ad != NULL)
        adapt_added(t->ad, h);
}

/* After inserts: degrade absent answers at once if the filter just lost its rate. */
void table_check_saturated(struct table *t);
/*
 * Whether absent answers are degraded for saturation: stored, and on a
 * change handed to the publisher (under mu, which the caller must not
 * hold) so that readers of the published file degrade with the daemon.
 */
void table_set_saturated(struct table *t, bool saturated);
/* Caller holds mu: the publisher hears table_unsure's answer now (its unsure hook). */
void table_tell_unsure_locked(struct table *t);
/*
 * The key of id for spelling sp (table.c says where it goes: *key, buf of
 * KEY_STACK bytes, or *heap for the caller to free); spell_key's verdict.
 */
enum spell_verdict table_key_of(enum spell_type sp, const char *id, size_t len, char *buf,
                                char **heap, const char **key, size_t *klen);

/*
 * Caller holds t->mu for each of these.  account: adds the time degraded
 * in [accounted, now] under horizon h; advance: moves the horizon to when
 * if the live filter covers epoch and epoch is current (false if not);
 * hold_back: the nanoseconds min_rebuild_interval still holds a COPY back;
 * may_catch_up: whether the pending want may be served by a catch-up.
 */
void table_account_locked(struct table *t, int64_t h, int64_t now);
/* schema_off and st.schema_why from the last table_schema and the live load's shape. */
void table_schema_eval_locked(struct table *t);
bool table_advance_locked(struct table *t, uint64_t epoch, int64_t when);
int64_t table_hold_back_locked(const struct table *t, int64_t now);
bool table_may_catch_up_locked(const struct table *t);

#endif
