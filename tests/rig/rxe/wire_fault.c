/* wire_fault.c: the fault scenarios of verbs_wire_test. badkey pits the
 * receiver against a hostile raw-verbs sender writing past the posted
 * buffer, until_error streams until the connection fails (the kill-* modes,
 * whose peer the coordinator kills), and portdown takes the second rail's
 * link down between two batches, proving with the port's hw_counters that
 * the traffic moved to the first. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/rig/rxe/wire_test.h"
#include "tests/unit/verbs/rogue.h"

/* badkey, receiver: a buffer registered with guards around it, one receive
 * posted into its middle; the sender (a hostile one, below) then writes the
 * posted range and one byte past it. The first must land, the second must be
 * refused by this NIC, and nothing may land outside the range. */
int run_badkey_receiver(struct rail_verbs_conn *c, int fd) {
  uint8_t *b = aligned_alloc(4096, 65536), st[2];
  struct rail_verbs_mr *mr;
  struct rail_verbs_req *r = NULL;

  if (b == NULL) FAIL("out of memory");
  memset(b, 0xA5, 65536);
  if (rail_verbs_mr_reg(wire_nics, wire_nnics, b, 65536, RAIL_VERBS_MEM_HOST, &mr) != 0)
    FAIL("mr_reg");
  if (xrecv(c, b + 4096, 8192, mr, &r) != 0 || r == NULL) FAIL("irecv");
  if (chan_recv(fd, st, sizeof(st)) != 2) FAIL("no result from the sender");
  printf("[recv] badkey: write inside the buffer: status %d, one byte past it: status %d\n", st[0],
         st[1]);
  if (st[0] != IBV_WC_SUCCESS || st[1] != IBV_WC_REM_ACCESS_ERR)
    FAIL("expected success inside and a remote access error past the posted buffer");
  for (int i = 0; i < 8192; i++)
    if (b[4096 + i] != 0x5A) FAIL("byte %d of the posted buffer was not written", i);
  if (b[4095] != 0xA5 || b[4096 + 8192] != 0xA5) FAIL("a byte outside the posted buffer changed");
  rail_verbs_conn_destroy(c);
  rail_verbs_mr_dereg(mr);
  free(b);
  printf("[recv] badkey: the credit's key covers exactly the posted buffer\n");
  return 0;
}

/* badkey, sender: raw verbs (tests/unit/verbs/rogue.h) on the first send
 * device, speaking the wire by hand. */
int run_badkey_sender(int fd) {
  uint8_t info[RAIL_VERBS_INFO_BYTES], st[2];
  struct rail_wire_verbs_credit cr;
  const struct rail_verbs_port *p = rail_verbs_nic_port(wire_nics[0]);
  struct rogue g;
  size_t n;
  char ready = 'R';

  if (rogue_open(&g, rail_verbs_api_get(), p->dev, p->gid_index) != 0 ||
      rogue_info(&g, info, sizeof(info), &n) != 0)
    FAIL("rogue sender set-up");
  chan_send(fd, info, (uint32_t)n);
  n = chan_recv(fd, info, sizeof(info));
  if (rogue_join(&g, info, n) != 0) FAIL("rogue sender connect");
  chan_send(fd, &ready, 1);
  if (rogue_credit(&g, 1, NULL, NULL, &cr) != 0) FAIL("no credit from the receiver");
  st[0] = (uint8_t)rogue_post(&g, IBV_WR_RDMA_WRITE, cr.e[0].addr, cr.e[0].rkey[0],
                              (uint32_t)cr.e[0].size, 0);
  st[1] = (uint8_t)rogue_post(&g, IBV_WR_RDMA_WRITE, cr.e[0].addr + cr.e[0].size, cr.e[0].rkey[0],
                              1, 0);
  chan_send(fd, st, 2);
  rogue_close(&g);
  return 0;
}

/* Streams 1 MiB messages until the connection fails and returns the error;
 * tells the coordinator over status_fd once traffic flows. */
