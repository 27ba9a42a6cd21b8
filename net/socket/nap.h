/* The callers' sleep (nap.c): one per process, woken by any connection.
 *
 * A caller thread that tests a large transfer sleeps rather than spins
 * (ops.c, rail_ops_test). NCCL's proxy thread drives every send and
 * recv comm of its GPU, so the sleep must end when any of them has work:
 * a control record arriving on any comm's control stream, or a data thread
 * completing any request. One epoll set holds every comm's control streams
 * (edge-triggered: only new arrivals count) and one eventfd that completions
 * kick; a nap waits on that set.
 *
 * Layer: the bottom; it knows no connection, only descriptors. */
#ifndef RAIL_NET_NAP_H
#define RAIL_NET_NAP_H

/* Adds a control stream to the set / takes it out (before it is closed).
 * A stream that cannot be added only makes naps end at their timeout. */
void rail_nap_watch(int fd);
void rail_nap_unwatch(int fd);

/* Ends the naps in progress, and the next nap of a thread that is about to
 * take one (see rail_nap_enter). `always`: kick even if nobody naps now. */
void rail_nap_kick(int always);
/* A request completed: kicks, always when called on a data thread (the
 * caller may have tested the request a moment ago and be on its way to nap
 * on another comm's), else only if somebody naps. */
void rail_nap_kick_completion(void);
/* Called first by every data thread. */
void rail_nap_mark_data_thread(void);

/* A nap is rail_nap_enter() (count this thread as napping, while still
 * holding the lock under which completions kick, so that none is missed),
 * then rail_nap_wait(ns): sleeps up to ns, or until a watched stream gets
 * data or a kick comes. */
void rail_nap_enter(void);
void rail_nap_wait(long ns);

#endif
