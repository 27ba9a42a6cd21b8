/* unit.verbs_mr: registration over the fake provider. fork() safety comes
 * before any other verbs call; the registration cache stays right when an
 * address is remapped; memory and queue pairs allow only the remote access
 * they need; a credit's keys cover exactly the posted buffer; and a
 * message longer than its buffer is caught. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fake_util.h"
#include "rogue.h"

/* First in this binary: nothing has called the fake yet. */
TEST(fork_init_comes_before_any_other_verbs_call) {
  struct fakeverbs_stats st;

  CHECK_EQ_INT(fx_open(), 0);
  fx_ctl->stats(&st);
  CHECK_EQ_INT(st.fork_init_calls, 1);
  CHECK_EQ_INT(st.calls_before_fork_init, 0);
}

/* A kernel that copies pinned pages at fork (5.13 on) needs none: said at
 * INFO, not called. */
TEST(fork_init_is_left_out_where_the_kernel_needs_none) {
  struct fakeverbs_stats a, b;
  struct rail_verbs_api api;

  CHECK_EQ_INT(fx_open(), 0);
  fx_ctl->stats(&a);
  setenv("FAKEVERBS_FORK", "unneeded", 1);
  fx_log_reset();
  CHECK_EQ_INT(rail_verbs_api_open(FAKEVERBS_LIB, &api), 0);
  unsetenv("FAKEVERBS_FORK");
  fx_ctl->stats(&b);
  CHECK_EQ_INT(b.fork_init_calls, a.fork_init_calls);
  CHECK(strstr(fx_log, "ibv_fork_init not needed") != NULL);
  CHECK_EQ_INT(fx_nwarn, 0);
}

static size_t page(void) { return (size_t)sysconf(_SC_PAGESIZE); }

static void *map_shared(void *at, size_t len) {
  void *m = mmap(at, len, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS | (at != NULL ? MAP_FIXED : 0), -1, 0);
  CHECK(m != MAP_FAILED);
  return m;
}

/* n bytes sent into `data` (registered as mr) and checked there. */
static void receive_into(struct fx_pair *p, void *data, size_t n, struct rail_verbs_mr *mr,
                         unsigned seed) {
  uint8_t *src = malloc(n);
  struct rail_verbs_mr *smr = NULL;
  struct rail_verbs_req *sq = NULL, *rq = NULL;
  int done = 0;

  fx_fill(src, n, seed);
  CHECK_EQ_INT(rail_verbs_mr_reg(fx_nics, 2, src, n, RAIL_VERBS_MEM_HOST, &smr), 0);
  CHECK_EQ_INT(fx_recv(p, data, n, mr, &rq), 0);
  CHECK_EQ_INT(fx_send(p, src, n, smr, &sq), 0);
  CHECK_EQ_INT(fx_wait(rq, p->s, NULL, 10, &done), 0);
  CHECK_EQ_INT(fx_wait(sq, p->r, NULL, 10, &done), 0);
  CHECK(memcmp(src, data, n) == 0);
  rail_verbs_mr_dereg(smr);
  free(src);
}

static long reg_calls(void) {
  struct fakeverbs_stats st;
  fx_ctl->stats(&st);
  return st.reg_mr_calls;
}

/* Releases b (of the page at x), maps other pages at x, registers them and
 * receives into them: the data must be in the new pages. */
static void remap_and_receive(struct fx_pair *p, uint8_t *x, struct rail_verbs_mr *b,
                              unsigned seed) {
  size_t pg = page();
  struct rail_verbs_mr *c;

  rail_verbs_mr_dereg(b);
  CHECK(munmap(x, pg) == 0);
  CHECK(map_shared(x, pg) == x);
  CHECK_EQ_INT(rail_verbs_mr_reg(fx_nics, 2, x, pg, RAIL_VERBS_MEM_HOST, &c), 0);
  receive_into(p, x, pg, c, seed);
  rail_verbs_mr_dereg(c);
}

/* Registered, deregistered, unmapped, other pages mapped at the same address,
 * registered again: the new registration is the one used, also while a
 * registration of a larger range around it is still held (which pins the
 * old pages and must not be reused for the new ones). */
