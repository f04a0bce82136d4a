/*
 * A replica's hot "maybe" IDs passed up (issue 35, item 4): a replica has
 * no PostgreSQL to verify them against, so its horizon thread reports its
 * candidates to the upstream it follows (POST /absent/NAME, the upstream
 * token), which verifies them as any report (a report only makes a
 * candidate there); the verified entries come back down the stream
 * (table_adapt.h, "On a replica").  At most [adaptive] verify_rate IDs a
 * second per table, as the upstream's verifier looks them up no faster.
 */
#include "upstream.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "table.h"

/* Candidates passed up in one request at most. */
#define FORWARD_BATCH 64

void up_forward(struct up_table *ut, struct httpc *c, unsigned url)
{
    struct upstream *u = ut->u;
    unsigned rate = u->base.cfg->adaptive_verify_rate;
    int64_t now = monoclock_boot_ns();
    if (!table_adaptive(ut->t) || rate == 0 || u->token_err[0] != '\0')
        return;
    /* A token bucket: a second's worth at most, refilled at rate. */
    if (ut->forward_at != 0)
        ut->forward_tokens += (double)(now - ut->forward_at) * 1e-9 * rate;
    ut->forward_at = now;
    if (ut->forward_tokens > rate)
        ut->forward_tokens = rate;
    size_t max = ut->forward_tokens < FORWARD_BATCH ? (size_t)ut->forward_tokens : FORWARD_BATCH;
    if (max == 0 || !table_candidates_waiting(ut->t))
        return;
    struct table_candidate cand[FORWARD_BATCH];
    size_t n = table_candidates(ut->t, cand, max);
    if (n == 0)
        return;
    ut->forward_tokens -= (double)n;
    json_t *ids = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(ids, json_stringn(cand[i].key, cand[i].klen));
    json_t *body = json_pack("{so}", "ids", ids);
    char *text = body != NULL ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    char target[CONFIG_UPSTREAM_URL_MAX + 160], why[512];
    bool ok = false;
    const char *base = u->urls[url];
    size_t blen = strlen(base);
    blen -= blen > 0 && base[blen - 1] == '/';
    if (text != NULL && snprintf(target, sizeof target, "%.*s/absent/%s", (int)blen, base,
                                 table_name(ut->t)) < (int)sizeof target) {
        struct httpc_opts o = up_opts(u, "report", 2000);
        o.head_ms = 2000;
        o.post = text;
        o.post_len = strlen(text);
        ok = httpc_get(c, target, &o, NULL, NULL, NULL, why, sizeof why) == HTTPC_OK;
        if (!ok)
            log_fields(u->base.lg, LOG_LVL_WARN, table_name(ut->t), "upstream_report",
                       "%s: %zu hot \"maybe\" IDs not passed up: %s", table_name(ut->t), n, why);
    }
    free(text);
    /* Passed up: settled here for a while; else counted again from zero. */
    for (size_t i = 0; i < n; i++) {
        if (ok)
            table_forwarded(ut->t, &cand[i]);
        else
            table_verified(ut->t, &cand[i], TABLE_VERIFY_FAILED);
    }
}
