/*
 * One table's adaptive part (adapt.h).  Why an entry may deny its key is
 * table_adapt.h's argument; this file keeps the orders the argument
 * needs: every add counts its bucket before it kills, and a
 * verification stages its entry, reads its bucket's count, and only then
 * activates, all with sequentially consistent operations (a load's rows
 * are counted apart, a fence for many: adapt_added_bulk).
 */
#include "adapt.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Denials are counted on stripes, so that request threads rarely share a line. */
#define STRIPES 16
/* The tag filter's words (adapt.h): 128 KiB. */
#define TAG_WORDS ((size_t)1 << (ADAPT_TAG_LOG2 - 6))

/* One entry the set took, as its replicas' streams read it (adapt_log_read). */
struct logent {
    uint64_t hash;
    size_t klen;
    char key[VSET_KEY_MAX];
};

struct stripe {
    _Atomic uint64_t n;
    char pad[56];
};

struct adapt {
    struct hot *hot;
    const struct hot_door *door;    /* hot's doorkeeper, which callers take inline (NULL: none) */
    _Atomic uint64_t *tags;         /* the set's tag filter (adapt.h), 2^ADAPT_TAG_LOG2 bits */
    struct vset *set;
    void *own;                      /* the set's memory while it is the table's own */
    size_t set_bytes;
    uint32_t max_entries;
    _Atomic uint64_t adds[ADAPT_ADD_BUCKETS];
    /* A load's adds (adapt_added_bulk): written under bulk only, so by plain increments. */
    _Atomic uint64_t bulk_adds[ADAPT_ADD_BUCKETS];
    pthread_mutex_t bulk;
    _Atomic uint64_t generation;    /* adapt_reset's count */
    pthread_mutex_t writer;         /* stages, activations, clears, prunes */
    pthread_mutex_t qmu;            /* the queue: a try-lock on the hot path */
    void (*wake)(void *arg);        /* a candidate joined an empty queue */
    void *wake_arg;
    void (*entered)(void *arg);     /* an entry joined the set and its log */
    void *entered_arg;
    struct adapt_candidate *queue;
    size_t qhead, qlen;
    _Atomic uint64_t candidates, reported, dropped, verified_absent, verified_present,
        verify_failed, raced, posted, evictions, invalidations, received, forwarded;
    /* Under writer: the entries entered, ADAPT_LOG at most, log_next the next one's number. */
    struct logent *log;
    _Atomic uint64_t log_next;      /* written under writer; read without it to see there is nothing new */
    struct stripe denied[STRIPES];
};

static uint32_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint32_t)((uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u);
}

static inline unsigned bucket_of(uint64_t h)
{
    return (unsigned)(h >> 24) & (ADAPT_ADD_BUCKETS - 1);
}

static inline _Atomic uint64_t *adds_of(struct adapt *a, uint64_t h)
{
    return &a->adds[bucket_of(h)];
}

/*
 * h's bucket's adds of both kinds, each read seq_cst.  Both counts only
 * grow, so two reads' sums are equal only if neither count moved between
 * its two reads: the sum serves as the ticket a single count did.
 */
static inline uint64_t ticket_of(struct adapt *a, uint64_t h)
{
    return atomic_load(adds_of(a, h)) + atomic_load(&a->bulk_adds[bucket_of(h)]);
}

