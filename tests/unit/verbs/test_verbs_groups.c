/* unit.verbs_groups: grouped receives over the verbs transport, through the
 * net interface (net/net.h) in this process over the fake provider, matched
 * as NCCL's IB transport matches them (tests/unit/net/groups.h, the same
 * scripts unit.net_groups runs over sockets): a send for a later receive
 * before the current one's, a single receive among groups (matched by its
 * tag like a group's), sends of two receives interleaved, random scripts,
 * and the largest message. ctest sets the environment as for
 * unit.verbs_transport. */
#define _GNU_SOURCE
#include <limits.h>

#include "../net/groups.h"
#include "common/log.h"
#include "common/param.h"
#include "fake_util.h"

/* Once: the fake tree and the net layer up. */
static int up(void) {
  static int done, rc;
  int ndev = 0;

  if (done) return rc;
  done = 1;
  rail_log_set_logger(fx_logger);
  if (fx_tree() != 0) return rc = -1;
  if (rail_net_init() != 0 || rail_net_devices(&ndev) != 0 || ndev < 1) return rc = -1;
  return rc = 0;
}

struct pair {
  void *sc, *rc;
};

/* A verbs connection on device 0 to itself, for one test. */
static int pair_open(struct pair *p) {
  uint8_t handle[RAIL_NET_HANDLE_BYTES];
  void *lc = NULL;
  double end = fx_now() + 20;

  memset(p, 0, sizeof(*p));
  memset(handle, 0, sizeof(handle));
  if (up() != 0) return -1;
  fx_log_reset();
  if (rail_net_listen(0, handle, &lc) != 0) return -1;
  while ((p->sc == NULL || p->rc == NULL) && fx_now() < end) {
    if (p->sc == NULL && rail_net_connect(0, handle, -1, &p->sc) != 0) break;
    if (p->rc == NULL && rail_net_accept(lc, &p->rc) != 0) break;
  }
  rail_net_close_listen(lc);
  if (strstr(fx_log, " over verbs: ") == NULL) return -1;
  return p->sc != NULL && p->rc != NULL ? 0 : -1;
}

static void pair_close(struct pair *p) {
  if (p->sc != NULL) rail_net_close_send(p->sc);
  if (p->rc != NULL) rail_net_close_recv(p->rc);
}

/* A single receive (tag 8), then a group of eight (tags 0-7); the sends
 * tagged 0, 8, 1, ..., 7: the first belongs to the group, not to the
 * single receive posted before it. */
TEST(a_send_for_the_next_receive_comes_first) {
  static const int tags[8] = {0, 1, 2, 3, 4, 5, 6, 7}, eight = 8;
  static const size_t sizes[] = {256 << 10, 1000, 0};
  struct pair p;

  CHECK_EQ_INT(pair_open(&p), 0);
  for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++)
    for (int policy = GS_AHEAD; policy <= GS_BEHIND; policy++) {
      struct gs_script s = {0};
      gs_add_recv(&s, 1, &eight, 512 << 10);
      gs_add_recv(&s, 8, tags, 512 << 10);
      gs_add_send(&s, 0, sizes[z]);
      gs_add_send(&s, 8, sizes[z] + 1);
      for (int t = 1; t < 8; t++)
        gs_add_send(&s, t, sizes[z] + (size_t)t * 3);
      CHECK_EQ_INT(gs_run(p.sc, p.rc, &s, (enum gs_policy)policy, 30), 0);
    }
  CHECK_EQ_INT(fx_nwarn, 0);
  pair_close(&p);
}

/* Two groups of eight with the same tags, the second one's sends every
 * other one; three groups of two interleaved across all three. */
TEST(sends_of_two_receives_interleave) {
  static const int tags[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  static const int three[6][2] = {{0, 0}, {0, 1}, {1, 0}, {2, 0}, {1, 1}, {2, 1}};
  struct pair p;

  CHECK_EQ_INT(pair_open(&p), 0);
  for (int policy = GS_AHEAD; policy <= GS_BEHIND; policy++) {
    struct gs_script s = {0}, t = {0};
    gs_add_recv(&s, 8, tags, 64 << 10);
    gs_add_recv(&s, 8, tags, 64 << 10);
    for (int i = 0; i < 16; i++)
      gs_add_send(&s, i / 2, i % 2 ? 1024 : 40000);
    CHECK_EQ_INT(gs_run(p.sc, p.rc, &s, (enum gs_policy)policy, 30), 0);
    for (int g = 0; g < 3; g++)
      gs_add_recv(&t, 2, tags, 64 << 10);
    for (int i = 0; i < 6; i++)
      gs_add_send(&t, three[i][1], three[i][0] == 1 ? 50000 : 1024);
    CHECK_EQ_INT(gs_run(p.sc, p.rc, &t, (enum gs_policy)policy, 30), 0);
  }
  CHECK_EQ_INT(fx_nwarn, 0);
  pair_close(&p);
}

/* Random scripts: receives of 1 to 8 buffers, tags from 0 to INT_MAX
 * repeated across receives, sizes from 0 to 3 MiB, sends in any order
 * across tags. */
TEST(random_receives_and_sends) {
  struct pair p;

  CHECK_EQ_INT(pair_open(&p), 0);
  for (unsigned seed = 1; seed <= 24; seed++) {
    struct gs_script s;
    int rc;
    gs_random(&s, seed, 4 + (int)(seed % 5));
    rc = gs_run(p.sc, p.rc, &s, (enum gs_policy)(seed % 3), 60);
    if (rc != 0) fprintf(stderr, "seed %u: %d\n", seed, rc);
    CHECK_EQ_INT(rc, 0);
  }
  CHECK_EQ_INT(fx_nwarn, 0);
  pair_close(&p);
}

/* The largest message a verbs device takes (its maxP2pBytes, 1 GiB;
 * groups.h: less under TSan) in a group with an empty one and a small one
 * of its tag. */
TEST(the_largest_message_in_a_group) {
  static const int tags[3] = {5, 9, 5}, nine = 9;
  struct rail_net_props props;
  struct gs_script s = {0};
  struct pair p;
  size_t largest;

  CHECK_EQ_INT(pair_open(&p), 0);
  CHECK_EQ_INT(rail_net_get_props(0, &props), 0);
  CHECK_EQ_INT(props.max_p2p_bytes, RAIL_NET_MAX_P2P_BYTES);
  largest = GS_LARGEST(props.max_p2p_bytes);
  gs_add_recv(&s, 1, &nine, 4096);
  gs_add_recv(&s, 3, tags, largest);
  gs_add_send(&s, 9, 100);
  gs_add_send(&s, 5, largest);
  gs_add_send(&s, 9, 0);
  gs_add_send(&s, 5, 3000);
  CHECK_EQ_INT(gs_run(p.sc, p.rc, &s, GS_AHEAD, 120), 0);
  CHECK_EQ_INT(fx_nwarn, 0);
  pair_close(&p);
}

TEST(the_fake_tree_goes) { CHECK_EQ_INT(fx_tree_remove(), 0); }

RAIL_TEST_MAIN(a_send_for_the_next_receive_comes_first, sends_of_two_receives_interleave,
               random_receives_and_sends, the_largest_message_in_a_group, the_fake_tree_goes)
