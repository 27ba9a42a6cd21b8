/* rig_delaylink: one rail of the namespace rig (dualrail.sh) with a fixed
 * one-way delay, where the kernel has no sch_netem (this project's build and
 * CI machines have none, and their kernels load no modules).
 *
 * It creates a TAP device named DEV in each of two network namespaces and
 * carries every Ethernet frame that one end's kernel sends to the other
 * end's kernel DELAY microseconds later, in order, both ways: to the two
 * namespaces it is a cable whose round trip takes 2 x DELAY, so TCP's
 * windows, slow start and the number of streams decide what a delayed rail
 * carries, as on a long link. The rig shapes each end's egress with tbf as
 * on a veth rail; the frames tbf lets out then wait here.
 *
 * What it holds is bounded (--limit frames each way, as netem's limit):
 * a frame that arrives when that many wait is dropped and counted, as a
 * full queue on a real link would drop it. It runs until it is killed (the
 * rig's `down` kills every process of its namespaces, this one included);
 * when it exits, the kernel deletes both TAP devices.
 *
 * usage: rig_delaylink --ns-a NAME --ns-b NAME --dev DEV --delay-us US
 *                      [--mtu BYTES] [--limit FRAMES]
 * It prints "ready" on stdout once both devices exist, and on SIGTERM or
 * SIGINT the frames it carried and dropped on stderr.
 * Exit: 0 killed after a clean run, 1 a device or namespace failed (named),
 * 2 usage. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

/* Ethernet header and one VLAN tag beyond the MTU. */
#define DL_L2_BYTES 18
/* Frames read from one end in one pass before the other end is served. */
#define DL_BATCH 64

struct dl_frame {
  uint64_t due_ns;
  uint32_t len;
};

/* One direction: frames read from `from`, written to `to` when due. */
struct dl_dir {
  int from, to;
  unsigned char *slots; /* limit slots of (header + slot_bytes) */
  size_t slot_bytes;
  unsigned head, count, limit;
  uint64_t carried, dropped;
};

static volatile sig_atomic_t dl_stop;

static void dl_on_signal(int sig) {
  (void)sig;
  dl_stop = 1;
}

static uint64_t dl_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static struct dl_frame *dl_slot(struct dl_dir *d, unsigned i) {
  return (struct dl_frame *)(d->slots +
                             (size_t)(i % d->limit) * (sizeof(struct dl_frame) + d->slot_bytes));
}

/* dl_tap_open NS DEV: a TAP device DEV inside the namespace NS (as
 * `ip netns` names it), its fd non-blocking; -1 with the reason said. The
 * device is made in whatever namespace the process is in, so the process
 * enters NS first. */
static int dl_tap_open(const char *ns, const char *dev) {
  char path[256];
  snprintf(path, sizeof(path), "/run/netns/%s", ns);
  int nsfd = open(path, O_RDONLY | O_CLOEXEC);
  if (nsfd < 0) {
    fprintf(stderr, "rig_delaylink: namespace %s: %s: %s\n", ns, path, strerror(errno));
    return -1;
  }
  if (setns(nsfd, CLONE_NEWNET) != 0) {
    fprintf(stderr, "rig_delaylink: cannot enter namespace %s: %s\n", ns, strerror(errno));
    close(nsfd);
    return -1;
  }
  close(nsfd);
  int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    fprintf(stderr, "rig_delaylink: /dev/net/tun: %s\n", strerror(errno));
    return -1;
  }
  struct ifreq ifr;
  memset(&ifr, 0, sizeof(ifr));
  ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
  snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", dev);
  if (ioctl(fd, TUNSETIFF, &ifr) != 0) {
    fprintf(stderr, "rig_delaylink: cannot create TAP device %s in namespace %s: %s\n", dev, ns,
            strerror(errno));
    close(fd);
    return -1;
  }
  return fd;
}

/* dl_take: read what `from` has (at most a batch, while slots are free),
 * each frame due delay_ns from now. 0, or -1 when the device failed. */
static int dl_take(struct dl_dir *d, uint64_t delay_ns) {
  for (int n = 0; n < DL_BATCH; n++) {
    unsigned char scratch[DL_L2_BYTES];
    int full = d->count == d->limit;
    struct dl_frame *f = full ? NULL : dl_slot(d, d->head + d->count);
    /* A full queue still reads the frame, to drop it as a full link does,
     * rather than leave it to stall the sending kernel's queue. */
    ssize_t r =
        full ? read(d->from, scratch, sizeof(scratch)) : read(d->from, f + 1, d->slot_bytes);
    if (r < 0) {
      if (errno == EAGAIN || errno == EINTR) return 0;
      return -1;
    }
    if (full) {
      d->dropped++;
      continue;
    }
    f->len = (uint32_t)r;
    f->due_ns = dl_now_ns() + delay_ns;
    d->count++;
  }
  return 0;
}

/* dl_give: write every frame that is due; returns the nanoseconds until the
 * next one is, or UINT64_MAX when none waits. */
