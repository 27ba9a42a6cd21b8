/* rig_xfer: one long, verified, one-way transfer through the built plugin
 * between two processes that share nothing but a file system, such as the
 * two network namespaces of the dual-rail rig (dualrail.sh run-failover).
 *
 * The receiver listens and writes the plugin's 128-byte handle to a file;
 * the sender waits for that file and connects, as NCCL's bootstrap would
 * hand the handle over. Messages reuse a window of buffer slots, so the
 * transfer can last as long as asked without the memory growing, and every
 * received byte is checked against a pattern that depends on the message's
 * index and the word's offset: data that arrives in the wrong message, at
 * the wrong offset or not at all is caught.
 *
 * `nccl-rail bench` measures; this checks. The rig takes a rail down while
 * it runs and judges the outcome by its exit status:
 *   0  every message arrived intact
 *   1  the plugin returned an error (it names the call and the message), or
 *      nothing completed for --stall-ms (the plugin hung: no error, no data)
 *   2  usage, or set-up (plugin, handle file) failed
 *   3  a received message differs from what was sent
 *
 * usage: rig_xfer --plugin PATH (--listen FILE | --connect FILE)
 *                 [--version 8..11] [--size BYTES] [--count N] [--window N]
 *                 [--seed N] [--stall-ms MS] [--setup-ms MS]
 * Both sides must be given the same size, count and seed. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plugin/abi/nccl_net.h"
#include "tools/netdrive.h"

#define XFER_TAG 7
#define XFER_MAX_WINDOW 32 /* NCCL_NET_MAX_REQUESTS */

#define EXIT_OK 0
#define EXIT_FAILED 1
#define EXIT_SETUP 2
#define EXIT_CORRUPT 3

struct xfer_opts {
  const char *plugin, *listen_file, *connect_file;
  int version, window, stall_ms, setup_ms;
  size_t size;
  long count;
  uint64_t seed;
};

/* The expected 8-byte word at word index w of message m: a multiply-xorshift
 * of (seed, m, w), cheap enough to check at line rate. */
static uint64_t xfer_word(uint64_t seed, long m, size_t w) {
  uint64_t v = seed ^ ((uint64_t)m << 40) ^ (uint64_t)w;
  v *= 0xd1342543de82ef95ull;
  v ^= v >> 29;
  v *= 0x9e3779b97f4a7c15ull;
  return v ^ (v >> 32);
}

static void xfer_fill(uint64_t *p, size_t words, uint64_t seed, long m) {
  for (size_t w = 0; w < words; w++)
    p[w] = xfer_word(seed, m, w);
}

/* The first word that differs, or words. */
static size_t xfer_check(const uint64_t *p, size_t words, uint64_t seed, long m) {
  for (size_t w = 0; w < words; w++)
    if (p[w] != xfer_word(seed, m, w)) return w;
  return words;
}

static int xfer_parse(int argc, char **argv, struct xfer_opts *o) {
  memset(o, 0, sizeof(*o));
  o->version = 11;
  o->size = 4u << 20;
  o->count = 256;
  o->window = 8;
  o->seed = 0x5eed;
  o->stall_ms = 60000;
  o->setup_ms = 30000;
  for (int i = 1; i + 1 < argc; i += 2) {
    const char *a = argv[i], *v = argv[i + 1];
    if (strcmp(a, "--plugin") == 0)
      o->plugin = v;
    else if (strcmp(a, "--listen") == 0)
      o->listen_file = v;
    else if (strcmp(a, "--connect") == 0)
      o->connect_file = v;
    else if (strcmp(a, "--version") == 0)
      o->version = atoi(v);
    else if (strcmp(a, "--size") == 0)
      o->size = strtoull(v, NULL, 0);
    else if (strcmp(a, "--count") == 0)
      o->count = strtol(v, NULL, 0);
    else if (strcmp(a, "--window") == 0)
      o->window = atoi(v);
    else if (strcmp(a, "--seed") == 0)
      o->seed = strtoull(v, NULL, 0);
    else if (strcmp(a, "--stall-ms") == 0)
      o->stall_ms = atoi(v);
    else if (strcmp(a, "--setup-ms") == 0)
      o->setup_ms = atoi(v);
    else
      return -EINVAL;
  }
  if (argc % 2 == 0 || o->plugin == NULL || (o->listen_file == NULL) == (o->connect_file == NULL))
    return -EINVAL;
  /* Whole words keep the check simple; NCCL's own buffers are aligned too. */
  if (o->size == 0 || o->size % 8 != 0 || o->size > (1u << 30) || o->count < 1 || o->window < 1 ||
      o->window > XFER_MAX_WINDOW || o->stall_ms < 1 || o->setup_ms < 1)
    return -EINVAL;
  return 0;
}

