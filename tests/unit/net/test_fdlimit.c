/* unit.net_fdlimit: the soft RLIMIT_NOFILE raised where the fd model
 * (net/core/setup.h) says a rank would cross it and the hard limit allows
 * more, said at INFO; left alone where it suffices or the hard limit is
 * too low. Each case runs in a child process of its own: it lowers the
 * hard limit, which cannot be undone, and the raise is once per process. */
#include <sys/resource.h>
#include <sys/wait.h>

#include "net/core/setup.h"
#include "net_util.h"

/* Sets the limits to (cur, max), calls rail_setup_fd_limit(nrails, k) the
 * times given, and returns the soft limit after, in the child; the parent
 * gets it through a pipe, or -1. *info is set to how many of the log
 * lines said "raised", *low to how many said the hard limit is below. */
static long fl_child(rlim_t cur, rlim_t max, int nrails, int k, int calls, int *info, int *low) {
  int pfd[2], status;
  long out[3] = {-1, 0, 0};
  pid_t pid;

  if (pipe(pfd) != 0) return -1;
  pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    struct rlimit rl = {.rlim_cur = cur, .rlim_max = max};
    long got[3] = {-1, 0, 0};
    close(pfd[0]);
    nt_log_start();
    if (setrlimit(RLIMIT_NOFILE, &rl) == 0) {
      for (int i = 0; i < calls; i++)
        rail_setup_fd_limit(nrails, k, "lo");
      if (getrlimit(RLIMIT_NOFILE, &rl) == 0) got[0] = (long)rl.rlim_cur;
      pthread_mutex_lock(&nt_log_mu);
      for (const char *p = nt_log_buf; (p = strstr(p, "raised RLIMIT_NOFILE")) != NULL; p++)
        got[1]++;
      for (const char *p = nt_log_buf; (p = strstr(p, "hard limit")) != NULL; p++)
        got[2]++;
      pthread_mutex_unlock(&nt_log_mu);
    }
    if (write(pfd[1], got, sizeof(got)) != (ssize_t)sizeof(got)) _exit(1);
    _exit(0);
  }
  close(pfd[1]);
  if (read(pfd[0], out, sizeof(out)) != (ssize_t)sizeof(out)) out[0] = -1;
  close(pfd[0]);
  waitpid(pid, &status, 0);
  *info = (int)out[1];
  *low = (int)out[2];
  return out[0];
}

/* One rail, K = 2: the model says 128 x 1 x 3 + 1024 = 1408 fds. A soft
 * limit of 256 under a hard 4096 goes to 4096, once: a second connection
 * with the same K changes and says nothing. */
TEST(test_raises_soft_to_hard_once) {
  int info, low;

  CHECK_EQ_INT(rail_setup_fds_needed(1, 2), 1408);
  CHECK_EQ_INT(fl_child(256, 4096, 1, 2, 2, &info, &low), 4096);
  CHECK_EQ_INT(info, 1);
  CHECK_EQ_INT(low, 0);
}

/* A soft limit that covers the model is left as it is, silently. */
TEST(test_enough_is_left_alone) {
  int info, low;

  CHECK_EQ_INT(fl_child(2000, 4096, 1, 2, 1, &info, &low), 2000);
  CHECK_EQ_INT(info, 0);
  CHECK_EQ_INT(low, 0);
}

/* A hard limit below the need: nothing to raise to that would do; INFO
 * says so once and the soft limit stays. */
TEST(test_hard_below_need_is_said) {
  int info, low;

  CHECK_EQ_INT(fl_child(256, 1000, 1, 2, 2, &info, &low), 256);
  CHECK_EQ_INT(info, 0);
  CHECK_EQ_INT(low, 1);
}

/* A long link's larger K (8 rails, 8 streams: 128 x 8 x 9 + 1024 = 10240)
 * after a short one's is weighed again: the hard 4096 was enough for the
 * first and is not for the second. */
TEST(test_larger_k_weighed_again) {
  int info, low;

  CHECK_EQ_INT(rail_setup_fds_needed(8, 8), 10240);
  CHECK_EQ_INT(fl_child(1000, 4096, 1, 1, 1, &info, &low), 4096);
  CHECK_EQ_INT(info, 1);
  CHECK_EQ_INT(fl_child(1000, 12000, 8, 8, 1, &info, &low), 12000);
  CHECK_EQ_INT(info, 1);
  CHECK_EQ_INT(low, 0);
}

/* The plugin's init does it: with lo as the device (one rail), building
 * the table weighs the model with the K a long link would choose, and a
 * soft limit of 256 under a hard 4096 is raised before any connection. */
TEST(test_init_raises) {
  int pfd[2], status;
  long got[2] = {-1, 0};
  pid_t pid;

  CHECK_EQ_INT(pipe(pfd), 0);
  pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    struct rlimit rl = {.rlim_cur = 256, .rlim_max = 4096};
    long out[2] = {-1, 0};
    close(pfd[0]);
    nt_log_start();
    nt_env("NCCL_RAIL_IFNAMES", "lo");
    if (setrlimit(RLIMIT_NOFILE, &rl) == 0 && rail_net_init() == 0) {
      if (getrlimit(RLIMIT_NOFILE, &rl) == 0) out[0] = (long)rl.rlim_cur;
      out[1] = nt_log_has_info("raised RLIMIT_NOFILE", "from 256 to 4096");
      rail_net_fini();
    }
    if (write(pfd[1], out, sizeof(out)) != (ssize_t)sizeof(out)) _exit(1);
    _exit(0);
  }
  close(pfd[1]);
  if (read(pfd[0], got, sizeof(got)) != (ssize_t)sizeof(got)) got[0] = -1;
  close(pfd[0]);
  waitpid(pid, &status, 0);
  CHECK_EQ_INT(got[0], 4096);
  CHECK_EQ_INT(got[1], 1);
}

RAIL_TEST_MAIN(test_raises_soft_to_hard_once, test_enough_is_left_alone,
               test_hard_below_need_is_said, test_larger_k_weighed_again, test_init_raises)
