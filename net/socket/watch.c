#define _GNU_SOURCE /* pthread_setname_np */
/* The watcher (watch.h). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "net/socket/watch.h"

#include "common/log.h"
#include "net/socket/progress.h"
#include "net/socket/sock.h"

#define RAIL_WATCH_NS (10 * 1000 * 1000ull)

struct rail_watcher {
  pthread_t thread;
  int stop;
};

static pthread_mutex_t rail_watch_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t rail_watch_cv;
static pthread_once_t rail_watch_once = PTHREAD_ONCE_INIT;
static struct rail_sock *rail_watch_list;
static int rail_watch_count;
static struct rail_watcher *rail_watch_current;

/* A forked child has no watcher thread and none of its parent's
 * connections working: it starts from scratch. */
static void rail_watch_atfork_child(void) {
  rail_watch_list = NULL;
  rail_watch_count = 0;
  rail_watch_current = NULL;
}

static void rail_watch_init(void) {
  pthread_condattr_t ca;

  pthread_atfork(NULL, NULL, rail_watch_atfork_child);
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&rail_watch_cv, &ca);
  pthread_condattr_destroy(&ca);
}

static void *rail_watch_main(void *arg) {
  struct rail_watcher *w = arg;

  pthread_setname_np(pthread_self(), "rail-watch");
  pthread_mutex_lock(&rail_watch_mu);
  while (!w->stop) {
    uint64_t now = rail_now_ns(), until = now + RAIL_WATCH_NS;
    struct timespec ts;

    for (struct rail_sock *c = rail_watch_list; c != NULL; c = c->watch_next)
      rail_progress_idle(c, now, RAIL_WATCH_NS);
    ts.tv_sec = (time_t)(until / 1000000000ull);
    ts.tv_nsec = (long)(until % 1000000000ull);
    pthread_cond_timedwait(&rail_watch_cv, &rail_watch_mu, &ts);
  }
  pthread_mutex_unlock(&rail_watch_mu);
  return NULL;
}

int rail_watch_add(struct rail_sock *c) {
  int rc = 0;

  pthread_once(&rail_watch_once, rail_watch_init);
  pthread_mutex_lock(&rail_watch_mu);
  if (rail_watch_current == NULL) {
    struct rail_watcher *w = calloc(1, sizeof(*w));
    rc = w == NULL ? ENOMEM : pthread_create(&w->thread, NULL, rail_watch_main, w);
    if (rc != 0) {
      free(w);
      pthread_mutex_unlock(&rail_watch_mu);
      return -rc;
    }
    rail_watch_current = w;
  }
  c->watch_prev = NULL;
  c->watch_next = rail_watch_list;
  if (rail_watch_list != NULL) rail_watch_list->watch_prev = c;
  rail_watch_list = c;
  rail_watch_count++;
  pthread_mutex_unlock(&rail_watch_mu);
  return 0;
}

void rail_watch_remove(struct rail_sock *c) {
  struct rail_watcher *done = NULL;

  pthread_mutex_lock(&rail_watch_mu);
  if (c->watch_prev != NULL)
    c->watch_prev->watch_next = c->watch_next;
  else if (rail_watch_list == c)
    rail_watch_list = c->watch_next;
  else {
    pthread_mutex_unlock(&rail_watch_mu); /* never added */
    return;
  }
  if (c->watch_next != NULL) c->watch_next->watch_prev = c->watch_prev;
  c->watch_next = c->watch_prev = NULL;
  if (--rail_watch_count == 0) {
    /* A later connection starts a new watcher; this one is joined here. */
    done = rail_watch_current;
    rail_watch_current = NULL;
    done->stop = 1;
    pthread_cond_broadcast(&rail_watch_cv);
  }
  pthread_mutex_unlock(&rail_watch_mu);
  if (done != NULL) {
    pthread_join(done->thread, NULL);
    free(done);
  }
}
