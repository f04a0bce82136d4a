/*
 * Method upstream: the horizon in the stream (h-horizon's).  A stream
 * asked with ?horizon=1 brings its upstream's proof every beat, in the
 * upstream's own monotonic clock (fleetwire.h's HORIZON); an anchor
 * places that clock in ours, so that the horizon thread asks a question
 * only to renew it, every UP_ANCHOR_S, instead of every up_horizon_ms.
 *
 * The argument, beside follow_upstream.c's (which it extends: there a
 * round trip proves a - age).  An anchor (clock, local, remote) says: the
 * upstream process whose clock is named clock read remote on its
 * oscillator (CLOCK_MONOTONIC_RAW) at an event that happened at or after
 * local on ours.  A stream's request goes at local, so every frame of
 * that stream, made after the request arrived, reading its now, anchors
 * so; a horizon question asked at a and answered with now_ns anchors (a,
 * now_ns) the same way.  The two clocks' readings are never compared:
 * only their rates are.  Between the anchor and a later reading H (the
 * upstream's horizon in a HORIZON frame, which the upstream places on its
 * oscillator by widening the horizon's age, measured on its slewed boot
 * clock, by FLEETWIRE_SLEW_PCT), H - remote passed on the upstream's oscillator;
 * on ours at least (H - remote)(1 - r), r = UP_RATE_PPM the bound on how
 * much faster the upstream's may run; so the event "its oscillator read
 * H" happened at or after local + (H - remote)(1 - r) on ours (for an H
 * before remote, (1 + r): the difference shrinks either way), and never
 * after we read the frame.  Its age on our oscillator, widened by
 * FLEETWIRE_SLEW_PCT, is at least its age on our horizon's clock, unless we were
 * suspended since the anchor (our oscillator stopped, the boot clock ran
 * on): up_placed then proves nothing until a question anchors anew.
 * Every row committed before H is in the upstream's filter, and the rest
 * of follow_upstream.c's argument (the history, the epoch, the seq
 * applied) is the same.  Only the anchor's age widens the bound, by r of
 * it: renewed every UP_ANCHOR_S (10 s), a proof gives up 10 ms at most.
 * Not the boot clock for the anchor: NTP slews it (chrony up to 83,333
 * ppm), which over 10 s would be 0.8 s.  A restarted upstream is another
 * process, another clock: its stream's first frame anchors it anew; an
 * answer of a clock the anchor is not of (two processes behind one
 * address) anchors nothing.
 *
 * Here too, the naps of the horizon and run threads (up_nap), which stop
 * cuts short.
 */
#include "upstream.h"

#include <stdio.h>

#define NS_PER_MS INT64_C(1000000)

int64_t up_anchored(const struct up_anchor *an, int64_t remote_t)
{
    int64_t d = remote_t - an->remote;
    return an->local.raw + d - (d < 0 ? -d : d) / (1000000 / UP_RATE_PPM);
}

int64_t up_placed(const struct up_anchor *an, int64_t remote_t, struct up_when now)
{
    int64_t raw = now.raw - an->local.raw, boot = now.boot - an->local.boot;
    if (boot > fleetwire_slew_widened(raw) + NS_PER_MS)
        return -1;                  /* suspended (or slewed past the bound) since the anchor */
    int64_t age = now.raw - up_anchored(an, remote_t);
    if (age < 0)
        age = 0;
    return now.boot - fleetwire_slew_widened(age);
}

/*
 * A round trip's answer renews the anchor of its clock: asked at a,
 * answered by b, it read now_ns in between.  The old anchor placed that
 * reading at or after up_anchored(old, now_ns); later than b, the clocks'
 * rates differ by more than UP_RATE_PPM (a clock stepped in rate, a
 * suspended VM): said once, and the new anchor bounds the error again.
 * An answer of another clock (another process behind the same address)
 * anchors nothing: the stream's own frames anchor its clock.
 */
void up_reanchor(struct up_table *ut, const struct up_answer *ans, struct up_when a,
                 struct up_when b)
{
    if (ans->clock == 0)
        return;
    pthread_mutex_lock(&ut->mu);
    struct up_anchor *an = &ut->anchor;
    bool renew = an->clock == ans->clock && a.raw > an->local.raw;
    bool broke = renew && up_anchored(an, ans->now_ns) > b.raw;
    if (renew) {
        *an = (struct up_anchor){ ans->clock, a, ans->now_ns };
        ut->anchors++;
        ut->rate_breaks += broke;
    }
    pthread_mutex_unlock(&ut->mu);
    if (broke)
        log_fields(ut->u->base.lg, LOG_LVL_WARN, table_name(ut->t), "upstream_clock_rate",
                   "%s: the upstream's clock ran more than %d ppm faster than ours since the "
                   "last anchor; anchored again (a proof in between may have been early)",
                   table_name(ut->t), UP_RATE_PPM);
}

/*
 * Whether the stream's HORIZON frames prove the table often enough that
 * no question is needed now: one came within two beats, the beat is no
 * longer than the question's period, and the anchor that places them is
 * younger than UP_ANCHOR_S (its renewal is a question).
 */
bool up_stream_proves(struct up_table *ut, int64_t now)
{
    const struct config *cfg = ut->u->base.cfg;
    int64_t beat = (int64_t)up_beat_ms(cfg) * NS_PER_MS;
    pthread_mutex_lock(&ut->mu);
    bool yes = up_beat_ms(cfg) <= up_horizon_ms(cfg) && ut->stream_heard != 0
               && now - ut->stream_heard < 2 * beat && ut->anchor.clock != 0
               && now - ut->anchor.local.boot < UP_ANCHOR_S * INT64_C(1000000000);
    pthread_mutex_unlock(&ut->mu);
    return yes;
}

/* ------------------------------------------------------------- the naps -- */

void up_nap(struct upstream *u, unsigned ms)
{
    struct timespec ts = monoclock_after_ms(ms);
    pthread_mutex_lock(&u->nap_mu);
    if (!atomic_load(&u->base.stop))
        pthread_cond_timedwait(&u->nap_cv, &u->nap_mu, &ts);
    pthread_mutex_unlock(&u->nap_mu);
}

/* follow_stop set stop: the naps end (under nap_mu: none checked it before and waits after). */
void up_interrupt(struct follower *f)
{
    struct upstream *u = (struct upstream *)f;
    pthread_mutex_lock(&u->nap_mu);
    pthread_cond_broadcast(&u->nap_cv);
    pthread_mutex_unlock(&u->nap_mu);
}
