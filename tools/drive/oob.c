/* Out-of-band TCP between two nccl-rail processes (oob.h). */
#define _GNU_SOURCE
#include "tools/drive/oob.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A non-blocking connect finished within timeout_ms: 0 or -errno. */
static int oob_connect_wait(int fd, const struct sockaddr *sa, socklen_t len, int timeout_ms) {
  struct pollfd p = {.fd = fd, .events = POLLOUT};
  int err = 0, flags = fcntl(fd, F_GETFL);
  socklen_t elen = sizeof(err);

  fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  if (connect(fd, sa, len) != 0) {
    if (errno != EINPROGRESS) return -errno;
    int n = poll(&p, 1, timeout_ms);
    if (n == 0) return -ETIMEDOUT;
    if (n < 0) return -errno;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0) return -errno;
    if (err != 0) return -err;
  }
  fcntl(fd, F_SETFL, flags);
  return 0;
}

static int oob_bind_src(int fd, const struct sockaddr_storage *src, const char *dev) {
  if (dev != NULL && setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, dev, (socklen_t)strlen(dev)) != 0)
    return -errno;
  if (src != NULL) {
    struct sockaddr_storage s = *src;
    socklen_t len =
        s.ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
    if (s.ss_family == AF_INET)
      ((struct sockaddr_in *)&s)->sin_port = 0;
    else
      ((struct sockaddr_in6 *)&s)->sin6_port = 0;
    if (bind(fd, (struct sockaddr *)&s, len) != 0) return -errno;
  }
  return 0;
}

int rail_oob_connect(const char *who, const char *host, int port,
                     const struct sockaddr_storage *src, const char *dev, int timeout_ms,
                     int quiet) {
  struct addrinfo hints = {0}, *res = NULL;
  char service[16];
  int fd, rc, one = 1;

  hints.ai_socktype = SOCK_STREAM;
  if (src != NULL) hints.ai_family = src->ss_family;
  snprintf(service, sizeof(service), "%d", port);
  rc = getaddrinfo(host, service, &hints, &res);
  if (rc != 0) {
    if (!quiet) fprintf(stderr, "%s: %s: %s\n", who, host, gai_strerror(rc));
    return -EHOSTUNREACH;
  }
  fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    rc = -errno;
    goto free_res;
  }
  rc = oob_bind_src(fd, src, dev);
  if (rc == 0) rc = oob_connect_wait(fd, res->ai_addr, res->ai_addrlen, timeout_ms);
  if (rc != 0) {
    if (!quiet) fprintf(stderr, "%s: connect to %s:%d: %s\n", who, host, port, strerror(-rc));
    close(fd);
    goto free_res;
  }
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  rc = fd;
free_res:
  freeaddrinfo(res);
  return rc;
}

int rail_oob_listen(const char *who, const char *host, int port, int *port_out) {
  struct addrinfo hints = {0}, *res = NULL;
  struct sockaddr_storage ss;
  socklen_t len = sizeof(ss);
  char service[16];
  int fd, rc, one = 1;

  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  hints.ai_family = host ? AF_UNSPEC : AF_INET6; /* [::] also takes IPv4 */
  snprintf(service, sizeof(service), "%d", port);
  rc = getaddrinfo(host, service, &hints, &res);
  if (rc != 0 && host == NULL) {
    hints.ai_family = AF_INET; /* IPv6 disabled in this kernel */
    rc = getaddrinfo(host, service, &hints, &res);
  }
  if (rc != 0) {
    fprintf(stderr, "%s: listen address %s: %s\n", who, host ? host : "*", gai_strerror(rc));
    return -EINVAL;
  }
  fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    rc = -errno;
    goto free_res;
  }
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 128) != 0 ||
      getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
    rc = -errno;
    fprintf(stderr, "%s: listen on %s:%d: %s\n", who, host ? host : "*", port, strerror(errno));
    close(fd);
    goto free_res;
  }
  *port_out = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                            : ((struct sockaddr_in6 *)&ss)->sin6_port);
  rc = fd;
free_res:
  freeaddrinfo(res);
  return rc;
}

int rail_oob_accept(int lfd, int nodelay, int timeout_ms) {
  struct pollfd p = {.fd = lfd, .events = POLLIN};
  int one = 1, fd, n;

  if (timeout_ms >= 0) {
    n = poll(&p, 1, timeout_ms);
    if (n == 0) return -ETIMEDOUT;
    if (n < 0) return -errno;
  }
  fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
  if (fd < 0) return -errno;
  if (nodelay) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

int rail_oob_split_hostport(const char *s, char *host, size_t hostlen, int *port,
                            int default_port) {
  const char *colon = strrchr(s, ':');
  const char *close_br = strchr(s, ']');
  size_t len;
  char *end = NULL;
  long p;

  /* A bare IPv6 address has colons but no brackets: it is all host. */
  if (colon == NULL || (s[0] != '[' && strchr(s, ':') != colon) ||
      (close_br != NULL && colon < close_br)) {
    if (default_port <= 0) return -EINVAL;
    len = strlen(s);
    if (s[0] == '[' && len >= 2 && s[len - 1] == ']') {
      s++;
      len -= 2;
    }
    if (len == 0 || len >= hostlen) return -EINVAL;
    memcpy(host, s, len);
    host[len] = '\0';
    *port = default_port;
    return 0;
  }
  len = (size_t)(colon - s);
  if (s[0] == '[' && len >= 2 && s[len - 1] == ']') {
    s++;
    len -= 2;
  }
  if (len == 0 || len >= hostlen) return -EINVAL;
  p = strtol(colon + 1, &end, 10);
  if (colon[1] == '\0' || *end != '\0' || p <= 0 || p >= 65536) return -EINVAL;
  memcpy(host, s, len);
  host[len] = '\0';
  *port = (int)p;
  return 0;
}

int rail_oob_read_handle_file(const char *who, const char *path, char *out, size_t len,
                              int timeout_ms) {
  for (int waited_ms = 0; waited_ms < timeout_ms; waited_ms += 100) {
    FILE *f = fopen(path, "r");
    if (f != NULL) {
      char *ok = fgets(out, (int)len, f);
      fclose(f);
      if (ok != NULL) {
        out[strcspn(out, "\r\n")] = '\0';
        if (out[0] != '\0') return 0;
      }
    }
    usleep(100000);
  }
  fprintf(stderr, "%s: no peer address in %s after %d s\n", who, path, timeout_ms / 1000);
  return -ETIMEDOUT;
}

int rail_oob_write_handle_file(const char *who, const char *path, const char *line) {
  char tmp[PATH_MAX];
  FILE *f;

  snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
  f = fopen(tmp, "w");
  if (f == NULL || fprintf(f, "%s\n", line) < 0 || fclose(f) != 0 || rename(tmp, path) != 0) {
    fprintf(stderr, "%s: writing %s: %s\n", who, path, strerror(errno));
    return -EIO;
  }
  return 0;
}
