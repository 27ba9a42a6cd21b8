#define _GNU_SOURCE /* ppoll */
/* The callers' sleep: see nap.h.
 *
 * The set is waited on with ppoll on the epoll descriptor itself, which is
 * readable while events are pending: ppoll has nanosecond timeouts (naps are
 * tens of microseconds to a millisecond, epoll_wait's are milliseconds), and
 * every napping thread wakes, not just one, so each proxy thread looks at
 * its own comms. Events are then drained without waiting. A stale event (a
 * record the caller read before it napped) costs one early return, never a
 * missed one: edge-triggered events stay queued until drained.
 *
 * The two descriptors live as long as the process (a forked child makes
 * its own); without them a nap is a plain bounded sleep. */
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "net/socket/nap.h"

static pthread_mutex_t rail_nap_mu = PTHREAD_MUTEX_INITIALIZER;
static int rail_nap_ready; /* atomic: 1 once set up, -1 if that failed */
static int rail_nap_ep = -1, rail_nap_ev = -1;
static int rail_nap_sleepers; /* atomic: threads between rail_nap_enter and waking */

/* A forked child shares the parent's epoll set; it must not drain the
 * parent's events, nor add its streams to it. */
static void rail_nap_atfork_child(void) {
  if (rail_nap_ep >= 0) close(rail_nap_ep);
  if (rail_nap_ev >= 0) close(rail_nap_ev);
  rail_nap_ep = rail_nap_ev = -1;
  rail_nap_ready = 0;
  rail_nap_sleepers = 0;
  pthread_mutex_init(&rail_nap_mu, NULL);
}

static int rail_nap_setup(void) {
  static int atfork_done;
  int ready = __atomic_load_n(&rail_nap_ready, __ATOMIC_ACQUIRE);

  if (ready != 0) return ready > 0 ? 0 : -1;
  pthread_mutex_lock(&rail_nap_mu);
  if (!atfork_done && pthread_atfork(NULL, NULL, rail_nap_atfork_child) == 0) atfork_done = 1;
  if (rail_nap_ready == 0) {
    struct epoll_event ev = {.events = EPOLLIN | EPOLLET};
    rail_nap_ep = epoll_create1(EPOLL_CLOEXEC);
    rail_nap_ev = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (rail_nap_ep >= 0 && rail_nap_ev >= 0 &&
        epoll_ctl(rail_nap_ep, EPOLL_CTL_ADD, rail_nap_ev, &ev) == 0) {
      __atomic_store_n(&rail_nap_ready, 1, __ATOMIC_RELEASE);
    } else {
      if (rail_nap_ep >= 0) close(rail_nap_ep);
      if (rail_nap_ev >= 0) close(rail_nap_ev);
      rail_nap_ep = rail_nap_ev = -1;
      __atomic_store_n(&rail_nap_ready, -1, __ATOMIC_RELEASE);
    }
  }
  pthread_mutex_unlock(&rail_nap_mu);
  return rail_nap_ready > 0 ? 0 : -1;
}

void rail_nap_watch(int fd) {
  struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET};

  if (fd >= 0 && rail_nap_setup() == 0) (void)epoll_ctl(rail_nap_ep, EPOLL_CTL_ADD, fd, &ev);
}

void rail_nap_unwatch(int fd) {
  if (fd >= 0 && __atomic_load_n(&rail_nap_ready, __ATOMIC_ACQUIRE) > 0)
    (void)epoll_ctl(rail_nap_ep, EPOLL_CTL_DEL, fd, NULL);
}

void rail_nap_kick(int always) {
  uint64_t one = 1;

  if (__atomic_load_n(&rail_nap_ready, __ATOMIC_ACQUIRE) <= 0) return;
  if (!always && __atomic_load_n(&rail_nap_sleepers, __ATOMIC_ACQUIRE) == 0) return;
  if (write(rail_nap_ev, &one, sizeof(one)) < 0) {
    /* EAGAIN: the counter is full of kicks already. */
  }
}

static __thread int rail_nap_data_thread;

void rail_nap_mark_data_thread(void) { rail_nap_data_thread = 1; }

void rail_nap_kick_completion(void) { rail_nap_kick(rail_nap_data_thread); }

void rail_nap_enter(void) { __atomic_add_fetch(&rail_nap_sleepers, 1, __ATOMIC_ACQ_REL); }

void rail_nap_wait(long ns) {
  struct timespec ts = {ns / 1000000000l, ns % 1000000000l};

  if (rail_nap_setup() != 0) {
    nanosleep(&ts, NULL);
  } else {
    struct pollfd p = {.fd = rail_nap_ep, .events = POLLIN};
    if (ppoll(&p, 1, &ts, NULL) > 0) {
      /* Edge-triggered: every kick and arrival is an event of its own, so
       * the eventfd's counter need not be read back, only the queue drained. */
      struct epoll_event evs[16];
      while (epoll_wait(rail_nap_ep, evs, 16, 0) == 16) {
      }
    }
  }
  __atomic_sub_fetch(&rail_nap_sleepers, 1, __ATOMIC_ACQ_REL);
}
