/* Teardown scenario, close: every comm closed in every state NCCL can
 * leave it in, each on a fresh connection: listening with no peer;
 * listening while a peer connects but is never accepted; connected and idle
 * (each side first); receives posted and never matched; sends posted and
 * never received; a receiver closing mid-transfer; a sender closing under a
 * pending receive. The peer of a closed comm must see its pending requests
 * fail, not hang.
 *
 * The cases run in order over one plugin instance per process, numbered as
 * in the comments below; each case's close_*_parent and close_*_child meet
 * at the same numbered barriers, so a case that drifts fails there. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "tests/abi/harness.h"
#include "tests/unit/test.h"

#define CLOSE_BIG (8 << 20)

/* Drives one pending request of a peer that closed: it must end (done or an
 * error) within the plugin's timeout plus a margin. */
static int pending_must_end(struct harness *h, void *req, const char *what) {
  size_t got = 0;
  int rc =
      rail_nd_wait(&h->nd, req, &got, (int)harness_env_ms("NCCL_RAIL_TIMEOUT_MS", "2000") + 5000);
  fprintf(stderr, "close: %s ended with %d\n", what, rc);
  CHECK(rc != -ETIMEDOUT);
  return rc;
}

static void *post_until(struct harness *h, void *comm, int send, void *buf, size_t size, void *mh) {
  uint64_t deadline = rail_nd_now_ns() + WAIT_MS * 1000000ull;
  void *req = NULL;
  int rc;
  do {
    rc = send ? rail_nd_isend(&h->nd, comm, buf, size, 1, mh, &req)
              : rail_nd_irecv(&h->nd, comm, buf, size, 1, mh, &req);
  } while (rc == ncclSuccess && req == NULL && rail_nd_now_ns() < deadline);
  CHECK_EQ_INT(rc, ncclSuccess);
  CHECK(req != NULL);
  return rc == ncclSuccess ? req : NULL;
}

/* ---- the parent: listens and receives ------------------------------------ */

static void close_listeners_parent(struct harness *h) {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void *lc = NULL;

  /* 1: listen, nobody comes, close. */
  CHECK_EQ_INT(rail_nd_listen(&h->nd, 0, handle, &lc), ncclSuccess);
  CHECK(lc != NULL);
  if (lc != NULL) CHECK_EQ_INT(rail_nd_close_listen(&h->nd, lc), ncclSuccess);

  /* 2: the peer connects, we never accept, then close the listen comm. */
  lc = NULL;
  CHECK_EQ_INT(rail_nd_listen(&h->nd, 0, handle, &lc), ncclSuccess);
  CHECK_EQ_INT(rail_nd_oob_send(h->oob, handle, sizeof(handle)), 0);
  harness_barrier(h, 2); /* the peer has called connect at least once */
  if (lc != NULL) CHECK_EQ_INT(rail_nd_close_listen(&h->nd, lc), ncclSuccess);
  harness_barrier(h, 3);
}

