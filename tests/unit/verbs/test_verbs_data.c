/* unit.verbs_data: the verbs data path over the fake provider, both ends in
 * this process: sizes from 0 to 64 MiB on one rail and striped over two,
 * windows of messages in flight, small messages spread over the rails,
 * truncation, zero-byte messages and flush. Every byte and every reported
 * size is checked, and so are the bytes after each receive buffer. */
#include <stdlib.h>

#include "fake_util.h"

#define GUARD 64

struct buf {
  uint8_t *p;
  size_t n;
  struct rail_verbs_mr *mr;
};

static struct buf buf_new(size_t n, int type) {
  struct buf b = {calloc(1, n + GUARD), n, NULL};

  CHECK_EQ_INT(fx_nics_open(), 0);
  CHECK(b.p != NULL);
  if (b.p != NULL) memset(b.p, 0xA5, n + GUARD);
  CHECK_EQ_INT(rail_verbs_mr_reg(fx_nics, 2, b.p, n + GUARD, type, &b.mr), 0);
  return b;
}

static void buf_free(struct buf *b) {
  rail_verbs_mr_dereg(b->mr);
  free(b->p);
}

static int guard_intact(const uint8_t *p) {
  for (int i = 0; i < GUARD; i++)
    if (p[i] != 0xA5) return 0;
  return 1;
}

/* One message of n bytes, receive posted first (or second), checked. */
static void one_message(struct fx_pair *p, size_t n, int recv_first, unsigned seed) {
  struct buf s = buf_new(n, RAIL_VERBS_MEM_HOST), r = buf_new(n + 100, RAIL_VERBS_MEM_HOST);
  struct rail_verbs_req *sq = NULL, *rq = NULL;
  size_t got = 0, sent = 0;
  int done = 0;

  fx_fill(s.p, n, seed);
  if (recv_first) CHECK_EQ_INT(fx_recv(p, r.p, n + 100, r.mr, &rq), 0);
  CHECK_EQ_INT(fx_send(p, s.p, n, s.mr, &sq), 0);
  if (!recv_first) CHECK_EQ_INT(fx_recv(p, r.p, n + 100, r.mr, &rq), 0);
  CHECK(sq != NULL && rq != NULL);
  if (sq == NULL || rq == NULL) return;
  CHECK_EQ_INT(fx_wait(rq, p->s, &got, 30, &done), 0);
  CHECK(done);
  CHECK_EQ_INT(fx_wait(sq, p->r, &sent, 30, &done), 0);
  CHECK(done);
  CHECK_EQ_INT(got, n);
  CHECK_EQ_INT(sent, n);
  CHECK(memcmp(s.p, r.p, n) == 0);
  CHECK(guard_intact(r.p + n + 100));
  CHECK(r.p[n] == 0xA5);
  buf_free(&s);
  buf_free(&r);
}

static const size_t sizes[] = {
    0,         1,      127,           128,     4095,     4096,           65536,
    256 << 10, 300000, (1 << 20) + 5, 4 << 20, 16 << 20, (64 << 20) - 1, 64 << 20};

TEST(sizes_from_0_to_64mib_on_one_rail) {
  struct fx_pair p;

  CHECK_EQ_INT(fx_pair_open(&p, 1, 1, 5000), 0);
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
    one_message(&p, sizes[i], (int)(i & 1), (unsigned)i);
  CHECK_EQ_INT(fx_nwarn, 0);
  fx_pair_close(&p);
}

TEST(sizes_striped_over_two_rails_of_two_qps) {
  struct fakeverbs_stats a, b;
  struct fx_pair p;

  CHECK_EQ_INT(fx_pair_open(&p, 2, 2, 5000), 0);
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
    one_message(&p, sizes[i], (int)(i & 1), (unsigned)i + 100);
  /* A large message is cut in proportion to the rails' speeds (equal here):
   * each rail carries half of it. */
  fx_ctl->stats(&a);
  one_message(&p, 32 << 20, 1, 7);
  fx_ctl->stats(&b);
  CHECK_EQ_INT(b.tx_bytes[0] - a.tx_bytes[0], (16 << 20) + RAIL_WIRE_VERBS_CREDIT_BYTES);
  CHECK_EQ_INT(b.tx_bytes[1] - a.tx_bytes[1], 16 << 20);
  CHECK_EQ_INT(fx_nwarn, 0);
  fx_pair_close(&p);
}

