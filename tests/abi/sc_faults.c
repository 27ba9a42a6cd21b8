/* Fault scenarios: a peer that dies (killed_sender, killed_receiver), a
 * network that vanishes (partition), and strangers that connect to the
 * plugin's listening sockets (garbage). The surviving side must get an
 * error, or keep working, never hang. */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/abi/harness.h"
#include "tests/unit/test.h"

/* killed / partitioned peer: mid-transfer of 1 MiB messages, 8 in flight,
 * the peer is SIGKILLed (its kernel closes its sockets), or the network
 * between the two vanishes (the loopback of a private network namespace is
 * taken down: no FIN, no RST, nothing, as when a cable is pulled or a host
 * dies). The surviving side must get an error from isend/irecv/test within
 * NCCL_RAIL_TIMEOUT_MS (set to 2000 unless given) plus a generous margin,
 * never a hang. A stopped (SIGSTOP) peer is not a dead one: its kernel
 * still acknowledges and the plugin's receiver-driven protocol waits for
 * it exactly as for a slow peer, as NCCL does. */
#define PEER_MSG (1 << 20)
#define PEER_SLOTS 8
#define PEER_NMSGS 200000 /* more than can finish before the peer dies */
#define PEER_BEFORE 16    /* messages that complete before the signal */

struct peer_kill {
  struct harness *h;
  int sig;
  int signalled;
  uint64_t t_signal;
  long bound_ms;
};

/* Signals the child once PEER_BEFORE messages completed here, or (receiver
 * is the child) once the child reports them over the bootstrap socket. */
static int signal_peer(struct rail_nd_lane *lane, void *arg) {
  struct peer_kill *k = arg;
  /* Past the bound the verdict is known: stop instead of waiting longer. */
  if (k->signalled)
    return rail_nd_now_ns() - k->t_signal > (uint64_t)k->bound_ms * 1000000 ? -ETIMEDOUT : 0;
  if (!lane->send && lane->completed < PEER_BEFORE) return 0;
  if (lane->send) {
    struct pollfd pfd = {.fd = k->h->oob, .events = POLLIN};
    if (poll(&pfd, 1, 0) != 1) return 0;
  }
  if (k->sig == 0)
    harness_netns_lo(0); /* the partition */
  else
    kill(k->h->peer, k->sig);
  k->signalled = 1;
  k->t_signal = rail_nd_now_ns();
  fprintf(stderr, "signalled peer %d with %d after %d messages\n", (int)k->h->peer, k->sig,
          lane->completed);
  return 0;
}

/* Both sides' endless stream: PEER_NMSGS messages cycling through
 * PEER_SLOTS registered 1 MiB slots. */
struct peer_stream {
  uint8_t *arena;
  struct rail_nd_msg *msgs;
  void *mh;
  struct rail_nd_lane lane;
};

/* 0, or -ENOMEM with whatever was allocated left in s for the caller. */
static int peer_stream_prepare(struct harness *h, void *comm, int send, struct peer_stream *s) {
  memset(s, 0, sizeof(*s));
  s->arena = malloc((size_t)PEER_SLOTS * PEER_MSG);
  s->msgs = calloc(PEER_NMSGS, sizeof(*s->msgs));
  if (s->arena == NULL || s->msgs == NULL) return -ENOMEM;
  harness_pattern_fill(s->arena, (size_t)PEER_SLOTS * PEER_MSG, 5);
  CHECK_EQ_INT(rail_nd_reg_mr(&h->nd, comm, s->arena, (size_t)PEER_SLOTS * PEER_MSG, &s->mh),
               ncclSuccess);
  for (int i = 0; i < PEER_NMSGS; i++) {
    s->msgs[i].data = s->arena + (size_t)(i % PEER_SLOTS) * PEER_MSG;
    s->msgs[i].size = PEER_MSG;
    s->msgs[i].tag = 3;
    s->msgs[i].mhandle = s->mh;
  }
  s->lane.comm = comm;
  s->lane.send = send;
  s->lane.msgs = s->msgs;
  s->lane.nmsgs = PEER_NMSGS;
  s->lane.window = PEER_SLOTS;
  return 0;
}

/* The surviving side's run: it must end in a plugin error, soon enough.
 * sig: the signal for the peer, or 0 to cut the network instead. */
static void survive(struct harness *h, void *comm, int send, int sig) {
  long timeout_ms = harness_env_ms("NCCL_RAIL_TIMEOUT_MS", "2000");
  long bound_ms = timeout_ms + 5000; /* scheduling on a loaded 2-core CI box */
  struct peer_kill k = {h, sig, 0, 0, bound_ms};
  struct peer_stream s;
  int rc;

  if (peer_stream_prepare(h, comm, send, &s) != 0) goto out;
  s.lane.on_pass = signal_peer;
  s.lane.arg = &k;
  rc = rail_nd_run(&h->nd, &s.lane, 1, WAIT_MS + (int)bound_ms);
  CHECK(k.signalled);
  if (k.signalled) {
    long took_ms = (long)((rail_nd_now_ns() - k.t_signal) / 1000000);
    fprintf(stderr, "%s: error %d %ld ms after the signal (bound %ld ms)\n", rail_test_current, rc,
            took_ms, bound_ms);
    CHECK(rc == ncclRemoteError || rc == ncclSystemError);
    CHECK(took_ms <= bound_ms);
  }
  if (sig != SIGKILL) kill(h->peer, SIGKILL); /* it may live on past a partition */
  /* NCCL's abort path: deregister and close; neither may crash or block. */
  if (s.mh != NULL) rail_nd_dereg_mr(&h->nd, comm, s.mh);
  if (send)
    rail_nd_close_send(&h->nd, comm);
  else
    rail_nd_close_recv(&h->nd, comm);
out:
  free(s.arena);
  free(s.msgs);
}

