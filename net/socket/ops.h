/* NCCL's isend, irecv and test on a socket connection: the top of the
 * transport, what the table (transport.c) hands NCCL's data-path calls to.
 *
 * isend and irecv post a request (req.h) and find its buffer or its
 * messages (pair.h); test() runs the connection's progress (progress.h)
 * and, while a large message is in flight, naps so that the data threads
 * get the cores (nap.h). Each call takes the connection's lock itself and
 * returns with it released.
 *
 * The layers under this one tell it what happened through what they
 * return and through the requests' completion (`done`, req.h); none of
 * them calls in here. */
#ifndef RAIL_NET_SOCKET_OPS_H
#define RAIL_NET_SOCKET_OPS_H

#include <stddef.h>

struct rail_sock;
struct rail_req;

/* net/net.h's isend, irecv (n buffers) and test on a socket connection;
 * *out NULL: not now, call again. */
int rail_ops_isend(struct rail_sock *c, void *data, size_t size, int tag, struct rail_req **out);
int rail_ops_irecv(struct rail_sock *c, int n, void **data, const size_t *sizes, const int *tags,
                   struct rail_req **out);
int rail_ops_test(struct rail_req *r, int *done, int *sizes);

/* test()'s nap policy: -1 none, 0 yield, else ns; *wakeable if a
 * completion or control record of any comm may end it early. */
long rail_ops_nap_ns(size_t bytes, int older_pending, int *wakeable);

#endif