/* The handle goes through a temporary file and a rename, so the sender
 * never reads half of it. */
static int xfer_write_handle(const char *path, const void *handle) {
  char tmp[4096];
  FILE *f;

  snprintf(tmp, sizeof(tmp), "%s.tmp", path);
  f = fopen(tmp, "wb");
  if (f == NULL) {
    fprintf(stderr, "rig_xfer: cannot create %s: %m\n", tmp);
    return -errno;
  }
  if (fwrite(handle, NCCL_NET_HANDLE_MAXSIZE, 1, f) != 1 || fclose(f) != 0) {
    fprintf(stderr, "rig_xfer: cannot write %s: %m\n", tmp);
    return -EIO;
  }
  if (rename(tmp, path) != 0) {
    fprintf(stderr, "rig_xfer: cannot rename %s to %s: %m\n", tmp, path);
    return -errno;
  }
  return 0;
}

static int xfer_read_handle(const char *path, void *handle, int timeout_ms) {
  uint64_t deadline = rail_nd_now_ns() + (uint64_t)timeout_ms * 1000000ull;
  FILE *f;

  while ((f = fopen(path, "rb")) == NULL) {
    if (errno != ENOENT || rail_nd_now_ns() > deadline) {
      fprintf(stderr, "rig_xfer: no handle file %s after %d ms: %m\n", path, timeout_ms);
      return -ENOENT;
    }
    usleep(20000);
  }
  if (fread(handle, NCCL_NET_HANDLE_MAXSIZE, 1, f) != 1) {
    fprintf(stderr, "rig_xfer: %s is shorter than a handle\n", path);
    fclose(f);
    return -EIO;
  }
  fclose(f);
  return 0;
}

/* Runs the transfer on an established comm: message m goes through slot
 * m % window, posted only once the slot's previous message completed (and,
 * on the receiver, was checked), so at most window requests are in flight. */
static int xfer_run(struct rail_nd *nd, const struct xfer_opts *o, void *comm, int send,
                    uint8_t *arena, void *mhandle) {
  const size_t words = o->size / 8;
  void *req[XFER_MAX_WINDOW] = {0};
  long next = 0, done = 0;
  uint64_t t0 = rail_nd_now_ns(), last = t0;
  int rc;

  while (done < o->count) {
    int progress = 0;
    /* Post into every free slot, in message order. */
    while (next < o->count && next - done < o->window) {
      int s = (int)(next % o->window);
      uint8_t *buf = arena + (size_t)s * o->size;
      void *r = NULL;
      if (send) {
        xfer_fill((uint64_t *)buf, words, o->seed, next);
        rc = rail_nd_isend(nd, comm, buf, o->size, XFER_TAG, mhandle, &r);
      } else {
        memset(buf, 0, o->size);
        rc = rail_nd_irecv(nd, comm, buf, o->size, XFER_TAG, mhandle, &r);
      }
      if (rc != ncclSuccess) {
        fprintf(stderr, "rig_xfer: %s of message %ld failed (ncclResult %d) after %.1f s\n",
                send ? "isend" : "irecv", next, rc, (rail_nd_now_ns() - t0) / 1e9);
        return EXIT_FAILED;
      }
      if (r == NULL) break; /* the plugin asks to retry later */
      req[s] = r;
      next++;
      progress = 1;
    }
    /* Messages complete in order: test the oldest. */
    if (done < next) {
      int s = (int)(done % o->window), fin = 0;
      size_t got = 0;
      rc = rail_nd_test(nd, req[s], &fin, &got);
      if (rc != ncclSuccess) {
        fprintf(stderr, "rig_xfer: test of %s %ld failed (ncclResult %d) after %.1f s\n",
                send ? "send" : "receive", done, rc, (rail_nd_now_ns() - t0) / 1e9);
        return EXIT_FAILED;
      }
      if (fin) {
        if (!send) {
          const uint64_t *p = (const uint64_t *)(arena + (size_t)s * o->size);
          size_t bad = got == o->size ? xfer_check(p, words, o->seed, done) : words;
          if (got != o->size) {
            fprintf(stderr, "rig_xfer: CORRUPT: message %ld reported %zu bytes, sent %zu\n", done,
                    got, o->size);
            return EXIT_CORRUPT;
          }
          if (bad != words) {
            fprintf(stderr,
                    "rig_xfer: CORRUPT: message %ld differs at byte %zu: 0x%016" PRIx64
                    ", expected 0x%016" PRIx64 "\n",
                    done, bad * 8, p[bad], xfer_word(o->seed, done, bad));
            return EXIT_CORRUPT;
          }
        }
        req[s] = NULL;
        done++;
        progress = 1;
      }
    }
    if (progress) {
      last = rail_nd_now_ns();
    } else if (rail_nd_now_ns() - last > (uint64_t)o->stall_ms * 1000000ull) {
      fprintf(stderr,
              "rig_xfer: STALLED: no %s completed and no error for %d ms "
              "(%ld of %ld done, %ld posted)\n",
              send ? "send" : "receive", o->stall_ms, done, o->count, next);
      return EXIT_FAILED;
    }
  }
  {
    double secs = (rail_nd_now_ns() - t0) / 1e9;
    double bytes = (double)o->size * (double)o->count;
    printf("rig_xfer: role=%s messages=%ld bytes=%.0f secs=%.3f MBps=%.1f result=%s\n",
           send ? "send" : "recv", o->count, bytes, secs, bytes / secs / 1e6,
           send ? "sent" : "verified");
  }
  return EXIT_OK;
}