TEST(a_remapped_host_address_gets_its_own_registration) {
  size_t pg = page();
  uint8_t *x = map_shared(NULL, 2 * pg);
  struct rail_verbs_mr *big, *b;
  struct fx_pair p;

  CHECK_EQ_INT(fx_pair_open(&p, 2, 1, 5000), 0);
  CHECK_EQ_INT(rail_verbs_mr_reg(fx_nics, 2, x, 2 * pg, RAIL_VERBS_MEM_HOST, &big), 0);
  CHECK_EQ_INT(rail_verbs_mr_reg(fx_nics, 2, x, pg, RAIL_VERBS_MEM_HOST, &b), 0);
  receive_into(&p, x, pg, b, 1);
  remap_and_receive(&p, x, b, 2);
  rail_verbs_mr_dereg(big);
  /* And with nothing held around it. */
  CHECK_EQ_INT(rail_verbs_mr_reg(fx_nics, 2, x, pg, RAIL_VERBS_MEM_HOST, &b), 0);
  remap_and_receive(&p, x, b, 3);
  fx_pair_close(&p);
  munmap(x, 2 * pg);
}

struct fx_cuda {
  int (*mem_alloc)(unsigned long long *p, size_t size);
  int (*mem_free)(unsigned long long p);
  int (*remap)(void *p);
};

/* The test's libcuda.so.1 (tests/fakeverbs/fakecuda.c), on LD_LIBRARY_PATH. */
static int fx_cuda(struct fx_cuda *cu) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);

  if (h == NULL) return -1;
  *(void **)&cu->mem_alloc = dlsym(h, "cuMemAlloc_v2");
  *(void **)&cu->mem_free = dlsym(h, "cuMemFree_v2");
  *(void **)&cu->remap = dlsym(h, "fakecuda_remap");
  return cu->mem_alloc && cu->mem_free && cu->remap ? 0 : -1;
}

/* GPU memory registered again by another comm shares one registration per
 * NIC; once the allocation under the address changes (CUDA VMM, PyTorch's
 * expandable segments), a registration is new and lands in the new memory;
 * and once any registration of a range is released, no new one shares it. */
TEST(gpu_registrations_are_shared_only_while_the_allocation_is_the_same) {
  struct rail_verbs_mr *a, *b, *c, *d, *e;
  unsigned long long dp = 0;
  struct fx_cuda cu = {NULL, NULL, NULL};
  struct fx_pair p;
  size_t len = 2 * page();
  long n0;

  CHECK_EQ_INT(fx_cuda(&cu), 0);
  CHECK_EQ_INT(cu.mem_alloc(&dp, len), 0);
  CHECK_EQ_INT(fx_pair_open(&p, 2, 1, 5000), 0);
  n0 = reg_calls();
  CHECK_EQ_INT(rail_verbs_mr_reg(fx_nics, 2, (void *)dp, len, RAIL_VERBS_MEM_CUDA, &a), 0);
  CHECK_EQ_INT(rail_verbs_mr_reg(fx_nics, 2, (void *)dp, len, RAIL_VERBS_MEM_CUDA, &b), 0);
  CHECK_EQ_INT(reg_calls() - n0, 2); /* one per NIC, shared by both */
  CHECK_EQ_INT(cu.remap((void *)dp), 0);
  CHECK_EQ_INT(rail_verbs_mr_reg(fx_nics, 2, (void *)dp, len, RAIL_VERBS_MEM_CUDA, &c), 0);
  CHECK_EQ_INT(reg_calls() - n0, 4);
  receive_into(&p, (void *)dp, len, c, 4);
  rail_verbs_mr_dereg(a);
  /* a's range was released: c is no longer shared. */
  n0 = reg_calls();
  CHECK_EQ_INT(rail_verbs_mr_reg(fx_nics, 2, (void *)dp, len, RAIL_VERBS_MEM_CUDA, &d), 0);
  CHECK_EQ_INT(reg_calls() - n0, 2);
  rail_verbs_mr_dereg(b);
  rail_verbs_mr_dereg(c);
  rail_verbs_mr_dereg(d);
  /* A fresh pair shares again. */
  n0 = reg_calls();
  CHECK_EQ_INT(rail_verbs_mr_reg(fx_nics, 2, (void *)dp, len, RAIL_VERBS_MEM_CUDA, &d), 0);
  CHECK_EQ_INT(rail_verbs_mr_reg(fx_nics, 2, (void *)dp, len, RAIL_VERBS_MEM_CUDA, &e), 0);
  CHECK_EQ_INT(reg_calls() - n0, 2);
  rail_verbs_mr_dereg(d);
  rail_verbs_mr_dereg(e);
  fx_pair_close(&p);
  cu.mem_free(dp);
}

