/* The one striping policy of both transports: how a message is spread over
 * a connection's rails.
 *  - A message below the stripe threshold, or with one usable rail, goes
 *    whole to one rail, picked by smooth weighted round-robin: a burst of
 *    small messages then spreads over the rails in proportion to their
 *    weights, so each rail's latency, not their sum, bounds the burst.
 *  - A larger one is cut into one contiguous share per usable rail, in
 *    proportion to the rails' weights, each share a multiple of the
 *    transport's unit except the last, which takes the rest.
 * Weights start at the rails' rated speeds (Mbps; an unknown speed counts
 * as 1) and may follow measured throughput (rail_stripe_set_weight).
 *
 * Plain data, no locks: the owner of the connection serialises calls. */
#ifndef RAIL_NET_CORE_STRIPE_H
#define RAIL_NET_CORE_STRIPE_H

#include <stddef.h>

#define RAIL_STRIPE_MAX_RAILS 8

struct rail_stripe {
  int nrails;
  double weight[RAIL_STRIPE_MAX_RAILS];
  double rr[RAIL_STRIPE_MAX_RAILS]; /* smooth weighted round-robin credit */
};

void rail_stripe_init(struct rail_stripe *s, const int *speed_mbps, int nrails);
/* w > 0; anything else is ignored. */
void rail_stripe_set_weight(struct rail_stripe *s, int rail, double w);

/* The rail that takes the next whole message among those with up[r] != 0;
 * -1 when none is up. */
int rail_stripe_pick(struct rail_stripe *s, const int *up);

/* Bytes of a size-byte message for each rail (parts[r], 0 for rails that
 * are down or get nothing). Shares are multiples of unit (>= 1) except the
 * last usable rail's; a message too small for every rail to get a unit
 * gives the rest to fewer rails. Returns how many rails got bytes; 0 when
 * none is up. */
int rail_stripe_split(const struct rail_stripe *s, const int *up, size_t size, size_t unit,
                      size_t *parts);

/* What a transport calls per message: whole (rail_stripe_pick) when size <
 * min_stripe or only one rail is up, else split. Same result convention as
 * rail_stripe_split. */
int rail_stripe_plan(struct rail_stripe *s, const int *up, size_t size, size_t min_stripe,
                     size_t unit, size_t *parts);

#endif