static void close_idle_parent(struct harness *h) {
  void *comm = NULL;

  /* 3: connected and idle; the receiver closes first. */
  CHECK_EQ_INT(rail_nd_pair_listen(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  if (comm != NULL) CHECK_EQ_INT(rail_nd_close_recv(&h->nd, comm), ncclSuccess);
  harness_barrier(h, 4);

  /* 4: connected and idle; the sender closes first. */
  comm = NULL;
  CHECK_EQ_INT(rail_nd_pair_listen(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  harness_barrier(h, 5);
  if (comm != NULL) CHECK_EQ_INT(rail_nd_close_recv(&h->nd, comm), ncclSuccess);
}

/* buf: 4 * CLOSE_BIG bytes. */
static void close_pending_parent(struct harness *h, uint8_t *buf) {
  void *comm = NULL, *mh = NULL;

  /* 5: receives posted, no sender: close with them pending. */
  CHECK_EQ_INT(rail_nd_pair_listen(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  if (comm != NULL) {
    CHECK_EQ_INT(rail_nd_reg_mr(&h->nd, comm, buf, 4 * (size_t)CLOSE_BIG, &mh), ncclSuccess);
    for (int i = 0; i < 4; i++)
      post_until(h, comm, 0, buf + (size_t)i * CLOSE_BIG, CLOSE_BIG, mh);
    CHECK_EQ_INT(rail_nd_dereg_mr(&h->nd, comm, mh), ncclSuccess);
    CHECK_EQ_INT(rail_nd_close_recv(&h->nd, comm), ncclSuccess);
  }
  harness_barrier(h, 6);

  /* 6: the peer's sends are pending (we post nothing); it closes first,
   * then we close without ever receiving. */
  comm = NULL;
  CHECK_EQ_INT(rail_nd_pair_listen(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  harness_barrier(h, 7);
  if (comm != NULL) CHECK_EQ_INT(rail_nd_close_recv(&h->nd, comm), ncclSuccess);
}

/* 7: mid-transfer, the receiver takes one message of four and closes; the
 * sender's remaining sends must end (done or error), not hang. */
static void close_midtransfer_parent(struct harness *h, uint8_t *buf) {
  void *comm = NULL, *mh = NULL, *req;
  size_t got;

  CHECK_EQ_INT(rail_nd_pair_listen(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  if (comm != NULL) {
    CHECK_EQ_INT(rail_nd_reg_mr(&h->nd, comm, buf, 4 * (size_t)CLOSE_BIG, &mh), ncclSuccess);
    req = post_until(h, comm, 0, buf, CLOSE_BIG, mh);
    got = 0;
    if (req != NULL) CHECK_EQ_INT(rail_nd_wait(&h->nd, req, &got, WAIT_MS), ncclSuccess);
    CHECK_EQ_INT(got, CLOSE_BIG);
    CHECK_EQ_INT(harness_pattern_check(buf, CLOSE_BIG, 77), CLOSE_BIG);
    CHECK_EQ_INT(rail_nd_dereg_mr(&h->nd, comm, mh), ncclSuccess);
    CHECK_EQ_INT(rail_nd_close_recv(&h->nd, comm), ncclSuccess);
  }
  harness_barrier(h, 8);
}

/* 8: a receive pending when the sender closes: it must fail (or
 * complete), within the plugin's timeout. */
static void close_waiting_parent(struct harness *h, uint8_t *buf) {
  void *comm = NULL, *mh = NULL, *req;
  int rc;

  CHECK_EQ_INT(rail_nd_pair_listen(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  if (comm != NULL) {
    CHECK_EQ_INT(rail_nd_reg_mr(&h->nd, comm, buf, CLOSE_BIG, &mh), ncclSuccess);
    req = post_until(h, comm, 0, buf, CLOSE_BIG, mh);
    harness_barrier(h, 9); /* the sender closes now */
    if (req != NULL) {
      rc = pending_must_end(h, req, "a receive after the sender closed");
      CHECK(rc != ncclSuccess);
    }
    CHECK_EQ_INT(rail_nd_dereg_mr(&h->nd, comm, mh), ncclSuccess);
    CHECK_EQ_INT(rail_nd_close_recv(&h->nd, comm), ncclSuccess);
  }
  harness_barrier(h, 10);
}

void harness_close_parent(struct harness *h) {
  uint8_t *buf = malloc(4 * (size_t)CLOSE_BIG);

  if (harness_plugin_up(h) != 0 || buf == NULL) goto out;
  close_listeners_parent(h);
  close_idle_parent(h);
  close_pending_parent(h, buf);
  close_midtransfer_parent(h, buf);
  close_waiting_parent(h, buf);
  harness_plugin_down(h);
out:
  free(buf);
}

/* ---- the child: connects and sends --------------------------------------- */

/* 2: connect to a listener that never accepts and then closes. */
static void close_listeners_child(struct harness *h) {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void *comm = NULL;
  int rc;

  CHECK_EQ_INT(rail_nd_oob_recv(h->oob, handle, sizeof(handle), WAIT_MS), 0);
  rc = rail_nd_connect(&h->nd, 0, handle, &comm);
  CHECK_EQ_INT(rc, ncclSuccess);
  harness_barrier(h, 2);
  harness_barrier(h, 3);
  /* Whatever connect says now (a comm, not yet, or an error), it must say
   * it without blocking, and a comm it gave must close. */
  if (comm == NULL) {
    uint64_t deadline = rail_nd_now_ns() + 2000 * 1000000ull;
    while (rc == ncclSuccess && comm == NULL && rail_nd_now_ns() < deadline)
      rc = rail_nd_connect(&h->nd, 0, handle, &comm);
  }
  fprintf(stderr, "close: connect to a closed listener: rc %d, comm %p\n", rc, comm);
  if (comm != NULL) CHECK_EQ_INT(rail_nd_close_send(&h->nd, comm), ncclSuccess);
}

static void close_idle_child(struct harness *h) {
  void *comm = NULL;

  /* 3: idle, receiver closes first. */
  CHECK_EQ_INT(rail_nd_pair_connect(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  harness_barrier(h, 4);
  if (comm != NULL) CHECK_EQ_INT(rail_nd_close_send(&h->nd, comm), ncclSuccess);

  /* 4: idle, sender closes first. */
  comm = NULL;
  CHECK_EQ_INT(rail_nd_pair_connect(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  if (comm != NULL) CHECK_EQ_INT(rail_nd_close_send(&h->nd, comm), ncclSuccess);
  harness_barrier(h, 5);
}

/* buf: CLOSE_BIG bytes of pattern 77. */
static void close_pending_child(struct harness *h, uint8_t *buf) {
  void *comm = NULL, *mh = NULL, *req[4];
  int rc;

  /* 5: the receiver closes with receives pending; we close idle. */
  CHECK_EQ_INT(rail_nd_pair_connect(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  harness_barrier(h, 6);
  if (comm != NULL) CHECK_EQ_INT(rail_nd_close_send(&h->nd, comm), ncclSuccess);

  /* 6: sends pending that nobody receives: close with them in flight. */
  comm = NULL;
  CHECK_EQ_INT(rail_nd_pair_connect(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  if (comm != NULL) {
    CHECK_EQ_INT(rail_nd_reg_mr(&h->nd, comm, buf, CLOSE_BIG, &mh), ncclSuccess);
    for (int i = 0; i < 4; i++) {
      /* A plugin may refuse more posts until the receiver shows up; one
       * accepted send is enough to make the state. */
      req[i] = NULL;
      rc = rail_nd_isend(&h->nd, comm, buf, CLOSE_BIG, 1, mh, &req[i]);
      CHECK_EQ_INT(rc, ncclSuccess);
    }
    CHECK_EQ_INT(rail_nd_dereg_mr(&h->nd, comm, mh), ncclSuccess);
    CHECK_EQ_INT(rail_nd_close_send(&h->nd, comm), ncclSuccess);
  }
  harness_barrier(h, 7);
}

/* 7: four sends; the receiver takes one and closes. */
static void close_midtransfer_child(struct harness *h, uint8_t *buf) {
  void *comm = NULL, *mh = NULL, *req[4];
  int ended = 0, rc;

  CHECK_EQ_INT(rail_nd_pair_connect(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  if (comm == NULL) {
    harness_barrier(h, 8);
    return;
  }
  CHECK_EQ_INT(rail_nd_reg_mr(&h->nd, comm, buf, CLOSE_BIG, &mh), ncclSuccess);
  for (int i = 0; i < 4; i++)
    req[i] = post_until(h, comm, 1, buf, CLOSE_BIG, mh);
  for (int i = 0; i < 4; i++) {
    if (req[i] == NULL) continue;
    /* After the first error NCCL stops testing the comm; do the same. */
    rc = pending_must_end(h, req[i], "a send to a receiver that closed");
    ended++;
    if (rc != ncclSuccess) break;
  }
  CHECK(ended > 0);
  harness_barrier(h, 8);
  CHECK_EQ_INT(rail_nd_dereg_mr(&h->nd, comm, mh), ncclSuccess);
  CHECK_EQ_INT(rail_nd_close_send(&h->nd, comm), ncclSuccess);
}

/* 8: close while the receiver waits for a message. */
static void close_waiting_child(struct harness *h) {
  void *comm = NULL;

  CHECK_EQ_INT(rail_nd_pair_connect(&h->nd, 0, h->oob, &comm, WAIT_MS), ncclSuccess);
  harness_barrier(h, 9);
  if (comm != NULL) CHECK_EQ_INT(rail_nd_close_send(&h->nd, comm), ncclSuccess);
  harness_barrier(h, 10);
}

void harness_close_child(struct harness *h) {
  uint8_t *buf = malloc(CLOSE_BIG);

  if (harness_plugin_up(h) != 0 || buf == NULL) goto out;
  harness_pattern_fill(buf, CLOSE_BIG, 77);
  close_listeners_child(h);
  close_idle_child(h);
  close_pending_child(h, buf);
  close_midtransfer_child(h, buf);
  close_waiting_child(h);
  harness_plugin_down(h);
out:
  free(buf);
}