struct adapt *adapt_new(uint32_t max_entries, uint32_t min_hits, uint32_t window_ms)
{
    size_t bytes = vset_bytes(max_entries);
    if (bytes == 0)
        return NULL;
    struct adapt *a = aligned_alloc(64, (sizeof *a + 63) / 64 * 64);
    if (a == NULL)
        return NULL;
    memset(a, 0, sizeof *a);
    a->max_entries = max_entries;
    a->set_bytes = bytes;
    /* A sketch twice the set: room for the hot legitimate IDs beside the false positives. */
    a->hot = hot_new(2 * max_entries < 3072 ? 3072 : 2 * max_entries, min_hits, window_ms);
    a->own = aligned_alloc(64, (bytes + 63) / 64 * 64);
    a->queue = calloc(ADAPT_QUEUE, sizeof *a->queue);
    a->log = calloc(ADAPT_LOG, sizeof *a->log);
    a->tags = aligned_alloc(64, TAG_WORDS * sizeof *a->tags);
    if (a->hot == NULL || a->own == NULL || a->queue == NULL || a->log == NULL || a->tags == NULL) {
        hot_free(a->hot);
        free(a->own);
        free(a->queue);
        free(a->log);
        free(a->tags);
        free(a);
        return NULL;
    }
    for (size_t i = 0; i < TAG_WORDS; i++)
        atomic_init(&a->tags[i], 0);
    a->door = hot_doorkeeper(a->hot);
    a->set = vset_make(a->own, bytes, max_entries);
    for (unsigned i = 0; i < ADAPT_ADD_BUCKETS; i++) {
        atomic_init(&a->adds[i], 0);
        atomic_init(&a->bulk_adds[i], 0);
    }
    pthread_mutex_init(&a->writer, NULL);
    pthread_mutex_init(&a->bulk, NULL);
    pthread_mutex_init(&a->qmu, NULL);
    return a;
}

void adapt_free(struct adapt *a)
{
    if (a == NULL)
        return;
    hot_free(a->hot);
    free(a->own);
    free(a->queue);
    free(a->log);
    free(a->tags);
    pthread_mutex_destroy(&a->writer);
    pthread_mutex_destroy(&a->qmu);
    pthread_mutex_destroy(&a->bulk);
    free(a);
}

size_t adapt_set_bytes(const struct adapt *a)
{
    return a->set_bytes;
}

bool adapt_move_set(struct adapt *a, void *mem, size_t bytes)
{
    void *own = NULL;
    if (mem == NULL) {
        /* Back into memory of its own, empty: the shared memory goes away. */
        if (a->own != NULL)
            return true;
        bytes = (a->set_bytes + 63) / 64 * 64;
        if ((mem = own = aligned_alloc(64, bytes)) == NULL)
            return false;
    }
    struct vset *s = vset_make(mem, bytes, a->max_entries);
    if (s == NULL) {
        free(own);
        return false;
    }
    a->set = s;
    free(a->own);
    a->own = own;
    return true;
}

void adapt_set_wake(struct adapt *a, void (*wake)(void *arg), void *arg)
{
    a->wake = wake;
    a->wake_arg = arg;
}

void adapt_set_entered(struct adapt *a, void (*entered)(void *arg), void *arg)
{
    a->entered = entered;
    a->entered_arg = arg;
}

bool adapt_log_ahead(const struct adapt *a, uint64_t cursor)
{
    return atomic_load(&((struct adapt *)a)->log_next) != cursor;
}

const struct vset *adapt_set(const struct adapt *a)
{
    return a->set;
}

void adapt_denied(struct adapt *a)
{
    uint64_t x = (uint64_t)(uintptr_t)pthread_self();
    x ^= x >> 17;
    atomic_fetch_add_explicit(&a->denied[(x >> 7) % STRIPES].n, 1, memory_order_relaxed);
}

/* Queue a candidate, or false (give it back): the queue is full, or busy and try is set. */
static bool enqueue(struct adapt *a, uint64_t h, const char *key, size_t klen, bool try)
{
    if (try ? pthread_mutex_trylock(&a->qmu) != 0 : pthread_mutex_lock(&a->qmu) != 0)
        return false;
    bool ok = a->qlen < ADAPT_QUEUE, first = a->qlen == 0;
    if (ok) {
        struct adapt_candidate *c = &a->queue[(a->qhead + a->qlen++) % ADAPT_QUEUE];
        c->hash = h;
        c->klen = klen;
        /* Spelled as the filter in force spells: a reset (a new spelling) fails it. */
        c->generation = atomic_load(&a->generation);
        memcpy(c->key, key, klen);
    }
    pthread_mutex_unlock(&a->qmu);
    /* Once per batch of candidates, not per request: the verifier starts at once. */
    if (ok && first && a->wake != NULL)
        a->wake(a->wake_arg);
    return ok;
}

