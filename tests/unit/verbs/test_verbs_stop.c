/* unit.verbs_stop: two processes, as NCCL runs them, over the fake
 * provider (each process's fake HCA in the process itself): this one and a
 * peer (this binary again) connected through net/net.h. The peer is SIGSTOPped for
 * 4 x NCCL_RAIL_TIMEOUT_MS with credits and data pending, then SIGCONTed:
 * nothing fails, every byte arrives. The peer is SIGKILLed mid-transfer:
 * every pending request here fails within a second, with one WARN naming
 * it. Both as receiver and as sender. ctest sets NCCL_RAIL_VERBS_LIB,
 * NCCL_RAIL_TRANSPORT=verbs, NCCL_RAIL_IFNAMES=lo and FAKEVERBS_DEVICES. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/param.h"
#include "net/net.h"
#include "fake_util.h"

#define TIMEOUT_MS 250
#define MSGS 16
#define MSG (1 << 20)

static uint8_t pattern(int msg, size_t i) { return (uint8_t)(msg * 31 + i * 7 + 1); }

struct side {
  void *comm, *mh;
  uint8_t *buf;
  void *req[MSGS];
  int done[MSGS];
};

/* Both processes: the net layer up, then a connection over the socketpair
 * fd (the listener sends the handle). */
static int side_open(struct side *s, int is_send, int fd) {
  uint8_t handle[RAIL_NET_HANDLE_BYTES];
  void *lc = NULL;
  double end = fx_now() + 20;
  int ndev = 0;

  memset(s, 0, sizeof(*s));
  rail_param_reload();
  if (rail_net_init() != 0 || rail_net_devices(&ndev) != 0 || ndev < 1) return -1;
  memset(handle, 0, sizeof(handle));
  if (!is_send) {
    if (rail_net_listen(0, handle, &lc) != 0 || write(fd, handle, sizeof(handle)) != sizeof(handle))
      return -1;
  } else if (read(fd, handle, sizeof(handle)) != sizeof(handle)) {
    return -1;
  }
  while (s->comm == NULL && fx_now() < end) {
    if (is_send && rail_net_connect(0, handle, -1, &s->comm) != 0) return -1;
    if (!is_send && rail_net_accept(lc, &s->comm) != 0) return -1;
  }
  if (lc != NULL) rail_net_close_listen(lc);
  s->buf = malloc((size_t)MSGS * MSG);
  if (s->comm == NULL || s->buf == NULL ||
      rail_net_reg_mr(s->comm, s->buf, (size_t)MSGS * MSG, RAIL_NET_PTR_HOST, &s->mh) != 0)
    return -1;
  return 0;
}

static void side_close(struct side *s, int is_send) {
  rail_net_dereg_mr(s->comm, s->mh);
  if (is_send)
    rail_net_close_send(s->comm);
  else
    rail_net_close_recv(s->comm);
  free(s->buf);
  rail_net_fini();
}

/* Posts messages [from, to) (a sender fills them first). */
static int side_post(struct side *s, int is_send, int from, int to) {
  double end = fx_now() + 20;

  for (int m = from; m < to; m++) {
    uint8_t *p = s->buf + (size_t)m * MSG;
    size_t cap = MSG;
    int tag = 0, rc;

    if (is_send)
      for (size_t i = 0; i < MSG; i++)
        p[i] = pattern(m, i);
    do {
      rc = is_send ? rail_net_isend(s->comm, p, MSG, 0, s->mh, &s->req[m])
                   : rail_net_irecv(s->comm, 1, (void **)&p, &cap, &tag, &s->mh, &s->req[m]);
    } while (rc == 0 && s->req[m] == NULL && fx_now() < end);
    if (rc != 0 || s->req[m] == NULL) return rc != 0 ? rc : -ETIMEDOUT;
  }
  return 0;
}

/* Tests each pending message once: how many finished (done, or failed: the
 * first failure goes to *err). A received message is checked; each one
 * finished is announced on fd (if >= 0) with a byte. */
static int side_poll(struct side *s, int is_send, int fd, int *err) {
  int finished = 0;

  for (int m = 0; m < MSGS; m++) {
    int size = 0, rc;

    if (s->done[m] || s->req[m] == NULL) continue;
    rc = rail_net_test(s->req[m], &s->done[m], &size);
    if (rc != 0 && *err == 0) *err = rc;
    if (rc != 0) s->done[m] = 1;
    if (!s->done[m]) continue;
    finished++;
    /* The listener may be gone already after our last one: no SIGPIPE. */
    if (fd >= 0) send(fd, "d", 1, MSG_NOSIGNAL);
    for (size_t i = 0; rc == 0 && !is_send && i < MSG; i += 4093)
      if (s->buf[(size_t)m * MSG + i] != pattern(m, i) && *err == 0) *err = -EBADMSG;
  }
  return finished;
}

/* The forked peer: its side to the end, one message at a time (so that
 * most of this process's requests are still pending when it is hit, after
 * its fourth); exit status 0 when all went. */