int run_until_error(struct rail_verbs_conn *c, int is_sender, int status_fd) {
  uint8_t *buf = aligned_alloc(4096, 1 << 20);
  struct rail_verbs_req *reqs[MAX_INFLIGHT] = {0};
  struct rail_verbs_mr *mr;
  double t0 = now_s();
  int ndone = 0, said = 0;

  if (rail_verbs_mr_reg(wire_nics, wire_nnics, buf, 1 << 20, RAIL_VERBS_MEM_HOST, &mr) != 0)
    FAIL("mr_reg");
  for (;;) {
    for (int s = 0; s < 8; s++) {
      size_t got;
      int done = 0, rc = 0;

      if (reqs[s] == NULL)
        rc =
            is_sender ? xsend(c, buf, 1 << 20, mr, &reqs[s]) : xrecv(c, buf, 1 << 20, mr, &reqs[s]);
      if (rc == 0 && reqs[s] != NULL) rc = rail_verbs_req_test(reqs[s], &done, &got);
      if (rc != 0) {
        printf("[%s] failed after %d messages: %s (%d)\n", wire_role, ndone, strerror(-rc), rc);
        /* The QPs go first: only then may the buffer be unregistered. */
        rail_verbs_conn_destroy(c);
        rail_verbs_mr_dereg(mr);
        free(buf);
        return rc;
      }
      if (done) {
        reqs[s] = NULL;
        if (++ndone == 4 && !said) {
          char b = 'S';
          said = 1;
          if (write(status_fd, &b, 1) != 1) FAIL("status pipe");
          /* kill-idle-receiver: stop posting, so the sender ends up waiting
           * for credits with nothing in flight when the kill comes. */
          if (!is_sender && strcmp(wire_opt.mode, "kill-idle-receiver") == 0) {
            sleep(60);
            FAIL("not killed");
          }
        }
      }
    }
    if (now_s() - t0 > 60) FAIL("no error within 60 s");
  }
}

static long counter(const char *dev, const char *name) {
  char path[256], buf[64];
  FILE *f;
  long v = -1;

  snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/hw_counters/%s", dev, name);
  f = fopen(path, "r");
  if (f == NULL) return -1;
  if (fgets(buf, sizeof(buf), f) != NULL) v = atol(buf);
  fclose(f);
  return v;
}

static int port_state_is(const char *dev, const char *word) {
  char path[256], buf[64] = "";
  FILE *f;

  snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/state", dev);
  f = fopen(path, "r");
  if (f == NULL) return 0;
  if (fgets(buf, sizeof(buf), f) == NULL) buf[0] = '\0';
  fclose(f);
  return strstr(buf, word) != NULL;
}

/* portdown: batch, take rail 1's link down, batch again. The receiver drives
 * the link change and tells the sender over the side channel. */
int run_portdown(struct rail_verbs_conn *c, int is_sender, int fd) {
  const struct rail_verbs_port *p1 = rail_verbs_nic_port(wire_nics[1]);
  long before, after;
  char b = 'D';

  if (wire_nnics < 2) FAIL("portdown needs two rails");
  before = counter(p1->dev, "sent_pkts");
  if (run_sizes(c, is_sender, 36) != 0) return 1;
  after = counter(p1->dev, "sent_pkts");
  printf("[%s] rail %s sent_pkts during the striped batch: %ld\n", wire_role, p1->dev,
         after - before);
  if (is_sender && before >= 0 && after - before <= 0)
    FAIL("rail %s carried nothing while striping", p1->dev);
  if (!is_sender) {
    char cmd[160];
    double deadline = now_s() + 10;
    snprintf(cmd, sizeof(cmd), "ip link set dev %s down", p1->netdev);
    if (system(cmd) != 0) FAIL("%s", cmd);
    while (!port_state_is(p1->dev, "DOWN"))
      if (now_s() > deadline) FAIL("%s never went DOWN", p1->dev);
    chan_send(fd, &b, 1);
  } else if (chan_recv(fd, &b, 1) != 1 || b != 'D') {
    FAIL("no link-down notice");
  }
  usleep(50000); /* lets the async event queue the PORT_ERR */
  before = counter(p1->dev, "sent_pkts");
  if (run_sizes(c, is_sender, 36) != 0) return 1;
  after = counter(p1->dev, "sent_pkts");
  printf("[%s] rail %s sent_pkts after it went down: %ld\n", wire_role, p1->dev, after - before);
  if (after - before > 0) FAIL("rail %s still carried traffic", p1->dev);
  {
    char want[192];
    snprintf(want, sizeof(want), "port %s:%d (netdev %s) went down", p1->dev, p1->port, p1->netdev);
    if (strstr(wire_warns, want) == NULL) FAIL("no WARN naming the port (\"%s\")", want);
  }
  if (!is_sender) {
    char cmd[160];
    snprintf(cmd, sizeof(cmd), "ip link set dev %s up", p1->netdev);
    if (system(cmd) != 0) FAIL("%s", cmd);
  }
  printf("[%s] portdown: traffic moved to the remaining rail\n", wire_role);
  return 0;
}