/* A hot "maybe": queued for the verifier (out of line: most "maybe" answers are not hot). */
__attribute__((noinline)) static void candidate(struct adapt *a, const struct answer_query *q)
{
    /* A key too long to keep is never worth a lookup: settled, not asked about again soon. */
    if (q->klen > VSET_KEY_MAX) {
        hot_settle(a->hot, q->hash, true, now_ms());
        return;
    }
    if (enqueue(a, q->hash, q->key, q->klen, true)) {
        atomic_fetch_add_explicit(&a->candidates, 1, memory_order_relaxed);
    } else {
        hot_settle(a->hot, q->hash, false, now_ms());
        atomic_fetch_add_explicit(&a->dropped, 1, memory_order_relaxed);
    }
}

const _Atomic uint64_t *adapt_tags(const struct adapt *a)
{
    return a->tags;
}

/* h's bit of the tag filter set (writer held), before an entry of h is staged. */
static void tag_set(struct adapt *a, uint64_t h)
{
    uint64_t i = h >> (64 - ADAPT_TAG_LOG2);
    atomic_fetch_or_explicit(&a->tags[i >> 6], UINT64_C(1) << (i & 63), memory_order_relaxed);
}

const struct hot_door *adapt_door(const struct adapt *a)
{
    return a->door;
}

void adapt_maybe(struct adapt *a, const struct answer_query *q, int carry)
{
    /* Past the door (the caller's step, adapt.h): now the clock, and the bucket. */
    if (hot_count(a->hot, q->hash, carry, now_ms()))
        candidate(a, q);
}

bool adapt_report(struct adapt *a, uint64_t h, const char *key, size_t klen)
{
    if (klen > VSET_KEY_MAX || !hot_nominate(a->hot, h, now_ms()))
        return false;
    if (!enqueue(a, h, key, klen, false)) {
        hot_settle(a->hot, h, false, now_ms());
        atomic_fetch_add_explicit(&a->dropped, 1, memory_order_relaxed);
        return false;
    }
    atomic_fetch_add_explicit(&a->reported, 1, memory_order_relaxed);
    return true;
}

void adapt_added(struct adapt *a, uint64_t h)
{
    /* First the count (a verification reading it later is overtaken), then the kill. */
    atomic_fetch_add(adds_of(a, h), 1);
    /*
     * An entry staged before a verification's read of the count is seen by
     * this seq_cst load of live (the stage counted itself first), so
     * skipping the set when it is empty loses no kill.
     */
    if (vset_count(a->set) == 0)
        return;
    unsigned killed = vset_kill(a->set, h);
    if (killed)
        atomic_fetch_add_explicit(&a->invalidations, killed, memory_order_relaxed);
}