TEST(small_messages_go_whole_and_alternate_over_the_rails) {
  struct fakeverbs_stats a, b;
  struct fx_pair p;

  CHECK_EQ_INT(fx_pair_open(&p, 2, 1, 5000), 0);
  fx_ctl->stats(&a);
  for (int i = 0; i < 100; i++)
    one_message(&p, 1000, i & 1, (unsigned)i);
  fx_ctl->stats(&b);
  /* Equal rails take turns: 50 messages each; the 100 credits all went
   * the receiver's first lane, on rail 0. */
  CHECK_EQ_INT(b.tx_bytes[1] - a.tx_bytes[1], 50 * 1000);
  CHECK_EQ_INT(b.tx_bytes[0] - a.tx_bytes[0], 50 * 1000 + 100 * RAIL_WIRE_VERBS_CREDIT_BYTES);
  fx_pair_close(&p);
}

/* A full window: RAIL_VERBS_FIFO receives posted, then as many sends of
 * random sizes (mostly small), completed in any order. */
TEST(a_full_window_of_random_sizes) {
  enum { N = RAIL_VERBS_FIFO, SLOT = 1 << 20 };
  struct buf s = buf_new((size_t)N * SLOT, RAIL_VERBS_MEM_HOST);
  struct buf r = buf_new((size_t)N * SLOT, RAIL_VERBS_MEM_HOST);
  struct rail_verbs_req *sq[N], *rq[N], *extra = NULL;
  size_t len[N];
  struct fx_pair p;
  uint64_t x = 12345;

  CHECK_EQ_INT(fx_pair_open(&p, 2, 2, 5000), 0);
  for (int i = 0; i < N; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    len[i] = (x >> 33) % 8 == 0 ? (size_t)((x >> 20) % SLOT) : (size_t)((x >> 40) % 9000);
    fx_fill(s.p + (size_t)i * SLOT, len[i], (unsigned)i);
    CHECK_EQ_INT(fx_recv(&p, r.p + (size_t)i * SLOT, SLOT, r.mr, &rq[i]), 0);
    CHECK(rq[i] != NULL);
  }
  /* The FIFO is full: the next receive is refused for now, not failed. */
  CHECK_EQ_INT(fx_recv(&p, r.p, SLOT, r.mr, &extra), 0);
  CHECK(extra == NULL);
  for (int i = 0; i < N; i++) {
    CHECK_EQ_INT(fx_send(&p, s.p + (size_t)i * SLOT, len[i], s.mr, &sq[i]), 0);
    CHECK(sq[i] != NULL);
  }
  for (int i = N - 1; i >= 0; i--) {
    size_t got = 0;
    int done = 0;
    CHECK_EQ_INT(fx_wait(rq[i], p.s, &got, 30, &done), 0);
    CHECK(done);
    CHECK_EQ_INT(got, len[i]);
    CHECK(memcmp(s.p + (size_t)i * SLOT, r.p + (size_t)i * SLOT, len[i]) == 0);
  }
  for (int i = 0; i < N; i++) {
    int done = 0;
    CHECK_EQ_INT(fx_wait(sq[i], p.r, NULL, 30, &done), 0);
    CHECK(done);
  }
  fx_pair_close(&p);
  buf_free(&s);
  buf_free(&r);
}

/* 8 KiB into 4 KiB: both requests fail with -EMSGSIZE and a WARN each,
 * nothing lands in the buffer, and the connection carries the next one. */
