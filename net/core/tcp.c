#include "net/core/tcp.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "net/core/ifaces.h"
#include "net/core/liveness.h"
#include "common/log.h"
#include "common/param.h"

int rail_tcp_open(int family) {
  int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  return fd >= 0 ? fd : -errno;
}

static void rail_tcp_opt(int fd, int level, int name, int value, const char *what) {
  if (setsockopt(fd, level, name, &value, sizeof(value)) != 0)
    RAIL_INFO(RAIL_SUBSYS_NET, "setsockopt %s=%d failed: %s; continuing without it", what, value,
              strerror(errno));
}

void rail_tcp_tune(int fd, int family, int kind, int traffic_class) {
  long long bufsz = rail_param_int(RAIL_PARAM_SOCKBUF_BYTES);

  rail_tcp_opt(fd, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY");
  /* Keepalive only; a peer with bytes outstanding is judged by whoever
   * owns the stream calling rail_liveness_check (liveness.h). */
  rail_liveness_tune(fd, (int)rail_param_int(RAIL_PARAM_TIMEOUT_MS));
  if (kind == RAIL_TCP_DATA && bufsz > 0) {
    rail_tcp_opt(fd, SOL_SOCKET, SO_SNDBUF, (int)bufsz, "SO_SNDBUF");
    rail_tcp_opt(fd, SOL_SOCKET, SO_RCVBUF, (int)bufsz, "SO_RCVBUF");
  }
  if (traffic_class >= 0) {
    if (family == AF_INET6)
      rail_tcp_opt(fd, IPPROTO_IPV6, IPV6_TCLASS, traffic_class, "IPV6_TCLASS");
    else
      rail_tcp_opt(fd, IPPROTO_IP, IP_TOS, traffic_class, "IP_TOS");
  }
}

void rail_tcp_limit_unsent(int fd, int bytes) {
  rail_tcp_opt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, bytes, "TCP_NOTSENT_LOWAT");
}

int rail_tcp_set_blocking(int fd, int blocking) {
  int flags = fcntl(fd, F_GETFL);

  if (flags < 0) return -errno;
  flags = blocking ? (flags & ~O_NONBLOCK) : (flags | O_NONBLOCK);
  return fcntl(fd, F_SETFL, flags) == 0 ? 0 : -errno;
}

int rail_tcp_exhausted(int err) {
  return err == -EMFILE || err == -ENFILE || err == -ENOBUFS || err == -ENOMEM;
}

const char *rail_tcp_limit_str(int err, char *buf, size_t len) {
  struct rlimit rl;

  if (err == -EMFILE && getrlimit(RLIMIT_NOFILE, &rl) == 0)
    snprintf(buf, len, "RLIMIT_NOFILE %llu (hard %llu)", (unsigned long long)rl.rlim_cur,
             (unsigned long long)rl.rlim_max);
  else if (err == -ENFILE)
    snprintf(buf, len, "the system's open files, fs.file-max");
  else if (err == -EAGAIN && getrlimit(RLIMIT_NPROC, &rl) == 0)
    snprintf(buf, len, "threads: RLIMIT_NPROC %llu (hard %llu), kernel.threads-max",
             (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max);
  else
    snprintf(buf, len, "socket memory");
  return buf;
}

int rail_tcp_connect_start(int fd, const struct sockaddr_storage *to) {
  if (connect(fd, (const struct sockaddr *)to, rail_ifaces_addr_len(to)) == 0) return 0;
  return errno == EINPROGRESS ? -EINPROGRESS : -errno;
}

int rail_tcp_connect_check(int fd) {
  struct pollfd p = {.fd = fd, .events = POLLOUT};
  int err = 0;
  socklen_t len = sizeof(err);

  if (poll(&p, 1, 0) < 0) return errno == EINTR ? -EINPROGRESS : -errno;
  if ((p.revents & (POLLOUT | POLLERR | POLLHUP)) == 0) return -EINPROGRESS;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return -errno;
  return -err;
}

int rail_tcp_send_all(int fd, struct iovec *iov, int iovcnt) {
  struct msghdr msg;

  while (iovcnt > 0) {
    ssize_t n;

    memset(&msg, 0, sizeof(msg));
    msg.msg_iov = iov;
    msg.msg_iovlen = (size_t)iovcnt;
    n = sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    while (iovcnt > 0 && (size_t)n >= iov->iov_len) {
      n -= (ssize_t)iov->iov_len;
      iov++;
      iovcnt--;
    }
    if (iovcnt > 0) {
      iov->iov_base = (char *)iov->iov_base + n;
      iov->iov_len -= (size_t)n;
    }
  }
  return 0;
}

int rail_tcp_recv_all(int fd, void *buf, size_t len) {
  char *p = buf;

  while (len > 0) {
    ssize_t n = recv(fd, p, len, MSG_WAITALL);
    if (n == 0) return -EPIPE;
    if (n < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

int rail_tcp_discard(int fd, size_t len) {
  char sink[16384];

  while (len > 0) {
    size_t want = len < sizeof(sink) ? len : sizeof(sink);
    int rc = rail_tcp_recv_all(fd, sink, want);
    if (rc != 0) return rc;
    len -= want;
  }
  return 0;
}

unsigned rail_tcp_rtt_us(int fd) {
  struct tcp_info ti;
  socklen_t len = sizeof(ti);

  memset(&ti, 0, sizeof(ti));
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) return 0;
  return ti.tcpi_rtt;
}