/*
 * Why a load's rows may be counted by plain increments and one fence per
 * batch (issue 39: a locked add per row was 8% of a load's CPU), and why
 * no verified-absent entry survives the load of its key's row.  Take a
 * row X of key k (bucket b) in the batch, and a verification V of k: its
 * ticket T (seq_cst reads of adds[b], bulk_adds[b]), its stage St (a
 * seq_cst store, vset.h), its second read R (seq_cst, of both counts),
 * activation only if R's sum equals T's.  The batch: W, the relaxed store
 * of bulk_adds[b] + 1 (under bulk: no other writer, so no increment is
 * lost), then F, a seq_cst fence, then K, the seq_cst loads of the set's
 * count and of k's slots (vset_kill).  In the single total order S of
 * seq_cst operations, F comes before or after R's read of bulk_adds[b]:
 *   - F before it: that read follows a seq_cst fence the store W is
 *     sequenced before, so it reads W or a later value (C11 7.17.3: a
 *     load after F in S observes a modification sequenced before F, or a
 *     later one).  If T read W too, X was read by the COPY before V's
 *     ticket, so before V's query snapshot: X committed before it, the
 *     query saw X (table_adapt.h, step 2: "C before S") and answered
 *     present.  Otherwise R's sum exceeds T's (counts only grow): V
 *     unstages, nothing is believed.
 *   - F after it: St, sequenced before R, precedes F in S too, and K's
 *     loads, sequenced after F, observe St or a later modification of
 *     what they read (C11 7.17.3: a load after a seq_cst fence observes
 *     the last seq_cst modification before the fence in S, or a later
 *     one).  So the count is not 0 (the stage counted itself first) while
 *     the entry lives, and vset_kill finds it, PENDING or ACTIVE, and
 *     kills it: an activation after fails, one before is undone.
 * Either way the entry is dead when the batch returns, which is before
 * the load commits and its horizon moves (the caller's order, as any add
 * of step 3).  A set found empty at K skips the kills: an entry staged
 * after F is in the first case (its R follows its St follows F).
 */
void adapt_added_bulk(struct adapt *a, const uint64_t *hs, size_t n)
{
    if (n == 0)
        return;
    pthread_mutex_lock(&a->bulk);
    for (size_t i = 0; i < n; i++) {
        _Atomic uint64_t *c = &a->bulk_adds[bucket_of(hs[i])];
        atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                              memory_order_relaxed);
    }
    pthread_mutex_unlock(&a->bulk);
    atomic_thread_fence(memory_order_seq_cst);
    if (vset_count(a->set) == 0)
        return;
    unsigned killed = 0;
    for (size_t i = 0; i < n; i++)
        killed += vset_kill(a->set, hs[i]);
    if (killed)
        atomic_fetch_add_explicit(&a->invalidations, killed, memory_order_relaxed);
}

size_t adapt_take(struct adapt *a, struct adapt_candidate *out, size_t max,
                  bool (*held)(void *arg, uint64_t h), void *arg)
{
    size_t n = 0;
    pthread_mutex_lock(&a->qmu);
    while (n < max && a->qlen > 0) {
        out[n++] = a->queue[a->qhead];
        a->qhead = (a->qhead + 1) % ADAPT_QUEUE;
        a->qlen--;
    }
    pthread_mutex_unlock(&a->qmu);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        struct adapt_candidate *c = &out[i];
        /* The ticket first: a POST after it counts the bucket; one before it is in the journal. */
        c->ticket = ticket_of(a, c->hash);
        if (held != NULL && held(arg, c->hash)) {
            hot_settle(a->hot, c->hash, true, now_ms());
            atomic_fetch_add_explicit(&a->posted, 1, memory_order_relaxed);
            continue;
        }
        out[kept++] = *c;
    }
    return kept;
}

/* The entry's place in the log its replicas' streams read (writer held). */
static void log_entered(struct adapt *a, const struct adapt_candidate *c)
{
    struct logent *e = &a->log[a->log_next++ % ADAPT_LOG];
    e->hash = c->hash;
    e->klen = c->klen;
    memcpy(e->key, c->key, c->klen);
}

/* Whether the log still holds key (writer held): every stream sends it then, a new one too. */
static bool in_log(const struct adapt *a, uint64_t h, const char *key, size_t klen)
{
    uint64_t next = atomic_load(&a->log_next), oldest = next > ADAPT_LOG ? next - ADAPT_LOG : 0;
    for (uint64_t at = oldest; at < next; at++) {
        const struct logent *e = &a->log[at % ADAPT_LOG];
        if (e->hash == h && e->klen == klen && memcmp(e->key, key, klen) == 0)
            return true;
    }
    return false;
}