/* A plugin receiver on fake0 and the hostile sender connected to it. */
static int rogue_pair(struct rogue *g, struct rail_verbs_conn **r) {
  struct rail_verbs_conn_cfg cfg;
  uint8_t info[RAIL_VERBS_INFO_BYTES];
  size_t n;

  if (fx_nics_open() != 0) return -1;
  cfg = fx_cfg(1, 1, 5000);
  if (rail_verbs_conn_create(&cfg, 0, r) != 0 || rogue_open(g, &fx_api, "fake0", 0) != 0 ||
      rogue_info(g, info, sizeof(info), &n) != 0 || rail_verbs_conn_connect(*r, info, n) != 0 ||
      rail_verbs_conn_info(*r, info, sizeof(info), &n) != 0)
    return -1;
  return rogue_join(g, info, n);
}

static void progress_conn(void *c) { rail_verbs_conn_progress(c); }

#define ARENA (64 << 10)

struct arena {
  uint8_t *p;
  struct rail_verbs_mr *mr;
};

static struct arena arena_new(int type) {
  struct arena a = {malloc(ARENA), NULL};

  memset(a.p, 0xA5, ARENA);
  CHECK_EQ_INT(rail_verbs_mr_reg(fx_nics, 1, a.p, ARENA, type, &a.mr), 0);
  return a;
}

/* Posts one receive of [p, p + n) on r and reads its credit as the sender. */
static struct rail_verbs_req *post_and_read_credit(struct rogue *g, struct rail_verbs_conn *r,
                                                   uint32_t seq, void *p, size_t n,
                                                   struct rail_verbs_mr *mr,
                                                   struct rail_wire_verbs_credit *cr) {
  struct rail_verbs_req *rq = NULL;

  CHECK_EQ_INT(rail_verbs_recv_post(r, 1, &p, &n, NULL, &mr, &rq), 0);
  CHECK(rq != NULL);
  CHECK_EQ_INT(rogue_credit(g, seq, progress_conn, r, cr), 0);
  return rq;
}

/* A credit's key covers exactly the posted buffer, not the registration
 * around it: a write one byte past it is refused by the receiver's NIC, and
 * nothing lands there. */
TEST(a_credits_key_covers_exactly_the_posted_buffer) {
  struct arena a = arena_new(RAIL_VERBS_MEM_HOST);
  struct rail_wire_verbs_credit cr;
  struct rail_verbs_conn *r = NULL;
  uint64_t addr = 0, len = 0;
  int access = 0;
  struct rogue g;

  CHECK_EQ_INT(rogue_pair(&g, &r), 0);
  post_and_read_credit(&g, r, 1, a.p + 4096, 8192, a.mr, &cr);
  CHECK_EQ_INT(cr.n, 1);
  CHECK(cr.e[0].addr == (uintptr_t)a.p + 4096);
  CHECK_EQ_INT(cr.e[0].size, 8192);
  CHECK_EQ_INT(fx_ctl->mr_info(cr.e[0].rkey[0], &addr, &len, &access), 0);
  CHECK(addr == (uintptr_t)a.p + 4096);
  CHECK_EQ_INT(len, 8192);
  CHECK(access & IBV_ACCESS_REMOTE_WRITE);
  CHECK_EQ_INT(rogue_post(&g, IBV_WR_RDMA_WRITE, cr.e[0].addr + 8192, cr.e[0].rkey[0], 1, 0),
               IBV_WC_REM_ACCESS_ERR);
  CHECK_EQ_INT(a.p[4096 + 8192], 0xA5);
  CHECK_EQ_INT(a.p[4095], 0xA5);
  rail_verbs_conn_destroy(r);
  rogue_close(&g);
  rail_verbs_mr_dereg(a.mr);
  free(a.p);
}