TEST(truncation_fails_both_ends_and_the_connection_goes_on) {
  struct buf s = buf_new(8192, RAIL_VERBS_MEM_HOST), r = buf_new(4096, RAIL_VERBS_MEM_HOST);
  struct rail_verbs_req *sq = NULL, *rq = NULL;
  struct fx_pair p;
  int done = 0;

  CHECK_EQ_INT(fx_pair_open(&p, 2, 1, 5000), 0);
  fx_log_reset();
  fx_fill(s.p, 8192, 1);
  CHECK_EQ_INT(fx_recv(&p, r.p, 4096, r.mr, &rq), 0);
  CHECK_EQ_INT(fx_send(&p, s.p, 8192, s.mr, &sq), 0);
  CHECK_EQ_INT(fx_wait(sq, p.r, NULL, 10, &done), -EMSGSIZE);
  CHECK_EQ_INT(fx_wait(rq, p.s, NULL, 10, &done), -EMSGSIZE);
  CHECK_EQ_INT(fx_warns_with("message truncated"), 2);
  CHECK(guard_intact(r.p) && guard_intact(r.p + 4096 - GUARD));
  one_message(&p, 3000, 1, 9);
  fx_pair_close(&p);
  buf_free(&s);
  buf_free(&r);
}

/* A receive into "GPU" memory (the fake's device memory is host memory),
 * then the read-back that makes it visible. */
TEST(flush_after_a_receive_into_device_memory) {
  struct buf s = buf_new(65536, RAIL_VERBS_MEM_HOST), r = buf_new(65536, RAIL_VERBS_MEM_CUDA);
  struct rail_verbs_req *sq = NULL, *rq = NULL, *fq = NULL;
  struct fx_pair p;
  void *data = r.p;
  int size = 65536, done = 0;

  CHECK_EQ_INT(fx_pair_open(&p, 2, 1, 5000), 0);
  fx_fill(s.p, 65536, 3);
  CHECK_EQ_INT(fx_recv(&p, r.p, 65536, r.mr, &rq), 0);
  CHECK_EQ_INT(fx_send(&p, s.p, 65536, s.mr, &sq), 0);
  CHECK_EQ_INT(fx_wait(rq, p.s, NULL, 10, &done), 0);
  CHECK_EQ_INT(fx_wait(sq, p.r, NULL, 10, &done), 0);
  CHECK_EQ_INT(rail_verbs_flush_post(p.r, 1, &data, &size, &r.mr, &fq), 0);
  CHECK(fq != NULL);
  if (fq != NULL) CHECK_EQ_INT(fx_wait(fq, NULL, NULL, 10, &done), 0);
  CHECK(done);
  /* Nothing to flush: an empty receive, or host memory. */
  size = 0;
  fq = NULL;
  CHECK_EQ_INT(rail_verbs_flush_post(p.r, 1, &data, &size, &r.mr, &fq), 0);
  CHECK(fq == NULL);
  size = 65536;
  CHECK_EQ_INT(rail_verbs_flush_post(p.r, 1, &data, &size, &s.mr, &fq), 0);
  CHECK(fq == NULL);
  CHECK_EQ_INT(fx_nwarn, 0);
  fx_pair_close(&p);
  buf_free(&s);
  buf_free(&r);
}

/* A grouped receive: n buffers with tags, completed as one request; each
 * send lands in the buffer whose tag it carries, whatever order the sends
 * come in (NCCL's maxRecvs, 8 as its IB transport). */
