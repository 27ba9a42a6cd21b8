/* Helpers shared by the tuner's test files (tests.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "common/param.h"
#include "plugin/abi/nccl_tuner.h"
#include "tests/unit/test.h"
#include "tests/unit/tuner/tests.h"
#include "tuner/nccl_model.h"
#include "tuner/tuner.h"

struct rail_tuner_shape tt_shape(int nodes, int gpus, int rails, double gbps) {
  struct rail_tuner_shape s = {
      .nodes = nodes,
      .ranks = nodes * gpus,
      .gpus_per_node = gpus,
      .rails = rails,
      .rail_gbps = gbps,
      .net_latency_us = 0,
      .intra = RAIL_TUNER_INTRA_NVLINK,
      .nvls = 1,
      .socket = 0,
  };
  return s;
}

double tt_cost(const struct rail_tuner_shape *s, int coll, int algo, int proto, size_t bytes,
               struct rail_tuner_cost *out) {
  struct rail_tuner_cost c;
  int rc = rail_tuner_cost(s, coll, algo, proto, bytes, 1, &c);
  CHECK_EQ_INT(rc, 0);
  if (out) *out = c;
  return rc == 0 ? c.time_us : -1;
}

void tt_nccl_table(const struct rail_tuner_shape *s, int coll, size_t bytes, int pipe_ops,
                   float t[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT]) {
  struct rail_nccl_view v;
  rail_tuner_nccl_view(s, 0.0, &v);
  rail_nccl_table(&v, coll, bytes, pipe_ops, t);
}

void tt_fill_table(float t[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT], unsigned seed) {
  for (int a = 0; a < RAIL_ALGO_COUNT; a++)
    for (int p = 0; p < RAIL_PROTO_COUNT; p++) {
      seed = seed * 1103515245u + 12345u;
      t[a][p] =
          ((seed >> 16) % 5 == 0) ? NCCL_ALGO_PROTO_IGNORE : 10.0f + (float)((seed >> 8) % 1000);
    }
}

int tt_count_zero(float t[RAIL_ALGO_COUNT][RAIL_PROTO_COUNT], int *algo, int *proto) {
  int n = 0;
  for (int a = 0; a < RAIL_ALGO_COUNT; a++)
    for (int p = 0; p < RAIL_PROTO_COUNT; p++)
      if (t[a][p] == 0.0f) {
        n++;
        *algo = a;
        *proto = p;
      }
  return n;
}

/* ---- log capture -------------------------------------------------------- */

static char logged[8][512];
int tt_nlogged, tt_nwarned;

void tt_capture_record(int warn, const char *msg) {
  snprintf(logged[tt_nlogged % 8], sizeof(logged[0]), "%s", msg);
  tt_nlogged++;
  if (warn) tt_nwarned++;
}

static void capture(int level, unsigned long flags, const char *file, int line, const char *fmt,
                    ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  tt_capture_record(level == RAIL_LOG_WARN, msg);
}

void tt_capture_start(void) {
  memset(logged, 0, sizeof(logged));
  tt_nlogged = tt_nwarned = 0;
  rail_log_set_logger(capture);
}

void tt_capture_stop(void) { rail_log_set_logger(NULL); }

int tt_count_logged(const char *needle) {
  int n = 0;
  for (int i = 0; i < 8 && i < tt_nlogged; i++)
    if (strstr(logged[i], needle) != NULL) n++;
  return n;
}

/* ---- environment and files ---------------------------------------------- */

void tt_unset_tuner_env(void) {
  unsetenv("NCCL_ALGO");
  unsetenv("NCCL_PROTO");
  unsetenv("NCCL_RAIL_TUNER");
  unsetenv("NCCL_RAIL_TUNER_FILE");
  /* a site file installed on this machine (/etc/nccl-rail) is not the test's */
  setenv("NCCL_RAIL_SITE_RULES", "", 1);
  rail_param_reload();
}

char *tt_write_temp(const char *text) {
  static char path[64];
  FILE *f;
  int fd;

  snprintf(path, sizeof(path), "/tmp/rail-tuner-XXXXXX");
  fd = mkstemp(path);
  if (fd < 0) return NULL;
  f = fdopen(fd, "w");
  if (f == NULL) {
    close(fd);
    return NULL;
  }
  fputs(text, f);
  fclose(f);
  return path;
}

const char *tt_source_path(const char *rel, char *buf, size_t len) {
  const char *src = getenv("RAIL_SOURCE_DIR");
  if (src != NULL) {
    snprintf(buf, len, "%s/%s", src, rel);
  } else {
    /* Run by hand: this file's own path (absolute in CMake builds). */
    const char *tail = strstr(__FILE__, "tests/unit/tuner/");
    snprintf(buf, len, "%.*s%s", tail ? (int)(tail - __FILE__) : 0, __FILE__, rel);
  }
  return buf;
}

/* ---- machines and contexts ---------------------------------------------- */

struct rail_topo *tt_topo_with(int ngpus, int ngroups, int nics_per_group, int mbps, int rdma) {
  struct rail_topo *t = calloc(1, sizeof(*t));
  t->ngpus = ngpus;
  t->nvlink = 1;
  t->nvswitches = 4;
  for (int g = 0; g < ngroups; g++) {
    struct rail_topo_group *grp = &t->groups[t->ngroups++];
    for (int k = 0; k < nics_per_group; k++) {
      struct rail_topo_nic *n = &t->nics[t->nnics];
      snprintf(n->name, sizeof(n->name), "eth%d", t->nnics);
      if (rdma) snprintf(n->rdma_dev, sizeof(n->rdma_dev), "mlx5_%d", t->nnics);
      snprintf(n->bus_id, sizeof(n->bus_id), "0000:%02x:00.%d", (0x10 + g) & 0xff, k & 7);
      n->speed_mbps = mbps;
      n->group = g;
      n->pci = -1;
      n->rail_id = n->plane_id = -1;
      grp->nics[grp->nnics++] = t->nnics++;
    }
    grp->speed_mbps = mbps * nics_per_group;
  }
  return t;
}

struct rail_tuner_ctx *tt_make_ctx(int nodes, int gpus, const char *rules_path) {
  struct rail_topo *topo = tt_topo_with(gpus, gpus, 1, 400000, 1);
  struct rail_tuner_env env = {
      .topo = topo, .transport = "auto", .enabled = 1, .rules_path = rules_path ? rules_path : ""};
  struct rail_tuner_ctx *ctx = NULL;
  CHECK_EQ_INT(rail_tuner_create((size_t)nodes * gpus, (size_t)nodes, &env, &ctx), 0);
  free(topo); /* the context copies what it needs */
  return ctx;
}

int tt_run_plan(const char *args, char *out, size_t len) {
  char cmd[2048];
  const char *build = getenv("RAIL_BUILD_DIR");
  FILE *p;
  size_t n;
  int status;

  if (build == NULL) return -ENOENT;
  snprintf(cmd, sizeof(cmd), "%s/nccl-rail", build);
  if (access(cmd, X_OK) != 0) return -ENOENT;
  snprintf(cmd, sizeof(cmd), "env -u NCCL_RAIL_TUNER_FILE %s/nccl-rail plan %s 2>&1", build, args);
  p = popen(cmd, "r");
  if (p == NULL) return -errno;
  n = fread(out, 1, len - 1, p);
  out[n] = '\0';
  status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
