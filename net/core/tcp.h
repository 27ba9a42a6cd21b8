/* TCP plumbing shared by connection setup and the streams: socket options,
 * non-blocking connect, and whole-buffer send/recv for the blocking data
 * streams. 0 or -errno everywhere; an orderly close by the peer reads as
 * -EPIPE so callers can tell it from a reset (-ECONNRESET) or a dead path
 * (-ETIMEDOUT, -EHOSTUNREACH...). */
#ifndef RAIL_NET_CORE_TCP_H
#define RAIL_NET_CORE_TCP_H

#include <stddef.h>
#include <sys/socket.h>
#include <sys/uio.h>

enum rail_tcp_kind {
  RAIL_TCP_CONTROL = 0, /* non-blocking, progressed by the caller */
  RAIL_TCP_DATA = 1,    /* blocking, one thread each */
};

/* A TCP socket of `family`, close-on-exec and non-blocking. fd or -errno. */
int rail_tcp_open(int family);

/* Options every stream gets: TCP_NODELAY; keepalive from
 * NCCL_RAIL_TIMEOUT_MS (rail_liveness_tune: no TCP_USER_TIMEOUT, which
 * would kill a live receiver's closed window); SO_SNDBUF/SO_RCVBUF only
 * when NCCL_RAIL_SOCKBUF_BYTES > 0 (Linux auto-tuning is usually better);
 * IP_TOS / IPV6_TCLASS when traffic_class >= 0. Failures of optional
 * settings are logged at INFO and ignored. */
void rail_tcp_tune(int fd, int family, int kind, int traffic_class);

/* Bounds how much unsent data a data stream may hold in its socket buffer,
 * so that a thread pulling chunks only gets more when its path drains; this
 * is what makes a slow rail take fewer chunks. */
void rail_tcp_limit_unsent(int fd, int bytes);

int rail_tcp_set_blocking(int fd, int blocking);

/* Whether err (-errno) says this process or host is out of a resource a
 * socket needs (EMFILE, ENFILE, ENOBUFS, ENOMEM): waiting does not bring it
 * back, so setup fails at once rather than at its timeout. */
int rail_tcp_exhausted(int err);
/* The limit err ran into, for a WARN: "RLIMIT_NOFILE 64 (hard 4096)" for
 * EMFILE, "fs.file-max" for ENFILE, RLIMIT_NPROC for EAGAIN (a thread
 * that could not be made), "socket memory" otherwise. */
const char *rail_tcp_limit_str(int err, char *buf, size_t len);

/* Starts a non-blocking connect: 0 if connected at once, -EINPROGRESS, or
 * the error. */
int rail_tcp_connect_start(int fd, const struct sockaddr_storage *to);
/* 0 once connected, -EINPROGRESS while pending, else the error (never blocks). */
int rail_tcp_connect_check(int fd);

/* The kernel's estimate of a connected socket's round trip, in
 * microseconds (TCP_INFO's tcpi_rtt: right after the handshake, the
 * SYN/SYN-ACK's); 0 when it has none. */
unsigned rail_tcp_rtt_us(int fd);

/* Blocking; loops over partial transfers and EINTR. */
int rail_tcp_send_all(int fd, struct iovec *iov, int iovcnt);
int rail_tcp_recv_all(int fd, void *buf, size_t len);
/* Reads and drops len bytes. */
int rail_tcp_discard(int fd, size_t len);

#endif