static uint64_t dl_give(struct dl_dir *d, uint64_t now) {
  while (d->count > 0) {
    struct dl_frame *f = dl_slot(d, d->head);
    if (f->due_ns > now) return f->due_ns - now;
    /* A frame the other kernel refuses (its device down) is lost, as on a
     * cable to a port that is down. */
    if (write(d->to, f + 1, f->len) == (ssize_t)f->len)
      d->carried++;
    else
      d->dropped++;
    d->head = (d->head + 1) % d->limit;
    d->count--;
  }
  return UINT64_MAX;
}

static int dl_usage(void) {
  fprintf(stderr, "usage: rig_delaylink --ns-a NAME --ns-b NAME --dev DEV --delay-us US "
                  "[--mtu BYTES] [--limit FRAMES]\n");
  return 2;
}

/* The forwarding loop: both directions in one thread, sleeping in ppoll
 * until a frame arrives or the oldest waiting one is due. */
static int dl_run(struct dl_dir dir[2], uint64_t delay_ns) {
  while (!dl_stop) {
    uint64_t now = dl_now_ns(), wait_ns = UINT64_MAX;
    for (int i = 0; i < 2; i++) {
      uint64_t w = dl_give(&dir[i], now);
      if (w < wait_ns) wait_ns = w;
    }
    struct pollfd p[2] = {{.fd = dir[0].from, .events = POLLIN},
                          {.fd = dir[1].from, .events = POLLIN}};
    struct timespec ts = {(time_t)(wait_ns / 1000000000u), (long)(wait_ns % 1000000000u)};
    int r = ppoll(p, 2, wait_ns == UINT64_MAX ? NULL : &ts, NULL);
    if (r < 0 && errno != EINTR) {
      perror("rig_delaylink: ppoll");
      return 1;
    }
    for (int i = 0; r > 0 && i < 2; i++) {
      if ((p[i].revents & (POLLERR | POLLHUP | POLLNVAL)) != 0 ||
          ((p[i].revents & POLLIN) && dl_take(&dir[i], delay_ns) != 0)) {
        fprintf(stderr, "rig_delaylink: reading the TAP device of end %c failed: %s\n", "ab"[i],
                strerror(errno));
        return 1;
      }
    }
  }
  return 0;
}

int main(int argc, char **argv) {
  const char *ns[2] = {NULL, NULL}, *dev = NULL;
  long delay_us = -1, mtu = 9000, limit = 2048;
  static const struct option opts[] = {{"ns-a", required_argument, NULL, 'a'},
                                       {"ns-b", required_argument, NULL, 'b'},
                                       {"dev", required_argument, NULL, 'd'},
                                       {"delay-us", required_argument, NULL, 'u'},
                                       {"mtu", required_argument, NULL, 'm'},
                                       {"limit", required_argument, NULL, 'l'},
                                       {NULL, 0, NULL, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (c) {
    case 'a':
      ns[0] = optarg;
      break;
    case 'b':
      ns[1] = optarg;
      break;
    case 'd':
      dev = optarg;
      break;
    case 'u':
      delay_us = strtol(optarg, NULL, 10);
      break;
    case 'm':
      mtu = strtol(optarg, NULL, 10);
      break;
    case 'l':
      limit = strtol(optarg, NULL, 10);
      break;
    default:
      return dl_usage();
    }
  }
  if (ns[0] == NULL || ns[1] == NULL || dev == NULL || delay_us < 0 || delay_us > 10000000 ||
      mtu < 68 || mtu > 65535 || limit < 1 || limit > 65536 || optind != argc)
    return dl_usage();
  /* ppoll's sleeps end within a microsecond of the due time, not the
   * default 50 us slack: the delay is what the rig promises. */
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  int fd[2];
  for (int i = 0; i < 2; i++)
    if ((fd[i] = dl_tap_open(ns[i], dev)) < 0) return 1;
  size_t slot_bytes = (size_t)mtu + DL_L2_BYTES;
  struct dl_dir dir[2] = {
      {.from = fd[0], .to = fd[1], .slot_bytes = slot_bytes, .limit = (unsigned)limit},
      {.from = fd[1], .to = fd[0], .slot_bytes = slot_bytes, .limit = (unsigned)limit}};
  for (int i = 0; i < 2; i++) {
    dir[i].slots = malloc((size_t)limit * (sizeof(struct dl_frame) + slot_bytes));
    if (dir[i].slots == NULL) {
      fprintf(stderr, "rig_delaylink: no memory for %ld frames of %zu bytes\n", limit, slot_bytes);
      return 1;
    }
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = dl_on_signal;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  printf("ready\n");
  fflush(stdout);
  int rc = dl_run(dir, (uint64_t)delay_us * 1000u);
  fprintf(stderr,
          "rig_delaylink: %s: a->b %llu carried %llu dropped, b->a %llu carried %llu dropped\n",
          dev, (unsigned long long)dir[0].carried, (unsigned long long)dir[0].dropped,
          (unsigned long long)dir[1].carried, (unsigned long long)dir[1].dropped);
  free(dir[0].slots);
  free(dir[1].slots);
  return rc;
}