TEST(grouped_receives_take_each_send_by_its_tag) {
  enum { N = RAIL_VERBS_MAX_RECVS, SLOT = 1 << 20 };
  static const int order[N] = {5, 2, 7, 0, 3, 6, 1, 4};
  struct buf s = buf_new((size_t)N * SLOT, RAIL_VERBS_MEM_HOST);
  struct buf r = buf_new((size_t)N * SLOT, RAIL_VERBS_MEM_HOST);
  struct rail_verbs_req *sq[N], *rq = NULL, *bad = NULL;
  struct rail_verbs_mr *mrs[N + 1];
  void *data[N + 1];
  size_t cap[N + 1], len[N], got[N];
  int tags[N + 1], done = 0;
  struct fx_pair p;

  CHECK_EQ_INT(fx_pair_open(&p, 2, 2, 5000), 0);
  for (int i = 0; i < N; i++) {
    data[i] = r.p + (size_t)i * SLOT;
    cap[i] = SLOT;
    tags[i] = 100 + i;
    mrs[i] = r.mr;
    len[i] = i == 3 ? 0 : (size_t)(i + 1) * 70001 % SLOT;
    fx_fill(s.p + (size_t)i * SLOT, len[i], (unsigned)i);
  }
  CHECK_EQ_INT(rail_verbs_recv_post(p.r, N + 1, data, cap, tags, mrs, &bad), -EINVAL);
  CHECK_EQ_INT(rail_verbs_recv_post(p.r, N, data, cap, tags, mrs, &rq), 0);
  CHECK(rq != NULL);
  for (int k = 0; k < N; k++) {
    int i = order[k];
    CHECK_EQ_INT(rail_verbs_send_post(p.s, s.p + (size_t)i * SLOT, len[i], 100 + i, s.mr, &sq[k]),
                 0);
  }
  CHECK_EQ_INT(fx_wait(rq, p.s, got, 10, &done), 0);
  CHECK(done);
  for (int i = 0; i < N; i++) {
    CHECK_EQ_INT(got[i], len[i]);
    CHECK(memcmp(s.p + (size_t)i * SLOT, r.p + (size_t)i * SLOT, len[i]) == 0);
  }
  for (int k = 0; k < N; k++) {
    size_t sent = 0;
    CHECK_EQ_INT(fx_wait(sq[k], p.r, &sent, 10, &done), 0);
    CHECK_EQ_INT(sent, len[order[k]]);
  }
  fx_pair_close(&p);
  buf_free(&s);
  buf_free(&r);
}

/* Matching is first come, first served per connection: tags only pick a
 * buffer within the oldest group. Two groups with the same tags take the
 * sends in order; a send whose tag is not in the oldest group waits for a
 * later one, and later sends still fill the oldest. */
TEST(grouped_receives_match_in_order_and_by_tag) {
  struct buf s = buf_new(8 * 4096, RAIL_VERBS_MEM_HOST), r = buf_new(8 * 4096, RAIL_VERBS_MEM_HOST);
  struct rail_verbs_req *sq[5], *rq[3];
  struct rail_verbs_mr *mrs[2] = {r.mr, r.mr};
  static const int stags[5] = {2, 3, 1, 1, 2};
  size_t cap[2] = {4096, 4096}, got[2];
  int t12[2] = {1, 2}, t3[1] = {3}, done = 0;
  struct fx_pair p;
  void *d[2];

  CHECK_EQ_INT(fx_pair_open(&p, 1, 1, 5000), 0);
  for (int i = 0; i < 5; i++)
    memset(s.p + (size_t)i * 4096, 'a' + i, 4096);
  d[0] = r.p, d[1] = r.p + 4096;
  CHECK_EQ_INT(rail_verbs_recv_post(p.r, 2, d, cap, t12, mrs, &rq[0]), 0);
  d[0] = r.p + 2 * 4096;
  CHECK_EQ_INT(rail_verbs_recv_post(p.r, 1, d, cap, t3, mrs, &rq[1]), 0);
  d[0] = r.p + 3 * 4096, d[1] = r.p + 4 * 4096;
  CHECK_EQ_INT(rail_verbs_recv_post(p.r, 2, d, cap, t12, mrs, &rq[2]), 0);
  for (int i = 0; i < 5; i++)
    CHECK_EQ_INT(
        rail_verbs_send_post(p.s, s.p + (size_t)i * 4096, 100 + (size_t)i, stags[i], s.mr, &sq[i]),
        0);
  /* Group 1 {1, 2}: sends 2 (tag 1) and 0 (tag 2); group 2 {3}: send 1;
   * group 3 {1, 2}: sends 3 and 4. */
  CHECK_EQ_INT(fx_wait(rq[0], p.s, got, 10, &done), 0);
  CHECK(got[0] == 102 && r.p[0] == 'c' && got[1] == 100 && r.p[4096] == 'a');
  CHECK_EQ_INT(fx_wait(rq[1], p.s, got, 10, &done), 0);
  CHECK(got[0] == 101 && r.p[2 * 4096] == 'b');
  CHECK_EQ_INT(fx_wait(rq[2], p.s, got, 10, &done), 0);
  CHECK(got[0] == 103 && r.p[3 * 4096] == 'd' && got[1] == 104 && r.p[4 * 4096] == 'e');
  for (int i = 0; i < 5; i++)
    CHECK_EQ_INT(fx_wait(sq[i], p.r, NULL, 10, &done), 0);
  fx_pair_close(&p);
  buf_free(&s);
  buf_free(&r);
}

