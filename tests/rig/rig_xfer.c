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
 *   4  (--soak) the process holds more file descriptors or memory at the
 *      end than after its first connection (a leak)
 *
 * --soak (dualrail.sh run-soak): the sizes are random, 0 to 64 MiB and
 * mostly small, each received byte is checked by CRC32C against the
 * pattern's, and the messages are spread over --epochs connections, each
 * opened, used and closed in turn (the handle file FILE.N for the N-th),
 * as a job's communicators come and go; the rig flaps a rail meanwhile.
 * After the first connection closed, the process's open file descriptors
 * and resident memory are noted; after the last, they must be the same
 * (memory within RAIL_XFER_RSS_SLACK).
 *
 * usage: rig_xfer --plugin PATH (--listen FILE | --connect FILE)
 *                 [--version 8..11] [--size BYTES] [--count N] [--window N]
 *                 [--seed N] [--stall-ms MS] [--setup-ms MS]
 *                 [--soak --epochs N]
 * Both sides must be given the same size, count, seed and soak options. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plugin/abi/nccl_net.h"
#include "tools/drive/netdrive.h"

#define XFER_TAG 7
#define XFER_MAX_WINDOW 32 /* NCCL_NET_MAX_REQUESTS */

#define EXIT_OK 0
#define EXIT_FAILED 1
#define EXIT_SETUP 2
#define EXIT_CORRUPT 3
#define EXIT_LEAK 4

/* Soak sizes: slots below XFER_SOAK_BIG_SLOTS hold up to 64 MiB, the
 * others 4 MiB, so the buffers stay small while every size still occurs. */
#define XFER_SOAK_MAX (64u << 20)
#define XFER_SOAK_SLOT (4u << 20)
#define XFER_SOAK_BIG_SLOTS 2
/* Resident memory may differ by this much between the first connection's
 * end and the last's (allocator noise, thread stacks the kernel keeps). */
#define RAIL_XFER_RSS_SLACK (16u << 20)

struct xfer_opts {
  const char *plugin, *listen_file, *connect_file;
  int version, window, stall_ms, setup_ms;
  size_t size;
  long count;
  uint64_t seed;
  int soak, epochs;
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

/* ---- soak: sizes and CRC32C --------------------------------------------------- */

static uint64_t xfer_mix(uint64_t v) {
  v ^= v >> 31;
  v *= 0xbf58476d1ce4e5b9ull;
  v ^= v >> 29;
  return v;
}

/* Log-uniform in [lo, hi]. */
static size_t xfer_log_uniform(uint64_t r, size_t lo, size_t hi) {
  double f = (double)(r >> 11) / (double)(1ull << 53);
  return (size_t)((double)lo * pow((double)hi / (double)lo, f));
}

/* Message m's size: 80% up to 4 KiB (a fifth of them empty), 17.5% up to
 * 256 KiB, 2% up to 4 MiB, 0.5% up to 64 MiB (in the slots that hold it;
 * elsewhere up to 4 MiB). */
static size_t xfer_soak_size(const struct xfer_opts *o, long m) {
  uint64_t r = xfer_mix(o->seed * 0x9e3779b97f4a7c15ull + (uint64_t)m);
  unsigned pick = (unsigned)(r % 1000);
  int big = m % o->window < XFER_SOAK_BIG_SLOTS;

  r = xfer_mix(r);
  if (pick < 160) return 0;
  if (pick < 800) return 1 + r % 4096;
  if (pick < 975) return xfer_log_uniform(r, 4097, 256u << 10);
  if (pick < 995 || !big) return xfer_log_uniform(r, (256u << 10) + 1, XFER_SOAK_SLOT);
  return xfer_log_uniform(r, XFER_SOAK_SLOT + 1, XFER_SOAK_MAX);
}

static size_t xfer_slot_bytes(const struct xfer_opts *o, int slot) {
  if (!o->soak) return o->size;
  return slot < XFER_SOAK_BIG_SLOTS ? XFER_SOAK_MAX : XFER_SOAK_SLOT;
}

static size_t xfer_msg_size(const struct xfer_opts *o, long m) {
  return o->soak ? xfer_soak_size(o, m) : o->size;
}

static uint32_t xfer_crc_table[256];

static void xfer_crc_init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++)
      c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1; /* CRC32C (Castagnoli) */
    xfer_crc_table[i] = c;
  }
}

