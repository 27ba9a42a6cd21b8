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

/* Registered, deregistered, unmapped, other pages mapped at the same address,
 * registered again: the new registration is the one used, also while a
 * registration of a larger range around it is still held (which pins the
 * old pages and must not be reused for the new ones). */
TEST(a_remapped_host_address_gets_its_own_registration) {
  size_t pg = page();
  uint8_t *x = map_shared(NULL, 2 * pg);
  struct rail_verbs_mr *big, *b, *c;
  struct fx_pair p;

  CHECK_EQ_INT(fx_pair_open(&p, 2, 1, 5000), 0);
  CHECK_EQ_INT(rail_verbs_mr_reg(fx_nics, 2, x, 2 * pg, RAIL_VERBS_MEM_HOST, &big), 0);
  CHECK_EQ_INT(rail_verbs_mr_reg(fx_nics, 2, x, pg, RAIL_VERBS_MEM_HOST, &b), 0);
  receive_into(&p, x, pg, b, 1);
  rail_verbs_mr_dereg(b);
  CHECK(munmap(x, pg) == 0);
  CHECK(map_shared(x, pg) == x);
  CHECK_EQ_INT(rail_verbs_mr_reg(fx_nics, 2, x, pg, RAIL_VERBS_MEM_HOST, &c), 0);
  receive_into(&p, x, pg, c, 2);
  rail_verbs_mr_dereg(c);
  rail_verbs_mr_dereg(big);
  /* And with nothing held around it. */
  CHECK_EQ_INT(rail_verbs_mr_reg(fx_nics, 2, x, pg, RAIL_VERBS_MEM_HOST, &b), 0);
  rail_verbs_mr_dereg(b);
  CHECK(munmap(x, pg) == 0);
  CHECK(map_shared(x, pg) == x);
  CHECK_EQ_INT(rail_verbs_mr_reg(fx_nics, 2, x, pg, RAIL_VERBS_MEM_HOST, &c), 0);
  receive_into(&p, x, pg, c, 3);
  rail_verbs_mr_dereg(c);
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

RAIL_TEST_MAIN(fork_init_comes_before_any_other_verbs_call,
               fork_init_is_left_out_where_the_kernel_needs_none,
               a_remapped_host_address_gets_its_own_registration,
               gpu_registrations_are_shared_only_while_the_allocation_is_the_same)