/* Nobody may read the receiver's memory: not through a credit's key, not
 * through its data QPs; host registrations allow no remote read at all,
 * GPU ones only for the flush's loopback read. */
TEST(remote_read_only_where_the_flush_needs_it) {
  struct arena h = arena_new(RAIL_VERBS_MEM_HOST), d = arena_new(RAIL_VERBS_MEM_CUDA);
  struct rail_wire_verbs_credit cr;
  struct rail_verbs_conn *r = NULL;
  struct fakeverbs_qp q;
  uint64_t addr = 0, len = 0;
  int access = 0;
  struct fx_pair p;
  struct rogue g;

  CHECK_EQ_INT(rogue_pair(&g, &r), 0);
  post_and_read_credit(&g, r, 1, h.p, 4096, h.mr, &cr);
  CHECK_EQ_INT(rogue_post(&g, IBV_WR_RDMA_READ, cr.e[0].addr, cr.e[0].rkey[0], 16, 0),
               IBV_WC_REM_ACCESS_ERR);
  CHECK_EQ_INT(fx_ctl->mr_info(rail_verbs_mr_on(h.mr, fx_nics[0])->lkey, &addr, &len, &access), 0);
  CHECK_EQ_INT(access & IBV_ACCESS_REMOTE_READ, 0);
  CHECK_EQ_INT(access & IBV_ACCESS_REMOTE_WRITE, 0);
  CHECK_EQ_INT(fx_ctl->mr_info(rail_verbs_mr_on(d.mr, fx_nics[0])->lkey, &addr, &len, &access), 0);
  CHECK(access & IBV_ACCESS_REMOTE_READ);
  CHECK_EQ_INT(access & IBV_ACCESS_REMOTE_WRITE, 0);
  rail_verbs_conn_destroy(r);
  rogue_close(&g);
  /* Both ends' data QPs take remote writes only. */
  CHECK_EQ_INT(fx_pair_open(&p, 2, 2, 5000), 0);
  CHECK_EQ_INT(fx_ctl->qp_info(fx_first_qpn(p.s), &q), 0);
  CHECK_EQ_INT(q.access, IBV_ACCESS_REMOTE_WRITE);
  CHECK_EQ_INT(fx_ctl->qp_info(fx_first_qpn(p.r), &q), 0);
  CHECK_EQ_INT(q.access, IBV_ACCESS_REMOTE_WRITE);
  fx_pair_close(&p);
  rail_verbs_mr_dereg(h.mr);
  rail_verbs_mr_dereg(d.mr);
  free(h.p);
  free(d.p);
}

/* A sender that writes more than the buffer holds (two parts of its whole
 * size): the receive fails with -EMSGSIZE and a WARN naming the peer, and
 * nothing lands past the buffer. */
TEST(a_message_longer_than_its_buffer_fails_the_receive) {
  struct arena a = arena_new(RAIL_VERBS_MEM_HOST);
  struct rail_wire_verbs_credit cr;
  struct rail_verbs_conn *r = NULL;
  struct rail_verbs_req *rq;
  size_t got = 0;
  int done = 0;
  struct rogue g;

  CHECK_EQ_INT(rogue_pair(&g, &r), 0);
  fx_log_reset();
  rq = post_and_read_credit(&g, r, 1, a.p, 4096, a.mr, &cr);
  for (int i = 0; i < 2; i++)
    CHECK_EQ_INT(rogue_post(&g, IBV_WR_RDMA_WRITE_WITH_IMM, cr.e[0].addr, cr.e[0].rkey[0], 4096,
                            rogue_imm(1, 2)),
                 IBV_WC_SUCCESS);
  CHECK_EQ_INT(fx_wait(rq, NULL, &got, 5, &done), -EMSGSIZE);
  CHECK_EQ_INT(fx_warns_with("peer fake-peer"), 1);
  CHECK_EQ_INT(a.p[4096], 0xA5);
  rail_verbs_conn_destroy(r);
  rogue_close(&g);
  rail_verbs_mr_dereg(a.mr);
  free(a.p);
}

