/* The striping policy (stripe.h). */
#include "net/core/stripe.h"

#include <string.h>

void rail_stripe_init(struct rail_stripe *s, const int *speed_mbps, int nrails) {
  memset(s, 0, sizeof(*s));
  if (nrails > RAIL_STRIPE_MAX_RAILS) nrails = RAIL_STRIPE_MAX_RAILS;
  if (nrails < 0) nrails = 0;
  s->nrails = nrails;
  for (int r = 0; r < nrails; r++)
    s->weight[r] = speed_mbps != NULL && speed_mbps[r] > 0 ? speed_mbps[r] : 1;
}

void rail_stripe_set_weight(struct rail_stripe *s, int rail, double w) {
  if (rail >= 0 && rail < s->nrails && w > 0) s->weight[rail] = w;
}

int rail_stripe_pick(struct rail_stripe *s, const int *up) {
  double total = 0;
  int best = -1;

  for (int r = 0; r < s->nrails; r++) {
    if (!up[r]) continue;
    s->rr[r] += s->weight[r];
    total += s->weight[r];
    if (best < 0 || s->rr[r] > s->rr[best]) best = r;
  }
  if (best >= 0) s->rr[best] -= total;
  return best;
}

int rail_stripe_split(const struct rail_stripe *s, const int *up, size_t size, size_t unit,
                      size_t *parts) {
  double total = 0;
  size_t units, given = 0, acc = 0;
  size_t count[RAIL_STRIPE_MAX_RAILS];
  double rem[RAIL_STRIPE_MAX_RAILS];
  int last = -1, used = 0;

  if (unit == 0) unit = 1;
  for (int r = 0; r < s->nrails; r++) {
    parts[r] = 0;
    if (!up[r]) continue;
    total += s->weight[r];
    last = r;
  }
  if (last < 0) return 0;
  /* Whole units are apportioned by largest remainder; the tail that is not
   * a whole unit goes to the last usable rail. */
  units = size / unit;
  for (int r = 0; r < s->nrails; r++) {
    double exact;
    count[r] = 0;
    rem[r] = -1;
    if (!up[r]) continue;
    exact = (double)units * s->weight[r] / total;
    count[r] = (size_t)exact;
    rem[r] = exact - (double)count[r];
    given += count[r];
  }
  while (given < units) {
    /* The largest remainder, the lowest rail on a tie; starting from the
     * last usable rail keeps the index in range. */
    int best = last;
    for (int r = s->nrails - 1; r >= 0; r--)
      if (up[r] && rem[r] >= rem[best]) best = r;
    count[best]++;
    rem[best] = -1;
    given++;
  }
  for (int r = 0; r < s->nrails; r++) {
    if (!up[r] || r == last) continue;
    parts[r] = count[r] * unit;
    acc += parts[r];
  }
  parts[last] = size - acc;
  for (int r = 0; r < s->nrails; r++)
    used += parts[r] > 0;
  return used > 0 ? used : 1;
}

int rail_stripe_plan(struct rail_stripe *s, const int *up, size_t size, size_t min_stripe,
                     size_t unit, size_t *parts) {
  int nup = 0;

  for (int r = 0; r < s->nrails; r++) {
    parts[r] = 0;
    nup += up[r] != 0;
  }
  if (nup == 0) return 0;
  if (nup == 1 || size < min_stripe) {
    int r = rail_stripe_pick(s, up);
    parts[r] = size;
    return 1;
  }
  return rail_stripe_split(s, up, size, unit, parts);
}
