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

/* A verbs connection on device 0 to itself, for one test. */
static int pair_open(struct fx_net_pair *p) {
  if (fx_net_up() != 0) return -1;
  fx_log_reset();
  if (fx_net_pair_open(p) != 0) return -1;
  return strstr(fx_log, " over verbs: ") != NULL ? 0 : -1;
}

/* The scripts of tests/unit/net/groups.h, as unit.net_groups runs them
 * over sockets; the largest message is a verbs device's maxP2pBytes (1
 * GiB; less under TSan). Every one without a WARN. */
TEST(a_send_for_the_next_receive_comes_first) {
  static const size_t sizes[] = {256 << 10, 1000, 0};
  struct gs_script s;
  struct fx_net_pair p;

  CHECK_EQ_INT(pair_open(&p), 0);
  for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
    gs_script_next_receive_first(&s, sizes[z]);
    CHECK_EQ_INT(gs_run_policies(p.sc, p.rc, &s, 30), 0);
  }
  CHECK_EQ_INT(fx_nwarn, 0);
  fx_net_pair_close(&p);
}

TEST(sends_of_two_receives_interleave) {
  struct fx_net_pair p;

  CHECK_EQ_INT(pair_open(&p), 0);
  CHECK_EQ_INT(gs_run_interleaved(p.sc, p.rc), 0);
  CHECK_EQ_INT(fx_nwarn, 0);
  fx_net_pair_close(&p);
}

TEST(random_receives_and_sends) {
  struct fx_net_pair p;

  CHECK_EQ_INT(pair_open(&p), 0);
  CHECK_EQ_INT(gs_run_random(p.sc, p.rc), 0);
  CHECK_EQ_INT(fx_nwarn, 0);
  fx_net_pair_close(&p);
}

/* A message larger than its receive fails that receive and its send (one
 * WARN on each end), and moves no other message: first, in the middle or
 * last among inline-sized ones, for one tag and for three. */
TEST(a_failed_receive_moves_no_later_message) {
  struct fx_net_pair p;

  CHECK_EQ_INT(pair_open(&p), 0);
  CHECK_EQ_INT(gs_run_too_large_among_inline(p.sc, p.rc), 0);
  CHECK_EQ_INT(gs_run_random_too_large(p.sc, p.rc), 0);
  fx_net_pair_close(&p);
}

TEST(the_largest_message_in_a_group) {
  struct rail_net_props props;
  struct gs_script s;
  struct fx_net_pair p;

  CHECK_EQ_INT(pair_open(&p), 0);
  CHECK_EQ_INT(rail_net_get_props(0, &props), 0);
  CHECK_EQ_INT(props.max_p2p_bytes, RAIL_NET_MAX_P2P_BYTES);
  gs_script_largest_in_group(&s, GS_LARGEST(props.max_p2p_bytes));
  CHECK_EQ_INT(gs_run(p.sc, p.rc, &s, GS_AHEAD, 120), 0);
  CHECK_EQ_INT(fx_nwarn, 0);
  fx_net_pair_close(&p);
}

TEST(the_fake_tree_goes) { CHECK_EQ_INT(fx_tree_remove(), 0); }

RAIL_TEST_MAIN(a_send_for_the_next_receive_comes_first, sends_of_two_receives_interleave,
               random_receives_and_sends, a_failed_receive_moves_no_later_message,
               the_largest_message_in_a_group, the_fake_tree_goes)
