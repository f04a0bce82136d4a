/*
 * The rate model and the sizing (filter_model.c): the geometry an item
 * count and a rate call for, the rate a geometry gives.  Pure arithmetic,
 * allocates nothing, safe from any thread.  Below filter.h, which includes it.
 */
#ifndef BLOOMGUARD_FILTER_MODEL_H
#define BLOOMGUARD_FILTER_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "filter_types.h"      /* struct filter_plan, struct filter_growth, the limits */

/* Whether g is within the bounds in filter_types.h (NaN is not). */
bool filter_growth_valid(const struct filter_growth *g);

/*
 * The plan (struct filter_plan, filter_types.h) for (n, p).
 * filter_plan is what filter_new uses; it allocates nothing, so callers can
 * report the memory a filter would need before building it.  Returns
 * FILTER_OK or an error as for filter_new.
 */
enum filter_error filter_plan(uint64_t expected_items, double fpp, struct filter_plan *out);
/*
 * The same for a layer added by growth, whose rate may be below
 * FILTER_MIN_FPP, down to FILTER_MIN_LAYER_FPP (FILTER_EINVAL_FPP below).
 * For rates filter_plan accepts, both give the same plan.
 */
enum filter_error filter_plan_layer(uint64_t expected_items, double fpp, struct filter_plan *out);
/*
 * filter_plan and filter_plan_layer are plans for FILTER_KIND_BLOCKED; these
 * for any kind (FILTER_EKIND for a kind this build does not know).
 */
enum filter_error filter_plan_kind(enum filter_kind kind, uint64_t expected_items, double fpp,
                                   struct filter_plan *out);
enum filter_error filter_plan_layer_kind(enum filter_kind kind, uint64_t expected_items,
                                         double fpp, struct filter_plan *out);

/*
 * The false-positive rate the model predicts for n keys in nblocks blocks
 * with k probes (exposed for tests).
 */
double filter_model_fpp(double n, uint64_t nblocks, unsigned k);

#endif