static uint32_t xfer_crc_byte(uint32_t crc, uint8_t b) {
  return xfer_crc_table[(crc ^ b) & 0xff] ^ (crc >> 8);
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t xfer_crc_word_hw(uint32_t crc, uint64_t w) {
  return (uint32_t)__builtin_ia32_crc32di(crc, w);
}
#endif

static uint32_t xfer_crc_word(uint32_t crc, uint64_t w) {
#if defined(__x86_64__)
  static int hw = -1;
  if (hw < 0) hw = __builtin_cpu_supports("sse4.2");
  if (hw) return xfer_crc_word_hw(crc, w);
#endif
  for (int i = 0; i < 8; i++)
    crc = xfer_crc_byte(crc, (uint8_t)(w >> (8 * i)));
  return crc;
}

/* CRC32C of len bytes laid out as 8-byte little-endian words. */
static uint32_t xfer_crc_buf(const uint8_t *p, size_t len) {
  uint32_t crc = ~0u;
  size_t w = 0;

  for (; w + 8 <= len; w += 8) {
    uint64_t v;
    memcpy(&v, p + w, 8);
    crc = xfer_crc_word(crc, v);
  }
  for (; w < len; w++)
    crc = xfer_crc_byte(crc, p[w]);
  return ~crc;
}

/* The same CRC of what message m must hold, from the pattern itself. */
static uint32_t xfer_crc_expected(uint64_t seed, long m, size_t len) {
  uint32_t crc = ~0u;
  size_t w = 0;

  for (; w + 8 <= len; w += 8)
    crc = xfer_crc_word(crc, xfer_word(seed, m, w / 8));
  if (w < len) {
    uint64_t last = xfer_word(seed, m, w / 8);
    for (size_t i = 0; w + i < len; i++)
      crc = xfer_crc_byte(crc, (uint8_t)(last >> (8 * i)));
  }
  return ~crc;
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
  o->epochs = 1;
  for (int i = 1; i < argc; i += 2) {
    const char *a = argv[i], *v = argv[i + 1];
    if (strcmp(a, "--soak") == 0) {
      o->soak = 1;
      i--; /* a flag: no value */
      continue;
    }
    if (v == NULL) return -EINVAL;
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
    else if (strcmp(a, "--epochs") == 0)
      o->epochs = atoi(v);
    else
      return -EINVAL;
  }
  if (o->plugin == NULL || (o->listen_file == NULL) == (o->connect_file == NULL)) return -EINVAL;
  /* Whole words keep the check simple; NCCL's own buffers are aligned too. */
  if (o->size == 0 || o->size % 8 != 0 || o->size > (1u << 30) || o->count < 1 || o->window < 1 ||
      o->window > XFER_MAX_WINDOW || o->stall_ms < 1 || o->setup_ms < 1 || o->epochs < 1 ||
      o->epochs > o->count || (o->soak && o->window <= XFER_SOAK_BIG_SLOTS))
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

/* Where slot s's buffer starts in the arena. */
static size_t xfer_slot_off(const struct xfer_opts *o, int slot) {
  size_t off = 0;
  for (int i = 0; i < slot; i++)
    off += xfer_slot_bytes(o, i);
  return off;
}

/* Message m in its slot: the pattern for a send, zeros for a receive. */
static void xfer_prepare(const struct xfer_opts *o, int send, long m, uint8_t *buf, size_t len) {
  if (!send) {
    memset(buf, 0, len);
    return;
  }
  xfer_fill((uint64_t *)buf, len / 8, o->seed, m);
  if (len % 8 != 0) {
    uint64_t last = xfer_word(o->seed, m, len / 8);
    memcpy(buf + len / 8 * 8, &last, len % 8);
  }
}

/* A received message against what was sent: EXIT_OK or EXIT_CORRUPT. */
static int xfer_verify(const struct xfer_opts *o, long m, const uint8_t *buf, size_t got,
                       size_t want) {
  if (got != want) {
    fprintf(stderr, "rig_xfer: CORRUPT: message %ld reported %zu bytes, sent %zu\n", m, got, want);
    return EXIT_CORRUPT;
  }
  if (o->soak) {
    uint32_t crc = xfer_crc_buf(buf, got), expect = xfer_crc_expected(o->seed, m, want);
    if (crc != expect) {
      fprintf(stderr, "rig_xfer: CORRUPT: message %ld (%zu bytes) has CRC32C 0x%08x, sent 0x%08x\n",
              m, want, crc, expect);
      return EXIT_CORRUPT;
    }
    return EXIT_OK;
  }
  {
    const uint64_t *p = (const uint64_t *)buf;
    size_t words = want / 8, bad = xfer_check(p, words, o->seed, m);
    if (bad != words) {
      fprintf(stderr,
              "rig_xfer: CORRUPT: message %ld differs at byte %zu: 0x%016" PRIx64
              ", expected 0x%016" PRIx64 "\n",
              m, bad * 8, p[bad], xfer_word(o->seed, m, bad));
      return EXIT_CORRUPT;
    }
  }
  return EXIT_OK;
}

/* Runs messages [first, last) on an established comm: message m goes
 * through slot m % window, posted only once the slot's previous message
 * completed (and, on the receiver, was checked), so at most window
 * requests are in flight. *bytes grows by what completed. */
static int xfer_run(struct rail_nd *nd, const struct xfer_opts *o, void *comm, int send,
                    uint8_t *arena, void *mhandle, long first, long last, double *bytes) {
  void *req[XFER_MAX_WINDOW] = {0};
  long next = first, done = first;
  uint64_t t0 = rail_nd_now_ns(), at = t0;
  int rc;

  while (done < last) {
    int progress = 0;
    /* Post into every free slot, in message order. */
    while (next < last && next - done < o->window) {
      int s = (int)(next % o->window);
      uint8_t *buf = arena + xfer_slot_off(o, s);
      size_t len = xfer_msg_size(o, next);
      void *r = NULL;
      xfer_prepare(o, send, next, buf, send ? len : xfer_slot_bytes(o, s));
      if (send)
        rc = rail_nd_isend(nd, comm, buf, len, XFER_TAG, mhandle, &r);
      else
        rc = rail_nd_irecv(nd, comm, buf, xfer_slot_bytes(o, s), XFER_TAG, mhandle, &r);
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
      size_t got = 0, want = xfer_msg_size(o, done);
      rc = rail_nd_test(nd, req[s], &fin, &got);
      if (rc != ncclSuccess) {
        fprintf(stderr, "rig_xfer: test of %s %ld failed (ncclResult %d) after %.1f s\n",
                send ? "send" : "receive", done, rc, (rail_nd_now_ns() - t0) / 1e9);
        return EXIT_FAILED;
      }
      if (fin) {
        if (!send && (rc = xfer_verify(o, done, arena + xfer_slot_off(o, s), got, want)) != 0)
          return rc;
        *bytes += (double)want;
        req[s] = NULL;
        done++;
        progress = 1;
      }
    }
    if (progress) {
      at = rail_nd_now_ns();
    } else if (rail_nd_now_ns() - at > (uint64_t)o->stall_ms * 1000000ull) {
      fprintf(stderr,
              "rig_xfer: STALLED: no %s completed and no error for %d ms "
              "(%ld of %ld done, %ld posted)\n",
              send ? "send" : "receive", o->stall_ms, done, last, next);
      return EXIT_FAILED;
    }
  }
  return EXIT_OK;
}

/* The file descriptors this process holds, and its resident memory. */
static void xfer_usage(int *fds, long *rss_kb) {
  char line[256];
  FILE *f;
  DIR *d = opendir("/proc/self/fd");

  *fds = 0;
  *rss_kb = 0;
  if (d != NULL) {
    while (readdir(d) != NULL)
      (*fds)++;
    closedir(d);
  }
  f = fopen("/proc/self/status", "r");
  while (f != NULL && fgets(line, sizeof(line), f) != NULL)
    if (sscanf(line, "VmRSS: %ld kB", rss_kb) == 1) break;
  if (f != NULL) fclose(f);
}

/* One connection: set up (the handle file PATH or PATH.N), messages
 * [first, last), closed. */
static int xfer_epoch(struct rail_nd *nd, const struct xfer_opts *o, int send, int epoch,
                      uint8_t *arena, size_t arena_len, long first, long last, double *bytes) {
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {0}, path[4096];
  void *listen_comm = NULL, *comm = NULL, *mhandle = NULL;
  int rc, status = EXIT_SETUP;

  snprintf(path, sizeof(path), "%s", send ? o->connect_file : o->listen_file);
  if (o->epochs > 1) snprintf(path + strlen(path), sizeof(path) - strlen(path), ".%d", epoch);
  if (send) {
    if (xfer_read_handle(path, handle, o->setup_ms) != 0) return EXIT_SETUP;
    if (rail_nd_connect_until(nd, 0, handle, &comm, o->setup_ms) != ncclSuccess) return EXIT_SETUP;
  } else {
    if (rail_nd_listen(nd, 0, handle, &listen_comm) != ncclSuccess || listen_comm == NULL)
      return EXIT_SETUP;
    rc = xfer_write_handle(path, handle);
    if (rc == 0) rc = rail_nd_accept_until(nd, listen_comm, &comm, o->setup_ms);
    /* NCCL closes the listen comm right after accept, success or not. */
    rail_nd_close_listen(nd, listen_comm);
    if (rc != 0) return EXIT_SETUP;
  }
  if (rail_nd_reg_mr(nd, comm, arena, arena_len, &mhandle) == ncclSuccess) {
    status = xfer_run(nd, o, comm, send, arena, mhandle, first, last, bytes);
    /* After a failure NCCL still deregisters and closes (ncclCommAbort): the
     * plugin must not hang there either; the rig bounds this with timeout. */
    rail_nd_dereg_mr(nd, comm, mhandle);
  }
  if (send)
    rail_nd_close_send(nd, comm);
  else
    rail_nd_close_recv(nd, comm);
  return status;
}

/* Every epoch in turn; with --soak, the leak check between the first and
 * the last. */
static int xfer_epochs(struct rail_nd *nd, const struct xfer_opts *o, int send, uint8_t *arena,
                       size_t arena_len) {
  uint64_t t0 = rail_nd_now_ns();
  double bytes = 0, secs;
  int fds0 = 0, fds1, status = EXIT_OK;
  long rss0 = 0, rss1;

  for (int e = 0; e < o->epochs && status == EXIT_OK; e++) {
    long first = o->count * e / o->epochs, last = o->count * (e + 1) / o->epochs;
    status = xfer_epoch(nd, o, send, e, arena, arena_len, first, last, &bytes);
    if (e == 0) xfer_usage(&fds0, &rss0);
  }
  if (status != EXIT_OK) return status;
  secs = (rail_nd_now_ns() - t0) / 1e9;
  xfer_usage(&fds1, &rss1);
  printf("rig_xfer: role=%s messages=%ld connections=%d bytes=%.0f secs=%.3f MBps=%.1f "
         "fds=%d/%d rss_kb=%ld/%ld result=%s\n",
         send ? "send" : "recv", o->count, o->epochs, bytes, secs, bytes / secs / 1e6, fds0, fds1,
         rss0, rss1, send ? "sent" : "verified");
  if (o->soak && o->epochs > 1 &&
      (fds1 != fds0 || rss1 > rss0 + (long)(RAIL_XFER_RSS_SLACK >> 10))) {
    fprintf(stderr,
            "rig_xfer: LEAK: after the first connection %d fds and %ld kB resident, after the "
            "last %d fds and %ld kB\n",
            fds0, rss0, fds1, rss1);
    return EXIT_LEAK;
  }
  return EXIT_OK;
}

int main(int argc, char **argv) {
  struct xfer_opts o;
  struct rail_nd nd;
  size_t arena_len = 0;
  uint8_t *arena = NULL;
  int send, ndev = 0, status = EXIT_SETUP;
  void *dl;

  if (xfer_parse(argc, argv, &o) != 0) {
    fprintf(stderr, "usage: rig_xfer --plugin PATH (--listen FILE | --connect FILE) "
                    "[--version 8..11] [--size BYTES (x8)] [--count N] [--window 1..32] "
                    "[--seed N] [--stall-ms MS] [--setup-ms MS] [--soak --epochs N]\n");
    return EXIT_SETUP;
  }
  xfer_crc_init();
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
  arena_len = xfer_slot_off(&o, o.window);
  arena = aligned_alloc(4096, arena_len);
  if (arena == NULL) {
    fprintf(stderr, "rig_xfer: cannot allocate %zu bytes of buffers\n", arena_len);
    goto finalize;
  }
  /* Touched once, so that the buffers' memory counts from the start. */
  memset(arena, 0, arena_len);
  status = xfer_epochs(&nd, &o, send, arena, arena_len);
  free(arena);
finalize:
  rail_nd_finalize(&nd);
  fflush(stdout);
  fflush(stderr);
  /* Skip the plugin's destructors, as NCCL never unloads it mid-process. */
  _exit(status);
}
