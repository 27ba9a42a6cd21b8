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

/* aws-ofi-nccl's grouped_recv multi_tag_test: a single receive (tag 8) and
 * then a group of eight (tags 0-7), the sends tagged 0, 8, 1, ..., 7: the
 * first send belongs to the second receive. */
TEST(a_send_for_the_next_receive_comes_first) {
  static const size_t sizes[] = {256 << 10, 1000, 0};
  static const int tags[8] = {0, 1, 2, 3, 4, 5, 6, 7}, eight = 8;

  ng_open();
  for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++)
    for (int policy = GS_AHEAD; policy <= GS_BEHIND; policy++) {
      struct gs_script s = {0};
      gs_add_recv(&s, 1, &eight, 512 << 10);
      gs_add_recv(&s, 8, tags, 512 << 10);
      gs_add_send(&s, 0, sizes[z]);
      gs_add_send(&s, 8, sizes[z] + 1);
      for (int t = 1; t < 8; t++)
        gs_add_send(&s, t, sizes[z] + (size_t)t * 3);
      CHECK_EQ_INT(gs_run(ng_pair.sc, ng_pair.rc, &s, (enum gs_policy)policy, 30), 0);
    }
  nt_close(&ng_pair);
}

/* eager_multirecv T17-T22: two groups of eight with the same tags, the
 * second message's sends interleaved with the first's (one early, or every
 * other one), all large, all inline, or half and half; and three groups of
 * two interleaved across all three. */
TEST(sends_of_two_receives_interleave) {
  static const int tags[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  static const int one_early[16][2] = {{0, 0}, {0, 1}, {0, 2}, {0, 3}, {0, 4}, {0, 5},
                                       {0, 6}, {1, 1}, {0, 7}, {1, 0}, {1, 2}, {1, 3},
                                       {1, 4}, {1, 5}, {1, 6}, {1, 7}};
  static const int three[6][2] = {{0, 0}, {0, 1}, {1, 0}, {2, 0}, {1, 1}, {2, 1}};

  ng_open();
  for (int kind = 0; kind < 3; kind++)
    for (int every_other = 0; every_other < 2; every_other++)
      for (int policy = GS_AHEAD; policy <= GS_BEHIND; policy++) {
        struct gs_script s = {0};
        gs_add_recv(&s, 8, tags, 64 << 10);
        gs_add_recv(&s, 8, tags, 64 << 10);
        for (int i = 0; i < 16; i++) {
          int msg = every_other ? i % 2 : one_early[i][0],
              tag = every_other ? i / 2 : one_early[i][1];
          size_t size = kind == 0 ? 16385 + (size_t)msg : kind == 1 ? 1024 : tag < 4 ? 1024 : 40000;
          gs_add_send(&s, tag, size);
        }
        CHECK_EQ_INT(gs_run(ng_pair.sc, ng_pair.rc, &s, (enum gs_policy)policy, 30), 0);
      }
  for (int policy = GS_AHEAD; policy <= GS_BEHIND; policy++) {
    struct gs_script s = {0};
    for (int g = 0; g < 3; g++)
      gs_add_recv(&s, 2, tags, 64 << 10);
    for (int i = 0; i < 6; i++)
      gs_add_send(&s, three[i][1], three[i][0] == 1 ? 50000 : 1024);
    CHECK_EQ_INT(gs_run(ng_pair.sc, ng_pair.rc, &s, (enum gs_policy)policy, 30), 0);
  }
  nt_close(&ng_pair);
}

/* Random scripts: receives of 1 to 8 buffers, tags from 0 to INT_MAX
 * repeated across receives (and within one), sizes from 0 to 3 MiB, sends in
 * any order across tags, receives ahead, one at a time, or behind. */
TEST(random_receives_and_sends) {
  ng_open();
  for (unsigned seed = 1; seed <= 24; seed++) {
    struct gs_script s;
    int rc;
    gs_random(&s, seed, 4 + (int)(seed % 5));
    rc = gs_run(ng_pair.sc, ng_pair.rc, &s, (enum gs_policy)(seed % 3), 60);
    if (rc != 0) fprintf(stderr, "seed %u: %d\n", seed, rc);
    CHECK_EQ_INT(rc, 0);
  }
  nt_close(&ng_pair);
}

/* The largest message (RAIL_NET_MAX_P2P_BYTES; groups.h: less under TSan)
 * in a group with an empty one and an inline one of its tag, after a single
 * receive of that tag. */
TEST(the_largest_message_in_a_group) {
  static const int tags[3] = {5, 9, 5}, nine = 9;
  size_t largest = GS_LARGEST((size_t)RAIL_NET_MAX_P2P_BYTES);
  struct gs_script s = {0};

  ng_open();
  gs_add_recv(&s, 1, &nine, 4096);
  gs_add_recv(&s, 3, tags, largest);
  gs_add_send(&s, 9, 100);
  gs_add_send(&s, 5, largest);
  gs_add_send(&s, 9, 0);
  gs_add_send(&s, 5, 3000);
  CHECK_EQ_INT(gs_run(ng_pair.sc, ng_pair.rc, &s, GS_AHEAD, 120), 0);
  nt_close(&ng_pair);
}

/* What may wait for a buffer on a socket connection (dispatch.h): an inline
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
               random_receives_and_sends, the_largest_message_in_a_group,
               what_waits_for_a_buffer_is_bounded)
