/* unit.net_groups: grouped receives over loopback sockets, matched as
 * NCCL's IB transport matches them (groups.h): sends for a later receive
 * before the current one's, tags shared across receives, single receives
 * between groups, sizes from 0 bytes to the largest message, receives posted
 * ahead of the sends, one at a time, or behind them. Then the limits of
 * what may wait for a buffer. */
#include <limits.h>

#include "groups.h"
#include "net/socket/sock.h"
#include "net_util.h"
#include "test.h"

/* Each test on a connection of its own (two rails), so that none depends
 * on how another left its connection. */
static struct nt_pair ng_pair;

static void ng_open(void) {
  nt_setup();
  CHECK_EQ_INT(nt_connect(nt_dev2, &ng_pair, 10), 0);
}

/* The scripts of groups.h: a send for the next receive first (grouped_recv's
 * multi-tag test), two receives' sends interleaved (eager_multirecv
 * T17-T22) and three groups of two, random scripts, and the largest message
 * (RAIL_NET_MAX_P2P_BYTES; less under TSan) in a group. */
TEST(a_send_for_the_next_receive_comes_first) {
  static const size_t sizes[] = {256 << 10, 1000, 0};
  struct gs_script s;

  ng_open();
  for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
    gs_script_next_receive_first(&s, sizes[z]);
    CHECK_EQ_INT(gs_run_policies(ng_pair.sc, ng_pair.rc, &s, 30), 0);
  }
  nt_close(&ng_pair);
}

TEST(sends_of_two_receives_interleave) {
  ng_open();
  CHECK_EQ_INT(gs_run_interleaved(ng_pair.sc, ng_pair.rc), 0);
  nt_close(&ng_pair);
}

TEST(random_receives_and_sends) {
  ng_open();
  CHECK_EQ_INT(gs_run_random(ng_pair.sc, ng_pair.rc), 0);
  nt_close(&ng_pair);
}

/* A message larger than its receive fails that receive and its send, and
 * moves no other message: first, in the middle or last among inline ones
 * that fill the control log, for one tag and for three. */
TEST(a_failed_receive_moves_no_later_message) {
  ng_open();
  CHECK_EQ_INT(gs_run_too_large_among_inline(ng_pair.sc, ng_pair.rc), 0);
  CHECK_EQ_INT(gs_run_random_too_large(ng_pair.sc, ng_pair.rc), 0);
  CHECK_EQ_INT(nt_roundtrip(&ng_pair, 100, 2, 10), 0);
  nt_close(&ng_pair);
}

TEST(the_largest_message_in_a_group) {
  struct gs_script s;

  ng_open();
  gs_script_largest_in_group(&s, GS_LARGEST((size_t)RAIL_NET_MAX_P2P_BYTES));
  CHECK_EQ_INT(gs_run(ng_pair.sc, ng_pair.rc, &s, GS_AHEAD, 120), 0);
  nt_close(&ng_pair);
}

/* What may wait for a buffer on a socket connection (pair.h): an inline
 * send behind a large one of its tag is refused until that one has its
 * buffer, while one of another tag goes; at most RAIL_PEND_MAX sends wait,
 * and the next is refused; every one lands once its receive comes. */
TEST(what_waits_for_a_buffer_is_bounded) {
  static uint8_t big[64 << 10], rbig[64 << 10], small[64], rsmall[64];
  void *req = NULL, *large = NULL, *other = NULL, *rr = NULL;
  int size = -1, n;

  ng_open();
  gs_fill(big, sizeof(big), 1);
  gs_fill(small, sizeof(small), 2);
  CHECK_EQ_INT(nt_isend(ng_pair.sc, big, sizeof(big), 3, &large, 5), 0);
  CHECK_EQ_INT(rail_net_isend(ng_pair.sc, small, sizeof(small), 3, NULL, &req), 0);
  CHECK(req == NULL);
  CHECK_EQ_INT(nt_isend(ng_pair.sc, small, sizeof(small), 4, &other, 5), 0);
  CHECK_EQ_INT(nt_irecv(ng_pair.rc, rsmall, sizeof(rsmall), 4, &rr, 5), 0);
  CHECK_EQ_INT(nt_wait(rr, &size, 10), 0);
  CHECK(gs_same(rsmall, sizeof(rsmall), 2));
  CHECK_EQ_INT(nt_wait(other, &size, 10), 0);
  CHECK_EQ_INT(nt_irecv(ng_pair.rc, rbig, sizeof(rbig), 3, &rr, 5), 0);
  CHECK_EQ_INT(nt_wait(rr, &size, 10), 0);
  CHECK_EQ_INT(size, (int)sizeof(big));
  CHECK(gs_same(rbig, sizeof(rbig), 1));
  CHECK_EQ_INT(nt_wait(large, &size, 10), 0);
  /* That one has its buffer: the inline one of tag 3 goes. */
  CHECK_EQ_INT(nt_isend(ng_pair.sc, small, sizeof(small), 3, &req, 5), 0);
  CHECK_EQ_INT(nt_wait(req, &size, 10), 0);
  memset(rsmall, 0, sizeof(rsmall));
  CHECK_EQ_INT(nt_irecv(ng_pair.rc, rsmall, sizeof(rsmall), 3, &rr, 5), 0);
  CHECK_EQ_INT(nt_wait(rr, &size, 10), 0);
  CHECK(gs_same(rsmall, sizeof(rsmall), 2));
  /* Empty messages with no receive, each complete once written: RAIL_PEND_MAX
   * wait for their buffers, and the next is refused. */
  for (n = 0; n <= RAIL_PEND_MAX; n++) {
    req = NULL;
    CHECK_EQ_INT(rail_net_isend(ng_pair.sc, small, 0, 6, NULL, &req), 0);
    if (req == NULL) break;
    CHECK_EQ_INT(nt_wait(req, &size, 10), 0);
  }
  CHECK_EQ_INT(n, RAIL_PEND_MAX);
  for (int i = 0; i < n; i++) {
    CHECK_EQ_INT(nt_irecv(ng_pair.rc, rsmall, sizeof(rsmall), 6, &rr, 5), 0);
    CHECK_EQ_INT(nt_wait(rr, &size, 10), 0);
    CHECK_EQ_INT(size, 0);
  }
  CHECK_EQ_INT(nt_roundtrip(&ng_pair, 100, 2, 10), 0);
  nt_close(&ng_pair);
}

RAIL_TEST_MAIN(a_send_for_the_next_receive_comes_first, sends_of_two_receives_interleave,
               random_receives_and_sends, a_failed_receive_moves_no_later_message,
               the_largest_message_in_a_group, what_waits_for_a_buffer_is_bounded)