static void peer(int is_send, int fd) {
  struct side s;
  double end = fx_now() + 60;
  int err = 0;

  rail_log_set_logger(fx_logger);
  if (side_open(&s, is_send, fd) != 0) _exit(2);
  for (int m = 0; m < MSGS && err == 0; m++) {
    char go;
    if (side_post(&s, is_send, m, m + 1) != 0) _exit(2);
    while (!s.done[m] && fx_now() < end)
      side_poll(&s, is_send, fd, &err);
    /* After four, wait to be hit (stopped or killed) and let go. */
    if (m == 3 && read(fd, &go, 1) != 1) _exit(3);
  }
  _exit(err == 0 && fx_nwarn == 0 && fx_now() < end ? 0 : 1);
}

/* In the peer's process (run() execs this binary with RAIL_VERBS_STOP_PEER
 * = "is_send:fd"): its side, before the tests' main. */
__attribute__((constructor)) static void peer_main(void) {
  const char *env = getenv("RAIL_VERBS_STOP_PEER");
  int is_send, fd;

  if (env != NULL && sscanf(env, "%d:%d", &is_send, &fd) == 2) peer(is_send, fd);
}

/* This process takes one side, the forked peer the other. Once the peer has
 * four messages done, `hit` goes to it (a SIGSTOP is undone after 4 x the
 * timeout, during which nothing here may fail). Then the rest must finish:
 * done, or (peer killed) failed within a second. Returns the first error. */
static int run(int is_send, int hit, pid_t *child) {
  struct side s;
  int sv[2], left = MSGS, got = 0, err = 0;
  double end, t_hit;
  char b;

  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return -errno;
  *child = fork();
  if (*child == 0) {
    /* A fresh process, not a fork of this one with its threads (the fake
     * HCA's, and ThreadSanitizer starts no thread in such a fork). */
    char env[32], *argv[] = {(char *)"unit.verbs_stop", NULL};
    close(sv[0]);
    snprintf(env, sizeof(env), "%d:%d", !is_send, sv[1]);
    setenv("RAIL_VERBS_STOP_PEER", env, 1);
    execv("/proc/self/exe", argv);
    _exit(4);
  }
  close(sv[1]);
  if (side_open(&s, is_send, sv[0]) != 0 || side_post(&s, is_send, 0, MSGS) != 0) return -EIO;
  for (end = fx_now() + 30; got < 4 && err == 0 && fx_now() < end;) {
    left -= side_poll(&s, is_send, -1, &err);
    while (recv(sv[0], &b, 1, MSG_DONTWAIT) == 1)
      got++;
  }
  if (got < 4 || err != 0) return err != 0 ? err : -ETIMEDOUT;
  kill(*child, hit);
  t_hit = fx_now();
  if (hit == SIGSTOP) {
    while (err == 0 && fx_now() < t_hit + 4.0 * TIMEOUT_MS / 1000)
      left -= side_poll(&s, is_send, -1, &err);
    kill(*child, SIGCONT);
    if (write(sv[0], "g", 1) != 1) err = -EIO;
  }
  for (end = fx_now() + 20; left > 0 && fx_now() < end;)
    left -= side_poll(&s, is_send, -1, &err);
  if (left > 0 || (hit == SIGKILL && fx_now() - t_hit > 1.0)) err = -ETIMEDOUT;
  side_close(&s, is_send);
  close(sv[0]);
  return err;
}

static void stopped(int is_send) {
  pid_t child = -1;
  int status = -1;

  fx_log_reset();
  CHECK_EQ_INT(run(is_send, SIGSTOP, &child), 0);
  CHECK_EQ_INT(fx_nwarn, 0);
  if (fx_nwarn != 0) fprintf(stderr, "%s", fx_log);
  CHECK(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void killed(int is_send) {
  pid_t child = -1;
  int status = -1;

  fx_log_reset();
  CHECK_EQ_INT(run(is_send, SIGKILL, &child), -ECONNRESET);
  CHECK_EQ_INT(fx_nwarn, 1);
  CHECK_EQ_INT(fx_warns_with("127.0.0.1"), 1); /* names the peer */
  CHECK(waitpid(child, &status, 0) == child);
}

TEST(a_receiver_stopped_for_four_timeouts_is_waited_for) {
  rail_log_set_logger(fx_logger);
  CHECK_EQ_INT(fx_tree(), 0);
  setenv("NCCL_RAIL_TIMEOUT_MS", "250", 1);
  stopped(1);
}

TEST(a_sender_stopped_for_four_timeouts_is_waited_for) { stopped(0); }

TEST(a_killed_receiver_fails_the_senders_pending_requests_within_a_second) { killed(1); }

TEST(a_killed_sender_fails_the_receivers_pending_requests_within_a_second) { killed(0); }

TEST(the_fake_tree_goes) { CHECK_EQ_INT(fx_tree_remove(), 0); }

RAIL_TEST_MAIN(a_receiver_stopped_for_four_timeouts_is_waited_for,
               a_sender_stopped_for_four_timeouts_is_waited_for,
               a_killed_receiver_fails_the_senders_pending_requests_within_a_second,
               a_killed_sender_fails_the_receivers_pending_requests_within_a_second,
               the_fake_tree_goes)