/* The fake provider is as strict as hardware about keys (fk_keys.c): a key
 * is index << 8 | an 8-bit variant, a deregistered MR's index is reused
 * after a short quarantine, and a write with the key of a window that was
 * released is refused and recorded (by default it aborts the process; here
 * it is counted) whether its index is still poisoned or already holds
 * another MR, whose bytes it does not touch. */
static void late_write(struct arena *a, int reuse) {
  struct rail_wire_verbs_credit cr;
  struct rail_verbs_conn *r = NULL;
  struct rail_verbs_req *rq;
  struct fakeverbs_stats s0, s1;
  struct arena more[64];
  int nmore = 0;
  uint32_t old, reused = 0;
  uint64_t addr = 0, len = 0;
  int access = 0, done = 0;
  size_t got = 0;
  struct rogue g;

  CHECK_EQ_INT(rogue_pair(&g, &r), 0);
  rq = post_and_read_credit(&g, r, 1, a->p, 4096, a->mr, &cr);
  old = cr.e[0].rkey[0];
  CHECK_EQ_INT(rogue_post(&g, IBV_WR_RDMA_WRITE_WITH_IMM, cr.e[0].addr, old, 4096, rogue_imm(1, 1)),
               IBV_WC_SUCCESS);
  CHECK_EQ_INT(fx_wait(rq, NULL, &got, 5, &done), 0);
  /* The receive is done and its buffer released: the window goes too. */
  rail_verbs_mr_dereg(a->mr);
  a->mr = NULL;
  CHECK_EQ_INT(fx_ctl->mr_info(old, &addr, &len, &access), -ENOENT);
  /* Registrations come and go until one gets the old index back. */
  for (int tries = 0; reuse && reused == 0 && tries < 200 && nmore < 64; tries++) {
    uint32_t k;
    more[nmore] = arena_new(RAIL_VERBS_MEM_HOST);
    k = rail_verbs_mr_on(more[nmore].mr, fx_nics[0])->lkey;
    if (k >> 8 == old >> 8) reused = k;
    if (reused == 0 && tries % 2 == 1) { /* every other one released again */
      rail_verbs_mr_dereg(more[nmore].mr);
      free(more[nmore].p);
      continue;
    }
    nmore++;
  }
  if (reuse) {
    CHECK(reused != 0);   /* the index came back ... */
    CHECK(reused != old); /* ... with another variant */
  }
  fx_ctl->stats(&s0);
  CHECK_EQ_INT(rogue_post(&g, IBV_WR_RDMA_WRITE, cr.e[0].addr, old, 16, 0), IBV_WC_REM_ACCESS_ERR);
  fx_ctl->stats(&s1);
  CHECK_EQ_INT(s1.stale_key_uses - s0.stale_key_uses, 1);
  for (int i = 0; i < nmore; i++) {
    CHECK_EQ_INT(more[i].p[0], 0xA5);
    rail_verbs_mr_dereg(more[i].mr);
    free(more[i].p);
  }
  rail_verbs_conn_destroy(r);
  rogue_close(&g);
}

TEST(a_write_with_a_released_windows_key_is_refused_and_recorded) {
  struct arena a = arena_new(RAIL_VERBS_MEM_HOST), b = arena_new(RAIL_VERBS_MEM_HOST);

  setenv("FAKEVERBS_STALE_KEYS", "count", 1);
  late_write(&a, 0); /* its index still poisoned */
  late_write(&b, 1); /* its index reused by another MR */
  unsetenv("FAKEVERBS_STALE_KEYS");
  free(a.p);
  free(b.p);
}

/* A receiver whose connection fails (here: the peer writes a message for a
 * receive never posted) while another receive is posted, and whose buffer
 * NCCL then releases, as it does after a failed request: its QPs still take
 * writes until the connection is closed, and a sender that has not heard
 * yet still writes with the credit's key. That key must stay registered
 * until the QPs are gone; with the window released at the failure, the
 * write uses a deregistered MR's key (on hardware: refused, or landing in
 * whatever MR reuses the index). */
