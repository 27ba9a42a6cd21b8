/* Chaos scenarios: what a real job does to the plugin, through the ABI.
 *  - stopped_sender / stopped_receiver: the peer is SIGSTOPped for three
 *    times NCCL_RAIL_TIMEOUT_MS in the middle of a transfer of small and
 *    large messages, then SIGCONTed: a stopped process is a slow one, not
 *    a dead one, and the job carries on with every byte intact.
 *  - kill_sender / kill_receiver: the peer is SIGKILLed at a point the seed
 *    picks (seed % 4: while it connects or accepts, mid-transfer, while it
 *    closes, or at a random moment), a few random milliseconds into it:
 *    whatever this side is doing ends within the bound (a completion, or an
 *    error), closing does not block, nothing crashes.
 *  - bad_handles: random handles, real ones cut short, and real ones whose
 *    connect token was forged, given to connect: an error or a comm, never
 *    a crash or a hang, and no socket left behind. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/abi/harness.h"
#include "tests/unit/test.h"

/* ---- the plan both sides run ---------------------------------------------- */

#define CHAOS_MSGS 240
#define CHAOS_WINDOW 32 /* NCCL_NET_MAX_REQUESTS */
#define CHAOS_BEFORE 40 /* messages done before the peer is stopped */

/* Mostly small messages (which travel eagerly: a window of them is more
 * than a stopped receiver's kernel takes in) and some large ones (which
 * wait for their receive), so that both kinds are queued when the peer
 * stops. */
static void chaos_plan(uint64_t seed, struct harness_plan *p) {
  static const size_t sizes[] = {16384, 16384, 16384, 100, 16384, 3 << 20, 16384, 12000};
  uint64_t s = seed;

  memset(p, 0, sizeof(*p));
  for (int i = 0; i < CHAOS_MSGS; i++) {
    size_t size = sizes[harness_splitmix(&s) % (sizeof(sizes) / sizeof(sizes[0]))];
    harness_plan_add(p, size, size, 5, 0);
  }
}

/* ---- stopped peer ---------------------------------------------------------- */

struct chaos_stop {
  struct harness *h;
  long stop_ms;
  int stopped, resumed;
  uint64_t t_stop;
};

/* Stops the peer once CHAOS_BEFORE messages completed here, and resumes it
 * stop_ms later; meanwhile this side keeps polling its requests, which must
 * neither fail nor complete wrongly. */
static int chaos_stop_peer(struct rail_nd_lane *lane, void *arg) {
  struct chaos_stop *st = arg;

  if (!st->stopped && lane->completed >= CHAOS_BEFORE) {
    kill(st->h->peer, SIGSTOP);
    st->stopped = 1;
    st->t_stop = rail_nd_now_ns();
    fprintf(stderr, "%s: peer stopped after %d messages, for %ld ms\n", rail_test_current,
            lane->completed, st->stop_ms);
  } else if (st->stopped && !st->resumed &&
             rail_nd_now_ns() - st->t_stop > (uint64_t)st->stop_ms * 1000000ull) {
    kill(st->h->peer, SIGCONT);
    st->resumed = 1;
    fprintf(stderr, "%s: peer resumed with %d of %d messages done here\n", rail_test_current,
            lane->completed, lane->nmsgs);
  }
  return 0;
}

/* This side's run, the peer stopped in its middle: it must complete. */
static void chaos_run_stopping(struct harness *h, void *comm, int send) {
  long timeout_ms = harness_env_ms("NCCL_RAIL_TIMEOUT_MS", "2000");
  struct chaos_stop st = {h, 3 * timeout_ms, 0, 0, 0};
  struct harness_plan plan;
  struct harness_xfer x;
  int rc;

  chaos_plan(h->seed, &plan);
  if (harness_xfer_prepare(&x, &h->nd, comm, send, &plan, h->seed, CHAOS_WINDOW) == 0) {
    x.lane.on_pass = chaos_stop_peer;
    x.lane.arg = &st;
    rc = rail_nd_run(&h->nd, &x.lane, 1, WAIT_MS + (int)st.stop_ms);
    CHECK_EQ_INT(rc, ncclSuccess);
    CHECK(st.stopped && st.resumed);
    if (rc == ncclSuccess) harness_xfer_check(&x);
  }
  if (!st.resumed) kill(h->peer, SIGCONT);
  harness_xfer_release(&x, comm);
}