/* An absent verdict on c (its ticket taken): entered, or raced. */
static enum adapt_outcome enter(struct adapt *a, const struct adapt_candidate *c)
{
    enum adapt_outcome out = ADAPT_RACED;
    bool fresh = false;
    unsigned evicted = 0;
    struct vset_ref ref;
    pthread_mutex_lock(&a->writer);
    /*
     * table_adapt.h, step 4: stage (a seq_cst store), then read the
     * bucket's count (seq_cst): an add that this read does not see comes
     * after it in the single total order, so its kill, which follows its
     * count, finds the staged entry and kills it, before or after the
     * activation below; an add it sees was after the ticket: not believed.
     */
    /* Before the stage: a lookup that finds the entry ACTIVE finds its bit (adapt.h). */
    tag_set(a, c->hash);
    if (atomic_load(&a->generation) == c->generation
        && vset_stage(a->set, c->hash, c->key, c->klen, &ref, &evicted)) {
        if (ticket_of(a, c->hash) != c->ticket || atomic_load(&a->generation) != c->generation)
            vset_unstage(a->set, &ref);
        else if (vset_activate(a->set, &ref)) {
            out = ADAPT_ENTERED;
            fresh = true;
        }
    } else if (atomic_load(&a->generation) == c->generation && vset_has(a->set, c->hash, c->key, c->klen)) {
        /*
         * Already denied: a report and a hit raced to the queue, or a
         * replica's new stream sent again what it had.  Logged again only
         * if the log lost it, so that a resumed stream's entries do not go
         * down the tree a second time.
         */
        out = ADAPT_ENTERED;
        fresh = !in_log(a, c->hash, c->key, c->klen);
    }
    if (fresh)
        log_entered(a, c);
    pthread_mutex_unlock(&a->writer);
    /*
     * After the log holds it (a seq_cst store a stream's check reads): the
     * replicas' streams send it now, not with the next key or heartbeat.
     * A batch of verdicts wakes them once (the hub's kick is one a round).
     */
    if (fresh && a->entered != NULL)
        a->entered(a->entered_arg);
    if (evicted)
        atomic_fetch_add_explicit(&a->evictions, evicted, memory_order_relaxed);
    if (out == ADAPT_RACED)
        atomic_fetch_add_explicit(&a->raced, 1, memory_order_relaxed);
    return out;
}

enum adapt_outcome adapt_verified(struct adapt *a, const struct adapt_candidate *c,
                                  enum adapt_verdict v)
{
    if (v == ADAPT_FAILED) {
        hot_settle(a->hot, c->hash, false, now_ms());
        atomic_fetch_add_explicit(&a->verify_failed, 1, memory_order_relaxed);
        return ADAPT_GIVEN_BACK;
    }
    hot_settle(a->hot, c->hash, true, now_ms());
    if (v == ADAPT_PRESENT) {
        atomic_fetch_add_explicit(&a->verified_present, 1, memory_order_relaxed);
        return ADAPT_SETTLED;
    }
    atomic_fetch_add_explicit(&a->verified_absent, 1, memory_order_relaxed);
    return enter(a, c);
}

enum adapt_outcome adapt_enter(struct adapt *a, uint64_t h, const char *key, size_t klen,
                               bool (*held)(void *arg, uint64_t h), void *arg)
{
    if (klen == 0 || klen > VSET_KEY_MAX)
        return ADAPT_GIVEN_BACK;
    struct adapt_candidate c = { .hash = h, .klen = klen };
    memcpy(c.key, key, klen);
    c.generation = atomic_load(&a->generation);
    /* Step 1 as the verifier takes it: the ticket, then the journal. */
    c.ticket = ticket_of(a, h);
    if (held != NULL && held(arg, h)) {
        atomic_fetch_add_explicit(&a->posted, 1, memory_order_relaxed);
        return ADAPT_GIVEN_BACK;
    }
    atomic_fetch_add_explicit(&a->received, 1, memory_order_relaxed);
    /* Not asked about again for a while: the upstream has settled it. */
    hot_settle(a->hot, h, true, now_ms());
    return enter(a, &c);
}

