/* Two network namespaces joined by a veth pair, for the net tests that need
 * a peer whose packets can be made to vanish (a black-hole route: the link
 * stays up, nothing comes back, no error anywhere). Node a is 10.<net>.0.1
 * on va, node b 10.<net>.0.2 on vb. A socket stays in the namespace it was
 * made in, so a test enters a or b (setns) around the calls that make its
 * sockets. Needs root; callers skip without it. */
#ifndef RAIL_TEST_NETNS_UTIL_H
#define RAIL_TEST_NETNS_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* setns */
#endif
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Runs a shell command; 0 if it exited 0. */
static int nt_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2), unused));
static int nt_sh(const char *fmt, ...) {
  char cmd[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof(cmd), fmt, ap);
  va_end(ap);
  return system(cmd) == 0 ? 0 : -1;
}

struct nt_netns {
  char a[32], b[32]; /* namespace names */
  int net;           /* the second byte of the addresses */
  int self, fa, fb;  /* namespace fds: this process's, a's, b's */
};

/* 0 once both nodes are up and joined; -1 (say why in skip) when this
 * machine cannot make namespaces; other failures are -2. */
static inline int nt_netns_up(struct nt_netns *n, const char *tag, int net, const char **skip) {
  char path[64];

  memset(n, 0, sizeof(*n));
  n->self = n->fa = n->fb = -1;
  n->net = net;
  *skip = NULL;
  if (geteuid() != 0) {
    *skip = "needs root for network namespaces";
    return -1;
  }
  snprintf(n->a, sizeof(n->a), "%s%da", tag, (int)getpid());
  snprintf(n->b, sizeof(n->b), "%s%db", tag, (int)getpid());
  if (nt_sh("ip netns add %s && ip netns add %s", n->a, n->b) != 0) {
    *skip = "cannot create network namespaces (ip netns add failed)";
    return -1;
  }
  if (nt_sh("ip link add va netns %s type veth peer name vb netns %s", n->a, n->b) != 0 ||
      nt_sh("ip -n %s addr add 10.%d.0.1/24 dev va && ip -n %s addr add 10.%d.0.2/24 dev vb", n->a,
            net, n->b, net) != 0 ||
      nt_sh("ip -n %s link set va up && ip -n %s link set vb up", n->a, n->b) != 0)
    return -2;
  usleep(200000); /* operstate follows a moment after `up` */
  n->self = open("/proc/self/ns/net", O_RDONLY);
  snprintf(path, sizeof(path), "/run/netns/%s", n->a);
  n->fa = open(path, O_RDONLY);
  snprintf(path, sizeof(path), "/run/netns/%s", n->b);
  n->fb = open(path, O_RDONLY);
  return n->self >= 0 && n->fa >= 0 && n->fb >= 0 ? 0 : -2;
}

/* Enters node a ('a'), node b ('b') or this process's own namespace (0). */
static inline int nt_netns_enter(const struct nt_netns *n, int node) {
  return setns(node == 'a' ? n->fa : node == 'b' ? n->fb : n->self, CLONE_NEWNET);
}

/* Both nodes drop what they send to the other (node 0), or only b (node 'b'). */
static inline int nt_netns_blackhole(const struct nt_netns *n, int node) {
  if (nt_sh("ip -n %s route add blackhole 10.%d.0.1/32", n->b, n->net) != 0) return -1;
  return node == 'b' ? 0 : nt_sh("ip -n %s route add blackhole 10.%d.0.2/32", n->a, n->net);
}

static inline void nt_netns_down(struct nt_netns *n) {
  if (n->self >= 0) setns(n->self, CLONE_NEWNET);
  if (n->self >= 0) close(n->self);
  if (n->fa >= 0) close(n->fa);
  if (n->fb >= 0) close(n->fb);
  if (n->a[0]) nt_sh("ip netns del %s 2>/dev/null; ip netns del %s 2>/dev/null", n->a, n->b);
  memset(n, 0, sizeof(*n));
}

#endif