/* The peer of a stopped run: an ordinary transfer, which must complete. */
static void chaos_run_plain(struct harness *h, void *comm, int send) {
  struct harness_plan plan;

  chaos_plan(h->seed, &plan);
  CHECK_EQ_INT(harness_transfer(h, comm, send, &plan, h->seed, CHAOS_WINDOW), ncclSuccess);
}

static void chaos_close(struct harness *h, void *comm, int send) {
  CHECK_EQ_INT(send ? rail_nd_close_send(&h->nd, comm) : rail_nd_close_recv(&h->nd, comm),
               ncclSuccess);
}

/* side: 1 listens and receives, 0 connects and sends; stopper: it stops
 * the other side (the parent, which knows the child's pid). */
static void chaos_stopped_side(struct harness *h, int listens, int stopper) {
  void *comm = NULL;

  if (harness_plugin_up(h) != 0) return;
  if (listens)
    CHECK_EQ_INT(rail_nd_pair_listen(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  else
    CHECK_EQ_INT(rail_nd_pair_connect(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  if (comm != NULL) {
    if (stopper)
      chaos_run_stopping(h, comm, !listens);
    else
      chaos_run_plain(h, comm, !listens);
    /* Both ends are done before either closes. */
    harness_barrier(h, 9);
    chaos_close(h, comm, !listens);
  }
  harness_plugin_down(h);
}

void harness_stopped_sender_parent(struct harness *h) { chaos_stopped_side(h, 1, 1); }
void harness_stopped_sender_child(struct harness *h) { chaos_stopped_side(h, 0, 0); }
void harness_stopped_receiver_parent(struct harness *h) { chaos_stopped_side(h, 0, 1); }
void harness_stopped_receiver_child(struct harness *h) { chaos_stopped_side(h, 1, 0); }

/* ---- killed at any point ------------------------------------------------------ */

/* What the doomed child tells the parent over the bootstrap socket as it
 * goes, so that the kill lands where the seed says; 'H' precedes the
 * child's handle when it is the one that listens. */
enum { CHAOS_AT_SETUP = 'S', CHAOS_AT_TRANSFER = 'T', CHAOS_AT_CLOSE = 'X', CHAOS_HANDLE = 'H' };

struct chaos_kill {
  struct harness *h;
  int when;        /* CHAOS_AT_*, or 0: at a random moment */
  uint64_t at_ns;  /* kill time once known; 0: not yet */
  uint64_t delay;  /* ns after the mark */
  uint64_t t_kill; /* 0 until killed */
  long bound_ms;
  int have_handle;
  char handle[NCCL_NET_HANDLE_MAXSIZE];
};

static void chaos_kill_init(struct chaos_kill *k, struct harness *h) {
  static const int points[] = {CHAOS_AT_SETUP, CHAOS_AT_TRANSFER, CHAOS_AT_CLOSE, 0};
  uint64_t s = h->seed;
  long timeout_ms = harness_env_ms("NCCL_RAIL_TIMEOUT_MS", "2000");
  long connect_ms = harness_env_ms("NCCL_RAIL_CONNECT_TIMEOUT_MS", "3000");

  memset(k, 0, sizeof(*k));
  k->h = h;
  /* Seeds 0..3 pick each point in turn (ctest runs them all). */
  k->when = points[h->seed % 4];
  /* Up to 3 ms after the mark; up to 2 s from the start for a random one. */
  k->delay = k->when ? harness_splitmix(&s) % 3000000ull : harness_splitmix(&s) % 2000000000ull;
  if (!k->when) k->at_ns = rail_nd_now_ns() + k->delay;
  /* Scheduling on a loaded 2-core CI box, on top of the plugin's bounds. */
  k->bound_ms = (timeout_ms > connect_ms ? timeout_ms : connect_ms) + 5000;
  fprintf(stderr, "%s: the peer dies %s, %.1f ms after\n", rail_test_current,
          k->when == CHAOS_AT_SETUP      ? "as it sets up"
          : k->when == CHAOS_AT_TRANSFER ? "mid-transfer"
          : k->when == CHAOS_AT_CLOSE    ? "as it closes"
                                         : "at a random moment",
          k->delay / 1e6);
}

/* Reads the child's marks (and its handle), and kills it when its time
 * has come. */
static void chaos_kill_poll(struct chaos_kill *k) {
  struct pollfd pfd = {.fd = k->h->oob, .events = POLLIN};
  uint8_t mark;

  if (k->t_kill != 0) return;
  while (poll(&pfd, 1, 0) == 1 && rail_nd_oob_recv(k->h->oob, &mark, 1, 100) == 0) {
    if (mark == CHAOS_HANDLE)
      k->have_handle = rail_nd_oob_recv(k->h->oob, k->handle, sizeof(k->handle), WAIT_MS) == 0;
    else if (mark == k->when && k->at_ns == 0)
      k->at_ns = rail_nd_now_ns() + k->delay;
  }
  if (k->at_ns != 0 && rail_nd_now_ns() >= k->at_ns) {
    kill(k->h->peer, SIGKILL);
    k->t_kill = rail_nd_now_ns();
  }
}

static int chaos_kill_pass(struct rail_nd_lane *lane, void *arg) {
  struct chaos_kill *k = arg;

  chaos_kill_poll(k);
  /* Past the bound the verdict is known: stop instead of waiting longer. */
  if (k->t_kill != 0 && rail_nd_now_ns() - k->t_kill > (uint64_t)k->bound_ms * 1000000ull)
    return -ETIMEDOUT;
  return 0;
}

/* After the kill, the step under way ended in time. */
static void chaos_check_bound(const struct chaos_kill *k, const char *step, int rc) {
  long took_ms;

  if (k->t_kill == 0) return;
  took_ms = (long)((rail_nd_now_ns() - k->t_kill) / 1000000);
  fprintf(stderr, "%s: %s ended with %d, %ld ms after the kill\n", rail_test_current, step, rc,
          took_ms);
  CHECK(rc != -ETIMEDOUT);
  CHECK(took_ms <= k->bound_ms);
}

/* The parent's set-up while the child may die: a comm, or NULL (after an
 * error in time, or a child that died before it gave its handle). listens:
 * listen and accept, else connect to the child's handle. */
static void *chaos_setup(struct chaos_kill *k, int listens) {
  struct harness *h = k->h;
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {0};
  void *listen_comm = NULL, *comm = NULL;
  uint64_t deadline = rail_nd_now_ns() + (uint64_t)WAIT_MS * 1000000ull;
  int rc = ncclSuccess;

  if (listens) {
    rc = rail_nd_listen(&h->nd, 0, handle, &listen_comm);
    CHECK_EQ_INT(rc, ncclSuccess);
    if (rc == ncclSuccess) rc = rail_nd_oob_send(h->oob, handle, sizeof(handle));
  } else {
    while (!k->have_handle && k->t_kill == 0 && rail_nd_now_ns() < deadline) {
      chaos_kill_poll(k);
      usleep(100);
    }
    if (!k->have_handle) return NULL;
  }
  while (rc == ncclSuccess && comm == NULL && rail_nd_now_ns() < deadline) {
    rc = listens ? rail_nd_accept(&h->nd, listen_comm, &comm)
                 : rail_nd_connect(&h->nd, 0, k->handle, &comm);
    chaos_kill_poll(k);
  }
  if (listen_comm != NULL) rail_nd_close_listen(&h->nd, listen_comm);
  if (comm == NULL) chaos_check_bound(k, listens ? "accept" : "connect", rc ? rc : -ETIMEDOUT);
  /* Without a kill, set-up must work. */
  if (k->t_kill == 0) CHECK(comm != NULL);
  return comm;
}

/* The transfer and close, the child dying somewhere along the way. */
static void chaos_survive(struct chaos_kill *k, void *comm, int send) {
  struct harness *h = k->h;
  struct harness_plan plan;
  struct harness_xfer x;
  uint64_t t0;
  int rc;

  chaos_plan(h->seed, &plan);
  rc = harness_xfer_prepare(&x, &h->nd, comm, send, &plan, h->seed, CHAOS_WINDOW);
  if (rc == 0) {
    x.lane.on_pass = chaos_kill_pass;
    x.lane.arg = k;
    rc = rail_nd_run(&h->nd, &x.lane, 1, WAIT_MS);
    /* Done before the kill: every byte is right; after it: only in time. */
    if (rc == ncclSuccess && k->t_kill == 0) harness_xfer_check(&x);
    chaos_check_bound(k, "the transfer", rc);
  }
  /* NCCL's abort path, or its normal end: neither may block. */
  t0 = rail_nd_now_ns();
  harness_xfer_release(&x, comm);
  if (send)
    rail_nd_close_send(&h->nd, comm);
  else
    rail_nd_close_recv(&h->nd, comm);
  CHECK((rail_nd_now_ns() - t0) / 1000000 <= 5000);
}

/* The parent, the survivor. listens: it listens and receives. */
static void chaos_survivor(struct harness *h, int listens) {
  uint64_t deadline = rail_nd_now_ns() + (uint64_t)WAIT_MS * 1000000ull;
  struct chaos_kill k;
  void *comm;

  /* A connector that died leaves the listener waiting for the connect
   * timeout: keep it short, as for the dead-peer timeout. */
  harness_env_ms("NCCL_RAIL_CONNECT_TIMEOUT_MS", "3000");
  if (harness_plugin_up(h) != 0) return;
  chaos_kill_init(&k, h);
  comm = chaos_setup(&k, listens);
  if (comm != NULL) chaos_survive(&k, comm, !listens);
  /* The kill may come after this side's end (the child closing, or a random
   * moment still ahead): it must come all the same. */
  while (k.t_kill == 0 && rail_nd_now_ns() < deadline) {
    chaos_kill_poll(&k);
    usleep(200);
  }
  CHECK(k.t_kill != 0);
  harness_plugin_down(h);
}

static void chaos_mark(struct harness *h, uint8_t mark) { rail_nd_oob_send(h->oob, &mark, 1); }

/* The doomed child: marks each step, runs the same plan, then waits to be
 * killed (an exit of its own is a failure). listens: it listens and
 * receives, and sends the parent its handle. */
static void chaos_doomed(struct harness *h, int listens) {
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {0};
  void *listen_comm = NULL, *comm = NULL;
  struct harness_plan plan;

  if (harness_plugin_up(h) != 0) return;
  chaos_mark(h, CHAOS_AT_SETUP);
  if (listens) {
    if (rail_nd_listen(&h->nd, 0, handle, &listen_comm) != ncclSuccess) return;
    chaos_mark(h, CHAOS_HANDLE);
    rail_nd_oob_send(h->oob, handle, sizeof(handle));
    rail_nd_accept_until(&h->nd, listen_comm, &comm, WAIT_MS);
    rail_nd_close_listen(&h->nd, listen_comm);
  } else {
    rail_nd_pair_connect(&h->nd, 0, h->oob, &comm, WAIT_MS);
  }
  if (comm != NULL) {
    chaos_mark(h, CHAOS_AT_TRANSFER);
    chaos_plan(h->seed, &plan);
    harness_transfer(h, comm, !listens, &plan, h->seed, CHAOS_WINDOW);
    chaos_mark(h, CHAOS_AT_CLOSE);
    if (listens)
      rail_nd_close_recv(&h->nd, comm);
    else
      rail_nd_close_send(&h->nd, comm);
  }
  for (int i = 0; i < WAIT_MS / 10; i++)
    usleep(10000);
  fprintf(stderr, "%s: never killed\n", rail_test_current);
  rail_test_failed_checks++;
}

void harness_kill_sender_parent(struct harness *h) { chaos_survivor(h, 1); }
void harness_kill_sender_child(struct harness *h) { chaos_doomed(h, 0); }
void harness_kill_receiver_parent(struct harness *h) { chaos_survivor(h, 0); }
void harness_kill_receiver_child(struct harness *h) { chaos_doomed(h, 1); }

/* ---- hostile handles --------------------------------------------------------- */

/* Connects with a handle until a comm, an error, or 3 s: any of them is
 * fine, a crash or a hang is not. A comm is closed at once. */
static void chaos_try_handle(struct harness *h, void *handle) {
  uint64_t t0 = rail_nd_now_ns();
  void *comm = NULL;
  int rc = ncclSuccess;

  while (rc == ncclSuccess && comm == NULL && rail_nd_now_ns() - t0 < 3000000000ull)
    rc = rail_nd_connect(&h->nd, 0, handle, &comm);
  if (comm != NULL) CHECK_EQ_INT(rail_nd_close_send(&h->nd, comm), ncclSuccess);
  CHECK(rail_nd_now_ns() - t0 < 5000000000ull);
}

void harness_bad_handles_parent(struct harness *h) {
  char good[NCCL_NET_HANDLE_MAXSIZE] = {0}, bad[NCCL_NET_HANDLE_MAXSIZE];
  struct rail_nd_sock before[64], after[64];
  void *listen_comm = NULL;
  uint64_t s = h->seed;
  int nbefore, nafter;

  setenv("NCCL_RAIL_CONNECT_TIMEOUT_MS", "300", 1);
  if (harness_plugin_up(h) != 0) return;
  nbefore = rail_nd_tcp_socks(0, before, 64);
  CHECK_EQ_INT(rail_nd_listen(&h->nd, 0, good, &listen_comm), ncclSuccess);
  for (int i = 0; i < 100; i++) {
    for (size_t k = 0; k < sizeof(bad); k += 8) {
      uint64_t v = harness_splitmix(&s);
      memcpy(bad + k, &v, 8);
    }
    if (i % 2) memcpy(bad, good, 8); /* a real magic and version */
    chaos_try_handle(h, bad);
  }
  for (size_t cut = 0; cut < sizeof(good); cut += 4) {
    memcpy(bad, good, sizeof(good));
    memset(bad + cut, 0, sizeof(bad) - cut);
    chaos_try_handle(h, bad);
  }
  /* The real handle with its last 16 bytes forged: whatever a peer writes
   * there is only ever looked up, never followed. */
  for (int i = 0; i < 20; i++) {
    uint64_t v = harness_splitmix(&s);
    memcpy(bad, good, sizeof(good));
    memcpy(bad + sizeof(bad) - 16, &v, 8);
    memcpy(bad + sizeof(bad) - 8, &v, 8);
    chaos_try_handle(h, bad);
  }
  CHECK_EQ_INT(rail_nd_close_listen(&h->nd, listen_comm), ncclSuccess);
  /* Every connection tried was closed again. */
  for (int i = 0; i < 50; i++) {
    nafter = rail_nd_tcp_socks(0, after, 64);
    if (nafter <= nbefore) break;
    usleep(20000);
  }
  CHECK(nafter <= nbefore);
  harness_plugin_down(h);
}