void adapt_forwarded(struct adapt *a, uint64_t h)
{
    hot_settle(a->hot, h, true, now_ms());
    atomic_fetch_add_explicit(&a->forwarded, 1, memory_order_relaxed);
}

size_t adapt_log_read(struct adapt *a, uint64_t *cursor, struct adapt_candidate *out, size_t max)
{
    size_t n = 0;
    /* Nothing entered since: no lock (every stream asks at each of its writes). */
    if (atomic_load(&a->log_next) == *cursor)
        return 0;
    pthread_mutex_lock(&a->writer);
    uint64_t at = *cursor, oldest = a->log_next > ADAPT_LOG ? a->log_next - ADAPT_LOG : 0;
    if (at < oldest || at > a->log_next)
        at = oldest;
    for (; at < a->log_next && n < max; at++) {
        const struct logent *e = &a->log[at % ADAPT_LOG];
        /* Only what the set still holds: a kill (an add of its key) ended the others. */
        if (!vset_has(a->set, e->hash, e->key, e->klen))
            continue;
        out[n] = (struct adapt_candidate){ .hash = e->hash, .klen = e->klen };
        memcpy(out[n].key, e->key, e->klen);
        n++;
    }
    *cursor = at;
    pthread_mutex_unlock(&a->writer);
    return n;
}

bool adapt_resend(struct adapt *a, uint64_t h, const char *key, size_t klen)
{
    if (klen == 0 || klen > VSET_KEY_MAX)
        return false;
    pthread_mutex_lock(&a->writer);
    bool send = vset_has(a->set, h, key, klen) && !in_log(a, h, key, klen);
    if (send) {
        /* Sent as any entry: only while the set holds it when a stream reads it (adapt_log_read). */
        struct adapt_candidate c = { .hash = h, .klen = klen };
        memcpy(c.key, key, klen);
        log_entered(a, &c);
    }
    pthread_mutex_unlock(&a->writer);
    if (send && a->entered != NULL)
        a->entered(a->entered_arg);
    return send;
}

void adapt_reset(struct adapt *a)
{
    pthread_mutex_lock(&a->writer);
    atomic_fetch_add(&a->generation, 1);
    vset_clear(a->set);
    /* After the set is empty: a bit cleared while its entry lived would lose a denial. */
    for (size_t i = 0; i < TAG_WORDS; i++)
        atomic_store_explicit(&a->tags[i], 0, memory_order_relaxed);
    pthread_mutex_unlock(&a->writer);
    /* Keys spelled the old way are worth no lookup. */
    pthread_mutex_lock(&a->qmu);
    a->qlen = 0;
    pthread_mutex_unlock(&a->qmu);
}

unsigned adapt_prune(struct adapt *a, bool (*keep)(void *arg, const char *key, size_t len),
                     void *arg)
{
    pthread_mutex_lock(&a->writer);
    unsigned n = vset_prune(a->set, keep, arg);
    pthread_mutex_unlock(&a->writer);
    return n;
}

void adapt_info(struct adapt *a, struct adapt_info *out)
{
    memset(out, 0, sizeof *out);
    out->entries = vset_count(a->set);
    out->max_entries = a->max_entries;
    pthread_mutex_lock(&a->qmu);
    out->queued = a->qlen;
    pthread_mutex_unlock(&a->qmu);
#define GET(f) out->f = atomic_load_explicit(&a->f, memory_order_relaxed)
    GET(candidates);
    GET(reported);
    GET(dropped);
    GET(verified_absent);
    GET(verified_present);
    GET(verify_failed);
    GET(raced);
    GET(posted);
    GET(evictions);
    GET(invalidations);
    GET(received);
    GET(forwarded);
#undef GET
    for (unsigned i = 0; i < STRIPES; i++)
        out->denied += atomic_load_explicit(&a->denied[i].n, memory_order_relaxed);
}