TEST(a_failed_connection_keeps_its_windows_until_its_qps_are_gone) {
  struct arena a;
  struct rail_wire_verbs_credit cr;
  struct rail_verbs_conn *r = NULL;
  struct rail_verbs_req *rq;
  struct fakeverbs_stats s0, s1, z0, z1;
  int done = 0;
  size_t got = 0;
  struct rogue g;

  setenv("FAKEVERBS_STALE_KEYS", "count", 1);
  CHECK_EQ_INT(fx_nics_open(), 0);
  fx_ctl->stats(&z0);
  a = arena_new(RAIL_VERBS_MEM_HOST);
  CHECK_EQ_INT(rogue_pair(&g, &r), 0);
  fx_log_reset();
  rq = post_and_read_credit(&g, r, 1, a.p, 4096, a.mr, &cr);
  /* A write for receive 5, never posted: the connection fails. */
  CHECK_EQ_INT(rogue_post(&g, IBV_WR_RDMA_WRITE_WITH_IMM, cr.e[0].addr, cr.e[0].rkey[0], 16,
                          rogue_imm(5, 1)),
               IBV_WC_SUCCESS);
  CHECK_EQ_INT(fx_wait(rq, NULL, &got, 5, &done), -EPROTO);
  rail_verbs_mr_dereg(a.mr);
  fx_ctl->stats(&s0);
  CHECK_EQ_INT(rogue_post(&g, IBV_WR_RDMA_WRITE, cr.e[0].addr, cr.e[0].rkey[0], 16, 0),
               IBV_WC_SUCCESS);
  fx_ctl->stats(&s1);
  CHECK_EQ_INT(s1.stale_key_uses - s0.stale_key_uses, 0);
  rail_verbs_conn_destroy(r);
  rogue_close(&g);
  /* Closed, nothing it registered is left. */
  fx_ctl->stats(&z1);
  CHECK_EQ_INT(z1.reg_mr_calls - z0.reg_mr_calls, z1.dereg_mr_calls - z0.dereg_mr_calls);
  unsetenv("FAKEVERBS_STALE_KEYS");
  free(a.p);
}

/* NCCL closes comms with receives still posted, after releasing their
 * memory: the windows those receives hold keep what the NIC may still write
 * registered until the connection lets go of them, then everything goes. */
TEST(a_receive_posted_into_released_memory_is_freed_with_its_connection) {
  struct buf {
    uint8_t *p;
    struct rail_verbs_mr *mr;
  } b = {malloc(65536), NULL};
  struct rail_verbs_req *rq[3];
  struct fakeverbs_stats a, z;
  struct fx_pair p;

  CHECK_EQ_INT(fx_nics_open(), 0);
  fx_ctl->stats(&a);
  CHECK_EQ_INT(fx_pair_open(&p, 2, 1, 5000), 0);
  CHECK_EQ_INT(rail_verbs_mr_reg(fx_nics, 2, b.p, 65536, RAIL_VERBS_MEM_HOST, &b.mr), 0);
  for (int i = 0; i < 3; i++)
    CHECK_EQ_INT(fx_recv(&p, b.p + i * 4096, 4096, b.mr, &rq[i]), 0);
  rail_verbs_mr_dereg(b.mr);
  fx_pair_close(&p);
  fx_ctl->stats(&z);
  CHECK_EQ_INT(z.reg_mr_calls - a.reg_mr_calls, z.dereg_mr_calls - a.dereg_mr_calls);
  free(b.p);
}

RAIL_TEST_MAIN(fork_init_comes_before_any_other_verbs_call,
               fork_init_is_left_out_where_the_kernel_needs_none,
               a_remapped_host_address_gets_its_own_registration,
               gpu_registrations_are_shared_only_while_the_allocation_is_the_same,
               a_credits_key_covers_exactly_the_posted_buffer,
               remote_read_only_where_the_flush_needs_it,
               a_message_longer_than_its_buffer_fails_the_receive,
               a_write_with_a_released_windows_key_is_refused_and_recorded,
               a_failed_connection_keeps_its_windows_until_its_qps_are_gone,
               a_receive_posted_into_released_memory_is_freed_with_its_connection)