int main(int argc, char **argv) {
  struct xfer_opts o;
  struct rail_nd nd;
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {0};
  void *dl, *listen_comm = NULL, *comm = NULL, *mhandle = NULL;
  uint8_t *arena = NULL;
  int send, ndev = 0, rc, status = EXIT_SETUP;

  if (xfer_parse(argc, argv, &o) != 0) {
    fprintf(stderr, "usage: rig_xfer --plugin PATH (--listen FILE | --connect FILE) "
                    "[--version 8..11] [--size BYTES (x8)] [--count N] [--window 1..32] "
                    "[--seed N] [--stall-ms MS] [--setup-ms MS]\n");
    return EXIT_SETUP;
  }
  send = o.connect_file != NULL;
  dl = rail_nd_open(o.plugin, NULL, 0);
  if (dl == NULL) return EXIT_SETUP;
  if (rail_nd_bind(&nd, dl, o.version) != 0) return EXIT_SETUP;
  if (rail_nd_init(&nd) != ncclSuccess) return EXIT_SETUP;
  if (rail_nd_devices(&nd, &ndev) != ncclSuccess || ndev < 1) {
    fprintf(stderr, "rig_xfer: the plugin offers no device\n");
    goto finalize;
  }
  {
    ncclNetProperties_v11_t props;
    if (rail_nd_props(&nd, 0, &props) == ncclSuccess)
      fprintf(stderr, "rig_xfer: %s device 0 \"%s\", %d Mbps\n", send ? "sender" : "receiver",
              props.name ? props.name : "?", props.speed);
  }

  if (send) {
    if (xfer_read_handle(o.connect_file, handle, o.setup_ms) != 0) goto finalize;
    if (rail_nd_connect_until(&nd, 0, handle, &comm, o.setup_ms) != ncclSuccess) goto finalize;
  } else {
    if (rail_nd_listen(&nd, 0, handle, &listen_comm) != ncclSuccess || listen_comm == NULL)
      goto finalize;
    rc = xfer_write_handle(o.listen_file, handle);
    if (rc == 0) rc = rail_nd_accept_until(&nd, listen_comm, &comm, o.setup_ms);
    /* NCCL closes the listen comm right after accept, success or not. */
    rail_nd_close_listen(&nd, listen_comm);
    if (rc != 0) goto finalize;
  }

  arena = aligned_alloc(4096, (size_t)o.window * o.size);
  if (arena == NULL) {
    fprintf(stderr, "rig_xfer: cannot allocate %d x %zu bytes\n", o.window, o.size);
    goto close_comm;
  }
  if (rail_nd_reg_mr(&nd, comm, arena, (size_t)o.window * o.size, &mhandle) != ncclSuccess)
    goto free_arena;

  status = xfer_run(&nd, &o, comm, send, arena, mhandle);

  /* After a failure NCCL still deregisters and closes (ncclCommAbort): the
   * plugin must not hang there either; the rig bounds this with timeout. */
  rail_nd_dereg_mr(&nd, comm, mhandle);
free_arena:
  free(arena);
close_comm:
  if (send)
    rail_nd_close_send(&nd, comm);
  else
    rail_nd_close_recv(&nd, comm);
finalize:
  rail_nd_finalize(&nd);
  fflush(stdout);
  fflush(stderr);
  /* Skip the plugin's destructors, as NCCL never unloads it mid-process. */
  _exit(status);
}