/* The doomed side runs until it dies; returning at all is a failure. */
static void doomed(struct harness *h, void *comm, int send) {
  struct peer_stream s;
  int rc;

  if (peer_stream_prepare(h, comm, send, &s) != 0) return;
  s.lane.nmsgs = send ? PEER_NMSGS : PEER_BEFORE;
  rc = rail_nd_run(&h->nd, &s.lane, 1, WAIT_MS);
  if (!send && rc == ncclSuccess) {
    /* A receiver reports its progress, then keeps receiving until killed. */
    uint8_t ready = 'r';
    rail_nd_oob_send(h->oob, &ready, 1);
    s.lane.nmsgs = PEER_NMSGS;
    rc = rail_nd_run(&h->nd, &s.lane, 1, 4 * WAIT_MS);
  }
  fprintf(stderr, "%s: still alive after the transfer ended with %d\n", rail_test_current, rc);
  rail_test_failed_checks++;
}

/* The parent receives and survives; the child is the doomed sender. */
static void survive_receiving(struct harness *h, int sig) {
  void *comm = NULL;
  if (harness_plugin_up(h) != 0) return;
  CHECK_EQ_INT(rail_nd_pair_listen(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  if (comm != NULL) survive(h, comm, 0, sig);
  harness_plugin_down(h);
}

void harness_partition_parent(struct harness *h) { survive_receiving(h, 0); }

void harness_killed_sender_parent(struct harness *h) { survive_receiving(h, SIGKILL); }

void harness_doomed_sender_child(struct harness *h) {
  void *comm = NULL;
  if (harness_plugin_up(h) != 0) return;
  CHECK_EQ_INT(rail_nd_pair_connect(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  if (comm != NULL) doomed(h, comm, 1);
}

/* Reversed roles: the child listens and receives, the parent sends. */
void harness_killed_receiver_parent(struct harness *h) {
  void *comm = NULL;
  if (harness_plugin_up(h) != 0) return;
  CHECK_EQ_INT(rail_nd_pair_connect(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  if (comm != NULL) survive(h, comm, 1, SIGKILL);
  harness_plugin_down(h);
}

void harness_doomed_receiver_child(struct harness *h) {
  void *comm = NULL;
  if (harness_plugin_up(h) != 0) return;
  CHECK_EQ_INT(rail_nd_pair_listen(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  if (comm != NULL) doomed(h, comm, 0);
}

/* garbage: raw TCP clients hit every socket the plugin listens on (found
 * through /proc, so the handle layout stays the net engine's business):
 * connect-and-close, random bytes, a reset, a zero-filled handle-sized
 * blob, and clients that stay silent. accept must keep answering "not yet"
 * without error, and the real peer must still connect and transfer. */
#define MAX_LISTEN 64
#define GARBAGE_KINDS 7

/* The address a client reaches listening socket ls at: its own, or
 * loopback where it listens on every address. Returns its length. */
static socklen_t garbage_addr(const struct rail_nd_sock *ls, struct sockaddr_storage *ss) {
  memset(ss, 0, sizeof(*ss));
  if (ls->family == AF_INET) {
    struct sockaddr_in *sin = (struct sockaddr_in *)ss;
    sin->sin_family = AF_INET;
    sin->sin_port = htons(ls->local_port);
    memcpy(&sin->sin_addr, ls->local, 4);
    if (sin->sin_addr.s_addr == htonl(INADDR_ANY)) sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return sizeof(*sin);
  }
  struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
  sin6->sin6_family = AF_INET6;
  sin6->sin6_port = htons(ls->local_port);
  memcpy(&sin6->sin6_addr, ls->local, 16);
  if (IN6_IS_ADDR_UNSPECIFIED(&sin6->sin6_addr)) sin6->sin6_addr = in6addr_loopback;
  return sizeof(*sin6);
}

/* What client `kind` does on its connected socket fd with 4 KiB of random
 * junk. Returns fd where the client stays connected, else -1 (closed). */
static int garbage_act(int fd, int kind, uint8_t *junk, size_t junk_len) {
  switch (kind) {
  case 0: /* connect and close */
    close(fd);
    return -1;
  case 1: /* a few random bytes, then close */
    send(fd, junk, 61, MSG_NOSIGNAL | MSG_DONTWAIT);
    close(fd);
    return -1;
  case 2: { /* random bytes, then a reset */
    struct linger lg = {1, 0};
    send(fd, junk, 7, MSG_NOSIGNAL | MSG_DONTWAIT);
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    close(fd);
    return -1;
  }
  case 3: /* 4 KiB of random bytes, left open */
    send(fd, junk, junk_len, MSG_NOSIGNAL | MSG_DONTWAIT);
    return fd;
  case 4: /* a handle-sized block of zeros, left open */
    memset(junk, 0, NCCL_NET_HANDLE_MAXSIZE);
    send(fd, junk, NCCL_NET_HANDLE_MAXSIZE, MSG_NOSIGNAL | MSG_DONTWAIT);
    return fd;
  case 5: /* 0xff bytes: every length or magic field at its largest */
    memset(junk, 0xff, 256);
    send(fd, junk, 256, MSG_NOSIGNAL | MSG_DONTWAIT);
    return fd;
  default: /* silent, left open */
    return fd;
  }
}

/* One client of the given kind on ls: the fd it leaves open, -1 when it
 * closed, or -errno when it could not connect. */
static int open_garbage(const struct rail_nd_sock *ls, int kind, uint64_t *rng) {
  struct sockaddr_storage ss;
  socklen_t len = garbage_addr(ls, &ss);
  uint8_t junk[4096];
  int fd;

  fd = socket(ls->family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  if (connect(fd, (struct sockaddr *)&ss, len) != 0) {
    int err = errno;
    fprintf(stderr, "garbage: connect to port %u: %s\n", ls->local_port, strerror(err));
    close(fd);
    return -err;
  }
  for (size_t i = 0; i < sizeof(junk); i += 8) {
    uint64_t v = harness_splitmix(rng);
    memcpy(junk + i, &v, 8);
  }
  return garbage_act(fd, kind, junk, sizeof(junk));
}

/* Every kind of client on every listening socket of this process, with
 * accept asked after each. Returns how many listening sockets there were;
 * the clients left open are appended to open_fds. */
static int garbage_flood(struct harness *h, void *lc, int *open_fds, int *nopen) {
  struct rail_nd_sock socks[MAX_LISTEN];
  uint64_t rng = h->seed;
  int nlisten;

  /* The harness itself listens nowhere (its bootstrap is a socketpair), so
   * every listening TCP socket of this process is the plugin's. */
  nlisten = rail_nd_tcp_socks(0x0A, socks, MAX_LISTEN);
  for (int a = 0; a < nlisten; a++) {
    for (int kind = 0; kind < GARBAGE_KINDS; kind++) {
      int fd = open_garbage(&socks[a], kind, &rng);
      void *none = NULL;
      if (fd >= 0) open_fds[(*nopen)++] = fd;
      /* accept must turn every one of them away without failing. */
      CHECK_EQ_INT(rail_nd_accept(&h->nd, lc, &none), ncclSuccess);
      CHECK(none == NULL);
    }
  }
  return nlisten;
}

static void garbage_plan(struct harness_plan *p) {
  static const size_t sizes[] = {0, 1, 4096, 100000, 1 << 20, 8 << 20};
  memset(p, 0, sizeof(*p));
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
    harness_plan_add(p, sizes[i], sizes[i], (int)i, 0);
}

void harness_garbage_parent(struct harness *h) {
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {0};
  int open_fds[MAX_LISTEN * GARBAGE_KINDS], nopen = 0, nlisten;
  void *lc = NULL, *comm = NULL;
  struct harness_plan plan;

  if (harness_plugin_up(h) != 0) return;
  CHECK_EQ_INT(rail_nd_listen(&h->nd, 0, handle, &lc), ncclSuccess);
  if (lc == NULL) return;
  nlisten = garbage_flood(h, lc, open_fds, &nopen);
  fprintf(stderr, "garbage: %d listening sockets, %d silent or junk clients left open\n", nlisten,
          nopen);
  CHECK(nlisten >= 1);
  /* Now the real peer, with the junk clients still connected. */
  CHECK_EQ_INT(rail_nd_oob_send(h->oob, handle, sizeof(handle)), 0);
  CHECK_EQ_INT(rail_nd_accept_until(&h->nd, lc, &comm, 10000), ncclSuccess);
  CHECK_EQ_INT(rail_nd_close_listen(&h->nd, lc), ncclSuccess);
  if (comm != NULL) {
    garbage_plan(&plan);
    harness_transfer(h, comm, 0, &plan, h->seed, 4);
    harness_barrier(h, 1);
    CHECK_EQ_INT(rail_nd_close_recv(&h->nd, comm), ncclSuccess);
  }
  for (int i = 0; i < nopen; i++)
    close(open_fds[i]);
  harness_plugin_down(h);
}

void harness_garbage_child(struct harness *h) {
  void *comm = NULL;
  struct harness_plan plan;

  if (harness_plugin_up(h) != 0) return;
  CHECK_EQ_INT(rail_nd_pair_connect(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  if (comm == NULL) return;
  garbage_plan(&plan);
  harness_transfer(h, comm, 1, &plan, h->seed, 4);
  harness_barrier(h, 1);
  CHECK_EQ_INT(rail_nd_close_send(&h->nd, comm), ncclSuccess);
  harness_plugin_down(h);
}