/* One buffer of a group too small: that send fails, the others go, and the
 * group fails with -EMSGSIZE; the connection goes on. */
TEST(a_grouped_receive_with_a_buffer_too_small_fails_as_one) {
  struct buf s = buf_new(3 * 8192, RAIL_VERBS_MEM_HOST), r = buf_new(3 * 8192, RAIL_VERBS_MEM_HOST);
  struct rail_verbs_mr *mrs[3] = {r.mr, r.mr, r.mr};
  struct rail_verbs_req *sq[3], *rq = NULL;
  size_t cap[3] = {8192, 100, 8192};
  int tags[3] = {0, 1, 2}, done = 0;
  void *d[3] = {r.p, r.p + 8192, r.p + 2 * 8192};
  struct fx_pair p;

  CHECK_EQ_INT(fx_pair_open(&p, 2, 1, 5000), 0);
  CHECK_EQ_INT(rail_verbs_recv_post(p.r, 3, d, cap, tags, mrs, &rq), 0);
  for (int i = 0; i < 3; i++)
    CHECK_EQ_INT(rail_verbs_send_post(p.s, s.p + (size_t)i * 8192, 5000, i, s.mr, &sq[i]), 0);
  CHECK_EQ_INT(fx_wait(rq, p.s, NULL, 10, &done), -EMSGSIZE);
  CHECK_EQ_INT(fx_wait(sq[0], p.r, NULL, 10, &done), 0);
  CHECK_EQ_INT(fx_wait(sq[1], p.r, NULL, 10, &done), -EMSGSIZE);
  CHECK_EQ_INT(fx_wait(sq[2], p.r, NULL, 10, &done), 0);
  CHECK(r.p[8192] == 0xA5 && r.p[8192 + 99] == 0xA5); /* nothing landed in the small one */
  one_message(&p, 3000, 1, 11);
  fx_pair_close(&p);
  buf_free(&s);
  buf_free(&r);
}

/* Both ends must agree on rails and QPs per rail. */
TEST(a_peer_with_other_qps_per_rail_is_refused) {
  struct rail_verbs_conn_cfg a, b;
  struct rail_verbs_conn *s, *r;
  uint8_t info[RAIL_VERBS_INFO_BYTES];
  size_t n;

  CHECK_EQ_INT(fx_nics_open(), 0);
  a = fx_cfg(1, 1, 5000);
  b = fx_cfg(1, 2, 5000);
  CHECK_EQ_INT(rail_verbs_conn_create(&a, 1, &s), 0);
  CHECK_EQ_INT(rail_verbs_conn_create(&b, 0, &r), 0);
  fx_log_reset();
  CHECK_EQ_INT(rail_verbs_conn_info(s, info, sizeof(info), &n), 0);
  CHECK_EQ_INT(rail_verbs_conn_connect(r, info, n), -EPROTO);
  CHECK_EQ_INT(fx_warns_with("NCCL_RAIL_QPS_PER_RAIL"), 1);
  /* A truncated or garbled info is refused, naming the peer. */
  CHECK_EQ_INT(rail_verbs_conn_connect(r, info, n - 1), -EPROTO);
  info[0] ^= 0xff;
  CHECK_EQ_INT(rail_verbs_conn_connect(r, info, n), -EPROTO);
  CHECK_EQ_INT(fx_warns_with("malformed connection info"), 2);
  rail_verbs_conn_destroy(s);
  rail_verbs_conn_destroy(r);
}

RAIL_TEST_MAIN(sizes_from_0_to_64mib_on_one_rail, sizes_striped_over_two_rails_of_two_qps,
               small_messages_go_whole_and_alternate_over_the_rails, a_full_window_of_random_sizes,
               truncation_fails_both_ends_and_the_connection_goes_on,
               flush_after_a_receive_into_device_memory, a_peer_with_other_qps_per_rail_is_refused,
               grouped_receives_take_each_send_by_its_tag,
               grouped_receives_match_in_order_and_by_tag,
               a_grouped_receive_with_a_buffer_too_small_fails_as_one)
